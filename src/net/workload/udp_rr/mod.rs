//! `net udp-rr`: UDP request/response. Each client thread owns a UDP socket connected to a
//! server socket of its own and keeps `inflight` requests outstanding (closed loop) or sends
//! at `--rate` (open loop); each request is one datagram carrying a sequence number (the
//! `net::dgram` header), and the server answers it with one datagram of the response size
//! carrying the same number. A request whose reply has not come within the loss timeout is
//! lost: counted, and a new request takes its place, so a dropped datagram never hangs the
//! run. Replies that come after their timeout are counted late, repeated ones duplicate;
//! neither is timed.
//!
//! The session runs on the seam of every network workload (`Coordinator`, `SERVED`): the
//! client binds its sockets before the hello and names their ports in it; the server binds
//! one socket per client thread, all on one port (SO_REUSEPORT) and each connected to its
//! client socket, and answers `ready` with that port. The kernel hands a datagram to the
//! connected socket whose peer sent it, so each pair of sockets is a flow of its own.
//!
//! Datagrams are sent and received through `net::dgram`'s paths (`dgram::sender`,
//! `dgram::receiver`); the client matches replies to requests by the headers the receive
//! path records (`SeqTracker::arrivals`).

mod client;
mod server;

pub use server::SERVED;

use crate::case::{NetParams, UdpRecvMode, UdpRrCase, UdpSendMode};
use crate::measure::histogram::LatencyHistogram;
use crate::net::auth::Credentials;
use crate::net::control::ServerReport;
use crate::net::dgram::session::{self as udp, UdpHello};
use crate::net::dgram::{self, DgramReceiver, DgramSender};
use crate::net::session::coordinator::{Accepted, Coordinator, Handles, NetWorkload, Shared};
use crate::net::session::meter::Ctx;
use crate::net::session::observe::{
    finish_transactions, latency_then_counting_passes, push_transaction_rate, push_transaction_sides,
    push_window_transactions, Headline,
};
use crate::observation::names;
use crate::observation::{Metric, Observation, Role, Source, Unsupported, WarningKind};
use crate::stop::Stop;
use anyhow::{anyhow, bail};
use client::ClientOutcome;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::Duration;

/// The longest window or warm-up a case may ask for.
const MAX_PHASE_MS: u64 = 24 * 3600 * 1000;
/// The most requests in flight per client socket (the client matches each reply against its
/// outstanding requests one by one).
pub const MAX_INFLIGHT: usize = 64;
/// The loss timeout's bounds, in milliseconds.
pub const LOSS_TIMEOUT_MS: std::ops::RangeInclusive<u64> = 1..=10_000;
/// The default loss timeout.
pub const DEFAULT_LOSS_TIMEOUT_MS: u64 = 200;
/// How long a blocked receive waits before the thread looks at the window, the stop and its
/// timeouts again.
const POLL: Duration = Duration::from_millis(5);

/// The quantiles stored for the latency CDF, as `net rr` stores them (the report reads these
/// names).
pub use crate::net::session::observe::CDF_QUANTILES;

