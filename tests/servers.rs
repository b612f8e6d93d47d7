//! `iopath procs serve` under every model, driven as a user's clients would: good traffic from
//! 1 and 50 clients with every reply checked, each kind of bad input followed by a
//! well-behaved client, `--max-conns` refusals, and a clean SIGINT stop. Also `iopath
//! servers` end to end and its bad-input handling.

mod common;

use common::{bin, iopath, metric, role_metric, stderr, stdout, usage_error};
use iopath::servers::protocol::{self, Decoded, ErrorCode, Rank, Response};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MODELS: [&str; 8] = [
    "iterative",
    "threads",
    "pool",
    "select",
    "poll",
    "epoll",
    "epoll-et",
    "uring",
];

/// A `procs serve` child; killed and reaped on drop if a test fails before stopping it.
struct Served {
    child: Option<Child>,
    addr: SocketAddr,
}

impl Served {
    /// Start the server, or None (the skip recorded with its reason, see `common::skip`) when
    /// the model cannot run here.
    fn start(model: &str, extra: &[&str]) -> Option<Served> {
        let idle: &[&str] = if extra.contains(&"--idle-timeout") {
            &[]
        } else {
            // Long enough that a client thread starved by a loaded machine between two of its
            // requests is not taken for an idle one (1 s was, under load 16 on 2 CPUs).
            &["--idle-timeout", "3s"]
        };
        let mut command = Command::new(bin());
        command
            .args(["procs", "serve", "--model", model, "--listen", "127.0.0.1:0"])
            .args(idle)
            .args(extra);
        Served::launch(model, command)
    }

    /// Spawn the server `command` starts (stdout and stderr piped) and read its address.
    fn launch(model: &str, mut command: Command) -> Option<Served> {
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        if line.is_empty() {
            let out = child.wait_with_output().unwrap();
            let err = stderr(&out);
            if model == "uring" && err.contains("io_uring unavailable") {
                common::skip(&format!("the uring model cannot run here: {}", err.trim()));
                return None;
            }
            panic!("server {model} did not start: {err}");
        }
        let addr = line
            .strip_prefix("listening on ")
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line: {line}"));
        Some(Served {
            child: Some(child),
            addr,
        })
    }

    /// SIGINT, then the exit status and stderr (bounded wait).
    fn interrupt(self) -> (i32, String) {
        self.signal(nix::sys::signal::Signal::SIGINT)
    }

    /// Send `sig`, then the exit status and stderr (bounded wait).
    fn signal(mut self, sig: nix::sys::signal::Signal) -> (i32, String) {
        let mut child = self.child.take().unwrap();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
                return (status.code().unwrap_or(-1), err);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("server did not exit within 15 s of SIGINT");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    // Hang guards only: the iterative model may serve an idle client and a half frame (3 s
    // each) before this one.
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Read one whole reply (None when the server closed first).
fn read_reply(s: &mut TcpStream) -> Option<Response> {
    let mut input = Vec::new();
    let mut chunk = [0u8; 64 << 10];
    loop {
        match protocol::decode_response(&input) {
            Decoded::Frame(resp, _) => return Some(resp),
            Decoded::Invalid(e) => panic!("server sent a bad frame: {e}"),
            Decoded::Incomplete(_) => {}
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => input.extend_from_slice(&chunk[..n]),
        }
    }
}

fn echo(s: &mut TcpStream, payload: &[u8]) {
    let mut req = Vec::new();
    protocol::encode_echo_request(payload, &mut req);
    s.write_all(&req).unwrap();
    match read_reply(s) {
        Some(Response::Echo(back)) => assert!(back == payload, "echo of {} bytes came back changed", payload.len()),
        other => panic!("expected an echo reply, got {other:?}"),
    }
}

fn check_procs(s: &mut TcpStream, k: u16) {
    let mut req = Vec::new();
    protocol::encode_procs_request(k, Rank::Total, &mut req);
    s.write_all(&req).unwrap();
    let Some(Response::Procs(reply)) = read_reply(s) else {
        panic!("expected a procs reply")
    };
    assert!(!reply.entries.is_empty() && reply.entries.len() <= k as usize);
    assert!(
        reply.entries.windows(2).all(|w| w[0].ranked_ticks >= w[1].ranked_ticks),
        "not sorted"
    );
    let mut seen_alive = 0;
    for e in &reply.entries {
        assert!(e.pid > 0);
        assert_eq!(e.ranked_ticks, e.user_ticks + e.system_ticks);
        // A real pid: its stat file names the same command (unless it exited meanwhile).
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", e.pid)) {
            let name = &stat[stat.find('(').unwrap() + 1..stat.rfind(')').unwrap()];
            // Kernel workers rename themselves as they work (kworker/1:1H-kblockd becomes
            // ...+kblockd): compare those up to the state mark.
            let stable = |n: &str| -> String {
                if n.starts_with("kworker/") {
                    n.split(['+', '-']).next().unwrap_or(n).to_string()
                } else {
                    n.to_string()
                }
            };
            assert_eq!(stable(name), stable(&e.name), "pid {} is not named {}", e.pid, e.name);
            seen_alive += 1;
        }
    }
    assert!(seen_alive > 0, "none of the returned pids exist");
}

fn payload(n: usize, salt: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt)).collect()
}

