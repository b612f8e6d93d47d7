//! The receiving end of a stream session: accept the control connection and the data
//! connections, receive on one thread per connection, report what was counted.
//! Used by the in-process loopback run and by `iopath net serve`.
//!
//! Every new connection is greeted on a thread of its own with a deadline for what it must say
//! first (a whole hello line, or a data connection's header), so one slow, idle or stray
//! connection holds up nobody else, and a stop ends every wait within about 20 ms.

use super::thread::{self, End, Shared, StartGate, ThreadOutcome, ThreadPlan};
use crate::case::{RxMode, StreamCase};
use crate::measure::clock;
use crate::measure::counters::kernel_policy;
use crate::measure::window::{SystemProbes, Window};
use crate::net::control::{
    decode_data_header, describe_io_error, parse_hello, Control, ControlChannel, HelloCase, HelloError, ServerReport,
    DATA_HEADER_LEN,
};
use crate::net::mode::{self, RecvCounts};
use crate::observation::{Metric, Role, Source, Unsupported};
use crate::stop::Interrupted;
use crate::sys::net as sock;
use anyhow::{anyhow, bail, Context};
use std::io::{self, Read};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
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
/// Connections being greeted at once; a connection beyond this is closed at once.
const MAX_GREETING: usize = 64;
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
            bail!("said nothing: timed out after {}", secs(HELLO_DEADLINE));
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

/// Find out what a new connection is, within HELLO_DEADLINE: a control connection's first
/// byte is `{` (session tokens never start with it), anything else is a data header. A hello
/// of another protocol version, or one that is not a hello, is answered with a refusal.
fn greet(stream: TcpStream, quit: &dyn Fn() -> bool, key: Option<&[u8]>) -> anyhow::Result<Greeting> {
    let deadline = Instant::now() + HELLO_DEADLINE;
    readable_by(&stream, deadline, quit)?;
    let mut first = [0u8; 1];
    match sock::recv(stream.as_raw_fd(), &mut first, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
        Ok(0) => bail!("closed without saying anything"),
        Ok(_) => {}
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
        bail!("a client failed the key challenge");
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
}

/// [`serve_session`] with a server's limits.
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
    let accepted = std::thread::scope(|scope| -> anyhow::Result<()> {
        // After the first session, accept on until no connection is left saying hello, so
        // none is dropped unheard and none waits in the backlog behind a silent one.
        let finished = || ended.load(Ordering::SeqCst) && greeting.load(Ordering::SeqCst) == 0;
        while !stopped() && !finished() {
            let stream = match accept_within(listener, SLICE)? {
                Some(s) => s,
                None => continue,
            };
            if greeting.load(Ordering::SeqCst) >= MAX_GREETING {
                continue; // dropped: too many connections are still saying hello
            }
            greeting.fetch_add(1, Ordering::SeqCst);
            let (route, busy, ended, greeting, result, sessions) =
                (&route, &busy, &ended, &greeting, &result, &sessions);
            let spawned = std::thread::Builder::new()
                .name("iopath-greet".into())
                .spawn_scoped(scope, move || {
                    match greet(stream, &stopped, key) {
                        Ok(Greeting::Hello(mut control, case)) => {
                            let asked = Duration::from_millis(case.session_ms());
                            if let Some(max) = options.max_session.filter(|max| asked > *max) {
                                let error = format!(
                                    "the case asks for a {:.1} s session (warm-up + window); this server allows at most {:.1} s (--max-session)",
                                    asked.as_secs_f64(),
                                    max.as_secs_f64()
                                );
                                control.send(&Control::Refused { error }).ok();
                            } else if busy.swap(true, Ordering::SeqCst) {
                                let error = "busy: another client's session is running; try again when it ends";
                                control.send(&Control::Refused { error: error.into() }).ok();
                            } else {
                                // The hello names the workload: rr/crr sessions run their own code
                                // (the byte budget is not applied to them yet).
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
                                if let Ok(mut r) = route.lock() {
                                    *r = None;
                                }
                                if sessions.fetch_add(1, Ordering::SeqCst) == 0 {
                                    if let Ok(mut r) = result.lock() {
                                        *r = Some(outcome);
                                    }
                                } else {
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
                            if let Some((_, tx)) = to.filter(|(t, _)| *t == token) {
                                let _ = tx.send((index, stream));
                            }
                            // Otherwise a stray connection (a port scanner, a late or
                            // foreign data connection): dropped.
                        }
                        Err(_) => {} // refused or silent: dropped (a refusal was sent)
                    }
                    greeting.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_err() {
                greeting.fetch_sub(1, Ordering::SeqCst);
            }
        }
        Ok(())
    });
    let outcome = result.lock().ok().and_then(|mut r| r.take());
    match outcome {
        Some(outcome) => outcome,
        None => {
            accepted?;
            bail!("stopped")
        }
    }
}

/// Wait up to `wait` for a connection; out of descriptors, pause instead of spinning.
fn accept_within(listener: &TcpListener, wait: Duration) -> anyhow::Result<Option<TcpStream>> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(wait.as_millis() as u16)) {
        Ok(0) | Err(nix::errno::Errno::EINTR) => return Ok(None),
        Ok(_) => {}
        Err(e) => bail!("poll failed: {e}"),
    }
    match listener.accept() {
        Ok((stream, _)) => {
            stream.set_nonblocking(false)?;
            Ok(Some(stream))
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
    if let Err(error) = super::check_case(case, Role::Server, crate::sys::procfs::meminfo_bytes("MemAvailable:")) {
        control.send(&Control::Refused { error: error.clone() }).ok();
        bail!(error);
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
    let mut data: Vec<Option<TcpStream>> = (0..case.threads).map(|_| None).collect();
    let mut accepted = 0;
    while accepted < case.threads {
        if stopped() {
            return Err(super::interrupted());
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) else {
            bail!(
                "the client opened {accepted} of {} data connections: timed out after {}",
                case.threads,
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
        let mut receiver = mode::receiver(case.rx_mode, size, case.fields, case.verify, case.align)?;
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
        if started < handles.len() || !ready.open_when(started, super::START_PATIENCE) {
            // Release whoever did start, and end the session: the client sees the failure.
            ready.abandon();
            for s in data {
                s.shutdown(Shutdown::Both).ok();
            }
            return thread::join_all(handles);
        }
        // Follow the client: Measure opens the window, Done closes it. Anything else
        // (EOF, timeout) closes it too, and the data connections are shut so no thread waits.
        let longest = Duration::from_millis(case.warmup_ms.saturating_add(case.duration_ms)) + Duration::from_secs(30);
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
