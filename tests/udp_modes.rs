//! The datagram paths of `net::dgram` over real UDP sockets: every send mode × receive mode
//! moves every datagram intact (verify on) over loopback and over a veth pair, with exactly
//! as many distinct datagrams counted as were sent and none lost; a tiny receive buffer under a
//! burst loses datagrams, and the loss, the socket's drop counter and /proc/net/snmp say so;
//! zero-copy completions all arrive; a mode the kernel refuses is `Unsupported`; and no path
//! allocates per call. Counts only, never timings.

mod common;

use common::alloc::allocations;
use iopath::case::{Topology, UdpRecvMode, UdpSendMode};
use iopath::measure::system::udp_counters;
use iopath::measure::window::Probe;
use iopath::net::dgram::{self, DgramReceiver, DgramSender, SeqTracker};
use iopath::observation::names;
use iopath::sys::udp;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

#[global_allocator]
static COUNTING: common::alloc::CountingAllocator = common::alloc::CountingAllocator;

/// How long the whole exchange of one test may take: generous, a bound against hanging only.
const PATIENCE: Duration = Duration::from_secs(20);
const BATCH: usize = 16;

/// A connected pair over loopback: (sender, receiver).
fn loopback_pair() -> (UdpSocket, UdpSocket) {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.connect(rx.local_addr().unwrap()).unwrap();
    rx.connect(tx.local_addr().unwrap()).unwrap();
    prepare(&rx);
    (tx, rx)
}

/// The receiver's timeout and a receive buffer for a whole batch of the largest datagrams.
fn prepare(rx: &UdpSocket) {
    rx.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    udp::set_rcvbuf(rx.as_raw_fd(), 4 << 20).unwrap();
}

/// A sender, or None (and a skip) when this kernel refuses the mode.
fn sender_or_skip(mode: UdpSendMode, size: usize) -> Option<Box<dyn DgramSender>> {
    match dgram::sender(mode, size, BATCH, true) {
        Ok(tx) => Some(tx),
        Err(e) if dgram::unsupported_in(&e).is_some() => {
            common::skip(&format!("{mode}: {e}"));
            None
        }
        Err(e) => panic!("{mode}: {e}"),
    }
}

fn receiver_or_skip(mode: UdpRecvMode, size: usize) -> Option<Box<dyn DgramReceiver>> {
    match dgram::receiver(mode, size, BATCH, true) {
        Ok(rx) => Some(rx),
        Err(e) if dgram::unsupported_in(&e).is_some() => {
            common::skip(&format!("{mode}: {e}"));
            None
        }
        Err(e) => panic!("{mode}: {e}"),
    }
}

/// Send `n` datagrams numbered from `first` in chunks of `BATCH`, receiving each chunk
/// completely before the next (so no receive buffer overflows), on this thread.
fn exchange(
    tx: &mut dyn DgramSender,
    rx: &mut dyn DgramReceiver,
    from: &UdpSocket,
    to: &UdpSocket,
    seen: &mut SeqTracker,
    first: u64,
    n: u64,
) {
    let deadline = Instant::now() + PATIENCE;
    let mut seq = first;
    while seq < first + n {
        let k = BATCH.min((first + n - seq) as usize);
        let sent = tx.send(from.as_raw_fd(), seq, k).unwrap();
        assert!(sent > 0, "nothing sent");
        seq += sent as u64;
        // The tracker counted `first` distinct datagrams before this exchange.
        while seen.counts().distinct < seq {
            assert!(
                Instant::now() < deadline,
                "datagrams up to {seq} did not all arrive: {:?}",
                seen.counts()
            );
            rx.recv(to.as_raw_fd(), seen).unwrap();
        }
    }
    tx.finish(from.as_raw_fd()).unwrap();
}

