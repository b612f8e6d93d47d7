//! `iopath net udp-rr`: every send × receive mode over loopback with --verify and no loss at
//! a low rate, loss counted (not hanging) when the server's receive buffer is made tiny, a
//! veth pair (root), a remote `net serve` with a pre-shared key, and bad flags (exit 2).

mod common;

use common::{iopath, json_records, role_metric, stderr, usage_error, value};
use serde_json::Value;
use std::time::Duration;

fn run(args: &[&str]) -> Vec<Value> {
    let out = iopath()
        .args(["net", "udp-rr"])
        .args(args)
        .args(["--warmup", "50ms", "--no-perf", "--json"])
        .timeout(Duration::from_secs(180))
        .output()
        .unwrap();
    assert!(out.status.success(), "iopath net udp-rr {args:?}: {}", stderr(&out));
    json_records(&out)
}

/// The reason a cell reads unavailable, if it does.
fn unavailable(record: &Value) -> Option<String> {
    let m = role_metric(record, "client", "latency_p50_us")?;
    if !m["value"].is_null() {
        return None;
    }
    m["source"].as_str().map(str::to_string)
}

/// A measured cell at a rate well below capacity: transactions, none lost, every byte of
/// every datagram checked and intact on both ends, a server that answered.
fn check_lossless(record: &Value) {
    let label = record["label"].as_str().unwrap_or("?").to_string();
    assert!(record["error"].is_null(), "{label}: {}", record["error"]);
    let transactions = value(record, "client", "transactions");
    let served = value(record, "server", "transactions_served");
    if transactions == 0.0 || served == 0.0 {
        // A loaded machine can starve either end through a whole short window (as for TCP rr).
        common::skip(&format!("{label}: no transaction inside a window on this busy machine"));
        return;
    }
    let lost = value(record, "client", "txn_lost");
    if lost > 0.0 {
        // Below capacity a transaction is lost only when a starved end let a socket buffer
        // overflow (the kernel counts the drop) or answered after the loss timeout (a late
        // reply): both are the machine's load, and then one of them is there to say so.
        let drops: f64 = ["client", "server"]
            .iter()
            .filter_map(|role| common::value_of(record, role, "socket_drops"))
            .sum();
        let late = value(record, "client", "replies_late");
        assert!(
            drops + late > 0.0,
            "{label}: {lost} lost with no drop and no late reply"
        );
        common::skip(&format!("{label}: {lost} transactions lost on this busy machine"));
        return;
    }
    assert_eq!(value(record, "client", "replies_duplicate"), 0.0, "{label}");
    for role in ["client", "server"] {
        assert_eq!(value(record, role, "corrupt_messages"), 0.0, "{label} {role}");
        assert!(value(record, role, "verified_messages") > 0.0, "{label} {role}");
    }
    let p50 = value(record, "client", "latency_p50_us");
    let p99 = value(record, "client", "latency_p99_us");
    assert!(p50 > 0.0 && p50 <= p99, "{label}: p50 {p50} p99 {p99}");
    // How many requests one call carries depends on the mode and on how late a starved
    // thread woke, so the calls per transaction have no floor above 0 that load cannot cross.
    assert!(value(record, "client", "syscalls_per_txn") > 0.0, "{label}");
}

/// Every send mode with every receive mode, two requests in flight (so the batching modes
/// have two to batch), paced at 200 transactions/s: none lost within 2 s, all verified.
#[test]
fn every_mode_pair_moves_verified_datagrams_without_loss_on_loopback() {
    let records = run(&[
        "--mode",
        "send,sendmsg,sendmmsg,gso,zerocopy,uring",
        "--rx-mode",
        "recv,recvmmsg,gro",
        "--inflight",
        "2",
        "--rate",
        "200",
        "--loss-timeout",
        "2s",
        "--request-size",
        "100",
        "--response-size",
        "1K",
        "--duration",
        "250ms",
        "--verify",
    ]);
    assert_eq!(records.len(), 18);
    for r in &records {
        match unavailable(r) {
            // A mode this kernel refuses is a result saying so, never a failure.
            Some(reason) => {
                assert!(reason.starts_with("unavailable: "), "{}: {reason}", r["label"]);
                common::skip(&format!("{}: {reason}", r["label"]));
            }
            None => check_lossless(r),
        }
    }
}

/// With one request in flight, sendmmsg and gso have nothing to batch: the cell reads
/// unavailable saying why, and the run succeeds.
#[test]
fn batching_modes_with_one_in_flight_are_unavailable_with_the_reason() {
    let records = run(&["--mode", "sendmmsg,gso", "--duration", "100ms"]);
    assert_eq!(records.len(), 2);
    for r in &records {
        let reason = unavailable(r).unwrap_or_else(|| panic!("{} was measured", r["label"]));
        assert!(reason.contains("batches nothing"), "{reason}");
        assert!(reason.contains("--inflight 2"), "{reason}");
    }
}

