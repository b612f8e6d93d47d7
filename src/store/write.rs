//! Writing runs: create a run with its cases, commit each cell in its own transaction the moment
//! it exists (so a kill loses at most the cell in flight), and close the run.

use super::db::Store;
use super::RunStatus;
use crate::case::Case;
use crate::sweep::{Cell, CellOutcome, Plan, RunEnd, Sink};
use rusqlite::{params, OptionalExtension};
use std::collections::HashSet;

/// Everything a run records before its first cell.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub name: Option<String>,
    pub command_line: String,
    pub repetitions: u32,
    pub shuffle: bool,
    pub seed: u64,
    pub warmup_cell: bool,
    /// `crate::sysinfo::describe()` as JSON.
    pub machine_json: String,
    /// `crate::sweep::environment::RunEnvironment` as JSON.
    pub environment_json: String,
    pub cases: Vec<Case>,
}

impl NewRun {
    /// The run of `plan`, with the machine description and the environment read now.
    pub fn of_plan(plan: &Plan, command_line: String) -> NewRun {
        NewRun {
            name: plan.name.clone(),
            command_line,
            repetitions: plan.repetitions,
            shuffle: plan.shuffle,
            seed: plan.seed,
            warmup_cell: plan.warmup_cell,
            machine_json: serde_json::to_string(&crate::sysinfo::describe()).unwrap_or_else(|_| "{}".into()),
            environment_json: serde_json::to_string(&crate::sweep::environment::RunEnvironment::capture(
                &plan.interface,
            ))
            .unwrap_or_else(|_| "{}".into()),
            cases: plan.cases.clone(),
        }
    }
}

const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')";

