//! The pairs of one round that measure at the same time. The runner asks for one cell at a
//! time; when it asks for a fleet cell that has not run yet, [`Batches`] starts that cell and
//! the cells that follow it in the run's order — same repetition, same round, hosts disjoint,
//! at most the cell's `concurrent_pairs` — each on a thread of its own, joins every thread,
//! and keeps the others' outcomes for the runner's next calls. So the runner stays the one loop
//! that hands cells to the sinks (the store commits each as before), and a resumed run batches
//! only the cells it is missing.

use crate::case::{Case, FleetCase};
use crate::observation::{Metric, Observation, Role};
use crate::stop::Stop;
use std::collections::{HashMap, HashSet};

/// How many pairs actually measured at the same time as this cell (itself included); the
/// case's `concurrent_pairs` is the number planned, fewer when a resumed run misses some.
pub const CONCURRENT_PAIRS_METRIC: &str = "fleet_concurrent_pairs";

/// Measures one pair (the agent client call, or a test's stand-in).
pub type PairRun<'a> = dyn Fn(&FleetCase, Stop) -> anyhow::Result<Observation> + Sync + 'a;

/// The batching state of one run: its cases, the cells it runs in order, how far the runner
/// got, and the outcomes measured ahead of the runner.
pub struct Batches<'a> {
    cases: &'a [Case],
    cells: Vec<(usize, u32)>,
    cursor: usize,
    ready: HashMap<(usize, u32), anyhow::Result<Observation>>,
}

impl<'a> Batches<'a> {
    /// `cells`: (position in `cases`, repetition), in the order the runner runs them.
    pub fn new(cases: &'a [Case], cells: impl IntoIterator<Item = (usize, u32)>) -> Batches<'a> {
        Batches {
            cases,
            cells: cells.into_iter().collect(),
            cursor: 0,
            ready: HashMap::new(),
        }
    }

    fn fleet_at(&self, i: usize) -> Option<&'a FleetCase> {
        let cases: &'a [Case] = self.cases;
        cases.get(self.cells[i].0).and_then(|c| c.get::<FleetCase>())
    }

    /// The outcome of `case`, the runner's next cell: measured now with its batch, or kept
    /// from the batch it was measured in. A case that is not among the cells still to run
    /// (the warm-up cell) is measured alone.
    pub fn execute(&mut self, case: &FleetCase, stop: Stop, run: &PairRun) -> anyhow::Result<Observation> {
        let Some(i) = (self.cursor..self.cells.len()).find(|&i| self.fleet_at(i) == Some(case)) else {
            return measure(&[case], stop, run).pop().expect("one outcome for one pair");
        };
        self.cursor = i + 1;
        if let Some(outcome) = self.ready.remove(&self.cells[i]) {
            return outcome;
        }
        let repetition = self.cells[i].1;
        let cap = case.concurrent_pairs.max(1) as usize;
        let mut batch = vec![i];
        let (mut sources, mut destinations): (HashSet<&str>, HashSet<&str>) =
            ([case.source.as_str()].into(), [case.destination.as_str()].into());
        for j in i + 1..self.cells.len() {
            if batch.len() >= cap {
                break;
            }
            let Some(other) = self.fleet_at(j) else { break };
            if self.cells[j].1 != repetition || other.round != case.round || !super::same_network_case(case, other) {
                break;
            }
            // Pairs of a round are disjoint by construction but for an incast's centre, the
            // one destination they share (`schedule::pack_incast`); a stored run that says
            // otherwise (edited by hand) measures the overlapping pair in a later batch.
            let (s, d) = (other.source.as_str(), other.destination.as_str());
            let shares_a_centre = destinations.contains(d) && d == case.destination;
            if sources.contains(s)
                || destinations.contains(s)
                || sources.contains(d)
                || (destinations.contains(d) && !shares_a_centre)
            {
                continue;
            }
            sources.insert(s);
            destinations.insert(d);
            batch.push(j);
        }
        let pairs: Vec<&FleetCase> = batch.iter().filter_map(|&j| self.fleet_at(j)).collect();
        let mut outcomes = measure(&pairs, stop, run);
        let first = outcomes.remove(0);
        for (&j, outcome) in batch[1..].iter().zip(outcomes) {
            self.ready.insert(self.cells[j], outcome);
        }
        first
    }
}