/// Whether a case can run: limits on every parameter and which send modes a request/response
/// exchange can use. Used by the CLI before running (exit 2) and by a server before `ready`.
pub fn check_case(case: &UdpRrCase) -> Result<(), String> {
    let sizes = dgram::HEADER as u64..=dgram::MAX_DATAGRAM as u64;
    for (flag, size) in [
        ("--request-size", case.request_size),
        ("--response-size", case.response_size),
    ] {
        if !sizes.contains(&size) {
            return Err(format!(
                "{flag} {size}: a datagram carries a 16-byte header (sequence number, send time), so accepted are {} to {} bytes (the largest IPv4 UDP payload)",
                sizes.start(),
                sizes.end()
            ));
        }
    }
    if case.net.threads == 0 || case.net.threads > udp::MAX_FLOWS {
        return Err(format!(
            "--threads {}: accepted 1 to {}",
            case.net.threads,
            udp::MAX_FLOWS
        ));
    }
    if case.inflight == 0 || case.inflight > MAX_INFLIGHT {
        return Err(format!(
            "--inflight {}: accepted 1 to {MAX_INFLIGHT} requests in flight per thread",
            case.inflight
        ));
    }
    if !LOSS_TIMEOUT_MS.contains(&case.loss_timeout_ms) {
        return Err(format!(
            "--loss-timeout {} ms: accepted 1 ms to 10 s",
            case.loss_timeout_ms
        ));
    }
    udp::check_rcvbuf(case.rcvbuf)?;
    if case.net.duration_ms == 0 || case.net.duration_ms > MAX_PHASE_MS || case.net.warmup_ms > MAX_PHASE_MS {
        return Err("duration must be between 1 ms and 24 h, warm-up at most 24 h".into());
    }
    if let Some(rate) = case.rate {
        if rate < case.net.threads as u64 || rate > 10_000_000 {
            return Err(format!(
                "--rate {rate} with {} threads: the rate is transactions per second in total, from one per second per thread up to 10000000",
                case.net.threads
            ));
        }
    }
    Ok(())
}

/// Memory one end of a case holds: per thread, the sender of its direction's datagrams and
/// the receiver of the other's (`dgram::sender_bytes`/`receiver_bytes`: what they allocate,
/// batches of up to `--inflight`), the socket buffer it asks for (twice: the kernel doubles
/// it) and, on the client, its slots of requests in flight.
pub fn buffer_bytes(case: &UdpRrCase, role: Role) -> u64 {
    let (sent, received) = match role {
        Role::Client => (case.request_size, case.response_size),
        _ => (case.response_size, case.request_size),
    };
    let slots = match role {
        Role::Client => (case.inflight as u64).saturating_mul(64),
        _ => 0,
    };
    let per_thread = dgram::sender_bytes(case.mode, sent, case.inflight)
        .saturating_add(dgram::receiver_bytes(case.rx_mode, received, case.inflight))
        .saturating_add(case.rcvbuf.unwrap_or(0).saturating_mul(2))
        .saturating_add(slots);
    per_thread.saturating_mul(case.net.threads as u64)
}

/// Whether the buffers of `role`'s end fit in half of `headroom` (None skips the check).
pub fn check_memory(case: &UdpRrCase, role: Role, headroom: Option<u64>) -> Result<(), String> {
    crate::net::session::data::check_buffers(
        &case.label(),
        buffer_bytes(case, role),
        role,
        headroom,
        "use smaller datagrams, fewer requests in flight, a smaller --rcvbuf or fewer threads",
    )
}

/// Send modes that cannot do anything of their own in a request/response exchange: the
/// reason, reported as `unavailable: <reason>` (a result, not an error). sendmmsg and gso
/// batch datagrams of one call, and with one request in flight there is never more than one
/// to send.
pub fn mode_refusal(case: &UdpRrCase) -> Option<Unsupported> {
    match case.mode {
        UdpSendMode::Sendmmsg | UdpSendMode::Gso if case.inflight == 1 => Some(Unsupported::new(
            format!("the {} send mode in udp-rr", case.mode),
            "with one request in flight there is one datagram to send at a time, so a call that batches datagrams batches nothing (use --inflight 2 or more)",
        )),
        _ => None,
    }
}

/// A set-up error of a datagram path: the kernel's refusal typed (an unavailable result),
/// anything else a failure.
fn path_error(what: String, e: io::Error) -> anyhow::Error {
    if let Some(refusal) = dgram::unsupported_in(&e) {
        return anyhow::Error::new(refusal);
    }
    match Unsupported::refused(&what, &e) {
        Some(u) => anyhow::Error::new(u),
        None => anyhow!("setting up {what}: {e}"),
    }
}

/// The sender of one direction's datagrams of `size` bytes: batches of up to `inflight`.
fn data_sender(case: &UdpRrCase, size: u64) -> anyhow::Result<Box<dyn DgramSender>> {
    dgram::sender(case.mode, size as usize, case.inflight, case.net.verify)
        .map_err(|e| path_error(format!("the {} send mode", case.mode), e))
}

