//! The session server of `iopath net serve` (and of the in-process server of loopback, netns
//! and veth runs): accept connections, greet each, and run the session a hello asks for
//! through the workloads it serves (`served::Served`, listed for `net serve` in `registry.rs`).
//!
//! Every new connection is greeted on a thread of its own with a deadline for what it must say
//! first (a whole hello line, or a data connection's header), so one slow, idle or stray
//! connection holds up nobody else, and a stop ends every wait within about 20 ms. The
//! connections being greeted sit in a table of bounded size with a cap per address; a
//! newcomer evicts the least advanced (silent, then dripping, then waiting on the key
//! challenge; never one that answered it; a connection under `FRESH` old counts as speaking,
//! since its hello may not be written yet), oldest first, rather than being dropped, so idle or
//! dripping connections cannot starve a real client, and whoever is turned away reads
//! `server busy: …`.

use super::handshake::{greet, refuse, refused, Greeting, Refusal, RefusalKind, Stage, SLICE};
use super::served::{decode_hello, served_kinds, Hello, Served};
use crate::net::control::{describe_io_error, ControlChannel};
use crate::observation::Unsupported;
use crate::sys::net as sock;
use anyhow::{bail, Context};
use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections being greeted at once; a newcomer beyond this evicts the oldest (a silent one
/// first).
const MAX_GREETING: usize = 64;
/// Connections from one address greeted at once; a newcomer beyond this evicts the oldest of
/// that address's connections that has said nothing yet, or, when all of them are speaking,
/// is turned away.
const PER_ADDRESS: usize = 8;
/// A connection this young that has said nothing yet ranks as one that spoke: a client sends
/// its hello right after connecting, but on a loaded machine it may not have run yet, and a
/// flood that reconnects every few milliseconds would otherwise evict it first, every time.
const FRESH: Duration = Duration::from_millis(100);
/// How long a connection turned away stays open (its late bytes read and dropped), so that
/// its peer reads `server busy`, not a reset.
const LINGER: Duration = Duration::from_millis(500);
/// Connections turned away and lingering at once; beyond this the oldest is closed.
const MAX_LINGERING: usize = 256;
/// Refused connections logged per second by `net serve`; the rest are counted in one line.
const LOG_PER_SECOND: u32 = 20;
/// Accepting pauses this long when the process is out of file descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);

/// What a session function gets from the server besides its control connection.
pub struct Session<'a> {
    /// The server was asked to stop: end within about 100 ms (as `Interrupted`).
    pub stopped: &'a dyn Fn() -> bool,
    /// The most bytes the session may move through this server (`--max-session-bytes`).
    pub max_bytes: Option<u64>,
    /// The longest session (warm-up + window) this server allows (`--max-session`).
    pub max_session: Option<Duration>,
    /// The peer addresses this server talks to (`--allow-peers`; None: any).
    pub allow_peers: Option<&'a AllowList>,
    /// The server's key, when it has one: the client proved it holds it (and an agent's own
    /// legs prove themselves with it).
    pub key: Option<&'a [u8]>,
    route: &'a Route,
    queue: &'a RunQueue,
    /// The session holds one of the server's places (every session but an agent hello, which
    /// claims one through [`Session::wait_turn`]).
    claimed: AtomicBool,
    /// This session's token in the route, once it opened one.
    token: Mutex<Option<u64>>,
}

impl Session<'_> {
    /// A token for data connections that arrive on the server's own listener, and where they
    /// come (thread index, connection) until [`Session::close_route`] or the session's end.
    pub fn open_route(&self) -> (u64, mpsc::Receiver<(u32, TcpStream)>) {
        self.close_route();
        let token = new_token();
        let (tx, rx) = mpsc::channel();
        if let Ok(mut r) = self.route.lock() {
            r.push((token, tx));
        }
        if let Ok(mut own) = self.token.lock() {
            *own = Some(token);
        }
        (token, rx)
    }

    /// Later data connections with the session's token are dropped as strays (the other
    /// sessions' routes stay).
    pub fn close_route(&self) {
        let Some(token) = self.token.lock().ok().and_then(|mut own| own.take()) else {
            return;
        };
        if let Ok(mut r) = self.route.lock() {
            r.retain(|(t, _)| *t != token);
        }
    }

    /// Agent mode: wait in the server's queue of run requests (at most [`MAX_QUEUED`] waiting)
    /// until this request may claim one of the server's places (`--sessions`), telling the
    /// client its position (`queued`, a line per change: how many go first, one more while
    /// every place is taken). Returns
    /// the first position told (0: it never waited). A full queue is refused as `Busy`; a
    /// client that closes its connection leaves the queue (an error); a stop ends the wait.
    pub fn wait_turn(&self, control: &mut ControlChannel) -> anyhow::Result<u32> {
        let ticket = self.queue.next.fetch_add(1, Ordering::Relaxed);
        {
            let Ok(mut waiting) = self.queue.waiting.lock() else {
                bail!("the run queue is poisoned");
            };
            if waiting.len() >= MAX_QUEUED {
                drop(waiting);
                let error =
                    format!("server busy: {MAX_QUEUED} run requests are already waiting; try again when they are done");
                return Err(refuse(control, RefusalKind::Busy, error));
            }
            waiting.push_back(ticket);
        }
        let _leave = LeaveQueue(self.queue, ticket);
        let (mut told, mut first) = (None, 0);
        loop {
            if (self.stopped)() {
                return Err(anyhow::Error::new(crate::stop::Interrupted));
            }
            if peer_gone(control) {
                bail!("the client closed its connection while its run request waited in the queue");
            }
            let ahead = self
                .queue
                .waiting
                .lock()
                .ok()
                .and_then(|w| w.iter().position(|&t| t == ticket))
                .unwrap_or(0) as u32;
            if ahead == 0 && self.queue.claim() {
                self.claimed.store(true, Ordering::SeqCst);
                return Ok(first);
            }
            let position = ahead + u32::from(self.queue.full());
            if told != Some(position) && position > 0 {
                control
                    .send(&crate::net::control::Control::Queued { position })
                    .context("the client closed its connection while its run request waited in the queue")?;
                first = first.max(position);
                told = Some(position);
            }
            std::thread::sleep(SLICE);
        }
    }
}

