//! Reading a fleet run for its matrix (`iopath report --matrix`) without loading the run: the
//! pairs and only the metrics asked for, streamed row by row to a callback (a fleet run of 1000
//! hosts holds 999,000 cells and some 72 million metric rows; `load_run` would hold them all).

use super::db::Store;
use crate::observation::Role;
use rusqlite::types::ValueRef;

/// The run's own row, without the cell counts `Store::run` adds (which count every cell).
#[derive(Debug, Clone, PartialEq)]
pub struct RunHead {
    pub id: i64,
    pub name: Option<String>,
    pub command_line: String,
    pub started_at: String,
    pub status: String,
}

/// One fleet case of a run, as its stored JSON says: borrowed from the row being read.
#[derive(Debug, Clone, Copy)]
pub struct FleetPairRow<'a> {
    pub position: usize,
    pub source: &'a str,
    pub destination: &'a str,
    pub concurrent_pairs: u32,
    /// The JSON of the network case inside (what the pair ran).
    pub inner: &'a str,
    /// The same without its `endpoint` (the destination's address): equal for every pair of
    /// one network case.
    pub inner_key: &'a str,
}

/// One value of one successful cell: the case's position, and the metric.
#[derive(Debug, Clone, Copy)]
pub struct FleetValueRow<'a> {
    pub position: usize,
    pub role: Role,
    pub name: &'a str,
    /// None: stored as unavailable.
    pub value: Option<f64>,
}

fn text<'a>(v: ValueRef<'a>, what: &str) -> anyhow::Result<&'a str> {
    match v {
        ValueRef::Text(t) => Ok(std::str::from_utf8(t)?),
        other => anyhow::bail!("a fleet case has no {what} (found {:?})", other.data_type()),
    }
}

fn role_of(text: &str) -> Option<Role> {
    match text {
        "client" => Some(Role::Client),
        "server" => Some(Role::Server),
        "system" => Some(Role::System),
        _ => None,
    }
}

impl Store {
    /// The run's own row, or `StoreError::UnknownRun`.
    pub fn run_head(&self, id: i64) -> anyhow::Result<RunHead> {
        use rusqlite::OptionalExtension;
        self.conn
            .query_row(
                "SELECT id, name, command_line, started_at, status FROM runs WHERE id = ?1",
                [id],
                |r| {
                    Ok(RunHead {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        command_line: r.get(2)?,
                        started_at: r.get(3)?,
                        status: r.get(4)?,
                    })
                },
            )
            .optional()?
            .ok_or_else(|| {
                super::StoreError::UnknownRun {
                    id,
                    path: self.path.display().to_string(),
                }
                .into()
            })
    }

