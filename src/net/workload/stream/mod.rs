//! The stream workload: client threads send messages of separately allocated fields to server
//! threads over TCP, one connection each, in one copy mode; both ends count CPU time,
//! counters and system calls inside the same measured window.
//!
//! The client drives the session over a control connection (see net/control.rs), so the
//! server can live in this process (loopback) or be a remote `iopath net serve`.

mod server;
mod thread;

pub use server::serve_session;

use crate::case::{CopyMode, Endpoint, StreamCase};
use crate::measure::clock;
use crate::measure::counters::{kernel_policy, CounterSample};
use crate::measure::window::{SystemProbes, Window};
use crate::net::control::{encode_data_header, Control, ControlChannel, ServerReport, PROTOCOL_VERSION};
use crate::net::mode::{self, ZeroCopyCounts};
use crate::net::topology::Topology;
use crate::observation::{Metric, Observation, Role, Source, WarningKind};
use crate::stop::{Interrupted, Stop};
use anyhow::{anyhow, bail, Context};
use socket2::{Domain, Socket, Type};
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use thread::{End, Shared, StartGate, ThreadOutcome, ThreadPlan};

/// How long the client waits for the server's report after the window closed.
const REPORT_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long threads may take to become ready (pin, open counters) before the run is abandoned.
pub(crate) const START_PATIENCE: Duration = Duration::from_secs(30);

/// The longest window or warm-up a case may ask for.
const MAX_PHASE_MS: u64 = 24 * 3600 * 1000;

/// Memory the buffers of a case take on one end (messages, serialisation buffers, the
/// zero-copy ring), for refusing cases the machine cannot hold before allocating anything.
pub fn buffer_bytes(case: &StreamCase, role: Role) -> u64 {
    let per_thread = match (role, case.mode) {
        (Role::Client, CopyMode::ZeroCopy) => case.size * mode::zero_copy_ring_slots(case.size as usize) as u64,
        // The fields plus a contiguous wire buffer (two-copy) or a verify copy.
        _ => case.size * 2,
    };
    per_thread * case.threads as u64
}

/// Whether a case can run: limits on every parameter, and buffers that fit in half of the
/// memory available (MemAvailable; None skips that check). Used by the
/// CLI before running and by a server before accepting a client's case.
pub fn check_case(case: &StreamCase, role: Role, mem_available: Option<u64>) -> Result<(), String> {
    if case.size == 0 || case.fields == 0 || case.threads == 0 {
        return Err("size, fields and threads must be at least 1".into());
    }
    if case.size > 1 << 30 {
        return Err("messages larger than 1 GiB are not accepted".into());
    }
    if case.threads > 1024 || case.fields > 1024 {
        return Err("at most 1024 threads and 1024 fields".into());
    }
    if case.duration_ms == 0 || case.duration_ms > MAX_PHASE_MS || case.warmup_ms > MAX_PHASE_MS {
        return Err("duration must be between 1 ms and 24 h, warm-up at most 24 h".into());
    }
    let need = buffer_bytes(case, role);
    if let Some(available) = mem_available {
        if need > available / 2 {
            return Err(format!(
                "{} needs about {} of buffers on the {role} side, more than half of the {} available",
                case.label(),
                crate::format::format_bytes(need),
                crate::format::format_bytes(available)
            ));
        }
    }
    Ok(())
}

