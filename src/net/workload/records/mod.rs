//! The record store workload (`iopath net records`): a server holds a table of fixed-size
//! records, far larger than the last-level cache by default, and answers each request naming N
//! record ids with those N records, sent copy-out (memcpy into a transmit buffer, then send),
//! gather (sendmsg with one iovec per record, in place) or zero copy (the same with
//! MSG_ZEROCOPY). Client threads keep `outstanding` requests in flight each; both ends count
//! CPU, counters and system calls inside the measured window, and the system probes (TCP
//! counters, the server machine's memory traffic) cover it.
//!
//! It runs on the network session (`net::session::coordinator::Coordinator`): the server is
//! the session server of `net serve` (this workload's `SERVED` entry), in this process for
//! loopback, netns and veth or a remote `net serve`. What is records' own: the client thread
//! body (client.rs), the server's session and thread body (session.rs, server.rs), the table
//! (table.rs), the alias probe (alias.rs) and its metrics (observe.rs). The table is allocated
//! and filled before any data connection exists and never written again, so a record may be in
//! flight in several zero-copy sends at once; every server thread drains its zero-copy
//! completions before it returns, and the table outlives every thread.

mod alias;
mod client;
mod observe;
mod server;
mod session;
mod table;

pub use client::pick_range;
pub use session::SERVED;
pub use table::{check_record, fill_record};

use crate::case::{NetParams, RecordsCase, RecordsMode};
use crate::measure::counters::{CounterSample, KernelPolicy, ThreadCounters};
use crate::measure::histogram::LatencyHistogram;
use crate::measure::window::{thread_counters, Edge, View, Window};
use crate::net::auth::Credentials;
use crate::net::completions::CompletionCounts;
use crate::net::control::ServerReport;
use crate::net::session::coordinator::{fds_of, shut_down_all, Accepted, Coordinator, Handles, NetWorkload, Shared};
use crate::net::session::observe::{refusal_as_observation, Headline};
use crate::net::session::{handshake, interrupted, Served, StartGate};
use crate::observation::names;
#[cfg(test)]
use crate::observation::{Metric, WarningKind};
use crate::observation::{Observation, Role, ThreadPlacement, Unsupported};
use crate::stop::Stop;
use crate::sys::affinity;
use crate::sys::net as sock;
use anyhow::{anyhow, bail};
use serde::Serialize;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::RawFd;
use std::time::Duration;

/// A peer silent this long (a blocked send or receive) is gone: the thread fails instead of
/// waiting forever.
const IDLE_TIMEOUT: Duration = crate::net::session::DATA_IDLE_TIMEOUT;
/// How long either end waits for the other to set up (data connections, the table) or report.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);
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
    // The table and the buffers live with the server (in this process for a local run).
    crate::net::session::data::check_buffers(
        &case.label(),
        buffer_bytes(case),
        crate::observation::Role::Server,
        mem_available,
        "use a smaller --table",
    )
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

