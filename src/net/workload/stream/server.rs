//! The receiving end of a stream session: accept the control connection and the data
//! connections, receive on one thread per connection, report what was counted.
//! Used by the in-process loopback run and by `iopath net serve`.

use super::thread::{self, End, Shared, StartGate, ThreadOutcome, ThreadPlan};
use crate::case::StreamCase;
use crate::measure::clock;
use crate::measure::counters::kernel_policy;
use crate::measure::window::{SystemProbes, Window};
use crate::net::control::{
    decode_data_header, Control, ControlChannel, ServerReport, DATA_HEADER_LEN, PROTOCOL_VERSION,
};
use crate::net::mode;
use crate::observation::{Metric, Role, Source};
use crate::stop::Interrupted;
use crate::sys::net as sock;
use anyhow::{anyhow, bail, Context};
use std::io::Read;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long each setup step may take before the session is abandoned.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a new data connection may take to say which session it belongs to.
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a data connection may stay silent before the peer is declared gone.
pub const DATA_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Wait for a connection on `listener` until `deadline`; give up early when `watch` (the
/// control connection) reaches EOF or `stop` is raised. Control data that arrives early (the
/// client may announce the window before every data connection was accepted) stays queued.
fn accept_until(
    listener: &TcpListener,
    deadline: Option<Instant>,
    watch: Option<&TcpStream>,
    stop: Option<&AtomicBool>,
) -> anyhow::Result<TcpStream> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut watch = watch;
    loop {
        if stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            bail!("stopped");
        }
        let wait_ms = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    bail!("timed out waiting for the client's connections");
                }
                left.as_millis().min(200) as u16
            }
            None => 200,
        };
        let mut fds = vec![PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        if let Some(w) = watch {
            fds.push(PollFd::new(w.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::from(wait_ms)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => bail!("poll failed: {e}"),
        }
        let listener_ready = fds[0].revents().is_some_and(|r| r.contains(PollFlags::POLLIN));
        let control_ready = fds.get(1).and_then(|f| f.revents()).is_some_and(|r| !r.is_empty());
        if listener_ready {
            let (stream, _) = listener.accept().context("accept failed")?;
            return Ok(stream);
        }
        if let (true, Some(w)) = (control_ready, watch) {
            let mut byte = [0u8; 1];
            match sock::recv(w.as_raw_fd(), &mut byte, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
                Ok(0) | Err(_) => bail!("the client closed the control connection during set-up"),
                // A message is waiting: it is read after set-up; stop polling it meanwhile.
                Ok(_) => watch = None,
            }
        }
    }
}

/// Serve one session on `listener`: a client's control connection, then its data connections.
/// Returns after the client finished (or failed) and every thread is joined.
pub fn serve_session(listener: &TcpListener, stop: Option<&AtomicBool>) -> anyhow::Result<()> {
    let control_stream = accept_until(listener, None, None, stop)?;
    control_stream.set_nodelay(true).ok();
    let mut control = ControlChannel::new(control_stream)?;
    let stopped = || stop.is_some_and(|s| s.load(Ordering::SeqCst));
    let case = match super::recv_watching(&mut control, SETUP_TIMEOUT, &stopped)? {
        Control::Hello { version, case } if version == PROTOCOL_VERSION => case,
        Control::Hello { version, .. } => {
            let error = format!("protocol version {version} not supported (this server speaks {PROTOCOL_VERSION})");
            control.send(&Control::Refused { error: error.clone() }).ok();
            bail!(error);
        }
        other => bail!("expected a hello from the client, got {other:?}"),
    };
    if let Err(error) = super::check_case(&case, Role::Server, crate::sys::procfs::meminfo_bytes("MemAvailable:")) {
        control.send(&Control::Refused { error: error.clone() }).ok();
        bail!(error);
    }
    let token: u64 = rand::random();
    control.send(&Control::Ready { token })?;

    // The data connections, each tagged with the token and its thread index.
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let mut data: Vec<Option<TcpStream>> = (0..case.threads).map(|_| None).collect();
    let mut accepted = 0;
    while accepted < case.threads {
        let mut s = accept_until(listener, Some(deadline), Some(control.stream()), stop)?;
        // A stray connection (a port scanner, another client) is dropped, not fatal; a silent
        // one costs at most the header timeout.
        s.set_read_timeout(Some(HEADER_TIMEOUT))?;
        let mut header = [0u8; DATA_HEADER_LEN];
        if s.read_exact(&mut header).is_err() {
            continue;
        }
        let (their_token, index) = decode_data_header(&header);
        if let Some(slot) = data
            .get_mut(index as usize)
            .filter(|slot| their_token == token && slot.is_none())
        {
            *slot = Some(s);
            accepted += 1;
        }
    }
    let data: Vec<TcpStream> = data.into_iter().flatten().collect();
    for s in &data {
        s.set_read_timeout(Some(DATA_IDLE_TIMEOUT))?;
    }

    let outcome = run_receivers(&case, &data, &mut control, &stopped);
    let report = match outcome {
        Ok(report) => report,
        Err(e) => {
            control
                .send(&Control::Failed {
                    error: format!("{e:#}"),
                })
                .ok();
            return Err(e);
        }
    };
    control
        .send(&Control::Report(Box::new(report)))
        .context("sending the report to the client")?;
    Ok(())
}

/// Run one receiving thread per data connection while following the client's phase messages.
/// A stop (`stopped`) ends the session within about 100 ms as `Interrupted`.
fn run_receivers(
    case: &StreamCase,
    data: &[TcpStream],
    control: &mut ControlChannel,
    stopped: &dyn Fn() -> bool,
) -> anyhow::Result<ServerReport> {
    let policy = kernel_policy();
    let tsc_hz = clock::tsc_hz();
    let window = Window::new();
    let mut system = SystemProbes::default();
    let mut system_metrics = Vec::new();
    let mut interrupted = false;
    let ready = StartGate::default();
    let size = case.size as usize;
    let shared = Shared {
        window: &window,
        ready: &ready,
        policy: &policy,
    };
    let outcomes: Vec<std::io::Result<ThreadOutcome>> = std::thread::scope(|scope| {
        let handles: Vec<_> = data
            .iter()
            .enumerate()
            .map(|(i, stream)| {
                let plan = ThreadPlan::new(case, Role::Server, i, stream.as_raw_fd(), &shared);
                let end = End::Recv(mode::receiver(case.mode, size, case.fields, case.verify));
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
            match super::recv_watching(control, longest, stopped) {
                Ok(Control::Measure) => window.open(&mut system),
                Ok(Control::Done) => {
                    system_metrics = window.close(&mut system);
                    break;
                }
                other => {
                    interrupted = other.is_err_and(|e| e.is::<Interrupted>());
                    window.close(&mut system);
                    for s in data {
                        s.shutdown(Shutdown::Both).ok();
                    }
                    break;
                }
            }
        }
        thread::join_all(handles)
    });
    if interrupted {
        return Err(super::interrupted());
    }
    let mut threads = Vec::new();
    for outcome in outcomes {
        threads.push(outcome.map_err(|e| anyhow!("server: {e}"))?);
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
    let recv: Vec<_> = threads.iter().filter_map(|t| t.recv_counts.clone()).collect();
    Ok(ServerReport {
        metrics,
        placement: threads.iter().map(|t| t.placement.clone()).collect(),
        verified_messages: recv.iter().map(|r| r.verified_messages).sum(),
        corrupt_messages: recv.iter().map(|r| r.corrupt_messages).sum(),
        warnings: Vec::new(),
        threads: threads.into_iter().map(|t| t.tally).collect(),
    })
}
