//! `iopath net udp-stream`: every send × receive mode with --verify over loopback at a low
//! paced rate (every datagram arrives intact: 0 lost), the plain modes over veth (root), an
//! unpaced burst into a tiny receive buffer (loss counted and shown in the JSON and the
//! table), refused input, and a remote `iopath net serve` with a pre-shared key.

mod common;

use common::{iopath, json_records, stderr, stdout, usage_error, value};
use serde_json::Value;
use std::time::Duration;

/// Low enough that the receiver keeps up however busy the machine: at 500 datagrams/s the
/// socket buffer the kernel grants (rmem_max, doubled) holds hundreds of milliseconds of them.
const LOW_RATE: &str = "500";

fn run(args: &[&str]) -> Vec<Value> {
    let out = iopath()
        .args(["net", "udp-stream"])
        .args(args)
        .args(["--duration", "300ms", "--warmup", "50ms", "--json"])
        .timeout(Duration::from_secs(180))
        .output()
        .unwrap();
    assert!(out.status.success(), "iopath {args:?}: {}", stderr(&out));
    json_records(&out)
}

/// A record the kernel refused (a mode it lacks) is a recorded skip, not a pass.
fn refused(record: &Value) -> bool {
    let warnings = record["observation"]["warnings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    match warnings.iter().find(|w| w["kind"] == "unsupported") {
        Some(w) => {
            common::skip(&format!("{}: {}", record["label"], w["text"]));
            true
        }
        None => false,
    }
}

/// Every datagram the client sent arrived, once, intact.
fn check_all_arrived(record: &Value) {
    let label = record["label"].as_str().unwrap_or("?");
    assert!(record["error"].is_null(), "{label}: {}", record["error"]);
    let sent = value(record, "system", "session_datagrams_sent");
    assert!(sent > 0.0, "{label}: nothing sent");
    let lost = value(record, "system", "datagrams_lost");
    if lost > 0.0 {
        // At a low rate only a receiver starved of the CPU for a good part of a second lets
        // its socket buffer overflow (seen once with builds running beside the tests): then
        // the kernel's own count of what the socket dropped is exactly the loss. Any other
        // loss is a defect.
        assert_eq!(value(record, "server", "socket_drops"), lost, "{label}: lost {lost}");
        common::skip(&format!(
            "{label}: the starved receiver's socket dropped {lost} datagrams on this busy machine"
        ));
        return;
    }
    assert_eq!(lost, 0.0, "{label}");
    assert_eq!(value(record, "system", "loss_fraction"), 0.0, "{label}");
    assert_eq!(value(record, "system", "session_datagrams_received"), sent, "{label}");
    assert_eq!(value(record, "server", "datagrams_duplicate"), 0.0, "{label}");
    assert_eq!(value(record, "server", "corrupt_messages"), 0.0, "{label}");
    assert!(value(record, "server", "verified_messages") >= sent, "{label}");
    assert!(value(record, "client", "datagrams_sent") > 0.0, "{label}");
    assert!(value(record, "server", "syscalls_per_datagram") > 0.0, "{label}");
}

#[test]
fn every_send_and_receive_mode_delivers_every_datagram_with_verify() {
    let records = run(&[
        "--mode",
        "send,sendmsg,sendmmsg,gso,zerocopy,uring,uring-zc",
        "--rx-mode",
        "recv,recvmmsg,gro",
        "--size",
        "256",
        "--batch",
        "8",
        "--rate",
        LOW_RATE,
        "--verify",
    ]);
    assert_eq!(records.len(), 21);
    for r in &records {
        if refused(r) {
            continue;
        }
        check_all_arrived(r);
        if r["case"]["mode"] == "zerocopy" || r["case"]["mode"] == "uring-zc" {
            // Every completion came back before the thread ended.
            let completed = value(r, "system", "zerocopy_completed_sends");
            assert_eq!(completed, value(r, "system", "zerocopy_sends"), "{}", r["label"]);
        }
    }
}

#[test]
fn every_send_and_receive_mode_delivers_every_datagram_over_veth() {
    if !nix::unistd::geteuid().is_root() {
        common::skip("a veth pair needs root");
        return;
    }
    let records = run(&[
        "--topology",
        "veth",
        "--mode",
        "send,sendmsg,sendmmsg,gso,zerocopy,uring",
        "--rx-mode",
        "recv,recvmmsg,gro",
        "--size",
        "1400",
        "--batch",
        "8",
        "--rate",
        LOW_RATE,
        "--verify",
    ]);
    assert_eq!(records.len(), 18);
    for r in &records {
        assert_eq!(r["case"]["endpoint"]["kind"], "veth");
        if !refused(r) {
            check_all_arrived(r);
        }
    }
}

