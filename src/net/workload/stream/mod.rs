//! The stream workload: client threads send messages of separately allocated fields to server
//! threads over TCP, one connection each, in one copy mode; both ends count CPU time,
//! counters and system calls inside the same measured window.
//!
//! The client drives the session over a control connection (see net/control.rs), so the
//! server can live in this process (loopback) or be a remote `iopath net serve`.

mod server;
pub(crate) mod thread;

pub use server::SERVED;
pub(crate) use thread::StartGate;

use crate::case::{CopyMode, Endpoint, RxMode, StreamCase};
use crate::measure::clock;
use crate::measure::counters::{kernel_policy, CounterSample};
use crate::measure::window::{SystemProbes, Window};
use crate::net::alias;
use crate::net::control::{encode_data_header, Control, ControlChannel, ServerReport, ThreadTally, PROTOCOL_VERSION};
use crate::net::mode::{self, ZeroCopyCounts};
use crate::net::topology::Topology;
use crate::net::workload::common::{
    copied_fraction, drive_phases, push_completion_counts, relay_server_warnings, warn_placement,
    warn_unexpected_completions,
};
use crate::observation::{Metric, Observation, Role, Source, Unsupported, WarningKind};
use crate::stop::{Interrupted, Stop};
use anyhow::{anyhow, bail, Context};
use socket2::{Domain, Socket, Type};
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use thread::{End, Shared, ThreadOutcome, ThreadPlan};

/// How long the client waits for the server's report after the window closed.
const REPORT_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long threads may take to become ready (pin, open counters) before the run is abandoned.
pub(crate) const START_PATIENCE: Duration = Duration::from_secs(30);

/// TCP_MAXSEG for zerocopy receive on loopback and in a namespace: 4096 bytes of payload plus
/// the 12 bytes of the timestamp option, so every segment carries exactly one page.
pub const ZEROCOPY_RX_MAXSEG: i32 = 4108;

/// The MSS a case's connections are clamped to, if any: only zerocopy receive on loopback or a
/// namespace's loopback (a veth takes its MTU, mtu=4148; a remote path is what it is).
fn clamped_mss(case: &StreamCase) -> Option<i32> {
    let local = matches!(case.endpoint, Endpoint::Loopback { .. } | Endpoint::Netns { .. });
    (case.rx_mode == RxMode::Zerocopy && local).then_some(ZEROCOPY_RX_MAXSEG)
}

/// The longest window or warm-up a case may ask for.
const MAX_PHASE_MS: u64 = 24 * 3600 * 1000;

/// Memory the buffers of a case take on one end (messages, serialisation buffers, the
/// zero-copy ring), for refusing cases the machine cannot hold before allocating anything.
pub fn buffer_bytes(case: &StreamCase, role: Role) -> u64 {
    let per_thread = match role {
        Role::Client => sender_bytes(case.mode, case.size, case.verify, &send_options(case)),
        // The fields plus a contiguous wire buffer or a verify copy.
        _ => case.size.saturating_mul(2),
    };
    per_thread.saturating_mul(case.threads as u64)
}

/// Memory one sender of `size`-byte messages in `mode` holds (shared with rr's estimate).
pub(crate) fn sender_bytes(mode: CopyMode, size: u64, verify: bool, options: &mode::SendOptions) -> u64 {
    let slots = match mode {
        CopyMode::ZeroCopy => mode::zero_copy_ring_slots(size as usize, options.zc_ring) as u64,
        // The ring of message slots (uring-zc: the zero-copy ring).
        CopyMode::Uring | CopyMode::UringZc => {
            mode::uring_ring_slots(size as usize, mode == CopyMode::UringZc, options) as u64
        }
        // A ring with no completion notification (one message without --verify): in user
        // memory (splice) or in a memfd's page cache (sendfile).
        CopyMode::Splice | CopyMode::Sendfile => mode::unnotified_ring_slots(size as usize, verify) as u64,
        // The fields plus a contiguous wire buffer (two-copy) or a verify copy.
        _ => 2,
    };
    size.saturating_mul(slots)
}

