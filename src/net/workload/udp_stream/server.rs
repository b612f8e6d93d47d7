//! The serving end of a udp-stream session, run by `iopath net serve` (and by the in-process
//! server of loopback, netns and veth runs) when a hello names `udp-stream`: one UDP socket
//! per client thread on the session's data port, one thread per socket receiving into its
//! flow's `SeqTracker`, following the client's window, draining after the client's `sent`,
//! then a report of what arrived and what was lost.

use super::{check_case, check_memory, per_datagram_costs, set_up_error, HELLO};
use crate::case::UdpStreamCase;
use crate::measure::clock;
use crate::measure::window::SystemProbes;
use crate::net::control::{Control, ControlChannel, HelloCase, ServerReport, ThreadTally};
use crate::net::dgram::session::{self as udp, ServerSocket};
use crate::net::dgram::{self, DgramReceiver, SeqCounts, SeqTracker};
use crate::net::session::data::threads_ended;
use crate::net::session::gate::{all_ready, join_all};
use crate::net::session::handshake::RefusalKind;
use crate::net::session::meter::{Ctx, Meter, Metered, ServerShared};
use crate::net::session::server::wrong_hello;
use crate::net::session::{send_outcome, Served, Session};
use crate::observation::names;
use crate::observation::{Metric, Role, Source};
use anyhow::anyhow;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The udp-stream server side, as `net serve` and the local runs serve it.
pub const SERVED: Served = Served {
    hellos: &[HELLO],
    check,
    serve,
};

/// The limits, the hello's client ports, and the receive buffers the case would take here,
/// against this server's headroom.
fn check(hello: &HelloCase, headroom: Option<u64>) -> Result<(), String> {
    let HelloCase::UdpStream(h) = hello else {
        return Ok(());
    };
    check_case(&h.case)?;
    crate::net::dgram::session::check_ports(&h.ports, h.case.net.threads)?;
    check_memory(&h.case, Role::Server, headroom)
}