/// An unpaced sender into a receive buffer of a couple of datagrams: loss is certain, and is
/// counted (lost = sent − arrived, and the kernel's own drop count) and shown.
#[test]
fn a_tiny_receive_buffer_loses_datagrams_and_says_so() {
    let burst = [
        "--mode", "sendmmsg", "--batch", "64", "--size", "1K", "--rcvbuf", "256", "--verify",
    ];
    let records = run(&burst);
    let r = &records[0];
    let lost = value(r, "system", "datagrams_lost");
    let sent = value(r, "system", "session_datagrams_sent");
    assert!(lost > 0.0, "{r}");
    assert_eq!(lost + value(r, "system", "session_datagrams_received"), sent);
    assert!(value(r, "system", "loss_fraction") > 0.0);
    assert_eq!(value(r, "server", "corrupt_messages"), 0.0);
    // On loopback a datagram is lost only at its socket: the kernel's count is the same.
    assert_eq!(value(r, "server", "socket_drops"), lost, "{r}");
    assert!(value(r, "system", "udp_rcvbuf_errors") > 0.0, "{r}");
    // The table shows it too.
    let out = iopath()
        .args(["net", "udp-stream"])
        .args(burst)
        .args(["--duration", "300ms", "--warmup", "50ms"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let at = header.iter().position(|h| *h == "lost").expect("a lost column");
    // The key columns (mode, size, thr, rate) are one word each, as their titles.
    let shown: f64 = row[at].parse().unwrap_or_else(|_| panic!("{text}"));
    assert!(shown > 0.0, "{text}");
}

#[test]
fn refused_input_is_one_line_and_exit_2() {
    for (args, needle) in [
        (vec!["--size", "8"], "a datagram is 16 B"),
        (vec!["--size", "64K"], "to 65507 B"),
        (vec!["--rate", "fast"], "accepted: datagrams per second"),
        (vec!["--mode", "sendfile"], "unknown UDP send mode 'sendfile'"),
        (vec!["--rx-mode", "zerocopy"], "unknown UDP receive mode 'zerocopy'"),
        (vec!["--rcvbuf", "16"], "--rcvbuf 16: accepted 256 B to 1 GiB"),
        (vec!["--mode", "gso", "--batch", "65"], "at most 64 datagrams"),
        (
            vec!["--mode", "gso", "--size", "1500", "--topology", "veth"],
            "a GSO segment must fit the MTU",
        ),
    ] {
        // Without root a veth topology is refused for that first (its own one line, exit 2).
        if args.contains(&"veth") && !nix::unistd::geteuid().is_root() {
            common::skip("not root: --topology veth is refused for lacking root before its MTU is checked");
            continue;
        }
        let line = usage_error(&[&["net", "udp-stream"], args.as_slice()].concat());
        assert!(line.contains(needle), "{args:?}: {line}");
    }
}

#[test]
fn net_serve_with_a_key_serves_it() {
    let dir = tempfile::tempdir().unwrap();
    let key = common::psk_file(dir.path());
    let key = key.as_str();
    let server = common::net_serve(&["--psk-file", key]);
    let records = run(&[
        "--connect",
        &server.addr,
        "--psk-file",
        key,
        "--mode",
        "sendmmsg",
        "--rx-mode",
        "recvmmsg",
        "--threads",
        "2",
        "--rate",
        LOW_RATE,
        "--verify",
    ]);
    check_all_arrived(&records[0]);
    assert_eq!(records[0]["case"]["endpoint"]["kind"], "remote");
    // Without the key the server refuses: the run fails, saying why.
    let out = iopath()
        .args(["net", "udp-stream", "--connect", &server.addr, "--duration", "100ms"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("key"), "{}", stderr(&out));
}

fn long_case(rate: Option<iopath::case::UdpRate>) -> iopath::case::UdpStreamCase {
    use iopath::case::{NetParams, UdpRecvMode, UdpSendMode, UdpStreamCase};
    UdpStreamCase {
        mode: UdpSendMode::Sendmmsg,
        rx_mode: UdpRecvMode::Recvmmsg,
        size: 512,
        batch: 16,
        rate,
        rcvbuf: None,
        net: NetParams {
            threads: 2,
            duration_ms: 30_000,
            ..NetParams::for_test()
        },
    }
}

/// A stop in a 30 s window ends the run as interrupted, unpaced or paced so slowly that the
/// senders sleep between datagrams, with no thread left behind.
#[test]
fn a_stop_in_a_30s_window_ends_it_with_nothing_left() {
    for rate in [None, Some(iopath::case::UdpRate::Datagrams(4))] {
        let _alone = common::in_process_alone();
        let case = long_case(rate);
        let stop = iopath::stop::Stop::fresh();
        common::assert_stops_as_interrupted(
            move || iopath::net::workload::udp_stream::run(&case, stop, &Default::default()),
            stop,
            Duration::from_millis(1000),
            &["iopath-udp", "iopath-server", "iopath-greet"],
        );
    }
}

/// The default table fits 100 columns; `--wide` shows every column docs/output.md lists.
#[test]
fn the_table_fits_100_columns_and_wide_has_every_column() {
    let table = |wide: bool| {
        let mut cmd = iopath();
        cmd.args([
            "net",
            "udp-stream",
            "--mode",
            "sendmmsg,zerocopy",
            "--rx-mode",
            "recvmmsg",
        ])
        .args(["--rate", "200k", "--duration", "150ms", "--warmup", "0"]);
        if wide {
            cmd.arg("--wide");
        }
        let out = cmd.timeout(Duration::from_secs(60)).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let text = table(false);
    for line in text.lines() {
        assert!(line.chars().count() <= 100, "{} columns: {line}", line.chars().count());
    }
    let header = text.lines().next().unwrap();
    for title in [
        "mode",
        "size",
        "thr",
        "rate",
        "Gbit/s",
        "dgram/s",
        "lost",
        "loss",
        "cli us/dg",
        "srv us/dg",
    ] {
        assert!(header.contains(title), "{title}: {header}");
    }
    let wide = table(true);
    let header = wide.lines().next().unwrap();
    for title in [
        "jitter us",
        "sent",
        "received",
        "reordered",
        "dup",
        "sock drops",
        "rcvbuf",
        "cli sc/dg",
        "srv sc/dg",
        "zc copied",
        "cli B/cpu-s",
        "calls/s",
        "cli B/cycle",
    ] {
        assert!(header.contains(title), "{title}: {header}");
    }
}

/// The UDP sockets of process `pid` as (local, remote) addresses, read from /proc: the
/// inodes its descriptors name, looked up in /proc/net/udp.
fn udp_sockets(pid: u32) -> Vec<(std::net::SocketAddrV4, std::net::SocketAddrV4)> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    l.strip_prefix("socket:[")?.strip_suffix(']').map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    // "sl local_address rem_address st ... inode": addresses as hex IP (host order) : hex port.
    let parse = |field: &str| -> Option<std::net::SocketAddrV4> {
        let (ip, port) = field.split_once(':')?;
        let ip = u32::from_str_radix(ip, 16).ok()?;
        let port = u16::from_str_radix(port, 16).ok()?;
        Some(std::net::SocketAddrV4::new(
            std::net::Ipv4Addr::from(u32::from_be(ip)),
            port,
        ))
    };
    let table = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.len() > 9 && inodes.iter().any(|i| i == f[9])).then(|| Some((parse(f[1])?, parse(f[2])?)))?
        })
        .collect()
}

