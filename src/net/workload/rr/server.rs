//! The serving end of an rr/crr session, run by `iopath net serve` (and by the in-process
//! server of loopback, netns and veth runs) when a hello names `rr` or `crr`: a data listener
//! of the session's own, one thread per connection (rr) or per client thread (crr: each
//! accepts, answers and closes connection after connection), following the client's window,
//! then a report of what its threads counted.

use super::{data_receivers, data_sender, receiver_error};
use crate::case::{RrCase, RrKind};
use crate::net::control::{ControlChannel, ServerReport};
use crate::net::mode::{Receiver, Sender};
use crate::net::session::loops::{answer, Answered};
use crate::net::session::meter::Meter;
use crate::net::session::observe::{transaction_report, ServedTransactions};
use crate::net::session::served::{self, Followed, ServedThread, ServedWorkload, Until};
use crate::net::session::DATA_IDLE_TIMEOUT;
use crate::net::session::{accept_from, open_data_port, Served, Session};
use crate::observation::{Metric, Role};
use anyhow::anyhow;
use std::io;
use std::net::{IpAddr, Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// How long the client has, after Ready, to open every rr data connection.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The rr/crr server side, as `net serve` and the loopback run serve it.
pub const SERVED: Served = served::entry::<RrServer>();

struct RrServer;

/// The session's data listener (crr's threads accept on it), the client's address and rr's
/// connections.
struct State {
    listener: TcpListener,
    peer: IpAddr,
    data: Vec<TcpStream>,
}

impl ServedWorkload for RrServer {
    type Hello = RrCase;
    type State = State;
    type Part = Ends;
    type Outcome = Answered;
    const HELLOS: &'static [&'static str] = &["rr", "crr"];
    const THREAD: &'static str = "iopath-rr-server";
    const UNTIL: Until = Until::Finished;

    /// Its `workload` is the case's own kind: both must agree.
    fn decode(workload: &'static str, line: &[u8]) -> Result<RrCase, String> {
        match serde_json::from_slice::<super::RrHello>(line) {
            Ok(hello) if hello.case.kind.as_str() == workload => Ok(hello.case),
            Ok(hello) => Err(format!("a {workload} hello with a {} case", hello.case.kind.as_str())),
            Err(e) => Err(format!("bad {workload} hello: {e}")),
        }
    }

    fn net(case: &RrCase) -> &crate::case::NetParams {
        &case.net
    }

    /// The limits, then the memory the case would take here, against the same headroom the
    /// client side checks (MemAvailable and the memory cgroup's room).
    fn check(case: &RrCase, headroom: Option<u64>) -> Result<(), String> {
        super::check_case(case).and_then(|()| super::check_memory(case, Role::Server, headroom))
    }

    fn prepare(
        case: &RrCase,
        control: &mut ControlChannel,
        session: &Session<'_>,
    ) -> anyhow::Result<(State, Vec<Self::Part>)> {
        // A receive mode this kernel refuses is answered before any connection is made.
        if let Err(refusal) = crate::net::mode::check_receiver(case.rx_mode) {
            return Err(served::unavailable(control, refusal));
        }
        // The session's own data port, on the address the client reached us at.
        let (listener, peer) = open_data_port(control)?;
        let data = match case.kind {
            RrKind::Rr => {
                let data = accept_from(&listener, case.net.threads, peer, SETUP_TIMEOUT, session.stopped)?;
                for stream in &data {
                    stream.set_nodelay(true)?;
                    stream.set_read_timeout(Some(DATA_IDLE_TIMEOUT))?;
                    stream.set_write_timeout(Some(DATA_IDLE_TIMEOUT))?;
                }
                data
            }
            RrKind::Crr => {
                // Accepted sockets inherit the listener's timeout: the data one, set once here
                // rather than on every connection. accept() itself ends at the session's end,
                // when the listener is shut down (and at worst after this long, to look at
                // the end flag).
                socket2::SockRef::from(&listener).set_read_timeout(Some(DATA_IDLE_TIMEOUT))?;
                Vec::new()
            }
        };
        let parts = thread_ends(case, &data)?;
        Ok((State { listener, peer, data }, parts))
    }

    fn streams(state: &State) -> &[TcpStream] {
        &state.data
    }

    fn serve_thread(
        case: &RrCase,
        state: &State,
        (sender, receiver): Self::Part,
        thread: &ServedThread<'_>,
    ) -> anyhow::Result<Answered> {
        let served = match case.kind {
            RrKind::Rr => Meter::start(&thread.ctx(), Role::Server, thread.index).and_then(|meter| {
                let bytes = case.request_size + case.response_size;
                answer(meter, &state.data[thread.index], (receiver, sender), bytes, &|b| {
                    thread.count(b)
                })
            }),
            RrKind::Crr => serve_crr(case, thread, (&state.listener, state.peer), receiver, sender),
        };
        served.map_err(|e| anyhow!("server: {e}"))
    }

    /// Wakes every crr thread blocked in accept() (which then fails with EINVAL).
    fn wake(state: &State) {
        if state.data.is_empty() {
            socket2::SockRef::from(&state.listener).shutdown(Shutdown::Read).ok();
        }
    }

    fn report(case: &RrCase, _: State, threads: Vec<Answered>, followed: Followed) -> anyhow::Result<ServerReport> {
        Ok(server_report(case, &threads, followed.system_metrics, followed.tsc_hz))
    }
}

