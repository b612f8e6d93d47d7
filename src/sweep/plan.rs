//! What a run is made of: the validated [`Plan`] (a grid of cases and how to repeat them), and
//! which cells it runs in what order.

use crate::case::Case;
use crate::net::auth::Credentials;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::collections::HashSet;

/// One unit of work: a case (by its position in the run's case list) and a repetition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cell {
    pub position: usize,
    pub repetition: u32,
}

/// Everything a run needs before its first cell: every direct command and every sweep is
/// turned into one of these by its flags' validation, then executed by the one runner.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub cases: Vec<Case>,
    /// Repetitions of every case (at least 1).
    pub repetitions: u32,
    /// Run the cells in a random order fixed by `seed`.
    pub shuffle: bool,
    pub seed: u64,
    /// Run the first cell's case once before the run and discard it.
    pub warmup_cell: bool,
    /// A name for the run, shown by `iopath runs` and in the report.
    pub name: Option<String>,
    /// The interface the traffic uses, for the environment recorded with the run.
    pub interface: String,
    /// What the run's network clients prove themselves with (never stored).
    pub credentials: Credentials,
}

impl Plan {
    /// This plan, its network clients proving themselves with `credentials`.
    pub fn with_credentials(self, credentials: Credentials) -> Plan {
        Plan { credentials, ..self }
    }

    /// The cells still to run when `done` are stored already.
    pub fn cells(&self, done: &HashSet<Cell>) -> Vec<Cell> {
        order_cells(self.cases.len(), self.repetitions, done, self.shuffle, self.seed)
    }

    /// Roughly how long `cells` take, for the progress bar's first estimate.
    pub fn planned_seconds(&self, cells: &[Cell]) -> f64 {
        cells
            .iter()
            .filter_map(|c| self.cases.get(c.position))
            .map(Case::planned_seconds)
            .sum()
    }

    /// About how long running `cells` takes, announced before the first: every cell's window,
    /// warm-up and set-up, plus the warm-up cell (the first cell's case once more). Micro
    /// benchmarks' cells take a time not known in advance; they are counted, not guessed.
    pub fn estimate(&self, cells: &[Cell]) -> Estimate {
        let cases: Vec<&Case> = cells.iter().filter_map(|c| self.cases.get(c.position)).collect();
        let warmup = self.warmup_cell.then(|| cases.first().copied()).flatten();
        let unknown = |c: &Case| !c.as_workload().duration_known();
        Estimate {
            seconds: cases
                .iter()
                .chain(warmup.iter())
                .filter(|c| !unknown(c))
                .map(|c| c.planned_seconds())
                .sum(),
            unknown_cells: cases.iter().filter(|c| unknown(c)).count(),
            warmup_cell: warmup.is_some(),
        }
    }
}

/// How long a plan's cells take, as far as is known before they run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// The cells of known length and the warm-up cell.
    pub seconds: f64,
    /// Cells whose length is not known in advance (micro benchmarks).
    pub unknown_cells: usize,
    /// A warm-up cell runs first and is discarded.
    pub warmup_cell: bool,
}

/// The cells still to run, repetition-major (every case once, then every case again) so that
/// slow drift of the machine spreads over all cases instead of hitting the last ones; with
/// `shuffle` in a random order fixed by `seed` (the same seed gives the same order on resume).
pub fn order_cells(cases: usize, repetitions: u32, done: &HashSet<Cell>, shuffle: bool, seed: u64) -> Vec<Cell> {
    let mut cells: Vec<Cell> = (0..repetitions)
        .flat_map(|repetition| (0..cases).map(move |position| Cell { position, repetition }))
        .collect();
    if shuffle {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        cells.shuffle(&mut rng);
    }
    cells.retain(|c| !done.contains(c));
    cells
}

