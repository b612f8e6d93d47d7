//! The record store workload (`iopath net records`): a server holds a table of fixed-size
//! records, far larger than the last-level cache by default, and answers each request naming N
//! record ids with those N records, sent copy-out (memcpy into a transmit buffer, then send),
//! gather (sendmsg with one iovec per record, in place) or zero copy (the same with
//! MSG_ZEROCOPY). Client threads keep `outstanding` requests in flight each; both ends count
//! CPU, counters and system calls inside one measured window, and the system probes (TCP
//! counters, the memory-traffic counters) cover it.
//!
//! Both ends live in this process (loopback, or namespaces of a topology); the table is
//! allocated and filled before any connection exists and is never written again, so a record
//! may be in flight in several zero-copy sends at once. Every server thread drains its
//! zero-copy completions before it returns, and the table outlives every thread.

mod alias;
mod client;
mod remote;
mod server;
mod table;

pub use client::pick_range;
pub use remote::SERVED;
pub use table::{check_record, fill_record};

use crate::case::{RecordsCase, RecordsMode};
use crate::measure::clock;
use crate::measure::counters::{kernel_policy, CounterSample, KernelPolicy, ThreadCounters};
use crate::measure::histogram::LatencyHistogram;
use crate::measure::window::{thread_counters, Edge, SystemProbes, View, Window};
use crate::net::completions::CompletionCounts;
use crate::net::session::coordinator::network_probes;
use crate::net::session::observe::{
    copied_fraction, measured_counters, push_completion_counts, push_latency, warn_unexpected_completions,
    warn_unpinned,
};
use crate::net::session::{interrupted, StartGate, START_PATIENCE};
use crate::net::topology::Topology;
use crate::observation::names;
use crate::observation::{Metric, Observation, Role, Source, ThreadPlacement, Unsupported, WarningKind};
use crate::stop::Stop;
use crate::sys::affinity;
use crate::sys::net as sock;
use anyhow::{anyhow, bail, Context};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use table::Table;

/// A peer silent this long (a blocked send or receive) is gone: the thread fails instead of
/// waiting forever.
const IDLE_TIMEOUT: Duration = crate::net::session::DATA_IDLE_TIMEOUT;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest window or warm-up a case may ask for.
const MAX_PHASE_MS: u64 = 24 * 3600 * 1000;
pub const MAX_RECORD_SIZE: u64 = 1 << 20;
pub const MAX_RECORDS: usize = 1024;
pub const MAX_OUTSTANDING: usize = 1024;
pub const MAX_THREADS: usize = 256;
pub const MAX_TABLE_BYTES: u64 = 64 << 30;
/// Request bytes one connection may have in flight (below the smallest default receive buffer).
const MAX_REQUEST_BYTES_IN_FLIGHT: u64 = 64 << 10;

/// Memory one case takes in this process: the table, and per connection the transmit,
/// request and response buffers of both ends.
pub fn buffer_bytes(case: &RecordsCase) -> u64 {
    let per_connection = 2 * case.response_bytes() + 16 * case.records as u64 * case.outstanding as u64;
    case.table_bytes
        .saturating_add(per_connection.saturating_mul(case.net.threads as u64))
}