/// A fresh well-behaved client is served (bounded: the iterative model may first have to
/// finish, or time out, the connection in front of it).
fn well_behaved(addr: SocketAddr) {
    let mut s = connect(addr);
    echo(&mut s, b"still alive?");
    check_procs(&mut s, 2);
}

fn expect_error(s: &mut TcpStream, code: ErrorCode) {
    match read_reply(s) {
        Some(Response::Error(e)) => assert_eq!(e.code, code, "{e}"),
        other => panic!("expected a {code:?} error frame, got {other:?}"),
    }
    // And then the server closes the connection.
    let mut rest = [0u8; 16];
    assert!(matches!(s.read(&mut rest), Ok(0) | Err(_)));
}

fn exercise(model: &str) {
    let Some(server) = Served::start(model, &[]) else {
        return;
    };
    let addr = server.addr;

    // One client: sizes from 0 bytes to the 1 MiB limit, then the procs list.
    let mut one = connect(addr);
    for size in [0, 1, 64, 4096, 100_000, protocol::MAX_PAYLOAD] {
        echo(&mut one, &payload(size, size as u8));
    }
    check_procs(&mut one, 5);
    drop(one);

    // 50 concurrent clients, each with its own payloads. (The iterative model serves them one
    // after another, which is its nature; each closes when done so the next gets its turn.)
    std::thread::scope(|scope| {
        for c in 0..50u8 {
            scope.spawn(move || {
                let mut s = connect(addr);
                for i in 0..10u8 {
                    echo(&mut s, &payload(64 + c as usize, c ^ i));
                }
                check_procs(&mut s, 3);
            });
        }
    });

    // Garbage bytes: an error frame, the connection closed, and others still served.
    let mut g = connect(addr);
    g.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    expect_error(&mut g, ErrorCode::BadMagic);
    well_behaved(addr);

    // An oversized length is refused without reading the payload.
    let mut big = connect(addr);
    big.write_all(b"io\x01\x01\x7f\xff\xff\xff").unwrap();
    expect_error(&mut big, ErrorCode::TooLarge);
    well_behaved(addr);

    // A truncated frame, then the client goes away.
    let mut t = connect(addr);
    let mut req = Vec::new();
    protocol::encode_echo_request(&payload(1000, 1), &mut req);
    t.write_all(&req[..500]).unwrap();
    drop(t);
    well_behaved(addr);

    // A client that connects and sends nothing is closed after the idle timeout (3 s); other
    // clients are served meanwhile (after it, for the iterative model).
    let mut idle = connect(addr);
    let half_frame = connect(addr);
    (&half_frame).write_all(&req[..3]).unwrap();
    well_behaved(addr);
    let started = Instant::now();
    let mut buf = [0u8; 8];
    assert!(matches!(idle.read(&mut buf), Ok(0) | Err(_)));
    // A hang guard, well above the 3 s timeout (a read timeout would also end the read).
    assert!(started.elapsed() < Duration::from_secs(29));
    drop(half_frame);

    // A client that asks for a big reply and disconnects before reading it.
    for _ in 0..3 {
        let mut rude = connect(addr);
        let mut req = Vec::new();
        protocol::encode_echo_request(&payload(protocol::MAX_PAYLOAD, 9), &mut req);
        protocol::encode_procs_request(50, Rank::Total, &mut req);
        // On a starved machine the server may close it mid-request (its idle timeout): the
        // write then fails, and what is tested is the server serving the next client.
        let _ = rude.write_all(&req);
        drop(rude);
    }
    well_behaved(addr);

    // A client in the middle of a connection when SIGINT arrives: the server still exits 0.
    let mut last = connect(addr);
    echo(&mut last, b"before the signal");
    let (code, err) = server.interrupt();
    assert_eq!(code, 0, "exit code after SIGINT; stderr: {err}");
    assert!(err.contains("stopped:"), "{err}");
    assert!(err.contains("joined"), "{err}");
}

