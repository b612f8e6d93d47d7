//! The receiving end of a stream session: accept the control connection and the data
//! connections, receive on one thread per connection, report what was counted.
//! Used by the in-process loopback run and by `iopath net serve`.
//!
//! Every new connection is greeted on a thread of its own with a deadline for what it must say
//! first (a whole hello line, or a data connection's header), so one slow, idle or stray
//! connection holds up nobody else, and a stop ends every wait within about 20 ms. The
//! connections being greeted sit in a table of bounded size with a cap per address; a
//! newcomer evicts the oldest silent one rather than being dropped, so idle connections
//! cannot starve a real client, and whoever is turned away reads `server busy: …`.

use super::thread::{self, End, Shared, ThreadOutcome, ThreadPlan};
use crate::case::{RxMode, StreamCase};
use crate::measure::clock;
use crate::measure::counters::kernel_policy;
use crate::measure::window::{SystemProbes, Window};
use crate::net::control::{
    decode_data_header, describe_io_error, parse_hello, Control, ControlChannel, HelloCase, HelloError, Refusal,
    ServerReport, DATA_HEADER_LEN,
};
use crate::net::mode::{self, RecvCounts};
use crate::net::session::{StartGate, START_PATIENCE};
use crate::observation::{Metric, Role, Source, Unsupported};
use crate::stop::Interrupted;
use crate::sys::net as sock;
use anyhow::{anyhow, bail, Context};
use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the client has, after the server said Ready, to open every data connection.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a new connection may take to say what it is: a whole hello line, or a data
/// connection's header. A deadline for the whole message, not for each read.
pub const HELLO_DEADLINE: Duration = Duration::from_secs(5);
/// How long a data connection may stay silent before the peer is declared gone.
pub const DATA_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often every wait looks at the stop flag.
const SLICE: Duration = Duration::from_millis(20);
/// Connections being greeted at once; a newcomer beyond this evicts the oldest (a silent one
/// first).
const MAX_GREETING: usize = 64;
/// Connections from one address greeted at once; a newcomer beyond this evicts the oldest of
/// that address's connections that has said nothing yet, or, when all of them are speaking,
/// is turned away.
const PER_ADDRESS: usize = 8;
/// How long a new connection may stay silent: clients speak as soon as they connect.
pub const FIRST_BYTE_DEADLINE: Duration = Duration::from_secs(2);
/// How long a connection turned away stays open (its late bytes read and dropped), so that
/// its peer reads `server busy`, not a reset.
const LINGER: Duration = Duration::from_millis(500);
/// Connections turned away and lingering at once; beyond this the oldest is closed.
const MAX_LINGERING: usize = 256;
/// Refused connections logged per second by `net serve`; the rest are counted in one line.
const LOG_PER_SECOND: u32 = 20;
/// Accepting pauses this long when the process is out of file descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);

/// What a new connection turned out to be.
enum Greeting {
    /// A client's control connection with the case it asks for (any workload).
    Hello(ControlChannel, Box<HelloCase>),
    /// A data connection: the session token it carries and its thread index.
    Data(u64, u32, TcpStream),
}

/// Wait until `stream` is readable (or at EOF) by `deadline`, watching `quit`.
fn readable_by(stream: &TcpStream, deadline: Instant, quit: &dyn Fn() -> bool) -> anyhow::Result<()> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    loop {
        if quit() {
            bail!("stopped");
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) else {
            bail!("said nothing: timed out after {}", secs(FIRST_BYTE_DEADLINE));
        };
        let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(left.min(SLICE).as_millis() as u16)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => {}
            Ok(_) => return Ok(()),
            Err(e) => bail!("poll failed: {e}"),
        }
    }
}

fn secs(d: Duration) -> String {
    crate::format::format_duration_s(d.as_secs_f64())
}

