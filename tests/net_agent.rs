//! Agent mode of `net serve` (issue 23, item 1): agents started as `net serve --agent` child
//! processes on loopback ports, each with a key file, and the controller's API
//! (`net::agent::run_on_agent_with`) called from the test. Every child is killed and reaped
//! on drop; every wait is bounded.

mod common;

use common::{bin, iopath, stderr};
use iopath::case::{Align, Case, CopyMode, NetParams, RrCase, RrKind, RxMode, StreamCase};
use iopath::net::agent::run_on_agent_with;
use iopath::net::session::handshake::refusal_kind;
use iopath::net::session::RefusalKind;
use iopath::observation::{names, Role};
use iopath::stop::Stop;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KEY: &[u8] = b"the-fleet-key-0123456789abcdef";
const OTHER_KEY: &[u8] = b"another-key-0123456789abcdefgh";
/// What a call may take at most here: a short case, a loaded machine (2 cores shared).
const CALL: Duration = Duration::from_secs(60);

/// A key file in `dir`.
fn key_file(dir: &Path, name: &str, key: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, key).unwrap();
    path
}

/// A `net serve --agent` child on a free loopback port, its log kept as it runs.
struct Agent {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Agent {
    fn start(key: &Path, flags: &[&str]) -> Agent {
        let mut child = std::process::Command::new(bin())
            .args(["net", "serve", "--agent", "--listen", "127.0.0.1:0", "--psk-file"])
            .arg(key)
            .args(flags)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn net serve --agent");
        let mut lines = BufReader::new(child.stderr.take().expect("piped stderr"));
        let mut first = String::new();
        lines.read_line(&mut first).expect("the agent's first line");
        assert!(first.contains("as an agent"), "{first}");
        let addr = first
            .split_whitespace()
            .find(|w| w.starts_with("127.0.0.1:"))
            .unwrap_or_else(|| panic!("no address in {first}"))
            .parse()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let reader = std::thread::spawn({
            let log = log.clone();
            move || {
                let mut line = String::new();
                while matches!(lines.read_line(&mut line), Ok(n) if n > 0) {
                    log.lock().unwrap().push_str(&line);
                    line.clear();
                }
            }
        });
        Agent {
            child,
            addr,
            log,
            reader: Some(reader),
        }
    }

