//! Latency under load (`iopath net load`): a request/response probe on a connection of its own
//! is timed first on the idle link, then while bulk TCP flows run between the same two ends,
//! up (client to server), down or both. The flows start when the idle pass ends and ramp for
//! the rest of the warm-up; the measured window is the loaded one. What it reports: the
//! probe's percentiles idle and loaded and their ratio (the inflation), round trips per minute
//! under load (the responsiveness draft's RPM), each flow's goodput, their sum and Jain's
//! fairness index, the connections' retransmits, and each side's CPU.
//!
//! The probe runs without perf events (one costs time at every context switch, and a round
//! trip has two); the flows count as the case says. Both ends' loops are the session's
//! shared ones (`net/session/loops.rs`).

mod server;

pub use server::SERVED;

use crate::case::{CopyMode, LoadCase, NetParams, RxMode, MAX_FLOWS};
use crate::measure::histogram::{nanos, LatencyHistogram};
use crate::net::auth::Credentials;
use crate::net::control::{ServerReport, PROTOCOL_VERSION};
use crate::net::mode::{self, Receiver, Sender};
use crate::net::session::coordinator::{fds_of, shut_down_all, Accepted, Coordinator, Handles, NetWorkload, Shared};
use crate::net::session::data_connection;
use crate::net::session::loops::{bulk, Bulk, Moved};
use crate::net::session::meter::{Ctx, Meter, Metered};
use crate::net::session::observe::{
    cdf_quantiles_named, place, push_client_counters, push_quantiles, push_server_metrics, push_verify_counts,
    warn_verify,
};
use crate::observation::names;
use crate::observation::{Metric, Observation, Role, Unsupported};
use crate::stop::Stop;
use anyhow::anyhow;
use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The hello of a load client: `{"type":"hello","version":2,"workload":"load","case":{...}}`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct LoadHello {
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u32,
    pub workload: String,
    pub case: LoadCase,
}

/// The largest send of a flow and the largest probe message.
pub const MAX_SIZE: u64 = 16 << 20;
pub const MAX_PROBE: u64 = 64 << 10;
/// The longest window or warm-up a case may ask for.
const MAX_PHASE_MS: u64 = 24 * 3600 * 1000;
/// The probe's send and receive modes: a plain request/response (rr's defaults).
const PROBE_MODE: CopyMode = CopyMode::OneCopy;
/// The share of the loaded probes whose mean is RPM's round trip (TM95: the slowest 5 % off).
const RPM_KEEP: f64 = 0.95;
/// Why a figure of the loaded round trips is unavailable.
const NO_LOADED_ROUND_TRIP: &str = "the probe completed no round trip inside the loaded window";
/// How often a flow waiting for the idle pass to end looks again.
const WAIT_POLL: Duration = Duration::from_millis(1);

/// Whether a case can run: limits on every parameter. Used by the CLI before running and by a
/// server before accepting a client's case.
pub fn check_case(case: &LoadCase) -> Result<(), String> {
    if case.flows == 0 || case.flows > MAX_FLOWS {
        return Err(format!("--flows {}: 1 to {MAX_FLOWS} flows each way", case.flows));
    }
    if case.size == 0 || case.size > MAX_SIZE || case.probe_size == 0 || case.probe_size > MAX_PROBE {
        return Err("--size is 1 B to 16 MiB and --probe-size 1 B to 64 KiB".into());
    }
    if case.net.threads != 1 {
        return Err("net load has one probe connection".into());
    }
    if case.net.duration_ms == 0 || case.net.duration_ms > MAX_PHASE_MS || case.net.warmup_ms > MAX_PHASE_MS {
        return Err("duration must be between 1 ms and 24 h, warm-up at most 24 h".into());
    }
    if case.idle_ms == 0 || case.idle_ms > case.net.warmup_ms {
        return Err(format!(
            "--idle {} ms with a warm-up of {} ms: the idle pass is at least 1 ms and the first part of the warm-up, which must hold it (on the command line --warmup is the ramp after --idle)",
            case.idle_ms, case.net.warmup_ms
        ));
    }
    if let Some(us) = case.probe_interval_us {
        check_probe_interval(us, case)?;
    }
    if let Some(cc) = &case.congestion {
        check_congestion_name(cc)?;
    }
    if case.net.verify && case.rx_mode == RxMode::Trunc {
        return Err("--rx-mode trunc discards the bytes in the kernel, so --verify has nothing to check: drop --verify or use --rx-mode copy, scatter or zerocopy".into());
    }
    Ok(())
}

