//! Which memory-traffic counters this machine has, found the way perf finds them: every PMU
//! under `<root>/sys/bus/event_source/devices/<pmu>/` with its `type`, `format/*`,
//! `events/*` (+ `.scale`, `.unit`) and `cpumask`; resctrl's MBM files under
//! `<root>/sys/fs/resctrl`; the CPU's `hypervisor` flag in `<root>/proc/cpuinfo`. A pure
//! function of the tree under `root` ("/" on a live machine, a temporary tree in tests):
//! no type number and no config bit is assumed, only event strings that are parsed against
//! the PMU's own format files.

use super::format::{encode, parse_format, Encoded, FieldFormat};
use crate::sys::procfs::parse_cpu_list;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What one event counts, in bytes once scaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counts {
    /// Bytes read from DRAM.
    Read,
    /// Bytes written to DRAM.
    Write,
    /// Bytes moved to or from DRAM, reads and writes together.
    ReadWrite,
    /// Bytes PCIe devices sent into the CPU (inbound I/O).
    PcieIn,
}

/// An event ready for perf_event_open on each CPU of `cpus`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedEvent {
    pub pmu: String,
    pub event: String,
    pub counts: Counts,
    pub pmu_type: u32,
    pub encoded: Encoded,
    /// Bytes per count: `.scale` x `.unit` from sysfs, or the line size perf's table states.
    pub bytes_per_count: f64,
    /// The CPUs the PMU counts on (its `cpumask`: one per socket or die).
    pub cpus: Vec<usize>,
}

/// Where memory traffic can be counted on this machine.
#[derive(Debug, Clone, PartialEq)]
pub enum Backend {
    /// Uncore PMU events through perf_event_open, summed over every instance.
    Perf {
        family: &'static str,
        events: Vec<ResolvedEvent>,
    },
    /// resctrl MBM: `mbm_total_bytes` of every monitoring group (the root group and every
    /// CTRL_MON group, whose files include their MON groups) and every L3 domain.
    Resctrl { files: Vec<PathBuf> },
}

/// Everything discovery found, and why not where it found nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovery {
    /// Every PMU under /sys/bus/event_source/devices, by name.
    pub devices: Vec<String>,
    /// Running under a hypervisor (the `hypervisor` CPU flag).
    pub virtual_machine: bool,
    /// The DRAM traffic counters, or why there are none.
    pub memory: Result<Backend, String>,
    /// The inbound PCIe traffic counters, or why there are none.
    pub io: Result<Vec<ResolvedEvent>, String>,
    /// Memory PMUs present whose events could not be resolved, with the reason.
    pub problems: Vec<String>,
}

/// The exact reason when a virtual machine exposes no memory counters.
pub const VM_REASON: &str = "no uncore memory counters on this machine (virtual machine)";

const DEVICES: &str = "sys/bus/event_source/devices";
const RESCTRL: &str = "sys/fs/resctrl";