fn serve(control: ControlChannel, hello: HelloCase, session: &Session<'_>) -> anyhow::Result<()> {
    match hello {
        HelloCase::UdpStream(hello) => serve_session(control, &hello.case, &hello.ports, session),
        other => Err(wrong_hello(control, &other)),
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

/// What the serving threads look at between receives.
struct Flags {
    /// The client stopped and said what it sent: drain, then end.
    drain: AtomicBool,
    /// The session ended early: end now.
    quit: AtomicBool,
    /// Bytes received, counted only under a byte budget.
    received: AtomicU64,
    budget: bool,
}

/// Serve one udp-stream session on its control connection (the hello has been read).
fn serve_session(
    mut control: ControlChannel,
    case: &UdpStreamCase,
    ports: &[u16],
    session: &Session<'_>,
) -> anyhow::Result<()> {
    // Limits, ports and memory: checked by the session server before this runs (`check`).
    // Every receiver before `ready`: a receive mode this kernel refuses is answered so.
    let receivers = match (0..case.net.threads)
        .map(|_| dgram::receiver(case.rx_mode, case.size as usize, case.batch, case.net.verify))
        .collect::<io::Result<Vec<_>>>()
    {
        Ok(r) => r,
        Err(e) => {
            let e = set_up_error(&format!("the {} receive mode", case.rx_mode), e);
            if let Some(refusal) = e.downcast_ref::<crate::observation::Unsupported>() {
                control
                    .send(&Control::Unavailable {
                        what: refusal.what.clone(),
                        reason: refusal.reason.clone(),
                    })
                    .ok();
            } else {
                control
                    .send(&crate::net::session::handshake::refused(
                        RefusalKind::SetUp,
                        &format!("{e:#}"),
                    ))
                    .ok();
            }
            return Err(e);
        }
    };
    let sockets = udp::open_udp_port(&mut control, ports, case.rcvbuf)?;
    // Each receiver sets its socket up on its first call (SO_RXQ_OVFL; UDP_GRO for gro).
    let outcome = run_threads(case, &sockets, receivers, &mut control, session);
    send_outcome(&mut control, outcome)
}

/// Run one receiving thread per socket while following the client's phases; the report.
fn run_threads(
    case: &UdpStreamCase,
    sockets: &[ServerSocket],
    receivers: Vec<Box<dyn DgramReceiver>>,
    control: &mut ControlChannel,
    session: &Session<'_>,
) -> anyhow::Result<ServerReport> {
    let tsc_hz = clock::tsc_hz();
    let shared = ServerShared::new();
    let flags = Flags {
        drain: AtomicBool::new(false),
        quit: AtomicBool::new(false),
        received: AtomicU64::new(0),
        budget: session.max_bytes.is_some(),
    };
    let exceeded = std::cell::Cell::new(false);
    let stopped_or_over = || {
        if (session.stopped)() {
            return true;
        }
        exceeded.set(
            session
                .max_bytes
                .is_some_and(|max| flags.received.load(Ordering::Relaxed) > max),
        );
        exceeded.get()
    };
    let ctx = shared.ctx(&case.net);
    let longest = Duration::from_millis(case.net.session_ms()) + Duration::from_secs(30);
    let (outcomes, followed) = std::thread::scope(|scope| {
        let (ctx, flags) = (&ctx, &flags);
        let handles: Vec<_> = receivers
            .into_iter()
            .zip(sockets)
            .enumerate()
            .map(|(i, (receiver, socket))| {
                std::thread::Builder::new()
                    .name(format!("iopath-udp-server-{i}"))
                    .spawn_scoped(scope, move || receive_flow(ctx, i, socket, receiver, flags, case.size))
            })
            .collect();
        let followed = if !all_ready(&shared.ready, &handles) {
            shared.window.close(&mut SystemProbes::default());
            udp::Followed {
                error: Some(format!("could not start all {} server threads", handles.len())),
                ..Default::default()
            }
        } else {
            // The kernel's UDP counters of this end's namespace (this thread lives in it):
            // RcvbufErrors and InErrors say what the kernel dropped, whatever the sockets say.
            let mut system = crate::net::session::served_probes(case.net.perf, crate::measure::trace::UDP_RX_COPIES);
            crate::measure::system::push_udp_probe(&mut system, None);
            udp::follow(control, &shared.window, &mut system, longest, &stopped_or_over)
        };
        if followed.sent.is_some() {
            flags.drain.store(true, Ordering::SeqCst);
        } else {
            flags.quit.store(true, Ordering::SeqCst);
        }
        (join_all(handles, "a server thread panicked"), followed)
    });
    let mut flows = threads_ended(outcomes, exceeded.get(), session.max_bytes, followed.interrupted)?;
    let sent = followed.sent.clone().ok_or_else(|| {
        anyhow!(
            "{}",
            followed
                .error
                .clone()
                .unwrap_or_else(|| "the session ended early".into())
        )
    })?;
    server_report(case, sockets, &mut flows, &sent, followed, tsc_hz)
}

/// One server thread: receive into its flow's tracker until the client has said what it
/// sent, then drain the socket.
fn receive_flow(
    ctx: &Ctx<'_>,
    index: usize,
    socket: &ServerSocket,
    mut receiver: Box<dyn DgramReceiver>,
    flags: &Flags,
    size: u64,
) -> io::Result<FlowOutcome> {
    let fd = socket.socket.as_raw_fd();
    let mut meter = Meter::start(ctx, Role::Server, index)?;
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
        if flags.quit.load(Ordering::Relaxed) {
            break;
        }
        if flags.drain.load(Ordering::Relaxed) {
            udp::drain(|| receiver.recv(fd, &mut seen))?;
            break;
        }
        let n = receiver.recv(fd, &mut seen)?;
        if flags.budget && n > 0 {
            flags.received.fetch_add(n as u64 * size, Ordering::Relaxed);
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
    followed: udp::Followed,
    tsc_hz: Option<f64>,
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
    let sent_total: u64 = sent.iter().sum();
    let window_s = followed.window_s;
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
    let mut metrics = vec![
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
    ];
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
    metrics.extend(counters.metrics(Role::Server, window.bytes, window.received, "datagram", tsc_hz));
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