/// The receiver of one direction's datagrams of `size` bytes.
fn data_receiver(case: &UdpRrCase, size: u64) -> anyhow::Result<Box<dyn DgramReceiver>> {
    dgram::receiver(case.rx_mode, size as usize, case.inflight, case.net.verify)
        .map_err(|e| path_error(format!("the {} receive mode", case.rx_mode), e))
}

/// A UDP socket of the case: the receive timeout the loops poll at, and SO_RCVBUF when the
/// case asks for one. Returns the receive buffer the kernel granted (SO_RCVBUF read back:
/// the kernel doubles what it is asked for, for its bookkeeping, and has a floor).
fn set_up_socket(socket: &UdpSocket, case: &UdpRrCase) -> io::Result<u64> {
    set_timeouts(socket)?;
    let sock = socket2::SockRef::from(socket);
    if let Some(bytes) = case.rcvbuf {
        sock.set_recv_buffer_size(bytes as usize)?;
    }
    Ok(sock.recv_buffer_size()? as u64)
}

/// The receive timeout the loops poll at, and how long a send may wait for room.
fn set_timeouts(socket: &UdpSocket) -> io::Result<()> {
    socket.set_read_timeout(Some(POLL))?;
    socket.set_write_timeout(Some(crate::net::session::DATA_IDLE_TIMEOUT))
}

/// The peer's socket is gone: a datagram to it came back as ICMP port unreachable, which a
/// connected UDP socket reports as ECONNREFUSED on its next call.
fn gone(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::ConnectionRefused
}

/// Run one case; a stop ends it within about 100 ms, as `Err(Interrupted)`. With counters
/// on, twice as `net rr` does: a latency pass without perf events, then a counting pass
/// (measure::counters::latency_then_counting).
pub fn run(case: &UdpRrCase, stop: Stop, credentials: &Credentials) -> anyhow::Result<Observation> {
    latency_then_counting_passes(&case.net, &HEADLINE, stop, |net| {
        let case = UdpRrCase { net, ..case.clone() };
        check_case(&case).map_err(|e| anyhow!(e))?;
        match mode_refusal(&case) {
            Some(refusal) => Err(anyhow::Error::new(refusal)),
            None => Coordinator::new(&UdpRrClient::new(&case), stop, credentials).run(),
        }
    })
}

/// The figures a udp-rr case the kernel cannot run says are unavailable.
const HEADLINE: [Headline; 4] = [
    (names::TRANSACTIONS_PER_S, Role::System, "txn/s"),
    (names::LATENCY_P50_US, Role::Client, "us"),
    (names::LATENCY_P99_US, Role::Client, "us"),
    (names::TXN_LOST, Role::Client, "txn"),
];

/// The observation of a case that cannot run here (what `run` makes of a refusal).
#[cfg(test)]
fn unavailable_observation(refusal: &Unsupported) -> Observation {
    crate::net::session::observe::unavailable_observation(refusal, &HEADLINE)
}

/// udp-rr as the session coordinator runs it.
struct UdpRrClient<'a> {
    case: &'a UdpRrCase,
    /// SO_RCVBUF as the kernel granted it on the client sockets.
    rcvbuf: OnceLock<u64>,
}

impl<'a> UdpRrClient<'a> {
    fn new(case: &'a UdpRrCase) -> Self {
        UdpRrClient {
            case,
            rcvbuf: OnceLock::new(),
        }
    }
}

/// One client thread's socket and datagram paths.
struct End {
    socket: UdpSocket,
    sender: Box<dyn DgramSender>,
    receiver: Box<dyn DgramReceiver>,
}

/// What the client threads share once the sockets are connected.
struct Data {
    /// Open loop: each thread sends every `gap`, the threads staggered across it.
    gap: Option<Duration>,
}

impl<'a> NetWorkload for UdpRrClient<'a> {
    type Hello = UdpHello<UdpRrCase>;
    type Ends = Vec<End>;
    type Data = Data;
    type Outcome = ClientOutcome;
    const PANICKED: &'static str = "a udp-rr client thread panicked";
    const RX_COPIES: crate::measure::trace::RxCopies = crate::measure::trace::UDP_RX_COPIES;
    const SERVED: crate::net::session::Served = SERVED;

