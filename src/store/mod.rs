//! Results storage: the SQLite database that is the source of truth for sweeps (schema and
//! migrations, writing cells as they finish, reading runs back) and the exporters that turn
//! records into CSV or JSON following docs/output.md, and merging databases (`merge.rs`);
//! `machines.rs` keeps the machines at both ends of each fleet cell.

pub mod ab;
pub mod db;
pub mod export;
pub mod fleet;
pub mod history;
mod lock;
pub mod machines;
pub mod merge;
pub mod output;
pub mod read;
pub mod schema;
pub mod status;
pub mod tidy;
pub mod write;

pub use db::{default_db_path, Store, StoreError, DB_ENV, DEFAULT_DB_PATH};
pub use machines::{FleetMachines, SeenMachine};
pub use read::{RunData, RunSummary, StoredCell};
pub use status::RunStatus;
#[cfg(test)]
pub use write::save_records;
pub use write::{mark_interrupted_if_running, NewRun, StoreSink};

use crate::case::Case;
use crate::observation::Observation;
use serde::{Deserialize, Serialize};

/// One observation of one case: what exporters write, one row per case and repetition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The run it belongs to, once stored.
    pub run_id: Option<i64>,
    pub label: String,
    pub case: Case,
    /// 0-based repetition index within the run.
    pub repetition: u32,
    pub observation: Observation,
    /// Why the cell failed; None for a cell that produced its observation.
    #[serde(default)]
    pub error: Option<String>,
}