/// Fill `buf` from `stream` by `deadline` (one deadline for all of it), watching `quit`.
fn read_exact_by(stream: &TcpStream, buf: &mut [u8], deadline: Instant, quit: &dyn Fn() -> bool) -> anyhow::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        if quit() {
            bail!("stopped");
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) else {
            bail!(
                "sent {got} of {} header bytes: timed out after {}",
                buf.len(),
                secs(HELLO_DEADLINE)
            );
        };
        stream.set_read_timeout(Some(left.min(SLICE)))?;
        match (&mut &*stream).read(&mut buf[got..]) {
            Ok(0) => bail!("closed after {got} of {} header bytes", buf.len()),
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => bail!("reading the header failed: {e}"),
        }
    }
    Ok(())
}

/// Find out what a new connection is: its first byte within FIRST_BYTE_DEADLINE (then
/// `spoke` is called), all of it within HELLO_DEADLINE. A control connection's first byte is
/// `{` (session tokens never start with it), anything else is a data header. A hello of
/// another protocol version, or one that is not a hello, is answered with a refusal.
/// `workload` is set as soon as a hello names one (for the log).
fn greet(
    stream: TcpStream,
    quit: &dyn Fn() -> bool,
    key: Option<&[u8]>,
    spoke: &dyn Fn(),
    workload: &mut Option<&'static str>,
) -> anyhow::Result<Greeting> {
    let started = Instant::now();
    let deadline = started + HELLO_DEADLINE;
    readable_by(&stream, started + FIRST_BYTE_DEADLINE.min(HELLO_DEADLINE), quit)?;
    let mut first = [0u8; 1];
    match sock::recv(stream.as_raw_fd(), &mut first, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
        Ok(0) => bail!("closed without saying anything"),
        Ok(_) => spoke(),
        Err(e) => bail!("reading failed: {e}"),
    }
    if first[0] == b'{' {
        stream.set_nodelay(true).ok();
        let mut control = ControlChannel::new(stream)?;
        let line = control.recv_line(Some(deadline), quit).map_err(|e| match e.kind() {
            io::ErrorKind::Interrupted => anyhow!("stopped"),
            io::ErrorKind::TimedOut => anyhow!("no whole hello: timed out after {}", secs(HELLO_DEADLINE)),
            _ => anyhow!("reading the hello failed: {e}"),
        })?;
        return match parse_hello(&line) {
            Ok(case) => {
                *workload = Some(case.workload());
                if let Some(key) = key {
                    challenge(&mut control, key, deadline, quit)?;
                }
                Ok(Greeting::Hello(control, Box::new(case)))
            }
            Err(HelloError::Version(error) | HelloError::Malformed(error)) => {
                control.send(&Control::Refused { error: error.clone() }).ok();
                Err(anyhow!(error))
            }
        };
    }
    let mut header = [0u8; DATA_HEADER_LEN];
    read_exact_by(&stream, &mut header, deadline, quit)?;
    let (token, index) = decode_data_header(&header);
    Ok(Greeting::Data(token, index, stream))
}

/// With a pre-shared key: send a nonce, check the answer, refuse with one clear line if it is
/// missing or wrong.
fn challenge(
    control: &mut ControlChannel,
    key: &[u8],
    deadline: Instant,
    quit: &dyn Fn() -> bool,
) -> anyhow::Result<()> {
    let nonce = crate::net::auth::nonce();
    control.send(&Control::Challenge { nonce: nonce.clone() })?;
    let line = control
        .recv_line(Some(deadline), quit)
        .map_err(|e| anyhow!("no answer to the key challenge: {e}"))?;
    let ok = match serde_json::from_slice::<Control>(&line) {
        Ok(Control::Auth { mac }) => crate::net::auth::verify(key, &nonce, &mac),
        _ => false,
    };
    if !ok {
        let error = "refused: wrong or missing pre-shared key (this server was started with --psk-file; give the client the same key with --psk-file)";
        control.send(&Control::Refused { error: error.into() }).ok();
        bail!("wrong or missing pre-shared key");
    }
    Ok(())
}

/// A session token; its first byte on the wire (little-endian) is never `{`, so a data
/// connection is never taken for a control connection.
fn new_token() -> u64 {
    rand::random::<u64>() | 0x80
}