/// Whether a case can run: limits on every parameter, and a table that fits in half of the
/// memory available (None skips that check). Used by the CLI before anything is allocated.
pub fn check_case(case: &RecordsCase, mem_available: Option<u64>) -> Result<(), String> {
    if case.record_size < 8 || case.record_size > MAX_RECORD_SIZE {
        return Err(format!(
            "record size {} is out of range (accepted: 8 B to 1 MiB)",
            case.record_size
        ));
    }
    if case.records == 0 || case.records > MAX_RECORDS {
        return Err(format!(
            "{} records per response is out of range (accepted: 1 to {MAX_RECORDS})",
            case.records
        ));
    }
    if case.outstanding == 0 || case.outstanding > MAX_OUTSTANDING {
        return Err(format!(
            "{} outstanding requests is out of range (accepted: 1 to {MAX_OUTSTANDING})",
            case.outstanding
        ));
    }
    // The client sends all its requests before reading an answer: if they could fill the
    // server's receive buffer, both ends could block sending at once.
    let in_flight_request_bytes = case.outstanding as u64 * (8 + 8 * case.records as u64);
    if in_flight_request_bytes > MAX_REQUEST_BYTES_IN_FLIGHT {
        return Err(format!(
            "{} requests of {} records in flight are {} of requests, more than the {} a socket buffer surely holds: use fewer --outstanding or --records",
            case.outstanding,
            case.records,
            crate::format::format_bytes(in_flight_request_bytes),
            crate::format::format_bytes(MAX_REQUEST_BYTES_IN_FLIGHT)
        ));
    }
    if case.net.threads == 0 || case.net.threads > MAX_THREADS {
        return Err(format!(
            "{} threads is out of range (accepted: 1 to {MAX_THREADS})",
            case.net.threads
        ));
    }
    if case.table_bytes > MAX_TABLE_BYTES {
        return Err("tables larger than 64 GiB are not accepted".into());
    }
    if case.table_records() < case.records as u64 {
        return Err(format!(
            "a table of {} holds {} records of {}, fewer than the {} of one response: use a larger --table",
            crate::format::format_bytes(case.table_bytes),
            case.table_records(),
            crate::format::format_bytes(case.record_size),
            case.records
        ));
    }
    if case.net.duration_ms == 0 || case.net.duration_ms > MAX_PHASE_MS || case.net.warmup_ms > MAX_PHASE_MS {
        return Err("duration must be between 1 ms and 24 h, warm-up at most 24 h".into());
    }
    let need = buffer_bytes(case);
    if let Some(available) = mem_available {
        if need > available / 2 {
            return Err(format!(
                "{} needs about {} (table and buffers), more than half of the {} available (MemAvailable and the memory cgroup's limit): use a smaller --table",
                case.label(),
                crate::format::format_bytes(need),
                crate::format::format_bytes(available)
            ));
        }
    }
    Ok(())
}

/// Where counts a thread keeps itself stood at a moment (snapshotted at the window's edges).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Snapshot {
    responses: u64,
    syscalls: u64,
    user_copy: u64,
}

impl Snapshot {
    fn since(self, before: Snapshot) -> Snapshot {
        Snapshot {
            responses: self.responses - before.responses,
            syscalls: self.syscalls - before.syscalls,
            user_copy: self.user_copy - before.user_copy,
        }
    }
}

/// What a thread needs to start: where to pin, the window, the start gate.
pub(crate) struct ThreadStart<'a> {
    index: usize,
    pin: Option<usize>,
    window: &'a Window,
    ready: &'a StartGate,
    policy: &'a KernelPolicy,
    perf: bool,
}

type SideHandle<'scope> = std::io::Result<std::thread::ScopedJoinHandle<'scope, anyhow::Result<SideOutcome>>>;

/// Start client thread `start.index` on `stream`. On failure it sets `failed` and shuts the
/// connection (waking its peer); otherwise it shuts its sending side, so the server's thread
/// reads EOF after the last request and leaves.
pub(crate) fn spawn_client<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    start: ThreadStart<'env>,
    case: &'env RecordsCase,
    stream: &'env TcpStream,
    failed: &'env AtomicBool,
) -> SideHandle<'scope> {
    let i = start.index;
    std::thread::Builder::new()
        .name(format!("iopath-records-cli-{i}"))
        .spawn_scoped(scope, move || {
            let result = client::run(start, case, i, stream.as_raw_fd());
            if result.is_err() {
                failed.store(true, Ordering::SeqCst);
                stream.shutdown(Shutdown::Both).ok();
            } else {
                stream.shutdown(Shutdown::Write).ok();
            }
            result
        })
}

/// Join every thread of a case: each one's outcome, a panic or a thread that never started as
/// its error.
pub(crate) fn join_sides(handles: Vec<SideHandle<'_>>) -> Vec<anyhow::Result<SideOutcome>> {
    handles
        .into_iter()
        .map(|h| match h {
            Ok(h) => h.join().unwrap_or_else(|_| Err(anyhow!("a records thread panicked"))),
            Err(e) => Err(anyhow!("could not start a thread: {e}")),
        })
        .collect()
}

