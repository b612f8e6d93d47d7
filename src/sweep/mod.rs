//! Sweeps: a grid of Cases repeated into cells (case x repetition), run in order or shuffled,
//! each cell handed to a sink (the store) the moment it exists, stoppable with Ctrl-C and
//! resumable. The sweep knows nothing of SQLite: the store implements [`CellSink`].

pub mod environment;
pub mod plan;
pub mod progress;
pub mod runner;

pub use plan::{order_cells, Cell};
pub use runner::{run_cells, CellOutcome, CellSink, RunEnd, RunOptions};

use crate::case::Case;
use crate::observation::Observation;

/// Run one case with the workload that owns it; `stop` asks it to give up early (it then
/// returns [`crate::stop::Interrupted`]).
pub fn execute_case(case: &Case, stop: crate::stop::Stop) -> anyhow::Result<Observation> {
    match case {
        Case::NetStream(c) => crate::net::workload::stream::run(c, stop),
        Case::Servers(c) => crate::servers::run_case(c, stop),
        Case::Micro(c) => crate::micro::run_case(c, stop),
    }
}