/// A receive buffer of the kernel's minimum on both ends and 64 requests sent at once: the
/// kernel drops datagrams, the client counts the transactions lost within the timeout, sends
/// new ones in their place and the run ends on time.
#[test]
fn loss_is_counted_not_waited_for_when_the_kernel_drops() {
    let records = run(&[
        "--mode",
        "sendmmsg",
        "--rx-mode",
        "recv",
        "--inflight",
        "64",
        "--rcvbuf",
        "256",
        "--loss-timeout",
        "20ms",
        "--duration",
        "300ms",
        "--verify",
    ]);
    let r = &records[0];
    assert!(r["error"].is_null(), "{}", r["error"]);
    let lost = value(r, "client", "txn_lost");
    assert!(lost > 0.0, "no loss with a tiny receive buffer: {r}");
    let fraction = value(r, "client", "txn_lost_fraction");
    assert!(fraction > 0.0 && fraction <= 1.0, "{fraction}");
    // The kernel's own count of what it dropped at the sockets, where it gives one.
    let drops: f64 = ["client", "server"]
        .iter()
        .filter_map(|role| common::value_of(r, role, "socket_drops"))
        .sum();
    match role_metric(r, "server", "socket_drops").map(|m| m["value"].is_null()) {
        Some(false) => assert!(drops > 0.0, "{r}"),
        _ => common::skip("SO_RXQ_OVFL gave no count here"),
    }
    // What the kernel granted, read back: at least what was asked.
    assert!(value(r, "server", "rcvbuf_bytes") >= 1.0);
    assert_eq!(value(r, "client", "corrupt_messages"), 0.0);
}

#[test]
fn a_veth_pair_moves_verified_datagrams_without_loss() {
    if !nix::unistd::geteuid().is_root() {
        common::skip("a veth pair needs root");
        return;
    }
    let records = run(&[
        "--topology",
        "veth",
        "--mode",
        "send,sendmsg,sendmmsg,gso,zerocopy,uring",
        "--rx-mode",
        "recv,recvmmsg,gro",
        "--inflight",
        "2",
        "--rate",
        "200",
        "--loss-timeout",
        "2s",
        "--duration",
        "250ms",
        "--verify",
    ]);
    // Every send mode with every receive mode, as over loopback.
    assert_eq!(records.len(), 18);
    for r in &records {
        assert_eq!(r["case"]["endpoint"]["kind"], "veth");
        match unavailable(r) {
            Some(reason) => common::skip(&format!("{}: {reason}", r["label"])),
            None => check_lossless(r),
        }
    }
}

/// `net serve` with a pre-shared key serves a udp-rr session to a client holding the key.
#[test]
fn net_serve_with_a_key_runs_it_over_connect() {
    let dir = tempfile::tempdir().unwrap();
    let key = common::psk_file(dir.path());
    let key = key.as_str();
    let server = common::net_serve(&["--psk-file", key]);
    let records = run(&[
        "--connect",
        &server.addr,
        "--psk-file",
        key,
        "--threads",
        "2",
        "--rate",
        "200",
        "--loss-timeout",
        "2s",
        "--duration",
        "250ms",
        "--verify",
    ]);
    assert_eq!(records.len(), 2, "send and sendmsg");
    for r in &records {
        assert_eq!(r["case"]["endpoint"]["kind"], "remote");
        check_lossless(r);
    }
    drop(server);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, needle) in [
        (vec!["--request-size", "8"], "--request-size 8"),
        (vec!["--response-size", "100K"], "65507"),
        (vec!["--inflight", "65"], "accepted 1 to 64"),
        (vec!["--loss-timeout", "30s"], "--loss-timeout"),
        (vec!["--mode", "sendfile"], "accepted: send, sendmsg"),
        (vec!["--rx-mode", "zerocopy"], "accepted: recv, recvmmsg, gro"),
    ] {
        let argv: Vec<&str> = ["net", "udp-rr"].into_iter().chain(args.iter().copied()).collect();
        let err = usage_error(&argv);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// A stop in a 30 s window ends the case as interrupted within the promised time, with no
/// client, server or greeting thread left behind (in-process, loopback).
#[test]
fn a_stop_in_a_30s_window_ends_it_with_nothing_left() {
    use iopath::case::{NetParams, UdpRecvMode, UdpRrCase, UdpSendMode};
    let case = UdpRrCase {
        mode: UdpSendMode::Sendmmsg,
        rx_mode: UdpRecvMode::Recvmmsg,
        request_size: 64,
        response_size: 64,
        inflight: 4,
        rate: None,
        loss_timeout_ms: 200,
        rcvbuf: None,
        net: NetParams {
            threads: 2,
            duration_ms: 30_000,
            verify: true,
            ..NetParams::for_test()
        },
    };
    let stop = iopath::stop::Stop::fresh();
    common::assert_stops_as_interrupted(
        move || iopath::net::workload::udp_rr::run(&case, stop, &Default::default()),
        stop,
        Duration::from_millis(1200),
        &["iopath-udp-rr", "iopath-server", "iopath-greet"],
    );
}