/// A serving thread's sender and receiver.
type Ends = (Box<dyn Sender>, Box<dyn Receiver>);

/// Every thread's sender and receiver, made (and rr's receivers attached to their
/// connections) before any thread starts.
fn thread_ends(case: &RrCase, data: &[TcpStream]) -> anyhow::Result<Vec<Ends>> {
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
    Ok(senders.into_iter().zip(receivers).collect())
}

/// The serving threads' counts merged into the report the client gets.
fn server_report(
    case: &RrCase,
    threads: &[Answered],
    system_metrics: Vec<Metric>,
    tsc_hz: Option<f64>,
) -> ServerReport {
    let served: Vec<_> = threads
        .iter()
        .map(|t| ServedTransactions {
            transactions: t.transactions,
            verified: t.recv_counts.verified_messages,
            corrupt: t.recv_counts.corrupt_messages,
            metered: &t.metered,
        })
        .collect();
    transaction_report(&served, case.request_size + case.response_size, system_metrics, tsc_hz)
}

/// crr: accept a connection, answer its one request, wait for the client's FIN, close; again
/// until the session is over.
fn serve_crr(
    case: &RrCase,
    thread: &ServedThread<'_>,
    (listener, peer): (&TcpListener, IpAddr),
    mut receiver: Box<dyn Receiver>,
    mut sender: Box<dyn Sender>,
) -> io::Result<Answered> {
    let transaction_bytes = case.request_size + case.response_size;
    let mut meter = Meter::start(&thread.ctx(), Role::Server, thread.index)?;
    let (mut transactions, mut own_syscalls) = (0u64, 0u64);
    let mut fin = [0u8; 1];
    loop {
        let open = meter.tick(|| own_syscalls + receiver.counts().syscalls + sender.counts().syscalls);
        if thread.quit() {
            break;
        }
        own_syscalls += 1;
        // The transaction's pattern is named by the client's port (see crr_loop).
        let (stream, seq) = match listener.accept() {
            Ok((stream, from)) if from.ip() == peer => (stream, u64::from(from.port())),
            Ok(_) => continue,
            // The session is over: the listener was shut down under accept().
            Err(_) if thread.quit() => break,
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
            thread.count(transaction_bytes);
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
    Ok(Answered {
        transactions,
        metered: meter.finish(own_syscalls + receiver.counts().syscalls + sender.counts().syscalls),
        recv_counts: receiver.counts(),
    })
}