/// One IPv4 + UDP datagram from `from` to `to` carrying `payload`, for a raw socket with the
/// header included (the kernel fills in the IP checksum; a UDP checksum of 0 means none).
fn forged_packet(from: std::net::SocketAddrV4, to: std::net::SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let total = 20 + 8 + payload.len();
    let mut p = Vec::with_capacity(total);
    p.extend_from_slice(&[0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    p.extend_from_slice(&from.ip().octets());
    p.extend_from_slice(&to.ip().octets());
    let udp_len = (8 + payload.len()) as u16;
    p.extend_from_slice(&from.port().to_be_bytes());
    p.extend_from_slice(&to.port().to_be_bytes());
    p.extend_from_slice(&udp_len.to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    p
}

/// Issue 31.5: datagrams forged with the client's own address from a raw socket on the same
/// machine — copies of numbers it sent, numbers far beyond anything it sent, and runts of 0
/// and 3 bytes — are counted apart (duplicate, forged, short), never as received datagrams:
/// no more distinct datagrams than were sent, and the loss is what the client's own count
/// says.
#[test]
fn datagrams_forged_with_the_clients_address_are_counted_apart() {
    use std::net::SocketAddrV4;
    if !nix::unistd::geteuid().is_root() {
        common::skip("forging datagrams needs a raw socket (root)");
        return;
    }
    // IPPROTO_RAW: the IP header is ours (IP_HDRINCL), so the source address can be forged.
    let raw = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::RAW,
        Some(socket2::Protocol::from(libc::IPPROTO_RAW)),
    )
    .expect("a raw socket");
    let server = common::net_serve(&[]);
    let client = common::spawn(&[
        "net",
        "udp-stream",
        "--connect",
        &server.addr,
        "--size",
        "64",
        "--rate",
        LOW_RATE,
        "--duration",
        "2s",
        "--warmup",
        "200ms",
        "--json",
    ]);
    let (client_pid, server_pid) = (client.id(), server.child.id());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let forger = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut forged_sent = 0u64;
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            let mut round = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && std::time::Instant::now() < deadline {
                let servers: Vec<SocketAddrV4> = udp_sockets(server_pid).into_iter().map(|(l, _)| l).collect();
                // The client's data sockets: those whose peer is one of the server's sockets.
                for (from, to) in udp_sockets(client_pid) {
                    if !servers.contains(&to) {
                        continue;
                    }
                    let mut header = [0u8; 64];
                    let mut payloads: Vec<Vec<u8>> = vec![Vec::new(), vec![7u8; 3]];
                    for seq in [round % 4, (1u64 << 40) + round, u64::MAX - round] {
                        header[..8].copy_from_slice(&seq.to_le_bytes());
                        header[8..16].copy_from_slice(&1u64.to_le_bytes());
                        payloads.push(header.to_vec());
                    }
                    for payload in payloads {
                        let packet = forged_packet(from, to, &payload);
                        if raw.send_to(&packet, &std::net::SocketAddr::V4(to).into()).is_ok() {
                            forged_sent += 1;
                        }
                    }
                }
                round += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            forged_sent
        })
    };
    let out = common::finish_within(client, Duration::from_secs(120));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let forged_sent = forger.join().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(forged_sent > 0, "the forger never found the client's data sockets");
    let record = &json_records(&out)[0];
    let sent = value(record, "system", "session_datagrams_sent");
    let distinct = value(record, "system", "session_datagrams_received");
    let lost = value(record, "system", "datagrams_lost");
    assert!(distinct <= sent, "{distinct} distinct of {sent} sent");
    assert_eq!(
        lost,
        sent - distinct,
        "the loss is the client's count less what arrived"
    );
    assert!(
        value(record, "server", "datagrams_short") > 0.0,
        "runts not counted short"
    );
    assert!(
        value(record, "server", "datagrams_forged") > 0.0,
        "numbers never sent not counted forged"
    );
    // The window's receive count is the client's datagrams, or not given (forged numbers
    // counted before they could be told apart): never more than were sent.
    let duplicates = value(record, "server", "datagrams_duplicate");
    match common::value_of(record, "server", "datagrams_received") {
        Some(received) => assert!(
            received <= sent + duplicates,
            "{received} received in the window of {sent} sent and {duplicates} duplicates"
        ),
        None => {
            let m = common::role_metric(record, "server", "datagrams_received").expect("the metric");
            assert!(m.to_string().contains("never sent"), "{m}");
        }
    }
    // Any loss at this rate is the starved receiver's socket dropping, never a forged count.
    if lost > 0.0 {
        assert_eq!(value(record, "server", "socket_drops"), lost);
    }
}

