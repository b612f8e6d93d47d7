//! `iopath ab`: interleaved A/B of a setting in one run. Refusals before anything changes;
//! a setting that changes nothing passes and one that changes the result is found; the
//! variants are stored per case and read back by `ab --show` and `compare RUN RUN`; and a
//! host setting is back after SIGINT, SIGTERM, and SIGKILL + the next start. The host is never
//! changed: host settings are tried inside a network namespace the test makes (`ip netns
//! exec`), topology settings inside iopath's own namespaces.

mod common;

use common::{count, iopath, skip, stderr, stdout, temp_db, usage_error};
use nix::sys::signal::Signal;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const AUTOCORKING: &str = "/proc/sys/net/ipv4/tcp_autocorking";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn bad_settings_are_refused_in_one_line_before_anything_changes() {
    let (_dir, db) = temp_db("ab-refused");
    let fake = ["--", "fake", "--cells", "ok:5", "--reps", "6"];
    let refused = |set: &[&str], expect: &str| {
        let mut args = vec!["ab", "--db", s(&db)];
        args.extend_from_slice(set);
        args.extend_from_slice(&fake);
        let err = usage_error(&args);
        assert!(err.contains(expect), "{set:?}: {err}");
        assert!(!db.exists(), "{set:?} created the database");
    };
    refused(&["--set", "nope:x=1"], "unknown setting kind 'nope'");
    refused(&["--set", "dev:lo:lro=off"], "unknown device setting 'lro'");
    refused(
        &["--host-settings", "--set", "sysctl:net.ipv4.no_such_sysctl=1"],
        "no sysctl net.ipv4.no_such_sysctl",
    );
    refused(
        &["--host-settings", "--set", "dev:iopathnone0:gro=off"],
        "no network device iopathnone0",
    );
    refused(&["--set", "flag:--no-such-flag=1"], "--no-such-flag");
    // Loopback: a system setting would change the host itself.
    refused(&["--set", "sysctl:net.ipv4.tcp_autocorking=0"], "--host-settings");
    // Inside a topology, a device is the server's or the client's end.
    let err = usage_error(&[
        "ab",
        "--db",
        s(&db),
        "--set",
        "dev:eth0:gro=off",
        "--",
        "net",
        "stream",
        "--topology",
        "netns",
    ]);
    assert!(err.contains("`server`"), "{err}");
    refused(&["--set", "flag:--cells=ok:6"], "");
}

