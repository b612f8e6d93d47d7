//! The client threads: closed loop (N transactions in flight on one thread per connection),
//! open loop (a sending thread on a schedule and a receiving thread per connection, latency
//! from the intended send time) and crr (connect, request, response, close, one after
//! another). Inside the loops: a relaxed load of the window, the sends and receives, a clock
//! read and a histogram record; nothing is allocated.

use crate::measure::histogram::{nanos, LatencyHistogram};
use crate::net::mode::{Receiver, RecvCounts, Sender};
use crate::net::session::meter::{Ctx, Meter, Metered};
use crate::observation::Role;
use socket2::{Domain, Socket, Type};
use std::io;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a zero-copy sender may wait for its buffers back at the end.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Open loop: the most transactions one connection may have waiting for responses; beyond
/// it sends are shed (counted) instead of queueing without bound.
pub const OPEN_LOOP_BACKLOG: usize = 4096;
/// Open loop: a request unanswered this long when the window closes was starved, not merely
/// in flight; its age so far enters the latency (as `servers`' load generator does).
pub const STARVED: Duration = Duration::from_millis(100);

/// What one client thread hands back.
pub struct ClientOutcome {
    /// Transactions completed inside the window (a sending-only thread: 0).
    pub transactions: u64,
    pub metered: Metered,
    /// Request sent (or connect begun, crr) until response received (crr: until closed).
    pub latency: LatencyHistogram,
    /// crr only: connect() until established, request until response, shutdown until closed.
    pub connect: LatencyHistogram,
    pub exchange: LatencyHistogram,
    pub close: LatencyHistogram,
    /// Open loop: sends skipped in the window because the backlog was full.
    pub shed: u64,
    /// Open loop: requests still unanswered when the window closed that had waited at least
    /// STARVED (their ages are in `latency`, as lower bounds).
    pub starved: u64,
    /// Open loop: how late each request left after it was due (the generator's own lag).
    pub send_lag: LatencyHistogram,
    pub recv_counts: Option<RecvCounts>,
}

impl ClientOutcome {
    fn new(metered: Metered) -> ClientOutcome {
        ClientOutcome {
            transactions: 0,
            metered,
            latency: LatencyHistogram::new(),
            connect: LatencyHistogram::new(),
            exchange: LatencyHistogram::new(),
            close: LatencyHistogram::new(),
            shed: 0,
            starved: 0,
            send_lag: LatencyHistogram::new(),
            recv_counts: None,
        }
    }
}

/// The server closed the connection where a response was due.
fn closed_early() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the server closed the connection before a response",
    )
}

/// Closed loop on one connection: send `inflight` requests, then for every response send the
/// next request. With one in flight this is ping-pong (sockperf ping-pong, netperf TCP_RR).
pub fn closed_loop(
    ctx: &Ctx<'_>,
    index: usize,
    stream: &TcpStream,
    mut sender: Box<dyn Sender>,
    mut receiver: Box<dyn Receiver>,
    inflight: usize,
) -> io::Result<ClientOutcome> {
    let fd = stream.as_raw_fd();
    let mut meter = Meter::start(ctx, Role::Client, index)?;
    let inflight = inflight.max(1);
    let mut latency = LatencyHistogram::new();
    let mut started = vec![Instant::now(); inflight];
    let (mut sent, mut received, mut transactions) = (0u64, 0u64, 0u64);
    while sent < inflight as u64 {
        started[sent as usize] = Instant::now();
        sender.send(fd, sent)?;
        sent += 1;
    }
    loop {
        let open = meter.tick(|| sender.counts().syscalls + receiver.counts().syscalls);
        if meter.closed() {
            break;
        }
        if !receiver.recv(fd, received)? {
            return Err(closed_early());
        }
        let now = Instant::now();
        let slot = (received % inflight as u64) as usize;
        if open {
            latency.record_ns(nanos(now.duration_since(started[slot])));
            transactions += 1;
        }
        received += 1;
        started[slot] = now;
        sender.send(fd, sent)?;
        sent += 1;
    }
    // The responses still owed, outside the window.
    while received < sent {
        if !receiver.recv(fd, received)? {
            return Err(closed_early());
        }
        received += 1;
    }
    sender.drain(fd, DRAIN_TIMEOUT)?;
    stream.shutdown(Shutdown::Write).ok();
    let metered = meter.finish(sender.counts().syscalls + receiver.counts().syscalls);
    let mut outcome = ClientOutcome::new(metered);
    outcome.transactions = transactions;
    outcome.latency = latency;
    outcome.recv_counts = Some(receiver.counts());
    Ok(outcome)
}