impl Store {
    /// Insert the run and its cases; returns the run id.
    pub fn create_run(&mut self, run: &NewRun) -> anyhow::Result<i64> {
        let tx = self.conn.transaction()?;
        tx.execute(
            &format!(
                "INSERT INTO runs (name, command_line, tool_version, started_at, status, repetitions, shuffle,
                 seed, warmup_cell, machine_json, environment_json)
                 VALUES (?1, ?2, ?3, {NOW}, ?10, ?4, ?5, ?6, ?7, ?8, ?9)"
            ),
            params![
                run.name,
                run.command_line,
                env!("CARGO_PKG_VERSION"),
                run.repetitions,
                run.shuffle,
                run.seed as i64,
                run.warmup_cell,
                run.machine_json,
                run.environment_json,
                RunStatus::Running
            ],
        )?;
        let run_id = tx.last_insert_rowid();
        for (position, case) in run.cases.iter().enumerate() {
            tx.execute(
                "INSERT INTO cases (run_id, position, workload, label, case_key, case_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    run_id,
                    position as i64,
                    case.workload(),
                    case.label(),
                    case.key(),
                    serde_json::to_string(case)?
                ],
            )?;
        }
        tx.commit()?;
        Ok(run_id)
    }

    /// Mark a run as running again (resume) or finished: complete or interrupted.
    pub fn set_run_status(&mut self, run_id: i64, status: RunStatus) -> anyhow::Result<()> {
        let ended = if status.is_finished() { NOW } else { "NULL" };
        self.conn.execute(
            &format!("UPDATE runs SET status = ?1, ended_at = {ended} WHERE id = ?2"),
            params![status, run_id],
        )?;
        Ok(())
    }

    /// Cells of the run that have a successful observation (a resume skips them; failed cells
    /// are tried again).
    pub fn done_cells(&self, run_id: i64) -> anyhow::Result<HashSet<Cell>> {
        let mut stmt = self.conn.prepare(
            "SELECT c.position, o.repetition FROM observations o JOIN cases c ON c.id = o.case_id
             WHERE c.run_id = ?1 AND o.status = 'ok'",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            Ok(Cell {
                position: r.get::<_, i64>(0)? as usize,
                repetition: r.get::<_, i64>(1)? as u32,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Commit one cell: its observation and every metric (and a fleet cell's two machines),
    /// or the failure and its error text. Replaces an earlier failed attempt at the same cell.
    pub fn record_cell(&mut self, run_id: i64, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()> {
        let tx = self.conn.transaction()?;
        let case_id: i64 = tx
            .query_row(
                "SELECT id FROM cases WHERE run_id = ?1 AND position = ?2",
                params![run_id, cell.position as i64],
                |r| r.get(0),
            )
            .optional()?
            .ok_or_else(|| anyhow::anyhow!("run {run_id} has no case at position {}", cell.position))?;
        tx.execute(
            "DELETE FROM observations WHERE case_id = ?1 AND repetition = ?2",
            params![case_id, cell.repetition],
        )?;
        let (status, error, warnings, placement) = match &outcome.result {
            Ok(obs) => (
                "ok",
                None,
                serde_json::to_string(&obs.warnings)?,
                serde_json::to_string(&obs.placement)?,
            ),
            Err(e) => ("failed", Some(e.as_str()), "[]".to_string(), "[]".to_string()),
        };
        tx.execute(
            &format!(
                "INSERT INTO observations (case_id, repetition, status, error, finished_at, elapsed_s,
                 warnings_json, placement_json) VALUES (?1, ?2, ?3, ?4, {NOW}, ?5, ?6, ?7)"
            ),
            params![
                case_id,
                cell.repetition,
                status,
                error,
                outcome.elapsed_s,
                warnings,
                placement
            ],
        )?;
        let observation_id = tx.last_insert_rowid();
        if let Ok(obs) = &outcome.result {
            let mut insert = tx.prepare(
                "INSERT INTO metrics (observation_id, role, name, value, unit, source) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            for m in &obs.metrics {
                // SQLite has no NaN or infinity: a non-finite value is stored as missing.
                let value = m.value.filter(|v| v.is_finite());
                insert.execute(params![
                    observation_id,
                    m.role.as_str(),
                    m.name,
                    value,
                    m.unit,
                    m.source.to_string()
                ])?;
            }
            // A fleet cell's two machines (no statement for any other cell).
            if let Some(machines) = &obs.pair_machines {
                super::machines::record(&tx, observation_id, machines)?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

/// Store records a command produced by itself (e.g. `iopath micro ... --db`) as one complete
/// run: each distinct case once, each record as the cell (case, repetition). Returns the run id.
#[cfg(test)]
pub fn save_records(
    store: &mut Store,
    name: Option<String>,
    command_line: String,
    machine_json: String,
    environment_json: String,
    records: &[super::Record],
) -> anyhow::Result<i64> {
    let mut cases: Vec<Case> = Vec::new();
    for r in records {
        if !cases.contains(&r.case) {
            cases.push(r.case.clone());
        }
    }
    let repetitions = records.iter().map(|r| r.repetition + 1).max().unwrap_or(1);
    let run_id = store.create_run(&NewRun {
        name,
        command_line,
        repetitions,
        shuffle: false,
        seed: 0,
        warmup_cell: false,
        machine_json,
        environment_json,
        cases: cases.clone(),
    })?;
    for r in records {
        let position = cases.iter().position(|c| *c == r.case).unwrap_or_default();
        let outcome = CellOutcome {
            result: Ok(r.observation.clone()),
            elapsed_s: 0.0,
        };
        store.record_cell(
            run_id,
            Cell {
                position,
                repetition: r.repetition,
            },
            &outcome,
        )?;
    }
    store.set_run_status(run_id, RunStatus::Complete)?;
    Ok(run_id)
}

/// The store as a sink of one run: each finished cell is committed the moment it exists, and
/// when the run ends, however it ends, the run is closed: `complete`, or `interrupted` after a
/// stop or a sink's error (never left `running`).
pub struct StoreSink<'a> {
    pub store: &'a mut Store,
    pub run_id: i64,
}

impl Sink for StoreSink<'_> {
    fn cell_finished(&mut self, _case: &Case, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()> {
        self.store.record_cell(self.run_id, cell, outcome)
    }

    fn finish(&mut self, end: &RunEnd) -> anyhow::Result<()> {
        let status = match end.complete() {
            true => RunStatus::Complete,
            false => RunStatus::Interrupted,
        };
        self.store.set_run_status(self.run_id, status)
    }
}

/// Mark a run that is still `running` as `interrupted`, over a connection of its own: what a
/// forced exit (a second Ctrl-C) does so that no run is left `running`. Errors are ignored;
/// there is nobody left to tell.
pub fn mark_interrupted_if_running(path: &std::path::Path, run_id: i64) {
    if let Ok(conn) = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE) {
        let _ = conn.busy_timeout(std::time::Duration::from_millis(500));
        let _ = conn.execute(
            &format!("UPDATE runs SET status = 'interrupted', ended_at = {NOW} WHERE id = ?1 AND status = 'running'"),
            params![run_id],
        );
    }
}