/// What one thread measured.
pub(crate) struct SideOutcome {
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

/// The headline metrics, which a case the kernel refuses reports as unavailable with the reason.
const HEADLINE_METRICS: [Headline; 9] = [
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
pub fn run(case: &RecordsCase, stop: Stop, credentials: &Credentials) -> anyhow::Result<Observation> {
    refusal_as_observation(run_case(case, stop, credentials), &HEADLINE_METRICS)
}

/// The observation of a case the kernel refused (what `run` makes of a refusal).
#[cfg(test)]
fn refused_observation(refused: &Unsupported) -> Observation {
    crate::net::session::observe::unavailable_observation(refused, &HEADLINE_METRICS)
}

fn run_case(case: &RecordsCase, stop: Stop, credentials: &Credentials) -> anyhow::Result<Observation> {
    let proof = case.prove_copies.then(|| prove_copies(case));
    if stop.requested() {
        return Err(interrupted());
    }
    let mut obs = run_measured(case, stop, credentials)?;
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
    if remote(case) {
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

fn run_measured(case: &RecordsCase, stop: Stop, credentials: &Credentials) -> anyhow::Result<Observation> {
    check_case(case, None).map_err(|e| anyhow!(e))?;
    Coordinator::new(&Records { case }, stop, credentials)
        .run()
        .map_err(|e| too_old(case, e))
}

/// A server that cannot read a records hello is an older iopath: the case is unavailable
/// there, not a failure.
fn too_old(case: &RecordsCase, e: anyhow::Error) -> anyhow::Error {
    let Some(refused) = e.downcast_ref::<handshake::ServerRefused>() else {
        return e;
    };
    if refused.0.kind != handshake::RefusalKind::BadHello || !remote(case) {
        return e;
    }
    Unsupported::new(
        "net records on this server",
        format!("it refused the hello ({}): upgrade it", refused.0.error),
    )
    .into()
}

/// Whether the server is a `net serve` elsewhere.
fn remote(case: &RecordsCase) -> bool {
    matches!(case.net.endpoint, crate::case::Endpoint::Remote { .. })
}

/// The hello of a records client.
#[derive(Serialize)]
pub(crate) struct RecordsHello<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    version: u32,
    workload: &'static str,
    case: &'a RecordsCase,
}

/// net records as the session coordinator runs it: the server (in this process, or a
/// `net serve`) holds the table and sends; the client threads ask and time.
struct Records<'a> {
    case: &'a RecordsCase,
}

impl<'a> NetWorkload for Records<'a> {
    type Hello = RecordsHello<'a>;
    type Ends = ();
    /// One data connection per client thread.
    type Data = Vec<TcpStream>;
    type Outcome = SideOutcome;
    const PANICKED: &'static str = "a records thread panicked";
    const SERVED: Served = SERVED;

    fn net(&self) -> &NetParams {
        &self.case.net
    }

    fn hello(&self, _: &Self::Ends) -> RecordsHello<'a> {
        RecordsHello {
            kind: "hello",
            version: crate::net::control::PROTOCOL_VERSION,
            workload: "records",
            case: self.case,
        }
    }

    /// The server fills its table before it answers: a second per 256 MiB on top of the
    /// set-up time.
    fn hello_wait(&self) -> Duration {
        SETUP_TIMEOUT + Duration::from_secs(self.case.table_bytes >> 28)
    }

    /// The sender's DRAM is the figure: the server's report carries its machine's.
    fn server_counts_memory_traffic(&self) -> bool {
        true
    }

    /// uring-zc on this kernel, before any connection exists, when the server is this
    /// process (a remote server checks its own and refuses the hello).
    fn prepare(&self) -> anyhow::Result<()> {
        if self.case.mode == RecordsMode::UringZc && !remote(self.case) {
            check_uring_zc()?;
        }
        Ok(())
    }

    fn open_data(
        &self,
        addr: SocketAddr,
        accepted: &Accepted,
        _: &mut (),
        stop: Stop,
    ) -> anyhow::Result<Vec<TcpStream>> {
        let port = accepted.port.ok_or_else(|| {
            anyhow!(
                "the server at {addr} answered without a data port: an older iopath that does not serve net records"
            )
        })?;
        let data_addr = SocketAddr::new(addr.ip(), port);
        let data: Vec<TcpStream> = (0..self.case.net.threads)
            .map(|_| crate::net::session::connect(data_addr, stop))
            .collect::<anyhow::Result<_>>()?;
        for s in &data {
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(IDLE_TIMEOUT))?;
            s.set_write_timeout(Some(IDLE_TIMEOUT))?;
        }
        Ok(data)
    }