    fn net(&self) -> &NetParams {
        &self.case.net
    }

    fn hello(&self, ends: &Vec<End>) -> UdpHello<UdpRrCase> {
        let ports = ends
            .iter()
            .filter_map(|e| Some(e.socket.local_addr().ok()?.port()))
            .collect();
        UdpHello::new("udp-rr", self.case.clone(), ports)
    }

    /// The client sockets (their ports go into the hello) and every sender and receiver: a
    /// mode the kernel refuses ends the case here, before the server is asked.
    fn prepare(&self) -> anyhow::Result<Vec<End>> {
        let case = self.case;
        let sockets = udp::client_sockets(case.net.threads, udp::server_ip(&case.net)?)?;
        sockets
            .into_iter()
            .map(|socket| {
                Ok(End {
                    socket,
                    sender: data_sender(case, case.request_size)?,
                    receiver: data_receiver(case, case.response_size)?,
                })
            })
            .collect()
    }

    fn open_data(
        &self,
        addr: SocketAddr,
        accepted: &Accepted,
        ends: &mut Vec<End>,
        _stop: Stop,
    ) -> anyhow::Result<Data> {
        let case = self.case;
        if !addr.is_ipv4() {
            bail!("net udp-rr speaks IPv4 only; {addr} is an IPv6 address");
        }
        let port = accepted.port.ok_or_else(|| {
            anyhow!(
                "the server at {addr} answered without a data port: it is an older iopath that does not serve udp-rr"
            )
        })?;
        let server = SocketAddr::new(addr.ip(), port);
        let mut rcvbuf = 0;
        for end in ends.iter() {
            end.socket.connect(server)?;
            rcvbuf = set_up_socket(&end.socket, case)?;
        }
        let gap = case
            .rate
            .map(|r| Duration::from_secs_f64(case.net.threads as f64 / r as f64));
        self.rcvbuf.set(rcvbuf).ok();
        Ok(Data { gap })
    }

    /// The server threads' windows open before the client's, so every request the client
    /// times finds a server counting.
    fn measure_before_open(&self) -> bool {
        true
    }

    fn spawn_clients<'scope, 'env>(
        &'env self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        shared: &'env Shared<'env>,
        data: &'env Data,
        ends: Vec<End>,
    ) -> Handles<'scope, ClientOutcome> {
        let case = self.case;
        let failed = shared.failed;
        ends.into_iter()
            .enumerate()
            .map(|(i, end)| {
                let schedule = client::Schedule {
                    inflight: case.inflight,
                    gap: data.gap,
                    phase: data
                        .gap
                        .map_or(Duration::ZERO, |g| g.mul_f64(i as f64 / case.net.threads as f64)),
                    loss_timeout: Duration::from_millis(case.loss_timeout_ms),
                };
                std::thread::Builder::new()
                    .name(format!("iopath-udp-rr-client-{i}"))
                    .spawn_scoped(scope, move || {
                        let ctx = Ctx::client(shared, &case.net);
                        let End {
                            socket,
                            sender,
                            receiver,
                        } = end;
                        let r = client::run(&ctx, i, &socket, sender, receiver, &schedule, failed);
                        if r.is_err() {
                            failed.store(true, Ordering::SeqCst);
                        }
                        r
                    })
            })
            .collect()
    }

    /// Every thread wakes within `POLL` by itself (its socket's receive timeout).
    fn wake(&self, _data: &Data) {}

    fn thread_refusal(&self, error: &io::Error) -> Option<Unsupported> {
        dgram::unsupported_in(error)
    }

    /// No TCP connection carries the data.
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
        let mut obs = build_observation(self.case, clients, server, window_s, tsc_hz);
        if let Some(&granted) = self.rcvbuf.get() {
            obs.push(rcvbuf_metric(Role::Client, granted));
        }
        obs
    }

    /// The request and response bytes of the transactions counted in the window.
    fn payload(&self, obs: &Observation, _server: &ServerReport) -> Result<f64, String> {
        let transactions = obs.value(names::TRANSACTIONS, Role::Client).unwrap_or(0.0);
        Ok(transactions * (self.case.request_size + self.case.response_size) as f64)
    }
}

