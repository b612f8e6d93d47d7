//! Earlier runs of one plan on one machine: what `compare` reads for the spread between runs
//! (one run a side) and for `last:N` ("the last N runs of this same plan").

use super::read::RunSummary;
use super::status::RunStatus;
use super::Store;
use crate::case::Case;

/// The most runs read (newest first) while looking for runs of a plan.
pub const SCAN_RUNS: usize = 500;

/// The hostname a run was measured on, as stored in its machine description.
pub fn hostname(run: &RunSummary) -> Option<String> {
    let machine: serde_json::Value = serde_json::from_str(&run.machine_json).ok()?;
    machine["hostname"].as_str().map(str::to_string)
}

/// What a run of the plan must be.
pub struct PlanFilter<'a> {
    /// Whether a run's cases are the plan's (the caller's matching decides).
    pub same_plan: &'a dyn Fn(&[Case]) -> bool,
    /// Only runs measured on this host (None: any).
    pub hostname: Option<&'a str>,
    /// Only runs with a smaller id (None: any).
    pub before: Option<i64>,
    /// Runs never taken.
    pub exclude: &'a [i64],
}

impl Store {
    /// Up to `limit` complete runs of the plan, newest first (of the newest `SCAN_RUNS`).
    pub fn runs_of_plan(&self, filter: &PlanFilter, limit: usize) -> anyhow::Result<Vec<i64>> {
        let mut runs = self.list_runs()?;
        runs.reverse();
        let mut out = Vec::new();
        for run in runs.iter().take(SCAN_RUNS) {
            if out.len() >= limit {
                break;
            }
            let wanted = run.status == RunStatus::Complete
                && run.cells_ok > 0
                && !filter.exclude.contains(&run.id)
                && filter.before.is_none_or(|b| run.id < b)
                && filter.hostname.is_none_or(|h| hostname(run).as_deref() == Some(h));
            if wanted && (filter.same_plan)(&self.cases(run.id)?) {
                out.push(run.id);
            }
        }
        Ok(out)
    }
}
