//! `net udp-stream`: client threads send numbered datagrams of one size to server threads, in
//! a UDP send mode (`net::dgram::sender`) and a UDP receive mode (`net::dgram::receiver`),
//! paced by `--rate` (a user-space gap between sends) or as fast as the sender goes. Each
//! client thread has its own socket and its own server socket (`net::dgram::session`: one
//! port, one connected socket per flow), whose `SeqTracker` counts what arrived: received,
//! duplicates, reordered, RFC 3550 jitter, verify failures.
//!
//! Loss is counted per flow over the whole session, exactly: after every client thread has
//! stopped the client says how many datagrams each sent (`sent`), the server drains its
//! sockets until they are quiet, and lost = sent − distinct received. Rates and CPU per
//! datagram are each end's own measured window.
//!
//! The client side runs through the session `Coordinator` (local topologies and `--connect`);
//! `server.rs` is the session `net serve` runs for a `udp-stream` hello.

mod client;
mod server;

pub use server::SERVED;

use crate::case::{NetParams, UdpSendMode, UdpStreamCase};
use crate::net::auth::Credentials;
use crate::net::control::{ControlChannel, ServerReport};
use crate::net::dgram::session::{self as udp, UdpHello};
use crate::net::dgram::{self, DgramSender};
use crate::net::session::coordinator::{Accepted, Coordinator, Handles, NetWorkload, Shared};
use crate::net::session::observe::{
    self, place, push_client_counters, push_server_metrics, refusal_as_observation, warn_verify, Headline,
};
use crate::observation::names;
use crate::observation::{Metric, Observation, Role, Source, Unsupported, WarningKind};
use crate::stop::Stop;
use anyhow::anyhow;
use client::ClientOutcome;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The hello's `workload`.
pub const HELLO: &str = "udp-stream";
/// The longest window or warm-up a case may ask for.
const MAX_PHASE_MS: u64 = 24 * 3600 * 1000;
/// The most datagrams per system call.
pub const MAX_BATCH: usize = 1024;
/// GSO: the most segments one call carries.
pub const MAX_GSO_SEGMENTS: usize = 64;
/// The highest paced rate, datagrams per second in total.
pub const MAX_RATE: f64 = 100e6;

/// Whether a case can run: limits on every parameter. The CLI runs it before anything runs,
/// a server before it answers `ready`.
pub fn check_case(case: &UdpStreamCase) -> Result<(), String> {
    const MIN_DATAGRAM: u64 = UdpStreamCase::MIN_SIZE;
    const MAX_DATAGRAM: u64 = UdpStreamCase::MAX_SIZE;
    if !(MIN_DATAGRAM..=MAX_DATAGRAM).contains(&case.size) {
        return Err(format!(
            "--size {}: a datagram is {MIN_DATAGRAM} B (its sequence number and send time) to {MAX_DATAGRAM} B (64 KiB less the IPv4 and UDP headers)",
            case.size
        ));
    }
    if case.net.threads == 0 || case.net.threads > udp::MAX_FLOWS {
        return Err(format!(
            "--threads {}: accepted 1 to {} threads, each with its own socket",
            case.net.threads,
            udp::MAX_FLOWS
        ));
    }
    if case.batch == 0 || case.batch > MAX_BATCH {
        return Err(format!(
            "--batch {}: 1 to {MAX_BATCH} datagrams per system call",
            case.batch
        ));
    }
    if case.mode == UdpSendMode::Gso {
        if case.batch > MAX_GSO_SEGMENTS {
            return Err(format!(
                "--batch {} with --mode gso: one UDP_SEGMENT call carries at most {MAX_GSO_SEGMENTS} datagrams",
                case.batch
            ));
        }
        let mtu = match &case.net.endpoint {
            crate::case::Endpoint::Veth { link, .. } => Some(link.mtu.unwrap_or(1500) as u64),
            _ => None,
        };
        if let Some(mtu) = mtu.filter(|&m| case.size + dgram::IP_UDP_HEADERS as u64 > m) {
            return Err(format!(
                "--size {} with --mode gso over a veth of MTU {mtu}: a GSO segment must fit the MTU (at most {} B of payload: MTU − 28 for the IPv4 and UDP headers)",
                case.size,
                mtu - dgram::IP_UDP_HEADERS as u64
            ));
        }
    }
    if case.net.duration_ms == 0 || case.net.duration_ms > MAX_PHASE_MS || case.net.warmup_ms > MAX_PHASE_MS {
        return Err("duration must be between 1 ms and 24 h, warm-up at most 24 h".into());
    }
    if let Some(rate) = case.rate {
        let per_s = rate.datagrams_per_s(case.size);
        if per_s < case.net.threads as f64 || per_s > MAX_RATE {
            return Err(format!(
                "--rate {rate} with {} threads and {}-byte datagrams is {per_s:.0} datagrams/s: accepted from one per second per thread up to 100M in total",
                case.net.threads, case.size
            ));
        }
    }
    udp::check_rcvbuf(case.rcvbuf)?;
    Ok(())
}