/// Run requests waiting at once in an agent's queue; one more is refused as `server busy`.
pub const MAX_QUEUED: usize = 16;

/// The agent's queue of run requests: tickets in arrival order, and the server's places
/// (sessions running, at most `places`) every session claims, queued or not.
struct RunQueue {
    next: AtomicU64,
    waiting: Mutex<VecDeque<u64>>,
    running: AtomicUsize,
    places: usize,
}

impl RunQueue {
    fn new(places: usize) -> RunQueue {
        RunQueue {
            next: AtomicU64::new(0),
            waiting: Mutex::new(VecDeque::new()),
            running: AtomicUsize::new(0),
            places: places.max(1),
        }
    }

    /// Take a place if one is free.
    fn claim(&self) -> bool {
        self.running
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.places).then_some(n + 1)
            })
            .is_ok()
    }

    fn release(&self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
    }

    /// Every place is taken.
    fn full(&self) -> bool {
        self.running.load(Ordering::SeqCst) >= self.places
    }
}

/// Takes a ticket out of the queue however its wait ends.
struct LeaveQueue<'a>(&'a RunQueue, u64);

impl Drop for LeaveQueue<'_> {
    fn drop(&mut self) {
        if let Ok(mut waiting) = self.0.waiting.lock() {
            waiting.retain(|&t| t != self.1);
        }
    }
}

/// Whether the peer of `control` has closed its connection (or it failed): readable with
/// nothing to read.
pub fn peer_gone(control: &ControlChannel) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    if control.has_buffered() {
        return false;
    }
    let stream = control.stream();
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(0) | Err(nix::errno::Errno::EINTR) => false,
        Ok(_) => {
            let mut byte = [0u8; 1];
            !matches!(
                sock::recv(stream.as_raw_fd(), &mut byte, libc::MSG_PEEK | libc::MSG_DONTWAIT),
                Ok(n) if n > 0
            )
        }
        Err(_) => true,
    }
}

/// `--allow-peers`: the addresses and networks (CIDR) a server talks to. An address without a
/// prefix is that address alone; IPv4 and IPv6 (an IPv4-mapped IPv6 peer matches its IPv4
/// form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowList(Vec<(IpAddr, u8)>);

impl AllowList {
    pub fn allows(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.0.iter().any(|&(net, bits)| match (net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => prefix_eq(&n.octets(), &a.octets(), bits),
            (IpAddr::V6(n), IpAddr::V6(a)) => prefix_eq(&n.octets(), &a.octets(), bits),
            _ => false,
        })
    }
}

fn prefix_eq(net: &[u8], addr: &[u8], bits: u8) -> bool {
    let (whole, rest) = ((bits / 8) as usize, bits % 8);
    net[..whole] == addr[..whole] && (rest == 0 || (net[whole] ^ addr[whole]) >> (8 - rest) == 0)
}

impl std::str::FromStr for AllowList {
    type Err = String;

    /// `10.0.0.0/8,192.168.1.7,fd00::/8`: comma-separated addresses or networks.
    fn from_str(text: &str) -> Result<Self, String> {
        let accepted = "accepted: addresses or networks, comma-separated, e.g. 10.0.0.0/8,192.168.1.7,fd00::/8";
        let mut list = Vec::new();
        for item in text.split(',').map(str::trim) {
            let (addr, bits) = match item.split_once('/') {
                Some((a, b)) => (a, Some(b)),
                None => (item, None),
            };
            let ip: IpAddr = addr
                .parse()
                .map_err(|_| format!("'{item}' is not an address or network ({accepted})"))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let bits = match bits {
                None => max,
                Some(b) => b
                    .parse::<u8>()
                    .ok()
                    .filter(|b| *b <= max)
                    .ok_or_else(|| format!("'{item}': the prefix length must be 0 to {max} ({accepted})"))?,
            };
            list.push((ip, bits));
        }
        Ok(AllowList(list))
    }
}

/// Refuse a hello a session function does not serve (a registry entry listing a kind its
/// function does not take).
pub fn wrong_hello(mut control: ControlChannel, workload: &str) -> anyhow::Error {
    let error = format!("this server does not serve {workload} sessions here");
    refuse(&mut control, RefusalKind::BadHello, error)
}

/// A session token; its first byte on the wire (little-endian) is never `{`, so a data
/// connection is never taken for a control connection.
fn new_token() -> u64 {
    rand::random::<u64>() | 0x80
}

/// The sessions being served: each one's token and where its data connections go.
type Route = Mutex<Vec<(u64, mpsc::Sender<(u32, TcpStream)>)>>;

