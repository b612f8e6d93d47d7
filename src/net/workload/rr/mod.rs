//! The request/response workloads, `net rr` and `net crr`: client threads send requests of S
//! bytes and server threads answer each with R bytes, in any copy mode. rr keeps connections
//! open, closed loop (N transactions in flight per connection) or open loop at a rate (latency
//! from the intended send time); crr opens and closes a connection per transaction, timing
//! connect, exchange and close apart. Both ends count CPU, counters and system calls inside
//! the same measured window; latencies go into HDR histograms.
//!
//! The client drives the session over the stream's control connection (net/control.rs) with
//! a hello naming its workload, so the server can be in this process (loopback, netns, veth:
//! the stream's in-process server dispatches the hello here) or a remote `iopath net serve`.
//! The server answers with the port of a data listener of the session's own.

mod client;
mod server;

pub use client::{connect_error, OPEN_LOOP_BACKLOG};
pub use server::SERVED;

#[cfg(test)]
use crate::case::Case;
use crate::case::{CopyMode, NetParams, RrCase, RrKind, RxMode};
use crate::measure::histogram::LatencyHistogram;
use crate::net::auth::Credentials;
use crate::net::control::{ControlChannel, ServerReport, PROTOCOL_VERSION};
use crate::net::mode::{self, Receiver, Sender};
use crate::net::session::coordinator::{fds_of, shut_down_all, Accepted, Coordinator, Handles, NetWorkload, Shared};
use crate::net::session::data_connection;
use crate::net::session::meter::Ctx;
use crate::net::session::observe::{
    finish_transactions, latency_then_counting_passes, push_quantiles, push_transaction_rate, push_transaction_sides,
    push_window_transactions, Headline, NO_TRANSACTION,
};
use crate::observation::names;
use crate::observation::{Metric, Observation, Role, Unsupported, WarningKind};
use crate::stop::Stop;
use anyhow::anyhow;
use client::{ClientOutcome, OpenShared};

use std::io;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a data connection may stay silent before the peer is declared gone.
pub use crate::net::session::DATA_IDLE_TIMEOUT;

/// The hello of a request/response client: `{"type":"hello","version":2,"workload":"rr",
/// "case":{...}}`; `workload` is `rr` or `crr`, as the case's own `kind`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RrHello {
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u32,
    pub workload: String,
    pub case: RrCase,
}

impl RrHello {
    pub fn new(case: &RrCase) -> RrHello {
        RrHello {
            kind: "hello".into(),
            version: PROTOCOL_VERSION,
            workload: case.kind.as_str().into(),
            case: case.clone(),
        }
    }
}
/// The longest window or warm-up a case may ask for.
const MAX_PHASE_MS: u64 = 24 * 3600 * 1000;
/// The largest request or response.
pub const MAX_MESSAGE: u64 = 16 << 20;
/// Closed loop with more than one transaction in flight: the requests of one connection must
/// fit in this many bytes. Then a client blocked sending a request is impossible (they fit in
/// the socket buffers), so it always gets back to reading responses and the two ends cannot
/// both wait for the other to read.
pub const MAX_INFLIGHT_BYTES: u64 = 64 << 10;

/// The sender of one direction (requests: the client's; responses: the server's); a mode the
/// kernel refuses is `Unsupported`. The uring modes hand every message to the kernel at once:
/// batching would hold back a request whose response the sender then waits for.
fn data_sender(case: &RrCase, size: usize) -> anyhow::Result<Box<dyn Sender>> {
    let options = mode::SendOptions {
        unbatched: true,
        align: case.align,
        // Each thread's requests and, in one process, the server's responses.
        senders: 2 * case.net.threads,
        ..Default::default()
    };
    mode::sender_with(case.mode, size, case.fields, case.net.verify, &options).map_err(|e| {
        if let Some(refusal) = mode::unsupported_in(&e) {
            return anyhow::Error::new(refusal);
        }
        let what = format!("the {} send mode", case.mode);
        match Unsupported::refused(&what, &e) {
            Some(unsupported) => anyhow::Error::new(unsupported),
            None => anyhow!("{what} could not be set up: {e}"),
        }
    })
}