/// The case's options for its senders.
fn send_options(case: &StreamCase) -> mode::SendOptions {
    mode::SendOptions {
        zc_ring: case.zc_ring,
        fixed_buffers: case.fixed_buffers,
        unbatched: false,
        align: case.align,
    }
}

/// One sender per client thread; a mode the kernel refuses is `Unsupported`.
fn make_senders(case: &StreamCase) -> anyhow::Result<Vec<Box<dyn mode::Sender>>> {
    let options = send_options(case);
    (0..case.threads)
        .map(|_| {
            mode::sender_with(case.mode, case.size as usize, case.fields, case.verify, &options)
                .map_err(|e| sender_error(case.mode, e))
        })
        .collect()
}

/// A sender's set-up error as the run reports it: a refusal the sender already typed (its
/// own reason), one the errno says, or a plain failure.
fn sender_error(mode: CopyMode, e: std::io::Error) -> anyhow::Error {
    use crate::observation::Unsupported;
    if let Some(unsupported) = e.get_ref().and_then(|inner| inner.downcast_ref::<Unsupported>()) {
        return anyhow::Error::new(unsupported.clone());
    }
    let what = format!("the {mode} send mode");
    match Unsupported::refused(&what, &e) {
        Some(unsupported) => anyhow::Error::new(unsupported),
        None => anyhow!("{what} could not be set up: {e}"),
    }
}

