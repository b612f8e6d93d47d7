//! The runner: an optional warm-up cell, then every cell in order, each outcome handed to the
//! sink as soon as it exists. Ctrl-C (the stop flag) ends the sweep after the cell in flight;
//! that cell may have been cut short, so it is dropped and a resume runs it again.

use super::plan::Cell;
use super::progress::Progress;
use crate::case::Case;
use crate::observation::Observation;
use crate::stop::Stop;
use std::time::Instant;

/// What running one cell gave: an observation or the workload's error text.
#[derive(Debug, Clone)]
pub struct CellOutcome {
    pub result: Result<Observation, String>,
    pub elapsed_s: f64,
}

/// Where finished cells go (the results database implements it).
pub trait CellSink {
    fn record(&mut self, case: &Case, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()>;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Run the first cell's case once before the sweep and discard it (warms caches, page
    /// tables, CPU frequency and the allocator).
    pub warmup_cell: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunEnd {
    pub recorded: usize,
    pub failed: usize,
    pub interrupted: bool,
}

/// Run `cells` of `cases` with `execute`, recording each in `sink`. An error from the sink (the
/// database) stops the sweep; an error from the workload is recorded and the sweep goes on.
pub fn run_cells(
    cases: &[Case],
    cells: &[Cell],
    execute: &mut dyn FnMut(&Case) -> anyhow::Result<Observation>,
    sink: &mut dyn CellSink,
    stop: Stop,
    options: RunOptions,
    progress: &Progress,
) -> anyhow::Result<RunEnd> {
    let mut end = RunEnd::default();
    if options.warmup_cell {
        if let Some(first) = cells.first().and_then(|c| cases.get(c.position)) {
            progress.start_cell(&format!("warm-up: {}", first.label()));
            let _ = execute(first);
        }
    }
    for &cell in cells {
        if stop.requested() {
            end.interrupted = true;
            break;
        }
        let Some(case) = cases.get(cell.position) else {
            anyhow::bail!(
                "cell refers to case {} but the run has {} cases",
                cell.position,
                cases.len()
            );
        };
        progress.start_cell(&format!("{} rep {}", case.label(), cell.repetition + 1));
        let started = Instant::now();
        let result = execute(case).map_err(|e| format!("{e:#}"));
        let outcome = CellOutcome {
            result,
            elapsed_s: started.elapsed().as_secs_f64(),
        };
        if stop.requested() {
            end.interrupted = true;
            break;
        }
        if let Err(error) = &outcome.result {
            progress.note(&format!(
                "cell failed: {} rep {}: {error}",
                case.label(),
                cell.repetition + 1
            ));
            end.failed += 1;
        }
        sink.record(case, cell, &outcome)?;
        end.recorded += 1;
        progress.finish_cell();
    }
    progress.finish();
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::MicroCase;
    use crate::observation::{Metric, Role, Source};

    struct Collect(Vec<(String, Cell, bool)>);
    impl CellSink for Collect {
        fn record(&mut self, case: &Case, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()> {
            self.0.push((case.label(), cell, outcome.result.is_ok()));
            Ok(())
        }
    }

    fn case(name: &str) -> Case {
        Case::Micro(MicroCase {
            bench: crate::case::Bench::Timer,
            options: vec![("name".into(), name.into())],
        })
    }

    #[test]
    fn failures_are_recorded_and_the_sweep_goes_on() {
        let cases = vec![case("good"), case("bad")];
        let cells = super::super::order_cells(2, 2, &Default::default(), false, 0);
        let mut calls = 0;
        let mut execute = |c: &Case| -> anyhow::Result<Observation> {
            calls += 1;
            if c.label().ends_with("name=bad") {
                anyhow::bail!("boom")
            }
            let mut o = Observation::default();
            o.push(Metric::new("x", Role::System, 1.0, "u", Source::Tool));
            Ok(o)
        };
        let mut sink = Collect(Vec::new());
        let stop = Stop::fresh();
        let opts = RunOptions { warmup_cell: true };
        let end = run_cells(
            &cases,
            &cells,
            &mut execute,
            &mut sink,
            stop,
            opts,
            &Progress::hidden(4),
        )
        .unwrap();
        assert_eq!(calls, 5, "one warm-up plus four cells");
        assert_eq!(
            end,
            RunEnd {
                recorded: 4,
                failed: 2,
                interrupted: false
            }
        );
        assert_eq!(sink.0.iter().filter(|r| !r.2).count(), 2);
    }

    #[test]
    fn stop_flag_drops_the_cell_in_flight_and_ends() {
        let cases = vec![case("a")];
        let cells = super::super::order_cells(1, 5, &Default::default(), false, 0);
        let stop = Stop::fresh();
        let mut n = 0;
        let mut execute = |_: &Case| -> anyhow::Result<Observation> {
            n += 1;
            if n == 2 {
                stop.request();
            }
            Ok(Observation::default())
        };
        let mut sink = Collect(Vec::new());
        let end = run_cells(
            &cases,
            &cells,
            &mut execute,
            &mut sink,
            stop,
            RunOptions::default(),
            &Progress::hidden(5),
        )
        .unwrap();
        assert!(end.interrupted);
        assert_eq!(end.recorded, 1, "the second cell was cut short and is not kept");
        assert_eq!(sink.0.len(), 1);
    }
}