/// Serve `sessions` sessions at a time on `listener` of the workloads in `served`: a client's
/// control connection, then its data connections. Connections are greeted concurrently, each
/// within HELLO_DEADLINE; a client's hello while every place is taken is refused as busy.
/// Returns the first session's result (with several places: the first failure of any, else
/// success) once it is over, every connection that arrived meanwhile has been greeted (one
/// that brings a hello then gets its session too) and every thread is joined. A raised `stop`
/// ends every phase within about 20 ms.
pub fn serve_session(
    listener: &TcpListener,
    stop: Option<&AtomicBool>,
    served: &[Served],
    sessions: usize,
) -> anyhow::Result<()> {
    let options = ServeOptions {
        sessions,
        ..ServeOptions::default()
    };
    serve_session_with(listener, stop, &options, served)
}

/// The most sessions a server runs at once (`net serve --sessions`, `net stream --clients`).
pub const MAX_SESSIONS: usize = 64;

/// What a server left running enforces (`net serve` flags).
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// Sessions served at once (`--sessions`, 1 to [`MAX_SESSIONS`]; 0 reads as 1): each with
    /// its own token, limits and data connections; a client beyond them is told busy.
    pub sessions: usize,
    /// Every client must first prove it holds this key (`--psk-file`).
    pub key: Option<Vec<u8>>,
    /// The longest session (warm-up + window) a client may ask for (`--max-session`).
    pub max_session: Option<Duration>,
    /// The most bytes one session may send this server (`--max-session-bytes`); a session
    /// that reaches it is ended with the limit named.
    pub max_session_bytes: Option<u64>,
    /// Log every session and every refused connection on stderr (`net serve`).
    pub log: bool,
    /// Serve sessions to these client addresses only, and (agent mode) run requests against
    /// these targets only (`--allow-peers`).
    pub allow_peers: Option<AllowList>,
}

/// [`serve_session`] with a server's limits. With `options.log`, every session's outcome and
/// every refused connection is logged on stderr (peer, workload, reason), and an error comes
/// back only when accepting failed (or on a stop).
pub fn serve_session_with(
    listener: &TcpListener,
    stop: Option<&AtomicBool>,
    options: &ServeOptions,
    served: &[Served],
) -> anyhow::Result<()> {
    listener
        .set_nonblocking(true)
        .context("cannot make the listener non-blocking")?;
    let server = Server {
        options,
        served,
        stop,
        route: Mutex::new(Vec::new()),
        queue: RunQueue::new(options.sessions),
        ended: AtomicBool::new(false),
        greeting: AtomicUsize::new(0),
        sessions: AtomicUsize::new(0),
        result: Mutex::new(None),
        greeters: Greeters::default(),
        log: ServeLog::new(options.log),
    };
    let accepted = std::thread::scope(|scope| server.accept_all(listener, scope));
    server.greeters.close_lingering(true);
    server.log.flush();
    let outcome = server.result.lock().ok().and_then(|mut r| r.take());
    match outcome {
        // Logged already.
        Some(_) if options.log => Ok(()),
        Some(outcome) => outcome,
        None => {
            accepted?;
            bail!("stopped")
        }
    }
}

/// One run of [`serve_session_with`]: what its greeter threads share.
struct Server<'a> {
    options: &'a ServeOptions,
    served: &'a [Served],
    stop: Option<&'a AtomicBool>,
    route: Route,
    /// The run requests waiting (agent mode) and the places sessions hold the server with.
    queue: RunQueue,
    /// The first session is over.
    ended: AtomicBool,
    /// Connections being greeted (their threads running).
    greeting: AtomicUsize,
    /// Sessions run so far.
    sessions: AtomicUsize,
    /// The first session's outcome.
    result: Mutex<Option<anyhow::Result<()>>>,
    greeters: Greeters,
    log: ServeLog,
}

impl<'a> Server<'a> {
    fn stopped(&self) -> bool {
        self.stop.is_some_and(|s| s.load(Ordering::SeqCst))
    }

