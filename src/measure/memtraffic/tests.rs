//! Discovery over sysfs trees the tests build (layouts as the kernel publishes them:
//! arch/x86/events/intel/uncore_snbep.c and uncore_snb.c, arch/x86/events/amd/uncore.c,
//! Documentation/filesystems/resctrl.rst), the probe over resctrl and a VM, and the sums.

use super::discover::{discover, Backend, Counts, Discovery};
use super::*;
use std::time::Duration;

/// A fake filesystem root.
struct Tree(tempfile::TempDir);

impl Tree {
    fn new() -> Tree {
        Tree(tempfile::tempdir().unwrap())
    }

    fn root(&self) -> &Path {
        self.0.path()
    }

    fn file(&self, rel: &str, text: &str) -> &Tree {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("{text}\n")).unwrap();
        self
    }

    /// A PMU directory: type, cpumask, format/* and events/* (name, text) where `.scale` and
    /// `.unit` are events of their own, as in sysfs.
    fn pmu(
        &self,
        name: &str,
        pmu_type: u32,
        cpumask: &str,
        formats: &[(&str, &str)],
        events: &[(&str, &str)],
    ) -> &Tree {
        let dir = format!("sys/bus/event_source/devices/{name}");
        self.file(&format!("{dir}/type"), &pmu_type.to_string());
        if !cpumask.is_empty() {
            self.file(&format!("{dir}/cpumask"), cpumask);
        }
        for (term, f) in formats {
            self.file(&format!("{dir}/format/{term}"), f);
        }
        for (event, text) in events {
            self.file(&format!("{dir}/events/{event}"), text);
        }
        self
    }

    fn cpu_flags(&self, flags: &str) -> &Tree {
        self.file(
            "proc/cpuinfo",
            &format!("processor\t: 0\nmodel name\t: test\nflags\t\t: fpu tsc {flags}\n\nprocessor\t: 1\nflags\t\t: fpu tsc {flags}"),
        )
    }

    /// The PMUs every x86 machine has, even a VM without a PMU (as on this one).
    fn core_pmus(&self) -> &Tree {
        for (name, t) in [
            ("software", 1),
            ("tracepoint", 2),
            ("breakpoint", 5),
            ("msr", 9),
            ("uprobe", 8),
        ] {
            self.pmu(name, t, "", &[], &[]);
        }
        self
    }
}

const INTEL_FORMATS: &[(&str, &str)] = &[
    ("event", "config:0-7"),
    ("umask", "config:8-15"),
    ("edge", "config:18"),
    ("inv", "config:23"),
    ("thresh", "config:24-31"),
];
const FREE_RUNNING_FORMATS: &[(&str, &str)] = &[("event", "config:0-7"), ("umask", "config:8-15")];

/// A two-socket Skylake-SP: six uncore_imc_N per socket box (cpumask one CPU per socket),
/// CAS counts of 64 B expressed as 6.103515625e-5 MiB; IIO free-running bandwidth counters.
fn intel_server() -> Tree {
    let t = Tree::new();
    t.core_pmus().cpu_flags("pdpe1gb cqm_mbm_total");
    t.pmu("cpu", 4, "", &[("event", "config:0-7")], &[]);
    for i in 0..6 {
        t.pmu(
            &format!("uncore_imc_{i}"),
            20 + i,
            "0,28",
            INTEL_FORMATS,
            &[
                ("clockticks", "event=0x00,umask=0x00"),
                ("cas_count_read", "event=0x04,umask=0x03"),
                ("cas_count_read.scale", "6.103515625e-5"),
                ("cas_count_read.unit", "MiB"),
                ("cas_count_write", "event=0x04,umask=0x0c"),
                ("cas_count_write.scale", "6.103515625e-5"),
                ("cas_count_write.unit", "MiB"),
            ],
        );
    }
    t.pmu("uncore_cha_0", 40, "0,28", INTEL_FORMATS, &[]);
    for i in 0..2 {
        let mut events = vec![("ioclk".to_string(), "event=0xff,umask=0x10".to_string())];
        for port in 0..4 {
            events.push((
                format!("bw_in_port{port}"),
                format!("event=0xff,umask={:#x}", 0x20 + port),
            ));
            events.push((format!("bw_in_port{port}.scale"), "3.814697266e-6".into()));
            events.push((format!("bw_in_port{port}.unit"), "MiB".into()));
        }
        let events: Vec<(&str, &str)> = events.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        t.pmu(
            &format!("uncore_iio_free_running_{i}"),
            50 + i,
            "0,28",
            FREE_RUNNING_FORMATS,
            &events,
        );
    }
    t
}