/// What a PMU directory says about itself.
#[derive(Debug, Clone)]
struct Pmu {
    name: String,
    pmu_type: u32,
    cpus: Result<Vec<usize>, String>,
    formats: Result<BTreeMap<String, FieldFormat>, String>,
    dir: PathBuf,
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn read_pmu(dir: &Path, name: &str) -> Result<Pmu, String> {
    let pmu_type = read(&dir.join("type"))
        .and_then(|t| t.parse::<u32>().ok())
        .ok_or_else(|| format!("{name}: no readable type"))?;
    let cpus = match read(&dir.join("cpumask")) {
        Some(text) => match parse_cpu_list(&text) {
            Some(cpus) if !cpus.is_empty() => Ok(cpus),
            _ => Err(format!("{name}: cpumask '{text}' lists no CPU")),
        },
        None => Err(format!("{name}: no cpumask (an uncore PMU names the CPUs to count on)")),
    };
    let formats = match std::fs::read_dir(dir.join("format")) {
        Ok(entries) => {
            let mut map = BTreeMap::new();
            for entry in entries.flatten() {
                let term = entry.file_name().to_string_lossy().to_string();
                let text = read(&entry.path()).unwrap_or_default();
                match parse_format(&text) {
                    Ok(f) => {
                        map.insert(term, f);
                    }
                    Err(e) => return Err(format!("{name}: format/{term}: {e}")),
                }
            }
            Ok(map)
        }
        Err(_) => Err(format!("{name}: no format directory")),
    };
    Ok(Pmu {
        name: name.to_string(),
        pmu_type,
        cpus,
        formats,
        dir: dir.to_path_buf(),
    })
}

/// Bytes in one `.unit` (what perf prints after scaling).
fn unit_bytes(unit: &str) -> Option<f64> {
    Some(match unit {
        "B" | "Bytes" | "bytes" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    })
}

/// Resolve an event published in the PMU's `events/` directory.
fn sysfs_event(pmu: &Pmu, event: &str, counts: Counts) -> Result<ResolvedEvent, String> {
    let name = &pmu.name;
    let text = read(&pmu.dir.join("events").join(event)).ok_or_else(|| format!("{name}: no events/{event}"))?;
    let scale = match read(&pmu.dir.join("events").join(format!("{event}.scale"))) {
        Some(s) => s
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or_else(|| format!("{name}: events/{event}.scale '{s}' is not a positive number"))?,
        None => 1.0,
    };
    let unit = read(&pmu.dir.join("events").join(format!("{event}.unit")))
        .ok_or_else(|| format!("{name}: events/{event} has no .unit, so its counts are not bytes"))?;
    let per_unit =
        unit_bytes(&unit).ok_or_else(|| format!("{name}: events/{event}.unit '{unit}' is not a byte unit"))?;
    resolved(pmu, event, &text, counts, scale * per_unit)
}

fn resolved(pmu: &Pmu, event: &str, text: &str, counts: Counts, bytes_per_count: f64) -> Result<ResolvedEvent, String> {
    let name = &pmu.name;
    let formats = pmu.formats.as_ref().map_err(Clone::clone)?;
    let encoded = encode(text, formats).map_err(|e| format!("{name}: {event}: {e}"))?;
    Ok(ResolvedEvent {
        pmu: name.clone(),
        event: event.to_string(),
        counts,
        pmu_type: pmu.pmu_type,
        encoded,
        bytes_per_count,
        cpus: pmu.cpus.clone()?,
    })
}

/// `base` itself or `base_<digits>` (so `uncore_imc` does not take `uncore_imc_free_running_0`).
fn instance_of(name: &str, base: &str) -> bool {
    name == base
        || name
            .strip_prefix(base)
            .and_then(|rest| rest.strip_prefix('_'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A family of memory-controller PMUs and how to read DRAM traffic from it.
struct Family {
    name: &'static str,
    base: &'static str,
    resolve: fn(&Pmu) -> Result<Vec<ResolvedEvent>, String>,
}

/// The first of several event-name pairs (read, write) the PMU publishes.
fn sysfs_pair(pmu: &Pmu, pairs: &[(&str, &str)]) -> Result<Vec<ResolvedEvent>, String> {
    let events = pmu.dir.join("events");
    let Some((r, w)) = pairs.iter().find(|(r, _)| events.join(r).exists()) else {
        let wanted: Vec<String> = pairs.iter().map(|(r, w)| format!("{r}/{w}")).collect();
        return Err(format!("{}: no events {}", pmu.name, wanted.join(" or ")));
    };
    Ok(vec![
        sysfs_event(pmu, r, Counts::Read)?,
        sysfs_event(pmu, w, Counts::Write)?,
    ])
}

fn intel_free_running(pmu: &Pmu) -> Result<Vec<ResolvedEvent>, String> {
    // Client parts (Tiger Lake on) publish data_read/data_write, Ice Lake and Snow Ridge
    // servers read/write; Sapphire Rapids' free-running IMC has no data counters at all.
    sysfs_pair(pmu, &[("data_read", "data_write"), ("read", "write")])
}

fn intel_imc(pmu: &Pmu) -> Result<Vec<ResolvedEvent>, String> {
    // Servers: CAS commands per channel; older clients: data_reads/data_writes.
    sysfs_pair(
        pmu,
        &[("cas_count_read", "cas_count_write"), ("data_reads", "data_writes")],
    )
}

/// One CAS command moves one 64-byte line (perf's amdzen4 memory-controller table; the
/// kernel publishes no events for amd_umc).
fn amd_umc(pmu: &Pmu) -> Result<Vec<ResolvedEvent>, String> {
    Ok(vec![
        resolved(pmu, "umc_cas_cmd.rd", "event=0x0a,rdwrmask=0x1", Counts::Read, 64.0)?,
        resolved(pmu, "umc_cas_cmd.wr", "event=0x0a,rdwrmask=0x2", Counts::Write, 64.0)?,
    ])
}

/// Zen 1-3 data fabric: requests with data (64 B) to each of 8 DRAM channel controllers,
/// reads and writes together (perf's amdzen3 data-fabric table; the kernel publishes no
/// events for amd_df). From PerfMonV2 (Zen 4) the fabric's events differ: `umask` then
/// reaches config bits 24-27, and the encodings below would count something else.
fn amd_df(pmu: &Pmu) -> Result<Vec<ResolvedEvent>, String> {
    let formats = pmu.formats.as_ref().map_err(Clone::clone)?;
    if formats.get("umask").is_some_and(|f| f.bits.iter().any(|b| *b >= 16)) {
        return Err(format!(
            "{}: a PerfMonV2 data fabric (Zen 4 or later), whose DRAM events are not the Zen 2/3 ones; its memory controllers are the amd_umc_* PMUs (Linux 6.8+)",
            pmu.name
        ));
    }
    (0..8u64)
        .map(|channel| {
            let event = format!("event={:#x},umask=0x38", 0x07 + 0x40 * channel);
            resolved(
                pmu,
                &format!("dram_channel_data_controller_{channel}"),
                &event,
                Counts::ReadWrite,
                64.0,
            )
        })
        .collect()
}

/// In order of preference: free-running counters cost no programmable counter and never
/// multiplex; then per-channel CAS counts; then AMD.
const FAMILIES: &[Family] = &[
    Family {
        name: "Intel IMC free-running",
        base: "uncore_imc_free_running",
        resolve: intel_free_running,
    },
    Family {
        name: "Intel IMC",
        base: "uncore_imc",
        resolve: intel_imc,
    },
    Family {
        name: "AMD UMC",
        base: "amd_umc",
        resolve: amd_umc,
    },
    Family {
        name: "AMD data fabric",
        base: "amd_df",
        resolve: amd_df,
    },
];

fn list_pmus(root: &Path) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(root.join(DEVICES))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| (e.file_name().to_string_lossy().to_string(), e.path()))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn flag(root: &Path, name: &str) -> bool {
    read(&root.join("proc/cpuinfo")).is_some_and(|text| {
        text.lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|f| f == name))
    })
}

/// resctrl's MBM files, or why there are none.
fn resctrl(root: &Path) -> Result<Vec<PathBuf>, String> {
    let base = root.join(RESCTRL);
    if !base.join("info").is_dir() {
        let mountable = read(&root.join("proc/filesystems")).is_some_and(|t| t.lines().any(|l| l.ends_with("resctrl")));
        return Err(if !mountable {
            "the kernel has no resctrl filesystem (CONFIG_X86_CPU_RESCTRL)".to_string()
        } else if flag(root, "cqm_mbm_total") {
            "resctrl is not mounted (as root: mount -t resctrl resctrl /sys/fs/resctrl)".to_string()
        } else {
            "the CPU has no memory bandwidth monitoring (no cqm_mbm_total flag)".to_string()
        });
    }
    // The root group and every CTRL_MON group (its files include its MON groups).
    let mut groups = vec![base.clone()];
    if let Ok(entries) = std::fs::read_dir(&base) {
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| !matches!(e.file_name().to_str(), Some("info" | "mon_groups" | "mon_data")))
            .map(|e| e.path())
            .filter(|p| p.join("mon_data").is_dir())
            .collect();
        dirs.sort();
        groups.extend(dirs);
    }
    let mut files = Vec::new();
    for group in groups {
        let Ok(domains) = std::fs::read_dir(group.join("mon_data")) else {
            continue;
        };
        let mut found: Vec<PathBuf> = domains
            .flatten()
            .filter(|d| d.file_name().to_string_lossy().starts_with("mon_L3_"))
            .map(|d| d.path().join("mbm_total_bytes"))
            .filter(|f| f.is_file())
            .collect();
        found.sort();
        files.extend(found);
    }
    if files.is_empty() {
        return Err("resctrl is mounted but has no mbm_total_bytes (no MBM on this CPU)".to_string());
    }
    Ok(files)
}