    /// Accept and greet connections, each on a thread of its own, until stopped or, after the
    /// first session, until no connection is left saying hello (so none is dropped unheard
    /// and none waits in the backlog behind a silent one).
    fn accept_all<'s>(&'s self, listener: &TcpListener, scope: &'s std::thread::Scope<'s, '_>) -> anyhow::Result<()> {
        let finished = || self.ended.load(Ordering::SeqCst) && self.greeting.load(Ordering::SeqCst) == 0;
        while !self.stopped() && !finished() {
            self.greeters.close_lingering(false);
            let (stream, peer) = match accept_within(listener, SLICE)? {
                Some(s) => s,
                None => continue,
            };
            let Some(seat) = self.greeters.admit(&stream, peer, &self.log) else {
                continue; // turned away: told `server busy` (and logged)
            };
            self.greeting.fetch_add(1, Ordering::SeqCst);
            let id = seat.id;
            let spawned = std::thread::Builder::new()
                .name("iopath-greet".into())
                .spawn_scoped(scope, move || {
                    self.greet_one(stream, peer, seat);
                    self.greeting.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_err() {
                self.greeters.leave(id);
                self.greeting.fetch_sub(1, Ordering::SeqCst);
            }
        }
        Ok(())
    }

    /// A greeter thread's body: find out what the connection is and serve it (a hello), route
    /// it to its session (a data connection) or log why it was dropped.
    fn greet_one(&self, stream: TcpStream, peer: SocketAddr, seat: Seat) {
        let quit = || self.stopped() || seat.evicted.load(Ordering::SeqCst);
        let mut workload = None;
        let key = self.options.key.as_deref();
        let greeted = greet(
            stream,
            (&quit, key),
            &|line| decode_hello(line, self.served),
            &|stage| self.greeters.reached(seat.id, stage),
            &mut workload,
        );
        // Evicted meanwhile: told `server busy` and logged by the evicter.
        let seated = self.greeters.leave(seat.id);
        match greeted {
            _ if !seated => {}
            Ok(Greeting::Hello(control, case)) => self.serve_hello(control, *case, peer, &quit),
            Ok(Greeting::Data(token, index, stream)) => {
                let to = self
                    .route
                    .lock()
                    .ok()
                    .and_then(|r| r.iter().find(|(t, _)| *t == token).cloned());
                match to {
                    Some((_, tx)) => {
                        let _ = tx.send((index, stream));
                    }
                    // A stray connection (a port scanner, a late or foreign data connection):
                    // dropped.
                    None => self.log.refused(
                        peer,
                        "data",
                        "a data connection with no session's token (late, foreign or not iopath)",
                    ),
                }
            }
            // Refused (the refusal was sent) or silent: dropped.
            Err(_) if self.stopped() => {}
            Err(e) => self.log.refused(peer, workload.unwrap_or("unknown"), &format!("{e:#}")),
        }
    }

    /// A hello: the session it asks for, unless the server does not serve that workload, the
    /// session is longer than `--max-session`, or another session holds the server.
    fn serve_hello(&self, mut control: ControlChannel, case: Hello, peer: SocketAddr, quit: &dyn Fn() -> bool) {
        let workload = case.workload();
        let asked = Duration::from_millis(case.session_ms());
        // Decoded by one of `served` (`decode_hello`): found, unless a caller's list changed.
        let Some(served) = self.served.iter().find(|s| s.hellos.contains(&workload)) else {
            let error = format!(
                "unknown workload {workload} (this server serves {})",
                served_kinds(self.served)
            );
            control.send(&refused(RefusalKind::BadHello, &error)).ok();
            self.log.refused(peer, workload, &error);
            return;
        };
        if let Some(max) = self.options.max_session.filter(|max| asked > *max) {
            let error = format!(
                "the case asks for a {:.1} s session (warm-up + window); this server allows at most {:.1} s (--max-session)",
                asked.as_secs_f64(),
                max.as_secs_f64()
            );
            control.send(&refused(RefusalKind::SessionTooLong, &error)).ok();
            self.log.refused(peer, workload, &error);
            return;
        }
        // Limits and memory before anything is allocated or `ready` said: one check for every
        // workload, here, rather than in each session function.
        if let Err(error) = (served.check)(&case, crate::sys::procfs::memory_headroom()) {
            control.send(&refused(RefusalKind::Limits, &error)).ok();
            self.log.refused(peer, workload, &error);
            return;
        }
        // An agent hello (a run request, or a target's fingerprint) claims the server, if at
        // all, in the queue's order (`Session::wait_turn`); any other session here and now.
        let agent = !served.claims;
        if !agent {
            if self.options.allow_peers.as_ref().is_some_and(|a| !a.allows(peer.ip())) {
                let error = format!(
                    "this server serves only the peers of its --allow-peers, not {}",
                    peer.ip()
                );
                control.send(&refused(RefusalKind::NotAllowed, &error)).ok();
                self.log.refused(peer, workload, &error);
                return;
            }
            if !claim_within(&self.queue, ENDING_SESSION_PATIENCE, quit) {
                let error = match self.queue.places {
                    1 => "server busy: another client's session is running; try again when it ends".to_string(),
                    n => format!("server busy: {n} sessions are running, the most this server runs at once (net serve --sessions); try again when one ends"),
                };
                control.send(&refused(RefusalKind::Busy, &error)).ok();
                self.log.refused(peer, workload, &error);
                return;
            }
            // The session's own data connections come from this address: they are not held to
            // the per-address cap while it runs.
            self.greeters.expect_data_from(peer.ip(), true);
        }
        let stopped = || self.stopped();
        let session = Session {
            stopped: &stopped,
            max_bytes: self.options.max_session_bytes,
            max_session: self.options.max_session,
            allow_peers: self.options.allow_peers.as_ref(),
            key: self.options.key.as_deref(),
            route: &self.route,
            queue: &self.queue,
            claimed: AtomicBool::new(!agent),
            token: Mutex::new(None),
        };
        let outcome = (served.serve)(control, case, &session);
        if !agent {
            self.greeters.expect_data_from(peer.ip(), false);
        }
        session.close_route();
        self.log.session(peer, workload, &outcome);
        self.record(outcome);
        self.ended.store(true, Ordering::SeqCst);
        if session.claimed.load(Ordering::SeqCst) {
            self.queue.release();
        }
    }

    /// Keep the first session's outcome (what [`serve_session_with`] returns); later ones are
    /// logged (or, without a log, said on stderr). With several places the sessions that run
    /// together are one run's (an incast's clients): the first failure among them is kept.
    fn record(&self, outcome: anyhow::Result<()>) {
        let first = self.sessions.fetch_add(1, Ordering::SeqCst) == 0;
        if first || self.queue.places > 1 {
            if let Ok(mut r) = self.result.lock() {
                if first || matches!(*r, Some(Ok(())) | None) {
                    *r = Some(outcome);
                }
            }
        } else if !self.log.on {
            match outcome {
                Ok(()) => crate::tell!("session finished"),
                Err(e) => crate::tell!("session failed: {e:#}"),
            }
        }
    }
}

/// One connection being greeted.
struct Greeter {
    id: u64,
    peer: SocketAddr,
    since: Instant,
    /// How far its greeting has come: the least advanced are evicted first.
    stage: Stage,
    evicted: Arc<AtomicBool>,
    /// A second descriptor of its socket, to refuse and close it when it is evicted.
    stream: TcpStream,
}

/// A greeter thread's place in the table.
struct Seat {
    id: u64,
    evicted: Arc<AtomicBool>,
}

/// The connections being greeted (at most MAX_GREETING, PER_ADDRESS from one address), and
/// the connections turned away, kept open for LINGER so their peers read the refusal.
#[derive(Default)]
struct Greeters {
    table: Mutex<Vec<Greeter>>,
    next_id: AtomicU64,
    /// The addresses of the sessions running (one entry per session), whose data connections
    /// are exempt from the per-address cap.
    expected: Mutex<Vec<IpAddr>>,
    lingering: Mutex<VecDeque<(Instant, TcpStream)>>,
}

impl Greeters {
    /// Seat a new connection, evicting the least advanced (then oldest) connection of its
    /// address that has not sent a whole hello when that address is at PER_ADDRESS, or the
    /// least advanced (then oldest) of all when the table is full — never one that answered
    /// the key challenge, and the setting-up session's data connections last. None when it
    /// was turned away instead (none may be evicted): it has been told `server busy` and the
    /// refusal logged.
    fn admit(&self, stream: &TcpStream, peer: SocketAddr, log: &ServeLog) -> Option<Seat> {
        let Ok(second) = stream.try_clone() else {
            log.refused(peer, "unknown", "out of file descriptors: closed at once");
            return None;
        };
        let expected = self.expected.lock().map(|e| e.clone()).unwrap_or_default();
        let mut table = self.table.lock().ok()?;
        // A silent one whose first bytes are queued has spoken, though its greeter has not
        // read them yet (it may not have run).
        for greeter in table.iter_mut().filter(|g| g.stage == Stage::Silent) {
            if spoken(&greeter.stream) {
                greeter.stage = Stage::Spoke;
            }
        }
        let now = Instant::now();
        let rank = |g: &Greeter| match g.stage {
            Stage::Silent if now.duration_since(g.since) < FRESH => Stage::Spoke,
            stage => stage,
        };
        // The least advanced, then the oldest, of those `pick` allows.
        let weakest = |table: &[Greeter], pick: &dyn Fn(&Greeter) -> bool| {
            (0..table.len())
                .filter(|&i| pick(&table[i]))
                .min_by_key(|&i| (rank(&table[i]), expected.contains(&table[i].peer.ip()), table[i].since))
        };
        let same = |g: &Greeter| g.peer.ip() == peer.ip();
        let from_peer = table.iter().filter(|g| same(g)).count();
        let victim = if from_peer >= PER_ADDRESS && !expected.contains(&peer.ip()) {
            match weakest(&table, &|g| same(g) && g.stage < Stage::Challenged) {
                Some(i) => Some((
                    i,
                    format!(
                        "server busy: more than {PER_ADDRESS} connections from {} were saying hello at once and this one, the least advanced, was closed to make room; try again",
                        peer.ip()
                    ),
                )),
                None => {
                    drop(table);
                    let error = format!(
                        "server busy: {PER_ADDRESS} connections from {} are already saying hello; try again in a few seconds",
                        peer.ip()
                    );
                    log.refused(peer, "unknown", &error);
                    self.turn_away(second, &error);
                    return None;
                }
            }
        } else if table.len() >= MAX_GREETING {
            match weakest(&table, &|g| g.stage < Stage::Answered) {
                Some(i) => Some((
                    i,
                    format!("server busy: {MAX_GREETING} connections were saying hello at once and this one, the least advanced, was closed to make room; try again"),
                )),
                None => {
                    drop(table);
                    let error = format!(
                        "server busy: {MAX_GREETING} connections that proved the key are being served; try again in a second"
                    );
                    log.refused(peer, "unknown", &error);
                    self.turn_away(second, &error);
                    return None;
                }
            }
        } else {
            None
        };
        let evicted = victim.map(|(i, why)| (table.swap_remove(i), why));
        let seat = Seat {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            evicted: Arc::new(AtomicBool::new(false)),
        };
        // A client sends its hello (or header) as soon as it is connected: often it is here
        // already, and the connection is not silent even before its greeter runs.
        let stage = if spoken(stream) { Stage::Spoke } else { Stage::Silent };
        table.push(Greeter {
            id: seat.id,
            peer,
            since: Instant::now(),
            stage,
            evicted: seat.evicted.clone(),
            stream: second,
        });
        drop(table);
        if let Some((victim, why)) = evicted {
            victim.evicted.store(true, Ordering::SeqCst);
            log.refused(victim.peer, "unknown", &why);
            self.turn_away(victim.stream, &why);
        }
        Some(seat)
    }

