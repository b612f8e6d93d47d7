//! The one runner: an optional warm-up cell, then every cell in order, each outcome handed to
//! every sink the moment it exists (hyperfine writes results after each benchmark).
//!
//! Stop semantics live here: when a stop is requested the cell in flight is cut short, so it is
//! discarded — never printed, exported or stored — and the run ends as interrupted. A failing
//! or panicking cell is recorded as failed and the run goes on.

use super::plan::{Cell, Plan};
use super::progress::Progress;
use crate::case::Case;
use crate::observation::Observation;
use crate::stop::{Interrupted, Stop};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

/// What running one cell gave: an observation or the workload's error text.
#[derive(Debug, Clone)]
pub struct CellOutcome {
    pub result: Result<Observation, String>,
    pub elapsed_s: f64,
}

/// Where finished cells go: the results database, the terminal printers. A sink only receives;
/// it never measures.
pub trait Sink {
    fn cell(&mut self, case: &Case, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()>;
}

/// How a run ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunEnd {
    /// Cells handed to the sinks (successful and failed).
    pub recorded: usize,
    pub failed: usize,
    /// A stop was requested; the cell in flight (if any) was discarded.
    pub interrupted: bool,
    /// The label of the discarded cell.
    pub cut_short: Option<String>,
}

/// Run one case, turning a panic into an error so one bad cell cannot end the run.
fn execute_guarded(
    execute: &mut dyn FnMut(&Case, Stop) -> anyhow::Result<Observation>,
    case: &Case,
    stop: Stop,
) -> anyhow::Result<Observation> {
    match catch_unwind(AssertUnwindSafe(|| execute(case, stop))) {
        Ok(result) => result,
        Err(payload) => {
            let text = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            Err(anyhow::anyhow!("the workload panicked: {text}"))
        }
    }
}

