//! `iopath micro fs --remote`: local vs remote per-block reads over a real SSH file server
//! (sshd + sftp-server in a private network namespace, mounted with sshfs). It prints the
//! local and remote times and the penalty, and leaves nothing behind — no mount in
//! /proc/mounts, no process, no namespace member, no scratch file — after a normal run and
//! after SIGKILL of iopath. Needs root and the Debian packages openssh-server,
//! openssh-sftp-server and sshfs (scripts/test installs them as root); without root or one of
//! them these tests skip, saying which.

mod common;

use common::netns::is_root;
use common::{iopath, iopath_child, json_records, metric, missing_program, sigint, skip, stderr, temp_db};
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The tests here look at every process of the machine: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The programs the remote setup runs.
const SETUP: [&str; 6] = ["sshd", "sshfs", "ssh", "sftp-server", "unshare", "nsenter"];

/// Why the remote setup cannot run here (not root, or a program of it missing), or None.
fn remote_setup_missing() -> Option<String> {
    if !is_root() {
        return Some("needs root to run sshd in a network namespace and mount sshfs".into());
    }
    [
        "/usr/sbin/sshd",
        "/usr/lib/openssh/sftp-server",
        "sshfs",
        "ssh",
        "unshare",
        "nsenter",
    ]
    .into_iter()
    .find_map(missing_program)
}

/// Live (not zombie) processes of the setup's programs: pid and name.
fn setup_processes() -> BTreeSet<(u32, String)> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let state = stat[close + 1..].trim_start().chars().next().unwrap_or('?');
        if SETUP.contains(&comm) && state != 'Z' && state != 'X' {
            out.insert((pid, comm.to_string()));
        }
    }
    out
}

/// Mounts of the root namespace that are sshfs or lie under `dir`.
fn stray_mounts(dir: &str) -> Vec<String> {
    std::fs::read_to_string("/proc/mounts")
        .expect("read /proc/mounts")
        .lines()
        .filter(|l| l.contains("sshfs") || l.contains(dir))
        .map(String::from)
        .collect()
}

/// The parent of `pid`, from /proc/<pid>/stat.
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(1)?.parse().ok()
}

fn descends_from(mut pid: u32, ancestor: u32) -> bool {
    for _ in 0..64 {
        match parent(pid) {
            Some(p) if p == ancestor => return true,
            Some(p) if p > 1 => pid = p,
            _ => return false,
        }
    }
    false
}

