//! Progress on stderr while a plan runs. On a terminal: an indicatif bar (cell label, count,
//! ETA). Anywhere else (a pipe, a log file, CI): plain lines such as
//! `cell 12/108 one-copy 64KiB t1 rep 1  elapsed 1 min 05 s  eta 40 s`, at most one every
//! five seconds plus the first and the last cell, and a closing line. Before the first cell,
//! [`Progress::for_plan`] announces the number of cells and about how long they take.
//!
//! [`ProgressSink`] is how a run gets it: a sink the runner tells when the run begins, when
//! each cell starts and finishes (a failed cell gets a `cell failed:` line, or is counted when
//! the end table lists it with its error) and when the run
//! ends (the bar is cleared, or the closing line printed).

use crate::case::Case;
use crate::sweep::{Cell, CellOutcome, Estimate, Plan, RunEnd, Sink};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The shortest gap between two plain progress lines (the first and last cell always print).
pub const LINE_INTERVAL: Duration = Duration::from_secs(5);

pub struct Progress {
    view: View,
    total: usize,
    /// The planned seconds of all cells, when known, for the ETA before the first cell ends.
    planned_seconds: Option<f64>,
    state: Mutex<LineState>,
}

enum View {
    Bar(ProgressBar),
    Lines,
    Hidden,
}

struct LineState {
    started: Instant,
    /// When the first counted cell started (after the warm-up cell), for the rate.
    first_cell: Option<Instant>,
    /// Cells finished so far.
    done: usize,
    last_line: Option<Instant>,
}

impl Progress {
    /// Progress over `cells` of `plan`, announcing how many there are and about how long they
    /// take (the warm-up cell and each workload's set-up included). Micro benchmarks take a
    /// time nobody knows in advance: the announcement says so instead of guessing.
    pub fn for_plan(plan: &Plan, cells: &[Cell]) -> Progress {
        let estimate = plan.estimate(cells);
        let mut progress = Progress::new(cells.len());
        progress.planned_seconds = (estimate.unknown_cells == 0).then_some(estimate.seconds);
        if let Some(line) = announcement(cells.len(), &estimate) {
            progress.note(&line);
        }
        progress
    }

    /// A bar on a terminal, plain lines anywhere else.
    pub fn new(total: usize) -> Progress {
        let view = if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{bar:30} {pos}/{len} cells  eta {eta}  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            View::Bar(bar)
        } else if total > 1 {
            View::Lines
        } else {
            // One cell: its own output follows at once, lines about it would only be noise.
            View::Hidden
        };
        Progress::with_view(view, total)
    }

    fn with_view(view: View, total: usize) -> Progress {
        Progress {
            view,
            total,
            planned_seconds: None,
            state: Mutex::new(LineState {
                started: Instant::now(),
                first_cell: None,
                done: 0,
                last_line: None,
            }),
        }
    }

    /// A cell starts; `label` is the case's label and its repetition (1-based), or
    /// `warm-up: <label>` for the discarded warm-up cell.
    pub fn start_cell(&self, label: &str) {
        match &self.view {
            View::Bar(bar) => bar.set_message(crate::format::escape_control(label).into_owned()),
            View::Hidden => {}
            View::Lines => {
                let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(case) = label.strip_prefix("warm-up: ") {
                    crate::tell!("warm-up cell (discarded): {case}");
                    return;
                }
                let now = Instant::now();
                state.first_cell.get_or_insert(now);
                let number = state.done + 1;
                let due = state
                    .last_line
                    .is_none_or(|last| now.duration_since(last) >= LINE_INTERVAL);
                if number == 1 || number >= self.total || due {
                    state.last_line = Some(now);
                    crate::tell!("{}", self.line(&state, number, label, now));
                }
            }
        }
    }

    /// The plain line for cell `number` (1-based) starting now.
    fn line(&self, state: &LineState, number: usize, label: &str, now: Instant) -> String {
        let elapsed = now.duration_since(state.started).as_secs_f64();
        let remaining_cells = self.total.saturating_sub(state.done);
        let eta = match state.first_cell {
            Some(first) if state.done > 0 => {
                Some(now.duration_since(first).as_secs_f64() / state.done as f64 * remaining_cells as f64)
            }
            _ => self.planned_seconds.map(|s| (s - elapsed).max(0.0)),
        };
        let fmt = crate::format::format_duration_s;
        format!(
            "cell {number}/{} {label}  elapsed {}  eta {}",
            self.total,
            fmt(elapsed),
            eta.map_or("unknown".to_string(), fmt)
        )
    }

    pub fn finish_cell(&self) {
        if let View::Bar(bar) = &self.view {
            bar.inc(1);
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.done += 1;
    }

    /// Print a line above the bar (or plainly without one).
    pub fn note(&self, line: &str) {
        match &self.view {
            View::Bar(bar) => bar.println(crate::format::escape_control_keep_lines(line)),
            View::Lines | View::Hidden => crate::tell!("{line}"),
        }
    }

    pub fn finish(&self) {
        match &self.view {
            View::Bar(bar) => bar.finish_and_clear(),
            View::Hidden => {}
            View::Lines => {
                let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                if self.total > 0 {
                    crate::tell!(
                        "{}/{} cells done in {}",
                        state.done,
                        self.total,
                        crate::format::format_duration_s(state.started.elapsed().as_secs_f64())
                    );
                }
            }
        }
    }
}