/// Why the kernel cannot build `veth:peer=drop` here (None: it can), as a skip reason.
fn peer_drop_unavailable() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("a veth pair needs root".into());
    }
    if let Some(missing) = common::missing_program("unshare") {
        return Some(missing);
    }
    let config = std::process::Command::new("sh")
        .args(["-c", "zcat /proc/config.gz 2>/dev/null"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    ["CONFIG_NET_SCH_INGRESS", "CONFIG_NET_CLS_BPF", "CONFIG_NET_CLS_ACT"]
        .into_iter()
        .find(|option| {
            !config.is_empty()
                && !config
                    .lines()
                    .any(|l| l == format!("{option}=y") || l == format!("{option}=m"))
        })
        .map(|option| format!("the kernel lacks {option}, which veth:peer=drop needs"))
}

/// `net udp-stream` run in a network namespace of its own (`unshare --net`, its loopback up:
/// the zero-copy modes ask a fresh socket on 127.0.0.1 first), so the veth pair's outer end
/// and its address never touch the namespace the tests run in: 1400-byte datagrams at 2,000 a
/// second for `duration` after 50 ms of warm-up, with `more` flags.
fn udp_stream_unshared(topology: &str, modes: &str, duration: &str, more: &[&str]) -> std::process::Output {
    std::process::Command::new("unshare")
        .args(["--net", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""])
        .arg(common::bin())
        .args(["net", "udp-stream", "--topology", topology, "--mode", modes])
        .args([
            "--size",
            "1400",
            "--rate",
            "2000",
            "--duration",
            duration,
            "--warmup",
            "50ms",
        ])
        .args(more)
        .output()
        .unwrap()
}

/// [`udp_stream_unshared`] for 300 ms, its JSON records once it succeeded.
fn run_unshared(topology: &str, modes: &str) -> Vec<Value> {
    let out = udp_stream_unshared(topology, modes, "300ms", &["--json"]);
    assert!(out.status.success(), "udp-stream over {topology}: {}", stderr(&out));
    json_records(&out)
}

/// Across `veth:peer=drop` no datagram reaches a socket, so nothing delivers the pages of a
/// zero-copy send locally: every completion says the kernel did not copy (zerocopy_copied
/// fraction 0, from SO_EE_CODE_ZEROCOPY_COPIED and IORING_NOTIF_USAGE_ZC_COPIED). Over the
/// same veth with the peer receiving, the same sends are copied (fraction 1): the flag, not
/// the test, tells the two apart.
#[test]
fn zero_copy_into_a_peer_that_drops_is_not_copied() {
    if let Some(reason) = peer_drop_unavailable() {
        common::skip(&reason);
        return;
    }
    for (topology, copied) in [("veth:peer=drop", 0.0), ("veth:peer=drop,ipv6", 0.0), ("veth", 1.0)] {
        for r in run_unshared(topology, "zerocopy,uring-zc") {
            if refused(&r) {
                continue;
            }
            let label = format!("{} over {topology}", r["label"]);
            assert!(r["error"].is_null(), "{label}: {}", r["error"]);
            let completed = value(&r, "system", "zerocopy_completed_sends");
            assert!(completed > 0.0, "{label}: no completion");
            assert_eq!(value(&r, "system", "zerocopy_copied_fraction"), copied, "{label}");
            let sent = value(&r, "system", "session_datagrams_sent");
            let received = value(&r, "system", "session_datagrams_received");
            if copied == 0.0 {
                // Every datagram left the client and none arrived: dropped at the peer.
                assert!(sent > 0.0, "{label}");
                assert_eq!(received, 0.0, "{label}");
                assert!(value(&r, "client", "throughput_gbps") > 0.0, "{label}");
            }
        }
    }
}

/// Only udp-stream's one-way datagrams measure across a peer that drops them: any other
/// network workload is refused with one line (exit 2), before anything is built.
#[test]
fn a_peer_that_drops_is_refused_to_workloads_that_need_answers() {
    if !nix::unistd::geteuid().is_root() {
        common::skip("not root: a veth topology is refused for lacking root first");
        return;
    }
    for command in [
        &["net", "stream"][..],
        &["net", "rr"],
        &["net", "udp-rr"],
        &["net", "records"],
        &["servers"],
        &["micro", "tcp"],
    ] {
        let args: Vec<&str> = command
            .iter()
            .copied()
            .chain(["--topology", "veth:peer=drop"])
            .collect();
        let err = usage_error(&args);
        assert!(err.contains("only net udp-stream"), "{args:?}: {err}");
    }
    let err = usage_error(&["net", "udp-stream", "--topology", "veth:peer=down"]);
    assert!(err.contains("accepted peer=drop"), "{err}");
}

/// Issue 36.4's finding, printed by the command under its table: across `veth:peer=drop`,
/// zerocopy against send, with the copied fraction as the proof and the client's CPU per
/// datagram as a ratio of send's with its interval (two repetitions: too few to decide, and
/// the line says so; the decision itself is the unit tests' of report/claims.rs).
#[test]
fn a_run_across_a_dropping_peer_prints_what_zero_copy_saves() {
    if let Some(reason) = peer_drop_unavailable() {
        common::skip(&reason);
        return;
    }
    let (_dir, db) = common::temp_db("uncopied");
    let db = db.to_str().expect("a temporary path is UTF-8");
    let out = udp_stream_unshared("veth:peer=drop", "send,zerocopy", "200ms", &["--reps", "2", "--db", db]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if text.contains("unavailable: SO_ZEROCOPY") || !text.contains("zerocopy/recv") {
        common::skip("this kernel refused MSG_ZEROCOPY on UDP");
        return;
    }
    assert!(
        text.contains("zerocopy across veth:peer=drop, udp zerocopy/recv 1.4KiB t1 @2k/s: zero copy not copied here: copied fraction 0.00; client CPU per datagram ")
            && text.contains("of send's (")
            && text.contains("2 and 2 repetitions): too few repetitions to decide"),
        "{text}"
    );
}