/// Memory one end of a case holds: per thread, the datagram buffers of its sender or receiver
/// (`dgram::sender_bytes`/`receiver_bytes`: what they allocate) and, on the receiving end, the
/// socket buffer it asked for (charged like any memory, twice as the kernel doubles it).
pub fn buffer_bytes(case: &UdpStreamCase, role: Role) -> u64 {
    let per_thread = match role {
        Role::Client => dgram::sender_bytes(case.mode, case.size, case.batch),
        _ => dgram::receiver_bytes(case.rx_mode, case.size, case.batch)
            .saturating_add(case.rcvbuf.unwrap_or(0).saturating_mul(2)),
    };
    per_thread.saturating_mul(case.net.threads as u64)
}

/// Whether the buffers of `role`'s end fit in half of `headroom` (None skips the check).
pub fn check_memory(case: &UdpStreamCase, role: Role, headroom: Option<u64>) -> Result<(), String> {
    crate::net::session::data::check_buffers(
        &case.label(),
        buffer_bytes(case, role),
        role,
        headroom,
        "use smaller datagrams, a smaller batch or --rcvbuf, or fewer threads",
    )
}

/// The sender of one client thread; a mode the kernel refuses is `Unsupported`.
fn data_sender(case: &UdpStreamCase) -> anyhow::Result<Box<dyn DgramSender>> {
    dgram::sender(case.mode, case.size as usize, case.batch, case.net.verify)
        .map_err(|e| set_up_error(&format!("the {} send mode", case.mode), e))
}

/// A set-up error as the run reports it: the kernel's refusal typed, anything else a failure.
pub(crate) fn set_up_error(what: &str, e: io::Error) -> anyhow::Error {
    if let Some(refusal) = dgram::unsupported_in(&e) {
        return anyhow::Error::new(refusal);
    }
    match Unsupported::refused(what, &e) {
        Some(unsupported) => anyhow::Error::new(unsupported),
        None => anyhow!("{what} could not be set up: {e}"),
    }
}

/// Run one case. A stop ends it within about 100 ms in any phase, as `Err(Interrupted)`; a
/// mode the kernel refuses is an observation of unavailable figures.
pub fn run(case: &UdpStreamCase, stop: Stop, credentials: &Credentials) -> anyhow::Result<Observation> {
    check_case(case).map_err(|e| anyhow!(e))?;
    let client = UdpStreamClient::new(case);
    refusal_as_observation(Coordinator::new(&client, stop, credentials).run(), &HEADLINE)
}

/// The figures a udp-stream case the kernel cannot run says are unavailable.
const HEADLINE: [Headline; 3] = [
    (names::THROUGHPUT_GBPS, Role::System, "Gbit/s"),
    (names::DATAGRAMS_PER_S, Role::System, "datagrams/s"),
    (names::DATAGRAMS_LOST, Role::System, "datagrams"),
];

/// udp-stream as the session coordinator runs it.
struct UdpStreamClient<'a> {
    case: &'a UdpStreamCase,
    /// What each client thread sent in the whole session, as it stopped (said in `sent`).
    sent: Vec<AtomicU64>,
}