/// The progress of a run on stderr, as a sink: made when the run begins (it then knows the
/// plan and the cells left), cleared or closed when it finishes.
#[derive(Default)]
pub struct ProgressSink {
    progress: Option<Progress>,
    /// The end table lists every failed cell with its error: the progress then only counts
    /// them (each error printed once, not twice).
    failures_listed_at_end: bool,
    failed: usize,
}

impl ProgressSink {
    /// Progress for a run whose end table lists each failed cell with its error.
    pub fn listing_failures_at_end() -> ProgressSink {
        ProgressSink {
            failures_listed_at_end: true,
            ..Default::default()
        }
    }
}

/// The progress line's name for `cell` of `case`: its label and repetition.
fn cell_label(case: &Case, cell: Cell) -> String {
    format!("{} rep {}", case.label(), cell.repetition)
}

impl Sink for ProgressSink {
    fn begin(&mut self, plan: &Plan, cells: &[Cell]) -> anyhow::Result<()> {
        self.progress = Some(Progress::for_plan(plan, cells));
        Ok(())
    }

    fn warmup_started(&mut self, case: &Case) -> anyhow::Result<()> {
        if let Some(p) = &self.progress {
            p.start_cell(&format!("warm-up: {}", case.label()));
        }
        Ok(())
    }

    fn cell_started(&mut self, case: &Case, cell: Cell) -> anyhow::Result<()> {
        if let Some(p) = &self.progress {
            p.start_cell(&cell_label(case, cell));
        }
        Ok(())
    }

    fn cell_finished(&mut self, case: &Case, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()> {
        if let Some(p) = &self.progress {
            if let Err(error) = &outcome.result {
                if self.failures_listed_at_end {
                    self.failed += 1;
                } else {
                    p.note(&format!("cell failed: {}: {error}", cell_label(case, cell)));
                }
            }
            p.finish_cell();
        }
        Ok(())
    }

    fn finish(&mut self, _end: &RunEnd) -> anyhow::Result<()> {
        if let Some(p) = self.progress.take() {
            p.finish();
            if self.failed > 0 && !matches!(p.view, View::Hidden) {
                eprintln!(
                    "{} cell{} failed: each is listed with its error in the results",
                    self.failed,
                    if self.failed == 1 { "" } else { "s" }
                );
            }
        }
        Ok(())
    }
}

/// The line before the first cell: how many cells and about how long, or why there is no
/// estimate. None for a single cell of known length (its own output follows at once).
pub fn announcement(cells: usize, estimate: &Estimate) -> Option<String> {
    let warmup = if estimate.warmup_cell {
        " plus a discarded warm-up cell"
    } else {
        ""
    };
    if estimate.unknown_cells > 0 {
        return Some(format!(
            "{cells} cells{warmup}; micro benchmarks take a time not known in advance, so there is no estimate (progress shows the count)"
        ));
    }
    if cells > 1 && estimate.seconds >= 1.0 {
        return Some(format!(
            "{cells} cells{warmup}, about {} of measuring and set-up",
            crate::format::format_duration_s(estimate.seconds)
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_announcement_counts_the_warm_up_and_admits_unknown_times() {
        let known = Estimate {
            seconds: 42.0,
            unknown_cells: 0,
            warmup_cell: true,
        };
        assert_eq!(
            announcement(6, &known).unwrap(),
            "6 cells plus a discarded warm-up cell, about 42 s of measuring and set-up"
        );
        let micro = Estimate {
            seconds: 0.0,
            unknown_cells: 3,
            warmup_cell: false,
        };
        assert!(announcement(3, &micro).unwrap().contains("no estimate"));
        let short = Estimate {
            seconds: 0.2,
            unknown_cells: 0,
            warmup_cell: false,
        };
        assert_eq!(announcement(2, &short), None);
    }

    #[test]
    fn plain_lines_count_from_one_and_estimate_from_the_cells_done() {
        let mut p = Progress::with_view(View::Lines, 4);
        p.planned_seconds = Some(8.0);
        let state = p.state.lock().unwrap();
        let now = state.started + Duration::from_secs(1);
        let first = p.line(&state, 1, "fake#0 ok:1 rep 1", now);
        assert_eq!(first, "cell 1/4 fake#0 ok:1 rep 1  elapsed 1 s  eta 7 s");
        drop(state);
        p.state.lock().unwrap().first_cell = Some(now);
        p.finish_cell();
        p.finish_cell();
        let state = p.state.lock().unwrap();
        let now = state.started + Duration::from_secs(5);
        let third = p.line(&state, 3, "fake#0 ok:1 rep 2", now);
        assert_eq!(third, "cell 3/4 fake#0 ok:1 rep 2  elapsed 5 s  eta 4 s");
    }
}
