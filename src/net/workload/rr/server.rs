//! The serving end of an rr/crr session, run by `iopath net serve` (and by the in-process
//! server of loopback, netns and veth runs) when a hello names `rr` or `crr`: a data listener
//! of the session's own, one thread per connection (rr) or per client thread (crr: each
//! accepts, answers and closes connection after connection), following the client's window,
//! then a report of what its threads counted.

use super::{data_receivers, data_sender, receiver_error};
use crate::case::{RrCase, RrKind};
use crate::measure::clock;
use crate::measure::window::{SystemProbes, Window};
use crate::net::control::RrPhase;
use crate::net::control::{Control, ControlChannel, HelloCase, ServerReport, ThreadTally};
use crate::net::mode::{Receiver, RecvCounts, Sender};
use crate::net::session::data::{threads_ended, MovedBytes};
use crate::net::session::gate::{all_ready, join_all};
use crate::net::session::meter::{Ctx, Meter, Metered, ServerShared};
use crate::net::session::server::wrong_hello;
use crate::net::session::DATA_IDLE_TIMEOUT;
use crate::net::session::{accept_from, open_data_port, send_outcome, Served, Session};
use crate::observation::names;
use crate::observation::{Metric, Role};
use std::io;
use std::net::{IpAddr, Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the client has, after Ready, to open every rr data connection.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

struct ServerOutcome {
    transactions: u64,
    metered: Metered,
    recv_counts: RecvCounts,
}

/// The rr/crr server side, as `net serve` and the loopback run serve it.
pub const SERVED: Served = Served {
    hellos: &["rr", "crr"],
    check,
    serve,
};

/// The limits, then the memory the case would take here, against the same headroom the
/// client side checks (MemAvailable and the memory cgroup's room).
fn check(hello: &HelloCase, headroom: Option<u64>) -> Result<(), String> {
    match hello {
        HelloCase::Rr(case) => super::check_case(case).and_then(|()| super::check_memory(case, Role::Server, headroom)),
        _ => Ok(()),
    }
}

fn serve(control: ControlChannel, hello: HelloCase, session: &Session<'_>) -> anyhow::Result<()> {
    match hello {
        HelloCase::Rr(case) => serve_session(control, &case, session.stopped, session.max_bytes),
        other => Err(wrong_hello(control, &other)),
    }
}

/// Serve one rr/crr session on its control connection (the hello has been read). A raised
/// `stopped` ends it within about 100 ms.
fn serve_session(
    mut control: ControlChannel,
    case: &RrCase,
    stopped: &dyn Fn() -> bool,
    max_bytes: Option<u64>,
) -> anyhow::Result<()> {
    // Limits and memory: checked by the session server before this runs (`check`).
    // A receive mode this kernel refuses is answered before any connection is made.
    if let Err(refusal) = crate::net::mode::check_receiver(case.rx_mode) {
        control
            .send(&Control::Unavailable {
                what: refusal.what.clone(),
                reason: refusal.reason.clone(),
            })
            .ok();
        return Err(refusal.into());
    }
    // The session's own data port, on the address the client reached us at.
    let (listener, peer) = open_data_port(&mut control)?;
    let data = match case.kind {
        RrKind::Rr => {
            let data = accept_from(&listener, case.net.threads, peer, SETUP_TIMEOUT, stopped)?;
            for stream in &data {
                stream.set_nodelay(true)?;
                stream.set_read_timeout(Some(DATA_IDLE_TIMEOUT))?;
                stream.set_write_timeout(Some(DATA_IDLE_TIMEOUT))?;
            }
            data
        }
        RrKind::Crr => Vec::new(),
    };
    let outcome = run_threads(case, &listener, peer, &data, &mut control, stopped, max_bytes);
    send_outcome(&mut control, outcome)
}

/// Run the serving threads while following the client's phase messages; the report.
fn run_threads(
    case: &RrCase,
    listener: &TcpListener,
    peer: IpAddr,
    data: &[TcpStream],
    control: &mut ControlChannel,
    stopped: &dyn Fn() -> bool,
    max_bytes: Option<u64>,
) -> anyhow::Result<ServerReport> {
    // The byte budget: request and response bytes moved, counted by the serving threads only when a
    // budget is set (one relaxed add per transaction) and checked between the coordinator's
    // polls of the control connection.
    let moved = MovedBytes::new(max_bytes);
    let budget: Budget<'_> = moved.counter(case.request_size + case.response_size);
    let stopped_or_over = || moved.stopped_or_over(stopped);
    let tsc_hz = clock::tsc_hz();
    let shared = ServerShared::new();
    let quit = AtomicBool::new(false);
    let ctx = shared.ctx(&case.net);
    if case.kind == RrKind::Crr {
        // Accepted sockets inherit the listener's timeout: the data one, set once here rather
        // than on every connection. accept() itself ends at the session's end, when the
        // listener is shut down (and at worst after this long, to look at `quit`).
        socket2::SockRef::from(listener).set_read_timeout(Some(DATA_IDLE_TIMEOUT))?;
    }
    let (mut senders, mut receivers) = thread_ends(case, data)?;
    let (outcomes, followed) = std::thread::scope(|scope| {
        let (ctx, quit) = (&ctx, &quit);
        let handles: Vec<_> = (0..case.net.threads)
            .map(|i| {
                let receiver = receivers.next().expect("one receiver per thread");
                let sender = senders.next().expect("one sender per thread");
                let builder = std::thread::Builder::new().name(format!("iopath-rr-server-{i}"));
                match case.kind {
                    RrKind::Rr => {
                        let stream = &data[i];
                        builder.spawn_scoped(scope, move || serve_rr(ctx, i, stream, receiver, sender, budget))
                    }
                    RrKind::Crr => builder.spawn_scoped(scope, move || {
                        let ends = SessionEnds { quit, budget };
                        serve_crr(ctx, i, (listener, peer), receiver, sender, ends)
                    }),
                }
            })
            .collect();
        let followed = if all_ready(&shared.ready, &handles) {
            follow_phases(case, &shared.window, data, control, stopped, &stopped_or_over)
        } else {
            shared.window.close(&mut SystemProbes::default());
            Followed::default()
        };
        quit.store(true, Ordering::SeqCst);
        if case.kind == RrKind::Crr {
            // Wakes every crr thread blocked in accept() (which then fails with EINVAL).
            socket2::SockRef::from(listener).shutdown(Shutdown::Read).ok();
        }
        (join_all(handles, "a server thread panicked"), followed)
    });
    let threads = threads_ended(outcomes, moved.exceeded(), max_bytes, followed.interrupted)?;
    Ok(server_report(case, &threads, followed.system_metrics, tsc_hz))
}

/// Every thread's sender and receiver, in thread order.
type ThreadEnds = (
    std::vec::IntoIter<Box<dyn Sender>>,
    std::vec::IntoIter<Box<dyn Receiver>>,
);

/// Every thread's sender and receiver, made (and rr's receivers attached to their
/// connections) before any thread starts.
fn thread_ends(case: &RrCase, data: &[TcpStream]) -> anyhow::Result<ThreadEnds> {
    let (req, resp) = (case.request_size as usize, case.response_size as usize);
    let mut senders = Vec::with_capacity(case.net.threads);
    for _ in 0..case.net.threads {
        senders.push(data_sender(case, resp)?);
    }
    let mut receivers = data_receivers(case, req, case.net.threads)?;
    for (receiver, stream) in receivers.iter_mut().zip(data) {
        receiver
            .attach(stream.as_raw_fd())
            .map_err(|e| receiver_error(case, e))?;
    }
    Ok((senders.into_iter(), receivers.into_iter()))
}

/// How following the client's phases ended.
#[derive(Default)]
struct Followed {
    /// The system probes' metrics of the window `Done` closed.
    system_metrics: Vec<Metric>,
    /// A stop (or the byte budget) ended it.
    interrupted: bool,
}

/// Follow the client: Measure opens the window, Done closes it, Finished ends the session.
/// Anything else (EOF, timeout, a stop or the budget) closes the window and shuts the data
/// connections so no thread waits.
fn follow_phases(
    case: &RrCase,
    window: &Window,
    data: &[TcpStream],
    control: &mut ControlChannel,
    stopped: &dyn Fn() -> bool,
    stopped_or_over: &dyn Fn() -> bool,
) -> Followed {
    let mut system = crate::net::session::served_probes(case.net.perf, crate::measure::trace::RxCopies::Traced);
    let mut followed = Followed::default();
    let longest = Duration::from_millis(case.net.session_ms()) + Duration::from_secs(30);
    let deadline = Instant::now() + longest;
    loop {
        let line = control.recv_line(Some(deadline), stopped_or_over);
        match line.map(|l| serde_json::from_slice::<RrPhase>(&l)) {
            Ok(Ok(RrPhase::Measure)) => window.open(&mut system),
            Ok(Ok(RrPhase::Done)) => followed.system_metrics = window.close(&mut system),
            Ok(Ok(RrPhase::Finished)) => break,
            other => {
                followed.interrupted = stopped() || matches!(&other, Err(e) if e.kind() == io::ErrorKind::Interrupted);
                window.close(&mut system);
                for s in data {
                    s.shutdown(Shutdown::Both).ok();
                }
                break;
            }
        }
    }
    window.close(&mut system);
    followed
}

/// The serving threads' counts merged into the report the client gets.
fn server_report(
    case: &RrCase,
    threads: &[ServerOutcome],
    system_metrics: Vec<Metric>,
    tsc_hz: Option<f64>,
) -> ServerReport {
    let transactions: u64 = threads.iter().map(|t| t.transactions).sum();
    let syscalls: u64 = threads.iter().map(|t| t.metered.syscalls).sum();
    let bytes = transactions * (case.request_size + case.response_size);
    let counters = crate::net::session::observe::measured_counters(
        threads.iter().map(|t| &t.metered.counters),
        super::NO_SERVER_WINDOW,
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
    metrics.extend(system_metrics);
    ServerReport {
        metrics,
        placement: threads.iter().map(|t| t.metered.placement.clone()).collect(),
        verified_messages: threads.iter().map(|t| t.recv_counts.verified_messages).sum(),
        corrupt_messages: threads.iter().map(|t| t.recv_counts.corrupt_messages).sum(),
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

/// The session's byte budget as the serving threads see it: the shared count of bytes moved
/// and the bytes of one transaction (request + response); None when the server has no budget.
type Budget<'a> = Option<(&'a AtomicU64, u64)>;

/// What ends a crr server thread's loop: the session being over, and the budget it counts into.
struct SessionEnds<'a> {
    quit: &'a AtomicBool,
    budget: Budget<'a>,
}

fn count_against(budget: Budget<'_>) {
    if let Some((moved, transaction_bytes)) = budget {
        moved.fetch_add(transaction_bytes, Ordering::Relaxed);
    }
}

/// rr: answer every request on one connection until the client closes it.
fn serve_rr(
    ctx: &Ctx<'_>,
    index: usize,
    stream: &TcpStream,
    mut receiver: Box<dyn Receiver>,
    mut sender: Box<dyn Sender>,
    budget: Budget<'_>,
) -> io::Result<ServerOutcome> {
    let fd = stream.as_raw_fd();
    let mut meter = Meter::start(ctx, Role::Server, index)?;
    let (mut seq, mut transactions) = (0u64, 0u64);
    loop {
        let open = meter.tick(|| receiver.counts().syscalls + sender.counts().syscalls);
        if !receiver.recv(fd, seq)? {
            break;
        }
        sender.send(fd, seq)?;
        count_against(budget);
        if open {
            transactions += 1;
        }
        seq += 1;
    }
    sender.drain(fd, Duration::from_secs(10))?;
    // The client's receiving half ends at this EOF (open loop).
    stream.shutdown(Shutdown::Write).ok();
    Ok(ServerOutcome {
        transactions,
        metered: meter.finish(receiver.counts().syscalls + sender.counts().syscalls),
        recv_counts: receiver.counts(),
    })
}

/// crr: accept a connection, answer its one request, wait for the client's FIN, close; again
/// until the session is over.
fn serve_crr(
    ctx: &Ctx<'_>,
    index: usize,
    (listener, peer): (&TcpListener, IpAddr),
    mut receiver: Box<dyn Receiver>,
    mut sender: Box<dyn Sender>,
    ends: SessionEnds<'_>,
) -> io::Result<ServerOutcome> {
    let SessionEnds { quit, budget } = ends;
    let mut meter = Meter::start(ctx, Role::Server, index)?;
    let (mut transactions, mut own_syscalls) = (0u64, 0u64);
    let mut fin = [0u8; 1];
    loop {
        let open = meter.tick(|| own_syscalls + receiver.counts().syscalls + sender.counts().syscalls);
        if quit.load(Ordering::Relaxed) {
            break;
        }
        own_syscalls += 1;
        // The transaction's pattern is named by the client's port (see crr_loop).
        let (stream, seq) = match listener.accept() {
            Ok((stream, from)) if from.ip() == peer => (stream, u64::from(from.port())),
            Ok(_) => continue,
            // The session is over: the listener was shut down under accept().
            Err(_) if quit.load(Ordering::Relaxed) => break,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => return Err(io::Error::new(e.kind(), format!("accept failed: {e}"))),
        };
        let fd = stream.as_raw_fd();
        receiver.attach(fd)?;
        if receiver.recv(fd, seq)? {
            sender.send(fd, seq)?;
            own_syscalls += 1;
            let n = super::recv_fin(fd, &mut fin)?;
            if n != 0 {
                return Err(io::Error::other("a crr client sent more than one request"));
            }
            count_against(budget);
            if open {
                transactions += 1;
            }
        }
        // The next connection may get this fd number: nothing of this one may carry over.
        receiver.detach();
        drop(stream);
        // close (accept and the read of the FIN counted above).
        own_syscalls += 1;
    }
    // uring-zc: the notifications of the last responses (the ring outlives its sockets).
    sender.drain(-1, Duration::from_secs(10))?;
    Ok(ServerOutcome {
        transactions,
        metered: meter.finish(own_syscalls + receiver.counts().syscalls + sender.counts().syscalls),
        recv_counts: receiver.counts(),
    })
}