fn max_conns(model: &str) {
    let Some(server) = Served::start(model, &["--max-conns", "2"]) else {
        return;
    };
    let addr = server.addr;
    let mut a = connect(addr);
    echo(&mut a, b"a");
    if model == "iterative" {
        // Only one connection is ever served at a time; the second waits in the backlog, so a
        // refusal cannot be observed until it is admitted.
        drop(a);
        well_behaved(addr);
        let (code, _) = server.interrupt();
        assert_eq!(code, 0);
        return;
    }
    let mut b = connect(addr);
    echo(&mut b, b"b");
    let mut c = connect(addr);
    expect_error(&mut c, ErrorCode::ServerFull);
    drop(a);
    // The freed slot is reused (the server notices the close asynchronously).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut d = connect(addr);
        let mut req = Vec::new();
        protocol::encode_echo_request(b"d", &mut req);
        d.write_all(&req).unwrap();
        match read_reply(&mut d) {
            Some(Response::Echo(p)) if p == b"d" => break,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            other => panic!("slot never freed: {other:?}"),
        }
    }
    echo(&mut b, b"b again");
    let (code, err) = server.interrupt();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("refused"), "{err}");
}

macro_rules! model_tests {
    ($($name:ident, $limit:ident => $model:expr;)*) => {$(
        #[test]
        fn $name() {
            exercise($model);
        }

        #[test]
        fn $limit() {
            max_conns($model);
        }
    )*};
}

model_tests! {
    iterative_serves_and_survives_bad_clients, iterative_max_conns => "iterative";
    threads_serves_and_survives_bad_clients, threads_max_conns => "threads";
    pool_serves_and_survives_bad_clients, pool_max_conns => "pool";
    select_serves_and_survives_bad_clients, select_max_conns => "select";
    poll_serves_and_survives_bad_clients, poll_max_conns => "poll";
    epoll_serves_and_survives_bad_clients, epoll_max_conns => "epoll";
    epoll_et_serves_and_survives_bad_clients, epoll_et_max_conns => "epoll-et";
    uring_serves_and_survives_bad_clients, uring_max_conns => "uring";
}

#[test]
fn every_model_is_tested() {
    for m in MODELS {
        assert!(m.parse::<iopath::servers::Model>().is_ok());
    }
    assert_eq!(MODELS.len(), iopath::servers::Model::ALL.len());
}

