//! The serving end of a udp-rr session (`net serve`, and the in-process server of loopback,
//! netns and veth runs): one UDP socket per client thread, all bound to the session's one
//! data port (SO_REUSEPORT) and each connected to its client socket (the address the control
//! connection comes from, the port the hello names), so the kernel delivers each client's
//! requests to its own socket; one thread per socket answers every request with a response
//! datagram carrying the request's sequence number; the window follows the client's phase
//! messages, then the report.

use super::{data_receiver, data_sender, gone, rcvbuf_metric, set_timeouts, socket_drops};
use crate::case::UdpRrCase;
use crate::measure::clock;
use crate::measure::window::{SystemProbes, Window};
use crate::net::control::RrPhase;
use crate::net::control::{ControlChannel, HelloCase, ServerReport, ThreadTally};
use crate::net::dgram::session::open_udp_port;
use crate::net::dgram::{DgramReceiver, DgramSender, SeqTracker};
use crate::net::session::data::{threads_ended, MovedBytes};
use crate::net::session::gate::{all_ready, join_all};
use crate::net::session::meter::{Ctx, Meter, Metered, ServerShared};
use crate::net::session::server::wrong_hello;
use crate::net::session::{send_outcome, Served, Session};
use crate::observation::names;
use crate::observation::{Metric, Role};
use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The udp-rr server side, as `net serve` and the local run serve it.
pub const SERVED: Served = Served {
    hellos: &["udp-rr"],
    check,
    serve,
};

/// The limits, the hello's client ports, and the datagram and socket buffers the case would
/// take here (a socket, a sender and a receiver per thread), against this server's headroom.
fn check(hello: &HelloCase, headroom: Option<u64>) -> Result<(), String> {
    let HelloCase::UdpRr(h) = hello else {
        return Ok(());
    };
    super::check_case(&h.case)?;
    crate::net::dgram::session::check_ports(&h.ports, h.case.net.threads)?;
    super::check_memory(&h.case, Role::Server, headroom)
}

fn serve(control: ControlChannel, hello: HelloCase, session: &Session<'_>) -> anyhow::Result<()> {
    match hello {
        HelloCase::UdpRr(h) => serve_session(control, &h.case, &h.ports, session.stopped, session.max_bytes),
        other => Err(wrong_hello(control, &other)),
    }
}

/// What one serving thread counted inside the window.
struct ServerOutcome {
    /// In the session: datagrams too short for a header, and requests not answered as ones
    /// the client never sent (a number again, or far ahead and not held).
    short: u64,
    forged: u64,
    transactions: u64,
    verified: u64,
    corrupt: u64,
    rxq_drops: Option<u64>,
    metered: Metered,
}

fn serve_session(
    mut control: ControlChannel,
    case: &UdpRrCase,
    ports: &[u16],
    stopped: &dyn Fn() -> bool,
    max_bytes: Option<u64>,
) -> anyhow::Result<()> {
    // Limits, ports and memory: checked by the session server before this runs (`check`).
    if let Some(refusal) = super::mode_refusal(case) {
        control
            .send(&crate::net::control::Control::Unavailable {
                what: refusal.what.clone(),
                reason: refusal.reason.clone(),
            })
            .ok();
        return Err(refusal.into());
    }
    // Every path before `ready`: a mode this kernel refuses is answered as unavailable.
    let mut ends = Vec::with_capacity(case.net.threads);
    for _ in 0..case.net.threads {
        let made =
            data_sender(case, case.response_size).and_then(|s| data_receiver(case, case.request_size).map(|r| (s, r)));
        match made {
            Ok(pair) => ends.push(pair),
            Err(e) => {
                if let Some(refusal) = e.downcast_ref::<crate::observation::Unsupported>() {
                    control
                        .send(&crate::net::control::Control::Unavailable {
                            what: refusal.what.clone(),
                            reason: refusal.reason.clone(),
                        })
                        .ok();
                }
                return Err(e);
            }
        }
    }
    // The session's UDP data port (net/dgram/session.rs): one socket per client port, each
    // connected to it; `ready` names the port.
    let opened = open_udp_port(&mut control, ports, case.rcvbuf)?;
    let rcvbuf = opened.iter().map(|s| s.rcvbuf as u64).min().unwrap_or(0);
    let sockets: Vec<UdpSocket> = opened.into_iter().map(|s| s.socket).collect();
    for socket in &sockets {
        set_timeouts(socket)?;
    }
    let outcome = run_threads(case, &sockets, ends, &mut control, stopped, max_bytes).map(|mut report| {
        report.metrics.push(rcvbuf_metric(Role::Server, rcvbuf));
        report
    });
    send_outcome(&mut control, outcome)
}

/// The session's byte budget as the serving threads count it (request + response bytes per
/// transaction); None without a budget.
type Budget<'a> = Option<(&'a AtomicU64, u64)>;