/// The send modes whose completions are numbered per socket (MSG_ZEROCOPY's, read from the
/// socket's error queue): they cannot follow crr's new connection every transaction, whose
/// close would take the uncollected completions with it. uring-zc's notifications arrive on
/// the ring, whatever became of the socket.
pub fn per_socket_completions(mode: CopyMode) -> bool {
    matches!(mode, CopyMode::ZeroCopy)
}

/// The receiver of one direction (requests: the server's; responses: the client's), in the
/// case's receive mode; both ends use it.
fn data_receiver(case: &RrCase, size: usize) -> anyhow::Result<Box<dyn Receiver>> {
    mode::receiver(
        case.rx_mode,
        case.rx_wake,
        size,
        case.fields,
        case.net.verify,
        case.align,
    )
    .map_err(|e| receiver_error(case, e))
}

/// A receiver's set-up error as the run reports it: the kernel's refusal typed (an
/// unavailable result), anything else a failure.
fn receiver_error(case: &RrCase, e: io::Error) -> anyhow::Error {
    match mode::unsupported_in(&e) {
        Some(refusal) => anyhow::Error::new(refusal),
        None => anyhow!("setting up the {} receiver: {e}", case.rx_mode),
    }
}

/// Receivers for `count` threads, made before any thread starts.
fn data_receivers(case: &RrCase, size: usize, count: usize) -> anyhow::Result<Vec<Box<dyn Receiver>>> {
    (0..count).map(|_| data_receiver(case, size)).collect()
}