/// What one thread measured.
pub(crate) struct SideOutcome {
    role: Role,
    /// Responses sent (server) or received whole (client) inside the thread's window.
    responses: u64,
    syscalls: u64,
    /// Bytes user space copied inside the window (copy-out's memcpy into the transmit buffer).
    user_copy_bytes: u64,
    /// None when the thread never saw the window.
    window_s: Option<f64>,
    counters: Option<CounterSample>,
    placement: ThreadPlacement,
    /// Client: the latency of every response received inside the window.
    latency: LatencyHistogram,
    verified_records: u64,
    corrupt_records: u64,
    /// Server, zero copy: the completions and the ENOBUFS retries.
    zerocopy: Option<(CompletionCounts, u64)>,
}

/// One measured thread's bookkeeping around the window: its view (probe), and the counts it
/// keeps itself snapshotted at the same edges.
pub(crate) struct Side<'a> {
    view: View<'a, ThreadCounters>,
    role: Role,
    index: usize,
    pin: Option<usize>,
    before: Snapshot,
    cpu_at_start: Option<usize>,
    counted: Option<Snapshot>,
}

impl<'a> Side<'a> {
    /// Pin, open the counters, and wait at the start gate with every other thread of the case.
    fn begin(start: ThreadStart<'a>, role: Role) -> anyhow::Result<Side<'a>> {
        let pinned = start.pin.map(|cpu| affinity::pin_current_thread(&[cpu]).map(|_| cpu));
        let view = View::new(start.window, thread_counters(start.perf, start.policy));
        if !start.ready.arrive_and_wait() {
            bail!("the start was abandoned: another thread of the run failed to start");
        }
        if let Some(Err(e)) = pinned {
            bail!("could not pin to CPU {}: {e}", start.pin.unwrap_or(0));
        }
        Ok(Side {
            view,
            role,
            index: start.index,
            pin: start.pin,
            before: Snapshot::default(),
            cpu_at_start: None,
            counted: None,
        })
    }

    /// Look at the window once; snapshot `now` at its edges.
    #[inline]
    fn tick(&mut self, now: Snapshot) {
        match self.view.tick() {
            Edge::Opened => {
                self.before = now;
                self.cpu_at_start = affinity::current_cpu();
            }
            Edge::Closed => self.counted = Some(now.since(self.before)),
            Edge::None => {}
        }
    }

    fn closed(&self) -> bool {
        self.view.closed()
    }

    fn is_open(&self) -> bool {
        self.view.is_open()
    }

    /// The thread is done: a window still open ends now (its peer left first).
    fn end(mut self, now: Snapshot) -> SideOutcome {
        if self.view.is_open() {
            self.view.finish();
            self.counted = Some(now.since(self.before));
        }
        let cpu_at_end = affinity::current_cpu();
        let measured = self.view.take();
        // A thread that never saw the window measured nothing: no window, no counts.
        let (measured, counted) = match (measured, self.counted) {
            (Some(m), Some(c)) => (Some(m), c),
            _ => (None, Snapshot::default()),
        };
        SideOutcome {
            role: self.role,
            responses: counted.responses,
            syscalls: counted.syscalls,
            user_copy_bytes: counted.user_copy,
            window_s: measured.as_ref().map(|m| m.elapsed.as_secs_f64()),
            placement: ThreadPlacement {
                role: self.role,
                index: self.index,
                pinned: self.pin.map(|c| vec![c]),
                cpu_at_start: self.cpu_at_start.or(cpu_at_end),
                cpu_at_end,
                migrations: measured
                    .as_ref()
                    .and_then(|m| m.sample.cpu_migrations.as_ref().ok().copied()),
            },
            counters: measured.map(|m| m.sample),
            latency: LatencyHistogram::new(),
            verified_records: 0,
            corrupt_records: 0,
            zerocopy: None,
        }
    }
}

/// Send all of `buf`, continuing after partial sends.
pub(crate) fn send_all(fd: RawFd, mut buf: &[u8], syscalls: &mut u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        *syscalls += 1;
        match sock::send(fd, buf, sock::MSG_NOSIGNAL) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(peer_error(e, "send")),
        }
    }
    Ok(())
}