/// Both sides' counts into the observation.
fn build_observation(
    case: &UdpRrCase,
    clients: &[ClientOutcome],
    server: &ServerReport,
    window_s: f64,
    tsc_hz: Option<f64>,
) -> Observation {
    let mut obs = Observation::default();
    let sum = |f: fn(&ClientOutcome) -> u64| clients.iter().map(f).sum::<u64>();
    let transactions = sum(|c| c.transactions);
    let lost = sum(|c| c.lost);
    let mut latency = LatencyHistogram::new();
    for c in clients {
        latency.merge(&c.latency);
    }
    push_transaction_rate(&mut obs, transactions, &latency, window_s);
    push_window_transactions(&mut obs, window_s, transactions);
    obs.push(Metric::tool(
        names::REQUESTS_SENT,
        Role::Client,
        sum(|c| c.sent) as f64,
        "datagrams",
    ));
    obs.push(Metric::tool(names::TXN_LOST, Role::Client, lost as f64, "txn"));
    obs.push(Metric::from_result(
        names::TXN_LOST_FRACTION,
        Role::Client,
        "fraction",
        Source::Tool,
        if transactions + lost == 0 {
            Err("no transaction completed or timed out inside the window".to_string())
        } else {
            Ok(lost as f64 / (transactions + lost) as f64)
        },
    ));
    obs.push(Metric::tool(
        names::REPLIES_LATE,
        Role::Client,
        sum(|c| c.late) as f64,
        "datagrams",
    ));
    obs.push(Metric::tool(
        names::REPLIES_DUPLICATE,
        Role::Client,
        sum(|c| c.duplicates) as f64,
        "datagrams",
    ));
    let drops = clients.iter().map(|c| c.rxq_drops).collect::<Option<Vec<u64>>>();
    obs.push(socket_drops(Role::Client, drops.map(|d| d.iter().sum())));
    if let Some(rate) = case.rate {
        obs.push(Metric::tool("offered_per_s", Role::Client, rate as f64, "txn/s"));
        let shed = sum(|c| c.shed);
        obs.push(Metric::tool("shed", Role::Client, shed as f64, "txn"));
        if shed > 0 {
            obs.warn(WarningKind::Starved, format!(
                "{shed} sends were shed: {} requests were already in flight on their socket when the next was due (the server does not keep up with --rate {rate}, or replies are being lost)",
                case.inflight
            ));
        }
    }
    if lost > 0 {
        obs.warn(
            WarningKind::RequestErrors,
            format!(
                "{lost} of {} transactions lost (no reply within {} ms): the latency percentiles are of the answered ones",
                transactions + lost,
                case.loss_timeout_ms
            ),
        );
    }

    let bytes = transactions * (case.request_size + case.response_size);
    push_transaction_sides(
        &mut obs,
        clients.iter().map(|c| &c.metered),
        case.net.perf,
        (bytes, transactions),
        tsc_hz,
        server,
    );
    let metered = clients.iter().map(|c| &c.metered);
    finish_transactions(
        &mut obs,
        metered,
        (sum(|c| c.verified), sum(|c| c.corrupt)),
        server,
        &case.net,
    );
    obs
}

/// The datagrams the kernel has dropped at a socket so far: SO_MEMINFO's count (no datagram
/// needs to arrive after the drops), else SO_RXQ_OVFL's as the last datagram carried it.
fn drops_now(fd: std::os::fd::RawFd, receiver: &dyn DgramReceiver) -> Option<u64> {
    crate::sys::udp::socket_drops(fd).ok().or(receiver.kernel_drops())
}