/// Every mode pair moves `n` datagrams of each size over a pair of sockets, verified.
fn every_mode_moves_every_datagram(pair: impl Fn() -> (UdpSocket, UdpSocket), sizes: &[usize], n: u64, path: &str) {
    for size in sizes.iter().copied() {
        for send_mode in UdpSendMode::ALL {
            for recv_mode in UdpRecvMode::ALL {
                let Some(mut tx) = sender_or_skip(send_mode, size) else {
                    continue;
                };
                let Some(mut rx) = receiver_or_skip(recv_mode, size) else {
                    continue;
                };
                let (from, to) = pair();
                let mut seen = SeqTracker::new();
                exchange(tx.as_mut(), rx.as_mut(), &from, &to, &mut seen, 0, n);
                let c = seen.counts();
                let what = format!("{path} {send_mode} → {recv_mode}, {size} B: {c:?}");
                assert_eq!(c.received, n, "{what}");
                assert_eq!(c.distinct, n, "{what}");
                assert_eq!(c.bytes, n * size as u64, "{what}");
                assert_eq!(seen.lost(n), 0, "{what}");
                assert_eq!((c.duplicates, c.reordered, c.verify_failures), (0, 0, 0), "{what}");
                // Plain recv(2) reads no control message, so no SO_RXQ_OVFL count.
                let expected = (recv_mode != UdpRecvMode::Recv).then_some(0);
                assert_eq!(rx.kernel_drops(), expected, "{what}");
                assert!(tx.syscalls() >= n.div_ceil(tx.batch() as u64), "{what}");
                assert!(rx.syscalls() >= 1, "{what}");
                if path == "loopback" && send_mode == UdpSendMode::Gso && recv_mode == UdpRecvMode::Gro {
                    // A GSO send reaches a GRO socket over loopback whole: one receive takes
                    // many datagrams, split by the segment size.
                    assert!(rx.syscalls() < n, "{what}: {} receives", rx.syscalls());
                }
                if matches!(send_mode, UdpSendMode::Zerocopy | UdpSendMode::UringZc) {
                    let zc = tx.zerocopy().expect("zero-copy counts");
                    assert_eq!(zc.completions.sends, n, "{what}");
                    assert_eq!(zc.completions.completed, n, "every completion arrived: {what}");
                    assert_eq!(zc.completions.unexpected, 0, "{what}");
                } else {
                    assert!(tx.zerocopy().is_none(), "{what}");
                }
            }
        }
    }
}

#[test]
fn every_send_and_receive_mode_moves_every_datagram_over_loopback() {
    every_mode_moves_every_datagram(loopback_pair, &[16, 1472, 9000], 200, "loopback");
}

/// The same over a veth pair into a namespace (MTU 1500): sizes up to MTU − 28, as GSO
/// needs.
#[test]
fn every_send_and_receive_mode_moves_every_datagram_over_veth() {
    let topology: Topology = "veth".parse().unwrap();
    if let Err(reason) = topology.check() {
        common::skip(&reason);
        return;
    }
    let net = topology.establish().unwrap();
    let pair = || {
        let rx = net.on_server_side(|| UdpSocket::bind(net.listen_addr(0).unwrap()).unwrap());
        let server: SocketAddr = rx.local_addr().unwrap();
        let tx = net.on_client_side(|| {
            let tx = UdpSocket::bind("0.0.0.0:0").unwrap();
            tx.connect(server).unwrap();
            tx
        });
        prepare(&rx);
        (tx, rx)
    };
    every_mode_moves_every_datagram(pair, &[16, 1472], 200, "veth");

    // GSO of datagrams larger than the path allows is refused, saying why.
    let (from, _to) = pair();
    let mut tx = dgram::sender(UdpSendMode::Gso, 2000, BATCH, true).unwrap();
    let err = tx.send(from.as_raw_fd(), 0, 4).unwrap_err();
    let refusal = dgram::unsupported_in(&err).unwrap_or_else(|| panic!("not a refusal: {err}"));
    assert!(refusal.reason.contains("MTU − 28 = 1472"), "{refusal}");
}

