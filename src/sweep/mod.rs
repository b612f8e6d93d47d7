//! Running a plan: a grid of Cases repeated into cells (case x repetition), run in order or
//! shuffled by the one runner, each cell handed to every sink (the store, the printers) the
//! moment it exists, stoppable and resumable. This layer knows nothing of SQLite or terminals
//! (it imports no terminal crate): the store and the CLI implement [`Sink`] — the progress
//! bar, the live view and the printers are sinks in `cli/`.

pub mod environment;
pub mod plan;
pub mod runner;

pub use plan::{ab_cells, order_cells, Cell, Estimate, Plan};
pub use runner::{run_plan, CellOutcome, RunEnd, Sink};

use crate::case::Case;
use crate::net::auth::Credentials;
use crate::observation::Observation;

/// Run one case with the workload that owns it; `stop` asks it to give up early (it then
/// returns [`crate::stop::Interrupted`]); a network client proves itself with `credentials`.
pub fn execute_case(case: &Case, stop: crate::stop::Stop, credentials: &Credentials) -> anyhow::Result<Observation> {
    use crate::net::workload::{load, records, rr, stream, udp_rr, udp_stream};
    match case {
        Case::NetStream(c) => stream::run(c, stop, credentials),
        Case::NetRecords(c) => records::run(c, stop, credentials),
        Case::Servers(c) => crate::servers::run_case(c, stop),
        Case::Micro(c) => crate::micro::run_case(c, stop),
        Case::NetRr(c) => rr::run(c, stop, credentials),
        Case::NetUdpRr(c) => udp_rr::run(c, stop, credentials),
        Case::Fake(c) => crate::fake::run(c, stop),
        Case::NetUdpStream(c) => udp_stream::run(c, stop, credentials),
        Case::Fleet(c) => crate::fleet::run_pair(c, stop, credentials),
        Case::NetLoad(c) => load::run(c, stop, credentials),
    }
}

/// What the runner runs `cells` of `plan` with: [`execute_case`], except that the pairs of a
/// fleet round that measure at the same time run together (`fleet::Batches`: the first cell
/// of a batch starts every pair of it on a thread, the next cells take their kept outcomes).
pub fn executor<'a>(
    plan: &'a Plan,
    cells: &[Cell],
) -> impl FnMut(&Case, crate::stop::Stop) -> anyhow::Result<Observation> + 'a {
    let mut batches = crate::fleet::Batches::new(&plan.cases, cells.iter().map(|c| (c.position, c.repetition)));
    let credentials = &plan.credentials;
    move |case, stop| match case.get::<crate::case::FleetCase>() {
        Some(pair) => batches.execute(pair, stop, &|c, s| crate::fleet::run_pair(c, s, credentials)),
        None => execute_case(case, stop, credentials),
    }
}