/// What the two threads of an open-loop connection share: when each request in flight was
/// meant to be sent (nanoseconds after `origin`), and how many responses arrived.
pub struct OpenShared {
    origin: Instant,
    intended: Vec<AtomicU64>,
    received: AtomicU64,
}

impl OpenShared {
    pub fn new(origin: Instant) -> OpenShared {
        OpenShared {
            origin,
            intended: (0..OPEN_LOOP_BACKLOG).map(|_| AtomicU64::new(0)).collect(),
            received: AtomicU64::new(0),
        }
    }
}

/// Open loop, the sending half: a request every `gap` from `first`, whatever the responses
/// do. A request sent late still counts from the time it was due (coordinated omission is
/// counted, as `servers` does); a full backlog sheds the request.
#[allow(clippy::too_many_arguments)]
pub fn open_sender(
    ctx: &Ctx<'_>,
    index: usize,
    stream: &TcpStream,
    mut sender: Box<dyn Sender>,
    shared: &OpenShared,
    gap: Duration,
    phase: Duration,
    failed: &AtomicBool,
) -> io::Result<ClientOutcome> {
    let fd = stream.as_raw_fd();
    // Sleeps end within microseconds of their deadline, not the default 50 us slack later.
    let _ = nix::sys::prctl::set_timerslack(1);
    let mut meter = Meter::start(ctx, Role::Client, index)?;
    let mut next = Instant::now() + phase;
    let (mut sent, mut shed) = (0u64, 0u64);
    let mut send_lag = LatencyHistogram::new();
    let result = loop {
        let open = meter.tick(|| sender.counts().syscalls);
        if meter.closed() || failed.load(Ordering::Relaxed) {
            break Ok(());
        }
        let now = Instant::now();
        if next > now {
            // In slices, so a slow schedule still sees the window close (or a failure) soon.
            std::thread::sleep((next - now).min(crate::stop::Stop::POLL));
            continue;
        }
        if sent - shared.received.load(Ordering::Acquire) >= OPEN_LOOP_BACKLOG as u64 {
            if open {
                shed += 1;
            }
            next += gap;
            continue;
        }
        let slot = (sent % OPEN_LOOP_BACKLOG as u64) as usize;
        shared.intended[slot].store(nanos(next.duration_since(shared.origin)), Ordering::Release);
        if open {
            send_lag.record_ns(nanos(now - next));
        }
        if let Err(e) = sender.send(fd, sent) {
            break Err(e);
        }
        sent += 1;
        next += gap;
    };
    // Requests a stalled server left waiting would vanish from the percentiles if only
    // responses counted: those starved when the window closed enter with their age so far.
    let mut starved = (LatencyHistogram::new(), 0u64);
    if meter.closed() {
        let closed_at = Instant::now();
        for seq in shared.received.load(Ordering::Acquire)..sent {
            let slot = (seq % OPEN_LOOP_BACKLOG as u64) as usize;
            let due = shared.origin + Duration::from_nanos(shared.intended[slot].load(Ordering::Acquire));
            let age = closed_at.saturating_duration_since(due);
            if age >= STARVED {
                starved.0.record_ns(nanos(age));
                starved.1 += 1;
            }
        }
    }
    // Either way the receiving half must end: after the last response (EOF from the server)
    // or at once.
    let drained = result.and_then(|()| sender.drain(fd, DRAIN_TIMEOUT));
    stream
        .shutdown(if drained.is_ok() {
            Shutdown::Write
        } else {
            Shutdown::Both
        })
        .ok();
    drained?;
    let mut outcome = ClientOutcome::new(meter.finish(sender.counts().syscalls));
    outcome.shed = shed;
    outcome.send_lag = send_lag;
    (outcome.latency, outcome.starved) = starved;
    Ok(outcome)
}