#[test]
fn procs_query_prints_the_top_k() {
    let Some(server) = Served::start("threads", &["--interval", "200ms"]) else {
        return;
    };
    let addr = server.addr.to_string();
    let out = iopath()
        .args(["procs", "query", &addr, "-k", "2", "--clients", "4"])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "{text} {}", stderr(&out));
    assert!(text.contains("4 of 4 client(s) answered"), "{text}");
    // Header plus exactly two ranked rows.
    assert_eq!(
        text.lines().filter(|l| l.trim_start().starts_with(['1', '2'])).count(),
        2,
        "{text}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let out = iopath()
        .args(["procs", "query", &addr, "-k", "3", "--interval", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["replies"][0]["rank"], "interval");
    assert_eq!(v["replies"][0]["interval_ms"], 200);
    let (code, _) = server.interrupt();
    assert_eq!(code, 0);
}

#[test]
fn procs_query_without_a_server_fails_with_exit_1() {
    // Bind and drop to get a port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    iopath()
        .args(["procs", "query", &format!("127.0.0.1:{port}"), "--timeout", "2s"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("cannot connect"));
}

#[test]
fn servers_run_reports_metrics_with_sources() {
    let out = iopath()
        .args([
            "servers",
            "--model",
            "epoll,threads",
            "--request",
            "echo:64|procs:2",
            "--clients",
            "1,4",
            "--duration",
            "300ms",
            "--warmup",
            "100ms",
            "--json",
        ])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 8);
    for r in records {
        let get = |name: &str| metric(r, name).unwrap_or_else(|| panic!("no {name}"));
        if get("requests")["value"].as_f64() == Some(0.0) {
            // A loaded machine can keep every request of a 300 ms window from completing
            // (seen at a load of 15 on two CPUs). That is an honest result: the rate is 0,
            // the latencies unavailable with that reason, and no error. Recorded as a skip.
            assert_eq!(get("requests_per_s")["value"].as_f64(), Some(0.0), "{r}");
            assert_eq!(get("errors")["value"].as_f64(), Some(0.0), "{r}");
            for name in ["latency_p50_us", "latency_p99_us"] {
                assert!(get(name)["value"].is_null(), "{r}");
                assert_eq!(
                    get(name)["source"],
                    "unavailable: no request completed inside the window",
                    "{r}"
                );
            }
            common::skip(&format!(
                "{}: no request completed inside the window on this busy machine",
                r["label"]
            ));
            continue;
        }
        assert!(get("requests_per_s")["value"].as_f64().unwrap() > 0.0);
        assert_eq!(get("requests_per_s")["source"], "tool");
        assert_eq!(get("requests_per_s")["role"], "system");
        assert_eq!(get("errors")["value"].as_f64(), Some(0.0), "{r}");
        let p50 = get("latency_p50_us")["value"].as_f64().unwrap();
        let p99 = get("latency_p99_us")["value"].as_f64().unwrap();
        let max = get("latency_max_us")["value"].as_f64().unwrap();
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max);
        let of = |name: &str, role: &str| role_metric(r, role, name).unwrap_or_else(|| panic!("no {role} {name}"));
        assert_eq!(of("cpu_user_s", "server")["source"], "rusage");
        assert_eq!(of("cpu_sys_s", "client")["source"], "rusage");
        assert!(of("cpu_us_per_req", "client")["value"].as_f64().unwrap() > 0.0);
        assert!(of("cpu_us_per_req", "server")["value"].as_f64().unwrap() > 0.0);
        assert!(of("clock_overhead_ns", "client")["value"].as_f64().unwrap() > 0.0);
        // Cycles: a PMU count or an estimate, never a bare zero without a source.
        let cycles = get("cycles");
        assert!(cycles["source"] == "pmu" || cycles["source"] == "estimate", "{cycles}");
        assert_eq!(r["case"]["workload"], "servers");
        assert!(r["case"]["request"] == "echo:64" || r["case"]["request"] == "procs:2");
        assert!(r["case"]["model"] == "epoll" || r["case"]["model"] == "threads");
    }
}