fn perf_events(d: &Discovery) -> (&'static str, &Vec<discover::ResolvedEvent>) {
    match &d.memory {
        Ok(Backend::Perf { family, events }) => (family, events),
        other => panic!("expected perf counters, got {other:?}"),
    }
}

#[test]
fn an_intel_server_sums_cas_counts_over_every_imc_and_socket() {
    let t = intel_server();
    let d = discover(t.root());
    assert!(!d.virtual_machine);
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let (family, events) = perf_events(&d);
    assert_eq!(family, "Intel IMC");
    assert_eq!(events.len(), 12, "read and write on each of 6 IMCs");
    for (i, e) in events.iter().enumerate() {
        let imc = i / 2;
        assert_eq!(e.pmu, format!("uncore_imc_{imc}"));
        // The dynamic type is read, never assumed.
        assert_eq!(e.pmu_type, 20 + imc as u32);
        assert_eq!(e.cpus, vec![0, 28]);
        assert_eq!(e.bytes_per_count, 64.0, "6.103515625e-5 MiB is one 64-byte line");
    }
    assert_eq!(
        (events[0].event.as_str(), events[0].counts),
        ("cas_count_read", Counts::Read)
    );
    assert_eq!(events[0].encoded.config, 0x0304);
    assert_eq!(
        (events[1].event.as_str(), events[1].counts),
        ("cas_count_write", Counts::Write)
    );
    assert_eq!(events[1].encoded.config, 0x0c04);
    // uncore_imc does not take uncore_cha or the IIO's free-running PMUs.
    assert!(events.iter().all(|e| e.pmu.starts_with("uncore_imc_")));

    let io = d.io.as_ref().unwrap();
    assert_eq!(io.len(), 8, "4 ports x 2 IIO stacks");
    assert!(io
        .iter()
        .all(|e| e.counts == Counts::PcieIn && (e.bytes_per_count - 4.0).abs() < 1e-6));
    assert_eq!(io[1].encoded.config, 0x21ff);

    let lines = describe(&d);
    assert!(
        lines[0].starts_with("DRAM (Intel IMC): cas_count_read on uncore_imc_0 uncore_imc_1"),
        "{lines:?}"
    );
    assert!(lines[0].ends_with("(64 B per count, cpus 0,28)"), "{lines:?}");
}

#[test]
fn free_running_imc_counters_are_preferred_to_cas_counts() {
    // Ice Lake server: both exist; the free-running ones are named read/write.
    let t = Tree::new();
    t.core_pmus().cpu_flags("");
    for i in 0..2 {
        t.pmu(
            &format!("uncore_imc_{i}"),
            30 + i,
            "0",
            INTEL_FORMATS,
            &[
                ("cas_count_read", "event=0x04,umask=0x0f"),
                ("cas_count_read.scale", "6.103515625e-5"),
                ("cas_count_read.unit", "MiB"),
                ("cas_count_write", "event=0x04,umask=0x30"),
                ("cas_count_write.scale", "6.103515625e-5"),
                ("cas_count_write.unit", "MiB"),
            ],
        );
        t.pmu(
            &format!("uncore_imc_free_running_{i}"),
            40 + i,
            "0",
            FREE_RUNNING_FORMATS,
            &[
                ("dclk", "event=0xff,umask=0x10"),
                ("read", "event=0xff,umask=0x20"),
                ("read.scale", "6.103515625e-5"),
                ("read.unit", "MiB"),
                ("write", "event=0xff,umask=0x21"),
                ("write.scale", "6.103515625e-5"),
                ("write.unit", "MiB"),
            ],
        );
    }
    // A free-running PMU whose events do not resolve is passed over, and said so.
    t.pmu(
        "uncore_imc_free_running_2",
        42,
        "0",
        FREE_RUNNING_FORMATS,
        &[("dclk", "event=0xff,umask=0x10")],
    );
    let d = discover(t.root());
    let (family, events) = perf_events(&d);
    assert_eq!(family, "Intel IMC free-running");
    assert_eq!(
        d.problems,
        vec!["uncore_imc_free_running_2: no events data_read/data_write or read/write"]
    );
    assert_eq!(
        describe(&d).last().unwrap(),
        "skipped: uncore_imc_free_running_2: no events data_read/data_write or read/write"
    );
    let names: Vec<(&str, &str)> = events.iter().map(|e| (e.pmu.as_str(), e.event.as_str())).collect();
    assert_eq!(
        names,
        vec![
            ("uncore_imc_free_running_0", "read"),
            ("uncore_imc_free_running_0", "write"),
            ("uncore_imc_free_running_1", "read"),
            ("uncore_imc_free_running_1", "write"),
        ]
    );
    assert_eq!(events[1].encoded.config, 0x21ff);
    assert_eq!(events[2].pmu_type, 41);

    // A client part (Tiger Lake on): data_read/data_write.
    let t = Tree::new();
    t.core_pmus().cpu_flags("").pmu(
        "uncore_imc_free_running_0",
        17,
        "0",
        FREE_RUNNING_FORMATS,
        &[
            ("data_read", "event=0xff,umask=0x20"),
            ("data_read.scale", "6.103515625e-5"),
            ("data_read.unit", "MiB"),
            ("data_write", "event=0xff,umask=0x30"),
            ("data_write.scale", "6.103515625e-5"),
            ("data_write.unit", "MiB"),
        ],
    );
    let d = discover(t.root());
    let (_, events) = perf_events(&d);
    assert_eq!(events[1].event, "data_write");
    assert_eq!(events[1].encoded.config, 0x30ff);
    // No IIO on a client: the reason says what would have it.
    assert!(d.io.unwrap_err().contains("uncore_iio_free_running"));
}

