//! `iopath net stream` and `iopath net serve` as a user runs them, on loopback.

mod common;

use common::{bin, iopath, net_serve, role_metric, stderr, stdout, temp_db, value, wait_for_cells, Reaped};
use iopath::net::control::PROTOCOL_VERSION;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

/// Run `net stream` with short windows and return the parsed JSON records.
fn stream_json(extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["net", "stream", "--duration", "300ms", "--json"];
    if !extra.contains(&"--warmup") {
        args.extend(["--warmup", "100ms"]);
    }
    args.extend_from_slice(extra);
    let out = iopath().args(&args).timeout(Duration::from_secs(120)).output().unwrap();
    assert!(out.status.success(), "iopath {args:?} failed: {}", stderr(&out));
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn metric<'a>(record: &'a Value, role: &str, name: &str) -> &'a Value {
    role_metric(record, role, name).unwrap_or_else(|| panic!("no {role} {name} in {record}"))
}

#[test]
fn every_mode_delivers_intact_bytes_with_verify() {
    let records = stream_json(&[
        "--mode",
        "two-copy,one-copy,zero-copy",
        "--size",
        "4K,100000",
        "--threads",
        "1,2",
        "--verify",
    ]);
    assert_eq!(records.len(), 3 * 2 * 2);
    for r in &records {
        let label = r["label"].as_str().unwrap();
        assert!(
            value(r, "server", "verified_messages") > 0.0,
            "{label}: nothing verified"
        );
        assert_eq!(value(r, "server", "corrupt_messages"), 0.0, "{label}: corrupted bytes");
        assert!(value(r, "system", "throughput_gbps") > 0.0, "{label}");
        assert!(value(r, "client", "messages_sent") > 0.0, "{label}");
    }
}

#[test]
fn zero_copy_completions_cover_every_send_and_report_the_copy() {
    let records = stream_json(&["--mode", "zero-copy", "--size", "1K,256K", "--threads", "1,2"]);
    for r in &records {
        let label = r["label"].as_str().unwrap();
        let sends = value(r, "system", "zerocopy_sends");
        assert!(sends > 0.0, "{label}: no zero-copy sends");
        assert_eq!(
            value(r, "system", "zerocopy_completed_sends"),
            sends,
            "{label}: a send never completed"
        );
        assert!(value(r, "system", "zerocopy_completions") >= 1.0);
        // Over loopback the kernel copies at delivery: nothing avoided the copy.
        assert_eq!(value(r, "system", "zerocopy_copied_sends"), sends, "{label}");
        assert_eq!(value(r, "system", "zerocopy_not_copied_fraction"), 0.0, "{label}");
        assert_eq!(value(r, "system", "zerocopy_copied_fraction"), 1.0, "{label}");
        let warnings = r["observation"]["warnings"].to_string();
        assert!(
            warnings.contains("copied 100%"),
            "{label}: the copy is not reported: {warnings}"
        );
    }
}

#[test]
fn every_metric_carries_a_source_and_missing_ones_have_no_value() {
    let records = stream_json(&["--mode", "one-copy", "--size", "64K"]);
    let known = ["pmu", "software", "rusage", "tool", "estimate", "kernel", "trace"];
    for m in records[0]["observation"]["metrics"].as_array().unwrap() {
        let source = m["source"].as_str().unwrap();
        if let Some(reason) = source.strip_prefix("unavailable: ") {
            assert!(!reason.is_empty());
            assert!(m["value"].is_null(), "unavailable metric with a value: {m}");
        } else {
            assert!(known.contains(&source), "unknown source in {m}");
        }
    }
    let cpb = metric(&records[0], "client", "cycles_per_byte");
    assert!(["pmu", "estimate"].contains(&cpb["source"].as_str().unwrap()), "{cpb}");
    for role in ["client", "server"] {
        // On a machine busy with other tests a thread can sleep through the whole window
        // (blocked in recv before it opened until after it closed): then its figures are
        // unavailable with that reason, which is the honest answer, not a failure.
        let starved = metric(&records[0], role, "cpu_sys_s")["source"]
            .as_str()
            .is_some_and(|s| s.contains("saw the measured window"));
        if starved {
            common::skip(&format!(
                "the {role} thread slept through the whole window (a busy machine)"
            ));
            continue;
        }
        // CPU time from rusage: the scheduler's exact run time of the thread, split into user
        // and kernel by tick samples, so either part may be 0 but not both for a thread that
        // moved messages inside the window.
        for name in ["cpu_user_s", "cpu_sys_s"] {
            assert_eq!(metric(&records[0], role, name)["source"], "rusage", "{role} {name}");
        }
        let (user, sys) = (
            value(&records[0], role, "cpu_user_s"),
            value(&records[0], role, "cpu_sys_s"),
        );
        assert!(
            user >= 0.0 && sys >= 0.0 && user + sys > 0.0,
            "{role}: {user} + {sys} s"
        );
        // Each message counted inside a thread's window took at least one call inside it.
        assert!(value(&records[0], role, "syscalls_per_msg") >= 1.0);
    }
}