/// Fill `buf` from the socket. Ok(false) when the peer closed cleanly before its first byte.
pub(crate) fn recv_exact(fd: RawFd, buf: &mut [u8], syscalls: &mut u64) -> std::io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        *syscalls += 1;
        match sock::recv(fd, &mut buf[got..], 0) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection in the middle of a message",
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(peer_error(e, "recv")),
        }
    }
    Ok(true)
}

fn peer_error(err: std::io::Error, what: &str) -> std::io::Error {
    let text = match err.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("{what} timed out after {IDLE_TIMEOUT:?}: the peer stopped responding")
        }
        _ => format!("{what} failed: {err}"),
    };
    std::io::Error::new(err.kind(), text)
}

/// Accept `count` connections within CONNECT_TIMEOUT, giving up when a stop is requested.
fn accept_all(listener: &TcpListener, count: usize, stop: Stop) -> anyhow::Result<Vec<TcpStream>> {
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    let mut accepted = Vec::with_capacity(count);
    while accepted.len() < count {
        if stop.requested() {
            return Err(interrupted());
        }
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                accepted.push(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    bail!(
                        "only {} of {count} connections arrived within {CONNECT_TIMEOUT:?}",
                        accepted.len()
                    );
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(anyhow!("accept failed: {e}")),
        }
    }
    Ok(accepted)
}

fn connect_all(addr: SocketAddr, count: usize) -> anyhow::Result<Vec<TcpStream>> {
    (0..count)
        .map(|_| {
            TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).with_context(|| format!("could not connect to {addr}"))
        })
        .collect()
}

/// The headline metrics, which a case the kernel refuses reports as unavailable with the reason.
const HEADLINE_METRICS: [(&str, Role, &str); 9] = [
    (names::RESPONSES_PER_S, Role::System, "responses/s"),
    (names::THROUGHPUT_GBPS, Role::System, "Gbit/s"),
    (names::LATENCY_P50_US, Role::Client, "us"),
    (names::LATENCY_P99_US, Role::Client, "us"),
    (names::CPU_US_PER_RESPONSE, Role::Client, "us/response"),
    (names::CPU_US_PER_RESPONSE, Role::Server, "us/response"),
    (names::USER_COPY_BYTES_PER_PAYLOAD_BYTE, Role::Server, "B/B"),
    (names::DRAM_BYTES_PER_PAYLOAD_BYTE, Role::System, "B/B"),
    (names::ZEROCOPY_COPIED_FRACTION, Role::System, "fraction"),
];

/// Run one records case and return its observation. A stop request ends it within about
/// 100 ms in any phase (the window closes, clients collect what is in flight and leave), as
/// `Err(Interrupted)`. A feature the kernel refuses (MSG_ZEROCOPY, io_uring) is a result: the
/// observation says `unavailable: <reason>` for every headline metric, never another mode's
/// numbers.
pub fn run(case: &RecordsCase, stop: Stop) -> anyhow::Result<Observation> {
    match run_case(case, stop) {
        Err(e) => match e.downcast_ref::<Unsupported>() {
            Some(refused) => Ok(refused_observation(refused)),
            None => Err(e),
        },
        ok => ok,
    }
}

/// The observation of a case the kernel refused: every headline metric unavailable with the
/// reason, and an `unsupported` warning.
fn refused_observation(refused: &Unsupported) -> Observation {
    let reason = refused.to_string();
    let mut obs = Observation::default();
    obs.warn(WarningKind::Unsupported, reason.clone());
    for (name, role, unit) in HEADLINE_METRICS {
        obs.push(Metric::unavailable(name, role, unit, reason.clone()));
    }
    obs
}

fn run_case(case: &RecordsCase, stop: Stop) -> anyhow::Result<Observation> {
    let proof = case.prove_copies.then(|| prove_copies(case));
    if stop.requested() {
        return Err(interrupted());
    }
    let mut obs = run_measured(case, stop)?;
    if let Some(proof) = proof {
        crate::net::session::observe::publish_proof(&mut obs, case.mode, proof);
    }
    Ok(obs)
}

