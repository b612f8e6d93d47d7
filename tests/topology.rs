//! `--topology`: every topology this kernel supports carries traffic, and nothing it built
//! (namespaces, veth pairs, qdiscs) outlives the run, whether it succeeded, was refused,
//! was interrupted with SIGINT or killed with SIGKILL. Namespace topologies need root: the
//! tests that build one skip themselves otherwise.

mod common;

use assert_cmd::Command;
use common::{bin, net_serve, value_of, NetServe};
use serde_json::Value;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// One test at a time: each checks that no new iopath link remains, which a run of another
/// test in parallel would break.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Interfaces of this machine's (root) namespace that an iopath run named.
fn our_links() -> Vec<String> {
    std::fs::read_dir("/sys/class/net")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("iop"))
        .collect()
}

/// The kernel destroys a namespace (and its veth pairs) asynchronously after its last
/// reference goes: wait up to 3 s for the host ends to disappear.
fn assert_nothing_left(what: &str, before: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let left: Vec<String> = our_links().into_iter().filter(|l| !before.contains(l)).collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "{what}: left behind {left:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let named = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let named = String::from_utf8_lossy(&named.stdout).to_string();
    assert!(!named.contains("iopath"), "{what}: named namespaces {named}");
}

fn stream(topology: &str) -> Value {
    let out = Command::new(bin())
        .args([
            "net",
            "stream",
            "--topology",
            topology,
            "--mode",
            "one-copy",
            "--size",
            "64K",
        ])
        .args(["--duration", "250ms", "--warmup", "50ms", "--json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{topology}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records: Value = serde_json::from_slice(&out.stdout).unwrap();
    records[0].clone()
}

#[test]
fn every_supported_topology_carries_the_stream_and_leaves_nothing() {
    let _serial = serial();
    let mut topologies = vec!["loopback"];
    if is_root() {
        topologies.extend(["netns", "veth", "veth:mtu=4148", "veth:mtu=9000"]);
    } else {
        common::skip("not root: only loopback was checked (namespaces need root)");
    }
    let before = our_links();
    for t in topologies {
        let record = stream(t);
        assert!(record["error"].is_null(), "{t}: {}", record["error"]);
        let received = value_of(&record, "server", "bytes_received").unwrap_or(0.0);
        assert!(received > 0.0, "{t}: no bytes arrived");
        let kind = record["case"]["endpoint"]["kind"].as_str().unwrap().to_string();
        assert!(t.starts_with(&kind), "{t}: the case says {kind}");
        for (name, role) in [
            ("tcp_segments_out", "system"),
            ("tcp_retransmits", "system"),
            ("tcpi_rtt_us", "client"),
            ("tcpi_delivery_rate_gbps", "client"),
            ("runqueue_wait_max_pct", "system"),
            ("system_cpu_softirq_s", "system"),
        ] {
            let m = record["observation"]["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == name && m["role"] == role)
                .unwrap_or_else(|| panic!("{t}: no {name}"));
            assert_eq!(m["source"], "kernel", "{t}: {name}");
        }
        // In a private namespace the TCP counters count this run's segments only.
        if t != "loopback" {
            assert!(value_of(&record, "system", "tcp_segments_in").unwrap() > 0.0, "{t}");
        }
        if let Some(mtu) = t.strip_prefix("veth:mtu=") {
            assert_eq!(record["case"]["endpoint"]["mtu"].as_u64().unwrap().to_string(), mtu);
        }
        assert_nothing_left(t, &before);
    }
}

/// `ipv6` (issue 36): a stream and an rr over `veth:ipv6` and `netns:ipv6` carry their data,
/// and the case records the option (stored, so a run over IPv4 is another case).
#[test]
fn ipv6_topologies_carry_a_stream_and_an_rr_and_the_case_records_it() {
    let _serial = serial();
    if !is_root() {
        common::skip("namespaces need root");
        return;
    }
    let before = our_links();
    for t in ["veth:ipv6", "netns:ipv6"] {
        let record = stream(t);
        assert!(record["error"].is_null(), "{t}: {}", record["error"]);
        assert!(
            value_of(&record, "server", "bytes_received").unwrap_or(0.0) > 0.0,
            "{t}"
        );
        assert_eq!(record["case"]["endpoint"]["ipv6"], true, "{t}: {}", record["case"]);
        let out = Command::new(bin())
            .args([
                "net",
                "rr",
                "--topology",
                t,
                "--request-size",
                "80000",
                "--response-size",
                "80000",
            ])
            .args(["--duration", "250ms", "--warmup", "50ms", "--json"])
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        assert!(out.status.success(), "{t}: {}", String::from_utf8_lossy(&out.stderr));
        let records: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(records[0]["error"].is_null(), "{t}: {}", records[0]["error"]);
        assert!(
            value_of(&records[0], "system", "transactions_per_s").unwrap_or(0.0) > 0.0,
            "{t}"
        );
        assert_eq!(records[0]["case"]["endpoint"]["ipv6"], true, "{t}");
        assert_nothing_left(t, &before);
    }
    // IPv4 stays the default and is not written, so cases stored before the option keep their keys.
    assert!(stream("veth")["case"]["endpoint"].get("ipv6").is_none());
    // udp-rr speaks IPv4 only: refused in one line, before anything is built.
    let err = common::usage_error(&["net", "udp-rr", "--topology", "veth:ipv6"]);
    assert!(err.contains("IPv4 only"), "{err}");
}

#[test]
fn a_rate_limited_veth_delivers_about_its_rate() {
    let _serial = serial();
    if !is_root() {
        common::skip("namespaces need root");
        return;
    }
    let before = our_links();
    let record = stream("veth:rate=100mbit");
    let gbps = value_of(&record, "system", "throughput_gbps").unwrap();
    // tbf lets a 4 ms bucket through at once: within a 250 ms window that is under 2%. The
    // ceiling is the shaper's and holds whatever the load; the floor only needs to tell a
    // 100mbit link from a broken or far slower one, and is a tenth of the rate because a
    // loaded machine can keep the two ends off the CPU for much of a 250 ms window.
    assert!((0.01..=0.115).contains(&gbps), "100mbit link carried {gbps} Gbit/s");
    assert_nothing_left("veth:rate", &before);
}

#[test]
fn servers_and_micro_tcp_run_in_a_namespace() {
    let _serial = serial();
    if !is_root() {
        common::skip("namespaces need root");
        return;
    }
    let before = our_links();
    let out = Command::new(bin())
        .args([
            "servers",
            "--model",
            "epoll",
            "--clients",
            "2",
            "--topology",
            "veth:mtu=4148",
        ])
        .args(["--duration", "200ms", "--warmup", "50ms", "--json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let records: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(records[0]["case"]["topology"]["kind"], "veth");
    // The load generator's connections report their own account (TCP_INFO) too.
    for name in ["tcpi_rtt_us", "tcpi_total_retrans", "tcpi_busy_s"] {
        let m = records[0]["observation"]["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name && m["role"] == "client")
            .unwrap_or_else(|| panic!("servers: no {name}"));
        assert_eq!(m["source"], "kernel", "{name}");
        assert!(m["value"].as_f64().is_some(), "{name}: {m}");
    }
    let out = Command::new(bin())
        .args([
            "micro",
            "tcp",
            "--quick",
            "--variant",
            "rtt",
            "--samples",
            "3",
            "--topology",
            "netns",
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("topology=netns"));
    assert_nothing_left("servers, micro tcp", &before);
}

#[test]
fn delay_and_loss_are_refused_without_netem() {
    let _serial = serial();
    let config = std::process::Command::new("sh")
        .args([
            "-c",
            "zcat /proc/config.gz 2>/dev/null | grep -c '^CONFIG_NET_SCH_NETEM=[ym]'",
        ])
        .output()
        .unwrap();
    if String::from_utf8_lossy(&config.stdout).trim() != "0" {
        // Only a kernel that says it lacks netem can show the refusal.
        common::skip("this kernel has netem or does not publish its configuration");
        return;
    }
    let before = our_links();
    for t in ["veth:delay=1ms", "veth:loss=1%"] {
        let out = Command::new(bin())
            .args(["net", "stream", "--topology", t, "--duration", "200ms"])
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{t}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("unavailable: the kernel has no netem qdisc (CONFIG_NET_SCH_NETEM)"),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    assert_nothing_left("refused", &before);
}

#[test]
fn an_unknown_topology_is_a_usage_error() {
    let _serial = serial();
    for (cmd, t) in [
        ("net", "vethx"),
        ("servers", "remote 10.0.0.2:5201"),
        ("micro", "veth:mtu=10"),
    ] {
        let mut c = Command::new(bin());
        match cmd {
            "net" => c.args(["net", "stream"]),
            "servers" => c.args(["servers"]),
            _ => c.args(["micro", "tcp"]),
        };
        let out = c
            .args(["--topology", t])
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd} {t}");
    }
}

/// Start a long veth run, let it build its link and send, then send it `signals`.
fn signalled(signals: &[nix::sys::signal::Signal]) -> std::process::ExitStatus {
    let before = our_links();
    let mut child = std::process::Command::new(bin())
        .args(["net", "stream", "--topology", "veth:mtu=4148", "--mode", "one-copy"])
        .args(["--duration", "20s", "--warmup", "100ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let pid = child.id();
    while !our_links().iter().any(|l| l.starts_with(&format!("iop{pid}c"))) {
        assert!(Instant::now() < deadline, "the run built no veth pair");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    for signal in signals {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), *signal).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit after {signals:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_nothing_left(&format!("{signals:?}"), &before);
    status
}

#[test]
fn sigint_twice_and_sigkill_leave_nothing_behind() {
    let _serial = serial();
    use nix::sys::signal::Signal::{SIGINT, SIGKILL};
    if !is_root() {
        common::skip("namespaces need root");
        return;
    }
    // One Ctrl-C: the run stops within about a second and exits 0 (docs/architecture.md).
    assert_eq!(signalled(&[SIGINT]).code(), Some(0));
    // A second Ctrl-C forces the exit (130); the namespace dies with the process.
    let code = signalled(&[SIGINT, SIGINT]).code();
    assert!(code == Some(130) || code == Some(0), "{code:?}");
    // kill -9: no code of ours runs, and still nothing survives.
    assert!(signalled(&[SIGKILL]).code().is_none());
}

#[test]
fn net_serve_listens_on_loopback_by_default() {
    let out = Command::new(bin()).args(["net", "serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(help.contains("[default: 127.0.0.1:5201]"), "{help}");
}

/// A `net serve --psk-file KEY` on a free loopback port.
fn psk_server(key: &std::path::Path) -> NetServe {
    let key = key.to_str().unwrap();
    net_serve(&["--max-session", "2s", "--psk-file", key])
}

#[test]
fn a_session_that_reaches_the_servers_byte_budget_is_ended_with_the_limit_named() {
    let server = net_serve(&["--max-session-bytes", "300M"]);
    let client = |size: &str, duration: &str| {
        Command::new(bin())
            .args(["net", "stream", "--connect", &server.addr, "--mode", "one-copy"])
            .args(["--size", size, "--duration", duration, "--warmup", "20ms"])
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap()
    };
    // Far under the budget: served.
    let small = client("1K", "50ms");
    assert!(small.status.success(), "{}", String::from_utf8_lossy(&small.stderr));
    // 64 KiB messages for 20 s pass 300 MB within the first second even in a debug build.
    let started = std::time::Instant::now();
    let big = client("64K", "20s");
    assert!(!big.status.success());
    let err = String::from_utf8_lossy(&big.stderr);
    assert!(err.contains("byte budget of 300MiB"), "{err}");
    assert!(err.contains("--max-session-bytes"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "not ended at the budget: {:?}: {err}",
        started.elapsed()
    );
    // The server serves the next session.
    assert!(client("1K", "50ms").status.success());
    // Request/response sessions count against the budget too: 64 KiB requests for 20 s.
    let rr = Command::new(bin())
        .args(["net", "rr", "--connect", &server.addr, "--request-size", "64K"])
        .args(["--duration", "20s", "--warmup", "20ms"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(!rr.status.success());
    let err = String::from_utf8_lossy(&rr.stderr);
    assert!(err.contains("byte budget of 300MiB"), "{err}");
    // And records sessions: 32 records of 1 KiB per response for 20 s.
    let records = Command::new(bin())
        .args([
            "net",
            "records",
            "--topology",
            &format!("remote {}", server.addr),
            "--mode",
            "gather",
        ])
        .args(["--record-size", "1K", "--records", "32", "--table", "8M"])
        .args(["--duration", "20s", "--warmup", "20ms"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(!records.status.success());
    let err = String::from_utf8_lossy(&records.stderr);
    assert!(err.contains("byte budget of 300MiB"), "{err}");
}

#[test]
fn a_psk_server_serves_the_right_key_and_refuses_others_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (right, wrong) = (dir.path().join("right"), dir.path().join("wrong"));
    std::fs::write(&right, "correct horse battery staple 0123\n").unwrap();
    std::fs::write(&wrong, "another key entirely, also long\n").unwrap();
    let server = psk_server(&right);
    let client = |key: Option<&std::path::Path>| {
        let mut c = Command::new(bin());
        c.args(["net", "stream", "--connect", &server.addr, "--mode", "one-copy"])
            .args(["--duration", "200ms", "--warmup", "50ms"]);
        if let Some(k) = key {
            c.arg("--psk-file").arg(k);
        }
        c.timeout(Duration::from_secs(30)).output().unwrap()
    };
    let ok = client(Some(&right));
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let bad = client(Some(&wrong));
    assert!(!bad.status.success());
    let bad_err = String::from_utf8_lossy(&bad.stderr);
    assert!(bad_err.contains("wrong or missing pre-shared key"), "{bad_err}");
    let none = client(None);
    assert!(!none.status.success());
    assert!(String::from_utf8_lossy(&none.stderr).contains("requires a pre-shared key"));
    // The server is still there for the right key after refusing others.
    assert!(client(Some(&right)).status.success());
    // A session longer than --max-session is refused with the limit named.
    let long = Command::new(bin())
        .args([
            "net",
            "stream",
            "--connect",
            &server.addr,
            "--mode",
            "one-copy",
            "--duration",
            "3s",
        ])
        .arg("--psk-file")
        .arg(&right)
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(!long.status.success());
    let err = String::from_utf8_lossy(&long.stderr);
    assert!(err.contains("at most 2.0 s (--max-session)"), "{err}");
    // A short key is refused at start, exit 2.
    let short = dir.path().join("short");
    std::fs::write(&short, "abc").unwrap();
    let out = Command::new(bin())
        .args(["net", "serve", "--listen", "127.0.0.1:0", "--psk-file"])
        .arg(&short)
        .timeout(Duration::from_secs(10))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn without_the_capabilities_a_namespace_topology_is_one_line_and_exit_2() {
    // Root with every capability dropped (setpriv from util-linux), where available.
    if !is_root() || !std::path::Path::new("/usr/bin/setpriv").exists() {
        common::skip("needs root and /usr/bin/setpriv to drop every capability");
        return;
    }
    for (cmd, t) in [("net", "netns"), ("servers", "veth"), ("micro", "veth:mtu=9000")] {
        let mut c = Command::new("/usr/bin/setpriv");
        c.args(["--bounding-set", "-all", "--inh-caps", "-all"]).arg(bin());
        match cmd {
            "net" => c.args(["net", "stream"]),
            "servers" => c.args(["servers"]),
            _ => c.args(["micro", "tcp"]),
        };
        let out = c
            .args(["--topology", t])
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd} {t}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"), "{err}");
    }
}

/// BIG TCP's sizes: a gso size above the built device's tso_max_size, an option on loopback
/// (whose lo is this host's), a size that is no size, and a device setting above the device's
/// tso_max_size are each one line and exit 2, before anything is built or measured.
#[test]
fn bad_device_sizes_are_one_line_and_exit_2() {
    let _serial = serial();
    let err = common::usage_error(&["net", "rr", "--topology", "loopback:gso_max_size=185000"]);
    assert!(
        err.contains("never changes") && err.contains("netns:gso_max_size=185000"),
        "{err}"
    );
    let err = common::usage_error(&["net", "stream", "--topology", "loopback:ipv6"]);
    assert!(err.contains("need a namespace") && err.contains("netns:ipv6"), "{err}");
    let err = common::usage_error(&["net", "stream", "--topology", "veth:gso_ipv4_max_size=big"]);
    assert!(err.contains("gso_ipv4_max_size takes a size in bytes"), "{err}");
    if !is_root() {
        common::skip("the tso_max_size check reads a device in a namespace of its own: needs root");
        return;
    }
    // 16 MiB (16384K) parses and is above any device's tso_max_size (the kernel's largest is 512 KiB).
    let err = common::usage_error(&["net", "stream", "--topology", "veth:gso_max_size=16384K"]);
    assert!(err.contains("above the tso_max_size of a veth device"), "{err}");
    let err = common::usage_error(&["net", "rr", "--topology", "netns:gso_ipv4_max_size=16384K"]);
    assert!(err.contains("above the tso_max_size of a namespace's lo"), "{err}");
    // An A/B run's variant B is held to the same bound, before anything runs.
    let err = common::usage_error(&[
        "ab",
        "--set",
        "dev:server:gso_max_size=16384K",
        "--",
        "net",
        "rr",
        "--topology",
        "veth",
    ]);
    assert!(err.contains("above the tso_max_size of a veth device"), "{err}");
}