fn run_threads(
    case: &UdpRrCase,
    sockets: &[UdpSocket],
    ends: Vec<(Box<dyn DgramSender>, Box<dyn DgramReceiver>)>,
    control: &mut ControlChannel,
    stopped: &dyn Fn() -> bool,
    max_bytes: Option<u64>,
) -> anyhow::Result<ServerReport> {
    let moved = MovedBytes::new(max_bytes);
    let budget: Budget<'_> = moved.counter(case.request_size + case.response_size);
    let stopped_or_over = || moved.stopped_or_over(stopped);
    let tsc_hz = clock::tsc_hz();
    let shared = ServerShared::new();
    let quit = AtomicBool::new(false);
    let ctx = shared.ctx(&case.net);
    let (outcomes, followed) = std::thread::scope(|scope| {
        let (ctx, quit) = (&ctx, &quit);
        let handles: Vec<_> = ends
            .into_iter()
            .zip(sockets)
            .enumerate()
            .map(|(i, ((sender, receiver), socket))| {
                std::thread::Builder::new()
                    .name(format!("iopath-udp-rr-server-{i}"))
                    .spawn_scoped(scope, move || {
                        serve_socket(ctx, i, socket, sender, receiver, quit, budget)
                    })
            })
            .collect();
        let followed = if all_ready(&shared.ready, &handles) {
            follow_phases(case, &shared.window, control, stopped, &stopped_or_over)
        } else {
            shared.window.close(&mut SystemProbes::default());
            Followed::default()
        };
        quit.store(true, Ordering::SeqCst);
        (join_all(handles, "a udp-rr server thread panicked"), followed)
    });
    let threads = threads_ended(outcomes, moved.exceeded(), max_bytes, followed.interrupted)?;
    Ok(server_report(case, &threads, followed.system_metrics, tsc_hz))
}

/// How following the client's phases ended.
#[derive(Default)]
struct Followed {
    system_metrics: Vec<Metric>,
    interrupted: bool,
}

/// Follow the client: Measure opens the window, Done closes it, Finished (or the control
/// connection's end) ends the session.
fn follow_phases(
    case: &UdpRrCase,
    window: &Window,
    control: &mut ControlChannel,
    stopped: &dyn Fn() -> bool,
    stopped_or_over: &dyn Fn() -> bool,
) -> Followed {
    let mut system = crate::net::session::served_probes(case.net.perf, crate::measure::trace::UDP_RX_COPIES);
    // The UDP counters of the namespace the server's sockets live in (this thread's).
    crate::measure::system::push_udp_probe(&mut system, None);
    let mut followed = Followed::default();
    let deadline = Instant::now() + Duration::from_millis(case.net.session_ms()) + Duration::from_secs(30);
    loop {
        let line = control.recv_line(Some(deadline), stopped_or_over);
        match line.map(|l| serde_json::from_slice::<RrPhase>(&l)) {
            Ok(Ok(RrPhase::Measure)) => window.open(&mut system),
            Ok(Ok(RrPhase::Done)) => {
                followed.system_metrics = window.close(&mut system);
                // The client sends nothing after Done: the report may go.
                break;
            }
            Ok(Ok(RrPhase::Finished)) => break,
            other => {
                followed.interrupted = stopped() || matches!(&other, Err(e) if e.kind() == io::ErrorKind::Interrupted);
                break;
            }
        }
    }
    window.close(&mut system);
    followed
}