    /// Tell a connection `error` as a refusal, close both directions (its greeter, if any,
    /// wakes at once) and keep the socket open for LINGER, reading what still arrives, so the
    /// peer reads the refusal rather than a reset.
    fn turn_away(&self, stream: TcpStream, error: &str) {
        if let Ok(mut line) = serde_json::to_vec(&refused(RefusalKind::Busy, error)) {
            line.push(b'\n');
            sock::send(stream.as_raw_fd(), &line, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL).ok();
        }
        stream.shutdown(Shutdown::Both).ok();
        if let Ok(mut lingering) = self.lingering.lock() {
            lingering.push_back((Instant::now(), stream));
            while lingering.len() > MAX_LINGERING {
                if let Some((_, s)) = lingering.pop_front() {
                    drain_and_close(s);
                }
            }
        }
    }

    /// Close the turned-away connections that have lingered long enough (`all`: every one).
    fn close_lingering(&self, all: bool) {
        let Ok(mut lingering) = self.lingering.lock() else {
            return;
        };
        while let Some((since, _)) = lingering.front() {
            if !all && since.elapsed() < LINGER {
                break;
            }
            if let Some((_, s)) = lingering.pop_front() {
                drain_and_close(s);
            }
        }
    }

    /// The connection `id` has come as far as `stage`.
    fn reached(&self, id: u64, stage: Stage) {
        if let Some(g) = self
            .table
            .lock()
            .ok()
            .as_mut()
            .and_then(|t| t.iter_mut().find(|g| g.id == id))
        {
            g.stage = g.stage.max(stage);
        }
    }