/// The alias probe's tally for the case's mode (alias.rs), or why there is none.
fn prove_copies(case: &RecordsCase) -> Result<crate::net::alias::ByteTally, String> {
    if let Some(why) = alias::not_applicable(case.mode) {
        return Err(why.to_string());
    }
    if matches!(case.net.endpoint, crate::case::Endpoint::Remote { .. }) {
        return Err("the alias probe needs to see the receiver, and with a remote server it is remote (run without --topology remote)".into());
    }
    alias::probe(case).map_err(|e| format!("the alias probe failed: {e}"))
}

/// Whether the kernel gives this process an io_uring with SENDMSG_ZC (`Unsupported` if not).
fn check_uring_zc() -> anyhow::Result<()> {
    use crate::sys::uring_gather_zc::{GatherZcRing, SetupError};
    GatherZcRing::new(server::URING_ENTRIES)
        .map_err(|e| match e {
            SetupError::Refused(reason) => anyhow::Error::new(Unsupported::new("uring-zc", reason)),
            SetupError::Failed(e) => {
                let disabled = crate::sys::procfs::read_i64("/proc/sys/kernel/io_uring_disabled");
                match crate::sys::uring_send::setup_refusal(&e, disabled) {
                    Some(reason) => anyhow::Error::new(Unsupported::new("uring-zc", reason)),
                    None => anyhow!("io_uring setup failed: {e}"),
                }
            }
        })
        .map(drop)
}

fn run_measured(case: &RecordsCase, stop: Stop) -> anyhow::Result<Observation> {
    check_case(case, None).map_err(|e| anyhow!(e))?;
    if let crate::case::Endpoint::Remote { .. } = case.net.endpoint {
        // The table and the sending live on the server, which checks what it can do.
        let net = Topology::from(&case.net.endpoint).establish()?;
        let addr = net
            .remote_addr()?
            .ok_or_else(|| anyhow!("a remote endpoint without an address"))?;
        return remote::run_client(case, addr, stop);
    }
    if case.mode == RecordsMode::UringZc {
        // Refused here, before any thread or connection exists, when the kernel lacks it.
        check_uring_zc()?;
    }
    // Calibrate before any window opens so it never disturbs one.
    let tsc_hz = clock::tsc_hz();
    let Some(table) = Table::new(case.record_size as usize, case.table_records(), case.align, &|| {
        stop.requested()
    })?
    else {
        return Err(interrupted());
    };
    let net = Topology::from(&case.net.endpoint).establish()?;
    let listener = net.bind(case.net.endpoint.port())?;
    let addr = listener.local_addr()?;
    let clients = net.on_client_side(|| connect_all(addr, case.net.threads))?;
    let servers = accept_all(&listener, case.net.threads, stop)?;
    for s in clients.iter().chain(&servers) {
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(IDLE_TIMEOUT))?;
        s.set_write_timeout(Some(IDLE_TIMEOUT))?;
    }
    if case.mode == RecordsMode::ZeroCopy {
        for s in &servers {
            sock::enable_zerocopy(s.as_raw_fd()).map_err(|e| match Unsupported::refused("MSG_ZEROCOPY", &e) {
                Some(u) => anyhow::Error::new(u),
                None => anyhow!("setsockopt(SO_ZEROCOPY) failed: {e}"),
            })?;
        }
    }

    let policy = kernel_policy();
    let window = Window::new();
    let mut system = network_probes(net.server_namespace());
    let ready = StartGate::default();
    let failed = AtomicBool::new(false);
    let pin = |cpus: &Option<crate::case::CpuList>, i: usize| cpus.as_ref().and_then(|c| c.cpu_for(i));
    let start = |index: usize, pin: Option<usize>| ThreadStart {
        index,
        pin,
        window: &window,
        ready: &ready,
        policy: &policy,
        perf: case.net.perf,
    };

    let (outcomes, drive_result) = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (i, stream) in servers.iter().enumerate() {
            let (start, table, failed) = (start(i, pin(&case.net.server_cpus, i)), &table, &failed);
            handles.push(
                std::thread::Builder::new()
                    .name(format!("iopath-records-srv-{i}"))
                    .spawn_scoped(scope, move || {
                        let result = server::serve(start, case, table, stream.as_raw_fd());
                        if result.is_err() {
                            failed.store(true, Ordering::SeqCst);
                            // Wake the client blocked on this connection.
                            stream.shutdown(Shutdown::Both).ok();
                        }
                        result
                    }),
            );
        }
        for (i, stream) in clients.iter().enumerate() {
            handles.push(spawn_client(
                scope,
                start(i, pin(&case.net.client_cpus, i)),
                case,
                stream,
                &failed,
            ));
        }
        let started = handles.iter().filter(|h| h.is_ok()).count();
        let drive_result = if started == handles.len() && ready.open_when(started, START_PATIENCE) {
            drive(case, &window, &mut system, &failed, stop)
        } else {
            ready.abandon();
            window.close(&mut system);
            Err(anyhow!("could not start all {} threads of the case", handles.len()))
        };
        if drive_result.is_err() || failed.load(Ordering::SeqCst) {
            for s in clients.iter().chain(&servers) {
                s.shutdown(Shutdown::Both).ok();
            }
        }
        (join_sides(handles), drive_result)
    });
    // Every server thread drained its zero-copy completions before returning: the kernel
    // holds no page of the table when it is freed.
    drop(table);

    let mut system_metrics = drive_result?;
    if stop.requested() {
        return Err(interrupted());
    }
    let mut threads = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        threads.push(outcome?);
    }
    let server_fds: Vec<RawFd> = servers.iter().map(|s| s.as_raw_fd()).collect();
    system_metrics.extend(crate::measure::system::tcp_info_metrics(&server_fds, Role::Server));
    let mut obs = build_observation(case, &threads, tsc_hz, &system_metrics);
    if let Some(w) = crate::measure::system::contended(&system_metrics) {
        obs.warn(WarningKind::Contended, w);
    }
    obs.metrics.extend(system_metrics);
    Ok(obs)
}

