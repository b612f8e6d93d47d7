//! Reading a fleet run for its matrix (`iopath report --matrix`) without loading the run: the
//! pairs and only the metrics asked for, streamed row by row to a callback (a fleet run of 1000
//! hosts holds 999,000 cells and some 72 million metric rows; `load_run` would hold them all).

use super::db::Store;
use crate::observation::Role;
use rusqlite::types::ValueRef;
use serde::Deserialize;
use std::borrow::Cow;

/// The run's own row, without the cell counts `Store::run` adds (which count every cell).
#[derive(Debug, Clone, PartialEq)]
pub struct RunHead {
    pub id: i64,
    pub name: Option<String>,
    pub command_line: String,
    pub started_at: String,
    pub status: String,
}

/// One fleet case of a run: borrowed from the row being read where it can be.
#[derive(Debug, Clone)]
pub struct FleetPairRow<'a> {
    pub position: usize,
    pub source: Cow<'a, str>,
    pub destination: Cow<'a, str>,
    pub concurrent_pairs: u32,
    /// The label of the network case inside (`FleetCase::label` after `SRC -> DST rN: `):
    /// the same for every pair of one network case, whatever its destination.
    pub inner_label: Cow<'a, str>,
}

/// The fields of a stored fleet case the matrix needs; the network case inside is skipped.
#[derive(Deserialize)]
struct PairFields<'a> {
    #[serde(borrow)]
    source: Cow<'a, str>,
    #[serde(borrow)]
    destination: Cow<'a, str>,
    round: u32,
    concurrent_pairs: u32,
    case: serde::de::IgnoredAny,
}

/// A run's successful observations: (observation id, its case's position), sorted by id; and
/// the longest latency any of its cases' windows can record (`case::latency_bound`).
#[derive(Debug, Clone, Default)]
pub struct RunObservations(Vec<(i64, u32)>, Option<std::time::Duration>);

impl RunObservations {
    /// The position of the case of `observation`, None when it is not one of the run's.
    pub fn position(&self, observation: i64) -> Option<usize> {
        let at = self.0.binary_search_by_key(&observation, |(id, _)| *id).ok()?;
        Some(self.0[at].1 as usize)
    }

    /// The first and last observation id, None when there is none.
    pub fn id_range(&self) -> Option<(i64, i64)> {
        Some((self.0.first()?.0, self.0.last()?.0))
    }

    /// The id range cut into at most `parts` ranges of about as many of the run's observations
    /// each (for readers working at once).
    pub fn split(&self, parts: usize) -> Vec<(i64, i64)> {
        let per = self.0.len().div_ceil(parts.max(1)).max(1);
        self.0.chunks(per).map(|c| (c[0].0, c[c.len() - 1].0)).collect()
    }
}

/// One value of one successful cell: the case's position, and the metric.
#[derive(Debug, Clone, Copy)]
pub struct FleetValueRow<'a> {
    pub position: usize,
    pub role: Role,
    pub name: &'a str,
    /// None: stored as unavailable.
    pub value: Option<f64>,
    /// Where it came from (`tool`, `estimate`, `unavailable: <reason>`).
    pub source: &'a str,
}

