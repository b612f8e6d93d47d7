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

/// This machine's MemAvailable, in bytes.
fn mem_available() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map(|kib| kib * 1024)
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
    let available = mem_available();
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
    let mut args = vec!["net", "rr", "--connect", &addr];
    args.extend_from_slice(oversized("net-rr").expect("rr has an oversized case"));
    let out = client(&args);
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

/// A case of each workload kind that needs far more memory than a 256 MiB cgroup leaves
/// (hundreds of MiB of buffers in the process, or on the server side alone) and far less than
/// this machine's MemAvailable, as the flags of `sweep <kind>`. Every kind `sweep` knows must
/// have one: a workload added without it fails here, not in a user's OOM kill.
fn oversized(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "net-stream" => &["--mode", "one-copy", "--size", "64M", "--threads", "4"],
        "net-rr" => &[
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
        ],
        "net-crr" => &[
            "--mode",
            "two-copy",
            "--request-size",
            "16M",
            "--response-size",
            "16M",
            "--threads",
            "8",
        ],
        "net-records" => &["--table", "1G", "--mode", "copy-out", "--records", "1"],
        "net-udp-stream" => &[
            "--size",
            "60000",
            "--batch",
            "1024",
            "--rx-mode",
            "recvmmsg",
            "--threads",
            "8",
        ],
        "net-udp-rr" => &[
            "--mode",
            "sendmmsg",
            "--rx-mode",
            "recvmmsg",
            "--request-size",
            "60000",
            "--response-size",
            "60000",
            "--inflight",
            "64",
            "--threads",
            "64",
        ],
        "net-load" => &[
            "--direction",
            "both",
            "--flows",
            "64",
            "--size",
            "16M",
            "--mode",
            "two-copy",
        ],
        "servers" => &["--request", "echo:1M", "--clients", "200"],
        "micro" => &["membw", "--size", "200M"],
        _ => return None,
    })
}

/// Kinds that hold no memory a case can size: the test workload `fake`.
const HOLDS_NO_MEMORY: &[&str] = &["fake"];

/// The command of a workload kind: `net-stream` is `net stream`.
fn direct(kind: &str) -> Vec<&str> {
    match kind.strip_prefix("net-") {
        Some(rest) => vec!["net", rest],
        None => vec![kind],
    }
}

/// The workload kinds of every measuring command the CLI has (`cli::measuring_commands`,
/// walked from clap's own tree): `net stream` stores `net-stream` cases, `micro memlat`
/// `micro` ones.
fn measuring_kinds() -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    for words in iopath::cli::measuring_commands(true) {
        let kind = match words.strip_prefix("net ") {
            Some(rest) => format!("net-{rest}"),
            None => words.split(' ').next().unwrap_or_default().to_string(),
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds
}

/// Issue 31.1: every workload kind — of every measuring command the CLI has
/// (`measuring_kinds`, from clap's own tree) and of the list `net serve` serves
/// (`registry::NET_SERVE`), not a hand-typed one — is refused before it allocates, inside a
/// 256 MiB memory cgroup, on the command line (exit 2, with and without --db), as a hello to
/// `net serve` (refused naming the server's memory; the server lives), and as a stored case
/// on resume (damaged, exit 2); the OOM killer never runs.
#[test]
fn every_workload_is_refused_past_its_headroom_on_every_path() {
    let limit = 256 * MIB;
    let available = mem_available();
    // The largest case above holds about 2 GiB in the process that plans it (this test's).
    if available.is_none_or(|a| a < 8 << 30) {
        return skip("this check needs 8 GiB of MemAvailable, far above the 256 MiB cgroup");
    }
    let cg = match MemCgroup::new(limit) {
        Ok(cg) => cg,
        Err(why) => return skip(&why),
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let in_cgroup = |args: &[&str]| {
        let mut c = cg.command(&common::bin(), args);
        c.stdin(Stdio::null()).env("IOPATH_DB", common::own_db());
        let child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
        common::finish_within(child, Duration::from_secs(60))
    };
    let kinds = measuring_kinds();
    assert!(kinds.len() >= 9, "{kinds:?}");
    for kind in kinds.iter().map(String::as_str) {
        if HOLDS_NO_MEMORY.contains(&kind) {
            continue;
        }
        let flags = oversized(kind).unwrap_or_else(|| panic!("no oversized case for the workload {kind}: add one"));

        // The command line, into the default database and into --db.
        let mut argv = direct(kind);
        argv.extend_from_slice(flags);
        let out = in_cgroup(&argv);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{argv:?} in 256 MiB: {err}");
        assert!(
            err.contains("available"),
            "{argv:?}: the refusal does not name memory: {err}"
        );
        let db = dir.path().join(format!("{kind}.db"));
        let db_text = db.to_str().expect("utf-8 path");
        let mut argv = direct(kind);
        argv.extend_from_slice(flags);
        argv.extend_from_slice(&["--db", db_text]);
        let out = in_cgroup(&argv);
        assert_eq!(out.status.code(), Some(2), "{argv:?} in 256 MiB: {}", stderr(&out));

        // A stored case on resume: the run planned here, outside the cgroup (where it fits),
        // then resumed inside it.
        let command: Vec<String> = argv[..argv.len() - 2].iter().map(|s| s.to_string()).collect();
        let file = iopath::cli::planfile::PlanFile::new(command);
        let (plan, _) = file.plan().expect("the plan fits outside the cgroup");
        let run = {
            let mut store = iopath::store::Store::create_or_open(&db).expect("a new database");
            store
                .create_run(&iopath::store::NewRun::of_plan(&plan, file.command_line()))
                .expect("the run stored")
        };
        let run_text = run.to_string();
        let out = in_cgroup(&["run", "--resume", &run_text, "--db", db_text]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "resume of {kind} in 256 MiB: {err}");
        assert!(
            err.contains("damaged") && err.contains("available"),
            "resume of {kind}: not refused for memory: {err}"
        );
    }

    // A hello of every kind `net serve` serves, from a client outside the cgroup (whose own
    // check passes) to a server inside it.
    let mut server = Server::start_in(&cg);
    let remote = format!("remote:{}", server.addr);
    let hellos = iopath::net::session::registry::NET_SERVE
        .iter()
        .flat_map(|s| s.hellos.iter().copied());
    for hello in hellos {
        let kind = format!("net-{hello}");
        let flags = oversized(&kind).unwrap_or_else(|| panic!("no oversized case for the hello {hello}: add one"));
        let mut argv = vec!["net", hello, "--topology", &remote];
        argv.extend_from_slice(flags);
        let out = client(&argv);
        assert_refused_for_memory(&out, hello);
        assert!(
            server.alive(),
            "the server died after the {hello} hello: {}",
            stderr(&out)
        );
    }
    // Still serving a case that fits.
    let out = client(&["net", "udp-rr", "--topology", &remote]);
    assert!(out.status.success(), "a small udp-rr case: {}", stderr(&out));
    assert!(server.alive(), "the server died");
    drop(server);
    assert_eq!(cg.oom_kills().unwrap_or(0), 0, "the OOM killer ran in the cgroup");
}