/// A flag that changes no case and a deterministic workload: every pair's ratio is exactly 1,
/// the interval lies inside the band, and the gate passes (exit 0).
#[test]
fn a_flag_that_changes_nothing_passes_and_the_run_reads_back() {
    let (_dir, db) = temp_db("ab-noop");
    let out = iopath()
        .args([
            "ab",
            "--fail-on-regression",
            "--db",
            s(&db),
            "--set",
            "flag:--warmup-cell",
        ])
        .args(["--", "fake", "--cells", "ok:5,ok:7", "--reps", "6"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.contains("whole run (12 pairs): no change"), "{text}");
    // One run, its cases carrying their variant: 2 of A, 2 of B; 24 cells.
    assert_eq!(count(&db, "SELECT count(*) FROM runs"), 1);
    assert_eq!(count(&db, "SELECT count(*) FROM case_variants WHERE variant = 'A'"), 2);
    assert_eq!(count(&db, "SELECT count(*) FROM case_variants WHERE variant = 'B'"), 2);
    assert_eq!(common::stored_cells(&db), 24);
    // ABBA: the stored cells alternate which variant of a pair ran first.
    let show = iopath()
        .args(["ab", "--show", "1", "--db", s(&db), "--json"])
        .output()
        .unwrap();
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    let doc: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(doc["type"], "ab");
    assert_eq!(doc["gate"]["exit_code"], 0);
    assert_eq!(doc["analysis"]["rows"].as_array().unwrap().len(), 2);
    let compare = iopath().args(["compare", "1", "1", "--db", s(&db)]).output().unwrap();
    assert_eq!(compare.status.code(), Some(0), "{}", stderr(&compare));
    assert!(
        stdout(&compare).contains("A/B of flag:--warmup-cell"),
        "{}",
        stdout(&compare)
    );
    // A merged copy is the same A/B run.
    let merged = db.with_file_name("merged.db");
    let out = iopath().args(["merge", s(&merged), s(&db)]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let again = iopath()
        .args(["ab", "--show", "1", "--db", s(&merged), "--json"])
        .output()
        .unwrap();
    assert_eq!(again.stdout, show.stdout, "{}", stderr(&again));
    // Its settings are not kept for a resume.
    let err = usage_error(&["sweep", "--resume", "1", "--db", s(&db)]);
    assert!(err.contains("A/B run"), "{err}");
    // Any other run is not an A/B run.
    let err = usage_error(&["ab", "--show", "2", "--db", s(&db)]);
    assert!(err.contains("no run 2") || err.contains("not an A/B run"), "{err}");
}

fn namespaces_unavailable() -> Option<&'static str> {
    if !nix::unistd::geteuid().is_root() {
        return Some("needs root for a network namespace");
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("needs iproute2 (ip)");
    }
    None
}

/// A tbf of 20 Mbit/s on the client's end of the veth against none: B is hundreds of times
/// slower, far beyond anything load does, and `--fail-on-regression` exits 1. Eight pairs: on
/// a starved machine a pair can go without a value (a run beside two builds kept 5 of 6, too
/// few for the signed-rank test), and six or more still decide.
#[test]
fn a_tbf_rate_on_the_topology_is_found() {
    if let Some(why) = namespaces_unavailable() {
        return skip(why);
    }
    let (_dir, db) = temp_db("ab-tbf");
    let out = iopath()
        .args(["ab", "--fail-on-regression", "--db", s(&db)])
        .args(["--set", "qdisc:client:tbf rate 20mbit burst 32kb latency 50ms"])
        .args([
            "--",
            "net",
            "stream",
            "--topology",
            "veth",
            "--mode",
            "two-copy",
            "--size",
            "64K",
        ])
        .args(["--duration", "300ms", "--warmup", "100ms", "--reps", "8"])
        .timeout(Duration::from_secs(240))
        .output()
        .unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(text.contains("pairs): slower"), "{text}");
    assert!(stderr(&out).contains("worse with B"), "{}", stderr(&out));
    // The host's qdiscs never saw it: the setting lived on iopath's own veth pair.
    assert_eq!(count(&db, "SELECT count(*) FROM setting_journal"), 0);
}

/// A named network namespace of the test's own, deleted on drop: the "host" of a
/// `--host-settings` run, so the real host never changes.
struct TestNs(String);

impl TestNs {
    fn new(tag: &str) -> TestNs {
        let name = format!("iopab{}{tag}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .unwrap()
            .success();
        assert!(ok, "ip netns add {name}");
        TestNs(name)
    }

    fn read(&self, path: &str) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.0, "cat", path])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn iopath(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0]).arg(common::bin()).args(args);
        c
    }

    /// Poll until `path` reads `value` (B applied), at most `limit`.
    fn wait_for(&self, path: &str, value: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.read(path) != value {
            assert!(Instant::now() < deadline, "{path} never read {value}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for TestNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn host_ab(ns: &TestNs, db: &Path, cells: &str, reps: &str) -> std::process::Child {
    ns.iopath(&[
        "ab",
        "--host-settings",
        "--db",
        s(db),
        "--set",
        "sysctl:net.ipv4.tcp_autocorking=0",
        "--",
        "fake",
        "--cells",
        cells,
        "--reps",
        reps,
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

/// A host setting that changes nothing of a deterministic workload passes, is printed before
/// the run and is back at the end, its journal row marked restored.
#[test]
fn a_host_setting_is_printed_applied_and_put_back() {
    if let Some(why) = namespaces_unavailable() {
        return skip(why);
    }
    let ns = TestNs::new("a");
    assert_eq!(ns.read(AUTOCORKING), "1");
    let (_dir, db) = temp_db("ab-host");
    let out = common::finish_within(host_ab(&ns, &db, "ok:5", "6"), Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("host setting: variant B sets sysctl:net.ipv4.tcp_autocorking=0 on this host (now sysctl:net.ipv4.tcp_autocorking=1)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(ns.read(AUTOCORKING), "1");
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM setting_journal WHERE restored_at IS NOT NULL"
        ),
        1
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM setting_journal WHERE restored_at IS NULL"),
        0
    );
}

#[test]
fn a_host_setting_is_back_after_sigint_and_sigterm() {
    if let Some(why) = namespaces_unavailable() {
        return skip(why);
    }
    for (tag, signal) in [("i", Signal::SIGINT), ("t", Signal::SIGTERM), ("h", Signal::SIGHUP)] {
        let ns = TestNs::new(tag);
        let (_dir, db) = temp_db("ab-signal");
        let child = host_ab(&ns, &db, "sleep:200ms", "50");
        // The first pair is A B: wait until B's value is set, then stop the run.
        ns.wait_for(AUTOCORKING, "0", Duration::from_secs(60));
        common::signal(&child, signal);
        let out = common::finish_within(child, Duration::from_secs(30));
        assert!(stderr(&out).contains("stopped:"), "{signal}: {}", stderr(&out));
        assert_eq!(ns.read(AUTOCORKING), "1", "{signal}: {}", stderr(&out));
        assert_eq!(
            count(&db, "SELECT count(*) FROM setting_journal WHERE restored_at IS NULL"),
            0
        );
    }
}

#[test]
fn a_host_setting_is_back_after_sigkill_at_the_next_start() {
    if let Some(why) = namespaces_unavailable() {
        return skip(why);
    }
    let ns = TestNs::new("k");
    // The default database of the folder the later command runs in.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("iopath-results").join("iopath.db");
    let mut child = host_ab(&ns, &db, "sleep:200ms", "50");
    ns.wait_for(AUTOCORKING, "0", Duration::from_secs(60));
    common::signal(&child, Signal::SIGKILL);
    let _ = child.wait();
    // Nothing could put it back: the journal holds the original.
    assert_eq!(ns.read(AUTOCORKING), "0");
    assert_eq!(
        count(&db, "SELECT count(*) FROM setting_journal WHERE restored_at IS NULL"),
        1
    );
    // Another namespace's iopath leaves it alone (and says so).
    let elsewhere = iopath()
        .args(["fake", "--cells", "ok:1", "--db", s(&db)])
        .output()
        .unwrap();
    assert!(
        stderr(&elsewhere).contains("another network namespace"),
        "{}",
        stderr(&elsewhere)
    );
    assert_eq!(ns.read(AUTOCORKING), "0");
    // The next measuring command started there, even one that stores nothing, puts it back
    // (the journal is in the default database of its folder) and says so in one line.
    let out = ns
        .iopath(&["fake", "--cells", "ok:1"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said: Vec<String> = stderr(&out)
        .lines()
        .filter(|l| l.starts_with("restored"))
        .map(String::from)
        .collect();
    assert_eq!(said.len(), 1, "{}", stderr(&out));
    assert!(said[0].contains("sysctl:net.ipv4.tcp_autocorking=1"), "{}", said[0]);
    assert_eq!(ns.read(AUTOCORKING), "1");
    assert_eq!(
        count(&db, "SELECT count(*) FROM setting_journal WHERE restored_at IS NULL"),
        0
    );
}