/// crr: wait for the peer's FIN (recv returns 0) or its data. EINTR is retried: a thread that
/// owns an io_uring (uring, uring-zc) gets task work that interrupts a blocking recv, which a
/// socket with a receive timeout reports as EINTR instead of restarting it.
pub(crate) fn recv_fin(fd: std::os::fd::RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match crate::sys::net::recv(fd, buf, 0) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Whether a case can run: limits on every parameter. Used by the CLI before running and by a
/// server before accepting a client's case.
pub fn check_case(case: &RrCase) -> Result<(), String> {
    if case.request_size == 0
        || case.response_size == 0
        || case.fields == 0
        || case.net.threads == 0
        || case.inflight == 0
    {
        return Err("request and response sizes, fields, threads and in-flight transactions must be at least 1".into());
    }
    if case.request_size > MAX_MESSAGE || case.response_size > MAX_MESSAGE {
        return Err("requests and responses larger than 16 MiB are not accepted".into());
    }
    if case.net.threads > crate::net::session::MAX_THREADS || case.fields > 1024 || case.inflight > 1024 {
        return Err("at most 1024 threads, 1024 fields and 1024 transactions in flight".into());
    }
    if case.net.duration_ms == 0 || case.net.duration_ms > MAX_PHASE_MS || case.net.warmup_ms > MAX_PHASE_MS {
        return Err("duration must be between 1 ms and 24 h, warm-up at most 24 h".into());
    }
    if case.kind == RrKind::Crr {
        if case.inflight != 1 {
            return Err("crr has one transaction per connection: --inflight is for net rr".into());
        }
        if case.rate.is_some() {
            return Err(
                "crr is closed loop (each thread connects, asks, hears and closes in turn): --rate is for net rr"
                    .into(),
            );
        }
        if per_socket_completions(case.mode) {
            return Err(format!("crr cannot use {}: MSG_ZEROCOPY's completions are numbered per socket and read from its error queue, so closing the socket every transaction would lose them (use uring-zc, whose notifications arrive on the ring, or another mode)", case.mode));
        }
    }
    if case.net.verify && case.rx_mode == RxMode::Trunc {
        return Err("--rx-mode trunc discards the bytes in the kernel, so --verify has nothing to check: drop --verify or use --rx-mode copy, scatter or zerocopy".into());
    }
    if let Some(rate) = case.rate {
        if rate < case.net.threads as u64 || rate > 10_000_000 {
            return Err(format!(
                "--rate {rate} with {} threads: the rate is transactions per second in total, from one per second per connection up to 10000000",
                case.net.threads
            ));
        }
    } else if case.inflight > 1 && case.inflight as u64 * case.request_size > MAX_INFLIGHT_BYTES {
        return Err(format!(
            "--inflight {} with {}-byte requests: a closed loop sends every request in flight before it reads a response, and more than 64 KiB of them could fill both directions' socket buffers so that neither end reads; use fewer in flight, smaller requests, or --rate (open loop reads on a thread of its own)",
            case.inflight, case.request_size
        ));
    }
    Ok(())
}

/// Memory one end of a case holds: per thread, its sender of the messages it sends (the
/// ring of the mode, as the stream counts it), its receiver of the other end's messages and a
/// verify copy (twice the size), and the transactions in flight, request and response, queued
/// in the socket buffers (charged to the memory cgroup like any other memory).
pub fn buffer_bytes(case: &RrCase, role: Role) -> u64 {
    let (send, receive) = match role {
        Role::Client => (case.request_size, case.response_size),
        _ => (case.response_size, case.request_size),
    };
    let options = mode::SendOptions {
        unbatched: true,
        senders: 2 * case.net.threads,
        ..Default::default()
    };
    let in_flight = (case.inflight as u64).saturating_mul(case.request_size.saturating_add(case.response_size));
    mode::sender_bytes(case.mode, send, case.net.verify, &options)
        .saturating_add(receive.saturating_mul(2))
        .saturating_add(in_flight)
        .saturating_mul(case.net.threads as u64)
}

/// Whether the buffers of `role`'s end fit in half of `headroom`
/// (`sys::procfs::memory_headroom`: MemAvailable lowered by the memory cgroup's room; None
/// skips the check). A server runs it on every hello before answering `ready`.
pub fn check_memory(case: &RrCase, role: Role, headroom: Option<u64>) -> Result<(), String> {
    crate::net::session::data::check_buffers(
        &case.label(),
        buffer_bytes(case, role),
        role,
        headroom,
        "use smaller messages, fewer in flight or fewer threads",
    )
}

/// Run one rr/crr case. A stop request ends it within about 100 ms in any phase, with every
/// thread joined and the in-process server released, as `Err(Interrupted)`.
///
/// With counters on (the default), the case runs twice: a latency pass with no perf event on
/// any thread (a per-thread event is switched out and in at every context switch, and a round
/// trip has two, which added microseconds to every transaction), whose figures are the
/// result, then a counting pass with the per-thread perf groups, whose counter figures replace
/// the ones the latency pass could not have. The counting pass's own p50 is reported as
/// `latency_p50_counted_us`: the cost of counting, stated (docs/methodology.md).
pub fn run(case: &RrCase, stop: Stop, credentials: &Credentials) -> anyhow::Result<Observation> {
    latency_then_counting_passes(&case.net, &HEADLINE, stop, |net| {
        let case = RrCase { net, ..case.clone() };
        check_case(&case).map_err(|e| anyhow!(e))?;
        Coordinator::new(&RrClient { case: &case }, stop, credentials).run()
    })
}

/// The figures an rr/crr case the kernel cannot run says are unavailable.
const HEADLINE: [Headline; 3] = [
    (names::TRANSACTIONS_PER_S, Role::System, "txn/s"),
    (names::LATENCY_P50_US, Role::Client, "us"),
    (names::LATENCY_P99_US, Role::Client, "us"),
];

/// rr and crr as the session coordinator runs them.
struct RrClient<'a> {
    case: &'a RrCase,
}

/// Every sender and receiver of the client threads, made (and the receivers attached to their
/// connections) once the data connections exist: a mode the kernel refuses ends the case there.
#[derive(Default)]
struct Ends {
    senders: Vec<Box<dyn Sender>>,
    receivers: Vec<Box<dyn Receiver>>,
}

/// The data connections (rr: one per thread; crr: none, each transaction connects) and what
/// the open loop's threads share.
struct Data {
    streams: Vec<TcpStream>,
    addr: SocketAddr,
    open_shared: Vec<OpenShared>,
    /// Open loop: each connection sends every `gap`, the connections staggered across it.
    gap: Option<Duration>,
}