/// Found in review: iterative with 50 clients served one and left 49 waiting, yet printed a
/// p99 of ~180 us with 0 errors. Requests still waiting when the window closes now enter the
/// percentiles with their age, and a note says how many were starved.
#[test]
fn starved_clients_show_in_the_tail_latency() {
    let out = iopath()
        .args([
            "servers",
            "--model",
            "iterative",
            "--request",
            "echo:64",
            "--clients",
            "10",
            "--duration",
            "400ms",
            "--warmup",
            "100ms",
            "--json",
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &records[0];
    let value = |name: &str| {
        metric(r, name)
            .and_then(|m| m["value"].as_f64())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert!(value("unanswered_at_end") >= 9.0, "{r}");
    assert!(
        value("latency_max_us") >= 100_000.0,
        "the starved clients' waits are missing: {r}"
    );
    assert!(
        r["observation"]["warnings"]
            .to_string()
            .contains("unanswered when the window closed"),
        "{r}"
    );
}

/// Found in review: when file descriptors ran out, every connection was made and then the
/// epoll could not be, and the run showed a silent 0 req/s. Failed connections are now errors
/// and the connections that were made are served. (This was flaky under CPU load until the
/// load generator left the server its descriptors: only the clients that fit with their
/// server side connect, whatever the scheduling, so every count below is deterministic.)
#[test]
fn running_out_of_file_descriptors_is_counted_not_silent() {
    let bin = bin();
    let script = format!(
        "ulimit -n 64 && exec '{}' servers --model epoll --request echo:64 --clients 100 --duration 300ms --warmup 100ms --json",
        bin.display()
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .env("IOPATH_DB", common::own_db())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let value = |name: &str| {
        metric(&records[0], name)
            .and_then(|m| m["value"].as_f64())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert!(value("errors") > 0.0, "{records}");
    // Every client is accounted for: connected, or a connect error.
    let connected = value("clients_connected");
    assert!(connected >= 1.0, "{records}");
    assert_eq!(connected + value("connect_errors"), 100.0, "{records}");
    assert!(
        records[0]["observation"]["warnings"]
            .to_string()
            .contains(&format!("only {connected} of 100 clients could connect")),
        "{records}"
    );
    assert!(
        value("requests_per_s") > 0.0,
        "the connections that were made were not served: {records}"
    );
}

#[test]
fn servers_table_and_csv() {
    let out = iopath()
        .args([
            "servers",
            "--model",
            "poll",
            "--clients",
            "2",
            "--duration",
            "200ms",
            "--warmup",
            "0",
            "--csv",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = stdout(&out);
    let header = text.lines().next().unwrap();
    for col in [
        "model",
        "request",
        "clients",
        "system_requests_per_s",
        "client_latency_p99_us",
        "client_latency_p99_us_source",
    ] {
        assert!(header.split(',').any(|c| c == col), "no column {col} in {header}");
    }
    assert_eq!(text.lines().count(), 2);
}

/// Every bad value is refused with one line naming it and what is accepted, so a renamed
/// flag cannot pass as clap's "unexpected argument".
#[test]
fn bad_flags_get_one_line_and_exit_2() {
    let cases: [(&[&str], &str); 12] = [
        (
            &["servers", "--model", "forking"],
            "unknown model 'forking' (accepted: iterative",
        ),
        (&["servers", "--clients", "0"], "--clients: '0' must be at least 1"),
        (
            &["servers", "--clients", "50000"],
            "--clients: 50000 is above the limit",
        ),
        (
            &["servers", "--request", "echo:0"],
            "'echo:0': size 0 is out of range 1..1MiB (accepted: echo:<bytes>",
        ),
        (&["servers", "--request", "ftp:3"], "'ftp:3' (accepted: echo:<bytes>"),
        (&["servers", "--duration", "-1s"], "--duration: '-1s' is not a duration"),
        (
            &["servers", "--server-cpus", "99"],
            "--server-cpus: CPU 99 is not online",
        ),
        (&["servers", "--rate", "0"], "--rate 0 is out of range (accepted: 1 to"),
        (
            &["procs", "serve", "--listen", "not-an-address"],
            "--listen: 'not-an-address' is not an address",
        ),
        (&["procs", "serve", "--model", "fork"], "unknown model 'fork'"),
        (
            &["procs", "serve", "--max-conns", "0"],
            "--max-conns: must be at least 1",
        ),
        (&["procs", "query", "127.0.0.1:7070", "-k", "0"], "-k: accepted 1..1000"),
    ];
    for (args, says) in cases {
        let err = usage_error(args);
        assert!(err.contains(says), "{args:?}: expected '{says}' in {err}");
    }
}

#[test]
fn no_perf_keeps_rusage_and_says_why_perf_is_missing() {
    let out = iopath()
        .args([
            "servers",
            "--model",
            "iterative",
            "--clients",
            "1",
            "--duration",
            "200ms",
            "--warmup",
            "0",
            "--no-perf",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let get = |name: &str| metric(&v[0], name).unwrap_or_else(|| panic!("no {name}"));
    assert_eq!(
        get("context_switches")["source"],
        "unavailable: perf counters off (--no-perf)"
    );
    assert!(get("context_switches")["value"].is_null());
    assert_eq!(get("cpu_sys_s")["source"], "rusage");
    assert!(get("cpu_sys_s")["value"].as_f64().is_some());
    assert_eq!(v[0]["case"]["perf"], false);
}

/// Regression: the edge-triggered loop accepted 64 connections per listener report and never
/// heard of the rest of a connect burst again (36 of 100 clients timed out).
#[test]
fn every_model_accepts_a_connect_burst_beyond_one_batch() {
    for model in ["epoll-et", "epoll", "pool", "uring"] {
        let out = iopath()
            .args([
                "servers",
                "--model",
                model,
                "--clients",
                "150",
                "--duration",
                "1500ms",
                "--warmup",
                "0",
                "--json",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let get = |name: &str| metric(&v[0], name).unwrap_or_else(|| panic!("no {name}"))["value"].as_f64();
        if get("requests_per_s").is_none() {
            // Only a kernel without io_uring may leave a model out, and it says so; any other
            // model without a rate is a failure (this test once passed with none run).
            let why = v[0]["observation"].to_string();
            assert!(
                model == "uring" && why.contains("io_uring"),
                "{model} has no rate: {why}"
            );
            common::skip(&format!("{model} did not run here: {why}"));
            continue;
        }
        assert_eq!(get("clients_connected"), Some(150.0), "{model}");
        assert_eq!(
            get("timeouts"),
            Some(0.0),
            "{model}: {}",
            v[0]["observation"]["warnings"]
        );
        assert_eq!(get("errors"), Some(0.0), "{model}: {}", v[0]["observation"]["warnings"]);
    }
}

#[test]
fn sigterm_stops_the_service_like_sigint() {
    let Some(server) = Served::start("epoll", &[]) else {
        return;
    };
    well_behaved(server.addr);
    let (code, err) = server.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("1 thread(s) joined"), "{err}");
}

/// Run a long servers case in-process, request a stop after `after`, and check it comes back
/// as Interrupted (not a cut-short observation) within a second, the server's threads gone.
fn stop_servers_after(model: &str, warmup_ms: u64, after: Duration) {
    // One at a time: each checks that no thread of a run is left in this process.
    let _alone = common::in_process_alone();
    let mut case = iopath::case::ServersCase::new(model.parse().unwrap(), "echo:64".parse().unwrap(), 8, 30_000);
    case.warmup_ms = warmup_ms;
    case.perf = false;
    let stop = iopath::stop::Stop::fresh();
    common::assert_stops_as_interrupted(move || iopath::servers::run_case(&case, stop), stop, after, &["srv-"]);
}

#[test]
fn a_stop_in_the_window_interrupts_a_servers_run_within_a_second() {
    stop_servers_after("epoll", 0, Duration::from_millis(300));
}

#[test]
fn a_stop_in_the_warm_up_interrupts_a_servers_run_within_a_second() {
    stop_servers_after("threads", 30_000, Duration::from_millis(300));
}

/// The server process's CPU time so far (utime + stime from /proc/<pid>/stat), in seconds.
fn process_cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..].split_whitespace().collect();
    // Fields 14 and 15 of proc(5), counted from 3 (state) after the name.
    let ticks: u64 = rest[14 - 3].parse::<u64>().unwrap() + rest[15 - 3].parse::<u64>().unwrap();
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap_or(100) as f64;
    ticks as f64 / hz
}

/// Start `procs serve` under `ulimit -n 32` (the shell execs it, so the child is the server).
fn start_with_fd_limit(model: &str) -> Option<Served> {
    let script = format!(
        "ulimit -n 32 && exec '{}' procs serve --model {model} --listen 127.0.0.1:0 --idle-timeout 30s",
        bin().display()
    );
    let mut command = Command::new("sh");
    command.args(["-c", &script]);
    Served::launch(model, command)
}

/// Issue D: at the descriptor limit accept() fails with EMFILE while the listener stays
/// readable. No model may spin a CPU on it (level-triggered loops and the pool did), and the
/// edge-triggered loop must accept again once descriptors are free (no new edge comes for the
/// connections that waited in the backlog).
#[test]
fn at_the_fd_limit_no_model_spins_and_every_model_accepts_again() {
    for model in MODELS {
        let Some(server) = start_with_fd_limit(model) else {
            continue;
        };
        let pid = server.child.as_ref().unwrap().id();
        // More connections than 32 descriptors hold: the rest wait in the backlog.
        let crowd: Vec<TcpStream> = (0..48).map(|_| connect(server.addr)).collect();
        std::thread::sleep(Duration::from_millis(300));
        let before = process_cpu_s(pid);
        std::thread::sleep(Duration::from_secs(1));
        let used = process_cpu_s(pid) - before;
        assert!(
            used < 0.3,
            "{model}: the server used {used:.2} s of CPU in 1 s while out of descriptors"
        );
        drop(crowd);
        // Descriptors free up as the server sees the closes; a new client is served.
        let (tx, rx) = std::sync::mpsc::channel();
        let addr = server.addr;
        let client = std::thread::spawn(move || {
            well_behaved(addr);
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(Duration::from_secs(10)).is_ok(),
            "{model}: no new client was served after the descriptors were freed"
        );
        client.join().unwrap();
        let (code, err) = server.interrupt();
        assert_eq!(code, 0, "{model}: {err}");
    }
}

/// Whether the server closed `s` within `limit` (EOF or a reset), sending `trickle` one byte at
/// a time every 100 ms meanwhile when given.
fn closed_within(s: &mut TcpStream, limit: Duration, trickle: Option<&[u8]>) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let started = Instant::now();
    let mut next = 0;
    let mut buf = [0u8; 256];
    while started.elapsed() < limit {
        if let Some(bytes) = trickle {
            if next < bytes.len() && s.write_all(&bytes[next..next + 1]).is_err() {
                return true;
            }
            next += 1;
        }
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}

/// Issue D: a client trickling a frame one byte at a time is closed after the frame timeout
/// (it never goes idle, so the idle timeout never fired), and `--max-conns` idle clients
/// cannot lock everyone out: while newcomers are refused, connections idle over 1 s are
/// closed to make room (the iterative model: while others wait in its backlog).
#[test]
fn slow_and_idle_clients_cannot_hold_the_service() {
    for model in MODELS {
        let Some(server) = Served::start(
            model,
            &["--max-conns", "2", "--idle-timeout", "60s", "--frame-timeout", "1s"],
        ) else {
            continue;
        };
        let addr = server.addr;
        // The trickler: a 200-byte echo frame, one byte per 100 ms (20 s in all).
        let mut frame = Vec::new();
        protocol::encode_echo_request(&payload(200, 3), &mut frame);
        let mut slow = connect(addr);
        let started = Instant::now();
        assert!(
            closed_within(&mut slow, Duration::from_secs(6), Some(&frame)),
            "{model}: a client trickling a frame was not closed within 6 s"
        );
        assert!(
            started.elapsed() >= Duration::from_millis(900),
            "{model}: closed too early"
        );
        drop(slow);
        let (code, err) = server.interrupt();
        assert_eq!(code, 0, "{model}: {err}");
        assert!(err.contains("1 too slow"), "{model}: {err}");

        // A fresh server for the idle clients: the trickler's place is freed only after the
        // server has closed its socket, so right after the close a newcomer could find both
        // places taken (a refusal seen under load that said nothing about idle clients).
        let server =
            Served::start(model, &["--max-conns", "2", "--idle-timeout", "60s"]).expect("the model ran a moment ago");
        let addr = server.addr;
        // Two idle clients take both slots (iterative: one, the other queues behind it).
        let mut a = connect(addr);
        echo(&mut a, b"a");
        let mut b = connect(addr);
        if model != "iterative" {
            echo(&mut b, b"b");
        }
        // A newcomer is served within a few seconds, retrying after a refusal.
        let deadline = Instant::now() + Duration::from_secs(6);
        loop {
            let mut d = connect(addr);
            let mut req = Vec::new();
            protocol::encode_echo_request(b"d", &mut req);
            d.write_all(&req).unwrap();
            match read_reply(&mut d) {
                Some(Response::Echo(p)) if p == b"d" => break,
                other => {
                    assert!(
                        Instant::now() < deadline,
                        "{model}: idle clients kept a newcomer out for 6 s: {other:?}"
                    );
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        drop((a, b));
        let (code, err) = server.interrupt();
        assert_eq!(code, 0, "{model}: {err}");
    }
}

/// Issue D: `procs query --timeout` is a deadline for the reply as a whole. A server that
/// trickles a reply one byte every 200 ms never let a read time out, so the client waited as
/// long as the server liked; now it gives up after 1 s and says so in words (not "Resource
/// temporarily unavailable (os error 11)").
#[test]
fn procs_query_gives_up_on_a_trickled_reply_at_its_deadline() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut request = [0u8; 11];
        s.read_exact(&mut request).unwrap();
        // The start of a procs reply frame, then its payload, one byte at a time (20 s in all).
        let mut reply = b"io\x01\x82\x00\x00\x00\x40".to_vec();
        reply.extend([0u8; 92]);
        let started = Instant::now();
        for byte in reply {
            if s.write_all(&[byte]).is_err() || started.elapsed() > Duration::from_secs(20) {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let started = Instant::now();
    let out = iopath()
        .args(["procs", "query", &addr.to_string(), "--timeout", "1s"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let took = started.elapsed();
    server.join().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // The message says the deadline held; the time only tells a client that gave up from one
    // that waited for the 20 s trickle, so it is bounded at half of that (a loaded machine
    // can delay a process start and its exit by seconds).
    assert!(
        took < Duration::from_secs(10),
        "the client waited {took:?} with --timeout 1s: {err}"
    );
    assert!(err.contains("timed out after 1 s"), "{err}");
    assert!(!err.contains("os error 11"), "{err}");
}

/// The records of `iopath servers` run through `sh -c` (so `taskset` can wrap it).
fn servers_json_via_shell(prefix: &str, args: &str) -> serde_json::Value {
    let script = format!("{prefix} '{}' servers {args} --json", bin().display());
    let out = Command::new("sh")
        .args(["-c", &script])
        .env("IOPATH_DB", common::own_db())
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Issue A5: a servers record says where each side's threads ran (CPU at the window's edges,
/// migrations), and warns when client and server shared a CPU while left to the scheduler
/// (repetitions differed 4x depending on it). Before, `placement` was always empty.
#[test]
fn servers_records_where_each_side_ran_and_warns_when_they_shared_a_cpu() {
    let common = "--model threads --request echo:64 --clients 2 --duration 300ms --warmup 100ms";
    // The whole process confined to CPU 0: both sides share it, neither is pinned.
    let v = servers_json_via_shell("taskset -c 0", common);
    let obs = &v[0]["observation"];
    let placement = obs["placement"].as_array().unwrap();
    for role in ["server", "client"] {
        let side: Vec<_> = placement.iter().filter(|p| p["role"] == role).collect();
        assert!(!side.is_empty(), "no {role} threads in {placement:?}");
        for p in side {
            assert_eq!(p["cpu_at_start"], 0, "{p}");
            assert_eq!(p["cpu_at_end"], 0, "{p}");
            assert!(p["pinned"].is_null(), "{p}");
            assert!(p["migrations"].is_u64(), "{p}");
        }
    }
    let shared = obs["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "unpinned" && w["text"].as_str().unwrap().contains("same CPU (0)"));
    assert!(shared.is_some(), "no shared-CPU warning: {}", obs["warnings"]);

    // Pinned apart (when there are two CPUs): each side where it was put, no such warning.
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        common::skip("one CPU: the two sides cannot be pinned apart");
        return;
    }
    let v = servers_json_via_shell("", &format!("{common} --server-cpus 1 --client-cpus 0"));
    let obs = &v[0]["observation"];
    for p in obs["placement"].as_array().unwrap() {
        let cpu = if p["role"] == "server" { 1 } else { 0 };
        assert_eq!(p["pinned"], serde_json::json!([cpu]), "{p}");
        assert_eq!(p["cpu_at_start"], cpu, "{p}");
        assert_eq!(p["cpu_at_end"], cpu, "{p}");
    }
    assert!(!obs["warnings"].to_string().contains("same CPU"), "{}", obs["warnings"]);
}