/// Datagrams the kernel dropped at a role's sockets for want of receive-buffer room inside
/// the window (`drops_now` at its close less at its open).
fn socket_drops(role: Role, drops: Option<u64>) -> Metric {
    Metric::from_result(
        names::SOCKET_DROPS,
        role,
        "datagrams",
        Source::Kernel,
        drops.map(|d| d as f64).ok_or_else(|| {
            "the kernel gave no drop count (SO_MEMINFO and SO_RXQ_OVFL), or a socket never saw the window".to_string()
        }),
    )
}

/// SO_RCVBUF as the kernel granted it on a role's sockets (read back with getsockopt).
fn rcvbuf_metric(role: Role, granted: u64) -> Metric {
    Metric {
        source: Source::Kernel,
        ..Metric::tool(names::RCVBUF_BYTES, role, granted as f64, "B")
    }
}

/// The receive mode a send mode runs with when none is named: the batching one for the
/// batching send modes, plain recv otherwise.
pub fn paired_rx(mode: UdpSendMode) -> UdpRecvMode {
    match mode {
        mode if mode.batches() => UdpRecvMode::Recvmmsg,
        _ => UdpRecvMode::Recv,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case() -> UdpRrCase {
        UdpRrCase {
            mode: UdpSendMode::Send,
            rx_mode: UdpRecvMode::Recv,
            request_size: 64,
            response_size: 64,
            inflight: 1,
            rate: None,
            loss_timeout_ms: DEFAULT_LOSS_TIMEOUT_MS,
            rcvbuf: None,
            net: NetParams {
                verify: true,
                ..NetParams::for_test()
            },
        }
    }

    #[test]
    fn limits_name_what_is_accepted() {
        assert_eq!(check_case(&case()), Ok(()));
        let err = check_case(&UdpRrCase {
            request_size: 8,
            ..case()
        })
        .unwrap_err();
        assert!(err.contains("--request-size 8") && err.contains("16 to 65507"), "{err}");
        let err = check_case(&UdpRrCase { inflight: 65, ..case() }).unwrap_err();
        assert!(err.contains("accepted 1 to 64"), "{err}");
        let err = check_case(&UdpRrCase {
            loss_timeout_ms: 0,
            ..case()
        })
        .unwrap_err();
        assert!(err.contains("--loss-timeout"), "{err}");
    }

    #[test]
    fn batching_modes_with_one_request_in_flight_are_unavailable_with_the_reason() {
        for mode in [UdpSendMode::Sendmmsg, UdpSendMode::Gso] {
            let refusal = mode_refusal(&UdpRrCase { mode, ..case() }).expect("refused");
            assert!(refusal.to_string().contains("--inflight 2"), "{refusal}");
            assert!(mode_refusal(&UdpRrCase {
                mode,
                inflight: 2,
                ..case()
            })
            .is_none());
        }
        for mode in [
            UdpSendMode::Send,
            UdpSendMode::Sendmsg,
            UdpSendMode::Zerocopy,
            UdpSendMode::Uring,
        ] {
            assert!(mode_refusal(&UdpRrCase { mode, ..case() }).is_none(), "{mode}");
        }
        let obs = unavailable_observation(
            &mode_refusal(&UdpRrCase {
                mode: UdpSendMode::Gso,
                ..case()
            })
            .unwrap(),
        );
        let m = obs.get(names::LATENCY_P50_US, Role::Client).unwrap();
        assert_eq!(m.value, None);
        assert!(
            matches!(&m.source, Source::Unavailable(r) if r.contains("batches nothing")),
            "{:?}",
            m.source
        );
    }

    /// The hello the client sends is the one the server's parser reads, ports included.
    #[test]
    fn the_hello_parses_back_with_its_ports() {
        let hello = UdpHello::new("udp-rr", case(), vec![4000, 4001]);
        let line = serde_json::to_vec(&hello).unwrap();
        let decoded = crate::net::session::served::decode_hello(&line, &[SERVED]).unwrap();
        let h = decoded.case::<UdpHello<UdpRrCase>>().expect("a udp-rr hello");
        assert_eq!(h.case, case());
        assert_eq!(h.ports, [4000, 4001]);
    }
}