/// Open loop, the receiving half: every response, its latency from its request's due time.
pub fn open_receiver(
    ctx: &Ctx<'_>,
    index: usize,
    stream: &TcpStream,
    mut receiver: Box<dyn Receiver>,
    shared: &OpenShared,
) -> io::Result<ClientOutcome> {
    let fd = stream.as_raw_fd();
    let mut meter = Meter::start(ctx, Role::Client, index)?;
    let mut latency = LatencyHistogram::new();
    let (mut received, mut transactions) = (0u64, 0u64);
    loop {
        let open = meter.tick(|| receiver.counts().syscalls);
        // The sender shuts its half down when it is done; the server then closes too.
        if !receiver.recv(fd, received)? {
            break;
        }
        let now = Instant::now();
        let slot = (received % OPEN_LOOP_BACKLOG as u64) as usize;
        let due = shared.origin + Duration::from_nanos(shared.intended[slot].load(Ordering::Acquire));
        received += 1;
        shared.received.store(received, Ordering::Release);
        if open {
            latency.record_ns(nanos(now.saturating_duration_since(due)));
            transactions += 1;
        }
    }
    let mut outcome = ClientOutcome::new(meter.finish(receiver.counts().syscalls));
    outcome.transactions = transactions;
    outcome.latency = latency;
    outcome.recv_counts = Some(receiver.counts());
    Ok(outcome)
}

/// The one clear error for a connect that found no free local port.
pub fn connect_error(e: io::Error, addr: SocketAddr) -> io::Error {
    if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) {
        return io::Error::new(
            e.kind(),
            format!(
                "connect to {addr} failed: no free local port (EADDRNOTAVAIL). Every crr transaction leaves its port in TIME_WAIT for 60 s on the side that closes first (here the client), and net.ipv4.ip_local_port_range ({}) is used up: widen it, enable net.ipv4.tcp_tw_reuse, or use fewer --threads or a shorter --duration",
                crate::sys::procfs::read_trimmed("/proc/sys/net/ipv4/ip_local_port_range")
                    .map_or("unknown".to_string(), |r| r.split_whitespace().collect::<Vec<_>>().join("-"))
            ),
        );
    }
    io::Error::new(e.kind(), format!("connect to {addr} failed: {e}"))
}

