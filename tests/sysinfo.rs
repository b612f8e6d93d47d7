//! `iopath sysinfo` as a user runs it.

mod common;

use common::iopath;
use predicates::prelude::*;

#[test]
fn text_lists_the_machine() {
    iopath()
        .arg("sysinfo")
        .assert()
        .success()
        .stdout(predicate::str::contains("cpu"))
        .stdout(predicate::str::contains("tsc"))
        .stdout(predicate::str::contains("perf cycles"))
        .stdout(predicate::str::contains("memory traffic     ").and(predicate::str::contains("DRAM")))
        .stdout(predicate::str::contains("io_uring"))
        .stdout(predicate::str::contains("loopback mtu"))
        .stdout(predicate::str::contains("RLIMIT_MEMLOCK"));
}

#[test]
fn json_is_the_stored_description() {
    let out = iopath()
        .args(["sysinfo", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
    assert!(v["logical_cpus"].as_u64().unwrap_or(0) >= 1);
    for key in [
        "kernel",
        "cpu_model",
        "caches",
        "memory_total_bytes",
        "numa_nodes",
        "interfaces",
        "block_devices",
        "governor",
        "mitigations",
        "perf_events",
        "perf_event_paranoid",
        "io_uring",
        "optmem_max",
        "tcp_wmem",
        "tcp_rmem",
        "rlimit_memlock",
        "smt_active",
        "loopback_mtu",
        "tsc_invariant",
        "memory_traffic",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    // The memory-traffic counters: what was found, or one line saying why not.
    let lines: Vec<&str> = v["memory_traffic"]
        .as_array()
        .expect("memory_traffic lines")
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(lines.iter().any(|l| l.starts_with("DRAM")), "{lines:?}");
    // Every perf event either opens or says why not.
    for (name, status) in v["perf_events"].as_object().expect("perf_events map") {
        let s = status.as_str().unwrap_or("");
        assert!(s == "ok" || s.starts_with("unavailable: "), "{name}: {s}");
    }
    // Round-trips into the library type the store keeps.
    let m: iopath::sysinfo::Machine = serde_json::from_slice(&out).expect("Machine");
    assert_eq!(m.logical_cpus as u64, v["logical_cpus"].as_u64().unwrap());
}

#[test]
fn unknown_flag_is_refused() {
    iopath()
        .args(["sysinfo", "--bogus"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--bogus"));
}