/// Every stream cell carries the machine's memory traffic: figures with source `pmu` (or
/// `kernel` from resctrl) where the machine has the counters, else one reason for them all;
/// on a VM without any PMU (as here) exactly the VM's.
#[test]
fn every_cell_carries_memory_traffic_or_the_reason() {
    let records = stream_json(&["--mode", "one-copy", "--size", "64K"]);
    let r = &records[0];
    let names = [
        "dram_read_bytes",
        "dram_write_bytes",
        "dram_bytes",
        "dram_bytes_per_payload_byte",
    ];
    let sources: Vec<String> = names
        .iter()
        .map(|n| metric(r, "system", n)["source"].as_str().unwrap().to_string())
        .collect();
    let dram = metric(r, "system", "dram_bytes");
    if dram["value"].is_null() {
        assert!(
            sources.iter().all(|s| *s == sources[2]),
            "one reason for all: {sources:?}"
        );
        let here = iopath::measure::memtraffic::discover(std::path::Path::new("/"));
        if let Err(why) = here.memory {
            assert_eq!(sources[2], format!("unavailable: {why}"));
        }
    } else {
        assert!(["pmu", "kernel"].contains(&sources[2].as_str()), "{sources:?}");
        assert!(value(r, "system", "dram_bytes_per_payload_byte") > 0.0);
    }
    let cost = metric(r, "system", "memtraffic_probe_read_ns");
    assert!(cost["source"] == "tool" || cost["value"].is_null(), "{cost}");
}

#[test]
fn pinned_run_records_where_threads_ran() {
    let records = stream_json(&[
        "--mode",
        "one-copy",
        "--size",
        "16K",
        "--client-cpus",
        "0",
        "--server-cpus",
        "0",
    ]);
    let placement = records[0]["observation"]["placement"].as_array().unwrap();
    assert_eq!(placement.len(), 2);
    for p in placement {
        assert_eq!(p["pinned"], serde_json::json!([0]));
        assert_eq!(p["cpu_at_start"], 0);
        assert_eq!(p["cpu_at_end"], 0);
    }
}

#[test]
fn an_unpinned_run_says_so() {
    let unpinned = stream_json(&["--mode", "one-copy", "--size", "16K"]);
    assert!(unpinned[0]["observation"]["warnings"]
        .to_string()
        .contains("not pinned"));
}