/// Run `cells` of `plan` with `execute`, handing each outcome to every sink. An error from a
/// sink (the database) ends the run with that error; an error from the workload is recorded
/// and the run goes on.
pub fn run_plan(
    plan: &Plan,
    cells: &[Cell],
    execute: &mut dyn FnMut(&Case, Stop) -> anyhow::Result<Observation>,
    sinks: &mut [&mut dyn Sink],
    stop: Stop,
    progress: &Progress,
) -> anyhow::Result<RunEnd> {
    let mut end = RunEnd::default();
    if plan.warmup_cell {
        if let Some(first) = cells.first().and_then(|c| plan.cases.get(c.position)) {
            progress.start_cell(&format!("warm-up: {}", first.label()));
            let _ = execute_guarded(execute, first, stop);
        }
    }
    for &cell in cells {
        if stop.requested() {
            end.interrupted = true;
            break;
        }
        let Some(case) = plan.cases.get(cell.position) else {
            anyhow::bail!(
                "cell refers to case {} but the run has {} cases",
                cell.position,
                plan.cases.len()
            );
        };
        let label = format!("{} rep {}", case.label(), cell.repetition);
        progress.start_cell(&label);
        let started = Instant::now();
        let result = execute_guarded(execute, case, stop);
        let cut_short = result
            .as_ref()
            .err()
            .is_some_and(|e| e.downcast_ref::<Interrupted>().is_some());
        if stop.requested() || cut_short {
            end.interrupted = true;
            end.cut_short = Some(label);
            break;
        }
        let outcome = CellOutcome {
            result: result.map_err(|e| format!("{e:#}")),
            elapsed_s: started.elapsed().as_secs_f64(),
        };
        if let Err(error) = &outcome.result {
            progress.note(&format!("cell failed: {label}: {error}"));
            end.failed += 1;
        }
        for sink in sinks.iter_mut() {
            sink.cell(case, cell, &outcome)?;
        }
        end.recorded += 1;
        progress.finish_cell();
    }
    progress.finish();
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{FakeBehaviour, FakeCase};
    use std::collections::HashSet;

    #[derive(Default)]
    struct Collect(Vec<(String, Cell, bool)>);
    impl Sink for Collect {
        fn cell(&mut self, case: &Case, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()> {
            self.0.push((case.label(), cell, outcome.result.is_ok()));
            Ok(())
        }
    }

    fn plan(behaviours: &[FakeBehaviour], repetitions: u32, warmup_cell: bool) -> Plan {
        Plan {
            cases: behaviours
                .iter()
                .enumerate()
                .map(|(index, &behaviour)| Case::Fake(FakeCase { index, behaviour }))
                .collect(),
            repetitions,
            shuffle: false,
            seed: 0,
            warmup_cell,
            name: None,
            interface: "lo".into(),
        }
    }

    fn run(plan: &Plan, stop: Stop, sinks: &mut [&mut dyn Sink], calls: &mut usize) -> RunEnd {
        let cells = plan.cells(&HashSet::new());
        let mut execute = |case: &Case, stop: Stop| {
            *calls += 1;
            crate::sweep::execute_case(case, stop)
        };
        run_plan(plan, &cells, &mut execute, sinks, stop, &Progress::hidden(cells.len())).unwrap()
    }

    #[test]
    fn failures_are_recorded_and_the_run_goes_on() {
        let plan = plan(&[FakeBehaviour::Ok { value: 1 }, FakeBehaviour::Fail], 2, true);
        let mut sink = Collect::default();
        let mut calls = 0;
        let end = run(&plan, Stop::fresh(), &mut [&mut sink], &mut calls);
        assert_eq!(calls, 5, "one warm-up plus four cells");
        assert_eq!((end.recorded, end.failed, end.interrupted), (4, 2, false));
        assert_eq!(sink.0.iter().filter(|r| !r.2).count(), 2);
    }

    #[test]
    fn a_panicking_cell_is_a_failed_cell() {
        let plan = plan(&[FakeBehaviour::Panic, FakeBehaviour::Ok { value: 2 }], 1, false);
        let mut sink = Collect::default();
        let end = run(&plan, Stop::fresh(), &mut [&mut sink], &mut 0);
        assert_eq!((end.recorded, end.failed), (2, 1));
        assert!(!sink.0[0].2 && sink.0[1].2);
    }

    #[test]
    fn every_sink_gets_every_cell() {
        let plan = plan(&[FakeBehaviour::Ok { value: 1 }, FakeBehaviour::Fail], 2, false);
        let (mut a, mut b) = (Collect::default(), Collect::default());
        run(&plan, Stop::fresh(), &mut [&mut a, &mut b], &mut 0);
        assert_eq!(a.0.len(), 4);
        assert_eq!(a.0, b.0);
    }

    #[test]
    fn a_stop_discards_the_cell_in_flight_and_ends_the_run() {
        let plan = plan(
            &[FakeBehaviour::Ok { value: 1 }, FakeBehaviour::Sleep { ms: 30_000 }],
            3,
            false,
        );
        let stop = Stop::fresh();
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            stop.request();
        });
        let mut sink = Collect::default();
        let started = Instant::now();
        let end = run(&plan, stop, &mut [&mut sink], &mut 0);
        stopper.join().unwrap();
        assert!(started.elapsed().as_secs_f64() < 5.0);
        assert!(end.interrupted);
        assert_eq!(end.recorded, 1, "only the first cell finished");
        assert_eq!(sink.0.len(), 1);
        assert_eq!(end.cut_short.as_deref(), Some("fake#1 sleep:30000ms rep 0"));
    }

    #[test]
    fn a_stop_before_the_first_cell_runs_nothing() {
        let plan = plan(&[FakeBehaviour::Ok { value: 1 }], 2, false);
        let stop = Stop::fresh();
        stop.request();
        let mut calls = 0;
        let end = run(&plan, stop, &mut [], &mut calls);
        assert_eq!((calls, end.recorded, end.interrupted), (0, 0, true));
    }

    #[test]
    fn a_sink_error_ends_the_run_with_it() {
        struct Broken;
        impl Sink for Broken {
            fn cell(&mut self, _: &Case, _: Cell, _: &CellOutcome) -> anyhow::Result<()> {
                anyhow::bail!("disk full")
            }
        }
        let plan = plan(&[FakeBehaviour::Ok { value: 1 }], 2, false);
        let cells = plan.cells(&HashSet::new());
        let err = run_plan(
            &plan,
            &cells,
            &mut |c: &Case, s: Stop| crate::sweep::execute_case(c, s),
            &mut [&mut Broken],
            Stop::fresh(),
            &Progress::hidden(2),
        )
        .unwrap_err();
        assert!(err.to_string().contains("disk full"));
    }
}