/// Warm up, open the window, hold it, close it; returns the system probes' metrics. Returns early (window closed) when a thread failed, and with
/// `Interrupted` when a stop was requested.
fn drive(
    case: &RecordsCase,
    window: &Window,
    system: &mut SystemProbes,
    failed: &AtomicBool,
    stop: Stop,
) -> anyhow::Result<Vec<Metric>> {
    if stop.sleep_watching(Duration::from_millis(case.net.warmup_ms), failed) {
        window.open(system);
        stop.sleep_watching(Duration::from_millis(case.net.duration_ms), failed);
    }
    let metrics = window.close(system);
    if stop.requested() {
        return Err(interrupted());
    }
    Ok(metrics)
}

/// The latency quantiles a records case reports.
const QUANTILES: [(&str, f64); 4] = [
    (names::LATENCY_P50_US, 0.5),
    (names::LATENCY_P90_US, 0.9),
    (names::LATENCY_P99_US, 0.99),
    (names::LATENCY_P999_US, 0.999),
];

/// Why the rates are missing when no client thread measured.
const NO_CLIENT_WINDOW: &str = "no client thread saw the measured window";
const NO_SERVER_WINDOW: &str = "no server thread saw the measured window";

fn mean_window<'a>(outcomes: impl IntoIterator<Item = &'a SideOutcome>) -> Option<f64> {
    let seen: Vec<f64> = outcomes.into_iter().filter_map(|o| o.window_s).collect();
    (!seen.is_empty()).then(|| seen.iter().sum::<f64>() / seen.len() as f64)
}

fn per(total: f64, count: f64) -> f64 {
    if count == 0.0 {
        f64::NAN
    } else {
        total / count
    }
}