/// crr: every transaction opens a connection, sends the request, receives the response and
/// closes (the client sends its FIN first and waits for the server's). The socket is not
/// bound before connect: connect() then picks the local port from the whole 4-tuple, the
/// freedom IP_BIND_ADDRESS_NO_PORT would buy after an explicit bind.
#[allow(clippy::too_many_arguments)]
pub fn crr_loop(
    ctx: &Ctx<'_>,
    index: usize,
    addr: SocketAddr,
    mut sender: Box<dyn Sender>,
    mut receiver: Box<dyn Receiver>,
    failed: &AtomicBool,
    io_timeout: Duration,
    verify: bool,
) -> io::Result<ClientOutcome> {
    let mut meter = Meter::start(ctx, Role::Client, index)?;
    let (mut latency, mut connect, mut exchange, mut close) = (
        LatencyHistogram::new(),
        LatencyHistogram::new(),
        LatencyHistogram::new(),
        LatencyHistogram::new(),
    );
    let mut transactions = 0u64;
    // socket, two timeouts, connect, shutdown, the read of the FIN, close.
    let mut own_syscalls = 0u64;
    let mut seq = 0u64;
    let domain = Domain::for_address(addr);
    let target = socket2::SockAddr::from(addr);
    let mut fin = [0u8; 1];
    loop {
        let open = meter.tick(|| own_syscalls + sender.counts().syscalls + receiver.counts().syscalls);
        if meter.closed() || failed.load(Ordering::Relaxed) {
            break;
        }
        let begun = Instant::now();
        let socket = Socket::new(domain, Type::STREAM, None)?;
        socket.set_read_timeout(Some(io_timeout))?;
        socket.set_write_timeout(Some(io_timeout))?;
        own_syscalls += 4;
        socket.connect(&target).map_err(|e| connect_error(e, addr))?;
        let connected = Instant::now();
        let fd: RawFd = socket.as_raw_fd();
        // Per connection: zerocopy maps this socket (a kernel that refuses says so here).
        receiver.attach(fd)?;
        if verify {
            // Any server thread may accept this connection: both ends name the transaction's
            // pattern by the client's port, which both know (one getsockname, verify only).
            own_syscalls += 1;
            seq = socket.local_addr()?.as_socket().map_or(0, |a| u64::from(a.port()));
        }
        sender.send(fd, seq)?;
        if !receiver.recv(fd, seq)? {
            return Err(closed_early());
        }
        let answered = Instant::now();
        socket.shutdown(Shutdown::Write)?;
        let n = super::recv_fin(fd, &mut fin)
            .map_err(|e| io::Error::new(e.kind(), format!("waiting for the server to close: {e}")))?;
        if n != 0 {
            return Err(io::Error::other("the server sent more than the response"));
        }
        // The next socket may get this fd number: nothing of this one may carry over.
        receiver.detach();
        drop(socket);
        own_syscalls += 3;
        let closed = Instant::now();
        if open {
            latency.record_ns(nanos(closed - begun));
            connect.record_ns(nanos(connected - begun));
            exchange.record_ns(nanos(answered - connected));
            close.record_ns(nanos(closed - answered));
            transactions += 1;
        }
        seq += 1;
    }
    // uring-zc: the notifications of the last sends (the ring outlives its sockets).
    sender.drain(-1, DRAIN_TIMEOUT)?;
    let mut out =
        ClientOutcome::new(meter.finish(own_syscalls + sender.counts().syscalls + receiver.counts().syscalls));
    out.transactions = transactions;
    out.latency = latency;
    out.connect = connect;
    out.exchange = exchange;
    out.close = close;
    out.recv_counts = Some(receiver.counts());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::counters::kernel_policy;
    use crate::measure::window::{SystemProbes, Window};
    use crate::net::session::StartGate;
    use std::io::Read;

    /// A server that reads every request and answers none: the requests the open loop sent
    /// enter the latency with their ages when the window closes, instead of vanishing.
    #[test]
    fn an_open_loop_counts_the_requests_a_stalled_server_never_answered() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let swallow = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while matches!(server.read(&mut buf), Ok(n) if n > 0) {}
        });
        let (window, ready, policy) = (Window::new(), StartGate::default(), kernel_policy());
        let ctx = Ctx {
            window: &window,
            ready: &ready,
            policy: &policy,
            perf: false,
            cpus: None,
        };
        let shared = OpenShared::new(Instant::now());
        let failed = AtomicBool::new(false);
        let sender = crate::net::mode::sender(crate::case::CopyMode::TwoCopy, 64, 1, false).unwrap();
        let outcome = std::thread::scope(|s| {
            let h = s.spawn(|| {
                open_sender(
                    &ctx,
                    0,
                    &client,
                    sender,
                    &shared,
                    Duration::from_millis(10),
                    Duration::ZERO,
                    &failed,
                )
            });
            assert!(ready.open_when(1, Duration::from_secs(10)));
            let mut system = SystemProbes::default();
            window.open(&mut system);
            std::thread::sleep(Duration::from_millis(400));
            window.close(&mut system);
            h.join().unwrap().unwrap()
        });
        swallow.join().unwrap();
        // About 40 requests were due in the window; those due more than 100 ms before its end
        // were starved.
        assert!(outcome.starved >= 10, "{}", outcome.starved);
        assert_eq!(outcome.latency.count(), outcome.starved);
        assert!(outcome.latency.quantile_us(0.0).unwrap() >= 100_000.0);
        assert_eq!(outcome.transactions, 0, "nothing was answered");
    }
}
