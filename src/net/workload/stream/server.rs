//! The receiving end of a stream session: check the case, collect the data connections (which
//! arrive on the session server's own listener, routed here by their token), receive on one
//! thread per connection, report what was counted. Served by `net/session/server.rs` for a
//! `stream` hello (the in-process loopback run and `iopath net serve`).

use super::thread::{self, End, Shared, ThreadOutcome, ThreadPlan};
use crate::case::{RxMode, StreamCase};
use crate::net::control::{Control, ControlChannel, ServerReport};
use crate::net::mode::{self, Receiver, RecvCounts};
use crate::net::session::data::send_failure;
use crate::net::session::handshake::{secs, SLICE};
use crate::net::session::observe::{received_report, ServedBytes};
use crate::net::session::served::{self, Budget, Followed, ServedThread, ServedWorkload};
use crate::net::session::{Served, Session, DATA_IDLE_TIMEOUT};
use crate::observation::names;
use crate::observation::{Metric, Role, Source};
use crate::sys::net as sock;
use anyhow::{anyhow, bail};
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long the client has, after the server said Ready, to open every data connection.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The stream's server side, as `net serve` and the loopback run serve it.
pub const SERVED: Served = served::entry::<StreamServer>();

struct StreamServer;

impl ServedWorkload for StreamServer {
    type Hello = StreamCase;
    /// The data connections, in thread order.
    type State = Vec<TcpStream>;
    type Part = Box<dyn Receiver>;
    type Outcome = ThreadOutcome;
    const HELLOS: &'static [&'static str] = &["stream"];
    const THREAD: &'static str = "iopath-server";
    const BUDGET: Budget = Budget::Kernel;

    fn net(case: &StreamCase) -> &crate::case::NetParams {
        &case.net
    }

    /// The limits, then the receive buffers the case would take here, against the same
    /// headroom the client side checks (MemAvailable lowered by the memory cgroup's room: a
    /// server in a 3 GiB cgroup on a large machine must not take MemAvailable's word).
    fn check(case: &StreamCase, headroom: Option<u64>) -> Result<(), String> {
        super::check_case(case, Role::Server, headroom)
    }

    /// Hand out the token, collect the data connections (routed here by the greeters), and
    /// make a receiver for each.
    fn prepare(
        case: &StreamCase,
        control: &mut ControlChannel,
        session: &Session<'_>,
    ) -> anyhow::Result<(Vec<TcpStream>, Vec<Box<dyn Receiver>>)> {
        // A receive mode this kernel refuses is answered before any connection is made.
        if let Err(refusal) = mode::check_receiver(case.rx_mode) {
            return Err(served::unavailable(control, refusal));
        }
        let data = data_connections(case, control, session)?;
        match attached_receivers(case, &data) {
            Ok(receivers) => Ok((data, receivers)),
            Err(e) => Err(send_failure(control, e)),
        }
    }

    fn streams(data: &Vec<TcpStream>) -> &[TcpStream] {
        data
    }

    fn serve_thread(
        case: &StreamCase,
        data: &Vec<TcpStream>,
        receiver: Box<dyn Receiver>,
        served: &ServedThread<'_>,
    ) -> anyhow::Result<ThreadOutcome> {
        let shared = Shared {
            window: &served.shared.window,
            ready: &served.shared.ready,
            policy: &served.shared.policy,
        };
        let fd = data[served.index].as_raw_fd();
        let plan = ThreadPlan::new(case, Role::Server, served.index, fd, &shared);
        thread::run(plan, End::Recv(receiver)).map_err(|e| match mode::unsupported_in(&e) {
            Some(refusal) => anyhow::Error::new(refusal),
            None => anyhow!("server: {e}"),
        })
    }

    fn report(
        case: &StreamCase,
        _: Vec<TcpStream>,
        threads: Vec<ThreadOutcome>,
        followed: Followed,
    ) -> anyhow::Result<ServerReport> {
        Ok(server_report(case, threads, followed.system_metrics, followed.tsc_hz))
    }
}