/// The fewest probes the idle pass and the loaded window must each hold at the probe's rate:
/// fewer give no p90, let alone a p99.
pub const MIN_PROBES: u64 = 10;
/// The fastest probe rate: a round trip a microsecond, beyond which no pacing is left.
pub const MAX_PROBE_RATE: u64 = 1_000_000;

/// `--probe-rate`: fast enough that the idle pass and the window each hold [`MIN_PROBES`],
/// no faster than [`MAX_PROBE_RATE`].
fn check_probe_interval(interval_us: u64, case: &LoadCase) -> Result<(), String> {
    let rate = 1_000_000 / interval_us.max(1);
    if interval_us == 0 {
        return Err(format!(
            "--probe-rate above {MAX_PROBE_RATE}/s: the most is a probe a microsecond"
        ));
    }
    for (phase, ms) in [
        ("idle pass (--idle)", case.idle_ms),
        ("loaded window (--duration)", case.net.duration_ms),
    ] {
        let held = ms.saturating_mul(1000) / interval_us;
        if held < MIN_PROBES {
            return Err(format!(
                "--probe-rate {rate}/s fits {held} probes in the {ms} ms {phase}; at least {MIN_PROBES} are needed: raise the rate or lengthen the phase"
            ));
        }
    }
    Ok(())
}

/// A congestion control's name as the kernel takes it (TCP_CA_NAME_MAX is 16 with its NUL).
fn check_congestion_name(name: &str) -> Result<(), String> {
    let fits = (1..16).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !fits {
        return Err(format!(
            "--cc '{name}' is not a congestion control's name (1 to 15 letters, digits, _ or -; e.g. cubic, bbr, reno)"
        ));
    }
    Ok(())
}

/// Set the case's congestion control on its flows' connections (the probe keeps the default).
pub(super) fn set_congestion(case: &LoadCase, flows: &[TcpStream]) -> Result<(), Unsupported> {
    let Some(cc) = &case.congestion else {
        return Ok(());
    };
    for stream in flows {
        socket2::SockRef::from(stream)
            .set_tcp_congestion(cc.as_bytes())
            .map_err(|e| {
                let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                    .map(|t| t.split_whitespace().collect::<Vec<_>>().join(", "))
                    .unwrap_or_else(|_| "unknown".into());
                Unsupported::new(
                    format!("the congestion control '{cc}'"),
                    format!("could not be set on a flow ({e}); this kernel has: {available}"),
                )
            })?;
    }
    Ok(())
}

/// Memory one end of a case holds: each flow it sends on, its sender's ring (as the stream
/// counts it); each flow it receives on, a message and its verify copy; the probe's two.
pub fn buffer_bytes(case: &LoadCase, role: Role) -> u64 {
    let (up, down) = case.flow_counts();
    let (sends, receives) = match role {
        Role::Client => (up, down),
        _ => (down, up),
    };
    let ring = mode::sender_bytes(case.mode, case.size, case.net.verify, &send_options(case));
    ring.saturating_mul(sends as u64)
        .saturating_add(case.size.saturating_mul(2 * receives as u64))
        .saturating_add(case.probe_size.saturating_mul(4))
}

/// Whether the buffers of `role`'s end fit in half of `headroom` (None skips the check).
pub fn check_memory(case: &LoadCase, role: Role, headroom: Option<u64>) -> Result<(), String> {
    crate::net::session::data::check_buffers(
        &case.label(),
        buffer_bytes(case, role),
        role,
        headroom,
        "use smaller sends or fewer flows",
    )
}

/// A flow's sends: batched as a stream's are (nothing waits on one message).
fn send_options(case: &LoadCase) -> mode::SendOptions {
    let (up, down) = case.flow_counts();
    mode::SendOptions {
        senders: up + down,
        ..Default::default()
    }
}

/// A mode's set-up error as the run reports it: the kernel's refusal typed (an unavailable
/// result), anything else a failure naming `what`.
fn set_up_error(what: &str, e: io::Error) -> anyhow::Error {
    if let Some(refusal) = mode::unsupported_in(&e) {
        return anyhow::Error::new(refusal);
    }
    match Unsupported::refused(what, &e) {
        Some(unsupported) => anyhow::Error::new(unsupported),
        None => anyhow!("{what} could not be set up: {e}"),
    }
}

