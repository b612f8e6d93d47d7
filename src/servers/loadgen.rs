//! The load generator: C concurrent connections spread over a few client threads, closed loop
//! (each connection sends its next request when the reply arrives) or open loop at a fixed
//! total rate (latency counted from the scheduled send time, so a slow server cannot hide its
//! queueing). Every reply is checked; latencies go into an HDR histogram.

use super::protocol::{self, Decoded, ErrorCode, Rank, Response};
use super::window::{ThreadWindow, Window};
use super::Request;
use crate::measure::histogram::LatencyHistogram;
use crate::measure::window::SystemProbes;
use crate::observation::Metric;
use crate::stop::Interrupted;
use crate::sys::multiplex::{Epoll, EpollEvent};
use crate::sys::tcpinfo::{tcp_info, TcpInfo};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_millis(20);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub addr: SocketAddr,
    pub clients: usize,
    pub threads: usize,
    pub workload: Request,
    pub warmup: Duration,
    pub duration: Duration,
    /// Open loop at this many requests per second in total; None is closed loop.
    pub rate: Option<f64>,
    /// A request unanswered for this long counts as a timeout and its connection is dropped.
    pub timeout: Duration,
    pub cpus: Option<Vec<usize>>,
    /// How many of the clients may connect: both ends live in this process, so each
    /// connection takes two file descriptors, and the load generator must leave the server its
    /// half (taking every descriptor in one burst left the server unable to accept any, a
    /// silent 0 req/s). The rest are counted as connect errors.
    pub connectable: usize,
}

/// What went wrong, by kind. All are counted inside and outside the window alike.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Errors {
    pub connect: u64,
    pub refused: u64,
    pub timeouts: u64,
    pub protocol: u64,
    pub io: u64,
    /// Open loop: requests not sent because [`MAX_BACKLOG`] were already waiting on their
    /// connection (the server cannot keep up with the rate).
    pub shed: u64,
}

impl Errors {
    pub fn total(&self) -> u64 {
        self.connect + self.refused + self.timeouts + self.protocol + self.io + self.shed
    }

    fn add(&mut self, o: &Errors) {
        self.connect += o.connect;
        self.refused += o.refused;
        self.timeouts += o.timeouts;
        self.protocol += o.protocol;
        self.io += o.io;
        self.shed += o.shed;
    }
}

/// Open loop: the most requests one connection may have waiting for replies. Beyond it the
/// generator sheds requests (counted) instead of queueing without bound when the rate is
/// more than the server serves.
pub const MAX_BACKLOG: usize = 1024;

pub struct LoadResult {
    pub latency: LatencyHistogram,
    /// Replies received inside the measured window.
    pub completed: u64,
    /// Request + reply bytes of those.
    pub bytes: u64,
    pub window: Duration,
    pub errors: Errors,
    pub connected: usize,
    /// Connections that got at least one reply inside the measured window: the clients the
    /// rate and the percentiles describe.
    pub served: usize,
    /// Clients that failed: never connected, or whose connection ended in an error (timed
    /// out, refused, closed, a protocol or I/O error) before the run ended.
    pub failed: usize,
    /// Requests still waiting for a reply when the run ended (not yet timed out).
    pub unanswered: u64,
    /// Of those, requests that had waited at least STARVED when the window closed.
    pub starved: u64,
    /// The first few error messages, for warnings.
    pub samples: Vec<String>,
    /// What the system-wide probes measured over the window.
    pub system: Vec<Metric>,
    /// TCP_INFO of every live connection, read by its thread as the window closed.
    pub tcp_info: Vec<(TcpInfo, usize)>,
}

/// A request in flight this long at the end of the window was starved, not merely in flight.
pub const STARVED: Duration = Duration::from_millis(100);

/// One client connection's state.
struct Client {
    stream: TcpStream,
    out: Vec<u8>,
    out_pos: usize,
    input: Vec<u8>,
    /// Requests sent and not answered yet: (time they count from, sequence number).
    outstanding: VecDeque<(Instant, u64)>,
    next_seq: u64,
    next_send: Instant,
    dead: bool,
    want_write: bool,
    /// A reply arrived inside the measured window.
    served: bool,
}