    fn target(&self) -> String {
        self.addr.to_string()
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Wait (at most 20 s) until the log has a line containing every one of `parts`.
    fn logged(&self, parts: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let log = self.log();
            if let Some(line) = log.lines().find(|l| parts.iter().all(|p| l.contains(p))) {
                return line.to_string();
            }
            assert!(Instant::now() < deadline, "no line with {parts:?} in the log:\n{log}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

fn net(duration_ms: u64) -> NetParams {
    NetParams {
        duration_ms,
        ..NetParams::for_test()
    }
}

fn stream_case(duration_ms: u64) -> Case {
    Case::NetStream(StreamCase::for_test(CopyMode::OneCopy, 16 << 10).with_net(net(duration_ms)))
}

fn rr_case(duration_ms: u64) -> Case {
    Case::NetRr(RrCase {
        kind: RrKind::Rr,
        mode: CopyMode::TwoCopy,
        rx_mode: RxMode::Copy,
        request_size: 64,
        response_size: 64,
        fields: 1,
        inflight: 1,
        net: net(duration_ms),
        rate: None,
        align: Align::Page,
        rx_wake: iopath::case::RxWake::Data,
    })
}

/// A run request with `key`, its queue positions collected.
fn run(agent: &Agent, target: &str, case: &Case, key: &[u8]) -> anyhow::Result<iopath::net::agent::AgentRun> {
    run_on_agent_with(agent.addr, target, case, Some(key), Stop::fresh(), CALL, &mut |_| {})
}

/// A run from A to B gives the client's observation (A's threads, B's report merged in) and
/// both hosts' fingerprints; an rr case as well as a stream.
#[test]
fn a_run_from_one_agent_to_another_returns_the_observation_and_both_fingerprints() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key", KEY);
    let (a, b) = (Agent::start(&key, &[]), Agent::start(&key, &[]));
    let got = run(&a, &b.target(), &stream_case(300), KEY).unwrap_or_else(|e| panic!("{e:#}\n{}", a.log()));
    let obs = &got.observation;
    let gbps = obs.get(names::THROUGHPUT_GBPS, Role::System).expect("throughput");
    assert!(gbps.value.is_some_and(|v| v > 0.0), "{gbps:?}");
    assert!(
        obs.get(names::BYTES_RECEIVED, Role::Server).is_some(),
        "the target's report is merged"
    );
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for machine in [&got.source, &got.destination] {
        assert_eq!(machine.hostname.as_deref(), Some(hostname.trim()));
        assert!(machine.logical_cpus > 0 && machine.kernel.is_some(), "{machine:?}");
    }
    assert_eq!(got.queued_behind, 0);
    // The session ran on B as a client's session from A (the log names the workload).
    b.logged(&["session finished: peer 127.0.0.1", "workload stream"]);
    let rr = run(&b, &a.target(), &rr_case(200), KEY).unwrap_or_else(|e| panic!("{e:#}\n{}", b.log()));
    assert!(rr.observation.get(names::LATENCY_P50_US, Role::Client).is_some());
}

/// A controller with another key is refused by kind on its own leg; one with the right key but
/// an agent whose target holds another key is refused on the third-party leg, with its own
/// kind; nothing ran.
#[test]
fn a_wrong_key_is_refused_on_the_controller_leg_and_on_the_third_party_leg() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key", KEY);
    let other = key_file(dir.path(), "other", OTHER_KEY);
    let (a, b, stranger) = (
        Agent::start(&key, &[]),
        Agent::start(&key, &[]),
        Agent::start(&other, &[]),
    );
    let e = run(&a, &b.target(), &stream_case(100), OTHER_KEY).unwrap_err();
    assert_eq!(refusal_kind(&e), Some(RefusalKind::Key), "{e:#}");
    let e = run(&a, &stranger.target(), &stream_case(100), KEY).unwrap_err();
    assert_eq!(refusal_kind(&e), Some(RefusalKind::TargetKey), "{e:#}");
    assert!(format!("{e:#}").contains("does not hold this agent's key"), "{e:#}");
    // A plain `net serve` (no key) is no agent: refused before anything runs.
    let mut plain = std::process::Command::new(bin())
        .args(["net", "serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(plain.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let plain_addr = first
        .split_whitespace()
        .find(|w| w.starts_with("127.0.0.1:"))
        .unwrap()
        .to_string();
    let e = run(&a, &plain_addr, &stream_case(100), KEY).unwrap_err();
    let _ = plain.kill();
    let _ = plain.wait();
    assert_eq!(refusal_kind(&e), Some(RefusalKind::SetUp), "{e:#}");
    assert!(format!("{e:#}").contains("is not an agent"), "{e:#}");
    assert!(!stranger.log().contains("session finished"), "{}", stranger.log());
}

/// `--agent` without a key is refused before it listens: one line, exit 2.
#[test]
fn an_agent_without_a_key_is_refused_at_start() {
    let out = iopath()
        .args(["net", "serve", "--agent", "--listen", "127.0.0.1:0"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--agent needs --psk-file"), "{err}");
}

/// Two run requests at once on one agent: one runs, the other is told it is queued at
/// position 1 and runs when the first is done.
#[test]
fn a_second_run_request_is_queued_and_then_runs() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key", KEY);
    let (a, b, c) = (
        Agent::start(&key, &[]),
        Agent::start(&key, &[]),
        Agent::start(&key, &[]),
    );
    let (running, started) = std::sync::mpsc::channel();
    let (first, second) = std::thread::scope(|scope| {
        let first = scope.spawn(|| {
            let mut told = Vec::new();
            let got = run_on_agent_with(
                a.addr,
                &b.target(),
                &stream_case(5000),
                Some(KEY),
                Stop::fresh(),
                CALL,
                &mut |p| {
                    told.push(p);
                    if p == 0 {
                        running.send(()).ok();
                    }
                },
            );
            (got, told)
        });
        // The second is sent once the first holds the agent (it said `running`).
        started.recv_timeout(CALL).expect("the first run started");
        let second = scope.spawn(|| {
            let mut told = Vec::new();
            let got = run_on_agent_with(
                a.addr,
                &c.target(),
                &stream_case(100),
                Some(KEY),
                Stop::fresh(),
                CALL,
                &mut |p| told.push(p),
            );
            (got, told)
        });
        (first.join().unwrap(), second.join().unwrap())
    });
    let (first, first_told) = first;
    let (second, second_told) = second;
    let first = first.unwrap_or_else(|e| panic!("{e:#}\n{}", a.log()));
    let second = second.unwrap_or_else(|e| panic!("{e:#}\n{}", a.log()));
    assert_eq!(first.queued_behind, 0);
    assert_eq!(first_told, [0]);
    assert_eq!(second.queued_behind, 1, "{second_told:?}");
    assert_eq!(second_told, [1, 0]);
    assert!(second.observation.get(names::THROUGHPUT_GBPS, Role::System).is_some());
}

/// An agent with `--allow-peers` refuses a target outside it (typed), before anything runs,
/// and runs one inside it.
#[test]
fn a_target_outside_allow_peers_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key", KEY);
    let a = Agent::start(&key, &["--allow-peers", "10.0.0.0/8,192.168.7.1"]);
    let b = Agent::start(&key, &[]);
    let e = run(&a, &b.target(), &stream_case(100), KEY).unwrap_err();
    assert_eq!(refusal_kind(&e), Some(RefusalKind::NotAllowed), "{e:#}");
    assert!(format!("{e:#}").contains("outside this agent's --allow-peers"), "{e:#}");
    assert!(!b.log().contains("workload"), "nothing reached B: {}", b.log());
    a.logged(&[
        "session refused",
        "workload agent",
        "outside this agent's --allow-peers",
    ]);
    // An agent is not its own target (it would wait for itself).
    let e = run(&b, &b.target(), &stream_case(100), KEY).unwrap_err();
    assert_eq!(refusal_kind(&e), Some(RefusalKind::SetUp), "{e:#}");
    assert!(format!("{e:#}").contains("is this agent itself"), "{e:#}");
    // `--port` (the DaemonSet's flag) replaces the port of --listen.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let open = Agent::start(&key, &["--allow-peers", "127.0.0.0/8", "--port", &port.to_string()]);
    assert_eq!(open.addr.port(), port);
    run(&open, &b.target(), &stream_case(100), KEY).unwrap_or_else(|e| panic!("{e:#}\n{}", open.log()));
}

/// The target killed in the middle of a run: the controller hears an error within its timeout
/// (long before the case could have ended), and the agent then serves the next request.
#[test]
fn a_target_killed_mid_run_fails_the_run_and_the_agent_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key", KEY);
    let a = Agent::start(&key, &[]);
    let mut b = Agent::start(&key, &[]);
    let c = Agent::start(&key, &[]);
    // The case asks for two minutes, more than the call's timeout: an error that is not the
    // timeout's shows the agent noticed its target was gone rather than waiting it out.
    let timeout = Duration::from_secs(60);
    let (running, started) = std::sync::mpsc::channel();
    let target = b.target();
    let outcome = std::thread::scope(|scope| {
        let call = scope.spawn(|| {
            run_on_agent_with(
                a.addr,
                &target,
                &stream_case(120_000),
                Some(KEY),
                Stop::fresh(),
                timeout,
                &mut |p| {
                    if p == 0 {
                        running.send(()).ok();
                    }
                },
            )
        });
        started.recv_timeout(CALL).expect("the run started");
        std::thread::sleep(Duration::from_millis(1000));
        b.child.kill().unwrap();
        b.child.wait().unwrap();
        call.join().unwrap()
    });
    let e = outcome.expect_err("the target died");
    let text = format!("{e:#}");
    assert!(
        text.contains("the run failed") && !text.contains("no answer within"),
        "{text}"
    );
    // Issue 31, item 7: each context said once ("the run failed: the run failed: ..." was the
    // agent's words wrapped in the controller's same words).
    assert_eq!(text.matches("the run failed").count(), 1, "{text}");
    let parts: Vec<&str> = text.split(": ").collect();
    assert!(parts.windows(2).all(|w| w[0] != w[1]), "a context repeated: {text}");
    run(&a, &c.target(), &stream_case(100), KEY).unwrap_or_else(|e| panic!("{e:#}\n{}", a.log()));
}

/// A controller that goes away while its request waits frees its place: the request behind
/// it moves up (told position 1, not 2) and runs.
#[test]
fn a_controller_that_goes_away_frees_its_place_in_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key", KEY);
    let (a, b, c) = (
        Agent::start(&key, &[]),
        Agent::start(&key, &[]),
        Agent::start(&key, &[]),
    );
    let (running, started) = std::sync::mpsc::channel();
    let (queued, waiting) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let first = scope.spawn(|| {
            run_on_agent_with(
                a.addr,
                &b.target(),
                &stream_case(6000),
                Some(KEY),
                Stop::fresh(),
                CALL,
                &mut |p| {
                    if p == 0 {
                        running.send(()).ok();
                    }
                },
            )
        });
        started.recv_timeout(CALL).expect("the first run started");
        let stop = Stop::fresh();
        let (agent, target) = (a.addr, c.target());
        let leaving = scope.spawn(move || {
            run_on_agent_with(agent, &target, &stream_case(100), Some(KEY), stop, CALL, &mut |p| {
                queued.send(p).ok();
            })
        });
        assert_eq!(waiting.recv_timeout(CALL).expect("queued"), 1);
        stop.request();
        let e = leaving.join().unwrap().unwrap_err();
        assert!(e.is::<iopath::stop::Interrupted>(), "{e:#}");
        a.logged(&["session failed", "closed its connection while its run request waited"]);
        let mut told = Vec::new();
        let third = run_on_agent_with(
            a.addr,
            &c.target(),
            &stream_case(100),
            Some(KEY),
            Stop::fresh(),
            CALL,
            &mut |p| told.push(p),
        );
        third.unwrap_or_else(|e| panic!("{e:#}\n{}", a.log()));
        assert_eq!(told, [1, 0]);
        first.join().unwrap().unwrap_or_else(|e| panic!("{e:#}\n{}", a.log()));
    });
}

/// The source agent killed in the middle of a run, or nothing listening: the controller hears
/// an error, not the timeout's (the case asks for two minutes, more than the timeout).
#[test]
fn an_agent_that_dies_mid_run_or_is_not_there_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key", KEY);
    let mut a = Agent::start(&key, &[]);
    let b = Agent::start(&key, &[]);
    let timeout = Duration::from_secs(60);
    let (running, started) = std::sync::mpsc::channel();
    let (agent, target) = (a.addr, b.target());
    let call = std::thread::spawn(move || {
        run_on_agent_with(
            agent,
            &target,
            &stream_case(120_000),
            Some(KEY),
            Stop::fresh(),
            timeout,
            &mut |p| {
                if p == 0 {
                    running.send(()).ok();
                }
            },
        )
    });
    started.recv_timeout(CALL).expect("the run started");
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let e = call.join().unwrap().expect_err("the agent died");
    let text = format!("{e:#}");
    assert!(
        text.contains("waiting for the run's result") && !text.contains("no answer within"),
        "{text}"
    );
    // Nothing listens on the dead agent's port any more: refused at once.
    let e = run_on_agent_with(
        agent,
        &b.target(),
        &stream_case(100),
        Some(KEY),
        Stop::fresh(),
        timeout,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(format!("{e:#}").contains("could not connect"), "{e:#}");
    // And B, whose session lost its client, serves the next one.
    let c = Agent::start(&key, &[]);
    run(&c, &b.target(), &stream_case(100), KEY).unwrap_or_else(|e| panic!("{e:#}\n{}", b.log()));
}

/// Run `iopath args` (at most 120 s): its output.
fn iopath_run(args: &[&str]) -> std::process::Output {
    iopath()
        .args(args)
        .timeout(Duration::from_secs(120))
        .output()
        .expect("run iopath")
}

/// A fleet run of two agents whose controller had the wrong key fails every cell; `sweep
/// --resume` of it without the key is refused in one line, and with `--psk-file` it runs
/// them (before: sweep had no --psk-file). Every stored cell carries both hosts' machines,
/// stored once per host, and `report --matrix` shows each host's kernel and CPUs.
#[test]
fn a_fleet_run_resumed_by_sweep_with_its_key_stores_both_hosts_machines() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key", KEY);
    let wrong = key_file(dir.path(), "wrong", OTHER_KEY);
    let (a, b) = (Agent::start(&key, &[]), Agent::start(&key, &[]));
    let hosts = dir.path().join("hosts");
    std::fs::write(&hosts, format!("{}\n{}\n", a.target(), b.target())).unwrap();
    let db = dir.path().join("fleet.db");
    let (hosts_s, db_s) = (hosts.to_str().unwrap(), db.to_str().unwrap());
    let out = iopath_run(&[
        "fleet",
        "run",
        "rr",
        "--hosts",
        hosts_s,
        "--psk-file",
        wrong.to_str().unwrap(),
        "--db",
        db_s,
        "--mode",
        "two-copy",
        "--duration",
        "300ms",
        "--warmup",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        common::count(&db, "SELECT count(*) FROM observations WHERE status = 'failed'"),
        2
    );
    let err = common::usage_error(&["sweep", "--resume", "1", "--db", db_s]);
    assert!(
        err.contains("run 1 is a fleet run: resuming it needs the agents' key, --psk-file KEY"),
        "{err}"
    );
    let err = common::usage_error(&["run", "--psk-file", key.to_str().unwrap(), "--db", db_s]);
    assert!(err.contains("--resume"), "run's --psk-file is for --resume: {err}");

    let out = iopath_run(&[
        "sweep",
        "--resume",
        "1",
        "--db",
        db_s,
        "--psk-file",
        key.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}\n{}\n{}", stderr(&out), a.log(), b.log());
    assert_eq!(
        common::count(&db, "SELECT count(*) FROM observations WHERE status = 'ok'"),
        2
    );

    // Both ends of both cells, each host's description stored once (two agent processes:
    // at most two descriptions, the failed attempts' links gone with them).
    assert_eq!(common::count(&db, "SELECT count(*) FROM observation_machines"), 4);
    assert!(common::count(&db, "SELECT count(*) FROM machines") <= 2);
    let store = iopath::store::Store::open_existing(&db).unwrap();
    let machines = store.load_run(1).unwrap().fleet_machines;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    for host in [a.target(), b.target()] {
        let seen = machines.of(&host);
        assert_eq!(seen.len(), 1, "{host}: {seen:?}");
        assert_eq!(seen[0].cells, 2, "{host} was source once and destination once");
        assert_eq!(seen[0].machine.kernel.as_deref(), Some(kernel.trim()));
        let m = &seen[0].machine;
        assert_eq!(
            (m.memory_available_bytes, m.tsc_hz),
            (None, None),
            "readings of the moment are not kept"
        );
    }
    drop(store);
    let html = dir.path().join("m.html");
    let out = iopath_run(&["report", "--matrix", "1", "--db", db_s, "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<th>kernel</th><th>CPU model</th><th>logical CPUs</th>"),
        "{page}"
    );
    assert!(page.contains(&format!("<td>{}</td>", kernel.trim())), "{page}");
    assert!(!page.contains("The hosts differ in kernels"), "{page}");
}