/// Find the memory-traffic counters under `root`.
pub fn discover(root: &Path) -> Discovery {
    let pmus = list_pmus(root);
    let devices: Vec<String> = pmus.iter().map(|(n, _)| n.clone()).collect();
    let virtual_machine = flag(root, "hypervisor");
    let mut problems = Vec::new();
    let mut memory: Option<Backend> = None;
    for family in FAMILIES {
        let mut events = Vec::new();
        for (name, dir) in pmus.iter().filter(|(n, _)| instance_of(n, family.base)) {
            match read_pmu(dir, name).and_then(|pmu| (family.resolve)(&pmu)) {
                Ok(found) => events.extend(found),
                Err(e) => problems.push(e),
            }
        }
        if !events.is_empty() {
            memory = Some(Backend::Perf {
                family: family.name,
                events,
            });
            break;
        }
    }
    let memory = match memory {
        Some(backend) => Ok(backend),
        None => match resctrl(root) {
            Ok(files) => Ok(Backend::Resctrl { files }),
            Err(resctrl_why) => Err(if !problems.is_empty() {
                format!(
                    "uncore memory PMUs found but unusable: {}; resctrl: {resctrl_why}",
                    problems.join("; ")
                )
            } else if virtual_machine {
                VM_REASON.to_string()
            } else {
                format!(
                    "no uncore memory counters on this machine: no uncore_imc_*, uncore_imc_free_running_*, amd_umc_* or amd_df PMU in /sys/bus/event_source/devices, and {resctrl_why}"
                )
            }),
        },
    };
    let io = discover_io(&pmus, virtual_machine, &mut problems);
    Discovery {
        devices,
        virtual_machine,
        memory,
        io,
        problems,
    }
}