/// A receive buffer made tiny, then a burst it cannot hold: datagrams are lost, and the loss,
/// the socket's drop counter (SO_RXQ_OVFL, said by a datagram queued after the drops) and the
/// namespace's RcvbufErrors all count them.
#[test]
fn a_tiny_receive_buffer_under_a_burst_loses_datagrams_and_every_count_says_so() {
    const BURST: u64 = 500;
    for recv_mode in UdpRecvMode::ALL {
        let Some(mut rx) = receiver_or_skip(recv_mode, 1000) else {
            continue;
        };
        let mut tx = dgram::sender(UdpSendMode::Sendmmsg, 1000, BATCH, true).unwrap();
        let (from, to) = loopback_pair();
        udp::set_rcvbuf(to.as_raw_fd(), 1).unwrap();
        to.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let mut snmp = udp_counters(None);
        snmp.open();
        let mut seen = SeqTracker::new();
        // Switch SO_RXQ_OVFL on before the burst: the first receive does it.
        assert_eq!(rx.recv(to.as_raw_fd(), &mut seen).unwrap(), 0);
        let mut sent = 0;
        while sent < BURST {
            sent += tx.send(from.as_raw_fd(), sent, BURST as usize - sent as usize).unwrap() as u64;
        }
        // The socket's own counter says so at once, before any datagram reports it.
        assert!(
            udp::socket_drops(to.as_raw_fd()).unwrap() > 0,
            "{recv_mode}: SO_MEMINFO"
        );
        let deadline = Instant::now() + PATIENCE;
        while rx.recv(to.as_raw_fd(), &mut seen).unwrap() > 0 {
            assert!(Instant::now() < deadline);
        }
        // One more, queued after the drops, carries the drop counter.
        let before = seen.counts().distinct;
        assert_eq!(tx.send(from.as_raw_fd(), BURST, 1).unwrap(), 1);
        while seen.counts().distinct == before {
            assert!(
                Instant::now() < deadline,
                "{recv_mode}: the last datagram did not arrive"
            );
            rx.recv(to.as_raw_fd(), &mut seen).unwrap();
        }
        let metrics = snmp.close();
        let c = seen.counts();
        let lost = seen.lost(BURST + 1);
        assert!(lost > 0, "{recv_mode}: {c:?}");
        assert!(c.distinct > 0, "{recv_mode}: {c:?}");
        assert_eq!(c.verify_failures, 0, "{recv_mode}: {c:?}");
        let drops = udp::socket_drops(to.as_raw_fd()).unwrap();
        assert!(drops > 0, "{recv_mode}: SO_MEMINFO said {drops}");
        if recv_mode != UdpRecvMode::Recv {
            // SO_RXQ_OVFL, which the other paths read, is the same counter.
            assert_eq!(rx.kernel_drops(), Some(drops), "{recv_mode}: the same counter");
        }
        assert!(
            drops <= lost,
            "{recv_mode}: every drop is a lost datagram ({drops} > {lost})"
        );
        let rcvbuf_errors = metrics
            .iter()
            .find(|m| m.name == names::UDP_RCVBUF_ERRORS)
            .and_then(|m| m.value)
            .unwrap();
        assert!(rcvbuf_errors > 0.0, "{recv_mode}: {metrics:?}");
    }
}

/// A socket the kernel cannot give UDP_SEGMENT or UDP_GRO (a TCP one) is refused as
/// `Unsupported`, found in the I/O error, never a plain failure.
#[test]
fn a_refused_mode_is_unsupported() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let mut gso = dgram::sender(UdpSendMode::Gso, 100, BATCH, false).unwrap();
    let err = gso.send(tcp.as_raw_fd(), 0, 1).unwrap_err();
    let refusal = dgram::unsupported_in(&err).unwrap_or_else(|| panic!("not a refusal: {err}"));
    assert!(refusal.what.contains("UDP_SEGMENT"), "{refusal}");
    let mut gro = dgram::receiver(UdpRecvMode::Gro, 100, BATCH, false).unwrap();
    let err = gro.recv(tcp.as_raw_fd(), &mut SeqTracker::new()).unwrap_err();
    assert!(dgram::unsupported_in(&err).is_some(), "{err}");
    let err = dgram::sender(UdpSendMode::Send, 8, 1, false).err().unwrap();
    assert!(err.to_string().contains("accepted 16 to 65507 bytes"), "{err}");
}

/// After a warm-up, moving datagrams allocates nothing on the thread that sends and receives,
/// in any mode pair.
#[test]
fn no_send_or_receive_mode_allocates_per_call() {
    for send_mode in UdpSendMode::ALL {
        for recv_mode in UdpRecvMode::ALL {
            let Some(mut tx) = sender_or_skip(send_mode, 256) else {
                continue;
            };
            let Some(mut rx) = receiver_or_skip(recv_mode, 256) else {
                continue;
            };
            let (from, to) = loopback_pair();
            let mut seen = SeqTracker::new();
            exchange(tx.as_mut(), rx.as_mut(), &from, &to, &mut seen, 0, 64);
            let before = allocations();
            exchange(tx.as_mut(), rx.as_mut(), &from, &to, &mut seen, 64, 256);
            let after = allocations();
            assert_eq!(seen.counts().distinct, 320, "{send_mode} → {recv_mode}");
            assert_eq!(after - before, 0, "{send_mode} → {recv_mode} allocated per call");
        }
    }
}
