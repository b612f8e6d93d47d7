//! Net records against `iopath net serve` (`--topology remote:HOST:PORT`): the hello names the
//! workload `records`; the server fills the table, opens a data port of the session's own,
//! accepts one connection per client thread from the client's address, runs its serving
//! threads through the window the client announces (`measure`, `done`) and sends back its
//! side's metrics in the `report` — its role `server` figures, the zero-copy completions, and
//! its machine's memory traffic (the sender's DRAM is the figure the seed asked about).

use super::server;
use super::table::Table;
use super::{
    build_observation, check_case, interrupted, join_sides, spawn_client, ThreadStart, IDLE_TIMEOUT, START_PATIENCE,
};
use crate::case::{RecordsCase, RecordsMode};
use crate::measure::clock;
use crate::measure::counters::kernel_policy;
use crate::measure::window::{SystemProbes, Window};
use crate::net::control::{Control, ControlChannel, HelloCase, ServerReport};
use crate::net::session::handshake::{self, refuse, RefusalKind};
use crate::net::session::observe::relay_server_warnings;
use crate::net::session::server::wrong_hello;
use crate::net::session::StartGate;
use crate::net::session::{accept_from, budget_error, open_data_port, over_budget, send_outcome, Served, Session};
use crate::net::workload::common::drive_phases;
use crate::observation::{Metric, Observation, Role, Source, Unsupported, WarningKind};
use crate::stop::{Interrupted, Stop};
use crate::sys::net as sock;
use anyhow::{anyhow, bail, Context};
use serde::Serialize;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long either end waits for the other to set up (data connections, the table) or report.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// The hello of a records client.
#[derive(Serialize)]
struct RecordsHello<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    version: u32,
    workload: &'static str,
    case: &'a RecordsCase,
}

/// The server's words of a refusal.
fn refused_text(e: &anyhow::Error) -> String {
    e.downcast_ref::<handshake::ServerRefused>()
        .map_or_else(|| format!("{e:#}"), |r| r.0.error.clone())
}

/// Metrics the server side measures and sends back: its role's, and the zero-copy completions
/// (its sockets sent).
fn server_owned(m: &Metric) -> bool {
    m.role == Role::Server || m.name.starts_with("zerocopy_")
}

/// The records server side, as `net serve` serves it.
pub const SERVED: Served = Served {
    hellos: &["records"],
    serve,
};

fn serve(control: ControlChannel, hello: HelloCase, session: &Session<'_>) -> anyhow::Result<()> {
    match hello {
        HelloCase::Records(case) => serve_session(control, &case, session.stopped, session.max_bytes),
        other => Err(wrong_hello(control, &other)),
    }
}

/// Serve one records session on `control` (called by `net serve` for a `records` hello).
fn serve_session(
    mut control: ControlChannel,
    case: &RecordsCase,
    stopped: &dyn Fn() -> bool,
    max_bytes: Option<u64>,
) -> anyhow::Result<()> {
    if let Err(error) = check_case(case, crate::sys::procfs::memory_headroom()) {
        return Err(refuse(&mut control, RefusalKind::Limits, error));
    }
    if case.mode == RecordsMode::UringZc {
        if let Err(e) = crate::sys::uring_gather_zc::GatherZcRing::new(server::URING_ENTRIES) {
            return Err(refuse(
                &mut control,
                RefusalKind::Kernel,
                format!("uring-zc unavailable on the server: {e:?}"),
            ));
        }
    }
    let Some(table) = Table::new(case.record_size as usize, case.table_records(), case.align, stopped)? else {
        return Err(anyhow::Error::new(Interrupted));
    };
    let (listener, peer) = open_data_port(&mut control)?;
    let data = accept_from(&listener, case.net.threads, peer, SETUP_TIMEOUT, stopped)?;
    for s in &data {
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(IDLE_TIMEOUT))?;
        s.set_write_timeout(Some(IDLE_TIMEOUT))?;
        if case.mode == RecordsMode::ZeroCopy {
            sock::enable_zerocopy(s.as_raw_fd()).map_err(|e| {
                refuse(
                    &mut control,
                    RefusalKind::Kernel,
                    format!("setsockopt(SO_ZEROCOPY) failed: {e}"),
                )
            })?;
        }
    }
    let outcome = serve_threads(case, &table, &data, &mut control, stopped, max_bytes);
    send_outcome(&mut control, outcome)
}

/// The next control message within `wait`, giving up when `stopped`.
fn next(control: &mut ControlChannel, wait: Duration, stopped: &dyn Fn() -> bool) -> anyhow::Result<Control> {
    let line = control.recv_line(Some(Instant::now() + wait), stopped).map_err(|e| {
        if e.kind() == io::ErrorKind::Interrupted && stopped() {
            anyhow::Error::new(Interrupted)
        } else {
            anyhow::Error::new(e)
        }
    })?;
    Ok(ControlChannel::parse(&line)?)
}