impl<'a> RrClient<'a> {
    /// The port of the session's data listener, from the server's ready line.
    fn data_port(&self, accepted: &Accepted, addr: SocketAddr) -> anyhow::Result<u16> {
        accepted.port.ok_or_else(|| {
            anyhow!("the server at {addr} answered without a data port: it serves net stream only (an older iopath); upgrade it to serve rr and crr")
        })
    }
}

impl<'a> NetWorkload for RrClient<'a> {
    type Hello = RrHello;
    type Ends = Ends;
    type Data = Data;
    type Outcome = ClientOutcome;
    const PANICKED: &'static str = "a client thread panicked";
    const SERVED: crate::net::session::Served = SERVED;

    fn net(&self) -> &NetParams {
        &self.case.net
    }

    fn hello(&self, _: &Self::Ends) -> RrHello {
        RrHello::new(self.case)
    }

    fn prepare(&self) -> anyhow::Result<Ends> {
        Ok(Ends::default())
    }

    fn open_data(&self, addr: SocketAddr, accepted: &Accepted, ends: &mut Ends, stop: Stop) -> anyhow::Result<Data> {
        let case = self.case;
        let data_addr = SocketAddr::new(addr.ip(), self.data_port(accepted, addr)?);
        let mut streams = Vec::new();
        if case.kind == RrKind::Rr {
            for _ in 0..case.net.threads {
                streams.push(data_connection(data_addr, stop)?);
            }
        }
        let (req, resp) = (case.request_size as usize, case.response_size as usize);
        let origin = Instant::now();
        let open_shared: Vec<OpenShared> = match (case.kind, case.rate) {
            (RrKind::Rr, Some(_)) => streams.iter().map(|_| OpenShared::new(origin)).collect(),
            _ => Vec::new(),
        };
        let gap = case
            .rate
            .map(|r| Duration::from_secs_f64(case.net.threads as f64 / r as f64));
        // Every sender before any thread starts: a mode the kernel refuses ends the case here.
        for _ in 0..case.net.threads {
            ends.senders.push(data_sender(case, req)?);
        }
        // And every receiver, attached to its connection (crr: per connection, in the loop): a
        // receive mode the kernel refuses ends the case here too.
        ends.receivers = data_receivers(case, resp, case.net.threads)?;
        for (receiver, stream) in ends.receivers.iter_mut().zip(&streams) {
            receiver
                .attach(stream.as_raw_fd())
                .map_err(|e| receiver_error(case, e))?;
        }
        Ok(Data {
            streams,
            addr: data_addr,
            open_shared,
            gap,
        })
    }

    /// rr tells the server `Measure` before its own window opens.
    fn measure_before_open(&self) -> bool {
        true
    }

