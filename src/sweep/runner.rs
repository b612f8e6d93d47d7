//! The one runner: an optional warm-up cell, then every cell in order, each outcome handed to
//! every sink the moment it exists (hyperfine writes results after each benchmark).
//!
//! Stop semantics live here: when a stop is requested the cell in flight is cut short, so it is
//! discarded — never printed, exported or stored — and the run ends as interrupted. A failing
//! or panicking cell is recorded as failed and the run goes on.
//!
//! The runner knows no terminal and no database: what a run shows or keeps is a [`Sink`], and
//! every sink sees the same lifecycle — `begin`, then per cell `cell_started` and (unless the
//! cell was cut short) `cell_finished`, and `finish` exactly once, however the run ends.

use super::plan::{Cell, Plan};
use crate::case::Case;
use crate::observation::Observation;
use crate::stop::{Interrupted, Stop};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Instant;

/// What running one cell gave: an observation or the workload's error text.
#[derive(Debug, Clone)]
pub struct CellOutcome {
    pub result: Result<Observation, String>,
    pub elapsed_s: f64,
}

/// Where a run goes: the results database, the progress on stderr, the live view, the
/// printers. A sink only receives; it never measures. The runner calls, on every sink in the
/// order given: [`begin`](Sink::begin) once; for the warm-up cell
/// [`warmup_started`](Sink::warmup_started); for each cell [`cell_started`](Sink::cell_started)
/// and, when the cell was not cut short by a stop, [`cell_finished`](Sink::cell_finished); and
/// [`finish`](Sink::finish) once on every exit path — complete, interrupted, after a sink's
/// error or a sink's panic — even when `begin` failed. Every method but `cell_finished` does
/// nothing unless a sink has something to do.
pub trait Sink {
    /// The run starts: `cells` of `plan` run (fewer than the plan's when a run is resumed).
    fn begin(&mut self, _plan: &Plan, _cells: &[Cell]) -> anyhow::Result<()> {
        Ok(())
    }
    /// The discarded warm-up cell (`--warmup-cell`: the first cell's case once more) starts.
    fn warmup_started(&mut self, _case: &Case) -> anyhow::Result<()> {
        Ok(())
    }
    /// `cell` of `case` starts.
    fn cell_started(&mut self, _case: &Case, _cell: Cell) -> anyhow::Result<()> {
        Ok(())
    }
    /// `cell` of `case` gave `outcome` (successful or failed); a cell cut short never comes.
    fn cell_finished(&mut self, case: &Case, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()>;
    /// The run ended as `end` says. Called once, on every sink, whatever came before.
    fn finish(&mut self, _end: &RunEnd) -> anyhow::Result<()> {
        Ok(())
    }
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
    /// The run ended early on a sink's error (or panic): its text. `run_plan` returns that
    /// error after every sink has finished.
    pub error: Option<String>,
}

impl RunEnd {
    /// Every cell ran and every sink took it: the run is complete.
    pub fn complete(&self) -> bool {
        !self.interrupted && self.error.is_none()
    }
}

/// Run one case, turning a panic into an error so one bad cell cannot end the run.
fn execute_guarded(
    execute: &mut dyn FnMut(&Case, Stop) -> anyhow::Result<Observation>,
    case: &Case,
    stop: Stop,
) -> anyhow::Result<Observation> {
    match catch_unwind(AssertUnwindSafe(|| execute(case, stop))) {
        Ok(result) => result,
        Err(payload) => Err(anyhow::anyhow!("the workload panicked: {}", panic_text(&*payload))),
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

/// Run `cells` of `plan` with `execute`, handing each outcome to every sink. An error from a
/// sink (the database) ends the run with that error; an error from the workload is recorded
/// and the run goes on. Every sink's `finish` runs before this returns, whatever happened
/// (a sink's panic is carried on after them).
pub fn run_plan(
    plan: &Plan,
    cells: &[Cell],
    execute: &mut dyn FnMut(&Case, Stop) -> anyhow::Result<Observation>,
    sinks: &mut [&mut dyn Sink],
    stop: Stop,
) -> anyhow::Result<RunEnd> {
    let mut end = RunEnd::default();
    let ran = catch_unwind(AssertUnwindSafe(|| {
        run_cells(plan, cells, execute, sinks, stop, &mut end)
    }));
    let (mut error, panic) = match ran {
        Ok(Ok(())) => (None, None),
        Ok(Err(e)) => (Some(e), None),
        Err(payload) => {
            end.error = Some(format!("a sink panicked: {}", panic_text(&*payload)));
            (None, Some(payload))
        }
    };
    if let Some(e) = &error {
        end.error = Some(crate::format::error_text(e));
    }
    for sink in sinks.iter_mut() {
        if let Err(e) = sink.finish(&end) {
            error.get_or_insert(e);
        }
    }
    if let Some(payload) = panic {
        resume_unwind(payload);
    }
    match error {
        Some(e) => Err(e),
        None => Ok(end),
    }
}

/// The run between `begin` and `finish`; its error ends the run.
fn run_cells(
    plan: &Plan,
    cells: &[Cell],
    execute: &mut dyn FnMut(&Case, Stop) -> anyhow::Result<Observation>,
    sinks: &mut [&mut dyn Sink],
    stop: Stop,
    end: &mut RunEnd,
) -> anyhow::Result<()> {
    for sink in sinks.iter_mut() {
        sink.begin(plan, cells)?;
    }
    if plan.warmup_cell {
        if let Some(first) = cells.first().and_then(|c| plan.cases.get(c.position)) {
            for sink in sinks.iter_mut() {
                sink.warmup_started(first)?;
            }
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
        for sink in sinks.iter_mut() {
            sink.cell_started(case, cell)?;
        }
        let started = Instant::now();
        let result = execute_guarded(execute, case, stop);
        let cut_short = result
            .as_ref()
            .err()
            .is_some_and(|e| e.downcast_ref::<Interrupted>().is_some());
        if stop.requested() || cut_short {
            end.interrupted = true;
            end.cut_short = Some(format!("{} rep {}", case.label(), cell.repetition));
            break;
        }
        let outcome = CellOutcome {
            result: result.map_err(|e| crate::format::error_text(&e)),
            elapsed_s: started.elapsed().as_secs_f64(),
        };
        if outcome.result.is_err() {
            end.failed += 1;
        }
        for sink in sinks.iter_mut() {
            sink.cell_finished(case, cell, &outcome)?;
        }
        end.recorded += 1;
    }
    Ok(())
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{FakeBehaviour, FakeCase};
    use std::collections::HashSet;

    #[derive(Default)]
    struct Collect(Vec<(String, Cell, bool)>);
    impl Sink for Collect {
        fn cell_finished(&mut self, case: &Case, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()> {
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
            credentials: Default::default(),
        }
    }

    fn run(plan: &Plan, stop: Stop, sinks: &mut [&mut dyn Sink], calls: &mut usize) -> RunEnd {
        let cells = plan.cells(&HashSet::new());
        let mut execute = |case: &Case, stop: Stop| {
            *calls += 1;
            crate::sweep::execute_case(case, stop, &Default::default())
        };
        run_plan(plan, &cells, &mut execute, sinks, stop).unwrap()
    }

    /// A cell that finishes, then one that would sleep 30 s, with a stop requested 100 ms into
    /// the run: the second cell is the one a stop cuts short.
    fn run_stopped_in_a_sleep(repetitions: u32, sinks: &mut [&mut dyn Sink]) -> RunEnd {
        let plan = plan(
            &[FakeBehaviour::Ok { value: 1 }, FakeBehaviour::Sleep { ms: 30_000 }],
            repetitions,
            false,
        );
        let stop = Stop::fresh();
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            stop.request();
        });
        let end = run(&plan, stop, sinks, &mut 0);
        stopper.join().unwrap();
        end
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
        let mut sink = Collect::default();
        let started = Instant::now();
        let end = run_stopped_in_a_sleep(3, &mut [&mut sink]);
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
            fn cell_finished(&mut self, _: &Case, _: Cell, _: &CellOutcome) -> anyhow::Result<()> {
                anyhow::bail!("disk full")
            }
        }
        let plan = plan(&[FakeBehaviour::Ok { value: 1 }], 2, false);
        let cells = plan.cells(&HashSet::new());
        let err = run_plan(
            &plan,
            &cells,
            &mut |c: &Case, s: Stop| crate::sweep::execute_case(c, s, &Default::default()),
            &mut [&mut Broken],
            Stop::fresh(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("disk full"));
    }

    /// Every lifecycle call a sink gets, as text, in order.
    #[derive(Default)]
    struct Log {
        events: Vec<String>,
        /// Fail `cell_finished` from this call on (counted from 1).
        fail_at: Option<usize>,
        fail_begin: bool,
        panic_at: Option<usize>,
        finished: usize,
    }

    impl Sink for Log {
        fn begin(&mut self, plan: &Plan, cells: &[Cell]) -> anyhow::Result<()> {
            self.events
                .push(format!("begin {} cases {} cells", plan.cases.len(), cells.len()));
            if self.fail_begin {
                anyhow::bail!("cannot begin");
            }
            Ok(())
        }
        fn warmup_started(&mut self, case: &Case) -> anyhow::Result<()> {
            self.events.push(format!("warm-up {}", case.label()));
            Ok(())
        }
        fn cell_started(&mut self, case: &Case, cell: Cell) -> anyhow::Result<()> {
            self.events
                .push(format!("start {} rep {}", case.label(), cell.repetition));
            Ok(())
        }
        fn cell_finished(&mut self, case: &Case, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()> {
            self.finished += 1;
            let verdict = if outcome.result.is_ok() { "ok" } else { "failed" };
            self.events
                .push(format!("done {} rep {} {verdict}", case.label(), cell.repetition));
            if self.panic_at == Some(self.finished) {
                panic!("sink panic");
            }
            if self.fail_at.is_some_and(|n| self.finished >= n) {
                anyhow::bail!("sink failure");
            }
            Ok(())
        }
        fn finish(&mut self, end: &RunEnd) -> anyhow::Result<()> {
            self.events.push(format!(
                "finish recorded {} failed {} interrupted {} error {}",
                end.recorded,
                end.failed,
                end.interrupted,
                end.error.as_deref().unwrap_or("-")
            ));
            Ok(())
        }
    }

    #[test]
    fn every_sink_gets_the_lifecycle_in_order() {
        let plan = plan(&[FakeBehaviour::Ok { value: 1 }, FakeBehaviour::Fail], 1, true);
        let (mut a, mut b) = (Log::default(), Log::default());
        run(&plan, Stop::fresh(), &mut [&mut a, &mut b], &mut 0);
        assert_eq!(
            a.events,
            [
                "begin 2 cases 2 cells",
                "warm-up fake#0 ok:1",
                "start fake#0 ok:1 rep 0",
                "done fake#0 ok:1 rep 0 ok",
                "start fake#1 fail rep 0",
                "done fake#1 fail rep 0 failed",
                "finish recorded 2 failed 1 interrupted false error -",
            ]
        );
        assert_eq!(a.events, b.events);
    }

    #[test]
    fn finish_comes_after_an_interrupted_cell() {
        let mut log = Log::default();
        let end = run_stopped_in_a_sleep(1, &mut [&mut log]);
        assert!(end.interrupted && !end.complete());
        assert_eq!(
            log.events,
            [
                "begin 2 cases 2 cells",
                "start fake#0 ok:1 rep 0",
                "done fake#0 ok:1 rep 0 ok",
                "start fake#1 sleep:30000ms rep 0",
                "finish recorded 1 failed 0 interrupted true error -",
            ],
            "the cut-short cell started but never finished; the run did"
        );
    }

    #[test]
    fn finish_comes_after_a_panicking_cell() {
        let plan = plan(&[FakeBehaviour::Panic], 1, false);
        let mut log = Log::default();
        let end = run(&plan, Stop::fresh(), &mut [&mut log], &mut 0);
        assert!(
            end.complete(),
            "a panicking cell is a failed cell, not the end of the run"
        );
        assert_eq!(
            log.events,
            [
                "begin 1 cases 1 cells",
                "start fake#0 panic rep 0",
                "done fake#0 panic rep 0 failed",
                "finish recorded 1 failed 1 interrupted false error -",
            ]
        );
    }

    #[test]
    fn every_sink_finishes_after_a_sink_error() {
        let plan = plan(&[FakeBehaviour::Ok { value: 1 }], 3, false);
        let cells = plan.cells(&HashSet::new());
        let mut broken = Log {
            fail_at: Some(2),
            ..Log::default()
        };
        let mut after = Log::default();
        let err = run_plan(
            &plan,
            &cells,
            &mut |c: &Case, s: Stop| crate::sweep::execute_case(c, s, &Default::default()),
            &mut [&mut broken, &mut after],
            Stop::fresh(),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "sink failure");
        let last = "finish recorded 1 failed 0 interrupted false error sink failure";
        assert_eq!(broken.events.last().map(String::as_str), Some(last));
        assert_eq!(after.events.last().map(String::as_str), Some(last));
        assert_eq!(after.finished, 1, "the run stopped at the failing cell");

        // A sink that cannot begin: nothing runs, and every sink still finishes.
        let mut refuses = Log {
            fail_begin: true,
            ..Log::default()
        };
        let mut other = Log::default();
        let mut calls = 0;
        let err = run_plan(
            &plan,
            &cells,
            &mut |c: &Case, s: Stop| {
                calls += 1;
                crate::sweep::execute_case(c, s, &Default::default())
            },
            &mut [&mut other, &mut refuses],
            Stop::fresh(),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "cannot begin");
        assert_eq!(calls, 0);
        let last = "finish recorded 0 failed 0 interrupted false error cannot begin";
        assert_eq!(other.events, ["begin 1 cases 3 cells", last]);
        assert_eq!(refuses.events, ["begin 1 cases 3 cells", last]);
    }

    #[test]
    fn a_panicking_sink_still_lets_every_sink_finish() {
        let plan = plan(&[FakeBehaviour::Ok { value: 1 }], 2, false);
        let cells = plan.cells(&HashSet::new());
        let mut panics = Log {
            panic_at: Some(1),
            ..Log::default()
        };
        let mut other = Log::default();
        let unwound = catch_unwind(AssertUnwindSafe(|| {
            run_plan(
                &plan,
                &cells,
                &mut |c: &Case, s: Stop| crate::sweep::execute_case(c, s, &Default::default()),
                &mut [&mut other, &mut panics],
                Stop::fresh(),
            )
        }));
        assert!(unwound.is_err(), "the sink's panic goes on after the sinks finished");
        let last = "finish recorded 0 failed 0 interrupted false error a sink panicked: sink panic";
        assert_eq!(other.events.last().map(String::as_str), Some(last));
        assert_eq!(panics.events.last().map(String::as_str), Some(last));
    }
}