#[test]
fn remote_reads_print_local_remote_and_the_penalty_and_leave_nothing() {
    if let Some(why) = remote_setup_missing() {
        return skip(&why);
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let before = setup_processes();
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().to_str().expect("utf-8 path");
    let (db_dir, db) = temp_db("remote.db");
    let out = iopath()
        .args(["micro", "fs", "--remote=rate=1gbit", "--quick", "--json", "--dir", d])
        .arg("--db")
        .arg(&db)
        .args(["--variant", "seq_read,contention", "--file-size", "64K", "--procs", "2"])
        .output()
        .expect("run iopath");
    assert!(out.status.success(), "iopath failed: {}", stderr(&out));
    let records = json_records(&out);
    assert_eq!(records.len(), 2, "one seq_read and one contention case");
    for r in &records {
        let label = r["label"].as_str().unwrap_or("?");
        assert!(
            label.contains("remote=sshfs") && label.contains("link=rate=1gbit"),
            "{label}"
        );
        for name in ["local_time_per_read_us", "remote_time_per_read_us"] {
            let m = metric(r, name).unwrap_or_else(|| panic!("{label}: no {name}"));
            assert_eq!(m["unit"], "us");
            assert_eq!(m["source"], "tool");
            let v = m["value"]
                .as_f64()
                .unwrap_or_else(|| panic!("{label}: {name} has no value: {m}"));
            assert!(v.is_finite() && v > 0.0, "{label}: {name} = {v}");
            assert!(
                metric(r, &format!("{name}_ci95_low")).is_some(),
                "{label}: {name} has no interval"
            );
        }
        // The penalty is measured pass by pass; it may be unavailable (at or below zero)
        // but it is always reported, with its interval when it has a value.
        let p = metric(r, "penalty_per_read_us").unwrap_or_else(|| panic!("{label}: no penalty"));
        assert_eq!(p["unit"], "us");
        if p["value"].as_f64().is_some() {
            assert!(metric(r, "penalty_per_read_us_ci95_high").is_some());
        }
        // The mount is FUSE (statfs f_type 0x65735546), and the report says what was measured.
        let magic = metric(r, "remote_fs_type_magic").and_then(|m| m["value"].as_f64());
        assert_eq!(magic, Some(f64::from(0x6573_5546u32)), "{label}");
        let warnings = r["observation"]["warnings"].to_string();
        assert!(warnings.contains("sshfs (FUSE"), "{label}: {warnings}");
    }
    let readers = metric(&records[1], "readers").and_then(|m| m["value"].as_f64());
    assert_eq!(readers, Some(2.0));
    // Nothing left: every process of the setup gone (the teardown waits for them), no
    // mount, the scratch directory removed.
    let after = setup_processes();
    let new: Vec<_> = after.difference(&before).collect();
    assert!(new.is_empty(), "left behind: {new:?}");
    assert_eq!(stray_mounts(d), Vec::<String>::new());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "scratch files left: {left:?}");
    // The report draws remote vs local: by file size, and against the readers.
    let html = db_dir.path().join("report.html");
    let out = iopath()
        .arg("report")
        .arg("--db")
        .arg(&db)
        .arg("-o")
        .arg(&html)
        .output()
        .expect("run report");
    assert!(out.status.success(), "report failed: {}", stderr(&out));
    for stem in ["fs_remote_vs_local", "fs_remote_contention"] {
        let svg = db_dir.path().join("report-charts").join(format!("{stem}.svg"));
        let text = std::fs::read_to_string(&svg).unwrap_or_else(|e| panic!("{}: {e}", svg.display()));
        assert!(
            text.contains("remote (sshfs)") && text.contains("local"),
            "{stem}: no remote and local lines"
        );
    }
}

/// How a run under test ends.
enum Ending {
    Sigkill,
    CtrlC,
    CtrlCTwice,
}

#[test]
fn sigkill_of_iopath_leaves_no_process_mount_or_namespace() {
    ended_by(Ending::Sigkill);
}

#[test]
fn ctrl_c_once_or_twice_leaves_no_process_mount_or_namespace() {
    ended_by(Ending::CtrlC);
    ended_by(Ending::CtrlCTwice);
}

