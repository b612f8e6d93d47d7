//! `net stream --rx-mode`: every receive mode with every send mode over loopback, what the
//! kernel really did on receive (the mapped fraction), the refusals, and the rx mode reaching a
//! separate `net serve` in the hello.

mod common;

use common::{iopath, json_records, net_serve, role_metric, stderr, usage_error, value};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::time::Duration;

/// `net stream` with short windows; the parsed JSON records.
fn stream(extra: &[&str]) -> Vec<Value> {
    let mut args = vec![
        "net",
        "stream",
        "--duration",
        "300ms",
        "--warmup",
        "100ms",
        "--no-perf",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = iopath().args(&args).timeout(Duration::from_secs(180)).output().unwrap();
    assert!(out.status.success(), "iopath {args:?} failed: {}", stderr(&out));
    json_records(&out)
}

fn label(record: &Value) -> &str {
    record["label"].as_str().unwrap()
}

/// Every send mode crossed with every receive mode that sees the bytes, verified: every
/// message arrives intact, and the case names the receive mode it ran.
#[test]
fn every_send_mode_with_every_verifiable_rx_mode_delivers_intact_bytes() {
    let records = stream(&[
        "--mode",
        "two-copy,one-copy,zero-copy",
        "--rx-mode",
        "copy,scatter,zerocopy",
        "--size",
        "4K,100000",
        "--verify",
    ]);
    assert_eq!(records.len(), 3 * 3 * 2);
    let mut seen = Vec::new();
    for r in &records {
        let l = label(r);
        assert!(value(r, "server", "verified_messages") > 0.0, "{l}: nothing verified");
        assert_eq!(value(r, "server", "corrupt_messages"), 0.0, "{l}: corrupted bytes");
        assert!(value(r, "system", "throughput_gbps") > 0.0, "{l}");
        let pair = (
            r["case"]["mode"].as_str().unwrap().to_string(),
            r["case"]["rx_mode"].as_str().unwrap().to_string(),
        );
        if !seen.contains(&pair) {
            seen.push(pair);
        }
    }
    assert_eq!(seen.len(), 9, "{seen:?}");
}

/// trunc: the kernel discards; every send mode runs, bytes are counted as received, and the
/// receiver made no copy (its syscalls each took a whole message or its rest).
#[test]
fn trunc_receives_from_every_send_mode() {
    let records = stream(&[
        "--mode",
        "two-copy,one-copy,zero-copy",
        "--rx-mode",
        "trunc",
        "--size",
        "64K",
    ]);
    assert_eq!(records.len(), 3);
    for r in &records {
        let l = label(r);
        assert!(l.contains("/trunc"), "{l}");
        assert_eq!(r["case"]["rx_mode"], "trunc");
        assert!(value(r, "server", "bytes_received") > 0.0, "{l}");
        assert!(value(r, "system", "throughput_gbps") > 0.0, "{l}");
        assert!(role_metric(r, "server", "verified_messages").is_none(), "{l}");
    }
}

/// TCP receive zero-copy maps pages on this kernel when a MSG_ZEROCOPY sender's data is
/// delivered locally into fresh pages (4096-byte segments: TCP_MAXSEG 4108); plain sendmsg
/// leaves nothing it can map, and the run says so.
#[test]
fn zerocopy_rx_maps_pages_from_a_zero_copy_sender_and_none_from_one_copy() {
    let records = stream(&[
        "--mode",
        "zero-copy,one-copy",
        "--rx-mode",
        "zerocopy",
        "--size",
        "64K",
        "--verify",
    ]);
    assert_eq!(records.len(), 2);
    for r in &records {
        let l = label(r);
        let fraction = role_metric(r, "server", "rx_mapped_fraction").unwrap();
        assert_eq!(fraction["source"], "kernel", "{l}: {fraction}");
        let mapped = value(r, "server", "rx_bytes_mapped");
        let copied = value(r, "server", "rx_bytes_copied");
        assert!(mapped + copied > 0.0, "{l}");
        assert_eq!(value(r, "server", "corrupt_messages"), 0.0, "{l}");
        match r["case"]["mode"].as_str().unwrap() {
            "zero-copy" => assert!(value(r, "server", "rx_mapped_fraction") > 0.0, "{l}: nothing mapped"),
            _ => {
                assert_eq!(value(r, "server", "rx_mapped_fraction"), 0.0, "{l}");
                let warnings = r["observation"]["warnings"].to_string();
                assert!(warnings.contains("mapped none"), "{l}: {warnings}");
            }
        }
    }
}

/// Without --rx-mode each send mode keeps the receiver it always had, and the case names it.
#[test]
fn no_rx_mode_keeps_the_old_pairing_and_names_it() {
    let records = stream(&["--mode", "two-copy,one-copy", "--size", "4K"]);
    let rx: Vec<(&str, &str)> = records
        .iter()
        .map(|r| (label(r), r["case"]["rx_mode"].as_str().unwrap()))
        .collect();
    assert_eq!(rx, vec![("two-copy 4KiB t1", "copy"), ("one-copy 4KiB t1", "scatter")]);
}

#[test]
fn bad_rx_modes_and_trunc_with_verify_are_one_line_exit_2() {
    let err = usage_error(&["net", "stream", "--rx-mode", "bogus"]);
    assert!(err.contains("accepted: copy, scatter, trunc, zerocopy"), "{err}");
    let err = usage_error(&["net", "stream", "--rx-mode", "scatter,trunc", "--verify"]);
    assert!(err.contains("--rx-mode trunc") && err.contains("--verify"), "{err}");
    let err = usage_error(&["sweep", "net-stream", "--rx-mode", "mmap"]);
    assert!(err.contains("unknown receive mode 'mmap'"), "{err}");
}

/// The receive mode travels in the hello: a separate `net serve` receives with it.
#[test]
fn net_serve_receives_in_the_mode_the_client_asks_for() {
    let server = net_serve(&["--once"]);
    let addr = server.addr.clone();
    let records = stream(&[
        "--connect",
        &addr,
        "--mode",
        "zero-copy",
        "--rx-mode",
        "zerocopy",
        "--size",
        "64K",
        "--verify",
    ]);
    drop(server);
    let r = &records[0];
    assert_eq!(r["case"]["rx_mode"], "zerocopy");
    // Only the zerocopy receiver reports what it mapped.
    let fraction = role_metric(r, "server", "rx_mapped_fraction").unwrap();
    assert_eq!(fraction["source"], "kernel", "{fraction}");
    assert!(value(r, "server", "verified_messages") > 0.0);
    assert_eq!(value(r, "server", "corrupt_messages"), 0.0);
}

/// A server whose kernel refuses the receive mode answers the hello with `unavailable`: the
/// cell is a result whose figures say why they are missing, not a failure.
#[test]
fn a_receive_mode_the_server_refuses_is_reported_unavailable() {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        let (control, _) = listener.accept().unwrap();
        control.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut writer = control.try_clone().unwrap();
        let mut line = String::new();
        BufReader::new(control).read_line(&mut line).unwrap();
        let hello: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(hello["case"]["rx_mode"], "zerocopy", "{line}");
        let answer = serde_json::json!({"type": "unavailable",
            "what": "TCP receive zero-copy (TCP_ZEROCOPY_RECEIVE)", "reason": "not supported here"});
        writeln!(writer, "{answer}").unwrap();
    });
    let records = stream(&[
        "--connect",
        &addr,
        "--mode",
        "one-copy",
        "--rx-mode",
        "zerocopy",
        "--size",
        "64K",
    ]);
    server.join().unwrap();
    let r = &records[0];
    let throughput = role_metric(r, "system", "throughput_gbps").unwrap();
    assert!(throughput["value"].is_null(), "{throughput}");
    assert_eq!(
        throughput["source"],
        "unavailable: TCP receive zero-copy (TCP_ZEROCOPY_RECEIVE) unavailable: not supported here"
    );
    let warnings = r["observation"]["warnings"].to_string();
    assert!(warnings.contains("not supported here"), "{warnings}");
}

/// In a private namespace (root only) the connections get TCP_MAXSEG 4108 like on loopback,
/// so a zero-copy sender's pages are mapped there too.
#[test]
fn zerocopy_rx_maps_pages_in_a_private_namespace() {
    if !nix::unistd::geteuid().is_root() {
        common::skip("namespaces need root");
        return;
    }
    let records = stream(&[
        "--topology",
        "netns",
        "--mode",
        "zero-copy",
        "--rx-mode",
        "zerocopy",
        "--size",
        "64K",
        "--verify",
    ]);
    let r = &records[0];
    assert!(value(r, "server", "rx_mapped_fraction") > 0.0, "{}", label(r));
    assert_eq!(value(r, "server", "corrupt_messages"), 0.0);
}