/// A flow's sender in the case's mode.
fn flow_sender(case: &LoadCase) -> anyhow::Result<Box<dyn Sender>> {
    let what = format!("the {} send mode", case.mode);
    mode::sender_with(case.mode, case.size as usize, 1, case.net.verify, &send_options(case))
        .map_err(|e| set_up_error(&what, e))
}

/// A flow's receiver in the case's receive mode, attached to its connection.
fn flow_receiver(case: &LoadCase, stream: &TcpStream) -> anyhow::Result<Box<dyn Receiver>> {
    let what = format!("the {} receiver", case.rx_mode);
    let mut receiver = mode::receiver(
        case.rx_mode,
        crate::case::RxWake::Data,
        case.size as usize,
        1,
        case.net.verify,
        crate::case::Align::Page,
    )
    .map_err(|e| set_up_error(&what, e))?;
    receiver
        .attach(stream.as_raw_fd())
        .map_err(|e| set_up_error(&what, e))?;
    Ok(receiver)
}

/// The probe's sender and receiver (one end's), attached to its connection.
fn probe_ends(case: &LoadCase, stream: &TcpStream) -> anyhow::Result<(Box<dyn Sender>, Box<dyn Receiver>)> {
    let size = case.probe_size as usize;
    let options = mode::SendOptions {
        unbatched: true,
        ..Default::default()
    };
    let sender = mode::sender_with(PROBE_MODE, size, 1, case.net.verify, &options)
        .map_err(|e| set_up_error("the probe's sender", e))?;
    let rx = RxMode::paired_with(PROBE_MODE);
    let mut receiver = mode::receiver(
        rx,
        crate::case::RxWake::Data,
        size,
        1,
        case.net.verify,
        crate::case::Align::Page,
    )
    .map_err(|e| set_up_error("the probe's receiver", e))?;
    receiver
        .attach(stream.as_raw_fd())
        .map_err(|e| set_up_error("the probe's receiver", e))?;
    Ok((sender, receiver))
}

/// Run one load case. A stop ends it within about 100 ms in any phase, every thread joined.
pub fn run(case: &LoadCase, stop: Stop, credentials: &Credentials) -> anyhow::Result<Observation> {
    check_case(case).map_err(|e| anyhow!(e))?;
    Coordinator::new(&LoadClient { case }, stop, credentials).run()
}

struct LoadClient<'a> {
    case: &'a LoadCase,
}

/// What one thread of either end owns: the probe's sender and receiver, or a flow's end (the
/// client sends the up flows and receives the down ones, the server the other way round).
pub(crate) enum Part {
    Probe(Box<dyn Sender>, Box<dyn Receiver>),
    Flow(Bulk),
}

/// The data connections (the probe's, then the flows' up, then down) and the flag the probe
/// raises when its idle pass is over.
struct Data {
    streams: Vec<TcpStream>,
    load_on: AtomicBool,
}

/// What one client thread hands back.
pub(crate) enum Outcome {
    Probe(ProbeOutcome),
    Flow(Moved),
}

/// The probe's round trips on the idle link and inside the loaded window.
pub(crate) struct ProbeOutcome {
    idle: LatencyHistogram,
    loaded: LatencyHistogram,
    metered: Metered,
}