/// The zero-copy truth of the server's sockets: completions, how many the kernel copied.
fn push_zero_copy(obs: &mut Observation, servers: &[&SideOutcome]) {
    let mut c = CompletionCounts::default();
    let mut enobufs = 0;
    for (z, e) in servers.iter().filter_map(|s| s.zerocopy.as_ref()) {
        c.add(z);
        enobufs += e;
    }
    push_completion_counts(obs, &c);
    obs.push(copied_fraction(&c));
    obs.push(Metric::tool(
        names::ZEROCOPY_ENOBUFS,
        Role::System,
        enobufs as f64,
        "errors",
    ));
    warn_unexpected_completions(obs, &c);
    if c.completed > 0 && c.copied > 0 {
        obs.warn(WarningKind::ZeroCopyCopied, format!(
            "zero-copy: the kernel copied {:.0}% of sends: local delivery (loopback, veth) copies the pages, so MSG_ZEROCOPY saves no copy here",
            100.0 * c.copied as f64 / c.completed as f64
        ));
    }
}

/// Random picks from a table the last-level cache nearly holds are often served from the
/// cache: warn, since the case means to measure DRAM.
fn warn_cache_resident(obs: &mut Observation, case: &RecordsCase) {
    if case.pick == crate::case::Pick::Random {
        if let Some(llc) = crate::sys::cache::last_level_bytes().filter(|llc| case.table_bytes < 4 * llc) {
            obs.warn(
                WarningKind::CacheResident,
                format!(
                    "the {} table is less than 4x the {} last-level cache: random records are often served from the cache, not DRAM",
                    crate::format::format_bytes(case.table_bytes),
                    crate::format::format_bytes(llc)
                ),
            );
        }
    }
}