struct ThreadResult {
    latency: LatencyHistogram,
    completed: u64,
    bytes: u64,
    errors: Errors,
    connected: usize,
    served: usize,
    failed: usize,
    unanswered: u64,
    starved: u64,
    samples: Vec<String>,
    tcp_info: Vec<(TcpInfo, usize)>,
}

/// The echo payload for request `seq`: a pattern that shows any corrupted or misplaced byte.
pub fn fill_payload(seq: u64, buf: &mut [u8]) {
    let base = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (base >> ((i % 8) * 8)) as u8 ^ (i as u8);
    }
}

fn payload_matches(seq: u64, got: &[u8]) -> bool {
    let base = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    got.iter()
        .enumerate()
        .all(|(i, b)| *b == (base >> ((i % 8) * 8)) as u8 ^ (i as u8))
}

struct Driver<'a> {
    config: &'a LoadConfig,
    window: &'a Window,
    result: ThreadResult,
    payload: Vec<u8>,
}

impl Driver<'_> {
    fn note(&mut self, msg: String) {
        if self.result.samples.len() < 3 {
            self.result.samples.push(msg);
        }
    }

    fn enqueue(&mut self, c: &mut Client, counts_from: Instant) {
        let seq = c.next_seq;
        c.next_seq += 1;
        match self.config.workload {
            Request::Echo(size) => {
                self.payload.resize(size, 0);
                fill_payload(seq, &mut self.payload);
                protocol::encode_echo_request(&self.payload, &mut c.out);
            }
            Request::Procs(k) => protocol::encode_procs_request(k, Rank::Total, &mut c.out),
        }
        c.outstanding.push_back((counts_from, seq));
    }

    /// Write what is queued until done or the socket is full.
    fn flush(&mut self, c: &mut Client) {
        while c.out_pos < c.out.len() && !c.dead {
            match c.stream.write(&c.out[c.out_pos..]) {
                Ok(0) => self.io_error(c, "connection closed while sending".into()),
                Ok(n) => c.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => self.io_error(c, format!("send failed: {e}")),
            }
        }
        if c.out_pos >= c.out.len() {
            c.out.clear();
            c.out_pos = 0;
        }
    }

    fn io_error(&mut self, c: &mut Client, msg: String) {
        if !c.dead {
            c.dead = true;
            self.result.errors.io += 1;
            self.note(msg);
        }
    }

    /// Check and account every whole reply in the input buffer. Returns replies consumed.
    fn take_replies(&mut self, c: &mut Client) -> usize {
        let mut used = 0;
        let mut replies = 0;
        let input = std::mem::take(&mut c.input);
        while !c.dead {
            let rest = &input[used..];
            let (ok, len) = match self.config.workload {
                // Fast path: check the header and the payload in place.
                Request::Echo(size) => match protocol::peek_frame(rest) {
                    Decoded::Incomplete(_) => break,
                    Decoded::Frame((protocol::KIND_ECHO_REPLY, n), len) => {
                        let seq = c.outstanding.front().map_or(u64::MAX, |o| o.1);
                        let body = &rest[protocol::HEADER_LEN..protocol::HEADER_LEN + n];
                        let ok = n == size && payload_matches(seq, body);
                        if !ok {
                            self.note(format!("echo reply {seq} differs from the request"));
                        }
                        (ok, len)
                    }
                    Decoded::Frame(_, _) | Decoded::Invalid(_) => match protocol::decode_response(rest) {
                        Decoded::Incomplete(_) => break,
                        Decoded::Frame(resp, len) => (self.check_other(c, resp), len),
                        Decoded::Invalid(e) => (self.bad(c, format!("bad reply: {e}")), rest.len()),
                    },
                },
                Request::Procs(_) => match protocol::decode_response(rest) {
                    Decoded::Incomplete(_) => break,
                    Decoded::Frame(resp, len) => (self.check_other(c, resp), len),
                    Decoded::Invalid(e) => (self.bad(c, format!("bad reply: {e}")), rest.len()),
                },
            };
            used += len;
            if c.dead {
                break;
            }
            let Some((since, _)) = c.outstanding.pop_front() else {
                self.bad(c, "a reply nobody asked for".into());
                break;
            };
            if !ok {
                self.result.errors.protocol += 1;
                continue;
            }
            replies += 1;
            if self.window.measuring() {
                let now = Instant::now();
                self.result
                    .latency
                    .record_ns(now.duration_since(since).as_nanos() as u64);
                self.result.completed += 1;
                self.result.bytes += (len + self.request_len()) as u64;
                c.served = true;
            }
        }
        c.input = input;
        c.input.drain(..used.min(c.input.len()));
        replies
    }

    fn request_len(&self) -> usize {
        protocol::HEADER_LEN
            + match self.config.workload {
                Request::Echo(size) => size,
                Request::Procs(_) => 3,
            }
    }

    fn bad(&mut self, c: &mut Client, msg: String) -> bool {
        self.result.errors.protocol += 1;
        self.note(msg);
        c.dead = true;
        false
    }

    /// A reply other than an intact echo: a procs list (checked) or an error frame.
    fn check_other(&mut self, c: &mut Client, resp: Response) -> bool {
        match resp {
            Response::Procs(r) => {
                let Request::Procs(k) = self.config.workload else {
                    return self.bad(c, "procs reply to an echo request".into());
                };
                let sorted = r.entries.windows(2).all(|w| w[0].ranked_ticks >= w[1].ranked_ticks);
                if !sorted || r.entries.len() > k as usize || r.entries.iter().any(|e| e.pid == 0) {
                    self.note("procs reply not sorted, too long, or with pid 0".into());
                    return false;
                }
                true
            }
            Response::Error(e) if e.code == ErrorCode::ServerFull => {
                self.result.errors.refused += 1;
                self.note(format!("refused: {}", e.message));
                c.dead = true;
                c.outstanding.clear();
                false
            }
            Response::Error(e) => {
                self.note(format!("server error: {e}"));
                false
            }
            Response::Echo(_) => {
                self.note("echo reply of the wrong size or content".into());
                false
            }
        }
    }

    /// Read everything available; false when the connection ended.
    fn read_available(&mut self, c: &mut Client, scratch: &mut [u8], blocking: bool) {
        loop {
            match c.stream.read(scratch) {
                Ok(0) => {
                    // A refusal frame may have arrived just before the close.
                    self.take_replies(c);
                    if !c.dead {
                        self.io_error(c, "server closed the connection".into());
                    }
                    return;
                }
                Ok(n) => {
                    c.input.extend_from_slice(&scratch[..n]);
                    if blocking || n < scratch.len() {
                        return;
                    }
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.io_error(c, format!("receive failed: {e}"));
                    return;
                }
            }
        }
    }

    fn check_timeout(&mut self, c: &mut Client, now: Instant) {
        if let Some((since, _)) = c.outstanding.front() {
            if !c.dead && now.saturating_duration_since(*since) > self.config.timeout {
                self.result.errors.timeouts += c.outstanding.len() as u64;
                self.note(format!(
                    "no reply within {:?} (server busy with other connections?)",
                    self.config.timeout
                ));
                c.outstanding.clear();
                c.dead = true;
            }
        }
    }
}

fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Drive the server: connect, wait for every thread, warm up, open the window (and the
/// system-wide probes) for `duration`, close it, stop. `stop` ends the run within about one
/// TICK in any phase, every client thread joined, as `Err(Interrupted)`.
pub fn run(
    config: &LoadConfig,
    window: &Window,
    system: &mut SystemProbes,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<LoadResult, Interrupted> {
    let threads = config.threads.clamp(1, config.clients.max(1));
    let finished = AtomicBool::new(false);
    let barrier = Barrier::new(threads + 1);
    let mut window_len = Duration::ZERO;
    let mut system_metrics = Vec::new();
    let mut stopped = false;
    let results: Vec<ThreadResult> = std::thread::scope(|scope| {
        let allowed = config.clients.min(config.connectable);
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let count = allowed / threads + usize::from(t < allowed % threads);
                let (barrier, finished) = (&barrier, &finished);
                scope.spawn(move || client_thread(config, window, t, count, barrier, finished, stop))
            })
            .collect();
        barrier.wait();
        // True when the whole time passed, false as soon as a stop was requested.
        let sleep_until = |deadline: Instant| -> bool {
            while Instant::now() < deadline {
                if stop() {
                    return false;
                }
                std::thread::sleep((deadline - Instant::now()).min(TICK));
            }
            !stop()
        };
        if sleep_until(Instant::now() + config.warmup) {
            let t0 = Instant::now();
            window.begin(system);
            stopped = !sleep_until(t0 + config.duration);
            system_metrics = window.end(system);
            window_len = t0.elapsed();
        } else {
            stopped = true;
            window.end(system);
        }
        finished.store(true, Ordering::SeqCst);
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    if stopped {
        return Err(Interrupted);
    }
    let mut out = LoadResult {
        latency: LatencyHistogram::new(),
        completed: 0,
        bytes: 0,
        window: window_len,
        errors: Errors {
            connect: config.clients.saturating_sub(config.connectable) as u64,
            ..Errors::default()
        },
        connected: 0,
        served: 0,
        // Clients beyond the file descriptors never connected.
        failed: config.clients.saturating_sub(config.connectable),
        unanswered: 0,
        starved: 0,
        samples: Vec::new(),
        system: system_metrics,
        tcp_info: Vec::new(),
    };
    for r in &results {
        out.latency.merge(&r.latency);
        out.completed += r.completed;
        out.bytes += r.bytes;
        out.errors.add(&r.errors);
        out.connected += r.connected;
        out.served += r.served;
        out.failed += r.failed;
        out.unanswered += r.unanswered;
        out.starved += r.starved;
        out.tcp_info.extend_from_slice(&r.tcp_info);
        for s in &r.samples {
            if out.samples.len() < 5 && !out.samples.contains(s) {
                out.samples.push(s.clone());
            }
        }
    }
    Ok(out)
}

fn client_thread(
    config: &LoadConfig,
    window: &Window,
    _index: usize,
    count: usize,
    barrier: &Barrier,
    finished: &AtomicBool,
    stop: &(dyn Fn() -> bool + Sync),
) -> ThreadResult {
    if let Some(cpus) = &config.cpus {
        let _ = crate::sys::affinity::pin_current_thread(cpus);
    }
    let mut d = Driver {
        config,
        window,
        result: ThreadResult {
            latency: LatencyHistogram::new(),
            completed: 0,
            bytes: 0,
            errors: Errors::default(),
            connected: 0,
            served: 0,
            failed: 0,
            unanswered: 0,
            starved: 0,
            samples: Vec::new(),
            tcp_info: Vec::new(),
        },
        payload: Vec::new(),
    };
    // The epoll comes first: with file descriptors running out, it must not be the one that
    // fails after every connection was made (that looked like a silent 0 req/s).
    let event_driven = count > 1 || config.rate.is_some();
    let epoll = match event_driven.then(Epoll::new) {
        Some(Ok(epoll)) => Some(epoll),
        Some(Err(e)) => {
            d.result.errors.io += count as u64;
            d.note(format!(
                "epoll_create failed ({}); this thread's {count} connections were not made",
                crate::net::control::describe_io_error(&e, Duration::ZERO)
            ));
            None
        }
        None => None,
    };
    let mut clients = Vec::with_capacity(count);
    for _ in 0..if event_driven && epoll.is_none() { 0 } else { count } {
        // Connecting thousands of clients takes a while: a stop ends it at once.
        if stop() {
            break;
        }
        match connect(config.addr) {
            Ok(stream) => clients.push(Client {
                stream,
                out: Vec::new(),
                out_pos: 0,
                input: Vec::new(),
                outstanding: VecDeque::new(),
                next_seq: 0,
                next_send: Instant::now(),
                dead: false,
                want_write: false,
                served: false,
            }),
            Err(e) => {
                d.result.errors.connect += 1;
                d.note(format!(
                    "connect failed: {}",
                    crate::net::control::describe_io_error(&e, CONNECT_TIMEOUT)
                ));
            }
        }
    }
    d.result.connected = clients.len();
    barrier.wait();
    let mut probe = ThreadWindow::client(window, config.cpus.as_deref());
    match &epoll {
        Some(epoll) if !clients.is_empty() => event_loop(&mut d, epoll, &mut clients, finished, &mut probe),
        None if clients.len() == 1 => blocking_loop(&mut d, &mut clients[0], finished, &mut probe),
        _ => {}
    }
    probe.finish();
    // The connections' own account of the window (rtt, retransmits, what limited them), read
    // now that the loop is done so the reads cost the measured traffic nothing.
    d.result.tcp_info = clients
        .iter()
        .filter(|c| !c.dead)
        .filter_map(|c| tcp_info(c.stream.as_raw_fd()).ok())
        .collect();
    // A request still unanswered when the window closed waited at least this long; leaving it
    // out would hide exactly the clients a model starves (coordinated omission).
    let closed_at = Instant::now();
    for c in clients.iter().filter(|c| !c.dead) {
        for (since, _) in &c.outstanding {
            let age = closed_at.duration_since(*since);
            d.result.latency.record_ns(age.as_nanos() as u64);
            if age >= STARVED {
                d.result.starved += 1;
            }
        }
    }
    d.result.unanswered = clients
        .iter()
        .filter(|c| !c.dead)
        .map(|c| c.outstanding.len() as u64)
        .sum();
    d.result.served = clients.iter().filter(|c| c.served).count();
    // A client that never connected (connect errors, or no epoll to watch it) failed too.
    d.result.failed = count - clients.len() + clients.iter().filter(|c| c.dead).count();
    d.result
}

/// One connection, closed loop: plain blocking send and receive, as a ping-pong client does.
fn blocking_loop(d: &mut Driver<'_>, c: &mut Client, finished: &AtomicBool, probe: &mut ThreadWindow<'_>) {
    let mut scratch = vec![0u8; 64 << 10];
    if c.stream.set_read_timeout(Some(TICK)).is_err() || c.stream.set_write_timeout(Some(d.config.timeout)).is_err() {
        d.io_error(c, "cannot set socket timeouts".into());
        return;
    }
    while !finished.load(Ordering::Relaxed) && !c.dead {
        probe.tick();
        if c.outstanding.is_empty() {
            d.enqueue(c, Instant::now());
            d.flush(c);
        }
        d.read_available(c, &mut scratch, true);
        d.take_replies(c);
        d.check_timeout(c, Instant::now());
    }
}

/// Many connections on one thread: epoll, level-triggered.
fn event_loop(
    d: &mut Driver<'_>,
    epoll: &Epoll,
    clients: &mut [Client],
    finished: &AtomicBool,
    probe: &mut ThreadWindow<'_>,
) {
    let mut scratch = vec![0u8; 64 << 10];
    let start = Instant::now();
    let n = clients.len();
    // Open loop: each connection sends every `gap`, staggered across connections.
    let gap = d
        .config
        .rate
        .map(|r| Duration::from_secs_f64(d.config.clients as f64 / r));
    for (i, c) in clients.iter_mut().enumerate() {
        let registered = c.stream.set_nonblocking(true).is_ok()
            && epoll.add(c.stream.as_raw_fd(), libc::EPOLLIN as u32, i as u64).is_ok();
        if !registered {
            d.io_error(c, "cannot watch the connection".into());
            continue;
        }
        match gap {
            None => {
                d.enqueue(c, start);
                d.flush(c);
            }
            Some(g) => c.next_send = start + g.mul_f64(i as f64 / n as f64),
        }
    }
    let mut events: Vec<EpollEvent> = Vec::with_capacity(256);
    let mut last_check = Instant::now();
    while !finished.load(Ordering::Relaxed) {
        probe.tick();
        let now = Instant::now();
        let mut wait = TICK;
        if let Some(g) = gap {
            for c in clients.iter_mut().filter(|c| !c.dead) {
                while c.next_send <= now {
                    if c.outstanding.len() >= MAX_BACKLOG {
                        // Every send due until now would overflow the backlog: shed them at once.
                        let behind = now.duration_since(c.next_send).as_secs_f64() / g.as_secs_f64();
                        let missed = behind.floor() as u64 + 1;
                        d.result.errors.shed += missed;
                        c.next_send += g.mul_f64(missed as f64);
                        break;
                    }
                    let due = c.next_send;
                    d.enqueue(c, due);
                    c.next_send += g;
                }
                d.flush(c);
                wait = wait.min(c.next_send.saturating_duration_since(now));
            }
        }
        if epoll.wait(&mut events, 256, wait).is_err() {
            continue;
        }
        for ev in events.drain(..) {
            let Some(c) = clients.get_mut(ev.token as usize) else {
                continue;
            };
            if c.dead {
                continue;
            }
            if ev.events & libc::EPOLLOUT as u32 != 0 {
                d.flush(c);
            }
            if ev.events & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                d.read_available(c, &mut scratch, false);
                let replies = d.take_replies(c);
                if gap.is_none() && replies > 0 && !c.dead && !finished.load(Ordering::Relaxed) {
                    d.enqueue(c, Instant::now());
                }
                d.flush(c);
            }
            if c.dead {
                let _ = epoll.delete(c.stream.as_raw_fd());
                continue;
            }
            // Watch for writability only while something is queued.
            let want_write = c.out_pos < c.out.len();
            if want_write != c.want_write {
                let mut flags = libc::EPOLLIN as u32;
                if want_write {
                    flags |= libc::EPOLLOUT as u32;
                }
                if epoll.modify(c.stream.as_raw_fd(), flags, ev.token).is_ok() {
                    c.want_write = want_write;
                }
            }
        }
        if last_check.elapsed() >= TICK {
            last_check = Instant::now();
            for c in clients.iter_mut() {
                d.check_timeout(c, last_check);
                if c.dead {
                    let _ = epoll.delete(c.stream.as_raw_fd());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that accepts and never answers, with a timeout shorter than the window: every
    /// client times out, none is served, and the observation marks the cell `minority-served`
    /// beside the timeouts (issue 19 E12: 999 of 1,000 clients timed out yet the cell read ok).
    #[test]
    fn clients_a_server_never_answers_are_failed_not_served() {
        use crate::observation::{Observation, Role, WarningKind};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let done = AtomicBool::new(false);
        let config = LoadConfig {
            addr,
            clients: 3,
            threads: 1,
            workload: Request::Echo(64),
            warmup: Duration::ZERO,
            duration: Duration::from_millis(300),
            rate: None,
            timeout: Duration::from_millis(40),
            cpus: None,
            connectable: 3,
        };
        let window = Window::new(false);
        let result = std::thread::scope(|scope| {
            // Accept (and keep) every connection, answer nothing, for at most 10 s.
            let acceptor = scope.spawn(|| {
                let mut held = Vec::new();
                let deadline = Instant::now() + Duration::from_secs(10);
                while !done.load(Ordering::Relaxed) && Instant::now() < deadline {
                    match listener.accept() {
                        Ok((s, _)) => held.push(s),
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
                held.len()
            });
            let result = run(&config, &window, &mut SystemProbes::default(), &|| false);
            done.store(true, Ordering::Relaxed);
            let _ = acceptor.join();
            result
        })
        .unwrap_or_else(|_| panic!("not interrupted"));
        assert_eq!(result.connected, 3);
        assert_eq!(result.completed, 0);
        assert_eq!(result.served, 0);
        assert_eq!(result.failed, 3);
        assert_eq!(
            result.errors.timeouts, 3,
            "one request in flight per client, each timed out"
        );
        let mut obs = Observation::default();
        super::super::served_metrics(&mut obs, config.clients, &result);
        assert_eq!(obs.value("clients_served", Role::Client), Some(0.0));
        assert_eq!(obs.value("clients_failed", Role::Client), Some(3.0));
        assert_eq!(obs.value("served_fraction", Role::System), Some(0.0));
        let w = obs
            .warnings
            .iter()
            .find(|w| w.kind == WarningKind::MinorityServed)
            .expect("a minority-served warning");
        assert!(w.text.starts_with("only 0 of 3 clients"), "{}", w.text);
        assert!(w.text.contains("3 timed-out"), "{}", w.text);
    }

    #[test]
    fn a_cell_is_marked_when_fewer_than_half_its_clients_were_served() {
        assert!(super::super::minority(1, 1000));
        assert!(super::super::minority(0, 1));
        assert!(!super::super::minority(1, 2));
        assert!(!super::super::minority(1000, 1000));
    }

    #[test]
    fn payload_pattern_catches_changes() {
        let mut a = vec![0u8; 64];
        fill_payload(7, &mut a);
        assert!(payload_matches(7, &a));
        assert!(!payload_matches(8, &a));
        a[63] ^= 1;
        assert!(!payload_matches(7, &a));
    }
}
