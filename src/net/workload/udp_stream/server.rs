//! The serving end of a udp-stream session, run by `iopath net serve` (and by the in-process
//! server of loopback, netns and veth runs) when a hello names `udp-stream`: one UDP socket
//! per client thread on the session's data port, one thread per socket receiving into its
//! flow's `SeqTracker`, following the client's window, draining after the client's `sent`,
//! then a report of what arrived and what was lost.

use super::{check_case, check_memory, per_datagram_costs, set_up_error, HELLO};
use crate::case::UdpStreamCase;
use crate::net::control::{ControlChannel, ServerReport, ThreadTally};
use crate::net::dgram::session::{self as udp, ServerSocket, UdpHello};
use crate::net::dgram::{self, DgramReceiver, SeqCounts, SeqTracker};
use crate::net::session::handshake::RefusalKind;
use crate::net::session::meter::{Meter, Metered};
use crate::net::session::served::{self, Followed, ServedThread, ServedWorkload, Until};
use crate::net::session::{Served, Session};
use crate::observation::names;
use crate::observation::{Metric, Role, Source, Unsupported};
use anyhow::anyhow;
use std::io;
use std::os::fd::AsRawFd;

/// The udp-stream server side, as `net serve` and the local runs serve it.
pub const SERVED: Served = served::entry::<UdpStreamServer>();

struct UdpStreamServer;

impl ServedWorkload for UdpStreamServer {
    type Hello = UdpHello<UdpStreamCase>;
    type State = Vec<ServerSocket>;
    type Part = Box<dyn DgramReceiver>;
    type Outcome = FlowOutcome;
    const HELLOS: &'static [&'static str] = &[HELLO];
    const THREAD: &'static str = "iopath-udp-server";
    const UNTIL: Until = Until::Sent;
    const RX_COPIES: crate::measure::trace::RxCopies = crate::measure::trace::UDP_RX_COPIES;

    /// The case and the client's UDP ports.
    fn decode(workload: &'static str, line: &[u8]) -> Result<Self::Hello, String> {
        served::whole_hello(workload, line)
    }

    fn net(hello: &Self::Hello) -> &crate::case::NetParams {
        &hello.case.net
    }

    /// The limits, the hello's client ports, and the receive buffers the case would take
    /// here, against this server's headroom.
    fn check(h: &Self::Hello, headroom: Option<u64>) -> Result<(), String> {
        check_case(&h.case)?;
        crate::net::dgram::session::check_ports(&h.ports, h.case.net.threads)?;
        check_memory(&h.case, Role::Server, headroom)
    }

    fn prepare(
        h: &Self::Hello,
        control: &mut ControlChannel,
        _: &Session<'_>,
    ) -> anyhow::Result<(Vec<ServerSocket>, Vec<Self::Part>)> {
        let case = &h.case;
        // Every receiver before `ready`: a receive mode this kernel refuses is answered so.
        let receivers = match (0..case.net.threads)
            .map(|_| dgram::receiver(case.rx_mode, case.size as usize, case.batch, case.net.verify))
            .collect::<io::Result<Vec<_>>>()
        {
            Ok(r) => r,
            Err(e) => {
                let e = set_up_error(&format!("the {} receive mode", case.rx_mode), e);
                return Err(match e.downcast::<Unsupported>() {
                    Ok(refusal) => served::unavailable(control, refusal),
                    Err(e) => crate::net::session::handshake::refuse(control, RefusalKind::SetUp, format!("{e:#}")),
                });
            }
        };
        // Each receiver sets its socket up on its first call (SO_RXQ_OVFL; UDP_GRO for gro).
        let sockets = udp::open_udp_port(control, &h.ports, case.rcvbuf)?;
        Ok((sockets, receivers))
    }

    /// The kernel's UDP counters of this end's namespace (this thread lives in it):
    /// RcvbufErrors and InErrors say what the kernel dropped, whatever the sockets say.
    fn push_probes(system: &mut crate::measure::window::SystemProbes) {
        crate::measure::system::push_udp_probe(system, None);
    }

    fn serve_thread(
        h: &Self::Hello,
        sockets: &Vec<ServerSocket>,
        receiver: Self::Part,
        thread: &ServedThread<'_>,
    ) -> anyhow::Result<FlowOutcome> {
        receive_flow(thread, &sockets[thread.index], receiver, h.case.size).map_err(|e| anyhow!("server: {e}"))
    }

    fn report(
        h: &Self::Hello,
        sockets: Vec<ServerSocket>,
        mut flows: Vec<FlowOutcome>,
        followed: Followed,
    ) -> anyhow::Result<ServerReport> {
        let sent = followed.sent.clone().ok_or_else(|| {
            anyhow!(
                "{}",
                followed
                    .error
                    .clone()
                    .unwrap_or_else(|| "the session ended early".into())
            )
        })?;
        server_report(&h.case, &sockets, &mut flows, &sent, followed)
    }
}