impl NetWorkload for LoadClient<'_> {
    type Hello = LoadHello;
    /// Every thread's part, in the order of the data connections.
    type Ends = Vec<Part>;
    type Data = Data;
    type Outcome = Outcome;
    const PANICKED: &'static str = "a load client thread panicked";
    const SERVED: crate::net::session::Served = SERVED;

    fn net(&self) -> &NetParams {
        &self.case.net
    }

    fn hello(&self, _: &Vec<Part>) -> LoadHello {
        LoadHello {
            kind: "hello".into(),
            version: PROTOCOL_VERSION,
            workload: "load".into(),
            case: self.case.clone(),
        }
    }

    fn prepare(&self) -> anyhow::Result<Vec<Part>> {
        mode::check_receiver(self.case.rx_mode).map_err(anyhow::Error::new)?;
        Ok(Vec::new())
    }

    /// The probe's connection first, then the flows' up and down, in the order the server
    /// accepts them.
    fn open_data(
        &self,
        addr: SocketAddr,
        accepted: &Accepted,
        parts: &mut Vec<Part>,
        stop: Stop,
    ) -> anyhow::Result<Data> {
        let case = self.case;
        let port = accepted.port.ok_or_else(|| {
            anyhow!("the server at {addr} answered without a data port: upgrade it to serve net load")
        })?;
        let data_addr = SocketAddr::new(addr.ip(), port);
        let (up, down) = case.flow_counts();
        let mut streams = Vec::with_capacity(1 + up + down);
        for _ in 0..1 + up + down {
            streams.push(data_connection(data_addr, stop)?);
        }
        set_congestion(case, &streams[1..]).map_err(anyhow::Error::new)?;
        let (probe_sender, probe_receiver) = probe_ends(case, &streams[0])?;
        parts.push(Part::Probe(probe_sender, probe_receiver));
        for _ in 0..up {
            parts.push(Part::Flow(Bulk::Send(flow_sender(case)?)));
        }
        for stream in &streams[1 + up..] {
            parts.push(Part::Flow(Bulk::Recv(flow_receiver(case, stream)?)));
        }
        Ok(Data {
            streams,
            load_on: AtomicBool::new(false),
        })
    }

    fn spawn_clients<'scope, 'env>(
        &'env self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        shared: &'env Shared<'env>,
        data: &'env Data,
        parts: Vec<Part>,
    ) -> Handles<'scope, Outcome> {
        let idle = Duration::from_millis(self.case.idle_ms);
        let interval = self.case.probe_interval_us.map(Duration::from_micros);
        let size = self.case.size;
        parts
            .into_iter()
            .enumerate()
            .map(|(i, part)| {
                let stream = &data.streams[i];
                std::thread::Builder::new()
                    .name(format!("iopath-load-client-{i}"))
                    .spawn_scoped(scope, move || {
                        let ctx = Ctx::client(shared, &self.case.net);
                        let result = match part {
                            Part::Probe(sender, receiver) => {
                                let ctx = Ctx { perf: false, ..ctx };
                                probe(
                                    &ctx,
                                    stream,
                                    (sender, receiver),
                                    (idle, interval),
                                    &data.load_on,
                                    shared.failed,
                                )
                                .map(Outcome::Probe)
                            }
                            Part::Flow(end) => flow(&ctx, i, stream, end, size, data, shared).map(Outcome::Flow),
                        };
                        if result.is_err() {
                            shared.failed.store(true, Ordering::SeqCst);
                            stream.shutdown(Shutdown::Both).ok();
                        }
                        result
                    })
            })
            .collect()
    }

    fn wake(&self, data: &Data) {
        shut_down_all(&data.streams);
    }

    fn data_fds(&self, data: &Data) -> Option<Vec<std::os::fd::RawFd>> {
        fds_of(&data.streams)
    }

    fn observe(&self, clients: &[Outcome], server: &ServerReport, window_s: f64, tsc_hz: Option<f64>) -> Observation {
        observe(self.case, clients, server, window_s, tsc_hz)
    }

    /// The flows' bytes received inside the window.
    fn payload(&self, obs: &Observation, _server: &ServerReport) -> Result<f64, String> {
        obs.value(names::LOAD_GBPS, Role::System)
            .zip(obs.value(names::WINDOW_S, Role::System))
            .map(|(gbps, s)| gbps * 1e9 / 8.0 * s)
            .ok_or_else(|| "no flow moved data inside the window".to_string())
    }
}

/// The probe: round trips on the idle link for `idle` from the start gate, then it says the
/// load may start (`load_on`) and times the round trips inside the window (the ramp between
/// is not recorded); it closes its connection when the window closes.
fn probe(
    ctx: &Ctx<'_>,
    stream: &TcpStream,
    (mut sender, mut receiver): (Box<dyn Sender>, Box<dyn Receiver>),
    (idle, interval): (Duration, Option<Duration>),
    load_on: &AtomicBool,
    failed: &AtomicBool,
) -> io::Result<ProbeOutcome> {
    let fd = stream.as_raw_fd();
    let mut meter = Meter::start(ctx, Role::Client, 0)?;
    let (mut idle_hist, mut loaded) = (LatencyHistogram::new(), LatencyHistogram::new());
    let mut round_trip = |seq: u64| -> io::Result<Duration> {
        let sent = Instant::now();
        sender.send(fd, seq)?;
        if !receiver.recv(fd, seq)? {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the probe's connection",
            ));
        }
        Ok(sent.elapsed())
    };
    let started = Instant::now();
    let idle_until = started + idle;
    let mut pace = Pace {
        interval,
        next: started,
    };
    let mut seq = 0u64;
    while pace.wait(idle_until, failed) {
        idle_hist.record_ns(nanos(round_trip(seq)?));
        seq += 1;
    }
    load_on.store(true, Ordering::SeqCst);
    pace.next = Instant::now();
    loop {
        let open = meter.tick(|| 0);
        if meter.closed() || failed.load(Ordering::Relaxed) {
            break;
        }
        if !pace.wait(Instant::now() + PACE_SLICE, failed) {
            continue;
        }
        let took = round_trip(seq)?;
        if open {
            loaded.record_ns(nanos(took));
        }
        seq += 1;
    }
    stream.shutdown(Shutdown::Write).ok();
    let syscalls = sender.counts().syscalls + receiver.counts().syscalls;
    Ok(ProbeOutcome {
        idle: idle_hist,
        loaded,
        metered: meter.finish(syscalls),
    })
}

