//! The trace probe (`measure/trace.rs`, source `trace`): the kernel's receive copies per
//! payload byte are 1 for a copying receive and 0 for `trunc` (loopback and veth), checked against a second
//! reading of the same tracepoint by `perf record` around the run; and where the probe cannot
//! or must not run every figure says why, and the run still succeeds.

mod common;

use common::{json_records, role_metric, skip, value};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const TRACE_FIGURES: &[(&str, &str)] = &[
    ("client", "kernel_rx_copy_bytes"),
    ("server", "kernel_rx_copy_bytes"),
    ("server", "kernel_tx_bytes"),
    ("client", "sched_switches_voluntary"),
    ("server", "sched_wakeups"),
    ("client", "softirq_share"),
    ("system", "softirq_net_rx_s"),
    ("server", "sched_wakeups"),
    ("client", "softirq_share"),
    ("server", "softirq_share"),
    ("server", "kernel_copy_bytes_per_byte"),
    ("system", "kernel_copy_bytes_per_byte"),
];

/// Why this machine cannot read system-wide tracepoints (or run perf), or None.
fn cannot_trace() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("system-wide tracepoints need root".into());
    }
    if let Some(why) = common::missing_program("perf") {
        return Some(why);
    }
    let events = Path::new("/sys/kernel/tracing/events/skb/skb_copy_datagram_iovec");
    if !events.exists() {
        // The probe mounts tracefs itself; a kernel without it or without the event cannot trace.
        let _ = Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .status();
    }
    (!events.exists()).then(|| "no tracefs or no skb:skb_copy_datagram_iovec tracepoint".into())
}

/// Pinned to different CPUs where there are two, as the acceptance asks.
fn pin_flags() -> Vec<String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let server = if cpus > 1 { "1" } else { "0" };
    vec![
        "--client-cpus".into(),
        "0".into(),
        "--server-cpus".into(),
        server.into(),
    ]
}

/// What `perf record` saw over the whole run of `net stream --topology T --rx-mode rx`: the bytes the
/// kernel copied to user space (`skb:skb_copy_datagram_iovec`'s `len`), and the bytes the
/// receive calls returned (`sock:sock_recv_length`'s `length`); with the run's record.
struct PerfReading {
    copy_calls: u64,
    copied: u64,
    returned: u64,
    /// iopath's JSON records, one per case.
    records: Vec<Value>,
}