    fn spawn_clients<'scope, 'env>(
        &'env self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        shared: &'env Shared<'env>,
        data: &'env Data,
        ends: Ends,
    ) -> Handles<'scope, ClientOutcome> {
        let case = self.case;
        let failed = shared.failed;
        let watch = move |result: io::Result<ClientOutcome>| {
            if result.is_err() {
                failed.store(true, Ordering::SeqCst);
            }
            result
        };
        let (mut senders, mut receivers) = (ends.senders.into_iter(), ends.receivers.into_iter());
        let mut handles = Vec::new();
        for i in 0..case.net.threads {
            let name = format!("iopath-rr-client-{i}");
            let builder = || std::thread::Builder::new().name(name.clone());
            let sender = senders.next().expect("one sender per thread");
            let receiver = receivers.next().expect("one receiver per thread");
            match (case.kind, data.gap) {
                (RrKind::Rr, None) => {
                    let stream = &data.streams[i];
                    handles.push(builder().spawn_scoped(scope, move || {
                        let ctx = Ctx::client(shared, &self.case.net);
                        let r = watch(client::closed_loop(&ctx, i, stream, sender, receiver, case.inflight));
                        if r.is_err() {
                            stream.shutdown(Shutdown::Both).ok();
                        }
                        r
                    }));
                }
                (RrKind::Rr, Some(gap)) => {
                    let (stream, open) = (&data.streams[i], &data.open_shared[i]);
                    let phase = gap.mul_f64(i as f64 / case.net.threads as f64);
                    handles.push(builder().spawn_scoped(scope, move || {
                        let ctx = Ctx::client(shared, &self.case.net);
                        watch(client::open_sender(&ctx, i, stream, sender, open, gap, phase, failed))
                    }));
                    handles.push(builder().spawn_scoped(scope, move || {
                        let ctx = Ctx::client(shared, &self.case.net);
                        let r = watch(client::open_receiver(&ctx, i, stream, receiver, open));
                        if r.is_err() {
                            stream.shutdown(Shutdown::Both).ok();
                        }
                        r
                    }));
                }
                (RrKind::Crr, _) => {
                    let addr = data.addr;
                    handles.push(builder().spawn_scoped(scope, move || {
                        let ctx = Ctx::client(shared, &self.case.net);
                        watch(client::crr_loop(
                            &ctx,
                            i,
                            addr,
                            sender,
                            receiver,
                            failed,
                            DATA_IDLE_TIMEOUT,
                            case.net.verify,
                        ))
                    }));
                }
            }
        }
        handles
    }

    fn wake(&self, data: &Data) {
        shut_down_all(&data.streams);
    }

    /// Every client thread is done: a crr server may stop accepting.
    fn threads_done(&self, control: &mut ControlChannel) {
        control.send_json(&crate::net::control::RrPhase::Finished).ok();
    }

    /// crr attaches its receiver to every new connection: a refusal there is a result too.
    fn thread_refusal(&self, error: &io::Error) -> Option<Unsupported> {
        mode::unsupported_in(error)
    }

    fn data_fds(&self, data: &Data) -> Option<Vec<std::os::fd::RawFd>> {
        fds_of(&data.streams).filter(|_| self.case.kind == RrKind::Rr)
    }

    fn observe(
        &self,
        clients: &[ClientOutcome],
        server: &ServerReport,
        window_s: f64,
        tsc_hz: Option<f64>,
    ) -> Observation {
        build_observation(self.case, clients, server, window_s, tsc_hz)
    }

    /// The requests and responses of the transactions counted in the window.
    fn payload(&self, obs: &Observation, _server: &ServerReport) -> Result<f64, String> {
        let transactions = obs.value(names::TRANSACTIONS, Role::Client).unwrap_or(0.0);
        Ok(transactions * (self.case.request_size + self.case.response_size) as f64)
    }
}

/// Percentile metrics of one histogram: `prefix_pNN_us`, unavailable when it is empty.
fn percentiles(obs: &mut Observation, hist: &LatencyHistogram, names: &[(&str, f64)]) {
    push_quantiles(obs, Role::Client, hist, names, NO_TRANSACTION);
}

/// The open loop's own figures (`--rate`): what was offered, how late the sends went, what
/// was left unanswered and what was shed.
fn push_open_loop(obs: &mut Observation, clients: &[ClientOutcome], rate: u64) {
    obs.push(Metric::tool("offered_per_s", Role::Client, rate as f64, "txn/s"));
    let shed: u64 = clients.iter().map(|c| c.shed).sum();
    let mut lag = LatencyHistogram::new();
    for c in clients {
        lag.merge(&c.send_lag);
    }
    percentiles(obs, &lag, &[("send_lag_p50_us", 0.5), ("send_lag_p99_us", 0.99)]);
    let starved: u64 = clients.iter().map(|c| c.starved).sum();
    obs.push(Metric::tool(
        names::UNANSWERED_AT_END,
        Role::Client,
        starved as f64,
        "txn",
    ));
    if starved > 0 {
        obs.warn(WarningKind::Starved, format!(
            "{starved} requests had waited over {} ms unanswered when the window closed: their ages so far are in the latency percentiles (as lower bounds)",
            client::STARVED.as_millis()
        ));
    }
    obs.push(Metric::tool("shed", Role::Client, shed as f64, "txn"));
    if shed > 0 {
        obs.warn(WarningKind::Starved, format!(
            "{shed} sends were shed: {OPEN_LOOP_BACKLOG} transactions were already waiting on their connection (the server does not keep up with --rate {rate})"
        ));
    }
}