impl<'a> UdpStreamClient<'a> {
    fn new(case: &'a UdpStreamCase) -> Self {
        UdpStreamClient {
            case,
            sent: (0..case.net.threads).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// Made before the hello: every sender (a mode the kernel refuses ends the case there) and
/// every socket (their ports go in the hello).
pub(crate) struct Ends {
    senders: Vec<Box<dyn DgramSender>>,
    sockets: Vec<UdpSocket>,
    /// Their ports, named in the hello.
    ports: Vec<u16>,
}

/// The client's sockets, connected to the server's data port.
pub(crate) struct Data {
    sockets: Vec<UdpSocket>,
    /// Set when the run failed: every thread stops sending.
    quit: AtomicBool,
}

impl NetWorkload for UdpStreamClient<'_> {
    type Hello = UdpHello<UdpStreamCase>;
    type Ends = Ends;
    type Data = Data;
    type Outcome = ClientOutcome;
    const PANICKED: &'static str = "a udp-stream client thread panicked";
    const RX_COPIES: crate::measure::trace::RxCopies = crate::measure::trace::UDP_RX_COPIES;
    const SERVED: crate::net::session::Served = SERVED;

    fn net(&self) -> &NetParams {
        &self.case.net
    }

    fn hello(&self, ends: &Ends) -> Self::Hello {
        UdpHello::new(HELLO, self.case.clone(), ends.ports.clone())
    }

    fn prepare(&self) -> anyhow::Result<Ends> {
        let case = self.case;
        let senders = (0..case.net.threads)
            .map(|_| data_sender(case))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let sockets = udp::client_sockets(case.net.threads, udp::server_ip(&case.net)?)?;
        let ports = udp::ports(&sockets)?;
        Ok(Ends {
            senders,
            sockets,
            ports,
        })
    }

    fn open_data(&self, addr: SocketAddr, accepted: &Accepted, ends: &mut Ends, _stop: Stop) -> anyhow::Result<Data> {
        let port = accepted.port.ok_or_else(|| {
            anyhow!("the server at {addr} answered without a UDP data port: upgrade it to serve udp-stream")
        })?;
        let sockets = std::mem::take(&mut ends.sockets);
        udp::connect_all(&sockets, SocketAddr::new(addr.ip(), port))?;
        Ok(Data {
            sockets,
            quit: AtomicBool::new(false),
        })
    }

    fn spawn_clients<'scope, 'env>(
        &'env self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        shared: &'env Shared<'env>,
        data: &'env Data,
        ends: Ends,
    ) -> Handles<'scope, ClientOutcome> {
        let case = self.case;
        let pace = client::Pace::of(case);
        ends.senders
            .into_iter()
            .enumerate()
            .map(|(i, sender)| {
                let socket = &data.sockets[i];
                let sent = &self.sent[i];
                std::thread::Builder::new()
                    .name(format!("iopath-udp-client-{i}"))
                    .spawn_scoped(scope, move || {
                        let r = client::send_flow(case, shared, i, socket, sender, pace, &data.quit, sent);
                        if r.is_err() {
                            shared.failed.store(true, Ordering::SeqCst);
                        }
                        r
                    })
            })
            .collect()
    }

    fn wake(&self, data: &Data) {
        data.quit.store(true, Ordering::SeqCst);
    }

    /// Every client thread has stopped: say what each sent, so the server reckons loss.
    fn threads_done(&self, control: &mut ControlChannel) {
        let sent = self.sent.iter().map(|s| s.load(Ordering::SeqCst)).collect();
        udp::send_sent(control, sent).ok();
    }

    fn thread_refusal(&self, error: &io::Error) -> Option<Unsupported> {
        dgram::unsupported_in(error)
    }

    fn data_fds(&self, _data: &Data) -> Option<Vec<std::os::fd::RawFd>> {
        None
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

    /// The payload the server received inside its window; across `veth:peer=drop`, where
    /// nothing arrives by design, what the client sent inside its window.
    fn payload(&self, obs: &Observation, _server: &ServerReport) -> Result<f64, String> {
        if self.case.peer_drops() {
            return obs
                .value(names::BYTES_SENT, Role::Client)
                .ok_or_else(|| "the client counted no bytes".to_string());
        }
        obs.value(names::BYTES_RECEIVED, Role::Server)
            .ok_or_else(|| "the server counted no bytes".to_string())
    }
}

/// `total / count` per datagram, unavailable with a reason when nothing was counted.
fn per_datagram(name: &str, role: Role, unit: &str, source: Source, total: Result<f64, String>, count: u64) -> Metric {
    Metric::from_result(
        name,
        role,
        unit,
        source,
        total.and_then(|t| {
            if count == 0 {
                Err("no datagram inside the window".to_string())
            } else {
                Ok(t / count as f64)
            }
        }),
    )
}

/// CPU time (user + system, getrusage) per datagram and system calls per datagram of a role.
pub(crate) fn per_datagram_costs(
    role: Role,
    counters: &crate::measure::counters::CounterSample,
    syscalls: u64,
    datagrams: u64,
) -> [Metric; 2] {
    let cpu = counters.usage.clone().map(|u| (u.user + u.system).as_secs_f64() * 1e6);
    [
        per_datagram(
            names::CPU_US_PER_DATAGRAM,
            role,
            "us/datagram",
            Source::Rusage,
            cpu,
            datagrams,
        ),
        per_datagram(
            names::SYSCALLS_PER_DATAGRAM,
            role,
            "syscalls/datagram",
            Source::Tool,
            Ok(syscalls as f64),
            datagrams,
        ),
    ]
}

/// The client's figures, then the server's report merged in.
fn build_observation(
    case: &UdpStreamCase,
    clients: &[ClientOutcome],
    server: &ServerReport,
    window_s: f64,
    tsc_hz: Option<f64>,
) -> Observation {
    let mut obs = Observation::default();
    let datagrams: u64 = clients.iter().map(|c| c.window_datagrams).sum();
    push_sent(&mut obs, case, datagrams, window_s);
    push_send_costs(&mut obs, case, clients, datagrams, window_s, tsc_hz);
    push_zerocopy(&mut obs, clients);
    push_received(&mut obs, case, server);
    let placement = clients.iter().map(|c| c.metered.placement.clone());
    place(&mut obs, placement, server, &case.net);
    obs
}

/// What the client sent in the window, and at what rate (offered, when paced).
fn push_sent(obs: &mut Observation, case: &UdpStreamCase, datagrams: u64, window_s: f64) {
    let bytes = datagrams * case.size;
    obs.push(Metric::tool(
        names::DATAGRAMS_SENT,
        Role::Client,
        datagrams as f64,
        "datagrams",
    ));
    obs.push(Metric::tool(names::BYTES_SENT, Role::Client, bytes as f64, "B"));
    let rate = |v: f64| observe::per(v, window_s);
    obs.push(Metric::tool(
        names::DATAGRAMS_PER_S,
        Role::Client,
        rate(datagrams as f64),
        "datagrams/s",
    ));
    obs.push(Metric::tool(
        names::THROUGHPUT_GBPS,
        Role::Client,
        rate(bytes as f64 * 8.0) / 1e9,
        "Gbit/s",
    ));
    if let Some(r) = case.rate {
        // The method: a user-space gap between the sends of each thread (client.rs).
        obs.push(Metric::tool(
            names::OFFERED_DATAGRAMS_PER_S,
            Role::Client,
            r.datagrams_per_s(case.size),
            "datagrams/s",
        ));
        obs.push(Metric::tool(
            names::PACING_GAP_US,
            Role::Client,
            client::Pace::of(case).map_or(f64::NAN, |p| p.gap.as_secs_f64() * 1e6),
            "us",
        ));
    }
}

/// The client's costs: its counters, per datagram, per CPU-second and per cycle.
fn push_send_costs(
    obs: &mut Observation,
    case: &UdpStreamCase,
    clients: &[ClientOutcome],
    datagrams: u64,
    window_s: f64,
    tsc_hz: Option<f64>,
) {
    let bytes = datagrams * case.size;
    let rate = |v: f64| observe::per(v, window_s);
    let counters = push_client_counters(
        obs,
        clients.iter().map(|c| &c.metered.counters),
        case.net.perf,
        "cycles are",
        (bytes, datagrams, "datagram"),
        tsc_hz,
    );
    let syscalls = clients.iter().map(|c| c.metered.syscalls).sum();
    obs.metrics
        .extend(per_datagram_costs(Role::Client, &counters, syscalls, datagrams));
    // The udpgso_bench figures (report/claims.rs): bytes per CPU-second, where no PMU counts
    // cycles, and calls per second.
    obs.push(Metric::from_result(
        names::BYTES_PER_CPU_S,
        Role::Client,
        "B/cpu-s",
        Source::Rusage,
        counters
            .usage
            .clone()
            .and_then(|u| match (u.user + u.system).as_secs_f64() {
                cpu if cpu > 0.0 => Ok(bytes as f64 / cpu),
                _ => Err("no CPU time counted in the window".to_string()),
            }),
    ));
    obs.push(Metric::tool(
        names::CALLS_PER_S,
        Role::Client,
        rate(syscalls as f64),
        "calls/s",
    ));
    // Per cycle only where a PMU counted them: an estimate from CPU time is bytes_per_cpu_s again.
    let counted = obs
        .get(names::CYCLES_PER_BYTE, Role::Client)
        .filter(|m| m.source == Source::Pmu)
        .and_then(|m| m.value)
        .filter(|v| *v > 0.0);
    obs.push(Metric::from_result(
        names::BYTES_PER_CYCLE,
        Role::Client,
        "B/cycle",
        Source::Pmu,
        counted.map(|c| 1.0 / c).ok_or_else(|| {
            "cycles not counted: no PMU here (cycles_per_byte, if shown, is an estimate from CPU time)".to_string()
        }),
    ));
}

/// The zero-copy sends' completions, and a warning when the kernel copied them after all.
fn push_zerocopy(obs: &mut Observation, clients: &[ClientOutcome]) {
    if clients.iter().any(|c| c.zerocopy.is_some()) {
        let mut zc = crate::net::completions::CompletionCounts::default();
        for c in clients.iter().filter_map(|c| c.zerocopy.as_ref()) {
            zc.add(&c.completions);
        }
        observe::push_completion_counts(obs, &zc);
        obs.push(observe::copied_fraction(&zc));
        observe::warn_unexpected_completions(obs, &zc);
        if zc.copied > 0 {
            obs.warn(
                WarningKind::ZeroCopyCopied,
                format!(
                    "the kernel copied {} of {} zero-copy sends after all (loopback and veth deliver to a local socket by copying; --topology veth:peer=drop has no local delivery)",
                    zc.copied, zc.completed
                ),
            );
        }
    }
}

/// The server's report, its verification, and a warning when an unpaced sender lost datagrams.
fn push_received(obs: &mut Observation, case: &UdpStreamCase, server: &ServerReport) {
    push_server_metrics(obs, server);
    if case.net.verify {
        let corrupted = (server.corrupt_messages > 0).then(|| {
            format!(
                "{} datagrams arrived corrupted or malformed (of {} checked)",
                server.corrupt_messages,
                server.corrupt_messages + server.verified_messages
            )
        });
        warn_verify(obs, "CPU figures", corrupted);
        observe::push_verify_counts(obs, Role::Server, server.verified_messages, server.corrupt_messages);
    }
    let lost = obs.value(names::DATAGRAMS_LOST, Role::System).is_some_and(|l| l > 0.0);
    if lost && case.rate.is_none() && !case.peer_drops() {
        obs.warn(
            WarningKind::DatagramsLost,
            "unpaced, the sender outran the receiver (socket_drops counts what its socket buffer dropped)",
        );
    }
}