/// The number after `key` in one line of `perf script` (`len=65536`, `length = 65536`).
fn number_after(line: &str, key: &str) -> Option<u64> {
    let rest = &line[line.find(key)? + key.len()..];
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// `net stream --mode MODES --rx-mode RX` (two-copy and one receive mode in the first test)
/// under `perf record` of the receive copies and the receive calls' lengths.
fn stream_under_perf(topology: &str, modes: &str, rx: &str, dir: &Path) -> PerfReading {
    let data = dir.join(format!("{topology}-{rx}.data"));
    let mut args: Vec<String> = [
        "record",
        "-q",
        "-c",
        "1",
        "-e",
        "skb:skb_copy_datagram_iovec",
        "-e",
        "sock:sock_recv_length",
        "-o",
    ]
    .map(String::from)
    .to_vec();
    args.push(data.display().to_string());
    args.push("--".into());
    args.push(common::bin().display().to_string());
    for a in [
        "net",
        "stream",
        "--mode",
        modes,
        "--rx-mode",
        rx,
        "--duration",
        "500ms",
        "--warmup",
        "100ms",
        "--json",
    ] {
        args.push(a.into());
    }
    args.extend(pin_flags());
    args.extend(["--topology".to_string(), topology.to_string()]);
    let out = Command::new("perf")
        .args(&args)
        .env("IOPATH_TRACE", "on")
        .env("IOPATH_DB", common::own_db())
        .output()
        .expect("perf runs");
    assert!(out.status.success(), "perf record failed: {}", common::stderr(&out));
    let records = json_records(&out);
    let cases = modes.split(',').count() * rx.split(',').count();
    assert_eq!(records.len(), cases, "{}", common::stderr(&out));
    let script = Command::new("perf")
        .args(["script", "-F", "event,trace", "-i"])
        .arg(&data)
        .output()
        .expect("perf script runs");
    assert!(
        script.status.success(),
        "perf script failed: {}",
        common::stderr(&script)
    );
    let mut reading = PerfReading {
        copy_calls: 0,
        copied: 0,
        returned: 0,
        records,
    };
    for line in common::stdout(&script).lines() {
        if line.contains("skb_copy_datagram_iovec") {
            reading.copy_calls += 1;
            reading.copied += number_after(line, "len=").unwrap_or_else(|| panic!("no len= in {line:?}"));
        } else if line.contains("sock_recv_length") {
            // A failed call returned nothing: `length = -11` (or `length = 0, error = -11`).
            if !line.contains("length = -") {
                reading.returned += number_after(line, "length = ").unwrap_or_else(|| panic!("no length in {line:?}"));
            }
        }
    }
    reading
}

/// A cell's receive copies per payload byte against what its receive mode says. None is
/// exactly none, whatever the load. Otherwise, the 2 % (plus the one message each edge
/// of the window can split) holds only when no measured thread waited long for a CPU
/// (`runqueue_wait_max_pct` within iopath's own 5 % contention line): the probe's window opens
/// and closes when the coordinator says, each thread's payload count when that thread next
/// looks, and on a loaded machine the two drift apart by whole scheduling delays (1.022 was
/// seen beside stress-ng). A contended cell must still show copies where there are copies.
fn assert_copies_as_expected(record: &Value, label: &str, ratio: f64, expected: f64) {
    if expected == 0.0 {
        assert_eq!(ratio, 0.0, "{label}: the kernel copied nothing");
        return;
    }
    let waited = value(record, "system", "runqueue_wait_max_pct");
    if waited > iopath::measure::system::CONTENDED_PCT {
        assert!(
            ratio > 0.0,
            "{label}: no copies counted (a thread waited {waited:.0}% of the window)"
        );
        eprintln!("{label}: contended ({waited:.0}% run-queue wait): {ratio:.3} B copied per byte, {expected:.3} expected; not held to 2 %");
        return;
    }
    let payload = value(record, "server", "bytes_received");
    let edges = 2.0 * record["case"]["size"].as_f64().expect("the case's size");
    assert!(
        (ratio - expected).abs() * payload <= 0.02 * payload + edges,
        "{label}: {ratio} B copied per payload byte of {payload} B, {expected} expected"
    );
}

/// The probe's `role` `name` in `record`: a value from the trace probe. Its programs sum in
/// the kernel, so load delays nothing they count; an unavailable figure fails.
fn traced(record: &Value, role: &str, name: &str, label: &str) -> Option<f64> {
    let m = role_metric(record, role, name).unwrap_or_else(|| panic!("{label}: no {role} {name}"));
    let v = m["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("{label}: {role} {name} unavailable: {m}"));
    assert_eq!(m["source"], "trace", "{label}: {role} {name}: {m}");
    Some(v)
}

#[test]
fn receive_copies_per_payload_byte_agree_with_a_second_reading_by_perf() {
    if let Some(why) = cannot_trace() {
        return skip(&why);
    }
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("loopback", "copy"),
        ("loopback", "scatter"),
        ("loopback", "trunc"),
        ("veth", "copy"),
        ("veth", "trunc"),
    ];
    for (topology, rx) in cases {
        let perf = stream_under_perf(topology, "two-copy", rx, dir.path());
        let record = &perf.records[0];
        let label = format!("{topology} {}", record["label"]);
        let received = value(record, "server", "bytes_received");
        assert!(received > 0.0, "{label}: nothing received");
        let Some(ratio) = traced(record, "server", "kernel_copy_bytes_per_byte", &label) else {
            continue;
        };
        let probe_calls = value(record, "server", "kernel_rx_copy_calls");
        let probe_bytes = value(record, "server", "kernel_rx_copy_bytes");
        // The sender receives nothing in a stream.
        assert_eq!(value(record, "client", "kernel_rx_copy_bytes"), 0.0, "{label}");
        // perf's own figure over the whole run: bytes copied per byte the receive calls returned.
        assert!(
            perf.returned as f64 >= received,
            "{label}: perf saw {} B returned",
            perf.returned
        );
        let perf_ratio = perf.copied as f64 / perf.returned as f64;
        if rx == "trunc" {
            assert_copies_as_expected(record, &label, ratio, 0.0);
            assert_eq!(probe_bytes, 0.0, "{label}");
            // Only the control channel's few lines were copied in the whole run.
            assert!(
                perf_ratio < 0.01,
                "{label}: perf: {perf_ratio} B copied per byte returned"
            );
        } else {
            assert_copies_as_expected(record, &label, ratio, 1.0);
            assert!(
                (perf_ratio - 1.0).abs() < 0.02,
                "{label}: perf: {perf_ratio} B copied per byte returned"
            );
            // perf's reading covers the whole run, the probe's the window inside it.
            assert!(
                perf.copy_calls as f64 >= probe_calls && perf.copied as f64 >= probe_bytes,
                "{label}: perf {} calls {} B < probe {probe_calls} calls {probe_bytes} B",
                perf.copy_calls,
                perf.copied
            );
        }
    }
}

fn assert_all_unavailable(record: &Value, reason: &str) {
    for (role, name) in TRACE_FIGURES {
        let m = role_metric(record, role, name).unwrap_or_else(|| panic!("no {role} {name}"));
        assert!(m["value"].is_null(), "{role} {name}: {m}");
        let source = m["source"].as_str().unwrap();
        assert!(
            source.starts_with("unavailable: ") && source.contains(reason),
            "{role} {name}: {source}"
        );
    }
}

/// A short `net stream`, the runs that only look at which figures there are.
const SHORT_STREAM: [&str; 9] = [
    "net",
    "stream",
    "--mode",
    "two-copy",
    "--duration",
    "200ms",
    "--warmup",
    "0",
    "--json",
];

/// A short `net stream` with `flags` added, its first record once it succeeded; the probe
/// asked for (`IOPATH_TRACE=on`) unless `trace` says otherwise (Some(None): the variable unset).
fn short_stream(trace: Option<Option<&str>>, flags: &[&str]) -> Value {
    let mut cmd = common::iopath();
    match trace {
        None => {
            cmd.env("IOPATH_TRACE", "on");
        }
        Some(Some(v)) => {
            cmd.env("IOPATH_TRACE", v);
        }
        Some(None) => {
            cmd.env_remove("IOPATH_TRACE");
        }
    }
    let out = cmd.args(SHORT_STREAM).args(flags).output().unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    json_records(&out)[0].clone()
}

/// A pinned 64 KiB stream: each role's softirq share is the trace probe's and a share, its
/// wakeups are those of its own threads (each ends a sleep: no more of them than voluntary
/// switches, plus one a thread asleep at the open), and `--wide` shows the shares. No bound on the values themselves: load moves
/// them.
#[test]
fn a_stream_gives_each_roles_softirq_share_and_wakeups() {
    if let Some(why) = cannot_trace() {
        return skip(&why);
    }
    let pins = pin_flags();
    let mut flags = vec!["--size", "64K"];
    flags.extend(pins.iter().map(String::as_str));
    let record = short_stream(None, &flags);
    for role in ["client", "server"] {
        if let Some(share) = traced(&record, role, "softirq_share", "64 KiB stream") {
            assert!((0.0..=1.0).contains(&share), "{role} softirq_share {share}");
        }
        let woken = traced(&record, role, "sched_wakeups", "64 KiB stream").unwrap_or_default();
        let slept = value(&record, role, "sched_switches_voluntary");
        // Each wakeup ends a sleep: one begun in the window (a voluntary switch) or, for
        // each of the role's threads, one begun before it opened.
        let threads = record["case"]["threads"].as_f64().unwrap_or(1.0);
        assert!(
            woken <= slept + threads,
            "{role}: {woken} wakeups, {slept} voluntary switches, {threads} threads"
        );
        assert!(
            slept < 10.0 || woken > 0.0,
            "{role}: {slept} voluntary switches, no wakeup"
        );
    }
    // Some NET softirq ran in the window, charged to one role or the other (on loopback the
    // sender's context carries the receive path; under load some runs in ksoftirqd).
    if let Some(softirq) = traced(&record, "system", "softirq_net_rx_s", "64 KiB stream") {
        assert!(softirq > 0.0, "no NET_RX softirq in a 64 KiB stream");
    }
    let mut cmd = common::iopath();
    let out = cmd
        .env("IOPATH_TRACE", "on")
        .args(&SHORT_STREAM[..SHORT_STREAM.len() - 1])
        .args(&flags)
        .arg("--wide")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    let table = common::stdout(&out);
    assert!(
        table.contains("cli sirq") && table.contains("srv sirq"),
        "no softirq share columns in:\n{table}"
    );
}

#[test]
fn turned_off_every_trace_figure_says_why_and_the_run_succeeds() {
    let record = short_stream(Some(Some("off")), &[]);
    assert_all_unavailable(&record, "trace probe off (IOPATH_TRACE=off)");
    assert_all_unavailable(&short_stream(None, &["--no-perf"]), "--no-perf");
}

/// Not asked for, the probe runs where it can: the server's receive copies are counted.
#[test]
fn the_probe_is_on_by_default() {
    if let Some(why) = cannot_trace() {
        return skip(&why);
    }
    let record = short_stream(Some(None), &[]);
    let copies = value(&record, "server", "kernel_rx_copy_bytes");
    assert!(copies > 0.0, "no receive copies counted without IOPATH_TRACE: {record}");
}

#[test]
fn without_root_every_trace_figure_says_why_and_the_run_succeeds() {
    if !nix::unistd::geteuid().is_root() {
        // Not root already: the plain run is the case.
        let record = short_stream(None, &[]);
        let m = role_metric(&record, "server", "kernel_rx_copy_bytes").unwrap();
        if m["value"].is_null() {
            return assert_all_unavailable(&record, "");
        }
        return skip("this user may read tracepoints (CAP_PERFMON or a low perf_event_paranoid)");
    }
    if let Some(why) = common::missing_program("setpriv") {
        return skip(&why);
    }
    // Every run is stored: into a folder the unprivileged user may write.
    let nobody_db = tempfile::tempdir().unwrap();
    std::fs::set_permissions(nobody_db.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"])
        .arg(common::bin())
        .args(SHORT_STREAM)
        .env("IOPATH_TRACE", "on")
        .env("IOPATH_DB", nobody_db.path().join("nobody.db"))
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    if !out.status.success() && common::stderr(&out).contains("Permission denied") {
        return skip(&format!(
            "the binary cannot run as nobody here: {}",
            common::stderr(&out)
        ));
    }
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_all_unavailable(&json_records(&out)[0], "not root");
}

/// Every send mode with every receive mode, over loopback and veth: the probe's receive copies
/// per payload byte are 1 for copy and scatter, 0 for trunc, and for zerocopy the share its
/// mapping left to copy (1 - `rx_mapped_fraction`); perf's reading of the same tracepoint over
/// the whole run holds at least what the probe counted inside the windows, and no more than
/// the receive calls returned.
#[test]
fn every_send_and_receive_mode_copies_what_its_receive_mode_says() {
    if let Some(why) = cannot_trace() {
        return skip(&why);
    }
    let dir = tempfile::tempdir().unwrap();
    let modes = "two-copy,one-copy,zero-copy,uring,uring-zc,sendfile,splice";
    for topology in ["loopback", "veth"] {
        let perf = stream_under_perf(topology, modes, "copy,scatter,trunc,zerocopy", dir.path());
        let mut probed = 0.0;
        for record in &perf.records {
            let label = format!("{topology} {}", record["label"]);
            assert!(record["error"].is_null(), "{label}: {}", record["error"]);
            let Some(ratio) = traced(record, "server", "kernel_copy_bytes_per_byte", &label) else {
                continue;
            };
            let expected = match record["case"]["rx_mode"].as_str() {
                Some("trunc") => 0.0,
                Some("zerocopy") => 1.0 - value(record, "server", "rx_mapped_fraction"),
                _ => 1.0,
            };
            assert_copies_as_expected(record, &label, ratio, expected);
            probed += value(record, "server", "kernel_rx_copy_bytes");
        }
        assert!(
            perf.copied as f64 >= probed && perf.copied <= perf.returned,
            "{topology}: perf saw {} B copied of {} B returned; the probe {probed} B",
            perf.copied,
            perf.returned
        );
    }
}
