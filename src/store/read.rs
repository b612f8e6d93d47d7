//! Reading runs back: the list of runs, and one run with its cases and every stored cell.

use super::db::{Store, StoreError};
use super::{Record, RunStatus};
use crate::case::Case;
use crate::observation::{Metric, Observation, Role, WarningKind};
use rusqlite::{params, OptionalExtension, Row};

#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub id: i64,
    pub name: Option<String>,
    pub command_line: String,
    pub tool_version: String,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub status: RunStatus,
    pub repetitions: u32,
    pub shuffle: bool,
    pub seed: u64,
    pub warmup_cell: bool,
    pub machine_json: String,
    pub environment_json: String,
    pub cases: usize,
    pub cells_ok: usize,
    pub cells_failed: usize,
}

impl RunSummary {
    pub fn cells_planned(&self) -> usize {
        self.cases * self.repetitions as usize
    }
}

/// One stored cell. A failed cell has an empty observation and its error text.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCell {
    pub position: usize,
    pub repetition: u32,
    pub case: Case,
    pub observation: Observation,
    pub error: Option<String>,
    pub elapsed_s: f64,
}

impl StoredCell {
    /// As an export record; a failed cell carries its error (and says so in its warnings).
    pub fn record(&self, run_id: i64) -> Record {
        let mut observation = self.observation.clone();
        if let Some(error) = &self.error {
            observation.warn(WarningKind::CellFailed, format!("cell failed: {error}"));
        }
        Record {
            run_id: Some(run_id),
            error: self.error.clone(),
            label: self.case.label(),
            case: self.case.clone(),
            repetition: self.repetition,
            observation,
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunData {
    pub run: RunSummary,
    /// Cases in their planned order (position).
    pub cases: Vec<Case>,
    /// Cells ordered by case position, then repetition.
    pub cells: Vec<StoredCell>,
    /// The machines of its fleet cells, per host (empty for any other run).
    pub fleet_machines: super::FleetMachines,
    /// An A/B run's settings and each case's variant (`iopath ab`); None for any other run.
    pub ab: Option<super::ab::AbRun>,
}

impl RunData {
    pub fn records(&self) -> Vec<Record> {
        self.cells.iter().map(|c| c.record(self.run.id)).collect()
    }
}

const RUN_COLUMNS: &str = "r.id, r.name, r.command_line, r.tool_version, r.started_at, r.ended_at, r.status,
    r.repetitions, r.shuffle, r.seed, r.warmup_cell, r.machine_json, r.environment_json,
    (SELECT count(*) FROM cases c WHERE c.run_id = r.id),
    (SELECT count(*) FROM observations o JOIN cases c ON c.id = o.case_id WHERE c.run_id = r.id AND o.status = 'ok'),
    (SELECT count(*) FROM observations o JOIN cases c ON c.id = o.case_id WHERE c.run_id = r.id AND o.status = 'failed')";

/// A stored value iopath will not obey: the database was damaged or edited by hand.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BadValue(String);

fn bad_value(column: usize, detail: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Integer, Box::new(BadValue(detail)))
}

fn run_from_row(r: &Row<'_>) -> rusqlite::Result<RunSummary> {
    let id: i64 = r.get(0)?;
    let repetitions: i64 = r.get(7)?;
    let repetitions = u32::try_from(repetitions)
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| bad_value(7, format!("run {id} has {repetitions} repetitions")))?;
    let status_text: String = r.get(6)?;
    let status: super::RunStatus = status_text
        .parse()
        .map_err(|_| bad_value(6, format!("run {id} has the unknown status '{status_text}'")))?;
    Ok(RunSummary {
        id,
        name: r.get(1)?,
        command_line: r.get(2)?,
        tool_version: r.get(3)?,
        started_at: r.get(4)?,
        ended_at: r.get(5)?,
        status,
        repetitions,
        shuffle: r.get(8)?,
        seed: r.get::<_, i64>(9)? as u64,
        warmup_cell: r.get(10)?,
        machine_json: r.get(11)?,
        environment_json: r.get(12)?,
        cases: r.get::<_, i64>(13)? as usize,
        cells_ok: r.get::<_, i64>(14)? as usize,
        cells_failed: r.get::<_, i64>(15)? as usize,
    })
}

fn parse_role(text: &str) -> anyhow::Result<Role> {
    text.parse().map_err(|e| anyhow::anyhow!("stored metric: {e}"))
}

impl Store {
    /// A value that does not fit what iopath wrote is `StoreError::Corrupt`, never obeyed.
    fn stored(&self, e: rusqlite::Error) -> anyhow::Error {
        let detail = match &e {
            rusqlite::Error::FromSqlConversionFailure(_, _, inner) => match inner.downcast_ref::<BadValue>() {
                Some(bad) => bad.0.clone(),
                None => format!("a stored value does not convert ({e})"),
            },
            rusqlite::Error::InvalidColumnType(..) | rusqlite::Error::IntegralValueOutOfRange(..) => {
                format!("a stored value has the wrong type ({e})")
            }
            _ => return super::db::sqlite_error(&self.path, e),
        };
        self.corrupt(detail)
    }

