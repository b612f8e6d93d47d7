//! A closed stdout (`iopath sysinfo | head -1`) ends quietly with the command's own exit code,
//! in every command: never a panic, never exit 101.

use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Run iopath with stdout a pipe whose read end is already closed, so every write fails with
/// EPIPE; returns (exit code, stderr).
fn with_closed_stdout(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let (read_end, write_end): (OwnedFd, OwnedFd) = nix::unistd::pipe().unwrap();
    drop(read_end);
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("iopath"))
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < Duration::from_secs(120), "{args:?} hangs");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn every_command_ends_quietly_on_a_closed_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let setup = assert_cmd::Command::cargo_bin("iopath")
        .unwrap()
        .current_dir(dir.path())
        .args(["sweep", "fake", "--cells", "ok:1,ok:2", "--reps", "3", "--db", "r.db"])
        .output()
        .unwrap();
    assert!(setup.status.success());
    let commands: &[&[&str]] = &[
        &["--help"],
        &["sysinfo"],
        &["sysinfo", "--json"],
        &["micro", "list"],
        &["runs", "--db", "r.db"],
        &["export", "--db", "r.db"],
        &["export", "--db", "r.db", "--format", "json"],
        &["compare", "1", "1", "--db", "r.db"],
        &["fake", "--cells", "ok,ok", "--reps", "20"],
        &["fake", "--cells", "ok", "--json"],
        &["sweep", "fake", "--cells", "ok:1", "--db", "s.db"],
        &["micro", "timer", "--quick"],
        &[
            "net",
            "stream",
            "--mode",
            "one-copy",
            "--size",
            "4K",
            "--duration",
            "100ms",
            "--warmup",
            "0",
        ],
        &[
            "servers",
            "--model",
            "epoll",
            "--clients",
            "1",
            "--duration",
            "100ms",
            "--warmup",
            "0",
            "--csv",
        ],
    ];
    for args in commands {
        let (code, stderr) = with_closed_stdout(dir.path(), args);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
    }
}