/// Say `ready` with the session's token and collect its data connections, each tagged with
/// the token and its thread index, as the greeters route them here.
fn data_connections(
    case: &StreamCase,
    control: &mut ControlChannel,
    session: &Session<'_>,
) -> anyhow::Result<Vec<TcpStream>> {
    let (token, rx) = session.open_route();
    control.send(&Control::Ready { token })?;
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let mut data: Vec<Option<TcpStream>> = (0..case.net.threads).map(|_| None).collect();
    let mut accepted = 0;
    while accepted < case.net.threads {
        if (session.stopped)() {
            return Err(super::interrupted());
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) else {
            bail!(
                "the client opened {accepted} of {} data connections: timed out after {}",
                case.net.threads,
                secs(SETUP_TIMEOUT)
            );
        };
        control_still_open(control)?;
        match rx.recv_timeout(left.min(SLICE)) {
            Ok((index, s)) => {
                if let Some(slot) = data.get_mut(index as usize).filter(|slot| slot.is_none()) {
                    *slot = Some(s);
                    accepted += 1;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => bail!("the session's route was closed"),
        }
    }
    session.close_route();
    let data: Vec<TcpStream> = data.into_iter().flatten().collect();
    for s in &data {
        s.set_read_timeout(Some(DATA_IDLE_TIMEOUT))?;
    }
    Ok(data)
}

/// An error once the client has closed its control connection. Control data that arrives
/// early (the client may announce the window before every data connection was accepted) stays
/// queued.
fn control_still_open(control: &ControlChannel) -> anyhow::Result<()> {
    if control.has_buffered() {
        return Ok(());
    }
    let mut byte = [0u8; 1];
    match sock::recv(
        control.stream().as_raw_fd(),
        &mut byte,
        libc::MSG_PEEK | libc::MSG_DONTWAIT,
    ) {
        Ok(0) => bail!("the client closed the control connection during set-up"),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
        Err(e) => bail!("the control connection failed during set-up: {e}"),
    }
}

/// One receiver per data connection, made and attached to it before any thread starts, so a
/// kernel that refuses the receive mode is found before the window.
fn attached_receivers(case: &StreamCase, data: &[TcpStream]) -> anyhow::Result<Vec<Box<dyn Receiver>>> {
    let mut receivers = Vec::with_capacity(data.len());
    for stream in data {
        let mut receiver = mode::receiver(
            case.rx_mode,
            case.rx_wake,
            case.size as usize,
            case.fields,
            case.net.verify,
            case.align,
        )?;
        receiver
            .attach(stream.as_raw_fd())
            .map_err(|e| match mode::unsupported_in(&e) {
                Some(refusal) => anyhow::Error::new(refusal),
                None => anyhow!("setting up the {} receiver: {e}", case.rx_mode),
            })?;
        receivers.push(receiver);
    }
    Ok(receivers)
}

/// The receiving threads' counts merged into the report the client gets.
fn server_report(
    case: &StreamCase,
    threads: Vec<ThreadOutcome>,
    system_metrics: Vec<Metric>,
    tsc_hz: Option<f64>,
) -> ServerReport {
    let served = threads.iter().map(|t| ServedBytes {
        tally: &t.tally,
        counters: &t.counters,
        placement: &t.placement,
    });
    let mut report = received_report(served, "msg", system_metrics, tsc_hz);
    let messages: u64 = threads.iter().map(|t| t.tally.messages).sum();
    let syscalls: u64 = threads.iter().map(|t| t.tally.syscalls).sum();
    report.metrics.push(Metric::tool(
        "messages_received",
        Role::Server,
        messages as f64,
        "messages",
    ));
    report.metrics.push(Metric::new(
        names::SYSCALLS_PER_MSG,
        Role::Server,
        if messages == 0 {
            f64::NAN
        } else {
            syscalls as f64 / messages as f64
        },
        "syscalls/msg",
        Source::Tool,
    ));
    if case.rx_mode == RxMode::Zerocopy {
        let windows: Vec<&RecvCounts> = threads.iter().filter_map(|t| t.recv_window.as_ref()).collect();
        let (rx_metrics, warning) = zerocopy_rx_metrics(&windows);
        report.metrics.extend(rx_metrics);
        report.warnings.extend(warning);
    }
    let recv: Vec<_> = threads.iter().filter_map(|t| t.recv_counts.clone()).collect();
    report.verified_messages = recv.iter().map(|r| r.verified_messages).sum();
    report.corrupt_messages = recv.iter().map(|r| r.corrupt_messages).sum();
    report
}

/// What TCP receive zero-copy did inside the window, from the receivers that measured: bytes
/// mapped, bytes copied by recv(), the fraction mapped (source kernel: the kernel's own answer
/// to each call), and a warning when it mapped nothing.
fn zerocopy_rx_metrics(windows: &[&RecvCounts]) -> (Vec<Metric>, Option<String>) {
    let kernel = |name: &str, unit: &str, value: Result<f64, String>| {
        Metric::from_result(name, Role::Server, unit, Source::Kernel, value)
    };
    if windows.is_empty() {
        let none = || Err(super::NO_SERVER_WINDOW.to_string());
        return (
            vec![
                kernel(names::RX_MAPPED_FRACTION, "fraction", none()),
                kernel("rx_bytes_mapped", "B", none()),
                kernel("rx_bytes_copied", "B", none()),
            ],
            None,
        );
    }
    let mut sum = RecvCounts::default();
    for w in windows {
        sum.add(w);
    }
    let total = sum.bytes_mapped + sum.bytes_copied;
    let fraction = if total == 0 {
        Err("no byte was received inside the window".to_string())
    } else {
        Ok(sum.bytes_mapped as f64 / total as f64)
    };
    let warning = (total > 0 && sum.bytes_mapped == 0).then(|| {
        format!(
            "zerocopy receive: the kernel mapped none of the {} received in the window (all copied by recv): it maps only data held as whole 4 KiB pages, which on loopback takes a zero-copy sender and 4096-byte segments",
            crate::format::format_bytes(total)
        )
    });
    (
        vec![
            kernel(names::RX_MAPPED_FRACTION, "fraction", fraction),
            kernel("rx_bytes_mapped", "B", Ok(sum.bytes_mapped as f64)),
            kernel("rx_bytes_copied", "B", Ok(sum.bytes_copied as f64)),
        ],
        warning,
    )
}