/// The longest the probe sleeps between looks at its window and the run's failure flag.
const PACE_SLICE: Duration = Duration::from_millis(5);

/// `--probe-rate`'s schedule: round trips start `interval` apart; one that is late (the last
/// took longer than an interval) starts at once and the next an interval after it, so slow
/// round trips are never made up for by a burst.
struct Pace {
    interval: Option<Duration>,
    next: Instant,
}

impl Pace {
    /// Sleep until the next round trip is due, but not past `until`; whether it is due (and
    /// then the one after it is scheduled). False at `until` or when the run has failed.
    fn wait(&mut self, until: Instant, failed: &AtomicBool) -> bool {
        if failed.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        let Some(interval) = self.interval else {
            return now < until;
        };
        if self.next > now {
            std::thread::sleep(self.next.min(until) - now);
        }
        let now = Instant::now();
        if now < self.next || now >= until {
            return false;
        }
        let on_time = now - self.next < interval;
        self.next = if on_time { self.next } else { now } + interval;
        true
    }
}

/// A bulk flow's client end: past the gate, wait for the probe's idle pass to end, then send
/// until the window closes (up) or say `go` and receive until the server closes (down).
fn flow(
    ctx: &Ctx<'_>,
    index: usize,
    stream: &TcpStream,
    end: Bulk,
    size: u64,
    data: &Data,
    shared: &Shared<'_>,
) -> io::Result<Moved> {
    let meter = Meter::start(ctx, Role::Client, index)?;
    let over = || shared.window.ended();
    while !data.load_on.load(Ordering::SeqCst) {
        if over() || shared.failed.load(Ordering::Relaxed) {
            return Err(io::Error::other("the session ended before the load started"));
        }
        std::thread::sleep(WAIT_POLL);
    }
    if matches!(end, Bulk::Recv(_)) {
        (&*stream).write_all(&[server::GO])?;
    }
    bulk(meter, stream, end, size, &over, &|_| {})
}

/// Every figure of a load case: the probe's, the flows', each side's CPU, where threads ran.
fn observe(
    case: &LoadCase,
    clients: &[Outcome],
    server: &ServerReport,
    window_s: f64,
    tsc_hz: Option<f64>,
) -> Observation {
    let mut obs = Observation::default();
    let (mut idle, mut loaded) = (LatencyHistogram::new(), LatencyHistogram::new());
    let mut down_bytes = Vec::new();
    let (mut metered, mut flow_metered): (Vec<&Metered>, Vec<&Metered>) = (Vec::new(), Vec::new());
    let (mut verified, mut corrupt) = (0, 0);
    for outcome in clients {
        match outcome {
            Outcome::Probe(p) => {
                idle.merge(&p.idle);
                loaded.merge(&p.loaded);
                metered.push(&p.metered);
            }
            Outcome::Flow(m) => {
                // A receiver: a down flow.
                if let Some(r) = &m.recv_counts {
                    down_bytes.push(m.tally.bytes);
                    verified += r.verified_messages;
                    corrupt += r.corrupt_messages;
                }
                metered.push(&m.metered);
                flow_metered.push(&m.metered);
            }
        }
    }
    push_probe(&mut obs, &idle, &loaded);
    obs.push(Metric::tool(names::WINDOW_S, Role::System, window_s, "s"));
    // Every flow's goodput at its receiver: the server's threads after the probe are the up
    // flows' receivers; the client's down flows received the rest.
    let (up, _) = case.flow_counts();
    let up_bytes = server.threads.iter().skip(1).take(up).map(|t| t.bytes);
    let flow_bytes: Vec<u64> = up_bytes.chain(down_bytes).collect();
    push_flows(&mut obs, &flow_bytes, window_s);

    let bytes: u64 = flow_bytes.iter().sum();
    let messages = bytes / case.size.max(1);
    // The flows' counters: the probe has no perf events, and its CPU is the flows' to judge
    // against nothing.
    push_client_counters(
        &mut obs,
        flow_metered.iter().map(|m| &m.counters),
        case.net.perf,
        "cycles_per_byte is",
        (bytes, messages, "msg"),
        tsc_hz,
    );
    push_server_metrics(&mut obs, server);
    if case.net.verify {
        push_verify_counts(&mut obs, Role::Client, verified, corrupt);
        push_verify_counts(
            &mut obs,
            Role::Server,
            server.verified_messages,
            server.corrupt_messages,
        );
        let corrupted = (corrupt + server.corrupt_messages > 0).then(|| {
            format!(
                "{} messages arrived corrupted (client {corrupt}, server {})",
                corrupt + server.corrupt_messages,
                server.corrupt_messages
            )
        });
        warn_verify(&mut obs, "the flows' rates and CPU", corrupted);
    }
    place(&mut obs, metered.iter().map(|m| m.placement.clone()), server, &case.net);
    obs
}