/// Start a long remote run, wait until its server and mount are up, end it so, and check
/// that nothing of the setup is left.
fn ended_by(ending: Ending) {
    if let Some(why) = remote_setup_missing() {
        return skip(&why);
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().to_str().expect("utf-8 path");
    let mut child = iopath_child()
        .args(["micro", "fs", "--remote", "--json", "--dir", d])
        .args(["--variant", "seq_read", "--file-size", "16M", "--samples", "50"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start iopath");
    let pid = child.id();
    // Wait until the server and the mount are up: an sshfs and an sshd below iopath.
    let start = Instant::now();
    let ours = loop {
        let ours: Vec<(u32, String)> = setup_processes()
            .into_iter()
            .filter(|(p, _)| descends_from(*p, pid))
            .collect();
        let has = |name: &str| ours.iter().any(|(_, n)| n == name);
        if has("sshfs") && has("sshd") && has("ssh") {
            break ours;
        }
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("iopath ended ({status}) before the remote setup was seen");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no sshfs/sshd below iopath within 60 s: {ours:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // The namespaces the setup runs in: made by iopath, not its own.
    let own = net_ns(pid);
    let namespaces: BTreeSet<std::path::PathBuf> = ours
        .iter()
        .filter_map(|(p, _)| net_ns(*p))
        .filter(|ns| Some(ns) != own.as_ref())
        .collect();
    assert_eq!(
        namespaces.len(),
        2,
        "sshd and sshfs each in a namespace of their own: {namespaces:?}"
    );
    // The mount lives in a private mount namespace: the root namespace never sees it.
    assert_eq!(stray_mounts(d), Vec::<String>::new());
    match ending {
        Ending::Sigkill => child.kill().expect("SIGKILL iopath"),
        Ending::CtrlC => sigint(&child),
        Ending::CtrlCTwice => {
            sigint(&child);
            std::thread::sleep(Duration::from_millis(20));
            sigint(&child);
        }
    }
    let start = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "iopath did not end within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Everything of the setup dies with it (a stop: the case's teardown; a forced exit: its
    // action; SIGKILL: PR_SET_PDEATHSIG, then the PID namespaces).
    let start = Instant::now();
    loop {
        let alive = setup_processes();
        let left: Vec<_> = ours.iter().filter(|p| alive.contains(p)).collect();
        if left.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "left behind after SIGKILL: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(stray_mounts(d), Vec::<String>::new());
    // No process is left in the network namespaces iopath made (sshd's and sshfs's): once
    // they have no member and iopath's descriptors are closed, the kernel destroys them.
    let members = |inodes: &BTreeSet<std::path::PathBuf>| -> Vec<u32> {
        std::fs::read_dir("/proc")
            .expect("read /proc")
            .flatten()
            .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
            .filter(|p| net_ns(*p).is_some_and(|ns| inodes.contains(&ns)))
            .collect()
    };
    assert!(!namespaces.is_empty());
    assert_eq!(
        members(&namespaces),
        Vec::<u32>::new(),
        "processes left in {namespaces:?}"
    );
}

/// The network namespace of `pid`, as its /proc link reads (`net:[inode]`).
fn net_ns(pid: u32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()
}

#[test]
fn bad_remote_options_exit_2_with_one_line() {
    for (args, says) in [
        (vec!["fs", "--remote=rate=fast"], "--remote=rate=fast is not accepted"),
        (
            vec!["fs", "--remote", "--block-size", "1000"],
            "--block-size 1000 is not accepted",
        ),
        (
            vec!["fs", "--block-size", "4K"],
            "--block-size is for micro fs --remote only",
        ),
        (vec!["tcp", "--remote"], "--remote is for micro fs only"),
        (vec!["fs", "--remote", "--variant", "cache_read"], "not cache_read"),
    ] {
        let out = iopath().arg("micro").args(&args).output().expect("run iopath");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

/// Issue 31, item 6: `--dir` given as a relative path works for a remote case as for a local
/// one (sshd and sshfs run elsewhere than this folder: the case stores the absolute path).
#[test]
fn a_relative_dir_is_resolved_for_the_remote_setup() {
    if let Some(why) = remote_setup_missing() {
        return skip(&why);
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("scratch-space")).expect("sub folder");
    std::fs::create_dir(dir.path().join("scratch space")).expect("sub folder");
    let (_db_dir, db) = temp_db("relative.db");
    let out = iopath()
        .current_dir(dir.path())
        .args([
            "micro",
            "fs",
            "--remote",
            "--quick",
            "--json",
            "--dir",
            "./scratch-space/../scratch-space",
        ])
        .args(["--variant", "seq_read", "--file-size", "64K", "--db"])
        .arg(&db)
        .output()
        .expect("run iopath");
    assert!(out.status.success(), "iopath failed: {}", stderr(&out));
    let records = json_records(&out);
    let m = metric(&records[0], "remote_time_per_read_us").expect("remote figure");
    assert!(m["value"].as_f64().is_some_and(|v| v > 0.0), "{m}");
    let stored: String = rusqlite::Connection::open(&db)
        .expect("db")
        .query_row("SELECT case_json FROM cases", [], |r| r.get(0))
        .expect("one case");
    let absolute = std::fs::canonicalize(dir.path().join("scratch-space")).expect("canonical");
    assert!(stored.contains(&*absolute.to_string_lossy()), "{stored}");
    assert_eq!(
        std::fs::read_dir(dir.path().join("scratch-space"))
            .expect("dir")
            .count(),
        0
    );
    // A folder the setup cannot name (sshd's configuration, sshfs's options): one line, exit 2,
    // before anything is built.
    for bad in ["scratch space", "a,b"] {
        std::fs::create_dir_all(dir.path().join(bad)).expect("sub folder");
        let out = iopath()
            .current_dir(dir.path())
            .args(["micro", "fs", "--remote", "--quick", "--dir", bad, "--db"])
            .arg(&db)
            .output()
            .expect("run iopath");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(
            err.contains("--dir for --remote") && err.trim_end().lines().count() == 1,
            "{bad}: {err}"
        );
    }
}
