//! The serving end of a load session: the probe's connection answered request by request, the
//! up flows received until the client closes them, the down flows sent from the client's `go`
//! until the session ends; then a report with every thread's tally (the up flows' goodput is
//! the client's to reckon).

use super::{flow_receiver, flow_sender, probe_ends, Part};
use crate::case::{LoadCase, NetParams};
use crate::net::control::ThreadTally;
use crate::net::control::{ControlChannel, ServerReport};
use crate::net::session::loops::{answer, Answered, Bulk, Moved};
use crate::net::session::meter::{Ctx, Meter};
use crate::net::session::observe::{measured_counters, NO_SERVER_WINDOW};
use crate::net::session::served::{self, Followed, Prepared, ServedThread, ServedWorkload};
use crate::net::session::{accept_data, Served, Session};
use crate::observation::Role;
use anyhow::anyhow;
use std::io::{self, Read};
use std::net::TcpStream;
use std::time::Duration;

/// The byte a down flow's receiver sends when the load starts.
pub(super) const GO: u8 = b'g';
/// How long the client has, after `ready`, to open every data connection.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

pub const SERVED: Served = served::entry::<LoadServer>();

struct LoadServer;

/// What one serving thread counted.
enum Counted {
    Probe(Answered),
    Flow(Moved),
}

impl ServedWorkload for LoadServer {
    type Hello = LoadCase;
    /// The data connections: the probe's, then the up flows', then the down flows'.
    type State = Vec<TcpStream>;
    type Part = Part;
    type Outcome = Counted;
    const HELLOS: &'static [&'static str] = &["load"];
    const THREAD: &'static str = "iopath-load-server";

    fn net(case: &LoadCase) -> &NetParams {
        &case.net
    }

    fn check(case: &LoadCase, headroom: Option<u64>) -> Result<(), String> {
        super::check_case(case).and_then(|()| super::check_memory(case, Role::Server, headroom))
    }

    fn prepare(case: &LoadCase, control: &mut ControlChannel, session: &Session<'_>) -> Prepared<Self> {
        if let Err(refusal) = crate::net::mode::check_receiver(case.rx_mode) {
            return Err(served::unavailable(control, refusal));
        }
        let (up, down) = case.flow_counts();
        let data = accept_data(control, 1 + up + down, SETUP_TIMEOUT, session.stopped)?;
        super::set_congestion(case, &data[1..]).map_err(|refusal| served::unavailable(control, refusal))?;
        let (sender, receiver) = probe_ends(case, &data[0])?;
        let mut parts = vec![Part::Probe(sender, receiver)];
        for stream in &data[1..=up] {
            parts.push(Part::Flow(Bulk::Recv(flow_receiver(case, stream)?)));
        }
        for _ in 0..down {
            parts.push(Part::Flow(Bulk::Send(flow_sender(case)?)));
        }
        Ok((data, parts))
    }

    fn streams(data: &Vec<TcpStream>) -> &[TcpStream] {
        data
    }

    fn serve_thread(
        case: &LoadCase,
        data: &Vec<TcpStream>,
        part: Part,
        thread: &ServedThread<'_>,
    ) -> anyhow::Result<Counted> {
        let stream = &data[thread.index];
        let count = |bytes| thread.count(bytes);
        let served = match part {
            // The probe is not counted by perf events on this end either.
            Part::Probe(sender, receiver) => Meter::start(
                &Ctx {
                    perf: false,
                    ..thread.ctx()
                },
                Role::Server,
                0,
            )
            .and_then(|meter| answer(meter, stream, (receiver, sender), 2 * case.probe_size, &count))
            .map(Counted::Probe),
            // A down flow starts at its client's go.
            Part::Flow(end) => {
                let down = matches!(end, Bulk::Send(_));
                let go = || if down { wait_for_go(stream, thread) } else { Ok(()) };
                thread.bulk(stream, end, case.size, go).map(Counted::Flow)
            }
        };
        served.map_err(|e| anyhow!("server: {e}"))
    }

    fn report(
        _: &LoadCase,
        _: Vec<TcpStream>,
        threads: Vec<Counted>,
        followed: Followed,
    ) -> anyhow::Result<ServerReport> {
        let mut report = ServerReport::default();
        let mut counters = Vec::new();
        for thread in &threads {
            let (tally, metered, recv) = match thread {
                Counted::Probe(a) => (
                    ThreadTally {
                        messages: a.transactions,
                        syscalls: a.metered.syscalls,
                        ..ThreadTally::default()
                    },
                    &a.metered,
                    Some(&a.recv_counts),
                ),
                Counted::Flow(m) => (m.tally.clone(), &m.metered, m.recv_counts.as_ref()),
            };
            report.verified_messages += recv.map_or(0, |r| r.verified_messages);
            report.corrupt_messages += recv.map_or(0, |r| r.corrupt_messages);
            report.placement.push(metered.placement.clone());
            // The flows' counters (the probe has no perf events).
            if let Counted::Flow(_) = thread {
                counters.push(&metered.counters);
            }
            report.threads.push(tally);
        }
        let bytes: u64 = report.threads.iter().map(|t| t.bytes).sum();
        let messages: u64 = report.threads.iter().skip(1).map(|t| t.messages).sum();
        let counters = measured_counters(counters, NO_SERVER_WINDOW);
        report.metrics = counters.metrics(Role::Server, bytes, messages, "msg", followed.tsc_hz);
        report.metrics.extend(followed.system_metrics);
        Ok(report)
    }
}

/// A down flow's sender waits for its receiver's `go` (the end of the client's idle pass),
/// however long the idle pass is, unless the session ends first.
fn wait_for_go(mut stream: &TcpStream, thread: &ServedThread<'_>) -> io::Result<()> {
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte) {
            Ok(1) if byte[0] == GO => return Ok(()),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the client closed a down flow before it started",
                ))
            }
            Ok(_) => return Err(io::Error::other("a down flow's client sent something other than go")),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) && !thread.quit() => {}
            Err(e) => return Err(e),
        }
    }
}
