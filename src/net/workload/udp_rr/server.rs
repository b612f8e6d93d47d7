//! The serving end of a udp-rr session (`net serve`, and the in-process server of loopback,
//! netns and veth runs): one UDP socket per client thread, all bound to the session's one
//! data port (SO_REUSEPORT) and each connected to its client socket (the address the control
//! connection comes from, the port the hello names), so the kernel delivers each client's
//! requests to its own socket; one thread per socket answers every request with a response
//! datagram carrying the request's sequence number; the window follows the client's phase
//! messages, then the report.

use super::{data_receiver, data_sender, gone, rcvbuf_metric, set_timeouts, socket_drops};
use crate::case::UdpRrCase;
use crate::net::control::{ControlChannel, ServerReport};
use crate::net::dgram::session::{open_udp_port, UdpHello};
use crate::net::dgram::{DgramReceiver, DgramSender, SeqTracker};
use crate::net::session::meter::{Meter, Metered};
use crate::net::session::observe::{transaction_report, ServedTransactions};
use crate::net::session::served::{self, Followed, ServedThread, ServedWorkload};
use crate::net::session::{Served, Session};
use crate::observation::names;
use crate::observation::{Metric, Role, Unsupported};
use anyhow::anyhow;
use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

/// The udp-rr server side, as `net serve` and the local run serve it.
pub const SERVED: Served = served::entry::<UdpRrServer>();

struct UdpRrServer;

/// The session's sockets, one per client thread, and the smallest receive buffer granted.
struct State {
    sockets: Vec<UdpSocket>,
    rcvbuf: u64,
}

impl ServedWorkload for UdpRrServer {
    type Hello = UdpHello<UdpRrCase>;
    type State = State;
    type Part = (Box<dyn DgramSender>, Box<dyn DgramReceiver>);
    type Outcome = ServerOutcome;
    const HELLOS: &'static [&'static str] = &["udp-rr"];
    const THREAD: &'static str = "iopath-udp-rr-server";
    const RX_COPIES: crate::measure::trace::RxCopies = crate::measure::trace::UDP_RX_COPIES;

    /// The case and the client's UDP ports.
    fn decode(workload: &'static str, line: &[u8]) -> Result<Self::Hello, String> {
        served::whole_hello(workload, line)
    }

    fn net(hello: &Self::Hello) -> &crate::case::NetParams {
        &hello.case.net
    }

    /// The limits, the hello's client ports, and the datagram and socket buffers the case
    /// would take here (a socket, a sender and a receiver per thread), against this server's
    /// headroom.
    fn check(h: &Self::Hello, headroom: Option<u64>) -> Result<(), String> {
        super::check_case(&h.case)?;
        crate::net::dgram::session::check_ports(&h.ports, h.case.net.threads)?;
        super::check_memory(&h.case, Role::Server, headroom)
    }

    fn prepare(
        h: &Self::Hello,
        control: &mut ControlChannel,
        _: &Session<'_>,
    ) -> anyhow::Result<(State, Vec<Self::Part>)> {
        let case = &h.case;
        if let Some(refusal) = super::mode_refusal(case) {
            return Err(served::unavailable(control, refusal));
        }
        // Every path before `ready`: a mode this kernel refuses is answered as unavailable.
        let mut ends = Vec::with_capacity(case.net.threads);
        for _ in 0..case.net.threads {
            let made = data_sender(case, case.response_size)
                .and_then(|s| data_receiver(case, case.request_size).map(|r| (s, r)));
            match made {
                Ok(pair) => ends.push(pair),
                Err(e) => {
                    return Err(match e.downcast::<Unsupported>() {
                        Ok(refusal) => served::unavailable(control, refusal),
                        Err(e) => e,
                    })
                }
            }
        }
        // The session's UDP data port (net/dgram/session.rs): one socket per client port,
        // each connected to it; `ready` names the port.
        let opened = open_udp_port(control, &h.ports, case.rcvbuf)?;
        let rcvbuf = opened.iter().map(|s| s.rcvbuf as u64).min().unwrap_or(0);
        let sockets: Vec<UdpSocket> = opened.into_iter().map(|s| s.socket).collect();
        for socket in &sockets {
            set_timeouts(socket)?;
        }
        Ok((State { sockets, rcvbuf }, ends))
    }

    /// The UDP counters of the namespace the server's sockets live in (this thread's).
    fn push_probes(system: &mut crate::measure::window::SystemProbes) {
        crate::measure::system::push_udp_probe(system, None);
    }

    fn serve_thread(
        h: &Self::Hello,
        state: &State,
        (sender, receiver): Self::Part,
        thread: &ServedThread<'_>,
    ) -> anyhow::Result<ServerOutcome> {
        let transaction_bytes = h.case.request_size + h.case.response_size;
        serve_socket(
            thread,
            &state.sockets[thread.index],
            sender,
            receiver,
            transaction_bytes,
        )
        .map_err(|e| anyhow!("server: {e}"))
    }

    fn report(
        h: &Self::Hello,
        state: State,
        threads: Vec<ServerOutcome>,
        followed: Followed,
    ) -> anyhow::Result<ServerReport> {
        let mut report = server_report(&h.case, &threads, followed.system_metrics, followed.tsc_hz);
        report.metrics.push(rcvbuf_metric(Role::Server, state.rcvbuf));
        Ok(report)
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

/// Answer every request on one socket until the session is over.
fn serve_socket(
    thread: &ServedThread<'_>,
    socket: &UdpSocket,
    mut sender: Box<dyn DgramSender>,
    mut receiver: Box<dyn DgramReceiver>,
    transaction_bytes: u64,
) -> io::Result<ServerOutcome> {
    let fd = socket.as_raw_fd();
    let mut meter = Meter::start(&thread.ctx(), Role::Server, thread.index)?;
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
        if thread.quit() {
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
        thread.count(answered * transaction_bytes);
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
    let drops = threads.iter().map(|t| t.rxq_drops).collect::<Option<Vec<u64>>>();
    let short = threads.iter().map(|t| t.short).sum::<u64>();
    let forged = threads.iter().map(|t| t.forged).sum::<u64>();
    let mut own = vec![
        socket_drops(Role::Server, drops.map(|d| d.iter().sum())),
        Metric::tool(names::DATAGRAMS_SHORT, Role::Server, short as f64, "datagrams"),
        Metric::tool(names::DATAGRAMS_FORGED, Role::Server, forged as f64, "datagrams"),
    ];
    own.extend(system_metrics);
    let served: Vec<_> = threads
        .iter()
        .map(|t| ServedTransactions {
            transactions: t.transactions,
            verified: t.verified,
            corrupt: t.corrupt,
            metered: &t.metered,
        })
        .collect();
    transaction_report(&served, case.request_size + case.response_size, own, tsc_hz)
}