    fn spawn_clients<'scope, 'env>(
        &'env self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        shared: &'env Shared<'env>,
        data: &'env Vec<TcpStream>,
        _: (),
    ) -> Handles<'scope, SideOutcome> {
        let net = &self.case.net;
        data.iter()
            .enumerate()
            .map(|(i, stream)| {
                let start = ThreadStart {
                    index: i,
                    pin: net.client_cpus.as_ref().and_then(|c| c.cpu_for(i)),
                    window: shared.window,
                    ready: shared.ready,
                    policy: shared.policy,
                    perf: net.perf,
                };
                client::spawn(scope, start, self.case, stream, shared.failed)
            })
            .collect()
    }

    fn wake(&self, data: &Vec<TcpStream>) {
        shut_down_all(data);
    }

    fn data_fds(&self, data: &Vec<TcpStream>) -> Option<Vec<RawFd>> {
        fds_of(data)
    }

    fn observe(
        &self,
        clients: &[SideOutcome],
        server: &ServerReport,
        _window_s: f64,
        tsc_hz: Option<f64>,
    ) -> Observation {
        observe::client_observation(self.case, clients, server, tsc_hz)
    }

    /// The payload the client threads received whole inside their windows (the bytes
    /// `throughput_gbps` counts), as net stream does.
    fn payload(&self, obs: &Observation, _: &ServerReport) -> Result<f64, String> {
        obs.value(names::WINDOW_S, Role::System)
            .ok_or_else(|| observe::NO_CLIENT_WINDOW.to_string())?;
        let received = obs.value(observe::RESPONSES, Role::Client).unwrap_or(0.0);
        Ok(received * self.case.response_bytes() as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::Source;

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
            net: crate::case::NetParams::for_test(),
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

    fn loopback_case(mode: RecordsMode) -> RecordsCase {
        RecordsCase {
            mode,
            record_size: 1024,
            records: 4,
            table_bytes: 1 << 20,
            pick: crate::case::Pick::Random,
            outstanding: 1,
            net: crate::case::NetParams {
                duration_ms: 60,
                verify: true,
                ..crate::case::NetParams::for_test()
            },
            prove_copies: false,
            align: crate::case::Align::Page,
        }
    }

    /// Through the coordinator and its in-process server, each figure comes once: the
    /// server's role, its zero-copy counts and its machine's memory traffic from its report,
    /// the client's TCP counters from the client's window (memory traffic counted by one end
    /// only: `server_counts_memory_traffic`).
    #[test]
    fn a_loopback_run_counts_each_figure_once_with_the_memory_traffic_from_the_server() {
        let obs = run(
            &loopback_case(RecordsMode::ZeroCopy),
            Stop::fresh(),
            &Credentials::default(),
        )
        .unwrap();
        let mut seen = std::collections::HashSet::new();
        for m in &obs.metrics {
            assert!(seen.insert((m.name.clone(), m.role)), "{} {} twice", m.role, m.name);
        }
        assert!(obs.get(names::DRAM_BYTES, Role::System).is_some());
        assert!(obs.get(names::DRAM_BYTES_PER_PAYLOAD_BYTE, Role::System).is_some());
        assert!(obs.value(observe::RESPONSES, Role::Server).unwrap() > 0.0);
        assert!(obs.value(observe::RESPONSES, Role::Client).unwrap() > 0.0);
        assert_eq!(obs.value(names::CORRUPT_RECORDS, Role::Client), Some(0.0));
        assert!(obs.get(names::ZEROCOPY_COPIED_FRACTION, Role::System).is_some());
        // Both ends' threads are placed: the client's, then the server's from its report.
        let roles: Vec<Role> = obs.placement.iter().map(|p| p.role).collect();
        assert_eq!(roles, [Role::Client, Role::Server]);
    }

    /// The hooks records gives the coordinator: the hello waits for the table to be filled,
    /// the payload of the DRAM ratio is what the clients received, none without a window.
    #[test]
    fn the_hello_waits_for_the_table_and_the_payload_needs_a_client_window() {
        let small = loopback_case(RecordsMode::Gather);
        let big = RecordsCase {
            table_bytes: 64 << 30,
            ..small.clone()
        };
        let (small, big) = (Records { case: &small }, Records { case: &big });
        assert_eq!(small.hello_wait(), SETUP_TIMEOUT);
        assert_eq!(big.hello_wait(), SETUP_TIMEOUT + Duration::from_secs(256));
        assert!(small.server_counts_memory_traffic());
        let report = ServerReport::default();
        let mut obs = Observation::default();
        assert_eq!(small.payload(&obs, &report), Err(observe::NO_CLIENT_WINDOW.to_string()));
        obs.push(Metric::tool(names::WINDOW_S, Role::System, 0.5, "s"));
        obs.push(Metric::tool(observe::RESPONSES, Role::Client, 10.0, "responses"));
        assert_eq!(small.payload(&obs, &report), Ok(10.0 * 4.0 * 1024.0));
    }
}