    /// Leave the table; false when the connection was evicted meanwhile.
    fn leave(&self, id: u64) -> bool {
        let Ok(mut table) = self.table.lock() else { return false };
        match table.iter().position(|g| g.id == id) {
            Some(i) => {
                table.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// A session from `ip` starts (`running`) or ends: its data connections are exempt from
    /// the per-address cap while it runs.
    fn expect_data_from(&self, ip: IpAddr, running: bool) {
        if let Ok(mut e) = self.expected.lock() {
            if running {
                e.push(ip);
            } else if let Some(i) = e.iter().position(|x| *x == ip) {
                e.swap_remove(i);
            }
        }
    }
}

/// Read (and drop) what a turned-away peer still sent, so closing sends no reset, then close.
fn drain_and_close(stream: TcpStream) {
    let mut scrap = [0u8; 4096];
    for _ in 0..16 {
        match sock::recv(stream.as_raw_fd(), &mut scrap, libc::MSG_DONTWAIT) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
}

/// What `net serve` logs on stderr: one line per session (peer, workload, outcome) and per
/// refused connection, at most LOG_PER_SECOND refusals a second (the rest counted), so a
/// flood of connections cannot flood the log. Remote text passes a control-character filter.
struct ServeLog {
    on: bool,
    /// The second being counted, refusals logged in it, refusals left out since the last line.
    budget: Mutex<(Instant, u32, u64)>,
}

impl ServeLog {
    fn new(on: bool) -> ServeLog {
        ServeLog {
            on,
            budget: Mutex::new((Instant::now(), 0, 0)),
        }
    }

    fn refused(&self, peer: SocketAddr, workload: &str, reason: &str) {
        if !self.on {
            return;
        }
        let Ok(mut budget) = self.budget.lock() else { return };
        let (second, _, left_out) = &mut *budget;
        if second.elapsed() >= Duration::from_secs(1) {
            if *left_out > 0 {
                crate::tell!("({left_out} more refused connections were not logged)");
            }
            *budget = (Instant::now(), 0, 0);
        }
        let (_, logged, left_out) = &mut *budget;
        if *logged >= LOG_PER_SECOND {
            *left_out += 1;
            return;
        }
        *logged += 1;
        crate::tell!(
            "session refused: peer {peer}, workload {workload}: {}",
            crate::format::escape_control(reason)
        );
    }

    fn session(&self, peer: SocketAddr, workload: &str, outcome: &anyhow::Result<()>) {
        if !self.on {
            return;
        }
        match outcome {
            Ok(()) => crate::tell!("session finished: peer {peer}, workload {workload}"),
            Err(e) if e.is::<Refusal>() || e.is::<Unsupported>() => self.refused(peer, workload, &format!("{e:#}")),
            Err(e) => crate::tell!(
                "session failed: peer {peer}, workload {workload}: {}",
                crate::format::escape_control(&format!("{e:#}"))
            ),
        }
    }

    /// Count the refusals left out, at the end.
    fn flush(&self) {
        if let Ok(budget) = self.budget.lock() {
            if self.on && budget.2 > 0 {
                crate::tell!("({} more refused connections were not logged)", budget.2);
            }
        }
    }
}

/// Wait up to `wait` for a connection; out of descriptors, pause instead of spinning.
fn accept_within(listener: &TcpListener, wait: Duration) -> anyhow::Result<Option<(TcpStream, SocketAddr)>> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(wait.as_millis() as u16)) {
        Ok(0) | Err(nix::errno::Errno::EINTR) => return Ok(None),
        Ok(_) => {}
        Err(e) => bail!("poll failed: {e}"),
    }
    match listener.accept() {
        Ok((stream, peer)) => {
            stream.set_nonblocking(false)?;
            Ok(Some((stream, peer)))
        }
        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => Ok(None),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) => {
            // The listener stays readable: polling it at once again would spin.
            std::thread::sleep(ACCEPT_BACKOFF);
            Ok(None)
        }
        Err(e) => bail!("accept failed: {}", describe_io_error(&e, Duration::ZERO)),
    }
}

/// How long a hello waits for a session that is ending before it is told `server busy`.
const ENDING_SESSION_PATIENCE: Duration = Duration::from_secs(2);

/// Claim one of the server's places, waiting up to `patience` for a running session to end:
/// a client running cells back to back says hello again the moment its last report arrives,
/// a moment before the server has let go of that session.
fn claim_within(queue: &RunQueue, patience: Duration, quit: &dyn Fn() -> bool) -> bool {
    let until = Instant::now() + patience;
    loop {
        if queue.claim() {
            return true;
        }
        if quit() || Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `stream` has bytes queued (peeked, not read: its greeter reads them).
fn spoken(stream: &TcpStream) -> bool {
    let mut first = [0u8; 1];
    matches!(
        sock::recv(stream.as_raw_fd(), &mut first, libc::MSG_PEEK | libc::MSG_DONTWAIT),
        Ok(1)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::control::Control;
    use std::io::Read;

    /// A connection to `listener` from `from` (any 127/8 address is loopback), and its accepted end.
    fn connection(listener: &TcpListener, from: [u8; 4]) -> (TcpStream, TcpStream, SocketAddr) {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket.bind(&SocketAddr::from((from, 0)).into()).unwrap();
        socket.connect(&listener.local_addr().unwrap().into()).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        (socket.into(), accepted, peer)
    }

    /// What a turned-away client reads: one refusal line, then EOF.
    fn refusal(mut client: TcpStream) -> String {
        client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut text = String::new();
        client.read_to_string(&mut text).unwrap();
        match ControlChannel::parse(text.as_bytes()).unwrap() {
            Control::Refused { error, kind } => {
                assert_eq!(kind, RefusalKind::Busy, "{error}");
                error
            }
            other => panic!("{other:?}"),
        }
    }

    /// The eviction policy: the oldest silent connection of a full address makes room; an
    /// address whose connections all sent their hello turns the newcomer away; a full table evicts its
    /// oldest silent connection, whatever its address. Everyone turned away reads `server busy`.
    #[test]
    fn the_greeting_table_evicts_the_oldest_silent_connection_and_never_fills() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (greeters, log) = (Greeters::default(), ServeLog::new(false));
        let mut local = Vec::new();
        let mut seats = Vec::new();
        for _ in 0..PER_ADDRESS {
            let (client, accepted, peer) = connection(&listener, [127, 0, 0, 1]);
            seats.push(greeters.admit(&accepted, peer, &log).expect("room"));
            local.push((client, accepted));
        }
        // A ninth from the same address: the first (oldest, silent) is evicted.
        let (client, accepted, peer) = connection(&listener, [127, 0, 0, 1]);
        let ninth = greeters.admit(&accepted, peer, &log).expect("room made");
        assert!(seats[0].evicted.load(Ordering::SeqCst));
        assert!(!greeters.leave(seats[0].id), "an evicted connection has no seat");
        let (first, _) = local.remove(0);
        assert!(refusal(first).starts_with("server busy: more than 8 connections from 127.0.0.1"));
        local.push((client, accepted));
        // Every connection of the address has sent its whole hello: the newcomer is turned away.
        for seat in seats.iter().skip(1).chain([&ninth]) {
            greeters.reached(seat.id, Stage::Challenged);
        }
        let (client, accepted, peer) = connection(&listener, [127, 0, 0, 1]);
        assert!(greeters.admit(&accepted, peer, &log).is_none());
        drop(accepted);
        assert!(refusal(client).starts_with("server busy: 8 connections from 127.0.0.1 are already saying hello"));
        // Fill the table from other addresses; the 65th evicts the oldest silent one (the
        // first of 127.0.0.2), not the older speaking ones of 127.0.0.1.
        let mut others = Vec::new();
        for host in 2..9u8 {
            for _ in 0..PER_ADDRESS {
                let (client, accepted, peer) = connection(&listener, [127, 0, 0, host]);
                others.push((greeters.admit(&accepted, peer, &log).expect("room"), client, accepted));
            }
        }
        assert_eq!(greeters.table.lock().unwrap().len(), MAX_GREETING);
        let (_client, accepted, peer) = connection(&listener, [127, 0, 0, 9]);
        assert!(greeters.admit(&accepted, peer, &log).is_some());
        assert_eq!(greeters.table.lock().unwrap().len(), MAX_GREETING);
        assert!(others[0].0.evicted.load(Ordering::SeqCst));
        assert!(!ninth.evicted.load(Ordering::SeqCst));
        let (_, client, _) = others.remove(0);
        assert!(refusal(client).starts_with("server busy: 64 connections were saying hello at once"));
        greeters.close_lingering(true);
    }

    /// Issue 31.2: a drip flood from many addresses (first bytes, never a whole hello) fills
    /// the table; a key holder mid-challenge, the oldest of all, and one that answered are
    /// never the victims: every newcomer evicts a dripping one. A table of clients that all
    /// answered turns the newcomer away instead of evicting any.
    #[test]
    fn a_drip_flood_never_evicts_a_key_holder_mid_challenge_or_answered() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (greeters, log) = (Greeters::default(), ServeLog::new(false));
        let mut held = Vec::new();
        let (client, accepted, peer) = connection(&listener, [127, 0, 0, 1]);
        let challenged = greeters.admit(&accepted, peer, &log).expect("room");
        greeters.reached(challenged.id, Stage::Challenged);
        held.push((client, accepted));
        let (client, accepted, peer) = connection(&listener, [127, 0, 0, 1]);
        let answered = greeters.admit(&accepted, peer, &log).expect("room");
        greeters.reached(answered.id, Stage::Answered);
        held.push((client, accepted));
        let mut drippers = Vec::new();
        for round in 0..3 * MAX_GREETING {
            // From 127.0.1.x, one per address: no per-address cap applies.
            let host = [127, 0, 1 + (round / 250) as u8, 1 + (round % 250) as u8];
            let (client, accepted, peer) = connection(&listener, host);
            let seat = greeters
                .admit(&accepted, peer, &log)
                .expect("a dripping one makes room");
            greeters.reached(seat.id, Stage::Spoke);
            drippers.push((seat, client, accepted));
            assert!(
                !challenged.evicted.load(Ordering::SeqCst),
                "round {round}: the key holder mid-challenge was evicted"
            );
            assert!(
                !answered.evicted.load(Ordering::SeqCst),
                "round {round}: a key holder that answered was evicted"
            );
        }
        assert_eq!(greeters.table.lock().unwrap().len(), MAX_GREETING);
        // Everyone seated has answered: nobody is evicted for a newcomer.
        for (seat, _, _) in &drippers {
            greeters.reached(seat.id, Stage::Answered);
        }
        greeters.reached(challenged.id, Stage::Answered);
        let (client, accepted, peer) = connection(&listener, [127, 0, 3, 1]);
        assert!(greeters.admit(&accepted, peer, &log).is_none());
        drop(accepted);
        assert!(refusal(client).starts_with("server busy: 64 connections that proved the key"));
        assert!(!challenged.evicted.load(Ordering::SeqCst) && !answered.evicted.load(Ordering::SeqCst));
        drop(drippers);
        greeters.close_lingering(true);
    }

    /// `--sessions 2`: two places are claimed, a third is not, one given back is claimed
    /// again; 0 reads as one place.
    #[test]
    fn a_server_has_as_many_places_as_sessions() {
        let two = RunQueue::new(2);
        assert!(two.claim() && !two.full() && two.claim() && two.full());
        assert!(!two.claim(), "a third session while two run");
        two.release();
        assert!(two.claim());
        let default = RunQueue::new(0);
        assert!(default.claim() && !default.claim());
    }

    /// `--allow-peers`: addresses and networks of both families; an IPv4-mapped IPv6 peer is
    /// its IPv4 address; bad items are refused with what is accepted.
    #[test]
    fn an_allow_list_matches_addresses_and_networks() {
        let list: AllowList = "10.0.0.0/8, 192.168.1.7,fd00::/8,172.16.0.0/12".parse().unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for yes in [
            "10.1.2.3",
            "192.168.1.7",
            "fd12::1",
            "172.31.255.255",
            "::ffff:10.9.9.9",
        ] {
            assert!(list.allows(ip(yes)), "{yes}");
        }
        for no in ["11.0.0.1", "192.168.1.8", "fe80::1", "172.32.0.1", "127.0.0.1"] {
            assert!(!list.allows(ip(no)), "{no}");
        }
        let any: AllowList = "0.0.0.0/0".parse().unwrap();
        assert!(any.allows(ip("8.8.8.8")) && !any.allows(ip("::1")));
        for bad in ["10.0.0.0/33", "host", "", "10.0.0.0/x", "::/129"] {
            let e = bad.parse::<AllowList>().unwrap_err();
            assert!(e.contains("accepted: addresses or networks"), "{bad}: {e}");
        }
    }

    /// A control connection (server end) and its client end.
    fn control_pair() -> (ControlChannel, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (ControlChannel::new(server).unwrap(), client)
    }

    fn session<'a>(queue: &'a RunQueue, route: &'a Route, stopped: &'a dyn Fn() -> bool) -> Session<'a> {
        Session {
            stopped,
            max_bytes: None,
            max_session: None,
            allow_peers: None,
            key: Some(b"the test session's key"),
            route,
            queue,
            claimed: AtomicBool::new(false),
            token: Mutex::new(None),
        }
    }