/// The probe's figures: percentiles idle and loaded, their ratio at p50 and p99, and round
/// trips per minute under load.
fn push_probe(obs: &mut Observation, idle: &LatencyHistogram, loaded: &LatencyHistogram) {
    // The CDF's quantiles, as rr stores them: the report draws both passes from them.
    let idle_names = cdf_quantiles_named(names::LATENCY_IDLE);
    let loaded_names = cdf_quantiles_named(names::LATENCY_LOADED);
    let why_idle = "the probe completed no round trip on the idle link";
    push_quantiles(obs, Role::System, idle, &idle_names, why_idle);
    push_quantiles(obs, Role::System, loaded, &loaded_names, NO_LOADED_ROUND_TRIP);
    for (name, q) in [
        (names::LATENCY_INFLATION_P50, 0.5),
        (names::LATENCY_INFLATION_P99, 0.99),
    ] {
        let ratio = loaded.quantile_us(q).zip(idle.quantile_us(q)).map(|(l, i)| l / i);
        obs.push(quantile(name, ratio, "ratio", "a pass without round trips"));
    }
    let rpm = loaded.trimmed_mean_us(RPM_KEEP).map(|us| 60e6 / us);
    obs.push(quantile(names::RPM, rpm, "rt/min", NO_LOADED_ROUND_TRIP));
    obs.push(Metric::tool(
        names::TRANSACTIONS,
        Role::Client,
        loaded.count() as f64,
        "txn",
    ));
}

/// A figure of the path (role system), unavailable with `why` when there is none.
fn quantile(name: &str, value: Option<f64>, unit: &str, why: &str) -> Metric {
    match value {
        Some(v) => Metric::tool(name, Role::System, v, unit),
        None => Metric::unavailable(name, Role::System, unit, why),
    }
}