/// The session being served: its token and where its data connections go.
type Route = Mutex<Option<(u64, mpsc::Sender<(u32, TcpStream)>)>>;

/// Serve one session on `listener`: a client's control connection, then its data connections.
/// Connections are greeted concurrently, each within HELLO_DEADLINE; a second client's hello
/// while a session runs is refused as busy. Returns the first session's result once it is over,
/// every connection that arrived meanwhile has been greeted (one that brings a hello then gets
/// its session too; its outcome is logged) and every thread is joined. A raised `stop` ends
/// every phase within about 20 ms.
pub fn serve_session(listener: &TcpListener, stop: Option<&AtomicBool>) -> anyhow::Result<()> {
    serve_session_with(listener, stop, &ServeOptions::default())
}

/// What a server left running enforces (`net serve` flags).
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// Every client must first prove it holds this key (`--psk-file`).
    pub key: Option<Vec<u8>>,
    /// The longest session (warm-up + window) a client may ask for (`--max-session`).
    pub max_session: Option<Duration>,
    /// The most bytes one session may send this server (`--max-session-bytes`); a session
    /// that reaches it is ended with the limit named.
    pub max_session_bytes: Option<u64>,
    /// Log every session and every refused connection on stderr (`net serve`).
    pub log: bool,
}

/// [`serve_session`] with a server's limits. With `options.log`, every session's outcome and
/// every refused connection is logged on stderr (peer, workload, reason), and an error comes
/// back only when accepting failed (or on a stop).
pub fn serve_session_with(
    listener: &TcpListener,
    stop: Option<&AtomicBool>,
    options: &ServeOptions,
) -> anyhow::Result<()> {
    let key = options.key.as_deref();
    let stopped = || stop.is_some_and(|s| s.load(Ordering::SeqCst));
    listener
        .set_nonblocking(true)
        .context("cannot make the listener non-blocking")?;
    let route: Route = Mutex::new(None);
    let busy = AtomicBool::new(false);
    let ended = AtomicBool::new(false);
    let greeting = AtomicUsize::new(0);
    let sessions = AtomicUsize::new(0);
    let result: Mutex<Option<anyhow::Result<()>>> = Mutex::new(None);
    let greeters = Greeters::default();
    let log = ServeLog::new(options.log);
    let accepted = std::thread::scope(|scope| -> anyhow::Result<()> {
        // After the first session, accept on until no connection is left saying hello, so
        // none is dropped unheard and none waits in the backlog behind a silent one.
        let finished = || ended.load(Ordering::SeqCst) && greeting.load(Ordering::SeqCst) == 0;
        while !stopped() && !finished() {
            greeters.close_lingering(false);
            let (stream, peer) = match accept_within(listener, SLICE)? {
                Some(s) => s,
                None => continue,
            };
            let Some(seat) = greeters.admit(&stream, peer, &log) else {
                continue; // turned away: told `server busy` (and logged)
            };
            greeting.fetch_add(1, Ordering::SeqCst);
            let (route, busy, ended, greeting, result, sessions, greeters, log) =
                (&route, &busy, &ended, &greeting, &result, &sessions, &greeters, &log);
            let spawned = std::thread::Builder::new()
                .name("iopath-greet".into())
                .spawn_scoped(scope, move || {
                    let quit = || stopped() || seat.evicted.load(Ordering::SeqCst);
                    let mut workload = None;
                    let greeted = greet(stream, &quit, key, &|| greeters.spoke(seat.id), &mut workload);
                    // Evicted meanwhile: told `server busy` and logged by the evicter.
                    let seated = greeters.leave(seat.id);
                    match greeted {
                        _ if !seated => {}
                        Ok(Greeting::Hello(mut control, case)) => {
                            let workload = case.workload();
                            let asked = Duration::from_millis(case.session_ms());
                            if let Some(max) = options.max_session.filter(|max| asked > *max) {
                                let error = format!(
                                    "the case asks for a {:.1} s session (warm-up + window); this server allows at most {:.1} s (--max-session)",
                                    asked.as_secs_f64(),
                                    max.as_secs_f64()
                                );
                                control.send(&Control::Refused { error: error.clone() }).ok();
                                log.refused(peer, workload, &error);
                            } else if !claim_within(busy, ENDING_SESSION_PATIENCE, &quit) {
                                let error = "server busy: another client's session is running; try again when it ends";
                                control.send(&Control::Refused { error: error.into() }).ok();
                                log.refused(peer, workload, error);
                            } else {
                                // The session's own data connections come from this address:
                                // they are not held to the per-address cap while it sets up.
                                greeters.expect_data_from(Some(peer.ip()));
                                // The hello names the workload: rr/crr sessions run their own code.
                                let outcome = match *case {
                                    HelloCase::Stream(case) => {
                                        run_session(control, &case, route, &stopped, options.max_session_bytes)
                                    }
                                    HelloCase::Rr(case) => crate::net::workload::rr::serve_session(
                                        control,
                                        &case,
                                        &stopped,
                                        options.max_session_bytes,
                                    ),
                                    HelloCase::Records(case) => {
                                        crate::net::workload::records::serve_session(
                                            control,
                                            &case,
                                            &stopped,
                                            options.max_session_bytes,
                                        )
                                    }
                                };
                                greeters.expect_data_from(None);
                                if let Ok(mut r) = route.lock() {
                                    *r = None;
                                }
                                log.session(peer, workload, &outcome);
                                if sessions.fetch_add(1, Ordering::SeqCst) == 0 {
                                    if let Ok(mut r) = result.lock() {
                                        *r = Some(outcome);
                                    }
                                } else if !log.on {
                                    match outcome {
                                        Ok(()) => eprintln!("session finished"),
                                        Err(e) => eprintln!("session failed: {e:#}"),
                                    }
                                }
                                ended.store(true, Ordering::SeqCst);
                                busy.store(false, Ordering::SeqCst);
                            }
                        }
                        Ok(Greeting::Data(token, index, stream)) => {
                            let to = route.lock().ok().and_then(|r| r.clone());
                            match to.filter(|(t, _)| *t == token) {
                                Some((_, tx)) => {
                                    let _ = tx.send((index, stream));
                                }
                                // A stray connection (a port scanner, a late or foreign data
                                // connection): dropped.
                                None => log.refused(
                                    peer,
                                    "data",
                                    "a data connection with no session's token (late, foreign or not iopath)",
                                ),
                            }
                        }
                        // Refused (the refusal was sent) or silent: dropped.
                        Err(_) if stopped() => {}
                        Err(e) => log.refused(peer, workload.unwrap_or("unknown"), &format!("{e:#}")),
                    }
                    greeting.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_err() {
                greeters.leave(seat.id);
                greeting.fetch_sub(1, Ordering::SeqCst);
            }
        }
        Ok(())
    });
    greeters.close_lingering(true);
    log.flush();
    let outcome = result.lock().ok().and_then(|mut r| r.take());
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

/// One connection being greeted.
struct Greeter {
    id: u64,
    peer: SocketAddr,
    since: Instant,
    /// Its first byte has arrived.
    spoke: bool,
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
    /// The address of the session setting up, whose data connections are exempt from the
    /// per-address cap.
    expected: Mutex<Option<IpAddr>>,
    lingering: Mutex<VecDeque<(Instant, TcpStream)>>,
}

impl Greeters {
    /// Seat a new connection, evicting the oldest silent connection of its address when that
    /// address is at PER_ADDRESS, or the oldest of all (silent first) when the table is full.
    /// None when it was turned away instead (every connection of its address is speaking):
    /// it has been told `server busy` and the refusal logged.
    fn admit(&self, stream: &TcpStream, peer: SocketAddr, log: &ServeLog) -> Option<Seat> {
        let Ok(second) = stream.try_clone() else {
            log.refused(peer, "unknown", "out of file descriptors: closed at once");
            return None;
        };
        let expected = self.expected.lock().ok().and_then(|e| *e);
        let mut table = self.table.lock().ok()?;
        let oldest = |table: &[Greeter], pick: &dyn Fn(&Greeter) -> bool| {
            (0..table.len())
                .filter(|&i| pick(&table[i]))
                .min_by_key(|&i| table[i].since)
        };
        let same = |g: &Greeter| g.peer.ip() == peer.ip();
        let from_peer = table.iter().filter(|g| same(g)).count();
        let victim = if from_peer >= PER_ADDRESS && expected != Some(peer.ip()) {
            match oldest(&table, &|g| same(g) && !g.spoke) {
                Some(i) => Some((
                    i,
                    format!(
                        "server busy: more than {PER_ADDRESS} connections from {} were saying hello at once and this one, the oldest silent one, was closed to make room; try again",
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
            // Silent first; then speaking ones, the setting-up session's data connections last.
            oldest(&table, &|g| !g.spoke)
                .or_else(|| oldest(&table, &|g| expected != Some(g.peer.ip())))
                .or_else(|| oldest(&table, &|_| true))
                .map(|i| {
                (
                    i,
                    format!("server busy: {MAX_GREETING} connections were saying hello at once and this one, the oldest, was closed to make room; try again"),
                )
            })
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
        let mut first = [0u8; 1];
        let spoke = matches!(
            sock::recv(stream.as_raw_fd(), &mut first, libc::MSG_PEEK | libc::MSG_DONTWAIT),
            Ok(1)
        );
        table.push(Greeter {
            id: seat.id,
            peer,
            since: Instant::now(),
            spoke,
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
        if let Ok(mut line) = serde_json::to_vec(&Control::Refused { error: error.into() }) {
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

    fn spoke(&self, id: u64) {
        if let Some(g) = self
            .table
            .lock()
            .ok()
            .as_mut()
            .and_then(|t| t.iter_mut().find(|g| g.id == id))
        {
            g.spoke = true;
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

    fn expect_data_from(&self, ip: Option<IpAddr>) {
        if let Ok(mut e) = self.expected.lock() {
            *e = ip;
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
                eprintln!("({left_out} more refused connections were not logged)");
            }
            *budget = (Instant::now(), 0, 0);
        }
        let (_, logged, left_out) = &mut *budget;
        if *logged >= LOG_PER_SECOND {
            *left_out += 1;
            return;
        }
        *logged += 1;
        eprintln!(
            "session refused: peer {peer}, workload {workload}: {}",
            crate::format::escape_control(reason)
        );
    }

    fn session(&self, peer: SocketAddr, workload: &str, outcome: &anyhow::Result<()>) {
        if !self.on {
            return;
        }
        match outcome {
            Ok(()) => eprintln!("session finished: peer {peer}, workload {workload}"),
            Err(e) if e.is::<Refusal>() || e.is::<Unsupported>() => self.refused(peer, workload, &format!("{e:#}")),
            Err(e) => eprintln!(
                "session failed: peer {peer}, workload {workload}: {}",
                crate::format::escape_control(&format!("{e:#}"))
            ),
        }
    }

    /// Count the refusals left out, at the end.
    fn flush(&self) {
        if let Ok(budget) = self.budget.lock() {
            if self.on && budget.2 > 0 {
                eprintln!("({} more refused connections were not logged)", budget.2);
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

/// Run the session a hello asked for: check the case, hand out the token, collect the data
/// connections (routed here by the greeters), receive, report.
fn run_session(
    mut control: ControlChannel,
    case: &StreamCase,
    route: &Route,
    stopped: &dyn Fn() -> bool,
    max_bytes: Option<u64>,
) -> anyhow::Result<()> {
    // The same headroom the client side checks: MemAvailable lowered by the memory cgroup's
    // room (a server in a 3 GiB cgroup on a large machine must not take MemAvailable's word).
    if let Err(error) = super::check_case(case, Role::Server, crate::sys::procfs::memory_headroom()) {
        return Err(crate::net::control::refuse(&mut control, error));
    }
    // A receive mode this kernel refuses is answered before any connection is made.
    if let Err(refusal) = mode::check_receiver(case.rx_mode) {
        control.send(&unavailable(&refusal)).ok();
        return Err(refusal.into());
    }
    let token = new_token();
    let (tx, rx) = mpsc::channel();
    if let Ok(mut r) = route.lock() {
        *r = Some((token, tx));
    }
    control.send(&Control::Ready { token })?;

    // The data connections, each tagged with the token and its thread index.
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let mut data: Vec<Option<TcpStream>> = (0..case.net.threads).map(|_| None).collect();
    let mut accepted = 0;
    while accepted < case.net.threads {
        if stopped() {
            return Err(super::interrupted());
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) else {
            bail!(
                "the client opened {accepted} of {} data connections: timed out after {}",
                case.net.threads,
                secs(SETUP_TIMEOUT)
            );
        };
        control_still_open(&control)?;
        match rx.recv_timeout(left.min(SLICE)) {
            Ok((index, s)) => {
                if let Some(slot) = data.get_mut(index as usize).filter(|slot| slot.is_none()) {
                    *slot = Some(s);
                    accepted += 1;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => bail!("the session's route was closed"),
        }
    }
    if let Ok(mut r) = route.lock() {
        *r = None;
    }
    let data: Vec<TcpStream> = data.into_iter().flatten().collect();
    for s in &data {
        s.set_read_timeout(Some(DATA_IDLE_TIMEOUT))?;
    }

    let outcome = run_receivers(case, &data, &mut control, stopped, max_bytes);
    let report = match outcome {
        Ok(report) => report,
        Err(e) => {
            let answer = match e.downcast_ref::<Unsupported>() {
                Some(refusal) => unavailable(refusal),
                None => Control::Failed {
                    error: format!("{e:#}"),
                },
            };
            control.send(&answer).ok();
            return Err(e);
        }
    };
    control
        .send(&Control::Report(Box::new(report)))
        .context("sending the report to the client")?;
    Ok(())
}

fn unavailable(refusal: &Unsupported) -> Control {
    Control::Unavailable {
        what: refusal.what.clone(),
        reason: refusal.reason.clone(),
    }
}

/// An error once the client has closed its control connection. Control data that arrives
/// early (the client may announce the window before every data connection was accepted) stays
/// queued.
fn control_still_open(control: &ControlChannel) -> anyhow::Result<()> {
    if control.has_buffered() {
        return Ok(());
    }
    let mut byte = [0u8; 1];
    match sock::recv(
        control.stream().as_raw_fd(),
        &mut byte,
        libc::MSG_PEEK | libc::MSG_DONTWAIT,
    ) {
        Ok(0) => bail!("the client closed the control connection during set-up"),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
        Err(e) => bail!("the control connection failed during set-up: {e}"),
    }
}

/// Whether a session's data connections have moved more than `max` bytes through this
/// server (received plus sent and acknowledged), by the kernel's count (TCP_INFO
/// bytes_received + bytes_acked): read by the coordinator between its polls of the control
/// connection, so the serving threads' loops pay nothing for the budget.
pub(crate) fn over_budget(data: &[TcpStream], max: Option<u64>) -> bool {
    let Some(max) = max else { return false };
    let moved: u64 = data
        .iter()
        .filter_map(|s| crate::sys::tcpinfo::tcp_info(s.as_raw_fd()).ok())
        .map(|(info, _)| info.bytes_received + info.bytes_acked)
        .sum();
    moved > max
}

/// The error a session over its byte budget ends with (the client is told the same).
pub(crate) fn budget_error(max: Option<u64>) -> anyhow::Error {
    anyhow!(
        "the session reached this server's byte budget of {} (--max-session-bytes) and was ended",
        crate::case::format_bytes(max.unwrap_or(0))
    )
}

/// Run one receiving thread per data connection while following the client's phase messages.
/// A stop (`stopped`) ends the session within about 100 ms as `Interrupted`; so does reaching
/// the byte budget `max_bytes`, as an error naming it.
fn run_receivers(
    case: &StreamCase,
    data: &[TcpStream],
    control: &mut ControlChannel,
    stopped: &dyn Fn() -> bool,
    max_bytes: Option<u64>,
) -> anyhow::Result<ServerReport> {
    let policy = kernel_policy();
    let tsc_hz = clock::tsc_hz();
    let window = Window::new();
    let mut system = SystemProbes::default();
    let mut system_metrics = Vec::new();
    let mut interrupted = false;
    let exceeded = std::cell::Cell::new(false);
    let stopped_or_over = || {
        if stopped() {
            return true;
        }
        exceeded.set(over_budget(data, max_bytes));
        exceeded.get()
    };
    let ready = StartGate::default();
    let size = case.size as usize;
    let shared = Shared {
        window: &window,
        ready: &ready,
        policy: &policy,
    };
    // Every receiver is made and attached to its connection before any thread starts, so a
    // kernel that refuses the receive mode is found before the window.
    let mut receivers = Vec::with_capacity(data.len());
    for stream in data {
        let mut receiver = mode::receiver(case.rx_mode, size, case.fields, case.net.verify, case.align)?;
        receiver
            .attach(stream.as_raw_fd())
            .map_err(|e| match mode::unsupported_in(&e) {
                Some(refusal) => anyhow::Error::new(refusal),
                None => anyhow!("setting up the {} receiver: {e}", case.rx_mode),
            })?;
        receivers.push(receiver);
    }
    let outcomes: Vec<std::io::Result<ThreadOutcome>> = std::thread::scope(|scope| {
        let handles: Vec<_> = data
            .iter()
            .zip(receivers)
            .enumerate()
            .map(|(i, (stream, receiver))| {
                let plan = ThreadPlan::new(case, Role::Server, i, stream.as_raw_fd(), &shared);
                let end = End::Recv(receiver);
                std::thread::Builder::new()
                    .name(format!("iopath-server-{i}"))
                    .spawn_scoped(scope, move || thread::run(plan, end))
            })
            .collect();
        let started = handles.iter().filter(|h| h.is_ok()).count();
        if started < handles.len() || !ready.open_when(started, START_PATIENCE) {
            // Release whoever did start, and end the session: the client sees the failure.
            ready.abandon();
            for s in data {
                s.shutdown(Shutdown::Both).ok();
            }
            return thread::join_all(handles);
        }
        // Follow the client: Measure opens the window, Done closes it. Anything else
        // (EOF, timeout) closes it too, and the data connections are shut so no thread waits.
        let longest =
            Duration::from_millis(case.net.warmup_ms.saturating_add(case.net.duration_ms)) + Duration::from_secs(30);
        loop {
            match super::recv_watching(control, longest, &stopped_or_over) {
                Ok(Control::Measure) => window.open(&mut system),
                Ok(Control::Done) => {
                    system_metrics = window.close(&mut system);
                    break;
                }
                other => {
                    interrupted = other.is_err_and(|e| e.is::<Interrupted>());
                    window.abandon(&mut system);
                    for s in data {
                        s.shutdown(Shutdown::Both).ok();
                    }
                    break;
                }
            }
        }
        thread::join_all(handles)
    });
    if exceeded.get() {
        return Err(budget_error(max_bytes));
    }
    if interrupted {
        return Err(super::interrupted());
    }
    let mut threads = Vec::new();
    for outcome in outcomes {
        threads.push(outcome.map_err(|e| match mode::unsupported_in(&e) {
            Some(refusal) => anyhow::Error::new(refusal),
            None => anyhow!("server: {e}"),
        })?);
    }
    let bytes: u64 = threads.iter().map(|t| t.tally.bytes).sum();
    let messages: u64 = threads.iter().map(|t| t.tally.messages).sum();
    let syscalls: u64 = threads.iter().map(|t| t.tally.syscalls).sum();
    // Only the threads that saw the window have counters; none at all is a result (every
    // counter unavailable, with the reason), not an error.
    let counters = super::measured_counters(threads.iter().map(|t| &t.counters), super::NO_SERVER_WINDOW);
    let mut metrics = counters.metrics(Role::Server, bytes, messages, "msg", tsc_hz);
    metrics.extend(system_metrics);
    metrics.push(Metric::tool("bytes_received", Role::Server, bytes as f64, "B"));
    metrics.push(Metric::tool(
        "messages_received",
        Role::Server,
        messages as f64,
        "messages",
    ));
    metrics.push(Metric::new(
        "syscalls_per_msg",
        Role::Server,
        if messages == 0 {
            f64::NAN
        } else {
            syscalls as f64 / messages as f64
        },
        "syscalls/msg",
        Source::Tool,
    ));
    let mut warnings = Vec::new();
    if case.rx_mode == RxMode::Zerocopy {
        let windows: Vec<&RecvCounts> = threads.iter().filter_map(|t| t.recv_window.as_ref()).collect();
        let (rx_metrics, warning) = zerocopy_rx_metrics(&windows);
        metrics.extend(rx_metrics);
        warnings.extend(warning);
    }
    let recv: Vec<_> = threads.iter().filter_map(|t| t.recv_counts.clone()).collect();
    Ok(ServerReport {
        metrics,
        placement: threads.iter().map(|t| t.placement.clone()).collect(),
        verified_messages: recv.iter().map(|r| r.verified_messages).sum(),
        corrupt_messages: recv.iter().map(|r| r.corrupt_messages).sum(),
        warnings,
        threads: threads.into_iter().map(|t| t.tally).collect(),
    })
}

/// What TCP receive zero-copy did inside the window, from the receivers that measured: bytes
/// mapped, bytes copied by recv(), the fraction mapped (source kernel: the kernel's own answer
/// to each call), and a warning when it mapped nothing.
fn zerocopy_rx_metrics(windows: &[&RecvCounts]) -> (Vec<Metric>, Option<String>) {
    let kernel = |name: &str, unit: &str, value: Result<f64, String>| {
        Metric::from_result(name, Role::Server, unit, Source::Kernel, value)
    };
    if windows.is_empty() {
        let none = || Err(super::NO_SERVER_WINDOW.to_string());
        return (
            vec![
                kernel("rx_mapped_fraction", "fraction", none()),
                kernel("rx_bytes_mapped", "B", none()),
                kernel("rx_bytes_copied", "B", none()),
            ],
            None,
        );
    }
    let mut sum = RecvCounts::default();
    for w in windows {
        sum.add(w);
    }
    let total = sum.bytes_mapped + sum.bytes_copied;
    let fraction = if total == 0 {
        Err("no byte was received inside the window".to_string())
    } else {
        Ok(sum.bytes_mapped as f64 / total as f64)
    };
    let warning = (total > 0 && sum.bytes_mapped == 0).then(|| {
        format!(
            "zerocopy receive: the kernel mapped none of the {} received in the window (all copied by recv): it maps only data held as whole 4 KiB pages, which on loopback takes a zero-copy sender and 4096-byte segments",
            crate::format::format_bytes(total)
        )
    });
    (
        vec![
            kernel("rx_mapped_fraction", "fraction", fraction),
            kernel("rx_bytes_mapped", "B", Ok(sum.bytes_mapped as f64)),
            kernel("rx_bytes_copied", "B", Ok(sum.bytes_copied as f64)),
        ],
        warning,
    )
}

/// How long a hello waits for a session that is ending before it is told `server busy`.
const ENDING_SESSION_PATIENCE: Duration = Duration::from_secs(2);

/// Claim the server's one session, waiting up to `patience` for the running one to end: a
/// client running cells back to back says hello again the moment its last report arrives,
/// a moment before the server has let go of that session.
fn claim_within(busy: &AtomicBool, patience: Duration, quit: &dyn Fn() -> bool) -> bool {
    let until = Instant::now() + patience;
    loop {
        if !busy.swap(true, Ordering::SeqCst) {
            return true;
        }
        if quit() || Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
            Control::Refused { error } => error,
            other => panic!("{other:?}"),
        }
    }

    /// The eviction policy: the oldest silent connection of a full address makes room; an
    /// address whose connections all speak turns the newcomer away; a full table evicts its
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
        // Every connection of the address speaking: the newcomer is turned away.
        for seat in seats.iter().skip(1).chain([&ninth]) {
            greeters.spoke(seat.id);
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
}