    /// The queue: a request behind a running session is told position 1 and claims the
    /// server when it ends; the 17th waiting request is refused as busy; a client that closes
    /// its connection leaves the queue, and the one behind it moves up.
    #[test]
    fn run_requests_wait_in_a_bounded_queue_and_leave_it_when_their_client_goes() {
        let queue = RunQueue::new(1);
        assert!(queue.claim(), "the running session");
        let route: Route = Mutex::new(Vec::new());
        let never = || false;
        // Full: 16 tickets wait already.
        queue.waiting.lock().unwrap().extend(1000..1000 + MAX_QUEUED as u64);
        let (mut control, client) = control_pair();
        let e = session(&queue, &route, &never).wait_turn(&mut control).unwrap_err();
        assert_eq!(
            e.downcast_ref::<Refusal>().map(|r| r.kind),
            Some(RefusalKind::Busy),
            "{e:#}"
        );
        drop(client);
        queue.waiting.lock().unwrap().clear();

        // One waits behind the running session; its client goes away: it leaves the queue.
        let (mut gone, client) = control_pair();
        let (mut stays, mut reader) = control_pair();
        std::thread::scope(|scope| {
            let leaving = scope.spawn(|| session(&queue, &route, &never).wait_turn(&mut gone));
            while queue.waiting.lock().unwrap().is_empty() {
                std::thread::sleep(Duration::from_millis(5));
            }
            let staying = scope.spawn(|| {
                let s = session(&queue, &route, &never);
                let first = s.wait_turn(&mut stays);
                (first, s.claimed.load(Ordering::SeqCst))
            });
            while queue.waiting.lock().unwrap().len() < 2 {
                std::thread::sleep(Duration::from_millis(5));
            }
            drop(client);
            let e = leaving.join().unwrap().unwrap_err();
            assert!(format!("{e:#}").contains("closed its connection"), "{e:#}");
            // The running session ends: the one left claims the server.
            std::thread::sleep(Duration::from_millis(100));
            queue.release();
            let (first, claimed) = staying.join().unwrap();
            assert_eq!(first.unwrap(), 2, "it waited second at first");
            assert!(claimed && queue.full());
        });
        assert!(queue.waiting.lock().unwrap().is_empty());
        // What the staying client was told: position 2, then 1 when the other left.
        reader.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut told = String::new();
        drop(stays);
        reader.read_to_string(&mut told).unwrap();
        let positions: Vec<u32> = told
            .lines()
            .map(|l| match ControlChannel::parse(l.as_bytes()).unwrap() {
                Control::Queued { position } => position,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(positions, [2, 1]);
    }
}