/// Zen 3: one amd_df per socket-less system (cpumask one CPU per package), no events in
/// sysfs; the event field is split over config bits 0-7, 32-35 and 59-60.
#[test]
fn an_amd_zen3_counts_dram_channels_through_the_data_fabric() {
    let t = Tree::new();
    t.core_pmus().cpu_flags("");
    t.pmu(
        "amd_df",
        11,
        "0,64",
        &[("event", "config:0-7,32-35,59-60"), ("umask", "config:8-15")],
        &[],
    );
    t.pmu(
        "amd_l3",
        12,
        "0,8,16",
        &[("event", "config:0-7"), ("umask", "config:8-15")],
        &[],
    );
    let d = discover(t.root());
    let (family, events) = perf_events(&d);
    assert_eq!(family, "AMD data fabric");
    assert_eq!(events.len(), 8);
    assert!(events
        .iter()
        .all(|e| e.counts == Counts::ReadWrite && e.bytes_per_count == 64.0));
    assert_eq!(events[0].encoded.config, 0x3807);
    assert_eq!(events[3].encoded.config, 0x38c7);
    assert_eq!(events[4].event, "dram_channel_data_controller_4");
    assert_eq!(
        events[4].encoded.config,
        0x3807 | 1 << 32,
        "event 0x107: bit 8 lands on config bit 32"
    );
    assert_eq!(events[7].encoded.config, 0x38c7 | 1 << 32);
    assert_eq!(events[0].cpus, vec![0, 64]);
    // Totals: reads and writes are not split here.
    let parts: Vec<(Counts, Result<f64, String>)> = (0..8).map(|i| (Counts::ReadWrite, Ok(64.0 * i as f64))).collect();
    let t = totals(&parts, "together");
    assert_eq!(t.total, Ok(64.0 * 28.0));
    assert_eq!(t.read, Err("together".to_string()));
    assert_eq!(t.write, Err("together".to_string()));
}

/// Zen 4: amd_umc_N per memory controller (Linux 6.8+), event + rdwrmask, CAS commands of
/// 64 B; the PerfMonV2 data fabric next to it is not used.
#[test]
fn an_amd_zen4_counts_cas_commands_of_every_umc() {
    let t = Tree::new();
    t.core_pmus().cpu_flags("");
    let df_v2 = [("event", "config:0-7,32-37"), ("umask", "config:8-15,24-27")];
    t.pmu("amd_df", 11, "0", &df_v2, &[]);
    for i in 0..4 {
        t.pmu(
            &format!("amd_umc_{i}"),
            13 + i,
            "0",
            &[("event", "config:0-7"), ("rdwrmask", "config:8-9")],
            &[],
        );
    }
    let d = discover(t.root());
    let (family, events) = perf_events(&d);
    assert_eq!(family, "AMD UMC");
    assert_eq!(events.len(), 8);
    assert_eq!(
        (events[0].event.as_str(), events[0].encoded.config),
        ("umc_cas_cmd.rd", 0x10a)
    );
    assert_eq!(
        (events[1].event.as_str(), events[1].encoded.config),
        ("umc_cas_cmd.wr", 0x20a)
    );
    assert_eq!(events[7].pmu_type, 16);

    // The same CPU on a kernel without amd_umc: the data fabric is PerfMonV2, whose Zen 2/3
    // encodings would count something else; refused with the reason.
    let t = Tree::new();
    t.core_pmus().cpu_flags("");
    t.pmu("amd_df", 11, "0", &df_v2, &[]);
    t.file("proc/filesystems", "nodev\tsysfs\nnodev\tproc");
    let d = discover(t.root());
    let why = d.memory.unwrap_err();
    assert!(
        why.starts_with("uncore memory PMUs found but unusable: amd_df: a PerfMonV2"),
        "{why}"
    );
    assert!(why.contains("amd_umc_*"), "{why}");
    assert!(why.contains("no resctrl filesystem"), "{why}");
}