/// Intel's IIO free-running bandwidth-in counters, one per PCIe port of every IIO stack.
fn discover_io(pmus: &[(String, PathBuf)], vm: bool, problems: &mut Vec<String>) -> Result<Vec<ResolvedEvent>, String> {
    let mut events = Vec::new();
    for (name, dir) in pmus.iter().filter(|(n, _)| instance_of(n, "uncore_iio_free_running")) {
        let pmu = match read_pmu(dir, name) {
            Ok(p) => p,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        let mut ports: Vec<String> = std::fs::read_dir(dir.join("events"))
            .map(|es| {
                es.flatten()
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .filter(|n| n.starts_with("bw_in_port") && !n.contains('.'))
                    .collect()
            })
            .unwrap_or_default();
        ports.sort();
        for port in ports {
            match sysfs_event(&pmu, &port, Counts::PcieIn) {
                Ok(e) => events.push(e),
                Err(e) => problems.push(e),
            }
        }
    }
    if !events.is_empty() {
        Ok(events)
    } else if vm {
        Err("no uncore I/O counters on this machine (virtual machine)".to_string())
    } else {
        Err(
            "no uncore_iio_free_running_* PMU with bw_in_port* events (Intel Xeon Skylake-SP and later have them)"
                .to_string(),
        )
    }
}