/// Run one stream case and return its observation. A stop request ends it within about
/// 100 ms in any phase, with every thread joined and the in-process server released, as
/// `Err(Interrupted)`.
pub fn run(case: &StreamCase, stop: Stop) -> anyhow::Result<Observation> {
    // Calibrate before any window opens so it never disturbs one.
    let tsc_hz = clock::tsc_hz();
    let topology = Topology::from(&case.endpoint);
    if let Some(addr) = topology.remote_addr()? {
        return topology.on_client_side(|| run_client(case, addr, tsc_hz, stop));
    }
    let port = match case.endpoint {
        Endpoint::Loopback { port } => port,
        Endpoint::Remote { .. } => 0,
    };
    let listener = topology.bind(port)?;
    let addr = listener.local_addr()?;
    let server_stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let server = topology
            .spawn_server(scope, "iopath-server", || serve_session(&listener, Some(&server_stop)))
            .context("could not start the server thread")?;
        let result = topology.on_client_side(|| run_client(case, addr, tsc_hz, stop));
        // If the client never connected, the server is still waiting: release it.
        server_stop.store(true, Ordering::SeqCst);
        let server_result = server
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the server thread panicked")));
        match (result, server_result) {
            (Ok(obs), Ok(())) => Ok(obs),
            (Err(client), _) => Err(client),
            (Ok(_), Err(server)) => Err(server.context("server")),
        }
    })
}

pub(crate) fn interrupted() -> anyhow::Error {
    anyhow::Error::new(Interrupted)
}

/// Connect to `addr` within CONNECT_TIMEOUT, giving up as soon as a stop is requested.
fn connect(addr: SocketAddr, stop: Stop) -> anyhow::Result<TcpStream> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let failed = |e: std::io::Error| anyhow::Error::new(e).context(format!("could not connect to {addr}"));
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).map_err(failed)?;
    socket.set_nonblocking(true).map_err(failed)?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) || e.kind() == std::io::ErrorKind::WouldBlock => {
            let deadline = Instant::now() + CONNECT_TIMEOUT;
            loop {
                if stop.requested() {
                    return Err(interrupted());
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(failed(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "connection timed out",
                    )));
                }
                let wait = PollTimeout::from(left.min(Stop::POLL).as_millis() as u16);
                let mut fds = [PollFd::new(socket.as_fd(), PollFlags::POLLOUT)];
                match poll(&mut fds, wait) {
                    Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
                    Ok(_) => break,
                    Err(e) => return Err(failed(e.into())),
                }
            }
            if let Some(e) = socket.take_error().map_err(failed)? {
                return Err(failed(e));
            }
        }
        Err(e) => return Err(failed(e)),
    }
    socket.set_nonblocking(false).map_err(failed)?;
    Ok(socket.into())
}

/// The next control message within `timeout`, giving up as soon as a stop is requested.
fn recv_watching(
    control: &mut ControlChannel,
    timeout: Duration,
    stopped: &dyn Fn() -> bool,
) -> anyhow::Result<Control> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let deadline = Instant::now() + timeout;
    while !control.has_buffered() {
        if stopped() {
            return Err(interrupted());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break; // let recv() report the timeout
        }
        let mut fds = [PollFd::new(control.stream().as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(left.min(Stop::POLL).as_millis() as u16)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => {}
            Ok(_) => break,
            Err(e) => bail!("poll failed: {e}"),
        }
    }
    // Data (or EOF) is there: a line in flight arrives within the read timeout.
    control.set_read_timeout(Some(
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1)),
    ))?;
    Ok(control.recv()?)
}