    pub(super) fn corrupt(&self, detail: String) -> anyhow::Error {
        StoreError::Corrupt {
            path: self.path.clone(),
            detail,
        }
        .into()
    }

    /// Every run, oldest first.
    pub fn list_runs(&self) -> anyhow::Result<Vec<RunSummary>> {
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT {RUN_COLUMNS} FROM runs r ORDER BY r.id"))?;
        let runs = stmt
            .query_map([], run_from_row)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.stored(e))?;
        Ok(runs)
    }

    /// One run, or `StoreError::UnknownRun`.
    pub fn run(&self, id: i64) -> anyhow::Result<RunSummary> {
        self.conn
            .query_row(
                &format!("SELECT {RUN_COLUMNS} FROM runs r WHERE r.id = ?1"),
                [id],
                run_from_row,
            )
            .optional()
            .map_err(|e| self.stored(e))?
            .ok_or_else(|| {
                StoreError::UnknownRun {
                    id,
                    path: self.path.display().to_string(),
                }
                .into()
            })
    }

    /// The newest run's id, or `StoreError::Empty`.
    pub fn latest_run_id(&self) -> anyhow::Result<i64> {
        self.conn
            .query_row("SELECT max(id) FROM runs", [], |r| r.get::<_, Option<i64>>(0))?
            .ok_or_else(|| StoreError::Empty(self.path.clone()).into())
    }