/// Both sides' counts into the observation.
fn build_observation(
    case: &RrCase,
    clients: &[ClientOutcome],
    server: &ServerReport,
    window_s: f64,
    tsc_hz: Option<f64>,
) -> Observation {
    let mut obs = Observation::default();
    let transactions: u64 = clients.iter().map(|c| c.transactions).sum();
    let mut latency = LatencyHistogram::new();
    let (mut connect, mut exchange, mut close) = (
        LatencyHistogram::new(),
        LatencyHistogram::new(),
        LatencyHistogram::new(),
    );
    for c in clients {
        latency.merge(&c.latency);
        connect.merge(&c.connect);
        exchange.merge(&c.exchange);
        close.merge(&c.close);
    }
    push_transaction_rate(&mut obs, transactions, &latency, window_s);
    if case.kind == RrKind::Crr {
        percentiles(
            &mut obs,
            &connect,
            &[(names::CONNECT_P50_US, 0.5), ("connect_p99_us", 0.99)],
        );
        percentiles(
            &mut obs,
            &exchange,
            &[(names::EXCHANGE_P50_US, 0.5), ("exchange_p99_us", 0.99)],
        );
        percentiles(&mut obs, &close, &[(names::CLOSE_P50_US, 0.5), ("close_p99_us", 0.99)]);
    }
    push_window_transactions(&mut obs, window_s, transactions);

    // The client's CPU and counters over the threads that measured.
    let bytes = transactions * (case.request_size + case.response_size);
    push_transaction_sides(
        &mut obs,
        clients.iter().map(|c| &c.metered),
        case.net.perf,
        (bytes, transactions),
        tsc_hz,
        server,
    );

    if let Some(rate) = case.rate {
        push_open_loop(&mut obs, clients, rate);
    }
    let recv_counts = clients.iter().filter_map(|c| c.recv_counts.as_ref());
    let verified = recv_counts.clone().map(|r| r.verified_messages).sum();
    let corrupt = recv_counts.map(|r| r.corrupt_messages).sum();
    let metered = clients.iter().map(|c| &c.metered);
    finish_transactions(&mut obs, metered, (verified, corrupt), server, &case.net);
    obs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ephemeral ports used up is one error that names the sysctl and TIME_WAIT.
    #[test]
    fn no_free_local_port_is_one_clear_error() {
        let addr: SocketAddr = "127.0.0.1:5201".parse().unwrap();
        let e = connect_error(io::Error::from_raw_os_error(libc::EADDRNOTAVAIL), addr).to_string();
        for needle in [
            "EADDRNOTAVAIL",
            "net.ipv4.ip_local_port_range",
            "TIME_WAIT",
            "127.0.0.1:5201",
        ] {
            assert!(e.contains(needle), "{needle}: {e}");
        }
        let other = connect_error(io::Error::from_raw_os_error(libc::ECONNREFUSED), addr).to_string();
        assert!(other.starts_with("connect to 127.0.0.1:5201 failed:"), "{other}");
    }

    /// Transactions per second lead the comparison, higher is better; latencies and CPU per
    /// transaction are better lower.
    #[test]
    fn compare_reads_rates_up_and_latencies_down() {
        use crate::report::compare::higher_is_better;
        let case = Case::NetRr(RrCase {
            kind: RrKind::Rr,
            mode: CopyMode::OneCopy,
            rx_mode: crate::case::RxMode::Scatter,
            request_size: 64,
            response_size: 64,
            fields: 1,
            inflight: 1,
            net: crate::case::NetParams {
                perf: true,
                ..crate::case::NetParams::for_test()
            },
            rate: None,
            align: crate::case::Align::Page,
            rx_wake: crate::case::RxWake::Data,
        });
        assert_eq!(
            crate::report::cells::headline(&case),
            ("transactions_per_s", Role::System, true)
        );
        assert!(higher_is_better(&case, Role::System, "transactions_per_s"));
        for name in [
            "latency_p50_us",
            "latency_p999_us",
            "connect_p50_us",
            "cpu_us_per_txn",
            "syscalls_per_txn",
        ] {
            assert!(!higher_is_better(&case, Role::Client, name), "{name}");
        }
    }
}