/// Answer every request on one socket until the session is over.
fn serve_socket(
    ctx: &Ctx<'_>,
    index: usize,
    socket: &UdpSocket,
    mut sender: Box<dyn DgramSender>,
    mut receiver: Box<dyn DgramReceiver>,
    quit: &AtomicBool,
    budget: Budget<'_>,
) -> io::Result<ServerOutcome> {
    let fd = socket.as_raw_fd();
    let mut meter = Meter::start(ctx, Role::Server, index)?;
    let mut seen = SeqTracker::new();
    seen.keep_arrivals(crate::net::dgram::ARRIVALS);
    let mut transactions = 0u64;
    let mut window_base = None;
    // The tracker's counts and SO_RXQ_OVFL as the window closed (the thread answers on
    // until the session ends).
    let mut window_end = None;
    let mut drops_base = None;
    let mut peer_gone = false;
    loop {
        let open = meter.tick(|| sender.syscalls() + receiver.syscalls());
        if quit.load(Ordering::Relaxed) {
            break;
        }
        if open && window_base.is_none() {
            window_base = Some(seen.counts());
            drops_base = super::drops_now(fd, receiver.as_ref());
        }
        if meter.closed() && window_end.is_none() {
            window_end = Some((seen.counts(), super::drops_now(fd, receiver.as_ref())));
        }
        match receiver.recv(fd, &mut seen) {
            Ok(_) => {}
            // A client socket that is gone (its thread ended with the window) answered a
            // reply with ICMP port unreachable: nothing to answer.
            Err(e) if gone(&e) => peer_gone = true,
            Err(e) => return Err(e),
        }
        // Answer each request with its own number; a run of consecutive numbers (a batch
        // the client sent in one call) goes in one call of the batching modes. A number that
        // came before is not answered again (the client sends each once: a copy is the
        // network's or a forger's), nor one too short to carry a number (counted apart).
        let arrivals = seen.arrivals();
        let mut i = 0;
        let mut answered = 0u64;
        while i < arrivals.len() {
            if !arrivals[i].new {
                i += 1;
                continue;
            }
            let first = arrivals[i].seq;
            let mut run = 1;
            while i + run < arrivals.len() && arrivals[i + run].new && arrivals[i + run].seq == first + run as u64 {
                run += 1;
            }
            answered += run as u64;
            let mut done = 0;
            while done < run && !peer_gone {
                match sender.send(fd, first + done as u64, run - done) {
                    Ok(n) => done += n.max(1),
                    // A full socket buffer drops the reply, as the network may: the client
                    // counts it lost.
                    Err(e) if crate::net::dgram::is_full(&e) => done = run,
                    // The client socket is gone (its thread ended with the window): answer
                    // nothing more (an io_uring ring refuses every call after a failed one).
                    Err(e) if gone(&e) => peer_gone = true,
                    Err(e) => return Err(e),
                }
            }
            i += run;
        }
        seen.clear_arrivals();
        if let Some((moved, bytes)) = budget {
            moved.fetch_add(answered * bytes, Ordering::Relaxed);
        }
        if open {
            transactions += answered;
        }
    }
    if !peer_gone {
        match sender.finish(fd) {
            Err(e) if !gone(&e) => return Err(e),
            _ => {}
        }
    }
    let (at_end, drops_end) = window_end.unwrap_or((seen.counts(), super::drops_now(fd, receiver.as_ref())));
    let in_window = at_end.since(&window_base.unwrap_or(at_end));
    let whole = seen.counts();
    Ok(ServerOutcome {
        short: whole.short,
        forged: whole.duplicates + whole.forged,
        transactions,
        verified: in_window.received.saturating_sub(in_window.verify_failures),
        corrupt: in_window.verify_failures,
        rxq_drops: window_base
            .and(drops_end)
            .map(|d| d.saturating_sub(drops_base.unwrap_or(0))),
        metered: meter.finish(sender.syscalls() + receiver.syscalls()),
    })
}

/// The serving threads' counts as the report the client gets.
fn server_report(
    case: &UdpRrCase,
    threads: &[ServerOutcome],
    system_metrics: Vec<Metric>,
    tsc_hz: Option<f64>,
) -> ServerReport {
    let transactions: u64 = threads.iter().map(|t| t.transactions).sum();
    let syscalls: u64 = threads.iter().map(|t| t.metered.syscalls).sum();
    let bytes = transactions * (case.request_size + case.response_size);
    let counters = crate::net::session::observe::measured_counters(
        threads.iter().map(|t| &t.metered.counters),
        crate::net::session::observe::NO_SERVER_WINDOW,
    );
    let mut metrics = counters.metrics(Role::Server, bytes, transactions, "txn", tsc_hz);
    metrics.push(super::cpu_per_transaction(Role::Server, &counters, transactions));
    metrics.push(super::per_transaction(
        names::SYSCALLS_PER_TXN,
        Role::Server,
        syscalls,
        transactions,
        "syscalls/txn",
    ));
    metrics.push(Metric::tool(
        names::TRANSACTIONS_SERVED,
        Role::Server,
        transactions as f64,
        "txn",
    ));
    let drops = threads.iter().map(|t| t.rxq_drops).collect::<Option<Vec<u64>>>();
    metrics.push(socket_drops(Role::Server, drops.map(|d| d.iter().sum())));
    let short = threads.iter().map(|t| t.short).sum::<u64>();
    metrics.push(Metric::tool(
        names::DATAGRAMS_SHORT,
        Role::Server,
        short as f64,
        "datagrams",
    ));
    let forged = threads.iter().map(|t| t.forged).sum::<u64>();
    metrics.push(Metric::tool(
        names::DATAGRAMS_FORGED,
        Role::Server,
        forged as f64,
        "datagrams",
    ));
    metrics.extend(system_metrics);
    ServerReport {
        metrics,
        placement: threads.iter().map(|t| t.metered.placement.clone()).collect(),
        verified_messages: threads.iter().map(|t| t.verified).sum(),
        corrupt_messages: threads.iter().map(|t| t.corrupt).sum(),
        warnings: Vec::new(),
        threads: threads
            .iter()
            .map(|t| ThreadTally {
                bytes: t.transactions * (case.request_size + case.response_size),
                messages: t.transactions,
                window_s: None,
                syscalls: t.metered.syscalls,
            })
            .collect(),
    }
}
