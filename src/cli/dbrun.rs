//! Storing the cases of a direct command (`net stream --db`, `micro --db`) as one run in the
//! results database, cell by cell, like a sweep with one repetition.

use super::sweep::{command_line, open_for_writing, store_error};
use crate::case::Case;
use crate::observation::Observation;
use crate::store::{NewRun, Store};
use crate::sweep::{environment::RunEnvironment, Cell, CellOutcome};
use std::path::{Path, PathBuf};

/// A run of a command's cases in the results database (`--db` of net stream and micro): created before the first case, one cell per case
/// committed as soon as it finishes, closed as complete or interrupted.
pub struct DbRun {
    store: Store,
    pub run_id: i64,
    path: PathBuf,
}

impl DbRun {
    /// Open (or create) the database and record the run with the machine description and the
    /// environment of `interface` (the one the traffic uses; "lo" for loopback).
    pub fn start(path: &Path, cases: Vec<Case>, interface: &str) -> anyhow::Result<DbRun> {
        let mut store = open_for_writing(path)?;
        let run = NewRun {
            name: None,
            command_line: command_line(),
            repetitions: 1,
            shuffle: false,
            seed: 0,
            warmup_cell: false,
            machine_json: serde_json::to_string(&crate::sysinfo::describe())?,
            environment_json: serde_json::to_string(&RunEnvironment::capture(interface))?,
            cases,
        };
        let run_id = store.create_run(&run).map_err(store_error)?;
        Ok(DbRun {
            store,
            run_id,
            path: path.to_path_buf(),
        })
    }

    /// Commit the cell of case `position` as soon as it exists.
    pub fn record(
        &mut self,
        position: usize,
        result: &Result<Observation, String>,
        elapsed_s: f64,
    ) -> anyhow::Result<()> {
        let outcome = CellOutcome {
            result: result.clone(),
            elapsed_s,
        };
        let cell = Cell {
            position,
            repetition: 0,
        };
        self.store.record_cell(self.run_id, cell, &outcome)
    }

    /// Close the run as complete or interrupted and say where it is.
    pub fn finish(mut self, interrupted: bool) -> anyhow::Result<()> {
        let status = if interrupted {
            crate::store::RunStatus::Interrupted
        } else {
            crate::store::RunStatus::Complete
        };
        self.store.set_run_status(self.run_id, status)?;
        eprintln!(
            "stored as run {id} ({status}) in {db}; `iopath report {id} --db {db}` draws it",
            id = self.run_id,
            db = self.path.display(),
        );
        Ok(())
    }
}