/// What one server thread counted.
struct FlowOutcome {
    /// Inside this end's window.
    window: SeqCounts,
    /// The whole session, the drain included, to be settled against the client's count.
    tracker: SeqTracker,
    metered: Metered,
    /// Datagrams the kernel dropped at the socket in the session (SO_MEMINFO, else SO_RXQ_OVFL).
    socket_drops: Option<u64>,
}

/// One server thread: receive into its flow's tracker until the client has said what it
/// sent, then drain the socket.
fn receive_flow(
    thread: &ServedThread<'_>,
    socket: &ServerSocket,
    mut receiver: Box<dyn DgramReceiver>,
    size: u64,
) -> io::Result<FlowOutcome> {
    let fd = socket.socket.as_raw_fd();
    let mut meter = Meter::start(&thread.ctx(), Role::Server, thread.index)?;
    let mut seen = SeqTracker::new();
    let (mut open, mut at_open, mut at_close) = (false, None, None);
    loop {
        let now_open = meter.tick(|| receiver.syscalls());
        if now_open != open {
            if now_open {
                at_open = Some(seen.counts());
            } else {
                at_close = Some(seen.counts());
            }
            open = now_open;
        }
        if thread.quit() {
            break;
        }
        if thread.draining() {
            udp::drain(|| receiver.recv(fd, &mut seen))?;
            break;
        }
        let n = receiver.recv(fd, &mut seen)?;
        if n > 0 {
            thread.count(n as u64 * size);
        }
    }
    let window = match at_open {
        Some(start) => at_close.unwrap_or(seen.counts()).since(&start),
        None => SeqCounts::default(),
    };
    Ok(FlowOutcome {
        window,
        tracker: seen,
        metered: meter.finish(receiver.syscalls()),
        // The socket's own drop count after the drain (SO_MEMINFO), which also counts drops
        // after the last datagram that carried SO_RXQ_OVFL's; that one where it is refused.
        socket_drops: crate::sys::udp::socket_drops(fd).ok().or(receiver.kernel_drops()),
    })
}

/// The serving threads' counts, and the loss against the client's counts, as the report.
fn server_report(
    case: &UdpStreamCase,
    sockets: &[ServerSocket],
    flows: &mut [FlowOutcome],
    sent: &[u64],
    followed: Followed,
) -> anyhow::Result<ServerReport> {
    udp::same_flows(sent.len(), flows.len())?;
    // Only what the client sent counts: numbers beyond its count (or far ahead) are forged.
    let mut taken_back = 0;
    for (f, &s) in flows.iter_mut().zip(sent) {
        taken_back += f.tracker.settle(s);
    }
    let mut window = SeqCounts::default();
    let mut total = SeqCounts::default();
    for f in flows.iter() {
        window.add(&f.window);
        total.add(&f.tracker.counts());
    }
    let distinct: Vec<u64> = flows.iter().map(|f| f.tracker.counts().distinct).collect();
    let lost: u64 = udp::lost_per_flow(sent, &distinct)?.iter().sum();
    let window_s = followed.window_s;
    let mut metrics = arrival_metrics((&window, &total), (sent.iter().sum(), lost), taken_back, window_s);
    let drops: Option<u64> = flows.iter().map(|f| f.socket_drops).sum();
    metrics.push(Metric::from_result(
        names::SOCKET_DROPS,
        Role::Server,
        "datagrams",
        Source::Kernel,
        drops
            .map(|d| d as f64)
            .ok_or_else(|| "neither SO_MEMINFO nor SO_RXQ_OVFL gave a drop count".to_string()),
    ));
    metrics.push(Metric::new(
        names::RCVBUF_BYTES,
        Role::Server,
        sockets.iter().map(|s| s.rcvbuf).min().unwrap_or(0) as f64,
        "B",
        Source::Kernel,
    ));
    let counters = crate::net::session::observe::measured_counters(
        flows.iter().map(|f| &f.metered.counters),
        crate::net::session::observe::NO_SERVER_WINDOW,
    );
    metrics.extend(counters.metrics(Role::Server, window.bytes, window.received, "datagram", followed.tsc_hz));
    let syscalls = flows.iter().map(|f| f.metered.syscalls).sum();
    metrics.extend(per_datagram_costs(Role::Server, &counters, syscalls, window.received));
    metrics.extend(followed.system_metrics);
    let failures = total.verify_failures;
    Ok(ServerReport {
        metrics,
        placement: flows.iter().map(|f| f.metered.placement.clone()).collect(),
        verified_messages: if case.net.verify {
            total.received.saturating_sub(failures)
        } else {
            0
        },
        corrupt_messages: failures,
        warnings: Vec::new(),
        threads: flows
            .iter()
            .map(|f| ThreadTally {
                bytes: f.window.bytes,
                messages: f.window.received,
                window_s: f.metered.counters.is_some().then_some(window_s),
                syscalls: f.metered.syscalls,
            })
            .collect(),
    })
}