/// The flows' figures from the bytes each received inside the window: the sum, the slowest
/// and fastest flow, and Jain's fairness index ((Σx)² / (n Σx²): 1 when all are equal, 1/n
/// when one takes everything).
fn push_flows(obs: &mut Observation, flow_bytes: &[u64], window_s: f64) {
    let gbps: Vec<f64> = flow_bytes.iter().map(|b| *b as f64 * 8.0 / window_s / 1e9).collect();
    let why = if window_s > 0.0 {
        "no flow received anything inside the window"
    } else {
        "the window did not open"
    };
    let any = window_s > 0.0 && flow_bytes.iter().any(|b| *b > 0);
    let figure = |name: &str, value: f64, unit: &str| quantile(name, any.then_some(value), unit, why);
    let sum: f64 = gbps.iter().sum();
    obs.push(figure(names::LOAD_GBPS, sum, "Gbit/s"));
    obs.push(figure(
        names::FLOW_MIN_GBPS,
        gbps.iter().copied().fold(f64::INFINITY, f64::min),
        "Gbit/s",
    ));
    obs.push(figure(
        names::FLOW_MAX_GBPS,
        gbps.iter().copied().fold(0.0, f64::max),
        "Gbit/s",
    ));
    obs.push(figure(
        names::JAIN_INDEX,
        crate::net::session::observe::jain_index(&gbps).unwrap_or(f64::NAN),
        "index",
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Jain's index is 1 for equal flows and 1/n when one flow has it all; the figures are
    /// unavailable, not zero or NaN, when the window never opened.
    #[test]
    fn fairness_and_goodput_from_the_flows_bytes() {
        let mut obs = Observation::default();
        push_flows(&mut obs, &[1_000_000_000, 1_000_000_000], 1.0);
        assert_eq!(obs.value(names::LOAD_GBPS, Role::System), Some(16.0));
        assert_eq!(obs.value(names::JAIN_INDEX, Role::System), Some(1.0));
        let mut skewed = Observation::default();
        push_flows(&mut skewed, &[1_000_000_000, 0, 0, 0], 2.0);
        assert_eq!(skewed.value(names::JAIN_INDEX, Role::System), Some(0.25));
        assert_eq!(skewed.value(names::FLOW_MIN_GBPS, Role::System), Some(0.0));
        let mut none = Observation::default();
        push_flows(&mut none, &[0, 0], 0.0);
        let jain = none.get(names::JAIN_INDEX, Role::System).unwrap();
        assert!(jain.value.is_none(), "{jain:?}");
    }

    /// The probe's inflation is loaded over idle; RPM is a minute over the trimmed mean.
    #[test]
    fn inflation_and_rpm_from_the_probe() {
        let (mut idle, mut loaded) = (LatencyHistogram::new(), LatencyHistogram::new());
        for _ in 0..100 {
            idle.record_ns(100_000);
            loaded.record_ns(1_000_000);
        }
        let mut obs = Observation::default();
        push_probe(&mut obs, &idle, &loaded);
        let inflation = obs.value(names::LATENCY_INFLATION_P50, Role::System).unwrap();
        assert!((inflation - 10.0).abs() < 0.1, "{inflation}");
        let rpm = obs.value(names::RPM, Role::System).unwrap();
        assert!((rpm - 60_000.0).abs() < 600.0, "{rpm}");
    }

    fn case() -> LoadCase {
        LoadCase {
            flows: 2,
            direction: crate::case::Direction::Up,
            mode: CopyMode::OneCopy,
            rx_mode: RxMode::Scatter,
            size: 64 << 10,
            probe_size: 64,
            idle_ms: 200,
            probe_interval_us: None,
            congestion: None,
            net: NetParams {
                warmup_ms: 400,
                duration_ms: 300,
                ..NetParams::for_test()
            },
        }
    }

    /// A paced probe never runs ahead of its schedule: a late round trip is not made up for,
    /// so however busy the machine, 20 ms at one a millisecond holds at most 21; unpaced, the
    /// schedule is only the deadline.
    #[test]
    fn the_probes_pace_never_bursts_past_its_schedule() {
        let failed = AtomicBool::new(false);
        let start = Instant::now();
        let mut pace = Pace {
            interval: Some(Duration::from_millis(1)),
            next: start,
        };
        let until = start + Duration::from_millis(20);
        let mut due = 0;
        while Instant::now() < until {
            if pace.wait(until, &failed) {
                due += 1;
            }
        }
        assert!((1..=21).contains(&due), "{due}");
        let mut unpaced = Pace {
            interval: None,
            next: start,
        };
        assert!(!unpaced.wait(start, &failed));
        failed.store(true, Ordering::Relaxed);
        assert!(!pace.wait(Instant::now() + Duration::from_secs(1), &failed));
    }

    #[test]
    fn limits_name_the_flag_and_what_is_accepted() {
        assert_eq!(check_case(&case()), Ok(()));
        for (bad, needle) in [
            (LoadCase { flows: 65, ..case() }, "1 to 64 flows"),
            (LoadCase { idle_ms: 500, ..case() }, "the first part of the warm-up"),
            (
                LoadCase {
                    probe_size: 1 << 20,
                    ..case()
                },
                "--probe-size 1 B to 64 KiB",
            ),
        ] {
            let e = check_case(&bad).unwrap_err();
            assert!(e.contains(needle), "{e}");
        }
        let both = LoadCase {
            direction: crate::case::Direction::Both,
            ..case()
        };
        assert!(buffer_bytes(&both, Role::Client) > buffer_bytes(&case(), Role::Client));
    }
}