#[test]
fn an_event_string_with_a_term_the_format_lacks_is_a_problem_not_a_guess() {
    let t = Tree::new();
    t.core_pmus().cpu_flags("hypervisor");
    t.pmu(
        "uncore_imc_0",
        20,
        "0",
        INTEL_FORMATS,
        &[
            ("cas_count_read", "event=0x04,umask=0x03,ch_mask=0x1"),
            ("cas_count_read.scale", "6.103515625e-5"),
            ("cas_count_read.unit", "MiB"),
            ("cas_count_write", "event=0x04,umask=0x0c"),
            ("cas_count_write.scale", "6.103515625e-5"),
            ("cas_count_write.unit", "MiB"),
        ],
    );
    let d = discover(t.root());
    assert_eq!(d.problems.len(), 1);
    assert!(d.problems[0].contains("unknown term 'ch_mask'"), "{:?}", d.problems);
    // Found but unusable says so, even on a VM.
    assert!(d
        .memory
        .unwrap_err()
        .starts_with("uncore memory PMUs found but unusable"));
}

/// What this machine looks like: a VM whose event_source has no hardware PMU at all.
#[test]
fn a_vm_without_pmus_says_so_in_the_exact_words() {
    let t = Tree::new();
    t.core_pmus().cpu_flags("hypervisor");
    let d = discover(t.root());
    assert!(d.virtual_machine);
    assert_eq!(d.devices, vec!["breakpoint", "msr", "software", "tracepoint", "uprobe"]);
    assert_eq!(d.memory, Err(VM_REASON.to_string()));
    assert_eq!(VM_REASON, "no uncore memory counters on this machine (virtual machine)");
    assert!(d.io.as_ref().unwrap_err().contains("virtual machine"));
    assert_eq!(describe(&d)[0], format!("DRAM: unavailable: {VM_REASON}"));

    // The probe over it: every figure unavailable with the reason, nothing opened or read.
    let mut probe = MemoryTraffic::new(&d);
    probe.open();
    let metrics = probe.close();
    for name in [DRAM_READ_BYTES, DRAM_WRITE_BYTES, DRAM_BYTES, LLC_IO_MISS_BYTES] {
        let m = metrics.iter().find(|m| m.name == name).unwrap();
        assert_eq!(m.value, None, "{name}");
        assert_eq!(m.source, Source::Unavailable(VM_REASON.into()), "{name}");
        assert_eq!(m.role, Role::System);
    }
    let cost = metrics.iter().find(|m| m.name == PROBE_READ_NS).unwrap();
    assert_eq!(
        cost.source.to_string(),
        format!("unavailable: nothing to read: {VM_REASON}")
    );
    let ratio = per_payload_byte(&metrics, Ok(1e6));
    assert_eq!(
        (ratio.value, ratio.source),
        (None, Source::Unavailable(VM_REASON.into()))
    );

    // Bare metal without uncore PMUs: which directories are missing, and resctrl's state.
    let t = Tree::new();
    t.core_pmus().cpu_flags("cqm_mbm_total");
    t.file("proc/filesystems", "nodev\tsysfs\nnodev\tresctrl");
    let why = discover(t.root()).memory.unwrap_err();
    assert!(
        why.contains("no uncore_imc_*, uncore_imc_free_running_*, amd_umc_* or amd_df PMU"),
        "{why}"
    );
    assert!(
        why.contains("resctrl is not mounted (as root: mount -t resctrl"),
        "{why}"
    );
}

