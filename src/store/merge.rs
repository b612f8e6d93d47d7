//! `iopath merge OUT IN…`: copying every run of other iopath databases into one, with new run
//! ids and the run's provenance (source file, original run id, host), refusing a run that is
//! already there.
//!
//! A run's **identity** is what it is wherever it is copied: the SHA-256 of its host, start
//! time, original run id, command line, tool version, machine and environment descriptions and
//! every case (in planned order). None of these change when the run is resumed, so a run
//! merged once is recognised again however many cells it has since; two different runs share
//! it only when all of them are equal (the same command on the same host at the same second
//! into two databases whose recorded environment, load average included, is identical). A
//! merged run keeps the identity and provenance of its first source, so merging a merged
//! database again, or a database and a copy of it, refuses what is already there.

use super::db::{Store, StoreError};
use rusqlite::{params, params_from_iter, types::Value, OptionalExtension};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;

/// The schema version from which a run carries provenance columns (migration 2).
pub const PROVENANCE_VERSION: i64 = 2;

/// Where a merged run came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Provenance {
    /// The absolute path of the database it was first copied from.
    pub source_file: String,
    /// Its id there.
    pub source_run_id: i64,
    /// The host it was measured on (`hostname` of the run's recorded machine), when recorded.
    pub source_host: Option<String>,
    /// The run's identity (hex SHA-256, see the module's documentation).
    pub identity: String,
    /// When it was copied into this database (UTC).
    pub merged_at: String,
}

/// What became of one run of an input.
#[derive(Debug, Clone, PartialEq)]
pub enum Merged {
    /// Copied as run `run` of the output.
    Copied {
        source_run: i64,
        run: i64,
        host: Option<String>,
    },
    /// Already in the output as run `existing`: not copied.
    Duplicate { source_run: i64, existing: i64 },
    /// Being executed by another process right now: not copied (its cells are still coming,
    /// and a copy would keep its identity from the finished run).
    InProgress { source_run: i64 },
}

/// The run columns copied as they are, in this order.
const RUN_FIELDS: &str = "name, command_line, tool_version, started_at, ended_at, status, repetitions, shuffle, \
                          seed, warmup_cell, machine_json, environment_json";

/// The host named in a run's recorded machine description.
pub fn host_of(machine_json: &str) -> Option<String> {
    let machine: serde_json::Value = serde_json::from_str(machine_json).ok()?;
    machine["hostname"].as_str().map(str::to_string)
}

