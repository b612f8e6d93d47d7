//! `iopath net load`: the probe idle and under every direction of load on loopback with
//! --verify, the flows' figures, a remote `net serve` with a key, a peer that vanishes in the
//! middle of the load, and bad flags (exit 2).

mod common;

use common::{iopath, json_records, stderr, usage_error, value, value_of};
use serde_json::Value;
use std::time::Duration;

fn run(args: &[&str]) -> Vec<Value> {
    let out = iopath()
        .args(["net", "load"])
        .args(args)
        .args(["--idle", "300ms", "--warmup", "200ms", "--duration", "500ms", "--json"])
        .timeout(Duration::from_secs(180))
        .output()
        .unwrap();
    assert!(out.status.success(), "iopath net load {args:?}: {}", stderr(&out));
    json_records(&out)
}

/// A measured cell: the probe's percentiles in order idle and loaded, the inflation their
/// ratio, RPM a minute over a round trip no faster than the fastest, every flow moved and
/// checked bytes, Jain's index in (0, 1].
fn check(record: &Value, flows: f64) {
    let label = record["label"].as_str().unwrap_or("?").to_string();
    assert!(record["error"].is_null(), "{label}: {}", record["error"]);
    let loaded_rt = value(record, "client", "transactions");
    if loaded_rt == 0.0 || value_of(record, "system", "load_gbps").is_none() {
        // A loaded 2-CPU machine can starve the probe or a flow through a short window.
        common::skip(&format!(
            "{label}: the probe or the flows were starved on this busy machine"
        ));
        return;
    }
    for pass in ["idle", "loaded"] {
        let q: Vec<f64> = ["p50", "p90", "p99", "p999"]
            .iter()
            .map(|p| value(record, "system", &format!("latency_{pass}_{p}_us")))
            .collect();
        assert!(
            q[0] > 0.0 && q.windows(2).all(|w| w[0] <= w[1]),
            "{label} {pass}: {q:?}"
        );
    }
    let (idle, loaded) = (
        value(record, "system", "latency_idle_p50_us"),
        value(record, "system", "latency_loaded_p50_us"),
    );
    let inflation = value(record, "system", "latency_inflation_p50");
    assert!(
        (inflation - loaded / idle).abs() <= 1e-6 * inflation.max(1.0),
        "{label}: {inflation}"
    );
    let rpm = value(record, "system", "rpm");
    assert!(
        rpm > 0.0 && rpm <= 60e6 / value(record, "system", "latency_loaded_p50_us") * 1e3,
        "{label}: {rpm}"
    );
    let jain = value(record, "system", "jain_index");
    assert!(
        jain > 0.0 && jain <= 1.0 + 1e-9 && jain >= 1.0 / flows - 1e-9,
        "{label}: {jain}"
    );
    let (min, max, sum) = (
        value(record, "system", "flow_min_gbps"),
        value(record, "system", "flow_max_gbps"),
        value(record, "system", "load_gbps"),
    );
    assert!(
        min <= max && max <= sum + 1e-9 && sum > 0.0,
        "{label}: {min} {max} {sum}"
    );
    for role in ["client", "server"] {
        assert_eq!(value(record, role, "corrupt_messages"), 0.0, "{label} {role}");
    }
    assert!(
        value(record, "client", "verified_messages") + value(record, "server", "verified_messages") > 0.0,
        "{label}"
    );
    // Every connection's TCP_INFO, as the window closed.
    assert!(value_of(record, "client", "tcpi_total_retrans").is_some(), "{label}");
}

/// Up, down and both: two flows each way with the probe beside them, every byte checked.
#[test]
fn the_probe_is_timed_idle_and_under_load_in_every_direction() {
    let records = run(&["--direction", "up,down,both", "--flows", "2", "--verify"]);
    assert_eq!(records.len(), 3);
    for (r, flows) in records.iter().zip([2.0, 2.0, 4.0]) {
        check(r, flows);
    }
}