/// Measure `pairs` at the same time, a thread each, all joined; every successful observation
/// says how many ran at once ([`CONCURRENT_PAIRS_METRIC`]).
fn measure(pairs: &[&FleetCase], stop: Stop, run: &PairRun) -> Vec<anyhow::Result<Observation>> {
    let at_once = pairs.len() as f64;
    let outcomes: Vec<anyhow::Result<Observation>> = std::thread::scope(|scope| {
        let threads: Vec<_> = pairs
            .iter()
            .map(|&pair| {
                std::thread::Builder::new()
                    .name("fleet-pair".into())
                    .spawn_scoped(scope, move || run(pair, stop))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| match t {
                Ok(handle) => handle.join().unwrap_or_else(|payload| {
                    let text = payload
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| payload.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "no message".into());
                    Err(anyhow::anyhow!("the pair's thread panicked: {text}"))
                }),
                Err(e) => Err(anyhow::anyhow!("cannot start a thread for the pair: {e}")),
            })
            .collect()
    });
    outcomes
        .into_iter()
        .map(|o| {
            o.map(|mut obs| {
                obs.push(Metric::tool(CONCURRENT_PAIRS_METRIC, Role::System, at_once, "pairs"));
                obs
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{FakeBehaviour, FakeCase};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    fn cell(source: &str, destination: &str, round: u32, concurrent_pairs: u32) -> Case {
        Case::Fleet(FleetCase {
            source: source.into(),
            destination: destination.into(),
            round,
            concurrent_pairs,
            case: Box::new(Case::Fake(FakeCase {
                index: 0,
                behaviour: FakeBehaviour::Ok { value: 1 },
            })),
        })
    }

    fn fleet(case: &Case) -> &FleetCase {
        case.get::<FleetCase>().unwrap()
    }

    /// Round 1 has three pairs with K = 2: a batch of two that must be running at the same
    /// time (each waits until both have started; run one after the other, the first would
    /// wait until its 60 s time-out fails the test), then one alone; round 2 one pair. Each pair measured exactly once, in batches
    /// the runner's order gives, every outcome with the number that ran at once.
    #[test]
    fn a_batch_runs_its_pairs_at_once_and_hands_them_out_in_order() {
        let cases = vec![
            cell("a:1", "b:1", 1, 2),
            cell("c:1", "d:1", 1, 2),
            cell("e:1", "f:1", 1, 1),
            cell("b:1", "a:1", 2, 1),
        ];
        let cells: Vec<(usize, u32)> = (0..4).map(|p| (p, 0)).collect();
        let mut batches = Batches::new(&cases, cells);
        let calls = Mutex::new(Vec::new());
        let arrived = AtomicUsize::new(0);
        let run = |c: &FleetCase, _stop: Stop| -> anyhow::Result<Observation> {
            calls.lock().unwrap().push(c.source.clone());
            if c.round == 1 && c.concurrent_pairs == 2 {
                arrived.fetch_add(1, Ordering::SeqCst);
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                while arrived.load(Ordering::SeqCst) < 2 {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "the batch's pairs did not run at once"
                    );
                    std::thread::yield_now();
                }
            }
            if c.source == "e:1" {
                anyhow::bail!("agent e:1 did not answer");
            }
            Ok(Observation::default())
        };
        let stop = Stop::fresh();
        let first = batches.execute(fleet(&cases[0]), stop, &run).unwrap();
        assert_eq!(first.value(CONCURRENT_PAIRS_METRIC, Role::System), Some(2.0));
        assert_eq!(calls.lock().unwrap().len(), 2, "the batch ran both pairs");
        let second = batches.execute(fleet(&cases[1]), stop, &run).unwrap();
        assert_eq!(second.value(CONCURRENT_PAIRS_METRIC, Role::System), Some(2.0));
        assert_eq!(calls.lock().unwrap().len(), 2, "the second came from the batch");
        let third = batches.execute(fleet(&cases[2]), stop, &run).unwrap_err();
        assert!(third.to_string().contains("did not answer"), "only its own cell fails");
        let fourth = batches.execute(fleet(&cases[3]), stop, &run).unwrap();
        assert_eq!(fourth.value(CONCURRENT_PAIRS_METRIC, Role::System), Some(1.0));
        let mut ran = calls.lock().unwrap().clone();
        ran.sort();
        assert_eq!(ran, ["a:1", "b:1", "c:1", "e:1"]);
    }

    /// An incast round's pairs share their destination and run together; a pair that would
    /// make a host both a source and a destination, or share a destination outside an incast,
    /// waits for a batch of its own.
    #[test]
    fn an_incasts_pairs_share_their_centre_and_nothing_else() {
        let cases = vec![
            cell("b:1", "a:1", 1, 3),
            cell("c:1", "a:1", 1, 3),
            cell("a:1", "d:1", 1, 3),
            cell("d:1", "a:1", 1, 3),
        ];
        let cells: Vec<(usize, u32)> = (0..4).map(|p| (p, 0)).collect();
        let mut batches = Batches::new(&cases, cells);
        let run = |_: &FleetCase, _stop: Stop| -> anyhow::Result<Observation> { Ok(Observation::default()) };
        let stop = Stop::fresh();
        let first = batches.execute(fleet(&cases[0]), stop, &run).unwrap();
        assert_eq!(first.value(CONCURRENT_PAIRS_METRIC, Role::System), Some(3.0));
        let at_once: Vec<Option<f64>> = (1..4)
            .map(|i| {
                batches
                    .execute(fleet(&cases[i]), stop, &run)
                    .unwrap()
                    .value(CONCURRENT_PAIRS_METRIC, Role::System)
            })
            .collect();
        // b, c and d into a together; a into d (a is their centre) alone.
        assert_eq!(at_once, [Some(3.0), Some(1.0), Some(3.0)]);
    }

    /// A resumed run misses the first cell of a batch: the batch is what is left of the round,
    /// never a pair twice, never two repetitions together, never two pairs sharing a host.
    #[test]
    fn a_resumed_run_batches_only_what_is_missing() {
        let cases = vec![
            cell("a:1", "b:1", 1, 3),
            cell("c:1", "d:1", 1, 3),
            cell("a:1", "e:1", 1, 3), // shares a:1 with the first: never beside it
        ];
        // Repetition 0 of case 1 is stored already; then repetition 1 of all three.
        let cells = vec![(0, 0), (2, 0), (0, 1), (1, 1), (2, 1)];
        let mut batches = Batches::new(&cases, cells);
        let sizes = Mutex::new(Vec::new());
        let run = |c: &FleetCase, _stop: Stop| -> anyhow::Result<Observation> {
            sizes.lock().unwrap().push(c.source.clone() + ">" + &c.destination);
            Ok(Observation::default())
        };
        let stop = Stop::fresh();
        let at_once = |o: anyhow::Result<Observation>| o.unwrap().value(CONCURRENT_PAIRS_METRIC, Role::System);
        assert_eq!(at_once(batches.execute(fleet(&cases[0]), stop, &run)), Some(1.0));
        assert_eq!(at_once(batches.execute(fleet(&cases[2]), stop, &run)), Some(1.0));
        assert_eq!(at_once(batches.execute(fleet(&cases[0]), stop, &run)), Some(2.0));
        assert_eq!(at_once(batches.execute(fleet(&cases[1]), stop, &run)), Some(2.0));
        assert_eq!(at_once(batches.execute(fleet(&cases[2]), stop, &run)), Some(1.0));
        assert_eq!(sizes.lock().unwrap().len(), 5, "every cell measured once");
    }

    /// The cells `fleet run` plans (each network case aimed at its own destination, so no two
    /// pairs' cases are equal) batch as planned: K pairs of a round at once.
    #[test]
    fn planned_cells_of_a_network_case_batch_k_at_a_time() {
        let hosts: Vec<String> = (1..=4).map(|i| format!("10.9.0.{i}:7000")).collect();
        let rounds = crate::fleet::rounds(&crate::fleet::hosts::PairSpec::All, &hosts, 3, 1).unwrap();
        let cases = crate::fleet::cells(&hosts, &rounds, 2, &[crate::fleet::tests::rr_case()]).unwrap();
        assert_eq!(cases.len(), 12);
        let mut batches = Batches::new(&cases, (0..cases.len()).map(|p| (p, 0)));
        let run = |_: &FleetCase, _stop: Stop| -> anyhow::Result<Observation> { Ok(Observation::default()) };
        for case in &cases {
            let outcome = batches.execute(fleet(case), Stop::fresh(), &run).unwrap();
            assert_eq!(
                outcome.value(CONCURRENT_PAIRS_METRIC, Role::System),
                Some(2.0),
                "{}",
                case.label()
            );
        }
    }

    #[test]
    fn a_panicking_pair_fails_only_its_cell() {
        let cases = vec![cell("a:1", "b:1", 1, 2), cell("c:1", "d:1", 1, 2)];
        let mut batches = Batches::new(&cases, [(0, 0), (1, 0)]);
        let run = |c: &FleetCase, _stop: Stop| -> anyhow::Result<Observation> {
            if c.source == "c:1" {
                panic!("boom");
            }
            Ok(Observation::default())
        };
        let stop = Stop::fresh();
        assert!(batches.execute(fleet(&cases[0]), stop, &run).is_ok());
        let err = batches.execute(fleet(&cases[1]), stop, &run).unwrap_err();
        assert!(err.to_string().contains("panicked: boom"), "{err}");
    }
}