/// A run's identity: hex SHA-256 over its identifying fields, each length-prefixed so no two
/// different lists of fields hash the same text.
fn identity(fields: &[&str], cases: &[String]) -> String {
    let mut hash = Sha256::new();
    hash.update(b"iopath run identity 1\n");
    for field in fields.iter().copied().chain(cases.iter().map(String::as_str)) {
        hash.update(format!("{}:", field.len()).as_bytes());
        hash.update(field.as_bytes());
        hash.update(b"\n");
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

impl Store {
    fn has_provenance(&self) -> anyhow::Result<bool> {
        Ok(self.schema_version()? >= PROVENANCE_VERSION)
    }

    /// The provenance of run `id`: None for a run measured into this database.
    pub fn provenance(&self, id: i64) -> anyhow::Result<Option<Provenance>> {
        if !self.has_provenance()? {
            return Ok(None);
        }
        let row = self
            .conn
            .query_row(
                "SELECT source_file, source_run_id, source_host, source_identity, merged_at FROM runs
                 WHERE id = ?1 AND source_identity IS NOT NULL",
                [id],
                |r| {
                    Ok(Provenance {
                        source_file: r.get(0)?,
                        source_run_id: r.get(1)?,
                        source_host: r.get(2)?,
                        identity: r.get(3)?,
                        merged_at: r.get(4)?,
                    })
                },
            )
            .optional()?;
        Ok(row)
    }

    /// The identity of run `id` computed from its row and cases, with `original_id` the run's
    /// id where it was measured (its own id for a run measured into this database, the stored
    /// `source_run_id` of a merged one).
    fn computed_identity(&self, id: i64, original_id: i64) -> anyhow::Result<String> {
        let (started_at, command_line, tool_version, machine_json, environment_json): (
            String,
            String,
            String,
            String,
            String,
        ) = self.conn.query_row(
            "SELECT started_at, command_line, tool_version, machine_json, environment_json FROM runs WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )?;
        let cases: Vec<String> = self
            .conn
            .prepare("SELECT case_json FROM cases WHERE run_id = ?1 ORDER BY position")?
            .query_map([id], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let host = host_of(&machine_json).unwrap_or_default();
        Ok(identity(
            &[
                &host,
                &started_at,
                &original_id.to_string(),
                &command_line,
                &tool_version,
                &machine_json,
                &environment_json,
            ],
            &cases,
        ))
    }

    /// Run `id`'s identity, always computed from its content: for a merged run from its
    /// original id, and the stored `source_identity` checked against it — a stored identity
    /// that is not the content's (tampered, or damaged) is `StoreError::Corrupt`, never
    /// obeyed (it would make merge skip a genuine run as a duplicate, or copy one twice).
    pub fn run_identity(&self, id: i64) -> anyhow::Result<String> {
        match self.checked_provenance(id)? {
            Some(p) => Ok(p.identity),
            None => self.computed_identity(id, id),
        }
    }

    /// [`Store::provenance`] with its identity checked against the run's content.
    fn checked_provenance(&self, id: i64) -> anyhow::Result<Option<Provenance>> {
        let Some(p) = self.provenance(id)? else {
            return Ok(None);
        };
        if self.computed_identity(id, p.source_run_id)? != p.identity {
            return Err(StoreError::Corrupt {
                path: self.path().to_path_buf(),
                detail: format!(
                    "run {id}: its stored source identity is not the one its content gives (the row was changed \
                     after it was merged)"
                ),
            }
            .into());
        }
        Ok(Some(p))
    }

    /// Check this database as an input of `merge` before the output is created or written:
    /// every stored identity against its run's content, every metric row as a reader would
    /// accept it (`check_stored_value`). Merge copies rows without decoding them, so what a
    /// reader would refuse is refused here, and a damaged input copies nothing.
    pub fn check_merge_input(&self) -> anyhow::Result<()> {
        let ids: Vec<i64> = self
            .conn
            .prepare("SELECT id FROM runs ORDER BY id")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        for id in ids {
            self.checked_provenance(id)?;
        }
        // One observation's rows together (the metrics' index by observation gives the
        // order), so how its values stand to each other is checked as a reader would.
        let mut read = self.conn.prepare(
            "SELECT c.run_id, m.role, m.name, m.value, m.observation_id, c.id, c.case_json FROM metrics m
             JOIN observations o ON o.id = m.observation_id JOIN cases c ON c.id = o.case_id
             ORDER BY m.observation_id",
        )?;
        let mut rows = read.query([])?;
        let mut observation: Option<(i64, i64)> = None;
        let mut metrics: Vec<crate::observation::Metric> = Vec::new();
        // The case of the observation being read (its id) and the longest latency it allows;
        // a case that does not parse is refused by the run's own check (`checked_provenance`).
        let mut case: Option<(i64, Option<std::time::Duration>)> = None;
        let in_order = |of: Option<(i64, i64)>,
                        metrics: &[crate::observation::Metric],
                        longest: Option<std::time::Duration>|
         -> anyhow::Result<()> {
            match (of, crate::observation::out_of_order(metrics, longest)) {
                (Some((run, id)), Some(why)) => Err(StoreError::Corrupt {
                    path: self.path().to_path_buf(),
                    detail: format!("run {run}: observation {id}: {why}"),
                }
                .into()),
                _ => Ok(()),
            }
        };
        let longest = |case: Option<(i64, Option<std::time::Duration>)>| case.and_then(|(_, longest)| longest);
        while let Some(r) = rows.next()? {
            let (run, id, case_id): (i64, i64, i64) = (r.get(0)?, r.get(4)?, r.get(5)?);
            if observation.is_some_and(|(_, current)| current != id) {
                in_order(observation, &metrics, longest(case))?;
                metrics.clear();
            }
            if case.is_none_or(|(current, _)| current != case_id) {
                let parsed = serde_json::from_str::<crate::case::Case>(&r.get::<_, String>(6)?).ok();
                case = Some((case_id, parsed.and_then(|c| c.as_workload().longest_latency())));
            }
            observation = Some((run, id));
            metrics.extend(check_stored_value(self, run, r)?);
        }
        in_order(observation, &metrics, longest(case))
    }

    /// Every run's identity, to its id.
    pub fn run_identities(&self) -> anyhow::Result<HashMap<String, i64>> {
        let ids: Vec<i64> = self
            .conn
            .prepare("SELECT id FROM runs ORDER BY id")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let mut out = HashMap::with_capacity(ids.len());
        for id in ids {
            out.entry(self.run_identity(id)?).or_insert(id);
        }
        Ok(out)
    }

    /// Copy every run of `input` (oldest first) into this database, each in one transaction
    /// with a new id and its provenance; a run whose identity is in `known` (this database's
    /// [`Store::run_identities`], which the copies are added to) is a duplicate, not copied.
    /// Each run is checked as a reader checks it (status, repetitions, cases that parse,
    /// possible positions) before anything of it is written: a damaged input is an error, and
    /// the runs copied before it stay whole.
    /// Any failure reading the input that means it is damaged names the input.
    pub fn merge_from(&mut self, input: &mut Store, known: &mut HashMap<String, i64>) -> anyhow::Result<Vec<Merged>> {
        let path = input.path().to_path_buf();
        self.merge_runs(input, known).map_err(|e| damaged_input(e, &path))
    }

    fn merge_runs(&mut self, input: &mut Store, known: &mut HashMap<String, i64>) -> anyhow::Result<Vec<Merged>> {
        let source_file = std::fs::canonicalize(input.path())
            .unwrap_or_else(|_| input.path().to_path_buf())
            .display()
            .to_string();
        let ids: Vec<i64> = input
            .conn
            .prepare("SELECT id FROM runs ORDER BY id")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let mut outcomes = Vec::with_capacity(ids.len());
        for id in ids {
            // Kept open (with the input's locks, closed after its connection): the read lock
            // keeps a resume of the run from starting while it is copied.
            let (guard, in_progress) = super::lock::run_in_progress(input.path(), id)?;
            input.locks.push(guard);
            if in_progress {
                outcomes.push(Merged::InProgress { source_run: id });
                continue;
            }
            let run = input.run(id)?;
            let cases = input.cases(id)?;
            if let Some(why) = input.impossible_positions(id, cases.len(), run.repetitions)? {
                return Err(StoreError::Corrupt {
                    path: input.path().to_path_buf(),
                    detail: format!("run {id}: {why}"),
                }
                .into());
            }
            let (identity, origin) = match input.checked_provenance(id)? {
                Some(p) => (p.identity.clone(), (p.source_file, p.source_run_id, p.source_host)),
                None => (
                    input.computed_identity(id, id)?,
                    (source_file.clone(), id, host_of(&run.machine_json)),
                ),
            };
            if let Some(&existing) = known.get(&identity) {
                outcomes.push(Merged::Duplicate {
                    source_run: id,
                    existing,
                });
                continue;
            }
            match self.copy_run(input, id, &origin, &identity)? {
                Ok(new) => {
                    known.insert(identity, new);
                    outcomes.push(Merged::Copied {
                        source_run: id,
                        run: new,
                        host: origin.2,
                    });
                }
                Err(existing) => outcomes.push(Merged::Duplicate {
                    source_run: id,
                    existing,
                }),
            }
        }
        Ok(outcomes)
    }

    /// One run of `input` with its cases, observations, metrics and fleet cells' machines, in
    /// one transaction: the new id, or (a merge beside this one copied it first) the id it
    /// already has here.
    fn copy_run(
        &mut self,
        input: &Store,
        id: i64,
        origin: &(String, i64, Option<String>),
        identity: &str,
    ) -> anyhow::Result<Result<i64, i64>> {
        let tx = self.conn.transaction()?;
        let already: Option<i64> = tx
            .query_row("SELECT id FROM runs WHERE source_identity = ?1", [identity], |r| {
                r.get(0)
            })
            .optional()?;
        if let Some(existing) = already {
            return Ok(Err(existing));
        }
        let row: Vec<Value> =
            input
                .conn
                .query_row(&format!("SELECT {RUN_FIELDS} FROM runs WHERE id = ?1"), [id], |r| {
                    (0..12).map(|i| r.get::<_, Value>(i)).collect()
                })?;
        let provenance = [
            Value::Text(origin.0.clone()),
            Value::Integer(origin.1),
            origin.2.clone().map_or(Value::Null, Value::Text),
            Value::Text(identity.to_string()),
        ];
        tx.execute(
            &format!(
                "INSERT INTO runs ({RUN_FIELDS}, source_file, source_run_id, source_host, source_identity, merged_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                 strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))"
            ),
            params_from_iter(row.into_iter().chain(provenance)),
        )?;
        let run = tx.last_insert_rowid();
        let mut case_ids: HashMap<i64, i64> = HashMap::new();
        {
            let mut read = input
                .conn
                .prepare("SELECT id, position, workload, label, case_key, case_json FROM cases WHERE run_id = ?1 ORDER BY position")?;
            let mut insert = tx.prepare(
                "INSERT INTO cases (run_id, position, workload, label, case_key, case_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            let mut rows = read.query([id])?;
            while let Some(r) = rows.next()? {
                let new = insert.insert(params![
                    run,
                    r.get::<_, Value>(1)?,
                    r.get::<_, Value>(2)?,
                    r.get::<_, Value>(3)?,
                    r.get::<_, Value>(4)?,
                    r.get::<_, Value>(5)?
                ])?;
                case_ids.insert(r.get(0)?, new);
            }
        }
        let mut observation_ids: HashMap<i64, i64> = HashMap::new();
        {
            let mut read = input.conn.prepare(
                "SELECT o.id, o.case_id, o.repetition, o.status, o.error, o.finished_at, o.elapsed_s, o.warnings_json,
                 o.placement_json FROM observations o JOIN cases c ON c.id = o.case_id WHERE c.run_id = ?1 ORDER BY o.id",
            )?;
            let mut insert = tx.prepare(
                "INSERT INTO observations (case_id, repetition, status, error, finished_at, elapsed_s, warnings_json,
                 placement_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?;
            let mut rows = read.query([id])?;
            while let Some(r) = rows.next()? {
                let case_id = case_ids[&r.get::<_, i64>(1)?];
                let mut values = vec![Value::Integer(case_id)];
                for i in 2..9 {
                    values.push(r.get(i)?);
                }
                let new = insert.insert(params_from_iter(values))?;
                observation_ids.insert(r.get(0)?, new);
            }
        }
        {
            let mut read = input.conn.prepare(
                "SELECT m.observation_id, m.role, m.name, m.value, m.unit, m.source FROM metrics m
                 JOIN observations o ON o.id = m.observation_id JOIN cases c ON c.id = o.case_id
                 WHERE c.run_id = ?1 ORDER BY m.rowid",
            )?;
            let mut insert = tx.prepare(
                "INSERT INTO metrics (observation_id, role, name, value, unit, source) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            let mut rows = read.query([id])?;
            while let Some(r) = rows.next()? {
                let observation_id = observation_ids[&r.get::<_, i64>(0)?];
                let mut values = vec![Value::Integer(observation_id)];
                for i in 1..6 {
                    values.push(r.get(i)?);
                }
                insert.execute(params_from_iter(values))?;
            }
        }
        super::machines::copy_run(input, &tx, id, &observation_ids)?;
        super::ab::copy_run(input, &tx, id, run, &case_ids)?;
        tx.commit()?;
        Ok(Ok(run))
    }
}

/// A metric row of run `id` of `input` as a reader would accept it: a known role, and a value
/// that is a number passing the one range check (`observation::impossible_value`) or none;
/// the row as a metric when it has a value (for `observation::out_of_order`).
/// Merge copies rows without decoding them, so it checks them here: a damaged value is never
/// carried into the output.
fn check_stored_value(
    input: &Store,
    id: i64,
    r: &rusqlite::Row<'_>,
) -> anyhow::Result<Option<crate::observation::Metric>> {
    let damaged = |detail: String| -> anyhow::Error {
        StoreError::Corrupt {
            path: input.path().to_path_buf(),
            detail: format!("run {id}: {detail}"),
        }
        .into()
    };
    let role_text: String = r.get(1)?;
    let name: String = r.get(2)?;
    let role = role_text
        .parse::<crate::observation::Role>()
        .ok()
        .ok_or_else(|| damaged(format!("a stored metric has an unknown role '{role_text}'")))?;
    let value = match r.get_ref(3)? {
        rusqlite::types::ValueRef::Null => return Ok(None),
        rusqlite::types::ValueRef::Real(v) => v,
        rusqlite::types::ValueRef::Integer(v) => v as f64,
        _ => {
            return Err(damaged(format!(
                "the stored value of {role_text}.{name} is not a number"
            )))
        }
    };
    match crate::observation::impossible_value(role, &name, value) {
        Some(why) => Err(damaged(why)),
        // The unit is not read: how values stand to each other goes by their names.
        None => Ok(Some(crate::observation::Metric::tool(&name, role, value, ""))),
    }
}

/// `e`, met while merging from the input at `path`, as `StoreError::Corrupt` naming that input
/// when it says a database is damaged (a malformed page, a value of the wrong type) without
/// naming which.
pub(super) fn damaged_input(e: anyhow::Error, path: &Path) -> anyhow::Error {
    let named = |detail: String| -> anyhow::Error {
        StoreError::Corrupt {
            path: path.to_path_buf(),
            detail,
        }
        .into()
    };
    if let Some(StoreError::Damaged { detail }) = e.downcast_ref::<StoreError>() {
        return named(detail.clone());
    }
    for cause in e.chain() {
        if let Some(sqlite) = cause.downcast_ref::<rusqlite::Error>() {
            if let Some(found) = super::db::unusable(Some(path), sqlite) {
                return found.into();
            }
            if matches!(
                sqlite,
                rusqlite::Error::InvalidColumnType(..) | rusqlite::Error::FromSqlConversionFailure(..)
            ) {
                return named(format!("a stored value has the wrong type ({sqlite})"));
            }
        }
    }
    e
}

/// Whether two paths name the same file (device and inode: links and other spellings alike);
/// false when either does not exist.
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_separates_fields_and_follows_every_one() {
        let base = identity(&["h", "t", "1"], &["{}".into()]);
        assert_eq!(base.len(), 64);
        assert_eq!(base, identity(&["h", "t", "1"], &["{}".into()]));
        // Moving a character from one field to the next is another identity.
        assert_ne!(base, identity(&["ht", "", "1"], &["{}".into()]));
        assert_ne!(base, identity(&["h", "t", "2"], &["{}".into()]));
        assert_ne!(base, identity(&["h", "t", "1"], &["{}".into(), "{}".into()]));
    }

    #[test]
    fn the_host_comes_from_the_recorded_machine() {
        assert_eq!(host_of(r#"{"hostname":"node7"}"#).as_deref(), Some("node7"));
        assert_eq!(host_of("{}"), None);
        assert_eq!(host_of("not json"), None);
    }
}