#[test]
fn table_output_names_the_case_and_the_sources() {
    let out = iopath()
        .args([
            "net",
            "stream",
            "--mode",
            "two-copy",
            "--size",
            "8K",
            "--duration",
            "200ms",
            "--warmup",
            "0",
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.starts_with("mode"), "{text}");
    assert!(
        text.contains("two-copy") && text.contains("8KiB") && text.contains("sources: "),
        "{text}"
    );
}

#[test]
fn csv_output_has_value_and_source_columns() {
    let out = iopath()
        .args([
            "net",
            "stream",
            "--mode",
            "one-copy",
            "--size",
            "8K",
            "--duration",
            "200ms",
            "--warmup",
            "0",
            "--csv",
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success());
    let csv = stdout(&out);
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    for col in [
        "workload",
        "label",
        "repetition",
        "mode",
        "size_bytes",
        "system_throughput_gbps",
        "system_throughput_gbps_source",
        "client_cycles_per_byte_source",
    ] {
        assert!(header.contains(&col), "CSV lacks {col}: {header:?}");
    }
    assert_eq!(csv.lines().count(), 2);
}

/// Bad flags: exit 2 and one line on stderr that names the problem.
#[test]
fn malformed_flags_exit_2_with_one_line() {
    let cases: [(&[&str], &str); 7] = [
        (&["--size", "abc"], "not a size"),
        (&["--size", "0"], "at least 1 byte"),
        (&["--threads", "0"], "at least 1"),
        (&["--mode", "bogus"], "accepted: two-copy, one-copy, zero-copy"),
        (&["--duration", "-1"], "not a duration"),
        (&["--client-cpus", "999"], "not online"),
        (&["--fields", "0"], "--fields"),
    ];
    for (flags, expect) in cases {
        let mut args = vec!["net", "stream"];
        args.extend_from_slice(flags);
        let out = iopath().args(&args).timeout(Duration::from_secs(20)).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{flags:?}: not one line: {err}");
        assert!(err.contains(expect), "{flags:?}: {err}");
        assert!(out.stdout.is_empty());
    }
}

/// A busy --port fails the cell with a message that says what to do: exit 1, the failed cell
/// listed on stdout, and on stderr only the cell's failure and the closing error.
#[test]
fn busy_port_is_a_clear_run_failure() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = iopath()
        .args([
            "net",
            "stream",
            "--mode",
            "one-copy",
            "--port",
            &port,
            "--duration",
            "200ms",
        ])
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // The failed cell is listed once, with its error, in the table on stdout (not also as a
    // progress note); stderr has where the run is stored and the closing error.
    let lines: Vec<&str> = err
        .trim_end()
        .lines()
        .filter(|l| !l.starts_with("stored as run 1"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("error: 1 of 1 cells failed"), "{err}");
    for line in lines {
        assert!(line.contains("is busy") && line.contains("--port"), "{err}");
    }
    assert!(
        stdout(&out).starts_with("failed: one-copy 64KiB t1 rep 0:"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_session_with_a_separate_server_process_works() {
    let server = net_serve(&[]);
    let addr = server.addr.clone();
    let out = iopath()
        .args([
            "net",
            "stream",
            "--connect",
            &addr,
            "--mode",
            "one-copy",
            "--size",
            "32K",
            "--duration",
            "300ms",
            "--warmup",
            "50ms",
            "--json",
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let records: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(value(&records[0], "server", "bytes_received") > 0.0);
}

/// The server dies in the middle of the second case: the first case's result is kept, the
/// second is a failed cell, and the run exits 1, well within the timeouts.
#[test]
fn a_vanishing_peer_fails_the_cell_and_keeps_the_finished_one() {
    let (_dir, db) = temp_db("iopath.db");
    let mut server = net_serve(&[]);
    let addr = server.addr.clone();
    let client = common::iopath_child()
        .args([
            "net",
            "stream",
            "--connect",
            &addr,
            "--mode",
            "one-copy,two-copy",
            "--size",
            "32K",
            "--duration",
            "1s",
            "--warmup",
            "50ms",
            "--json",
            "--db",
            db.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the first case is stored the second is under way: its window is 1 s.
    wait_for_cells(&db, 1, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(200));
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let started = Instant::now();
    let out = client.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the client hung after the server died"
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("error: 1 of 2 cells failed") && err.contains("first: two-copy"),
        "{err}"
    );
    let records: Value = serde_json::from_slice(&out.stdout).expect("the results are printed");
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 2, "{records:?}");
    assert!(records[0]["error"].is_null(), "the finished case is kept: {records:?}");
    assert!(value(&records[0], "server", "bytes_received") > 0.0);
    assert!(
        records[1]["label"].as_str().unwrap().starts_with("two-copy"),
        "{records:?}"
    );
    assert!(records[1]["error"].is_string(), "{records:?}");
}

#[test]
fn connect_to_nothing_fails_fast() {
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let out = iopath()
        .args(["net", "stream", "--connect", &free.to_string(), "--duration", "200ms"])
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("could not connect"));
}

/// The client may announce the window before the server accepted every data connection
/// (no warm-up, a loaded machine). Speak the control protocol by hand to make that happen
/// every time: the early message must wait its turn, not end the session.
#[test]
fn a_window_announced_before_the_data_connections_does_not_end_the_session() {
    use std::io::{Read, Write};
    let server = net_serve(&[]);
    let addr = server.addr.clone();
    let mut control = std::net::TcpStream::connect(&addr).unwrap();
    control.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let case = serde_json::json!({"mode": "one-copy", "size": 1024, "fields": 1, "threads": 1,
        "duration_ms": 100, "warmup_ms": 0, "client_cpus": null, "server_cpus": null,
        "verify": false, "endpoint": {"kind": "loopback", "port": 0}});
    writeln!(
        control,
        "{}",
        serde_json::json!({"type": "hello", "version": PROTOCOL_VERSION, "case": case})
    )
    .unwrap();
    let mut reader = BufReader::new(control.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let ready: Value = serde_json::from_str(&line).unwrap();
    let token = ready["token"].as_u64().expect("ready carries a token");
    // The window opens before the data connection exists.
    writeln!(control, "{}", serde_json::json!({"type": "measure"})).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut data = std::net::TcpStream::connect(&addr).unwrap();
    let mut header = token.to_le_bytes().to_vec();
    header.extend(0u32.to_le_bytes());
    data.write_all(&header).unwrap();
    for _ in 0..50 {
        data.write_all(&[7u8; 1024]).unwrap();
    }
    writeln!(control, "{}", serde_json::json!({"type": "done"})).unwrap();
    data.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    let _ = data.read_to_end(&mut rest);
    line.clear();
    reader.read_line(&mut line).unwrap();
    let report: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(report["type"], "report", "{line}");
    // How much of the data fell inside the window depends on when the server read the two
    // control messages; what matters is that the session completed with one thread's account.
    assert_eq!(report["threads"].as_array().map(Vec::len), Some(1), "{line}");
    assert!(report["threads"][0]["messages"].as_u64().unwrap() <= 50, "{line}");
    drop(server);
}

/// Send a hello with this case; return the server's one-line answer.
fn hello(addr: &str, case: Value) -> Value {
    use std::io::Write;
    let mut control = std::net::TcpStream::connect(addr).unwrap();
    control.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    writeln!(
        control,
        "{}",
        serde_json::json!({"type": "hello", "version": PROTOCOL_VERSION, "case": case})
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(control).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

fn small_case() -> Value {
    serde_json::json!({"mode": "one-copy", "size": 1024, "fields": 1, "threads": 1,
        "duration_ms": 200, "warmup_ms": 0, "client_cpus": null, "server_cpus": null,
        "verify": false, "endpoint": {"kind": "loopback", "port": 0}})
}

/// Found in review: a client could crash `net serve` with an absurd case (an overflowing
/// duration, 10^11 fields). The server refuses such cases and keeps serving.
#[test]
fn net_serve_refuses_hostile_cases_and_keeps_serving() {
    let server = net_serve(&[]);
    let addr = server.addr.clone();
    for (field, bad) in [
        ("duration_ms", serde_json::json!(u64::MAX)),
        ("fields", serde_json::json!(100_000_000_000u64)),
        ("size", serde_json::json!(1u64 << 40)),
    ] {
        let mut case = small_case();
        case[field] = bad;
        let answer = hello(&addr, case);
        assert_eq!(answer["type"], "refused", "{field}: {answer}");
    }
    let out = iopath()
        .args([
            "net",
            "stream",
            "--connect",
            &addr,
            "--mode",
            "one-copy",
            "--size",
            "4K",
            "--duration",
            "200ms",
            "--warmup",
            "0",
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "the server did not survive: {}", stderr(&out));
}

/// Found in review: any stray connection during set-up ended the session.
#[test]
fn a_stray_connection_during_setup_is_ignored() {
    use std::io::Write;
    let server = net_serve(&[]);
    let addr = server.addr.clone();
    let mut control = std::net::TcpStream::connect(&addr).unwrap();
    control.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    writeln!(
        control,
        "{}",
        serde_json::json!({"type": "hello", "version": PROTOCOL_VERSION, "case": small_case()})
    )
    .unwrap();
    let mut reader = BufReader::new(control.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let token = serde_json::from_str::<Value>(&line).unwrap()["token"].as_u64().unwrap();
    let mut stray = std::net::TcpStream::connect(&addr).unwrap();
    stray.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut data = std::net::TcpStream::connect(&addr).unwrap();
    let mut header = token.to_le_bytes().to_vec();
    header.extend(0u32.to_le_bytes());
    data.write_all(&header).unwrap();
    writeln!(control, "{}", serde_json::json!({"type": "measure"})).unwrap();
    data.write_all(&[1u8; 4096]).unwrap();
    writeln!(control, "{}", serde_json::json!({"type": "done"})).unwrap();
    data.shutdown(std::net::Shutdown::Write).unwrap();
    line.clear();
    reader.read_line(&mut line).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&line).unwrap()["type"],
        "report",
        "{line}"
    );
}

#[test]
fn cases_that_do_not_fit_in_memory_are_usage_errors() {
    let out = iopath()
        .args([
            "net",
            "stream",
            "--mode",
            "zero-copy",
            "--size",
            "1G",
            "--threads",
            "64",
        ])
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("needs about") && err.contains("available"), "{err}");
}

#[test]
fn a_bad_listen_address_is_a_usage_error() {
    let out = iopath()
        .args(["net", "serve", "--listen", "bogus"])
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("IP:PORT"), "{err}");
}

/// A network namespace joined by a veth pair: the project's own test host. Removed on drop.
struct Namespace {
    name: String,
}

impl Namespace {
    /// Create it, or say why not (not root, no `ip`, no netns support).
    fn create() -> Result<(Namespace, String, String), String> {
        let id = std::process::id() % 250 + 1;
        let name = format!("iopath-test-{}", std::process::id());
        let (host_if, ns_if) = (format!("iopv{id}a"), format!("iopv{id}b"));
        let (host_ip, ns_ip) = (format!("10.213.{id}.1"), format!("10.213.{id}.2"));
        let ip = |args: &[&str]| -> Result<(), String> {
            let out = StdCommand::new("ip")
                .args(args)
                .output()
                .map_err(|e| format!("cannot run ip: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!("ip {}: {}", args.join(" "), stderr(&out).trim()))
            }
        };
        ip(&["netns", "add", &name])?;
        let ns = Namespace { name: name.clone() };
        ip(&["link", "add", &host_if, "type", "veth", "peer", "name", &ns_if])?;
        ip(&["link", "set", &ns_if, "netns", &name])?;
        ip(&["addr", "add", &format!("{host_ip}/24"), "dev", &host_if])?;
        ip(&["link", "set", &host_if, "up"])?;
        ip(&[
            "netns",
            "exec",
            &name,
            "ip",
            "addr",
            "add",
            &format!("{ns_ip}/24"),
            "dev",
            &ns_if,
        ])?;
        ip(&["netns", "exec", &name, "ip", "link", "set", &ns_if, "up"])?;
        Ok((ns, host_ip, ns_ip))
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // Deleting the namespace deletes its end of the veth pair, and with it the other end.
        let _ = StdCommand::new("ip").args(["netns", "del", &self.name]).status();
    }
}

#[test]
fn stream_across_a_veth_pair_into_a_namespace() {
    let (ns, _host_ip, ns_ip) = match Namespace::create() {
        Ok(created) => created,
        Err(why) => {
            common::skip(&format!("cannot create a network namespace here ({why})"));
            return;
        }
    };
    let listen = format!("{ns_ip}:5201");
    let mut server = Reaped(
        StdCommand::new("ip")
            .args(["netns", "exec", &ns.name])
            .arg(bin())
            .args(["net", "serve", "--once", "--listen", &listen])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    let mut reader = BufReader::new(server.0.stderr.take().unwrap());
    reader.read_line(&mut line).unwrap();
    assert!(line.contains("listening on"), "{line}");
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let out = iopath()
        .args([
            "net",
            "stream",
            "--connect",
            &listen,
            "--mode",
            "zero-copy",
            "--size",
            "64K",
            "--duration",
            "300ms",
            "--warmup",
            "50ms",
            "--json",
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let status = server.0.wait().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(status.success(), "net serve --once did not exit cleanly");
    let records: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &records[0];
    assert!(value(r, "system", "throughput_gbps") > 0.0);
    // A veth delivers locally too: the kernel copies zero-copy sends there as well.
    assert_eq!(
        value(r, "system", "zerocopy_completed_sends"),
        value(r, "system", "zerocopy_sends")
    );
    assert_eq!(value(r, "system", "zerocopy_not_copied_fraction"), 0.0);
}

#[test]
fn db_keeps_the_run_for_report_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("n.db");
    let out = iopath()
        .args([
            "net",
            "stream",
            "--mode",
            "one-copy,two-copy",
            "--size",
            "4K",
            "--duration",
            "200ms",
            "--warmup",
            "50ms",
            "--db",
        ])
        .arg(&db)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("stored as run 1 in {}", db.display())),
        "{}",
        stderr(&out)
    );
    let csv = iopath()
        .args(["export", "--format", "csv", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&csv.stdout);
    assert_eq!(text.lines().count(), 3, "a header and one row per case: {text}");
    assert!(text.lines().skip(1).all(|l| l.starts_with("1,net-stream,")), "{text}");
    let report = dir.path().join("r.html");
    let out = iopath()
        .args(["report", "1", "-o"])
        .arg(&report)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::read_to_string(&report).unwrap().contains("Machine"));
}

/// Run a long stream case in-process, request a stop after `after`, and check it comes back
/// as Interrupted within a second of the request with every thread of the run gone.
fn stop_stream_after(warmup_ms: u64, mode: iopath::case::CopyMode, after: Duration) {
    // One at a time: each checks that no thread of a run is left in this process.
    let _alone = common::in_process_alone();
    use iopath::case::StreamCase;
    let case = StreamCase::for_test(mode, 64 << 10)
        .with_fields(4)
        .with_threads(2)
        .with_window_ms(30_000, warmup_ms);
    let stop = iopath::stop::Stop::fresh();
    common::assert_stops_as_interrupted(
        move || iopath::net::workload::stream::run(&case, stop, &Default::default()),
        stop,
        after,
        &["iopath-server", "iopath-client"],
    );
}

#[test]
fn a_stop_in_the_window_interrupts_the_run_within_a_second() {
    stop_stream_after(0, iopath::case::CopyMode::OneCopy, Duration::from_millis(300));
}

#[test]
fn a_stop_in_the_warm_up_interrupts_a_zero_copy_run_within_a_second() {
    stop_stream_after(30_000, iopath::case::CopyMode::ZeroCopy, Duration::from_millis(300));
}

/// sendfile and splice block in the kernel on a full socket like send does: a stop wakes them.
#[test]
fn a_stop_in_the_window_interrupts_sendfile_and_splice_runs_within_a_second() {
    for mode in [iopath::case::CopyMode::Sendfile, iopath::case::CopyMode::Splice] {
        stop_stream_after(0, mode, Duration::from_millis(300));
    }
}

#[test]
fn a_stop_before_the_run_connects_interrupts_it_at_once() {
    stop_stream_after(0, iopath::case::CopyMode::TwoCopy, Duration::ZERO);
}

/// A server that speaks the control protocol by hand for `sessions` sessions: it accepts
/// the case, drains the data connections, and answers every session with a report whose
/// threads are `threads` (the server's account, as a real server would send it).
fn scripted_server(threads: Value, sessions: usize) -> (std::thread::JoinHandle<()>, String) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        for _ in 0..sessions {
            let (control, _) = listener.accept().unwrap();
            control.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut writer = control.try_clone().unwrap();
            let mut reader = BufReader::new(control);
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let hello: Value = serde_json::from_str(&line).unwrap();
            let n = hello["case"]["threads"].as_u64().unwrap();
            writeln!(writer, "{}", serde_json::json!({"type": "ready", "token": 7})).unwrap();
            let drains: Vec<_> = (0..n)
                .map(|_| {
                    let (mut data, _) = listener.accept().unwrap();
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut data, &mut std::io::sink());
                    })
                })
                .collect();
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap() == 0 {
                    return;
                }
                if line.contains("\"done\"") {
                    break;
                }
            }
            for d in drains {
                d.join().unwrap();
            }
            let mut report = serde_json::json!({"type": "report", "metrics": [], "placement": [],
                "verified_messages": 0, "corrupt_messages": 0, "warnings": []});
            report["threads"] = threads.clone();
            writeln!(writer, "{report}").unwrap();
            let mut rest = Vec::new();
            let _ = reader.read_to_end(&mut rest);
        }
    });
    (handle, addr)
}

fn stream_against(addr: &str, output: &[&str]) -> std::process::Output {
    let mut args = vec![
        "net",
        "stream",
        "--connect",
        addr,
        "--mode",
        "two-copy",
        "--size",
        "1000",
        "--threads",
        "2",
        "--duration",
        "100ms",
        "--warmup",
        "0",
    ];
    args.extend_from_slice(output);
    let out = iopath().args(&args).timeout(Duration::from_secs(60)).output().unwrap();
    assert!(out.status.success(), "iopath {args:?}: {}", stderr(&out));
    out
}

/// A1 through the protocol: one of the two server threads never saw the window (it says
/// `window_s: null`). The throughput is what the other received over its own window,
/// not twice that (a ~0 window averaged in used to halve the mean window).
#[test]
fn a_server_thread_without_a_window_does_not_inflate_the_throughput() {
    let threads = serde_json::json!([
        {"bytes": 8_000_000, "messages": 8000, "window_s": 1.0, "syscalls": 8000},
        {"bytes": 0, "messages": 0, "window_s": null, "syscalls": 0},
    ]);
    let (server, addr) = scripted_server(threads, 1);
    let out = stream_against(&addr, &["--json"]);
    server.join().unwrap();
    let records: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gbps = value(&records[0], "system", "throughput_gbps");
    assert!(
        (gbps - 0.064).abs() < 1e-9,
        "8 MB in a 1 s window is 0.064 Gbit/s, got {gbps}"
    );
    assert!((value(&records[0], "system", "messages_per_s") - 8000.0).abs() < 1e-6);
    assert!(records[0]["observation"]["warnings"]
        .to_string()
        .contains("1 server threads moved no message"));
}

/// A2 in every output: when no server thread saw the window, the throughput (bytes over a
/// window that does not exist, a ratio over zero) is unavailable with the reason — JSON
/// `null` beside `unavailable: …`, CSV an empty value beside it, the table `n/a` with the
/// reason in its sources line — and never NaN, 0 or a `tool` source without a value.
#[test]
fn a_rate_over_no_window_is_unavailable_in_json_csv_and_table() {
    let threads = serde_json::json!([
        {"bytes": 0, "messages": 0, "window_s": null, "syscalls": 0},
        {"bytes": 0, "messages": 0, "window_s": null, "syscalls": 0},
    ]);
    let (server, addr) = scripted_server(threads, 3);
    let json = stream_against(&addr, &["--json"]);
    let csv = stream_against(&addr, &["--csv"]);
    let table = stream_against(&addr, &[]);
    server.join().unwrap();
    for out in [&json, &csv, &table] {
        let text = stdout(out);
        assert!(!text.contains("NaN"), "{text}");
    }

    let records: Value = serde_json::from_slice(&json.stdout).unwrap();
    for m in records[0]["observation"]["metrics"].as_array().unwrap() {
        let source = m["source"].as_str().unwrap();
        assert_eq!(
            m["value"].is_null(),
            source.starts_with("unavailable: "),
            "a value is null exactly when its source is unavailable: {m}"
        );
    }
    for name in ["throughput_gbps", "messages_per_s"] {
        let m = metric(&records[0], "system", name);
        assert!(m["value"].is_null(), "{m}");
        assert!(
            m["source"]
                .as_str()
                .unwrap()
                .starts_with("unavailable: no server thread saw the measured window"),
            "{m}"
        );
    }

    let text = stdout(&csv);
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let header = rows.headers().unwrap().clone();
    let row = rows.records().next().unwrap().unwrap();
    assert!(row.iter().all(|cell| !["inf", "-inf", "NaN"].contains(&cell)), "{text}");
    let col = |name: &str| {
        &row[header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no {name}"))]
    };
    // A value column empty in every row is left out; its source says why.
    assert!(!header.iter().any(|h| h == "system_throughput_gbps"), "{text}");
    assert!(col("system_throughput_gbps_source").starts_with("unavailable: no server thread saw"));
    for (i, h) in header.iter().enumerate() {
        if let Some(base) = h.strip_suffix("_source") {
            if let Some(j) = header.iter().position(|x| x == base) {
                assert_eq!(
                    row[j].is_empty(),
                    row[i].starts_with("unavailable: ") || &row[i] == "not measured by this case",
                    "{base}: value '{}' beside source '{}'",
                    &row[j],
                    &row[i]
                );
            }
        }
    }

    let text = stdout(&table);
    let data_row = text.lines().nth(1).unwrap();
    assert!(data_row.contains("n/a"), "{text}");
    // The sources line groups the columns by source, wrapped: `<source>: <columns>; …`.
    let mut sources = String::new();
    for line in text.lines().skip_while(|l| !l.starts_with("sources: ")) {
        if !sources.is_empty() && !line.starts_with(' ') {
            break;
        }
        sources.push_str(line.trim());
        sources.push(' ');
    }
    let group = sources
        .split("; ")
        .find(|g| g.contains("unavailable: no server thread saw the measured window"))
        .unwrap_or_else(|| panic!("no unavailable group: {text}"));
    assert!(group.contains("Gbit/s"), "{group}: {text}");
}

/// A connection that writes `bytes` one at a time every `every` until `stop` is set or the
/// peer goes away; the thread ends either way.
fn trickle(
    addr: &str,
    bytes: &'static [u8],
    every: Duration,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    std::thread::spawn(move || {
        for b in bytes.iter().cycle().take(600) {
            if stop.load(std::sync::atomic::Ordering::SeqCst) || s.write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(every);
        }
    })
}

/// Issue D: one idle and one trickling connection must not hold up `net serve`: each new
/// connection has 5 s in all to say what it is, and is greeted on its own, so a real client
/// is served at once beside them. A client speaking another protocol version is told so in
/// words. SIGTERM ends the server within about 100 ms while bytes still trickle in.
#[test]
fn net_serve_is_not_held_up_by_slow_connections_and_stops_at_once() {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicBool, Ordering};
    let mut server = net_serve(&[]);
    let addr = server.addr.clone();
    let idle = std::net::TcpStream::connect(&addr).unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let slow = trickle(&addr, b"{\"type\":\"hello\",", Duration::from_millis(100), stop.clone());
    std::thread::sleep(Duration::from_millis(200));

    let started = Instant::now();
    let out = iopath()
        .args([
            "net",
            "stream",
            "--connect",
            &addr,
            "--mode",
            "one-copy",
            "--size",
            "4K",
            "--duration",
            "200ms",
            "--warmup",
            "0",
        ])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let took = started.elapsed();
    // Served beside them, not after them: the idle connection is still waiting for its 5 s
    // to say what it is (a server that took connections in turn would have had to give up on
    // it first). Its state, not the client's time, is the evidence.
    idle.set_nonblocking(true).unwrap();
    let still_waiting = matches!(
        (&idle).read(&mut [0u8; 1]),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
    );
    assert!(
        still_waiting,
        "the idle connection was already closed when a client beside it was served ({took:?})"
    );

    // Another protocol version: the version is checked before the rest of the hello.
    let mut other = std::net::TcpStream::connect(&addr).unwrap();
    other.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    writeln!(
        other,
        "{}",
        serde_json::json!({"type": "hello", "version": 99, "case": {"renamed": 1}})
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(other).read_line(&mut line).unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(answer["type"], "refused", "{line}");
    assert_eq!(
        answer["error"],
        format!(
            "protocol version 99, this server speaks {} to {}",
            iopath::net::control::OLDEST_CLIENT_VERSION,
            iopath::net::control::PROTOCOL_VERSION
        ),
        "{line}"
    );

    // SIGTERM while a connection trickles its hello.
    let slow2 = trickle(&addr, b"{\"type\":", Duration::from_millis(30), stop.clone());
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "net serve ignored SIGTERM for 10 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = asked.elapsed();
    stop.store(true, Ordering::SeqCst);
    slow.join().unwrap();
    slow2.join().unwrap();
    assert!(status.success(), "{status:?}");
    // About 100 ms unloaded; what matters is that it did not wait out the trickling
    // connection's 5 s hello deadline (4.7 s after the signal), which STOP_WITHIN tells apart.
    assert!(took < common::STOP_WITHIN, "net serve took {took:?} to stop");
}

/// Issue D: the client's control connection has a deadline per step, not per read. A server
/// that accepts the hello and trickles its answer one byte every 300 ms never let a read time
/// out; now the client gives up after its 10 s and says it timed out.
#[test]
fn a_server_trickling_its_answer_cannot_hold_the_client_past_the_deadline() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut hello = [0u8; 64];
        let _ = s.read(&mut hello);
        let started = Instant::now();
        for b in b"{\"type\":\"ready\",\"token\":12345678901234567890".iter().cycle() {
            if s.write_all(&[*b]).is_err() || started.elapsed() > Duration::from_secs(30) {
                return;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    let started = Instant::now();
    let out = iopath()
        .args([
            "net",
            "stream",
            "--connect",
            &addr,
            "--mode",
            "one-copy",
            "--duration",
            "200ms",
            "--warmup",
            "0",
        ])
        .timeout(Duration::from_secs(40))
        .output()
        .unwrap();
    let took = started.elapsed();
    fake.join().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // Its 10 s deadline held rather than the 30 s the trickle lasts: the message says so, and
    // the time is bounded between the two (a loaded machine can add seconds to a run).
    assert!(took < Duration::from_secs(20), "the client waited {took:?}: {err}");
    assert!(err.contains("timed out after 10 s"), "{err}");
    assert!(!err.contains("os error 11"), "{err}");
}

/// sendfile and splice keep no completion notification, so a ring slot rewritten while the
/// kernel still held it would arrive corrupted: --verify over loopback must find every byte
/// intact, with 1 and 8 fields, several threads, and messages up to the pipe's size.
#[test]
fn sendfile_and_splice_deliver_intact_bytes_with_verify() {
    for fields in ["1", "8"] {
        let records = stream_json(&[
            "--mode",
            "sendfile,splice",
            "--size",
            "1K,64K,1M",
            "--fields",
            fields,
            "--threads",
            "3",
            "--verify",
            "--warmup",
            "0",
        ]);
        assert_eq!(records.len(), 2 * 3);
        for r in &records {
            let label = r["label"].as_str().unwrap();
            assert!(
                value(r, "server", "verified_messages") > 0.0,
                "{label} x{fields}: nothing verified"
            );
            assert_eq!(
                value(r, "server", "corrupt_messages"),
                0.0,
                "{label} x{fields}: corrupted"
            );
            // sendfile: at least one call per message; splice: a vmsplice and a splice.
            let least = if r["case"]["mode"] == "splice" { 2.0 } else { 1.0 };
            assert!(value(r, "client", "syscalls_per_msg") >= least, "{label} x{fields}");
        }
    }
}

/// --prove-copies: the verdict of each mode on this kernel comes from what the receiver got,
/// published as a metric with its source and, for by-reference sends, a typed warning.
#[test]
fn prove_copies_finds_one_copy_copied_and_sendfile_and_splice_by_reference() {
    let records = stream_json(&["--mode", "one-copy,sendfile,splice", "--size", "64K", "--prove-copies"]);
    assert_eq!(records.len(), 3);
    for r in &records {
        let mode = r["case"]["mode"].as_str().unwrap();
        let fraction = metric(r, "system", "alias_by_reference_fraction");
        assert_eq!(fraction["source"], "tool", "{mode}");
        let expected = if mode == "one-copy" { 0.0 } else { 1.0 };
        assert_eq!(fraction["value"].as_f64(), Some(expected), "{mode}: {fraction}");
        assert_eq!(value(r, "system", "alias_corrupt_bytes"), 0.0, "{mode}");
        assert!(value(r, "system", "alias_probed_bytes") > 0.0, "{mode}");
        assert_eq!(r["case"]["prove_copies"], true, "{mode}");
        let by_reference = r["observation"]["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["kind"] == "by-reference");
        assert_eq!(
            by_reference,
            mode != "one-copy",
            "{mode}: {}",
            r["observation"]["warnings"]
        );
    }
}

/// Over --connect the probe cannot see the receiver: the metric is unavailable and says why.
#[test]
fn prove_copies_over_connect_is_unavailable_with_the_reason() {
    let server = net_serve(&[]);
    let addr = server.addr.clone();
    let records = stream_json(&[
        "--connect",
        &addr,
        "--mode",
        "sendfile",
        "--size",
        "16K",
        "--prove-copies",
    ]);
    let fraction = metric(&records[0], "system", "alias_by_reference_fraction");
    assert_eq!(fraction["value"], Value::Null);
    let source = fraction["source"].as_str().unwrap();
    assert!(
        source.starts_with("unavailable: ") && source.contains("--connect"),
        "{source}"
    );
}