    /// The run's cases in planned order.
    pub fn cases(&self, run_id: i64) -> anyhow::Result<Vec<Case>> {
        let mut stmt = self
            .conn
            .prepare("SELECT case_json FROM cases WHERE run_id = ?1 ORDER BY position")?;
        let texts = stmt
            .query_map([run_id], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        texts
            .iter()
            .map(|t| {
                serde_json::from_str(t)
                    .map_err(|e| self.corrupt(format!("a case of run {run_id} does not parse ({e})")))
            })
            .collect()
    }

    /// A run with every stored cell and metric.
    pub fn load_run(&self, id: i64) -> anyhow::Result<RunData> {
        let run = self.run(id)?;
        let cases = self.cases(id)?;
        let mut stmt = self.conn.prepare(
            "SELECT o.id, c.position, o.repetition, o.status, o.error, o.elapsed_s, o.warnings_json, o.placement_json
             FROM observations o JOIN cases c ON c.id = o.case_id WHERE c.run_id = ?1
             ORDER BY c.position, o.repetition",
        )?;
        type CellRow = (i64, i64, i64, String, Option<String>, f64, String, String);
        let rows: Vec<CellRow> = stmt
            .query_map([id], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                ))
            })?
            .collect::<Result<_, _>>()
            .map_err(|e| self.stored(e))?;
        let mut metric_stmt = self
            .conn
            .prepare("SELECT role, name, value, unit, source FROM metrics WHERE observation_id = ?1 ORDER BY rowid")?;
        let mut cells = Vec::with_capacity(rows.len());
        for (obs_id, position, repetition, status, error, elapsed_s, warnings, placement) in rows {
            let case = usize::try_from(position)
                .ok()
                .and_then(|p| cases.get(p))
                .cloned()
                .ok_or_else(|| self.corrupt(format!("observation {obs_id} refers to a missing case")))?;
            let repetition = u32::try_from(repetition)
                .map_err(|_| self.corrupt(format!("observation {obs_id} has the repetition {repetition}")))?;
            let metric_rows = metric_stmt
                .query_map(params![obs_id], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<f64>>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| self.stored(e))?;
            let mut metrics = Vec::with_capacity(metric_rows.len());
            for (role, name, value, unit, source) in metric_rows {
                let damaged = |what: String| self.corrupt(format!("observation {obs_id}: {what}"));
                let metric = Metric {
                    role: parse_role(&role).map_err(|e| damaged(e.to_string()))?,
                    value,
                    unit,
                    source: source.parse().map_err(damaged)?,
                    name,
                };
                // The one range check of values not computed here (`Metric::impossible`).
                if let Some(why) = metric.impossible() {
                    return Err(damaged(why));
                }
                metrics.push(metric);
            }
            let json = |text: &str, what: &str| {
                self.corrupt(format!("observation {obs_id}: its {what} do not parse ({text})"))
            };
            let observation = Observation {
                metrics,
                warnings: serde_json::from_str(&warnings).map_err(|e| json(&e.to_string(), "warnings"))?,
                placement: serde_json::from_str(&placement).map_err(|e| json(&e.to_string(), "placement"))?,
                pair_machines: None,
            };
            // And how its values stand to each other (`observation::out_of_order`).
            if let Some(why) = observation.out_of_order(case.as_workload().longest_latency()) {
                return Err(self.corrupt(format!("observation {obs_id}: {why}")));
            }
            cells.push(StoredCell {
                position: position as usize,
                repetition,
                case,
                observation,
                error: if status == "failed" {
                    Some(error.unwrap_or_else(|| "unknown error".into()))
                } else {
                    None
                },
                elapsed_s,
            });
        }
        let fleet = |position: usize| cases.get(position)?.get::<crate::case::FleetCase>();
        // Only a fleet run's cells have machines: no further query for any other run.
        let fleet_machines = match cases.iter().any(|c| c.get::<crate::case::FleetCase>().is_some()) {
            true => self.fleet_machines(&self.ok_observations(id)?, |position, end| {
                let f = fleet(position)?;
                Some([f.source.as_str(), f.destination.as_str()][end])
            })?,
            false => Default::default(),
        };
        Ok(RunData {
            ab: self.ab_run(id)?,
            run,
            cases,
            cells,
            fleet_machines,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::write::NewRun;
    use super::*;
    use crate::case::{CopyMode, StreamCase};
    use crate::observation::Source;
    use crate::sweep::{Cell, CellOutcome};

    fn stream(size: u64) -> Case {
        Case::NetStream(
            StreamCase::for_test(CopyMode::OneCopy, size)
                .with_fields(8)
                .with_window_ms(100, 10)
                .with_server_cpus(vec![1].into())
                .with_perf(),
        )
    }

    fn new_run(cases: Vec<Case>) -> NewRun {
        NewRun {
            name: Some("t".into()),
            command_line: "iopath sweep".into(),
            repetitions: 2,
            shuffle: false,
            seed: 1,
            warmup_cell: false,
            machine_json: "{}".into(),
            environment_json: "{}".into(),
            cases,
        }
    }

    #[test]
    fn schema_round_trip_keeps_every_metric_source_and_failure() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/x.db");
        let mut store = Store::create_or_open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), super::super::schema::current_version());
        let id = store.create_run(&new_run(vec![stream(64), stream(4096)])).unwrap();
        let mut obs = Observation::default();
        obs.push(Metric::new(
            "throughput_gbps",
            Role::System,
            1.25,
            "Gbit/s",
            Source::Tool,
        ));
        obs.push(Metric::unavailable(
            "cache_misses_per_kib",
            Role::Client,
            "misses/KiB",
            "no hardware PMU",
        ));
        obs.push(Metric::new(
            "cycles_per_byte",
            Role::Server,
            0.5,
            "cycles/B",
            Source::Estimate,
        ));
        obs.warn(WarningKind::ZeroCopyCopied, "zero-copy was copied");
        let ok = CellOutcome {
            result: Ok(obs.clone()),
            elapsed_s: 0.2,
        };
        let bad = CellOutcome {
            result: Err("boom".into()),
            elapsed_s: 0.1,
        };
        store
            .record_cell(
                id,
                Cell {
                    position: 0,
                    repetition: 0,
                },
                &ok,
            )
            .unwrap();
        store
            .record_cell(
                id,
                Cell {
                    position: 1,
                    repetition: 0,
                },
                &bad,
            )
            .unwrap();
        drop(store);

        let store = Store::open_existing(&path).unwrap();
        let data = store.load_run(id).unwrap();
        assert_eq!(data.cases, vec![stream(64), stream(4096)]);
        assert_eq!(data.cells.len(), 2);
        assert_eq!(data.cells[0].observation, obs);
        assert_eq!(data.cells[1].error.as_deref(), Some("boom"));
        assert_eq!(data.run.cells_ok, 1);
        assert_eq!(data.run.cells_failed, 1);
        assert_eq!(data.run.cells_planned(), 4);
        let records = data.records();
        let failed = &records[1].observation.warnings[0];
        assert_eq!(failed.kind, WarningKind::CellFailed);
        assert!(failed.text.contains("cell failed: boom"));
        let done = store.done_cells(id).unwrap();
        assert_eq!(done.len(), 1, "failed cells are retried on resume");
    }

    #[test]
    fn recording_a_cell_again_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::create_or_open(&dir.path().join("x.db")).unwrap();
        let id = store.create_run(&new_run(vec![stream(64)])).unwrap();
        let bad = CellOutcome {
            result: Err("boom".into()),
            elapsed_s: 0.1,
        };
        let ok = CellOutcome {
            result: Ok(Observation::default()),
            elapsed_s: 0.1,
        };
        let cell = Cell {
            position: 0,
            repetition: 1,
        };
        store.record_cell(id, cell, &bad).unwrap();
        store.record_cell(id, cell, &ok).unwrap();
        let data = store.load_run(id).unwrap();
        assert_eq!(data.cells.len(), 1);
        assert!(data.cells[0].error.is_none());
    }

    #[test]
    fn wrong_files_are_refused_without_being_changed() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.db");
        let err = Store::open_existing(&missing).err().unwrap();
        assert!(matches!(err.downcast_ref::<StoreError>(), Some(StoreError::Missing(_))));
        assert!(!missing.exists(), "reading must not create a database");

        let text = dir.path().join("notes.txt");
        std::fs::write(&text, "hello, this is not a database at all").unwrap();
        for result in [Store::open_existing(&text), Store::create_or_open(&text)] {
            let err = result.err().unwrap();
            assert!(
                matches!(err.downcast_ref::<StoreError>(), Some(StoreError::NotSqlite(_))),
                "{err}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(&text).unwrap(),
            "hello, this is not a database at all"
        );

        let foreign = dir.path().join("other.db");
        rusqlite::Connection::open(&foreign)
            .unwrap()
            .execute_batch("CREATE TABLE t (x)")
            .unwrap();
        let err = Store::open_existing(&foreign).err().unwrap();
        assert!(matches!(err.downcast_ref::<StoreError>(), Some(StoreError::Foreign(_))));

        let store = Store::create_or_open(&dir.path().join("ok.db")).unwrap();
        let err = store.run(42).err().unwrap();
        assert!(err.to_string().contains("no run 42"));
        assert!(matches!(
            store.latest_run_id().err().unwrap().downcast_ref::<StoreError>(),
            Some(StoreError::Empty(_))
        ));
    }

    #[test]
    fn records_saved_by_other_commands_become_a_complete_run() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::create_or_open(&dir.path().join("x.db")).unwrap();
        let mut obs = Observation::default();
        obs.push(Metric::new("latency_ns", Role::System, 1.5, "ns", Source::Tool));
        let records: Vec<Record> = [(64, 0), (64, 1), (4096, 0), (4096, 1)]
            .into_iter()
            .map(|(size, repetition)| Record {
                error: None,
                run_id: None,
                label: stream(size).label(),
                case: stream(size),
                repetition,
                observation: obs.clone(),
            })
            .collect();
        let id = super::super::save_records(
            &mut store,
            None,
            "iopath micro".into(),
            "{}".into(),
            "{}".into(),
            &records,
        )
        .unwrap();
        let data = store.load_run(id).unwrap();
        assert_eq!((data.cases.len(), data.run.repetitions, data.run.cells_ok), (2, 2, 4));
        assert_eq!(data.run.status, RunStatus::Complete);
        assert_eq!(data.records()[3].observation, obs);
    }

    #[test]
    fn run_status_is_stored_as_text_and_an_unknown_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        let mut store = Store::create_or_open(&path).unwrap();
        let id = store.create_run(&new_run(vec![stream(64)])).unwrap();
        assert_eq!(store.run(id).unwrap().status, RunStatus::Running);
        store.set_run_status(id, RunStatus::Interrupted).unwrap();
        let text = |store: &Store| -> String {
            store
                .conn
                .query_row("SELECT status FROM runs WHERE id = ?1", [id], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(text(&store), "interrupted");
        assert_eq!(store.run(id).unwrap().status, RunStatus::Interrupted);
        store
            .conn
            .execute("UPDATE runs SET status = 'paused' WHERE id = ?1", [id])
            .unwrap();
        let err = store.run(id).err().unwrap();
        assert!(err.to_string().contains("unknown status 'paused'"), "{err}");
        assert!(store.list_runs().is_err());
    }

    /// Rows written before warnings had kinds hold plain strings: they load as kind `other`.
    #[test]
    fn warnings_stored_as_plain_text_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::create_or_open(&dir.path().join("x.db")).unwrap();
        let id = store.create_run(&new_run(vec![stream(64)])).unwrap();
        let mut obs = Observation::default();
        obs.warn(WarningKind::Unpinned, "threads were not pinned");
        let ok = CellOutcome {
            result: Ok(obs),
            elapsed_s: 0.1,
        };
        let cell = Cell {
            position: 0,
            repetition: 0,
        };
        store.record_cell(id, cell, &ok).unwrap();
        let stored: String = store
            .conn
            .query_row("SELECT warnings_json FROM observations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(stored, r#"[{"kind":"unpinned","text":"threads were not pinned"}]"#);
        store
            .conn
            .execute(
                "UPDATE observations SET warnings_json = '[\"2 threads migrated between CPUs during the window\"]'",
                [],
            )
            .unwrap();
        let data = store.load_run(id).unwrap();
        let w = &data.cells[0].observation.warnings[0];
        assert_eq!(w.kind, WarningKind::Other);
        assert_eq!(w.text, "2 threads migrated between CPUs during the window");
    }

    #[test]
    fn newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        drop(Store::create_or_open(&path).unwrap());
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch("PRAGMA user_version = 99")
            .unwrap();
        let err = Store::open_existing(&path).err().unwrap();
        assert!(err.to_string().contains("newer"), "{err}");
    }
}
