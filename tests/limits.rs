//! Input that must be refused before anything is allocated or run: every numeric flag, list and
//! range is bounded with checked arithmetic, memory is checked for the whole process, and a bad
//! value is one line on stderr with exit code 2 — quickly, not after allocating gigabytes.

use std::time::{Duration, Instant};

fn refused(args: &[&str]) {
    let started = Instant::now();
    let out = assert_cmd::Command::cargo_bin("iopath")
        .unwrap()
        .args(args)
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: one line, got: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?} printed results");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{args:?} took {:?}",
        started.elapsed()
    );
}

#[test]
fn count_ranges_near_u64_max_are_refused() {
    refused(&["net", "stream", "--threads", "1..18446744073709551615"]);
    refused(&["sweep", "net-stream", "--threads", "18446744073709551616"]);
    refused(&["servers", "--clients", "1..18446744073709551615"]);
    refused(&["micro", "fs", "--procs", "1..18446744073709551615"]);
}

#[test]
fn cpu_lists_are_bounded_before_they_are_expanded() {
    refused(&["net", "stream", "--client-cpus", "0-18446744073709551615"]);
    refused(&["servers", "--server-cpus", "0-4294967296"]);
}

#[test]
fn samples_rates_sizes_and_durations_are_bounded() {
    refused(&["micro", "timer", "--samples", "18446744073709551615"]);
    refused(&["servers", "--rate", "18446744073709551615"]);
    refused(&["net", "stream", "--size", "16E"]);
    refused(&["net", "stream", "--duration", "100000h"]);
    refused(&["net", "stream", "--warmup", "0y"]);
    refused(&["servers", "--warmup", "0y"]);
}

#[test]
fn memory_is_checked_for_the_whole_process_in_every_path() {
    refused(&["net", "stream", "--size", "1G", "--threads", "64"]);
    refused(&["sweep", "net-stream", "--size", "1G", "--threads", "64"]);
    refused(&["micro", "memlat", "--max", "1000G"]);
}

#[test]
fn addresses_strides_programs_and_intervals_are_checked_before_running() {
    refused(&["net", "stream", "--connect", "127.0.0.1:0"]);
    refused(&["net", "stream", "--connect", "127.0.0.1:99999"]);
    refused(&["net", "stream", "--connect", ":5201"]);
    refused(&["micro", "memlat", "--min", "64"]);
    refused(&["micro", "proc", "--program", "/etc/passwd"]);
    refused(&["procs", "serve", "--interval", "1ms"]);
}

/// Refused with exit 2 in one line that contains `needle`.
fn refused_saying(args: &[&str], needle: &str) {
    refused(args);
    let out = assert_cmd::Command::cargo_bin("iopath")
        .unwrap()
        .args(args)
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(needle), "{args:?}: expected '{needle}' in: {stderr}");
}

/// Inputs read from files are bounded: a plan or key file that is a device (read forever
/// before) or a huge file is refused, quickly, with exit 2.
#[test]
fn plan_and_key_files_that_are_devices_or_huge_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge");
    // Sparse: 4 GiB that costs no disk.
    std::fs::File::create(&huge).unwrap().set_len(4 << 30).unwrap();
    let huge = huge.to_str().unwrap();
    for device in ["/dev/zero", "/dev/urandom", "/dev/full"] {
        refused_saying(&["sweep", "--plan", device], "not a file");
        refused_saying(&["net", "serve", "--psk-file", device], "not a file");
        refused_saying(
            &["net", "stream", "--connect", "127.0.0.1:9", "--psk-file", device],
            "not a file",
        );
    }
    refused_saying(&["sweep", "--plan", huge], "too large");
    refused_saying(&["net", "serve", "--psk-file", huge], "too large");
    refused_saying(
        &["net", "rr", "--connect", "127.0.0.1:9", "--psk-file", huge],
        "too large",
    );
    refused_saying(&["sweep", "--plan", "/proc/self/maps"], "--plan /proc/self/maps");
}

/// `--name` has a length limit (and no control characters).
#[test]
fn run_names_are_bounded() {
    let long = "n".repeat(201);
    refused_saying(&["fake", "--cells", "ok", "--name", &long], "at most 200");
    refused_saying(&["fake", "--cells", "ok", "--name", "a\u{1b}[2Jb"], "control character");
    refused_saying(&["fake", "--cells", "ok", "--name", ""], "empty");
}

/// Issue 31.7: a flag has one bound and one message, whatever the value: `--threads` of every
/// network command says the range its workload accepts for 1025, 999999, 1000001 and far
/// beyond (the parser once said 1 to 1000000 above a million and the workload 1 to 1024
/// below it); `--rcvbuf` is one range for udp-stream and udp-rr (udp-rr accepted 100).
#[test]
fn each_flag_has_one_bound_and_one_message_for_every_value() {
    for (command, range) in [
        (&["net", "stream"][..], "accepted: 1 to 1024"),
        (&["net", "rr"][..], "accepted: 1 to 1024"),
        (&["net", "crr"][..], "accepted: 1 to 1024"),
        (&["net", "udp-rr"][..], "accepted: 1 to 1024"),
        (&["net", "udp-stream"][..], "accepted: 1 to 1024"),
        (&["net", "records"][..], "accepted: 1 to 256"),
        (&["sweep", "net-udp-rr"][..], "accepted: 1 to 1024"),
    ] {
        let too_many = if range.ends_with("256") { "257" } else { "1025" };
        for value in [too_many, "999999", "1000000", "1000001", "99999999999"] {
            let mut args = command.to_vec();
            args.extend(["--threads", value]);
            refused_saying(&args, range);
        }
    }
    for command in [["net", "udp-rr"], ["net", "udp-stream"]] {
        for value in ["1", "100", "255"] {
            let mut args = command.to_vec();
            args.extend(["--rcvbuf", value]);
            refused_saying(&args, "--rcvbuf");
            refused_saying(&args, "accepted 256 B to 1 GiB");
        }
    }
}