/// The cells of an A/B plan (`iopath ab`): its first half of cases is variant A, the second
/// half the same cases as variant B; the pairs (case i and case half+i, one repetition) run
/// one after the other, repetition-major, each pair's two cells in the order ABBA gives
/// (alternating from pair to pair, so neither variant always runs first) or, with `shuffle`, a
/// coin thrown by a generator seeded with `seed`.
pub fn ab_cells(plan: &Plan, done: &HashSet<Cell>) -> Vec<Cell> {
    use rand::RngExt;
    let half = plan.cases.len() / 2;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(plan.seed);
    let mut cells = Vec::with_capacity(plan.cases.len() * plan.repetitions as usize);
    for repetition in 0..plan.repetitions {
        for i in 0..half {
            let pair_index = repetition as usize * half + i;
            let b_first = if plan.shuffle {
                rng.random_bool(0.5)
            } else {
                pair_index % 2 == 1
            };
            let (a, b) = (
                Cell {
                    position: i,
                    repetition,
                },
                Cell {
                    position: half + i,
                    repetition,
                },
            );
            cells.extend(if b_first { [b, a] } else { [a, b] });
        }
    }
    cells.retain(|c| !done.contains(c));
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ab_pairs_run_together_in_abba_order() {
        use crate::case::{FakeBehaviour, FakeCase};
        let fake = |index| {
            Case::Fake(FakeCase {
                index,
                behaviour: FakeBehaviour::Sleep { ms: 1 },
            })
        };
        let mut plan = Plan {
            cases: vec![fake(0), fake(1), fake(0), fake(1)],
            repetitions: 2,
            shuffle: false,
            seed: 5,
            warmup_cell: false,
            name: None,
            interface: "lo".into(),
            credentials: Credentials::default(),
        };
        let order: Vec<usize> = ab_cells(&plan, &HashSet::new()).iter().map(|c| c.position).collect();
        assert_eq!(order, vec![0, 2, 3, 1, 0, 2, 3, 1]);
        plan.shuffle = true;
        let random = ab_cells(&plan, &HashSet::new());
        assert_eq!(random, ab_cells(&plan, &HashSet::new()), "the seed fixes the order");
        for pair in random.chunks(2) {
            assert_eq!(pair[0].repetition, pair[1].repetition);
            assert_eq!(pair[0].position % 2, pair[1].position % 2, "one case, both variants");
        }
    }

    #[test]
    fn repetition_major_order() {
        let cells = order_cells(2, 2, &HashSet::new(), false, 0);
        let pairs: Vec<(usize, u32)> = cells.iter().map(|c| (c.position, c.repetition)).collect();
        assert_eq!(pairs, vec![(0, 0), (1, 0), (0, 1), (1, 1)]);
    }

    #[test]
    fn shuffle_is_a_permutation_fixed_by_the_seed() {
        let a = order_cells(10, 3, &HashSet::new(), true, 7);
        let b = order_cells(10, 3, &HashSet::new(), true, 7);
        assert_eq!(a, b);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, {
            let mut all = order_cells(10, 3, &HashSet::new(), false, 0);
            all.sort();
            all
        });
        assert_ne!(
            a,
            order_cells(10, 3, &HashSet::new(), false, 0),
            "30 cells shuffled stay in order"
        );
    }

    #[test]
    fn the_estimate_counts_the_warm_up_cell_and_leaves_micro_unknown() {
        use crate::case::{FakeBehaviour, FakeCase};
        let fake = |index, ms| {
            Case::Fake(FakeCase {
                index,
                behaviour: FakeBehaviour::Sleep { ms },
            })
        };
        let mut plan = Plan {
            cases: vec![fake(0, 2000), fake(1, 500)],
            repetitions: 3,
            shuffle: false,
            seed: 0,
            warmup_cell: false,
            name: None,
            interface: "lo".into(),
            credentials: Credentials::default(),
        };
        let cells = plan.cells(&HashSet::new());
        let e = plan.estimate(&cells);
        assert_eq!((e.seconds, e.unknown_cells, e.warmup_cell), (7.5, 0, false));
        plan.warmup_cell = true;
        let e = plan.estimate(&cells);
        assert_eq!((e.seconds, e.warmup_cell), (9.5, true), "the first case once more");
        assert_eq!(plan.estimate(&[]).seconds, 0.0);
    }

    #[test]
    fn done_cells_are_skipped() {
        let done: HashSet<Cell> = [Cell {
            position: 1,
            repetition: 0,
        }]
        .into_iter()
        .collect();
        let cells = order_cells(2, 2, &done, true, 3);
        assert_eq!(cells.len(), 3);
        assert!(!cells.contains(&Cell {
            position: 1,
            repetition: 0
        }));
    }
}