#[test]
fn resctrl_mbm_counts_every_group_and_domain_over_the_window() {
    let t = Tree::new();
    t.core_pmus().cpu_flags("hypervisor cqm_mbm_total");
    t.file(
        "sys/fs/resctrl/info/L3_MON/mon_features",
        "llc_occupancy\nmbm_total_bytes",
    );
    t.file("sys/fs/resctrl/mon_data/mon_L3_00/mbm_total_bytes", "1000");
    t.file("sys/fs/resctrl/mon_data/mon_L3_01/mbm_total_bytes", "2000");
    // A MON group of the root: already inside the root's sums.
    t.file("sys/fs/resctrl/mon_groups/m1/mon_data/mon_L3_00/mbm_total_bytes", "500");
    // A CTRL_MON group: its own RMIDs, added.
    t.file("sys/fs/resctrl/g1/mon_data/mon_L3_00/mbm_total_bytes", "10");
    t.file("sys/fs/resctrl/g1/mon_data/mon_L3_01/mbm_total_bytes", "20");
    let d = discover(t.root());
    let Ok(Backend::Resctrl { files }) = &d.memory else {
        panic!("{:?}", d.memory)
    };
    assert_eq!(files.len(), 4, "{files:?}");
    assert!(files.iter().all(|f| !f.to_string_lossy().contains("mon_groups")));

    let mut probe = MemoryTraffic::new(&d);
    probe.open();
    t.file("sys/fs/resctrl/mon_data/mon_L3_00/mbm_total_bytes", "1640");
    t.file("sys/fs/resctrl/g1/mon_data/mon_L3_01/mbm_total_bytes", "84");
    let metrics = probe.close();
    let get = |n: &str| metrics.iter().find(|m| m.name == n).unwrap();
    assert_eq!(get(DRAM_BYTES).value, Some(640.0 + 64.0));
    assert_eq!(get(DRAM_BYTES).source, Source::Kernel);
    assert!(get(DRAM_READ_BYTES)
        .source
        .to_string()
        .contains("reads and writes together"));
    assert_eq!(get(PROBE_READ_NS).source, Source::Tool);
    assert!(get(LLC_IO_MISS_BYTES).source.to_string().contains("DDIO"));
    let ratio = per_payload_byte(&metrics, Ok(352.0));
    assert_eq!((ratio.value, ratio.source), (Some(2.0), Source::Kernel));

    // A domain that cannot count this window says so.
    probe.open();
    t.file("sys/fs/resctrl/mon_data/mon_L3_01/mbm_total_bytes", "Unavailable");
    let metrics = probe.close();
    let total = metrics.iter().find(|m| m.name == DRAM_BYTES).unwrap();
    assert_eq!(total.value, None);
    assert!(
        total.source.to_string().contains("reads 'Unavailable'"),
        "{}",
        total.source
    );
}

/// The whole perf path of the probe (open on every CPU of the cpumask, enable at window
/// open, disable, read, scale, sum by kind) with the software PMU's cpu-clock standing in
/// for an uncore event, since this machine has none: the "bytes" are nanoseconds here.
#[test]
fn the_probe_opens_enables_reads_and_sums_real_counters() {
    let Some(pmu_type) = procfs::read_i64("/sys/bus/event_source/devices/software/type") else {
        return;
    };
    let stand_in = |counts, event: &str| discover::ResolvedEvent {
        pmu: "software".into(),
        event: event.into(),
        counts,
        pmu_type: pmu_type as u32,
        encoded: format::Encoded::default(),
        bytes_per_count: 1.0,
        cpus: vec![0],
    };
    let found = Discovery {
        devices: vec!["software".into()],
        virtual_machine: false,
        memory: Ok(Backend::Perf {
            family: "stand-in",
            events: vec![
                stand_in(Counts::Read, "cpu-clock"),
                stand_in(Counts::Write, "cpu-clock"),
            ],
        }),
        io: Err("none".into()),
        problems: vec![],
    };
    let mut probe = MemoryTraffic::new(&found);
    if let Err(why) = &probe.memory {
        assert!(why.contains("not permitted") && why.contains("CAP_PERFMON"), "{why}");
        return;
    }
    probe.open();
    std::thread::sleep(Duration::from_millis(20));
    let metrics = probe.close();
    let get = |n: &str| metrics.iter().find(|m| m.name == n).unwrap();
    let (r, w, total) = (
        get(DRAM_READ_BYTES).value.unwrap(),
        get(DRAM_WRITE_BYTES).value.unwrap(),
        get(DRAM_BYTES).value.unwrap(),
    );
    assert!(r > 1e6 && w > 1e6, "cpu 0 was counted for ~20 ms: {r} {w}");
    assert_eq!(total, r + w);
    assert_eq!(get(DRAM_BYTES).source, Source::Pmu);
    assert_eq!(get(PCIE_IN_BYTES).source, Source::Unavailable("none".into()));
    let cost = get(PROBE_READ_NS);
    assert_eq!(cost.source, Source::Tool);
    assert!(cost.value.unwrap() > 0.0);
}

