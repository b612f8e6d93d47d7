//! The records server's session, as `iopath net serve` serves it and as the in-process server
//! of a loopback, netns or veth run does (`SERVED`, dispatched by the session registry for a
//! hello naming `records`): check the case, fill the table, open a data port of the session's
//! own and accept one connection per client thread from the client's address, run the serving
//! threads through the window the client announces (`measure`, `done`) and send back its
//! side's metrics in the `report` — its role `server` figures, the zero-copy completions, its
//! machine's memory traffic (the sender's DRAM is the figure the seed asked about) and its
//! connections' TCP_INFO.

use super::observe::server_report;
use super::server;
use super::table::Table;
use super::{check_case, check_uring_zc, join_sides, ThreadStart, IDLE_TIMEOUT, SETUP_TIMEOUT};
use crate::case::{RecordsCase, RecordsMode};
use crate::measure::clock;
use crate::measure::counters::kernel_policy;
use crate::measure::window::{SystemProbes, Window};
use crate::net::control::{Control, ControlChannel, HelloCase, ServerReport};
use crate::net::session::handshake::{refuse, RefusalKind};
use crate::net::session::server::wrong_hello;
use crate::net::session::StartGate;
use crate::net::session::{accept_from, budget_error, open_data_port, over_budget, send_outcome, Served, Session};
use crate::observation::{Metric, Role, Unsupported};
use crate::stop::Interrupted;
use crate::sys::net as sock;
use anyhow::anyhow;
use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The records server side, as `net serve` and the in-process server serve it.
pub const SERVED: Served = Served {
    hellos: &["records"],
    check,
    serve,
};

/// The limits and the table the case would build here, against this server's headroom.
fn check(hello: &HelloCase, headroom: Option<u64>) -> Result<(), String> {
    match hello {
        HelloCase::Records(case) => check_case(case, headroom),
        _ => Ok(()),
    }
}

fn serve(control: ControlChannel, hello: HelloCase, session: &Session<'_>) -> anyhow::Result<()> {
    match hello {
        HelloCase::Records(case) => serve_session(control, &case, session.stopped, session.max_bytes),
        other => Err(wrong_hello(control, &other)),
    }
}

/// Serve one records session on `control` (the hello has been read).
fn serve_session(
    mut control: ControlChannel,
    case: &RecordsCase,
    stopped: &dyn Fn() -> bool,
    max_bytes: Option<u64>,
) -> anyhow::Result<()> {
    // Limits and memory: checked by the session server before this runs (`check`).
    if case.mode == RecordsMode::UringZc {
        if let Err(e) = check_uring_zc() {
            let reason = e
                .downcast_ref::<Unsupported>()
                .map_or_else(|| format!("{e:#}"), |u| u.reason.clone());
            return Err(refuse(
                &mut control,
                RefusalKind::Kernel,
                format!("uring-zc unavailable on the server: {reason}"),
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
    }
    if case.mode == RecordsMode::ZeroCopy {
        enable_zerocopy(&mut control, &data)?;
    }
    let outcome = serve_threads(case, &table, &data, &mut control, stopped, max_bytes);
    // Every server thread drained its zero-copy completions before returning: the kernel
    // holds no page of the table when it is freed.
    drop(table);
    send_outcome(&mut control, outcome)
}

/// SO_ZEROCOPY on every data connection. The kernel refusing it is `unavailable` (the case's
/// result, as for a receive mode refused once the connections exist), any other failure a
/// refusal of kind `kernel`.
fn enable_zerocopy(control: &mut ControlChannel, data: &[TcpStream]) -> anyhow::Result<()> {
    for s in data {
        if let Err(e) = sock::enable_zerocopy(s.as_raw_fd()) {
            return Err(match Unsupported::refused("MSG_ZEROCOPY", &e) {
                Some(refusal) => {
                    control
                        .send(&Control::Unavailable {
                            what: refusal.what.clone(),
                            reason: refusal.reason.clone(),
                        })
                        .ok();
                    refusal.into()
                }
                None => refuse(
                    control,
                    RefusalKind::Kernel,
                    format!("setsockopt(SO_ZEROCOPY) failed: {e}"),
                ),
            });
        }
    }
    Ok(())
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

/// Follow the client's window (`measure` opens it, `done` closes it), watching the byte
/// budget between polls of the control connection; the system probes' metrics.
fn follow(
    case: &RecordsCase,
    window: &Window,
    system: &mut SystemProbes,
    data: &[TcpStream],
    control: &mut ControlChannel,
    (stopped, max_bytes): (&dyn Fn() -> bool, Option<u64>),
) -> anyhow::Result<Vec<Metric>> {
    // The byte budget, read from the kernel's counts between polls of the control connection.
    let exceeded = std::cell::Cell::new(false);
    let stopped_or_over = || {
        if stopped() {
            return true;
        }
        exceeded.set(over_budget(data, max_bytes));
        exceeded.get()
    };
    let session_wait = Duration::from_millis(case.net.session_ms()) + SETUP_TIMEOUT;
    let mut result = loop {
        match next(control, session_wait, &stopped_or_over) {
            Ok(Control::Measure) => window.open(system),
            Ok(Control::Done) => break Ok(window.close(system)),
            Ok(other) => break Err(anyhow!("unexpected control message {other:?}")),
            Err(e) => break Err(e),
        }
    };
    if exceeded.get() {
        result = Err(budget_error(max_bytes));
    }
    if result.is_err() {
        window.abandon(system);
        for s in data {
            s.shutdown(Shutdown::Both).ok();
        }
    }
    result
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
    let tsc_hz = clock::tsc_hz();
    let window = Window::new();
    // The server's machine's memory traffic: the client's window leaves it to the server
    // (`NetWorkload::server_counts_memory_traffic`).
    let mut system = crate::net::session::served_probes(case.net.perf, crate::measure::trace::RxCopies::Traced);
    crate::measure::memtraffic::push_memory_traffic_probe(&mut system);
    let ready = StartGate::default();
    let pin = |i: usize| case.net.server_cpus.as_ref().and_then(|c| c.cpu_for(i));
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
                            // Wake the client blocked on this connection.
                            stream.shutdown(Shutdown::Both).ok();
                        }
                        result
                    })
            })
            .collect();
        let followed = if crate::net::session::gate::all_ready(&ready, &handles) {
            follow(case, &window, &mut system, data, control, (stopped, max_bytes))
        } else {
            Err(anyhow!("could not start all {} server threads", handles.len()))
        };
        (join_sides(handles), followed)
    });
    let mut system_metrics = followed?;
    let threads = outcomes.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let fds: Vec<_> = data.iter().map(|s| s.as_raw_fd()).collect();
    system_metrics.extend(crate::measure::system::tcp_info_metrics(&fds, Role::Server));
    Ok(server_report(case, threads, tsc_hz, system_metrics))
}
