//! The receiving end of a stream session: check the case, collect the data connections (which
//! arrive on the session server's own listener, routed here by their token), receive on one
//! thread per connection, report what was counted. Served by `net/session/server.rs` for a
//! `stream` hello (the in-process loopback run and `iopath net serve`).

use super::thread::{self, End, Shared, ThreadOutcome, ThreadPlan};
use crate::case::{RxMode, StreamCase};
use crate::measure::clock;
use crate::measure::counters::kernel_policy;
use crate::measure::window::Window;
use crate::net::control::{Control, ControlChannel, HelloCase, ServerReport};
use crate::net::mode::{self, Receiver, RecvCounts};
use crate::net::session::handshake::{secs, SLICE};
use crate::net::session::server::wrong_hello;
use crate::net::session::{budget_error, over_budget, Served, Session, StartGate, DATA_IDLE_TIMEOUT};
use crate::observation::names;
use crate::observation::{Metric, Role, Source, Unsupported};
use crate::stop::Interrupted;
use crate::sys::net as sock;
use anyhow::{anyhow, bail, Context};
use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long the client has, after the server said Ready, to open every data connection.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The stream's server side, as `net serve` and the loopback run serve it.
pub const SERVED: Served = Served {
    hellos: &["stream"],
    check,
    serve,
};

/// The limits, then the receive buffers the case would take here, against the same headroom
/// the client side checks (MemAvailable lowered by the memory cgroup's room: a server in a
/// 3 GiB cgroup on a large machine must not take MemAvailable's word).
fn check(hello: &HelloCase, headroom: Option<u64>) -> Result<(), String> {
    match hello {
        HelloCase::Stream(case) => super::check_case(case, Role::Server, headroom),
        _ => Ok(()),
    }
}

fn serve(control: ControlChannel, hello: HelloCase, session: &Session<'_>) -> anyhow::Result<()> {
    match hello {
        HelloCase::Stream(case) => run_session(control, &case, session),
        other => Err(wrong_hello(control, &other)),
    }
}