/// The client side: set up the session, run the sending threads through warm-up and the
/// measured window, collect the server's report, and build the observation.
fn run_client(case: &StreamCase, addr: SocketAddr, tsc_hz: Option<f64>, stop: Stop) -> anyhow::Result<Observation> {
    let mut control = ControlChannel::new(connect(addr, stop)?)?;
    control.stream().set_nodelay(true).ok();
    control.set_read_timeout(Some(Duration::from_secs(10)))?;
    control.send(&Control::Hello {
        version: PROTOCOL_VERSION,
        case: case.clone(),
    })?;
    let answer = recv_watching(&mut control, Duration::from_secs(10), &|| stop.requested());
    let token = match answer {
        Err(e) if e.is::<Interrupted>() => return Err(e),
        other => match other.context("waiting for the server to accept the case")? {
            Control::Ready { token } => token,
            Control::Refused { error } => bail!("the server refused the case: {error}"),
            other => bail!("unexpected answer from the server: {other:?}"),
        },
    };
    let mut data = Vec::with_capacity(case.threads);
    for i in 0..case.threads {
        let mut s = connect(addr, stop)?;
        s.write_all(&encode_data_header(token, i as u32))?;
        s.set_write_timeout(Some(server::DATA_IDLE_TIMEOUT))?;
        data.push(s);
    }

    let policy = kernel_policy();
    let window = Window::new();
    let mut system = SystemProbes::default();
    let failed = AtomicBool::new(false);
    let ready = StartGate::default();
    let size = case.size as usize;

    let shared = Shared {
        window: &window,
        ready: &ready,
        policy: &policy,
    };
    let (outcomes, window_result) = std::thread::scope(|scope| {
        let handles: Vec<_> = data
            .iter()
            .enumerate()
            .map(|(i, stream)| {
                let plan = ThreadPlan::new(case, Role::Client, i, stream.as_raw_fd(), &shared);
                let end = End::Send(mode::sender(case.mode, size, case.fields, case.verify));
                let (failed, stream) = (&failed, stream);
                std::thread::Builder::new()
                    .name(format!("iopath-client-{i}"))
                    .spawn_scoped(scope, move || {
                        let result = thread::run(plan, end);
                        if result.is_err() {
                            failed.store(true, Ordering::SeqCst);
                        }
                        // Tell the server this connection is finished (EOF after the last message).
                        stream.shutdown(Shutdown::Write).ok();
                        result
                    })
            })
            .collect();
        let started = handles.iter().filter(|h| h.is_ok()).count();
        let window_result = if ready.open_when(handles.len().min(started), START_PATIENCE) && started == handles.len() {
            drive_phases(case, &window, &mut system, &failed, stop, &mut control)
        } else {
            ready.abandon();
            window.close(&mut system);
            control.send(&Control::Done).ok();
            Err(anyhow!("could not start all {} client threads", handles.len()))
        };
        if window_result.is_err() || failed.load(Ordering::SeqCst) {
            // Wake any thread blocked on a peer that is gone.
            for s in &data {
                s.shutdown(Shutdown::Both).ok();
            }
        }
        let outcomes = thread::join_all(handles);
        (outcomes, window_result)
    });

    let mut threads = Vec::with_capacity(outcomes.len());
    let mut first_error = None;
    for outcome in outcomes {
        match outcome {
            Ok(t) => threads.push(t),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let system_metrics = window_result?;
    if stop.requested() {
        return Err(interrupted());
    }
    if let Some(e) = first_error {
        // The server's account, if any, usually says more (e.g. it failed first).
        control.set_read_timeout(Some(Duration::from_secs(2))).ok();
        if let Ok(Control::Failed { error }) = control.recv() {
            bail!("the run failed: {e}; the server said: {error}");
        }
        bail!("the run failed: {e}");
    }
    let report = match recv_watching(&mut control, REPORT_TIMEOUT, &|| stop.requested()) {
        Err(e) if e.is::<Interrupted>() => return Err(e),
        other => match other.context("waiting for the server's report")? {
            Control::Report(report) => *report,
            Control::Failed { error } => bail!("the server failed: {error}"),
            other => bail!("unexpected message from the server: {other:?}"),
        },
    };
    let mut obs = build_observation(case, &threads, &report, tsc_hz);
    obs.metrics.extend(system_metrics);
    Ok(obs)
}

/// Warm up, open the window on both ends, hold it for the duration, close it; returns the
/// system-wide probes' metrics. Returns early when a sending thread failed, and with
/// `Interrupted` when a stop was requested (the window is closed on both ends either way).
fn drive_phases(
    case: &StreamCase,
    window: &Window,
    system: &mut SystemProbes,
    failed: &AtomicBool,
    stop: Stop,
    control: &mut ControlChannel,
) -> anyhow::Result<Vec<Metric>> {
    let sleep_watching = |d: Duration| -> bool {
        let until = Instant::now() + d;
        loop {
            if failed.load(Ordering::SeqCst) || stop.requested() {
                return false;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(Stop::POLL));
        }
    };
    let mut result = Ok(());
    if sleep_watching(Duration::from_millis(case.warmup_ms)) {
        window.open(system);
        result = control
            .send(&Control::Measure)
            .context("the server closed the control connection");
        if result.is_ok() {
            sleep_watching(Duration::from_millis(case.duration_ms));
        }
    }
    let metrics = window.close(system);
    let done = control
        .send(&Control::Done)
        .context("the server closed the control connection");
    if stop.requested() {
        return Err(interrupted());
    }
    result.and(done).map(|()| metrics)
}

fn per(total: f64, count: f64) -> f64 {
    if count == 0.0 {
        f64::NAN
    } else {
        total / count
    }
}

/// Turn both sides' counts into the observation: throughput from what the receivers got
/// inside their windows, per-role CPU and counters, and the zero-copy truth.
fn build_observation(
    case: &StreamCase,
    clients: &[ThreadOutcome],
    server: &ServerReport,
    tsc_hz: Option<f64>,
) -> Observation {
    let mut obs = Observation::default();
    // Receivers' windows: a thread that saw no window (window_s 0) received nothing in it and
    // adds 0 bytes; the rate is over the mean length of the windows that were seen.
    let mean_window = |windows: Vec<f64>| -> f64 {
        let seen: Vec<f64> = windows.into_iter().filter(|w| *w > 0.0).collect();
        per(seen.iter().sum(), seen.len() as f64)
    };
    let server_window = mean_window(server.threads.iter().map(|t| t.window_s).collect());
    let recv_rate = per(server.threads.iter().map(|t| t.bytes as f64).sum(), server_window);
    let msg_rate = per(server.threads.iter().map(|t| t.messages as f64).sum(), server_window);
    let busy_clients: Vec<&ThreadOutcome> = clients.iter().filter(|c| c.tally.messages > 0).collect();
    let time_per_msg = per(
        busy_clients
            .iter()
            .map(|c| c.tally.window_s / c.tally.messages as f64)
            .sum(),
        busy_clients.len() as f64,
    );
    let window = mean_window(clients.iter().map(|c| c.tally.window_s).collect());
    let idle = |role: &str, tallies: Vec<&crate::net::control::ThreadTally>| -> Option<String> {
        let n = tallies.iter().filter(|t| t.messages == 0).count();
        (n > 0).then(|| {
            format!(
                "{n} {role} threads moved no message inside the window (starved of CPU or blocked on the other end): more threads than CPUs?"
            )
        })
    };
    if let Some(w) = idle("client", clients.iter().map(|c| &c.tally).collect()) {
        obs.warn(WarningKind::Starved, w);
    }
    if let Some(w) = idle("server", server.threads.iter().collect()) {
        obs.warn(WarningKind::Starved, w);
    }
    obs.push(Metric::tool(
        "throughput_gbps",
        Role::System,
        recv_rate * 8.0 / 1e9,
        "Gbit/s",
    ));
    obs.push(Metric::tool("messages_per_s", Role::System, msg_rate, "msg/s"));
    obs.push(Metric::tool("time_per_msg_us", Role::System, time_per_msg * 1e6, "us"));
    obs.push(Metric::tool("window_s", Role::System, window, "s"));

    let bytes_sent: u64 = clients.iter().map(|c| c.tally.bytes).sum();
    let msgs_sent: u64 = clients.iter().map(|c| c.tally.messages).sum();
    let syscalls: u64 = clients.iter().map(|c| c.tally.syscalls).sum();
    if let Some(sample) = CounterSample::sum(clients.iter().map(|c| &c.counters)) {
        obs.metrics
            .extend(sample.metrics(Role::Client, bytes_sent, msgs_sent, "msg", tsc_hz));
        if let Some(note) = (!sample.kernel_included)
            .then_some("counters exclude the kernel (not permitted here): context switches and kernel time are missing")
        {
            obs.warn(WarningKind::CountersRestricted, note);
        }
        if let (true, Err(reason)) = (case.perf, &sample.cycles) {
            obs.warn(WarningKind::NoHardwareCounters, format!(
                "hardware counters unavailable ({reason}): cycles_per_byte is an estimate from CPU time x TSC frequency; cache misses are not measured"
            ));
        }
    }
    obs.push(Metric::tool("bytes_sent", Role::Client, bytes_sent as f64, "B"));
    obs.push(Metric::tool(
        "messages_sent",
        Role::Client,
        msgs_sent as f64,
        "messages",
    ));
    obs.push(Metric::new(
        "syscalls_per_msg",
        Role::Client,
        per(syscalls as f64, msgs_sent as f64),
        "syscalls/msg",
        Source::Tool,
    ));
    obs.metrics.extend(server.metrics.iter().cloned());

    if case.mode == CopyMode::ZeroCopy {
        let zc = clients
            .iter()
            .filter_map(|c| c.send_counts.as_ref().and_then(|s| s.zerocopy.clone()))
            .fold(ZeroCopyCounts::default(), |mut acc, z| {
                acc.completions.sends += z.completions.sends;
                acc.completions.notifications += z.completions.notifications;
                acc.completions.completed += z.completions.completed;
                acc.completions.copied += z.completions.copied;
                acc.completions.unexpected += z.completions.unexpected;
                acc.enobufs += z.enobufs;
                acc.slot_waits += z.slot_waits;
                acc
            });
        let c = &zc.completions;
        obs.push(Metric::tool("zerocopy_sends", Role::System, c.sends as f64, "calls"));
        obs.push(Metric::tool(
            "zerocopy_completions",
            Role::System,
            c.notifications as f64,
            "notifications",
        ));
        obs.push(Metric::tool(
            "zerocopy_completed_sends",
            Role::System,
            c.completed as f64,
            "calls",
        ));
        obs.push(Metric::tool(
            "zerocopy_copied_sends",
            Role::System,
            c.copied as f64,
            "calls",
        ));
        obs.push(Metric::from_result(
            "zerocopy_not_copied_fraction",
            Role::System,
            "fraction",
            Source::Tool,
            c.not_copied_fraction()
                .ok_or_else(|| "no completion arrived".to_string()),
        ));
        obs.push(Metric::from_result(
            "zerocopy_copied_fraction",
            Role::System,
            "fraction",
            Source::Tool,
            c.not_copied_fraction()
                .map(|f| 1.0 - f)
                .ok_or_else(|| "no completion arrived".to_string()),
        ));
        obs.push(Metric::tool(
            "zerocopy_enobufs",
            Role::System,
            zc.enobufs as f64,
            "errors",
        ));
        obs.push(Metric::tool(
            "zerocopy_slot_waits",
            Role::System,
            zc.slot_waits as f64,
            "waits",
        ));
        if c.unexpected > 0 {
            obs.warn(
                WarningKind::Anomaly,
                format!("{} zero-copy completion ids did not match any send call", c.unexpected),
            );
        }
        if c.completed > 0 && c.copied > 0 {
            obs.warn(WarningKind::ZeroCopyCopied, format!(
                "zero-copy: the kernel copied {:.0}% of sends: local delivery (loopback, veth) copies the pages, so MSG_ZEROCOPY saves no copy here",
                100.0 * c.copied as f64 / c.completed as f64
            ));
        }
    }
    if case.verify {
        obs.push(Metric::tool(
            "verified_messages",
            Role::Server,
            server.verified_messages as f64,
            "messages",
        ));
        obs.push(Metric::tool(
            "corrupt_messages",
            Role::Server,
            server.corrupt_messages as f64,
            "messages",
        ));
        obs.warn(
            WarningKind::VerifyCost,
            "--verify writes and checks every byte: throughput and CPU include that work",
        );
        if server.corrupt_messages > 0 {
            obs.warn(
                WarningKind::Anomaly,
                format!("{} messages arrived corrupted", server.corrupt_messages),
            );
        }
    }

    obs.placement = clients
        .iter()
        .map(|c| c.placement.clone())
        .chain(server.placement.iter().cloned())
        .collect();
    match (&case.client_cpus, &case.server_cpus) {
        (None, None) => obs.warn(
            WarningKind::Unpinned,
            "threads were not pinned: where the scheduler put them can change results several-fold; use --client-cpus and --server-cpus",
        ),
        (None, Some(_)) | (Some(_), None) => obs.warn(WarningKind::Unpinned, "only one side was pinned; the other ran where the scheduler put it"),
        _ => {}
    }
    let moved = obs
        .placement
        .iter()
        .filter(|p| p.migrations.is_some_and(|m| m > 0))
        .count();
    if moved > 0 {
        obs.warn(
            WarningKind::Migrated,
            format!("{moved} threads migrated between CPUs during the window"),
        );
    }
    // A remote server's warnings come as text over the control connection.
    for w in &server.warnings {
        obs.warn(WarningKind::Other, w.clone());
    }
    obs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::control::ThreadTally;
    use crate::observation::ThreadPlacement;

    fn outcome(role: Role, index: usize, bytes: u64, messages: u64, window_s: f64) -> ThreadOutcome {
        let zero = || Ok(0u64);
        ThreadOutcome {
            tally: ThreadTally {
                bytes,
                messages,
                window_s,
                syscalls: messages,
            },
            counters: CounterSample {
                cycles: Err("no hardware PMU".into()),
                instructions: Err("no hardware PMU".into()),
                cache_references: Err("no hardware PMU".into()),
                cache_misses: Err("no hardware PMU".into()),
                branch_misses: Err("no hardware PMU".into()),
                task_clock_ns: zero(),
                context_switches: zero(),
                cpu_migrations: zero(),
                page_faults: zero(),
                usage: Ok(Default::default()),
                kernel_included: true,
            },
            placement: ThreadPlacement {
                role,
                index,
                pinned: None,
                cpu_at_start: None,
                cpu_at_end: None,
                migrations: None,
            },
            send_counts: None,
            recv_counts: None,
        }
    }

    fn case() -> StreamCase {
        StreamCase {
            mode: CopyMode::TwoCopy,
            size: 1000,
            fields: 1,
            threads: 2,
            duration_ms: 1000,
            warmup_ms: 0,
            client_cpus: None,
            server_cpus: None,
            verify: false,
            endpoint: Endpoint::Loopback { port: 0 },
            perf: true,
        }
    }

    /// Seen in `iopath quick` on a loaded 2-CPU machine: a server thread blocked in recv()
    /// for the whole window because its client was starved. That is an empty window, not a
    /// failed run, and the rate must not be divided by its zero length.
    #[test]
    fn a_thread_that_missed_the_window_counts_as_idle_not_as_failure() {
        let clients = vec![
            outcome(Role::Client, 0, 2_000_000, 2000, 1.0),
            outcome(Role::Client, 1, 0, 0, 0.0),
        ];
        let server = ServerReport {
            threads: vec![
                ThreadTally {
                    bytes: 2_000_000,
                    messages: 2000,
                    window_s: 1.0,
                    syscalls: 2000,
                },
                ThreadTally {
                    bytes: 0,
                    messages: 0,
                    window_s: 0.0,
                    syscalls: 0,
                },
            ],
            ..Default::default()
        };
        let obs = build_observation(&case(), &clients, &server, Some(1e9));
        assert_eq!(obs.value("throughput_gbps", Role::System), Some(0.016));
        assert_eq!(obs.value("messages_per_s", Role::System), Some(2000.0));
        assert_eq!(obs.value("time_per_msg_us", Role::System), Some(500.0));
        assert!(obs
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::Starved && w.text.starts_with("1 server threads moved no message")));
        assert!(obs
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::Starved && w.text.starts_with("1 client threads moved no message")));
    }
}