    /// The workloads of the run's cases (`fleet`, `net-stream`), each once, sorted.
    pub fn run_workloads(&self, run_id: i64) -> anyhow::Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT DISTINCT workload FROM cases WHERE run_id = ?1 ORDER BY workload")?;
        let rows = stmt.query_map([run_id], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every fleet case of the run in position order, handed to `each` one at a time. Only the
    /// pair's fields are read out of the case JSON (by SQLite's `json_extract`, in C), and the
    /// texts are borrowed from the row.
    pub fn fleet_pairs(
        &self,
        run_id: i64,
        mut each: impl FnMut(FleetPairRow<'_>) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let mut stmt = self.conn.prepare(
            "SELECT position, json_extract(case_json, '$.source'), json_extract(case_json, '$.destination'),
                    json_extract(case_json, '$.concurrent_pairs'), json_extract(case_json, '$.case'),
                    json_remove(json_extract(case_json, '$.case'), '$.endpoint')
             FROM cases WHERE run_id = ?1 AND workload = 'fleet' ORDER BY position",
        )?;
        let mut rows = stmt.query([run_id])?;
        while let Some(row) = rows.next()? {
            let position: i64 = row.get(0)?;
            let concurrent: Option<i64> = row.get(3)?;
            let pair = FleetPairRow {
                position: usize::try_from(position)
                    .map_err(|_| self.corrupt_fleet(format!("a fleet case has the position {position}")))?,
                source: text(row.get_ref(1)?, "source").map_err(|e| self.corrupt_fleet(e.to_string()))?,
                destination: text(row.get_ref(2)?, "destination").map_err(|e| self.corrupt_fleet(e.to_string()))?,
                concurrent_pairs: concurrent
                    .and_then(|c| u32::try_from(c).ok())
                    .ok_or_else(|| self.corrupt_fleet(format!("the fleet case at position {position} has no concurrent_pairs")))?,
                inner: text(row.get_ref(4)?, "network case").map_err(|e| self.corrupt_fleet(e.to_string()))?,
                inner_key: text(row.get_ref(5)?, "network case").map_err(|e| self.corrupt_fleet(e.to_string()))?,
            };
            each(pair)?;
        }
        Ok(())
    }

    /// The values of the metrics `names` in every successful cell of the run's fleet cases,
    /// handed to `each` one at a time, in no particular order. Failed cells give nothing.
    ///
    /// The metrics table has one index, by observation. Following it costs a seek per metric
    /// row (72 a stream cell, of which the matrix wants 3), so when the run holds a large part
    /// of the database's observations the table is read once front to back instead, keeping
    /// the rows of this run's observations whose name is asked for.
    pub fn fleet_values(
        &self,
        run_id: i64,
        names: &[&str],
        mut each: impl FnMut(FleetValueRow<'_>) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        // The run's successful observations: (observation id, position), sorted by id.
        let mut observations: Vec<(i64, u32)> = Vec::new();
        {
            let mut stmt = self.conn.prepare(
                "SELECT o.id, c.position FROM cases c JOIN observations o ON o.case_id = c.id
                 WHERE c.run_id = ?1 AND c.workload = 'fleet' AND o.status = 'ok'",
            )?;
            let mut rows = stmt.query([run_id])?;
            while let Some(row) = rows.next()? {
                let position: i64 = row.get(1)?;
                let position = u32::try_from(position)
                    .map_err(|_| self.corrupt_fleet(format!("a fleet case has the position {position}")))?;
                observations.push((row.get(0)?, position));
            }
        }
        if observations.is_empty() || names.is_empty() {
            return Ok(());
        }
        observations.sort_unstable();
        let (lo, hi) = (observations[0].0, observations[observations.len() - 1].0);
        let all: i64 = self
            .conn
            .query_row("SELECT count(*) FROM observations", [], |r| r.get(0))?;
        let scan = observations.len() as i64 * 4 >= all;
        let list = vec!["?"; names.len()].join(", ");
        let sql = if scan {
            format!(
                "SELECT observation_id, role, name, value FROM metrics NOT INDEXED
                 WHERE observation_id BETWEEN {lo} AND {hi} AND name IN ({list})"
            )
        } else {
            format!(
                "SELECT m.observation_id, m.role, m.name, m.value FROM cases c
                 JOIN observations o ON o.case_id = c.id JOIN metrics m ON m.observation_id = o.id
                 WHERE c.run_id = {run_id} AND c.workload = 'fleet' AND o.status = 'ok' AND m.name IN ({list})"
            )
        };
        let mut stmt = self.conn.prepare(&sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(names.iter()))?;
        while let Some(row) = rows.next()? {
            let observation: i64 = row.get(0)?;
            let Ok(at) = observations.binary_search_by_key(&observation, |(id, _)| *id) else {
                // Another run's observation inside the id range of this one.
                continue;
            };
            let role_text = text(row.get_ref(1)?, "role").map_err(|e| self.corrupt_fleet(e.to_string()))?;
            let role = role_of(role_text)
                .ok_or_else(|| self.corrupt_fleet(format!("stored metric has an unknown role '{role_text}'")))?;
            let value = match row.get_ref(3)? {
                ValueRef::Null => None,
                ValueRef::Real(v) => Some(v),
                ValueRef::Integer(v) => Some(v as f64),
                _ => return Err(self.corrupt_fleet("a stored metric value is not a number".into())),
            };
            each(FleetValueRow {
                position: observations[at].1 as usize,
                role,
                name: text(row.get_ref(2)?, "name").map_err(|e| self.corrupt_fleet(e.to_string()))?,
                value,
            })?;
        }
        Ok(())
    }

    fn corrupt_fleet(&self, detail: String) -> anyhow::Error {
        super::StoreError::Corrupt {
            path: self.path.clone(),
            detail,
        }
        .into()
    }
}