/// What arrived (`window`: inside this end's window; `total`: the whole session) against what
/// the client sent and what was lost, as the report's datagram metrics; `taken_back`: numbers
/// the client never sent, counted before they could be told apart.
fn arrival_metrics(
    (window, total): (&SeqCounts, &SeqCounts),
    (sent_total, lost): (u64, u64),
    taken_back: u64,
    window_s: f64,
) -> Vec<Metric> {
    let rate = |v: f64| crate::net::session::observe::per(v, window_s);
    // Numbers the client never sent that were counted as they arrived are taken out of the
    // session's counts, but which of them fell in the window is not known: the window's
    // receive figures are then not the client's, and are not given.
    let windowed = |name: &str, role: Role, unit: &str, v: f64| {
        let value = match taken_back {
            0 => Ok(v),
            n => Err(format!(
                "{n} datagrams the client never sent were counted before they could be told apart"
            )),
        };
        Metric::from_result(name, role, unit, Source::Tool, value)
    };
    vec![
        windowed(
            names::DATAGRAMS_RECEIVED,
            Role::Server,
            "datagrams",
            window.received as f64,
        ),
        windowed(names::BYTES_RECEIVED, Role::Server, "B", window.bytes as f64),
        windowed(
            names::DATAGRAMS_PER_S,
            Role::System,
            "datagrams/s",
            rate(window.received as f64),
        ),
        windowed(
            names::THROUGHPUT_GBPS,
            Role::System,
            "Gbit/s",
            rate(window.bytes as f64 * 8.0) / 1e9,
        ),
        Metric::tool(
            names::SESSION_DATAGRAMS_SENT,
            Role::System,
            sent_total as f64,
            "datagrams",
        ),
        Metric::tool(
            names::SESSION_DATAGRAMS_RECEIVED,
            Role::System,
            total.distinct as f64,
            "datagrams",
        ),
        Metric::tool(names::DATAGRAMS_LOST, Role::System, lost as f64, "datagrams"),
        Metric::tool(
            names::LOSS_FRACTION,
            Role::System,
            crate::net::session::observe::per(lost as f64, sent_total as f64),
            "fraction",
        ),
        Metric::tool(
            names::DATAGRAMS_REORDERED,
            Role::Server,
            total.reordered as f64,
            "datagrams",
        ),
        Metric::tool(
            names::DATAGRAMS_DUPLICATE,
            Role::Server,
            total.duplicates as f64,
            "datagrams",
        ),
        Metric::tool(names::DATAGRAMS_SHORT, Role::Server, total.short as f64, "datagrams"),
        Metric::tool(names::DATAGRAMS_FORGED, Role::Server, total.forged as f64, "datagrams"),
        Metric::from_result(
            names::JITTER_US,
            Role::Server,
            "us",
            Source::Tool,
            total
                .jitter_ns
                .map(|j| j / 1e3)
                .ok_or_else(|| "fewer than two datagrams arrived".to_string()),
        ),
    ]
}
