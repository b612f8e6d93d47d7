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
use super::{check_case, check_uring_zc, SideOutcome, ThreadStart, SETUP_TIMEOUT};
use crate::case::{RecordsCase, RecordsMode};
use crate::net::control::{ControlChannel, ServerReport};
use crate::net::session::handshake::{refuse, RefusalKind};
use crate::net::session::served::{self, Budget, Followed, ServedThread, ServedWorkload};
use crate::net::session::{accept_data, Served, Session};
use crate::observation::{Role, Unsupported};
use crate::stop::Interrupted;
use crate::sys::net as sock;
use anyhow::anyhow;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;

/// The records server side, as `net serve` and the in-process server serve it.
pub const SERVED: Served = served::entry::<RecordsServer>();

struct RecordsServer;

/// The session's table and its data connections, one per thread.
struct State {
    table: Table,
    data: Vec<TcpStream>,
}

impl ServedWorkload for RecordsServer {
    type Hello = RecordsCase;
    type State = State;
    /// A thread owns nothing: it sends from the shared table.
    type Part = ();
    type Outcome = SideOutcome;
    const HELLOS: &'static [&'static str] = &["records"];
    const THREAD: &'static str = "iopath-records-srv";
    const BUDGET: Budget = Budget::Kernel;

    fn net(case: &RecordsCase) -> &crate::case::NetParams {
        &case.net
    }

    /// The limits and the table the case would build here, against this server's headroom.
    fn check(case: &RecordsCase, headroom: Option<u64>) -> Result<(), String> {
        check_case(case, headroom)
    }

    /// uring-zc checked on this kernel, the table filled, the data port opened and one
    /// connection per client thread accepted on it.
    fn prepare(
        case: &RecordsCase,
        control: &mut ControlChannel,
        session: &Session<'_>,
    ) -> anyhow::Result<(State, Vec<()>)> {
        if case.mode == RecordsMode::UringZc {
            if let Err(e) = check_uring_zc() {
                let reason = e
                    .downcast_ref::<Unsupported>()
                    .map_or_else(|| format!("{e:#}"), |u| u.reason.clone());
                return Err(refuse(
                    control,
                    RefusalKind::Kernel,
                    format!("uring-zc unavailable on the server: {reason}"),
                ));
            }
        }
        let Some(table) = Table::new(
            case.record_size as usize,
            case.table_records(),
            case.align,
            session.stopped,
        )?
        else {
            return Err(anyhow::Error::new(Interrupted));
        };
        let data = accept_data(control, case.net.threads, SETUP_TIMEOUT, session.stopped)?;
        if case.mode == RecordsMode::ZeroCopy {
            enable_zerocopy(control, &data)?;
        }
        let parts = vec![(); data.len()];
        Ok((State { table, data }, parts))
    }

    fn streams(state: &State) -> &[TcpStream] {
        &state.data
    }

    /// The server's machine's memory traffic: the client's window leaves it to the server
    /// (`NetWorkload::server_counts_memory_traffic`).
    fn push_probes(system: &mut crate::measure::window::SystemProbes) {
        crate::measure::memtraffic::push_memory_traffic_probe(system);
    }

    fn serve_thread(
        case: &RecordsCase,
        state: &State,
        _: (),
        thread: &ServedThread<'_>,
    ) -> anyhow::Result<SideOutcome> {
        let i = thread.index;
        let start = ThreadStart {
            index: i,
            pin: case.net.server_cpus.as_ref().and_then(|c| c.cpu_for(i)),
            window: &thread.shared.window,
            ready: &thread.shared.ready,
            policy: &thread.shared.policy,
            perf: case.net.perf,
        };
        let stream = &state.data[i];
        let result = server::serve(start, case, &state.table, stream.as_raw_fd());
        if result.is_err() {
            // Wake the client blocked on this connection.
            stream.shutdown(Shutdown::Both).ok();
        }
        result
    }

    /// Every server thread drained its zero-copy completions before returning: the kernel
    /// holds no page of the table when it is freed, with the state, here.
    fn report(
        case: &RecordsCase,
        state: State,
        threads: Vec<SideOutcome>,
        followed: Followed,
    ) -> anyhow::Result<ServerReport> {
        if !followed.done {
            return Err(anyhow!(followed
                .error
                .unwrap_or_else(|| "the session ended before its window".into())));
        }
        let mut system_metrics = followed.system_metrics;
        let fds: Vec<_> = state.data.iter().map(|s| s.as_raw_fd()).collect();
        system_metrics.extend(crate::measure::system::tcp_info_metrics(&fds, Role::Server));
        Ok(server_report(case, threads, followed.tsc_hz, system_metrics))
    }
}

/// SO_ZEROCOPY on every data connection. The kernel refusing it is `unavailable` (the case's
/// result, as for a receive mode refused once the connections exist), any other failure a
/// refusal of kind `kernel`.
fn enable_zerocopy(control: &mut ControlChannel, data: &[TcpStream]) -> anyhow::Result<()> {
    for s in data {
        if let Err(e) = sock::enable_zerocopy(s.as_raw_fd()) {
            return Err(match Unsupported::refused("MSG_ZEROCOPY", &e) {
                Some(refusal) => served::unavailable(control, refusal),
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
