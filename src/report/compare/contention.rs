//! The contention each side of a comparison ran under, from what every cell already stores:
//! the run-queue wait of the measured threads (/proc/<tid>/schedstat), the CPU pressure over
//! the window (/proc/pressure/cpu), steal where a workload records it, and the load average
//! when the run started. B "ran under materially more contention" when its typical cell waited
//! for a CPU, or saw CPU pressure, for more than `MATERIAL_PCT` points of the window above A's:
//! the contended mark of a single cell (`measure::system::CONTENDED_PCT`) applied to the
//! difference between the sides.

use super::super::cells::CellSummary;
use crate::measure::stats::median_of;
use crate::observation::Role;
use crate::store::RunSummary;
use serde::Serialize;

/// Points of the window by which B's median cell must wait (or see pressure) more than A's
/// for "materially more contention".
pub const MATERIAL_PCT: f64 = crate::measure::system::CONTENDED_PCT;

/// One side's contention: medians over every cell of every run (each cell's own median over
/// its repetitions), and the largest cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideContention {
    pub runs: usize,
    /// Run-queue wait of the most-waiting measured thread, % of the window (median cell).
    pub runqueue_wait_pct: Option<f64>,
    /// The same, the most contended cell.
    pub runqueue_wait_max_pct: Option<f64>,
    /// CPU pressure (some), % of the window (median cell).
    pub cpu_pressure_pct: Option<f64>,
    /// CPU time taken by the hypervisor, % (median cell), where the workload records it.
    pub steal_pct: Option<f64>,
    /// The 1-minute load average when the runs started (median over runs).
    pub load_average: Option<f64>,
}

/// Both sides and the judgement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Contention {
    pub a: SideContention,
    pub b: SideContention,
    /// Why B ran under materially more contention than A; None when it did not (or nothing
    /// was recorded).
    pub b_more: Option<String>,
}

fn cell_value(cell: &CellSummary, name: &str) -> Option<f64> {
    cell.metric(name, Role::System)
        .and_then(|m| m.summary.as_ref())
        .map(|s| s.median)
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// The first number of a stored `load_average` ("0.52 0.61 0.70 ...").
fn load_of(run: &RunSummary) -> Option<f64> {
    let env: serde_json::Value = serde_json::from_str(&run.environment_json).ok()?;
    env["load_average"]
        .as_str()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
}

/// One side's contention from its runs (the run's summary, for the load average, and cells).
pub fn side(runs: &[(&RunSummary, &[CellSummary])]) -> SideContention {
    let cells = || runs.iter().flat_map(|(_, c)| c.iter());
    let wait: Vec<f64> = cells()
        .filter_map(|c| cell_value(c, crate::observation::names::RUNQUEUE_WAIT_MAX_PCT))
        .collect();
    let pressure: Vec<f64> = cells()
        .filter_map(|c| {
            let window = cell_value(c, crate::observation::names::WINDOW_S).filter(|w| *w > 0.0)?;
            Some(cell_value(c, crate::observation::names::CPU_PRESSURE_SOME_S)? / window * 100.0)
        })
        .collect();
    let steal: Vec<f64> = cells().filter_map(|c| cell_value(c, "busy_steal_pct")).collect();
    SideContention {
        runs: runs.len(),
        runqueue_wait_max_pct: wait.iter().copied().reduce(f64::max),
        runqueue_wait_pct: median_of(&wait),
        cpu_pressure_pct: median_of(&pressure),
        steal_pct: median_of(&steal),
        load_average: median_of(&runs.iter().filter_map(|(r, _)| load_of(r)).collect::<Vec<_>>()),
    }
}

/// Both sides, and whether B ran under materially more contention.
pub fn contention(a: SideContention, b: SideContention) -> Contention {
    let mut more = Vec::new();
    let pairs = [
        ("run-queue wait", a.runqueue_wait_pct, b.runqueue_wait_pct),
        ("CPU pressure", a.cpu_pressure_pct, b.cpu_pressure_pct),
        ("steal", a.steal_pct, b.steal_pct),
    ];
    for (what, va, vb) in pairs {
        if let (Some(va), Some(vb)) = (va, vb) {
            if vb - va > MATERIAL_PCT {
                more.push(format!("{what} {vb:.1}% of the window against {va:.1}%"));
            }
        }
    }
    let b_more = (!more.is_empty()).then(|| {
        format!(
            "run B ran under materially more contention than run A ({}; more than {} points above A)",
            more.join(", "),
            MATERIAL_PCT
        )
    });
    Contention { a, b, b_more }
}

fn pct_text(v: Option<f64>) -> String {
    v.map_or("not recorded".into(), |v| format!("{v:.1}%"))
}

impl SideContention {
    /// "run-queue wait 8.4% (most contended cell 21.7%), CPU pressure 3.0%, steal not
    /// recorded, load 1.20"
    pub fn describe(&self) -> String {
        format!(
            "run-queue wait {}{}, CPU pressure {}, steal {}, load {}",
            pct_text(self.runqueue_wait_pct),
            self.runqueue_wait_max_pct
                .map_or(String::new(), |m| format!(" (most contended cell {m:.1}%)")),
            pct_text(self.cpu_pressure_pct),
            pct_text(self.steal_pct),
            self.load_average.map_or("not recorded".into(), |l| format!("{l:.2}"))
        )
    }
}

impl Contention {
    /// The lines compare prints (table and Markdown): each side, and the judgement.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![
            format!("contention A: {}", self.a.describe()),
            format!("contention B: {}", self.b.describe()),
        ];
        if let Some(more) = &self.b_more {
            out.push(more.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side_of(wait: f64) -> SideContention {
        SideContention {
            runs: 1,
            runqueue_wait_pct: Some(wait),
            runqueue_wait_max_pct: Some(wait),
            cpu_pressure_pct: None,
            steal_pct: None,
            load_average: Some(1.0),
        }
    }

    #[test]
    fn b_is_flagged_only_beyond_the_material_difference() {
        let c = contention(side_of(8.4), side_of(21.7));
        assert!(
            c.b_more
                .as_deref()
                .is_some_and(|m| m.contains("run-queue wait 21.7%") && m.contains("8.4%")),
            "{c:?}"
        );
        assert!(contention(side_of(8.4), side_of(12.0)).b_more.is_none());
        assert!(
            contention(side_of(21.7), side_of(8.4)).b_more.is_none(),
            "A busier is not B's fault"
        );
        let lines = contention(side_of(1.0), side_of(1.0)).lines();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].contains("steal not recorded"), "{lines:?}");
    }
}