/// Whether a case can run: limits on every parameter, and buffers that fit in half of the
/// memory available (`sys::procfs::memory_headroom`: MemAvailable lowered by the memory
/// cgroup's room; None skips that check). Used by the
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
    if case.zc_ring == Some(0) {
        return Err("--zc-ring must be at least 1 byte (up to one message means one message)".into());
    }
    if case.fixed_buffers {
        if case.mode != CopyMode::UringZc {
            return Err("registered (fixed) buffers are for uring-zc only".into());
        }
        let ring = buffer_bytes(case, Role::Client) / case.threads as u64;
        if ring > crate::sys::uring_send::MAX_FIXED_BUFFER as u64 {
            return Err(format!(
                "{} with --fixed-buffers: its ring of {} is more than the 1 GiB one registered buffer may hold (use a smaller --zc-ring)",
                case.label(),
                crate::format::format_bytes(ring)
            ));
        }
    }
    if case.duration_ms == 0 || case.duration_ms > MAX_PHASE_MS || case.warmup_ms > MAX_PHASE_MS {
        return Err("duration must be between 1 ms and 24 h, warm-up at most 24 h".into());
    }
    if case.verify && case.rx_mode == RxMode::Trunc {
        return Err(
            "--verify with --rx-mode trunc: the kernel discards the bytes, so there is nothing to check".into(),
        );
    }
    let need = buffer_bytes(case, role);
    if let Some(available) = mem_available {
        if need > available / 2 {
            return Err(format!(
                "{} needs about {} of buffers on the {role} side, more than half of the {} available (MemAvailable and the memory cgroup's limit)",
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
/// `Err(Interrupted)`. With `prove_copies`, the alias probe runs first, outside the window.
pub fn run(case: &StreamCase, stop: Stop) -> anyhow::Result<Observation> {
    let proof = case.prove_copies.then(|| prove_copies(case));
    if stop.requested() {
        return Err(interrupted());
    }
    let mut obs = match run_measured(case, stop) {
        Ok(obs) => obs,
        // The kernel refuses what the case needs (a send mode, TCP receive zero-copy): a
        // result, not a failure, whose figures say why they are missing.
        Err(e) => match e.downcast_ref::<Unsupported>() {
            Some(refusal) => unavailable_observation(case, refusal),
            None => return Err(e),
        },
    };
    if let Some(proof) = proof {
        publish_proof(&mut obs, case.mode, proof);
    }
    Ok(obs)
}

/// The alias probe's tally for the case's send mode (net/alias.rs), or why there is none.
fn prove_copies(case: &StreamCase) -> Result<alias::ByteTally, String> {
    if matches!(case.endpoint, crate::case::Endpoint::Remote { .. }) {
        return Err(
            "the alias probe needs to see the receiver, and over --connect it is remote (run without --connect)".into(),
        );
    }
    alias::probe(case.mode, case.size, case.fields).map_err(|e| format!("the alias probe failed: {e}"))
}

/// The probe's metrics (source tool: iopath observed what the receiver got) and, when the
/// kernel sent bytes by reference or corrupted them, a warning of that kind.
pub(crate) fn publish_proof(
    obs: &mut Observation,
    mode: impl std::fmt::Display,
    proof: Result<alias::ByteTally, String>,
) {
    let fraction = proof.clone().and_then(|t| {
        t.by_reference_fraction()
            .ok_or_else(|| "the alias probe received no bytes".to_string())
    });
    obs.push(Metric::from_result(
        "alias_by_reference_fraction",
        Role::System,
        "fraction",
        Source::Tool,
        fraction.clone(),
    ));
    let bytes = |count: fn(&alias::ByteTally) -> u64| proof.as_ref().map(|t| count(t) as f64).map_err(Clone::clone);
    obs.push(Metric::from_result(
        "alias_probed_bytes",
        Role::System,
        "B",
        Source::Tool,
        bytes(|t| t.total()),
    ));
    obs.push(Metric::from_result(
        "alias_corrupt_bytes",
        Role::System,
        "B",
        Source::Tool,
        bytes(|t| t.neither),
    ));
    let Ok(tally) = proof else { return };
    if tally.neither > 0 {
        obs.warn(
            WarningKind::Anomaly,
            format!(
                "alias probe: {} of {} bytes arrived as neither the sent nor the rewritten pattern",
                tally.neither,
                tally.total()
            ),
        );
    }
    if let Ok(f) = fraction {
        let verdict = alias::Verdict::from_fraction(f);
        if verdict != alias::Verdict::Copied {
            obs.warn(
                WarningKind::ByReference,
                format!(
                    "alias probe: {mode} {verdict}: the kernel read {:.0}% of the sender's bytes after the send call returned",
                    f * 100.0
                ),
            );
        }
    }
}

/// The observation of a case the kernel cannot run: its headline figures unavailable with the
/// kernel's reason, and a warning saying the same.
fn unavailable_observation(case: &StreamCase, refusal: &Unsupported) -> Observation {
    let reason = refusal.to_string();
    let mut obs = Observation::default();
    obs.warn(WarningKind::Unsupported, reason.clone());
    let mut figures = vec![
        ("throughput_gbps", Role::System, "Gbit/s"),
        ("messages_per_s", Role::System, "msg/s"),
        ("time_per_msg_us", Role::System, "us"),
    ];
    if case.rx_mode == RxMode::Zerocopy {
        figures.push(("rx_mapped_fraction", Role::Server, "fraction"));
    }
    for (name, role, unit) in figures {
        obs.push(Metric::unavailable(name, role, unit, reason.clone()));
    }
    obs
}

/// The measured run: topology, server, client, window.
fn run_measured(case: &StreamCase, stop: Stop) -> anyhow::Result<Observation> {
    // Calibrate before any window opens so it never disturbs one.
    let tsc_hz = clock::tsc_hz();
    let topology = Topology::from(&case.endpoint).establish()?;
    if let Some(addr) = topology.remote_addr()? {
        return topology.on_client_side(|| run_client(case, addr, tsc_hz, stop, None));
    }
    let listener = topology.bind(case.endpoint.port())?;
    if let Some(mss) = clamped_mss(case) {
        // The listener's MSS clamp is what its SYN-ACK advertises to each new connection.
        crate::sys::rx_zerocopy::set_maxseg(listener.as_raw_fd(), mss).context("setting TCP_MAXSEG on the listener")?;
    }
    let addr = listener.local_addr()?;
    let server_stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let server = topology
            .spawn_server(scope, "iopath-server", || {
                crate::net::session::serve_session(&listener, Some(&server_stop), &[SERVED])
            })
            .context("could not start the server thread")?;
        let tcp_ns = topology.server_namespace();
        let result = topology.on_client_side(|| run_client(case, addr, tsc_hz, stop, tcp_ns));
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
pub(crate) fn connect(addr: SocketAddr, stop: Stop) -> anyhow::Result<TcpStream> {
    connect_with_mss(addr, stop, None)
}

/// [`connect`], with TCP_MAXSEG `mss` set before connecting so it clamps the MSS both ends use.
fn connect_with_mss(addr: SocketAddr, stop: Stop, mss: Option<i32>) -> anyhow::Result<TcpStream> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let failed = |e: std::io::Error| anyhow::Error::new(e).context(format!("could not connect to {addr}"));
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).map_err(failed)?;
    if let Some(mss) = mss {
        crate::sys::rx_zerocopy::set_maxseg(socket.as_raw_fd(), mss).map_err(failed)?;
    }
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
/// `tcp_ns`: the namespace whose TCP counters count this run's connections (None: ours).
fn run_client(
    case: &StreamCase,
    addr: SocketAddr,
    tsc_hz: Option<f64>,
    stop: Stop,
    tcp_ns: Option<&crate::sys::netns::NetNs>,
) -> anyhow::Result<Observation> {
    // Before talking to the server: a mode the kernel refuses ends the case here.
    let mut senders = make_senders(case)?.into_iter();
    let mut control = ControlChannel::new(connect(addr, stop)?)?;
    control.stream().set_nodelay(true).ok();
    control.set_read_timeout(Some(Duration::from_secs(10)))?;
    let hello = Control::Hello {
        version: PROTOCOL_VERSION,
        case: case.clone(),
    };
    let psk = crate::net::auth::client_key();
    let token = crate::net::session::handshake::client(&mut control, &hello, psk, Duration::from_secs(10), stop)?.token;
    let mut data = Vec::with_capacity(case.threads);
    for i in 0..case.threads {
        let mut s = connect_with_mss(addr, stop, clamped_mss(case))?;
        s.write_all(&encode_data_header(token, i as u32))?;
        s.set_write_timeout(Some(crate::net::session::DATA_IDLE_TIMEOUT))?;
        data.push(s);
    }

    let policy = kernel_policy();
    let window = Window::new();
    let mut system = SystemProbes::default();
    crate::measure::system::push_network_probes(&mut system, tcp_ns);
    crate::measure::memtraffic::push_memory_traffic_probe(&mut system);
    let failed = AtomicBool::new(false);
    let ready = StartGate::default();

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
                let end = End::Send(senders.next().expect("one sender per thread"));
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
            drive_phases(
                Duration::from_millis(case.warmup_ms),
                Duration::from_millis(case.duration_ms),
                &window,
                &mut system,
                &failed,
                stop,
                &mut control,
            )
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
    if !stop.requested() && (window_result.is_err() || first_error.is_some()) {
        // The server's account, if any, usually says more (it failed first, or the kernel
        // refused its receive mode once the connections existed).
        control.set_read_timeout(Some(Duration::from_secs(2))).ok();
        match control.recv() {
            Ok(Control::Unavailable { what, reason }) => return Err(Unsupported::new(what, reason).into()),
            Ok(Control::Failed { error }) => {
                let ours = match (&first_error, &window_result) {
                    (Some(e), _) => e.to_string(),
                    (None, Err(e)) => format!("{e:#}"),
                    (None, Ok(_)) => String::new(),
                };
                bail!("the run failed: {ours}; the server said: {error}");
            }
            _ => {}
        }
    }
    let mut system_metrics = window_result?;
    // The senders' view of each connection as the window closed.
    let fds: Vec<_> = data.iter().map(|s| s.as_raw_fd()).collect();
    system_metrics.extend(crate::measure::system::tcp_info_metrics(&fds, Role::Client));
    if stop.requested() {
        return Err(interrupted());
    }
    if let Some(e) = first_error {
        bail!("the run failed: {e}");
    }
    let report = match recv_watching(&mut control, REPORT_TIMEOUT, &|| stop.requested()) {
        Err(e) if e.is::<Interrupted>() => return Err(e),
        other => match other.context("waiting for the server's report")? {
            Control::Report(report) => *report,
            Control::Failed { error } => bail!("the server failed: {error}"),
            Control::Unavailable { what, reason } => return Err(Unsupported::new(what, reason).into()),
            other => bail!("unexpected message from the server: {other:?}"),
        },
    };
    let mut obs = build_observation(case, &threads, &report, tsc_hz);
    if let Some(w) = crate::measure::system::contended(&system_metrics) {
        obs.warn(WarningKind::Contended, w);
    }
    obs.metrics.extend(system_metrics);
    // DRAM traffic per payload byte: over what the receivers got inside their windows (the
    // bytes throughput counts).
    let payload = mean_window(&report.threads)
        .map(|_| report.threads.iter().map(|t| t.bytes).sum::<u64>() as f64)
        .ok_or_else(|| NO_SERVER_WINDOW.to_string());
    let ratio = crate::measure::memtraffic::per_payload_byte(&obs.metrics, payload);
    obs.push(ratio);
    Ok(obs)
}

fn per(total: f64, count: f64) -> f64 {
    if count == 0.0 {
        f64::NAN
    } else {
        total / count
    }
}

/// Why the server side's rates and counters are missing when none of its threads measured.
pub(crate) const NO_SERVER_WINDOW: &str =
    "no server thread saw the measured window (each was blocked in recv() from before it opened until after it closed)";
/// Why the client side's figures are missing when none of its threads measured.
const NO_CLIENT_WINDOW: &str = "no client thread saw the measured window";

/// The mean length of the windows of the threads that had one; None when no thread had one.
/// A thread without a window measured nothing and is left out (counting it as a window of
/// length ~0 would halve the mean and double every rate over it).
fn mean_window<'a>(tallies: impl IntoIterator<Item = &'a ThreadTally>) -> Option<f64> {
    let seen: Vec<f64> = tallies.into_iter().filter_map(|t| t.window_s).collect();
    (!seen.is_empty()).then(|| seen.iter().sum::<f64>() / seen.len() as f64)
}

/// The sum of the counters of the threads that measured, or every counter unavailable with
/// `why` when none did (a thread without a window has no sample, not a sample of zeros).
pub(crate) fn measured_counters<'a>(
    samples: impl IntoIterator<Item = &'a Option<CounterSample>>,
    why: &str,
) -> CounterSample {
    CounterSample::sum(samples.into_iter().flatten()).unwrap_or_else(|| CounterSample::missing(why))
}

/// A metric from the peer as it must read: no value means unavailable, whatever the peer said.
pub(crate) fn checked(metric: &Metric) -> Metric {
    match (&metric.value, &metric.source) {
        (None, Source::Unavailable(_)) => metric.clone(),
        (None, _) => Metric::unavailable(&metric.name, metric.role, &metric.unit, "the server sent no value"),
        (Some(v), source) => Metric::new(&metric.name, metric.role, *v, &metric.unit, source.clone()),
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
    // Rates over the receivers that measured: what they received inside their windows over
    // the mean length of those windows (docs/methodology.md).
    let server_window = mean_window(&server.threads).ok_or_else(|| NO_SERVER_WINDOW.to_string());
    let received: u64 = server.threads.iter().map(|t| t.bytes).sum();
    let received_msgs: u64 = server.threads.iter().map(|t| t.messages).sum();
    let busy_clients: Vec<(f64, u64)> = clients
        .iter()
        .filter_map(|c| c.tally.window_s.map(|w| (w, c.tally.messages)))
        .filter(|(_, m)| *m > 0)
        .collect();
    let time_per_msg = if busy_clients.is_empty() {
        Err("no client thread sent a message inside its window".to_string())
    } else {
        Ok(busy_clients.iter().map(|(w, m)| w / *m as f64).sum::<f64>() / busy_clients.len() as f64)
    };
    let window = mean_window(clients.iter().map(|c| &c.tally)).ok_or_else(|| NO_CLIENT_WINDOW.to_string());
    let idle = |role: &str, tallies: Vec<&ThreadTally>| -> Option<String> {
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
    let tool = |name: &str, unit: &str, value: Result<f64, String>| {
        Metric::from_result(name, Role::System, unit, Source::Tool, value)
    };
    obs.push(tool(
        "throughput_gbps",
        "Gbit/s",
        server_window.clone().map(|w| received as f64 * 8.0 / 1e9 / w),
    ));
    obs.push(tool(
        "messages_per_s",
        "msg/s",
        server_window.map(|w| received_msgs as f64 / w),
    ));
    obs.push(tool("time_per_msg_us", "us", time_per_msg.map(|t| t * 1e6)));
    obs.push(tool("window_s", "s", window));

    let bytes_sent: u64 = clients.iter().map(|c| c.tally.bytes).sum();
    let msgs_sent: u64 = clients.iter().map(|c| c.tally.messages).sum();
    let syscalls: u64 = clients.iter().map(|c| c.tally.syscalls).sum();
    if let Some(sample) = CounterSample::sum(clients.iter().filter_map(|c| c.counters.as_ref())) {
        if let Some(note) = (!sample.kernel_included)
            .then_some("counters exclude the kernel (not permitted here): context switches and migrations are unavailable, kernel time is not counted")
        {
            obs.warn(WarningKind::CountersRestricted, note);
        }
        if let (true, Err(reason)) = (case.perf, &sample.cycles) {
            obs.warn(WarningKind::NoHardwareCounters, format!(
                "hardware counters unavailable ({reason}): cycles_per_byte is an estimate from CPU time x TSC frequency; cache misses are not measured"
            ));
        }
    }
    let sample = measured_counters(clients.iter().map(|c| &c.counters), NO_CLIENT_WINDOW);
    obs.metrics
        .extend(sample.metrics(Role::Client, bytes_sent, msgs_sent, "msg", tsc_hz));
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
    obs.metrics.extend(server.metrics.iter().map(checked));

    if case.mode.is_zero_copy() {
        let zc = clients
            .iter()
            .filter_map(|c| c.send_counts.as_ref().and_then(|s| s.zerocopy.clone()))
            .fold(ZeroCopyCounts::default(), |mut acc, z| {
                acc.completions.add(&z.completions);
                acc.enobufs += z.enobufs;
                acc.slot_waits += z.slot_waits;
                acc
            });
        push_zero_copy_metrics(&mut obs, case.mode, &zc);
    }
    let uring = clients
        .iter()
        .filter_map(|c| c.send_counts.as_ref().and_then(|s| s.uring.clone()))
        .reduce(|mut acc, u| {
            acc.enters += u.enters;
            acc.sqes += u.sqes;
            acc.cqes += u.cqes;
            acc.messages += u.messages;
            acc.notifications += u.notifications;
            acc.copied += u.copied;
            acc.zero_copied += u.zero_copied;
            acc.failed += u.failed;
            acc.unexpected += u.unexpected;
            acc
        });
    if let Some(u) = uring {
        push_uring_metrics(&mut obs, case.mode, &u);
    }
    if case.verify {
        crate::net::workload::common::push_verify_counts(
            &mut obs,
            Role::Server,
            server.verified_messages,
            server.corrupt_messages,
        );
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
    warn_placement(&mut obs, case.client_cpus.is_some(), case.server_cpus.is_some());
    relay_server_warnings(&mut obs, &server.warnings);
    obs
}

/// The zero-copy truth of zero-copy (MSG_ZEROCOPY error-queue completions) and uring-zc
/// (SENDMSG_ZC notifications): how many sends completed and how many the kernel copied.
fn push_zero_copy_metrics(obs: &mut Observation, mode: CopyMode, zc: &ZeroCopyCounts) {
    let c = &zc.completions;
    push_completion_counts(obs, c);
    obs.push(Metric::from_result(
        "zerocopy_not_copied_fraction",
        Role::System,
        "fraction",
        Source::Tool,
        c.not_copied_fraction()
            .ok_or_else(|| "no completion arrived".to_string()),
    ));
    obs.push(copied_fraction(c));
    if mode == CopyMode::ZeroCopy {
        obs.push(Metric::tool(
            "zerocopy_enobufs",
            Role::System,
            zc.enobufs as f64,
            "errors",
        ));
    }
    obs.push(Metric::tool(
        "zerocopy_slot_waits",
        Role::System,
        zc.slot_waits as f64,
        "waits",
    ));
    warn_unexpected_completions(obs, c);
    if c.completed > 0 && c.copied > 0 {
        let evidence = match mode {
            CopyMode::UringZc => "its io_uring notifications carry IORING_NOTIF_USAGE_ZC_COPIED",
            _ => "its completions carry SO_EE_CODE_ZEROCOPY_COPIED",
        };
        obs.warn(WarningKind::ZeroCopyCopied, format!(
            "{mode}: the kernel copied {:.0}% of sends ({evidence}): local delivery (loopback, veth) copies the pages, so zero copy saves no copy here",
            100.0 * c.copied as f64 / c.completed as f64
        ));
    }
}

/// How the io_uring modes drove the kernel: submissions (io_uring_enter), SQEs and CQEs per
/// message, counted by the sender over its whole connection.
fn push_uring_metrics(obs: &mut Observation, mode: CopyMode, u: &mode::UringCounts) {
    let messages = u.messages as f64;
    let per_msg = |name: &str, unit: &str, count: u64| {
        Metric::from_result(
            name,
            Role::Client,
            unit,
            Source::Tool,
            (u.messages > 0)
                .then(|| count as f64 / messages)
                .ok_or_else(|| "no io_uring send completed".to_string()),
        )
    };
    obs.push(per_msg("uring_submissions_per_msg", "enters/msg", u.enters));
    obs.push(per_msg("uring_sqes_per_msg", "sqes/msg", u.sqes));
    obs.push(per_msg("uring_completions_per_msg", "cqes/msg", u.cqes));
    if mode == CopyMode::UringZc {
        obs.push(Metric::tool(
            "uring_notifications",
            Role::Client,
            u.notifications as f64,
            "notifications",
        ));
    }
    if u.unexpected > 0 {
        obs.warn(
            WarningKind::Anomaly,
            format!("{} io_uring CQEs matched no send in flight", u.unexpected),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Endpoint;
    use crate::net::control::ThreadTally;
    use crate::observation::ThreadPlacement;
    use std::net::TcpListener;

    fn outcome(role: Role, index: usize, bytes: u64, messages: u64, window_s: f64) -> ThreadOutcome {
        let zero = || Ok(0u64);
        ThreadOutcome {
            tally: ThreadTally {
                bytes,
                messages,
                window_s: Some(window_s),
                syscalls: messages,
            },
            counters: Some(CounterSample {
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
            }),
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
            recv_window: None,
        }
    }

    fn case() -> StreamCase {
        StreamCase {
            mode: CopyMode::TwoCopy,
            rx_mode: crate::case::RxMode::Copy,
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
            prove_copies: false,
            zc_ring: None,
            fixed_buffers: false,
            align: crate::case::Align::Page,
        }
    }

    /// Run the real thread loop (`thread::run`) for one `role` thread whose first look at the
    /// window finds it closed: a receiver blocked in recv() for the whole window, or a sender
    /// that starts too late. Its peer sends nothing and closes.
    fn thread_that_missed_the_window(role: Role) -> ThreadOutcome {
        let window = Window::new();
        let mut system = SystemProbes::default();
        window.open(&mut system);
        window.close(&mut system);
        let ready = StartGate::default();
        let policy = kernel_policy();
        let shared = Shared {
            window: &window,
            ready: &ready,
            policy: &policy,
        };
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (conn, _) = listener.accept().unwrap();
        let c = case();
        let plan = ThreadPlan::new(&c, role, 1, conn.as_raw_fd(), &shared);
        let end = match role {
            Role::Client => End::Send(mode::sender(c.mode, c.size as usize, c.fields, false).unwrap()),
            _ => End::Recv(mode::receiver(c.rx_mode, c.size as usize, c.fields, false, c.align).unwrap()),
        };
        std::thread::scope(|s| {
            let h = s.spawn(|| thread::run(plan, end));
            assert!(ready.open_when(1, Duration::from_secs(10)));
            peer.shutdown(Shutdown::Write).unwrap();
            h.join().unwrap().expect("a missed window is not an error")
        })
    }

    /// Seen in `iopath quick` on a loaded 2-CPU machine: a server thread blocked in recv()
    /// for the whole window because its client was starved. It used to report a ~1e-7 s
    /// window of its own, which halved the mean window and doubled the throughput. Its
    /// outcome has no window now, and the rates are over the threads that measured.
    #[test]
    fn a_thread_that_missed_the_window_has_none_and_does_not_inflate_the_rates() {
        let idle_server = thread_that_missed_the_window(Role::Server);
        assert_eq!(idle_server.tally.window_s, None, "{:?}", idle_server.tally);
        assert_eq!(idle_server.tally.messages, 0);
        assert!(idle_server.counters.is_none());
        let idle_client = thread_that_missed_the_window(Role::Client);
        assert_eq!(idle_client.tally.window_s, None, "{:?}", idle_client.tally);
        assert!(idle_client.counters.is_none());

        let clients = vec![outcome(Role::Client, 0, 2_000_000, 2000, 1.0), idle_client];
        let server = ServerReport {
            threads: vec![
                outcome(Role::Server, 0, 2_000_000, 2000, 1.0).tally,
                idle_server.tally.clone(),
            ],
            ..Default::default()
        };
        let obs = build_observation(&case(), &clients, &server, Some(1e9));
        assert_eq!(obs.value("throughput_gbps", Role::System), Some(0.016));
        assert_eq!(obs.value("messages_per_s", Role::System), Some(2000.0));
        assert_eq!(obs.value("time_per_msg_us", Role::System), Some(500.0));
        assert_eq!(obs.value("window_s", Role::System), Some(1.0));
        // The idle client's counters are not summed in as zeros, nor do they hide the busy one's.
        assert_eq!(
            obs.get("context_switches", Role::Client).unwrap().source,
            Source::Software
        );
        assert!(obs
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::Starved && w.text.starts_with("1 server threads moved no message")));
        assert!(obs
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::Starved && w.text.starts_with("1 client threads moved no message")));
    }

    /// A sender's refusal reaches the user as `... unavailable: <reason>`: the typed
    /// Unsupported a ring puts inside its io::Error keeps its own reason, and a bare EPERM
    /// from a constructor becomes one too; other errors stay failures.
    #[test]
    fn a_refused_sender_is_unavailable_with_its_reason() {
        use crate::observation::Unsupported;
        let typed = std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            Unsupported::new(
                "the uring-zc send mode",
                "io_uring is switched off for every process (kernel.io_uring_disabled = 2)",
            ),
        );
        let err = sender_error(CopyMode::UringZc, typed);
        let refused = err.downcast_ref::<Unsupported>().expect("typed");
        assert_eq!(
            refused.to_string(),
            "the uring-zc send mode unavailable: io_uring is switched off for every process (kernel.io_uring_disabled = 2)"
        );
        let eperm = sender_error(CopyMode::Uring, std::io::Error::from_raw_os_error(libc::EPERM));
        assert!(
            eperm
                .to_string()
                .starts_with("the uring send mode unavailable: not permitted"),
            "{eperm}"
        );
        let other = sender_error(CopyMode::Uring, std::io::Error::from_raw_os_error(libc::EMFILE));
        assert!(other.downcast_ref::<Unsupported>().is_none());
        assert!(other.to_string().contains("could not be set up"), "{other}");
    }

    /// When no receiver measured there is no rate: unavailable with the reason, not 0 or NaN.
    #[test]
    fn no_receiver_window_means_no_rate_and_no_counters() {
        let clients = vec![outcome(Role::Client, 0, 2_000_000, 2000, 1.0)];
        let server = ServerReport {
            threads: vec![ThreadTally::default()],
            metrics: vec![Metric {
                name: "cpu_user_s".into(),
                role: Role::Server,
                value: None,
                unit: "s".into(),
                source: Source::Rusage,
            }],
            ..Default::default()
        };
        let obs = build_observation(&case(), &clients, &server, Some(1e9));
        for name in ["throughput_gbps", "messages_per_s"] {
            let m = obs.get(name, Role::System).unwrap();
            assert_eq!(m.value, None);
            assert_eq!(m.source, Source::Unavailable(NO_SERVER_WINDOW.into()), "{name}");
        }
        // A peer's metric without a value reads unavailable, never `null` beside a source.
        let m = obs.get("cpu_user_s", Role::Server).unwrap();
        assert_eq!(m.source, Source::Unavailable("the server sent no value".into()));
        let counters = measured_counters(&[None], NO_SERVER_WINDOW);
        for m in counters.metrics(Role::Server, 0, 0, "msg", Some(1e9)) {
            assert_eq!(m.value, None, "{m:?}");
            assert_eq!(m.source, Source::Unavailable(NO_SERVER_WINDOW.into()), "{m:?}");
        }
    }
}