/// Both sides' counts into the observation: responses/s and payload throughput from what the
/// clients received inside their windows, latency percentiles, CPU and counters per role and
/// per response, the user-space copy and the zero-copy truth.
fn build_observation(
    case: &RecordsCase,
    threads: &[SideOutcome],
    tsc_hz: Option<f64>,
    system_metrics: &[Metric],
) -> Observation {
    let mut obs = Observation::default();
    let clients: Vec<&SideOutcome> = threads.iter().filter(|t| t.role == Role::Client).collect();
    let servers: Vec<&SideOutcome> = threads.iter().filter(|t| t.role == Role::Server).collect();
    let response_bytes = case.response_bytes() as f64;
    let client_window = mean_window(clients.iter().copied()).ok_or_else(|| NO_CLIENT_WINDOW.to_string());
    let received: u64 = clients.iter().map(|c| c.responses).sum();
    let rate = client_window.clone().map(|w| received as f64 / w);
    let client_window_seen = client_window.clone();
    let tool = |name: &str, unit: &str, value: Result<f64, String>| {
        Metric::from_result(name, Role::System, unit, Source::Tool, value)
    };
    obs.push(tool(names::RESPONSES_PER_S, "responses/s", rate.clone()));
    obs.push(tool(
        names::THROUGHPUT_GBPS,
        "Gbit/s",
        rate.clone().map(|r| r * response_bytes * 8.0 / 1e9),
    ));
    obs.push(tool(names::WINDOW_S, "s", client_window));

    let mut latency = LatencyHistogram::new();
    for c in &clients {
        latency.merge(&c.latency);
    }
    push_latency(&mut obs, &latency, &QUANTILES, "no response arrived inside the window");

    for (role, side, why) in [
        (Role::Client, &clients, NO_CLIENT_WINDOW),
        (Role::Server, &servers, NO_SERVER_WINDOW),
    ] {
        let responses: u64 = side.iter().map(|t| t.responses).sum();
        let syscalls: u64 = side.iter().map(|t| t.syscalls).sum();
        let payload = responses * case.response_bytes();
        let sample = measured_counters(side.iter().map(|t| &t.counters), why);
        let cpu_us_per_response = sample
            .usage
            .as_ref()
            .map(|u| per((u.user + u.system).as_secs_f64() * 1e6, responses as f64))
            .map_err(|e| e.clone());
        obs.metrics
            .extend(sample.metrics(role, payload, responses, "response", tsc_hz));
        obs.push(Metric::from_result(
            names::CPU_US_PER_RESPONSE,
            role,
            "us/response",
            Source::Rusage,
            cpu_us_per_response,
        ));
        obs.push(Metric::new(
            names::SYSCALLS_PER_RESPONSE,
            role,
            per(syscalls as f64, responses as f64),
            "syscalls/response",
            Source::Tool,
        ));
        obs.push(Metric::tool("responses", role, responses as f64, "responses"));
        obs.push(Metric::tool("payload_bytes", role, payload as f64, "B"));
        let idle = side.iter().filter(|t| t.responses == 0).count();
        if idle > 0 {
            obs.warn(
                WarningKind::Starved,
                format!("{idle} {role} threads moved no response inside the window (starved of CPU?): more threads than CPUs?"),
            );
        }
        if role == Role::Server {
            let copied: u64 = side.iter().map(|t| t.user_copy_bytes).sum();
            obs.push(Metric::new(
                names::USER_COPY_BYTES_PER_PAYLOAD_BYTE,
                role,
                per(copied as f64, payload as f64),
                "B/B",
                Source::Tool,
            ));
        }
    }
    // DRAM traffic per payload byte: over the payload the clients received inside their
    // windows (the bytes throughput counts), as net stream does.
    let payload = client_window_seen.map(|_| (received * case.response_bytes()) as f64);
    obs.push(crate::measure::memtraffic::per_payload_byte(system_metrics, payload));

    if case.mode.is_zero_copy() {
        push_zero_copy(&mut obs, &servers);
    }
    if case.net.verify {
        let verified: u64 = clients.iter().map(|c| c.verified_records).sum();
        let corrupt: u64 = clients.iter().map(|c| c.corrupt_records).sum();
        obs.push(Metric::tool(
            "verified_records",
            Role::Client,
            verified as f64,
            "records",
        ));
        obs.push(Metric::tool(
            names::CORRUPT_RECORDS,
            Role::Client,
            corrupt as f64,
            "records",
        ));
        obs.warn(
            WarningKind::VerifyCost,
            "--verify reads and checks every record byte on the client: its CPU and the latency include that work",
        );
        if corrupt > 0 {
            obs.warn(WarningKind::Anomaly, format!("{corrupt} records arrived corrupted"));
        }
    }
    warn_cache_resident(&mut obs, case);
    obs.placement = threads.iter().map(|t| t.placement.clone()).collect();
    warn_unpinned(&mut obs, case.net.client_cpus.is_some(), case.net.server_cpus.is_some());
    obs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_feature_is_an_observation_of_unavailable_headlines_not_numbers() {
        let obs = refused_observation(&Unsupported::new("io_uring", "not permitted here (EPERM)"));
        assert!(obs.has_warning(WarningKind::Unsupported));
        for (name, role, _) in HEADLINE_METRICS {
            let m = obs.get(name, role).unwrap();
            assert_eq!(m.value, None);
            assert_eq!(
                m.source,
                Source::Unavailable("io_uring unavailable: not permitted here (EPERM)".into())
            );
        }
    }

    #[test]
    fn limits_name_what_is_accepted() {
        let case = RecordsCase {
            mode: RecordsMode::CopyOut,
            record_size: 128,
            records: 32,
            table_bytes: 1 << 20,
            pick: crate::case::Pick::Random,
            outstanding: 1,
            net: crate::case::NetParams {
                threads: 1,
                duration_ms: 100,
                warmup_ms: 0,
                client_cpus: None,
                server_cpus: None,
                verify: false,
                endpoint: crate::case::Endpoint::Loopback { port: 0 },
                perf: false,
            },
            prove_copies: false,
            align: crate::case::Align::Page,
        };
        assert_eq!(check_case(&case, None), Ok(()));
        let small = RecordsCase {
            table_bytes: 1024,
            ..case.clone()
        };
        assert!(check_case(&small, None).unwrap_err().contains("use a larger --table"));
        let big = RecordsCase {
            table_bytes: 1 << 30,
            ..case.clone()
        };
        assert!(check_case(&big, Some(1 << 30)).unwrap_err().contains("more than half"));
        let tiny = RecordsCase { record_size: 4, ..case };
        assert!(check_case(&tiny, None).unwrap_err().contains("accepted: 8 B to 1 MiB"));
    }
}