/// The flows' modes as `net stream` takes them, zero-copy included (its buffers drained
/// before the flow ends).
#[test]
fn the_flows_run_in_any_send_mode() {
    let records = run(&["--mode", "two-copy,zero-copy", "--direction", "both", "--flows", "1"]);
    assert_eq!(records.len(), 2);
    for r in &records {
        assert!(r["error"].is_null(), "{}", r["error"]);
    }
}

/// `net serve` runs load sessions for a client with the key.
#[test]
fn net_serve_with_a_key_runs_it_over_connect() {
    let dir = tempfile::tempdir().unwrap();
    let key = common::psk_file(dir.path());
    let server = common::net_serve(&["--psk-file", &key]);
    let records = run(&[
        "--connect",
        &server.addr,
        "--psk-file",
        &key,
        "--direction",
        "both",
        "--verify",
    ]);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["case"]["endpoint"]["kind"], "remote");
    check(&records[0], 4.0);
    drop(server);
}

/// A server killed while the flows run: the cell ends with an error within the run's timeout
/// (no thread waits on a peer that is gone), and the command reports it.
#[test]
fn a_server_that_vanishes_under_load_ends_the_cell_with_an_error() {
    let server = common::net_serve(&[]);
    let child = common::iopath_child()
        .args([
            "net",
            "load",
            "--connect",
            &server.addr,
            "--idle",
            "300ms",
            "--warmup",
            "200ms",
        ])
        .args(["--duration", "20s", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    drop(server);
    let out = common::finish_within(child, Duration::from_secs(60));
    let records = json_records(&out);
    assert_eq!(records.len(), 1, "{}", stderr(&out));
    assert!(!records[0]["error"].is_null(), "the cell has no error: {}", records[0]);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, needle) in [
        (vec!["--flows", "0"], "--flows"),
        (vec!["--flows", "1000"], "--flows"),
        (vec!["--probe-size", "1M"], "--probe-size"),
        (vec!["--idle", "0"], "--idle"),
        (vec!["--direction", "sideways"], "sideways"),
        (
            vec!["--probe-rate", "20", "--duration", "200ms"],
            "--probe-rate 20/s fits 4 probes",
        ),
        (vec!["--probe-rate", "0"], "--probe-rate"),
        (vec!["--topology", "veth:queue=200ms"], "needs a rate"),
        (vec!["--cc", "x".repeat(20).leak()], "--cc"),
    ] {
        let mut argv = vec!["net", "load"];
        argv.extend(args);
        let err = usage_error(&argv);
        assert!(err.contains(needle), "{argv:?}: {err}");
    }
}

/// On a shaped link with a queue of its own (`queue=`: a router between the ends), the
/// queue's backlog and drops at both of the router's egress queues are read at the window's
/// edges, the flows keep the congestion control they were given, and the probe is paced.
#[test]
fn a_shaped_links_queue_is_evidence_beside_the_probe() {
    if !nix::unistd::geteuid().is_root() {
        common::skip("a veth pair needs root");
        return;
    }
    let records = run(&[
        "--topology",
        "veth:rate=100mbit,queue=20ms",
        "--direction",
        "down",
        "--flows",
        "1",
        "--cc",
        "reno",
        "--probe-rate",
        "200",
    ]);
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert!(record["error"].is_null(), "{}", record["error"]);
    assert_eq!(record["case"]["congestion"], "reno", "{}", record["case"]);
    assert_eq!(record["case"]["probe_interval_us"], 5000, "{}", record["case"]);
    for role in ["client", "server"] {
        for name in ["qdisc_backlog_open_bytes", "qdisc_backlog_close_bytes", "qdisc_drops"] {
            assert!(value_of(record, role, name).is_some(), "{role} {name}: {record}");
        }
    }
    // At 200 a second, the 500 ms window holds at most about 100 round trips (a late one
    // starts at once, none is made up for).
    let probes = value(record, "client", "transactions");
    assert!(probes <= 101.0, "{probes} round trips at 200/s in 500 ms");
}