fn text<'a>(v: ValueRef<'a>, what: &str) -> anyhow::Result<&'a str> {
    match v {
        ValueRef::Text(t) => Ok(std::str::from_utf8(t)?),
        other => anyhow::bail!("a fleet case has no {what} (found {:?})", other.data_type()),
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

    /// Every fleet case of the run in position order, handed to `each` one at a time. The
    /// case JSON is parsed only for the pair's fields (the network case inside is skipped), and
    /// texts are borrowed from the row.
    pub fn fleet_pairs(
        &self,
        run_id: i64,
        mut each: impl FnMut(FleetPairRow<'_>) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let mut stmt = self.conn.prepare(
            "SELECT position, label, case_json FROM cases WHERE run_id = ?1 AND workload = 'fleet' ORDER BY position",
        )?;
        let mut rows = stmt.query([run_id])?;
        while let Some(row) = rows.next()? {
            let position: i64 = row.get(0)?;
            let position = usize::try_from(position)
                .map_err(|_| self.corrupt_fleet(format!("a fleet case has the position {position}")))?;
            let label = text(row.get_ref(1)?, "label").map_err(|e| self.corrupt_fleet(e.to_string()))?;
            let json = text(row.get_ref(2)?, "case").map_err(|e| self.corrupt_fleet(e.to_string()))?;
            let fields: PairFields<'_> = serde_json::from_str(json).map_err(|e| {
                self.corrupt_fleet(format!("the fleet case at position {position} does not parse ({e})"))
            })?;
            let _ = fields.case;
            let prefix = format!("{} -> {} r{}: ", fields.source, fields.destination, fields.round);
            let inner_label = match label.strip_prefix(&prefix) {
                Some(inner) => Cow::Borrowed(inner),
                // A label of another shape: the network case's own, parsed (slow, but right).
                None => Cow::Owned(
                    serde_json::from_str::<crate::case::Case>(json)
                        .ok()
                        .and_then(|c| c.get::<crate::case::FleetCase>().map(|f| f.case.label()))
                        .unwrap_or_else(|| label.to_string()),
                ),
            };
            each(FleetPairRow {
                position,
                source: fields.source,
                destination: fields.destination,
                concurrent_pairs: fields.concurrent_pairs,
                inner_label,
            })?;
        }
        Ok(())
    }

    /// The run's successful observations and their cases' positions, from indexes alone (cases
    /// by run and position, observations by case and status: migration 4), never the rows.
    pub fn ok_observations(&self, run_id: i64) -> anyhow::Result<RunObservations> {
        let mut stmt = self.conn.prepare(
            "SELECT o.id, c.position FROM cases c JOIN observations o ON o.case_id = c.id
             WHERE c.run_id = ?1 AND o.status = 'ok'",
        )?;
        let mut rows = stmt.query([run_id])?;
        let mut found = Vec::new();
        while let Some(row) = rows.next()? {
            let position: i64 = row.get(1)?;
            let position = u32::try_from(position)
                .map_err(|_| self.corrupt_fleet(format!("a case has the position {position}")))?;
            found.push((row.get(0)?, position));
        }
        found.sort_unstable();
        // The longest window and warm-up of the run's network cases, read by SQLite without
        // parsing each case here (a million-cell run): a bound on every cell's latencies.
        let longest_ms: Option<f64> = self.conn.query_row(
            "SELECT MAX(json_extract(case_json, '$.case.duration_ms') + json_extract(case_json, '$.case.warmup_ms'))
             FROM cases WHERE run_id = ?1 AND workload = 'fleet' AND json_valid(case_json)",
            [run_id],
            |r| r.get(0),
        )?;
        Ok(RunObservations(
            found,
            longest_ms.and_then(|ms| crate::case::latency_bound(ms / 1e3)),
        ))
    }

    /// The values of the metrics `names` in the run's successful `observations` whose ids lie
    /// in `ids` (`RunObservations::id_range`, or a part of it from `split`), handed to `each`
    /// in no particular order. A position that is not a fleet case gets no pair from
    /// `fleet_pairs`, so its values are never drawn.
    ///
    /// The rows come from the partial index `metrics_of_fleet_matrix` (schema migration 4),
    /// which holds every metric row a matrix draws, with its value and source: a 10^6-cell
    /// run has 3 million such rows among its 72 million. `names` must be among the index's
    /// (`schema::FLEET_MATRIX_NAMES`), or SQLite refuses the query.
    pub fn fleet_values(
        &self,
        observations: &RunObservations,
        (first, last): (i64, i64),
        names: &[&str],
        mut each: impl FnMut(FleetValueRow<'_>),
    ) -> anyhow::Result<()> {
        if names.is_empty() {
            return Ok(());
        }
        // The index's own condition, then the names asked for and the run's id range: the
        // rows between are other runs' (skipped by `value_row`).
        let asked = (0..names.len())
            .map(|i| format!("?{}", i + 3))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT observation_id, role, name, value, source FROM metrics INDEXED BY metrics_of_fleet_matrix
             WHERE {} AND name IN ({asked}) AND observation_id BETWEEN ?1 AND ?2",
            super::schema::FLEET_MATRIX_NAMES
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let mut params: Vec<rusqlite::types::Value> = vec![first.into(), last.into()];
        params.extend(names.iter().map(|n| rusqlite::types::Value::from(n.to_string())));
        let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
        while let Some(row) = rows.next()? {
            if let Some(value) = self.value_row(row, observations)? {
                each(value);
            }
        }
        Ok(())
    }

    /// One metric row as a value of the run, or None when its observation is another run's.
    fn value_row<'r>(
        &self,
        row: &'r rusqlite::Row<'r>,
        observations: &RunObservations,
    ) -> anyhow::Result<Option<FleetValueRow<'r>>> {
        let Some(position) = observations.position(row.get(0)?) else {
            return Ok(None);
        };
        let role_text = text(row.get_ref(1)?, "role").map_err(|e| self.corrupt_fleet(e.to_string()))?;
        let role = role_text
            .parse::<Role>()
            .ok()
            .ok_or_else(|| self.corrupt_fleet(format!("stored metric has an unknown role '{role_text}'")))?;
        let value = match row.get_ref(3)? {
            ValueRef::Null => None,
            ValueRef::Real(v) => Some(v),
            ValueRef::Integer(v) => Some(v as f64),
            _ => return Err(self.corrupt_fleet("a stored metric value is not a number".into())),
        };
        let name = text(row.get_ref(2)?, "name").map_err(|e| self.corrupt_fleet(e.to_string()))?;
        // The one range check of values not computed here, as `load_run` applies it (of
        // `out_of_order`, what a value alone can fail: the matrix reads one quantile).
        if let Some(why) = value.and_then(|v| {
            crate::observation::impossible_value(role, name, v)
                .or_else(|| crate::observation::beyond_histogram(role, name, v, observations.1))
        }) {
            return Err(self.corrupt_fleet(why));
        }
        Ok(Some(FleetValueRow {
            position,
            role,
            name,
            value,
            source: text(row.get_ref(4)?, "source").map_err(|e| self.corrupt_fleet(e.to_string()))?,
        }))
    }

    fn corrupt_fleet(&self, detail: String) -> anyhow::Error {
        super::StoreError::Corrupt {
            path: self.path.clone(),
            detail,
        }
        .into()
    }
}