#[test]
fn multiplexed_counts_are_scaled_and_unscheduled_ones_have_no_value() {
    let ms = Duration::from_millis;
    let half = Reading {
        count: 100,
        enabled: ms(10),
        running: ms(5),
    };
    assert_eq!(scaled_bytes(&half, 64.0), Ok(12800.0));
    let never = Reading {
        count: 0,
        enabled: ms(10),
        running: ms(0),
    };
    assert!(scaled_bytes(&never, 64.0).unwrap_err().contains("never ran"));
    let parts = vec![
        (Counts::Read, Ok(100.0)),
        (Counts::Write, Ok(50.0)),
        (Counts::Read, Ok(1.0)),
        (Counts::Write, Err("w".to_string())),
    ];
    let t = totals(&parts, "together");
    assert_eq!(t.read, Ok(101.0));
    assert_eq!(t.write, Err("w".into()));
    assert_eq!(t.total, Err("w".into()), "a total missing a part is no total");
}

#[test]
fn the_ratio_per_payload_byte_follows_dram_bytes() {
    let dram = Metric::new(DRAM_BYTES, Role::System, 3000.0, "B", Source::Pmu);
    let m = per_payload_byte(std::slice::from_ref(&dram), Ok(1000.0));
    assert_eq!(
        (m.name.as_str(), m.value, m.unit.as_str()),
        (DRAM_BYTES_PER_PAYLOAD_BYTE, Some(3.0), "B/B")
    );
    assert_eq!(m.source, Source::Pmu);
    let m = per_payload_byte(std::slice::from_ref(&dram), Ok(0.0));
    assert_eq!(m.value, None, "nothing moved: no ratio");
    assert!(per_payload_byte(&[], Ok(1.0))
        .source
        .to_string()
        .contains("no memory-traffic probe"));
    let m = per_payload_byte(&[dram], Err("no receiver measured".into()));
    assert_eq!(m.source, Source::Unavailable("no receiver measured".into()));
}

/// The unavailable path on the machine the tests run on (a VM here): the probe pushed as a
/// workload pushes it gives every figure with a reason, and on a VM without PMUs the exact one.
#[test]
fn this_machine_gives_figures_or_the_reason() {
    use crate::measure::window::Window;
    let here = discover(Path::new("/"));
    let mut system = SystemProbes::default();
    push_memory_traffic_probe(&mut system);
    let window = Window::new();
    window.open(&mut system);
    std::thread::sleep(Duration::from_millis(5));
    let metrics = window.close(&mut system);
    let dram = metrics
        .iter()
        .find(|m| m.name == DRAM_BYTES)
        .expect("dram_bytes is always there");
    match (&here.memory, &dram.source) {
        (Err(why), Source::Unavailable(reason)) => assert_eq!(why, reason),
        (Ok(_), Source::Unavailable(reason)) => assert!(!reason.is_empty()),
        (Ok(_), _) => assert!(dram.value.is_some()),
        (Err(why), other) => panic!("discovery said {why} but the probe gave {other}"),
    }
    let no_uncore = !here
        .devices
        .iter()
        .any(|d| d.starts_with("uncore_imc") || d.starts_with("amd_umc") || d == "amd_df");
    if here.virtual_machine && no_uncore && !Path::new("/sys/fs/resctrl/info").exists() {
        assert_eq!(dram.source, Source::Unavailable(VM_REASON.into()));
    }
}

#[test]
fn the_report_note_says_what_the_figure_would_show_and_how_to_get_it() {
    let note = unavailable_note(VM_REASON);
    assert!(note.starts_with("Memory traffic not measured here (no uncore memory counters on this machine (virtual machine)): dram_read_bytes"));
    for needle in [
        "bare metal",
        "CAP_PERFMON",
        "perf_event_paranoid <= 0",
        "DRAM bytes per payload byte",
    ] {
        assert!(note.contains(needle), "{needle}: {note}");
    }
}