/// Run the session a hello asked for: check the case, hand out the token, collect the data
/// connections (routed here by the greeters), receive, report.
fn run_session(mut control: ControlChannel, case: &StreamCase, session: &Session<'_>) -> anyhow::Result<()> {
    let stopped = session.stopped;
    // Limits and memory: checked by the session server before this runs (`check`).
    // A receive mode this kernel refuses is answered before any connection is made.
    if let Err(refusal) = mode::check_receiver(case.rx_mode) {
        control.send(&unavailable(&refusal)).ok();
        return Err(refusal.into());
    }
    let (token, rx) = session.open_route();
    control.send(&Control::Ready { token })?;

    // The data connections, each tagged with the token and its thread index.
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let mut data: Vec<Option<TcpStream>> = (0..case.net.threads).map(|_| None).collect();
    let mut accepted = 0;
    while accepted < case.net.threads {
        if stopped() {
            return Err(super::interrupted());
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) else {
            bail!(
                "the client opened {accepted} of {} data connections: timed out after {}",
                case.net.threads,
                secs(SETUP_TIMEOUT)
            );
        };
        control_still_open(&control)?;
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

    let outcome = run_receivers(case, &data, &mut control, stopped, session.max_bytes);
    let report = match outcome {
        Ok(report) => report,
        Err(e) => {
            let answer = match e.downcast_ref::<Unsupported>() {
                Some(refusal) => unavailable(refusal),
                None => Control::Failed {
                    error: format!("{e:#}"),
                },
            };
            control.send(&answer).ok();
            return Err(e);
        }
    };
    control
        .send(&Control::Report(Box::new(report)))
        .context("sending the report to the client")?;
    Ok(())
}

fn unavailable(refusal: &Unsupported) -> Control {
    Control::Unavailable {
        what: refusal.what.clone(),
        reason: refusal.reason.clone(),
    }
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

/// Run one receiving thread per data connection while following the client's phase messages.
/// A stop (`stopped`) ends the session within about 100 ms as `Interrupted`; so does reaching
/// the byte budget `max_bytes`, as an error naming it.
fn run_receivers(
    case: &StreamCase,
    data: &[TcpStream],
    control: &mut ControlChannel,
    stopped: &dyn Fn() -> bool,
    max_bytes: Option<u64>,
) -> anyhow::Result<ServerReport> {
    let policy = kernel_policy();
    let tsc_hz = clock::tsc_hz();
    let window = Window::new();
    let exceeded = std::cell::Cell::new(false);
    let stopped_or_over = || {
        if stopped() {
            return true;
        }
        exceeded.set(over_budget(data, max_bytes));
        exceeded.get()
    };
    let ready = StartGate::default();
    let shared = Shared {
        window: &window,
        ready: &ready,
        policy: &policy,
    };
    let receivers = attached_receivers(case, data)?;
    let (outcomes, followed) = std::thread::scope(|scope| {
        let handles: Vec<_> = data
            .iter()
            .zip(receivers)
            .enumerate()
            .map(|(i, (stream, receiver))| {
                let plan = ThreadPlan::new(case, Role::Server, i, stream.as_raw_fd(), &shared);
                let end = End::Recv(receiver);
                std::thread::Builder::new()
                    .name(format!("iopath-server-{i}"))
                    .spawn_scoped(scope, move || thread::run(plan, end))
            })
            .collect();
        if !crate::net::session::gate::all_ready(&ready, &handles) {
            // Whoever did start is released; end the session: the client sees the failure.
            shut_all(data);
            return (thread::join_all(handles), Followed::default());
        }
        let followed = follow_client(case, &window, data, control, &stopped_or_over);
        (thread::join_all(handles), followed)
    });
    if exceeded.get() {
        return Err(budget_error(max_bytes));
    }
    if followed.interrupted {
        return Err(super::interrupted());
    }
    let mut threads = Vec::new();
    for outcome in outcomes {
        threads.push(outcome.map_err(|e| match mode::unsupported_in(&e) {
            Some(refusal) => anyhow::Error::new(refusal),
            None => anyhow!("server: {e}"),
        })?);
    }
    Ok(server_report(case, threads, followed.system_metrics, tsc_hz))
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

fn shut_all(data: &[TcpStream]) {
    for s in data {
        s.shutdown(Shutdown::Both).ok();
    }
}

/// How following the client's window ended.
#[derive(Default)]
struct Followed {
    /// The system probes' metrics of a window closed by `Done`.
    system_metrics: Vec<Metric>,
    /// A stop (or the byte budget) ended it.
    interrupted: bool,
}

/// Follow the client: Measure opens the window, Done closes it. Anything else (EOF, timeout,
/// a stop) closes it too, and the data connections are shut so no thread waits.
fn follow_client(
    case: &StreamCase,
    window: &Window,
    data: &[TcpStream],
    control: &mut ControlChannel,
    stopped_or_over: &dyn Fn() -> bool,
) -> Followed {
    let mut system = crate::net::session::served_probes(case.net.perf, crate::measure::trace::RxCopies::Traced);
    let longest =
        Duration::from_millis(case.net.warmup_ms.saturating_add(case.net.duration_ms)) + Duration::from_secs(30);
    loop {
        match super::recv_watching(control, longest, stopped_or_over) {
            Ok(Control::Measure) => window.open(&mut system),
            Ok(Control::Done) => {
                return Followed {
                    system_metrics: window.close(&mut system),
                    interrupted: false,
                }
            }
            other => {
                let interrupted = other.is_err_and(|e| e.is::<Interrupted>());
                window.abandon(&mut system);
                shut_all(data);
                return Followed {
                    system_metrics: Vec::new(),
                    interrupted,
                };
            }
        }
    }
}

/// The receiving threads' counts merged into the report the client gets.
fn server_report(
    case: &StreamCase,
    threads: Vec<ThreadOutcome>,
    system_metrics: Vec<Metric>,
    tsc_hz: Option<f64>,
) -> ServerReport {
    let bytes: u64 = threads.iter().map(|t| t.tally.bytes).sum();
    let messages: u64 = threads.iter().map(|t| t.tally.messages).sum();
    let syscalls: u64 = threads.iter().map(|t| t.tally.syscalls).sum();
    // Only the threads that saw the window have counters; none at all is a result (every
    // counter unavailable, with the reason), not an error.
    let counters = super::measured_counters(threads.iter().map(|t| &t.counters), super::NO_SERVER_WINDOW);
    let mut metrics = counters.metrics(Role::Server, bytes, messages, "msg", tsc_hz);
    metrics.extend(system_metrics);
    metrics.push(Metric::tool(names::BYTES_RECEIVED, Role::Server, bytes as f64, "B"));
    metrics.push(Metric::tool(
        "messages_received",
        Role::Server,
        messages as f64,
        "messages",
    ));
    metrics.push(Metric::new(
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
    let mut warnings = Vec::new();
    if case.rx_mode == RxMode::Zerocopy {
        let windows: Vec<&RecvCounts> = threads.iter().filter_map(|t| t.recv_window.as_ref()).collect();
        let (rx_metrics, warning) = zerocopy_rx_metrics(&windows);
        metrics.extend(rx_metrics);
        warnings.extend(warning);
    }
    let recv: Vec<_> = threads.iter().filter_map(|t| t.recv_counts.clone()).collect();
    ServerReport {
        metrics,
        placement: threads.iter().map(|t| t.placement.clone()).collect(),
        verified_messages: recv.iter().map(|r| r.verified_messages).sum(),
        corrupt_messages: recv.iter().map(|r| r.corrupt_messages).sum(),
        warnings,
        threads: threads.into_iter().map(|t| t.tally).collect(),
    }
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