/// Run the serving threads through the client's window; their metrics as a report.
fn serve_threads(
    case: &RecordsCase,
    table: &Table,
    data: &[TcpStream],
    control: &mut ControlChannel,
    stopped: &dyn Fn() -> bool,
    max_bytes: Option<u64>,
) -> anyhow::Result<ServerReport> {
    let policy = kernel_policy();
    // The byte budget, read from the kernel's counts between polls of the control connection.
    let exceeded = std::cell::Cell::new(false);
    let stopped_or_over = || {
        if stopped() {
            return true;
        }
        exceeded.set(over_budget(data, max_bytes));
        exceeded.get()
    };
    let tsc_hz = clock::tsc_hz();
    let window = Window::new();
    let mut system = SystemProbes::default();
    crate::measure::memtraffic::push_memory_traffic_probe(&mut system);
    let ready = StartGate::default();
    let pin = |i: usize| case.net.server_cpus.as_ref().and_then(|c| c.cpu_for(i));
    let session_wait = Duration::from_millis(case.net.session_ms()) + SETUP_TIMEOUT;
    let (outcomes, followed) = std::thread::scope(|scope| {
        let handles: Vec<_> = data
            .iter()
            .enumerate()
            .map(|(i, stream)| {
                let start = ThreadStart {
                    index: i,
                    pin: pin(i),
                    window: &window,
                    ready: &ready,
                    policy: &policy,
                    perf: case.net.perf,
                };
                std::thread::Builder::new()
                    .name(format!("iopath-records-srv-{i}"))
                    .spawn_scoped(scope, move || {
                        let result = server::serve(start, case, table, stream.as_raw_fd());
                        if result.is_err() {
                            stream.shutdown(Shutdown::Both).ok();
                        }
                        result
                    })
            })
            .collect();
        let started = handles.iter().filter(|h| h.is_ok()).count();
        let followed = if started == handles.len() && ready.open_when(started, START_PATIENCE) {
            // The client announces the window; the threads follow it through their views.
            let mut metrics = Vec::new();
            let mut result = Ok(());
            loop {
                match next(control, session_wait, &stopped_or_over) {
                    Ok(Control::Measure) => window.open(&mut system),
                    Ok(Control::Done) => {
                        metrics = window.close(&mut system);
                        break;
                    }
                    Ok(other) => {
                        result = Err(anyhow!("unexpected control message {other:?}"));
                        break;
                    }
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            if exceeded.get() {
                result = Err(budget_error(max_bytes));
            }
            if result.is_err() {
                window.abandon(&mut system);
                for s in data {
                    s.shutdown(Shutdown::Both).ok();
                }
            }
            result.map(|()| metrics)
        } else {
            ready.abandon();
            Err(anyhow!("could not start all {} server threads", handles.len()))
        };
        let outcomes = join_sides(handles);
        (outcomes, followed)
    });
    let system_metrics = followed?;
    let mut threads = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        threads.push(outcome?);
    }
    let obs = build_observation(case, &threads, tsc_hz, &system_metrics);
    let fds: Vec<_> = data.iter().map(|s| s.as_raw_fd()).collect();
    let mut metrics: Vec<Metric> = obs.metrics.into_iter().filter(server_owned).collect();
    metrics.extend(system_metrics);
    metrics.extend(crate::measure::system::tcp_info_metrics(&fds, Role::Server));
    let warnings = obs
        .warnings
        .into_iter()
        .filter(|w| {
            matches!(
                w.kind,
                WarningKind::ZeroCopyCopied | WarningKind::Anomaly | WarningKind::Starved
            )
        })
        .map(|w| format!("server: {}", w.text))
        .collect();
    Ok(ServerReport {
        threads: Vec::new(),
        metrics,
        placement: threads.into_iter().map(|t| t.placement).collect(),
        verified_messages: 0,
        corrupt_messages: 0,
        warnings,
    })
}

/// Say hello (the server fills its table before it answers), answer a key challenge, and
/// return the session's data port; a server that cannot read a records hello is `Unsupported`.
fn hello(control: &mut ControlChannel, case: &RecordsCase, addr: SocketAddr, stop: Stop) -> anyhow::Result<u16> {
    let hello = RecordsHello {
        kind: "hello",
        version: crate::net::control::PROTOCOL_VERSION,
        workload: "records",
        case,
    };
    // The server fills its table before it answers: allow for a large one.
    let psk = crate::net::auth::client_key();
    let ready = handshake::client(control, &hello, psk, SETUP_TIMEOUT, stop).map_err(|e| {
        match handshake::refusal_kind(&e) {
            // This server cannot read a records hello: an older iopath.
            Some(RefusalKind::BadHello) => Unsupported::new(
                "net records on this server",
                format!("it refused the hello ({}): upgrade it", refused_text(&e)),
            )
            .into(),
            _ => e,
        }
    })?;
    ready.port.ok_or_else(|| {
        anyhow!("the server at {addr} answered without a data port: an older iopath that does not serve net records")
    })
}

/// The client side against a remote server: hello, data connections, the client threads
/// through the window this side announces, the server's report merged in.
pub fn run_client(case: &RecordsCase, addr: SocketAddr, stop: Stop) -> anyhow::Result<Observation> {
    let tsc_hz = clock::tsc_hz();
    let mut control = ControlChannel::new(crate::net::session::connect(addr, stop)?)?;
    control.stream().set_nodelay(true).ok();
    let port = hello(&mut control, case, addr, stop)?;
    let stopped = || stop.requested();
    let data_addr = SocketAddr::new(addr.ip(), port);
    let data: Vec<TcpStream> = (0..case.net.threads)
        .map(|_| crate::net::session::connect(data_addr, stop))
        .collect::<anyhow::Result<_>>()?;
    for s in &data {
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(IDLE_TIMEOUT))?;
        s.set_write_timeout(Some(IDLE_TIMEOUT))?;
    }
    let policy = kernel_policy();
    let window = Window::new();
    let mut system = SystemProbes::default();
    crate::measure::system::push_network_probes(&mut system, None);
    let ready = StartGate::default();
    let failed = AtomicBool::new(false);
    let pin = |i: usize| case.net.client_cpus.as_ref().and_then(|c| c.cpu_for(i));
    let (outcomes, drive_result) = std::thread::scope(|scope| {
        let handles: Vec<_> = data
            .iter()
            .enumerate()
            .map(|(i, stream)| {
                let start = ThreadStart {
                    index: i,
                    pin: pin(i),
                    window: &window,
                    ready: &ready,
                    policy: &policy,
                    perf: case.net.perf,
                };
                spawn_client(scope, start, case, stream, &failed)
            })
            .collect();
        let started = handles.iter().filter(|h| h.is_ok()).count();
        let drive_result = if started == handles.len() && ready.open_when(started, START_PATIENCE) {
            drive_phases(
                Duration::from_millis(case.net.warmup_ms),
                Duration::from_millis(case.net.duration_ms),
                &window,
                &mut system,
                &failed,
                stop,
                &mut control,
            )
        } else {
            ready.abandon();
            window.close(&mut system);
            control.send(&Control::Done).ok();
            Err(anyhow!("could not start all {} client threads", handles.len()))
        };
        if drive_result.is_err() || failed.load(Ordering::SeqCst) {
            for s in &data {
                s.shutdown(Shutdown::Both).ok();
            }
        }
        let outcomes = join_sides(handles);
        (outcomes, drive_result)
    });
    let mut system_metrics = drive_result?;
    if stop.requested() {
        return Err(interrupted());
    }
    let mut threads = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        match outcome {
            Ok(t) => threads.push(t),
            Err(e) => {
                if let Ok(Control::Failed { error }) = next(&mut control, Duration::from_secs(2), &stopped) {
                    bail!("the run failed: {e}; the server said: {error}");
                }
                return Err(e);
            }
        }
    }
    let report = match next(&mut control, SETUP_TIMEOUT, &stopped).context("waiting for the server's report")? {
        Control::Report(report) => *report,
        Control::Failed { error } => bail!("the server failed: {error}"),
        other => bail!("unexpected message from the server: {other:?}"),
    };
    // The server's machine-wide figures (its memory traffic) are the system's here: the
    // sender's DRAM is what the records cost.
    let (server_side, server_system): (Vec<Metric>, Vec<Metric>) = report.metrics.into_iter().partition(server_owned);
    system_metrics.extend(server_system);
    let mut obs = build_observation(case, &threads, tsc_hz, &system_metrics);
    obs.metrics.retain(|m| !server_owned(m));
    obs.metrics
        .extend(server_side.into_iter().map(|m| match (&m.value, &m.source) {
            (None, Source::Unavailable(_)) | (Some(_), _) => m,
            (None, _) => Metric::unavailable(&m.name, m.role, &m.unit, "the server sent no value"),
        }));
    let fds: Vec<_> = data.iter().map(|s| s.as_raw_fd()).collect();
    obs.metrics
        .extend(crate::measure::system::tcp_info_metrics(&fds, Role::Client));
    obs.metrics.extend(system_metrics);
    obs.placement.extend(report.placement);
    relay_server_warnings(&mut obs, &report.warnings);
    Ok(obs)
}
