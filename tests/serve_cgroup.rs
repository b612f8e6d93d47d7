//! Issue 19 A.2 under a real memory cgroup: `net serve` started in a 256 MiB cgroup (on a
//! machine with far more MemAvailable) refuses, before `ready`, a hello whose case needs more
//! memory than the cgroup leaves it, with a reason naming memory, stays alive (not OOM-killed)
//! and serves a small case afterwards. The clients are the ones a user runs (`net stream
//! --connect`, `net rr --connect`), outside the cgroup: their own check passes, so only the
//! server's headroom can refuse.

mod common;

use common::cgroup::MemCgroup;
use common::{iopath, skip, stderr};
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

const MIB: u64 = 1 << 20;

/// A `net serve` child inside the cgroup; killed, reaped and its stderr drained on drop.
struct Server {
    child: Child,
    addr: String,
    reader: Option<std::thread::JoinHandle<String>>,
}

impl Server {
    fn start_in(cg: &MemCgroup) -> Server {
        let mut child = cg
            .command(&common::bin(), &["net", "serve", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn net serve in the cgroup");
        let mut lines = BufReader::new(child.stderr.take().expect("piped stderr"));
        let mut first = String::new();
        lines.read_line(&mut first).expect("net serve's first line");
        let addr = first
            .split_whitespace()
            .find(|w| w.starts_with("127.0.0.1:"))
            .unwrap_or_else(|| panic!("no address in {first}"))
            .to_string();
        let reader = std::thread::spawn(move || {
            let mut log = String::new();
            let mut line = String::new();
            while matches!(lines.read_line(&mut line), Ok(n) if n > 0) {
                log.push_str(&line);
                line.clear();
            }
            log
        });
        Server {
            child,
            addr,
            reader: Some(reader),
        }
    }

    /// Still running (not killed by the OOM killer or anything else).
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

fn client(args: &[&str]) -> std::process::Output {
    iopath()
        .args(args)
        .args(["--duration", "100ms", "--warmup", "0", "--no-perf"])
        .timeout(Duration::from_secs(60))
        .output()
        .expect("run the client")
}

/// The refusal a client printed: the server's reason, naming memory, on the server side.
fn assert_refused_for_memory(out: &std::process::Output, what: &str) {
    let err = stderr(out);
    assert!(!out.status.success(), "{what} was served in a 256 MiB cgroup: {err}");
    assert!(
        err.contains("on the server side") && err.contains("memory cgroup"),
        "{what}: the refusal does not name the server's memory: {err}"
    );
}

#[test]
fn a_server_in_a_memory_cgroup_refuses_cases_past_its_headroom_and_lives() {
    let limit = 256 * MIB;
    let available = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map(|kib| kib * 1024);
    if available.is_none_or(|a| a < 8 * limit) {
        return skip("this check needs MemAvailable far above the 256 MiB cgroup (8x)");
    }
    let cg = match MemCgroup::new(limit) {
        Ok(cg) => cg,
        Err(why) => return skip(&why),
    };
    let mut server = Server::start_in(&cg);
    let addr = server.addr.clone();

    // A stream case of 4 threads of 64 MiB messages: 256 MiB of receive buffers at least,
    // more than half of what the cgroup leaves, far less than MemAvailable.
    let out = client(&[
        "net",
        "stream",
        "--connect",
        &addr,
        "--mode",
        "one-copy",
        "--size",
        "64M",
        "--threads",
        "4",
    ]);
    assert_refused_for_memory(&out, "stream 64 MiB x 4 threads");
    assert!(
        server.alive(),
        "the server died after the stream hello: {}",
        stderr(&out)
    );

    // An rr case (open loop, so many in flight are accepted) of 8 MiB requests and responses,
    // 8 in flight, 4 threads: over 500 MiB of buffers on the server side.
    let out = client(&[
        "net",
        "rr",
        "--connect",
        &addr,
        "--mode",
        "two-copy",
        "--request-size",
        "8M",
        "--response-size",
        "8M",
        "--inflight",
        "8",
        "--threads",
        "4",
        "--rate",
        "100",
    ]);
    assert_refused_for_memory(&out, "rr 8 MiB x 8 in flight x 4 threads");
    assert!(server.alive(), "the server died after the rr hello: {}", stderr(&out));

    // A small case is still served.
    let out = client(&[
        "net",
        "stream",
        "--connect",
        &addr,
        "--mode",
        "one-copy",
        "--size",
        "4K",
    ]);
    assert!(out.status.success(), "a small stream case: {}", stderr(&out));
    let out = client(&["net", "rr", "--connect", &addr, "--mode", "two-copy"]);
    assert!(out.status.success(), "a small rr case: {}", stderr(&out));
    assert!(server.alive(), "the server died");
    assert_eq!(
        cg.oom_kills().unwrap_or(0),
        0,
        "the OOM killer ran in the server's cgroup"
    );
    drop(server);
}
