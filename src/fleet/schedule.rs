//! The schedule of a fleet run: rounds of disjoint directed pairs (no agent in two pairs of a
//! round, as client or server), their order shuffled by a seed, each round cut into batches of
//! at most K pairs that measure at the same time (`--concurrent-pairs`).
//!
//! `--pairs all` is the circle method: host N−1 (or a bye, for odd N) stays put while the
//! others rotate, giving N−1 rounds of N/2 pairs (odd N: N rounds of (N−1)/2) in which every
//! unordered pair meets once. Both directions of a pair cannot share a round (they share both
//! hosts), so the directed schedule is those rounds twice, the second time reversed:
//! 2·(N−1) rounds for even N, 2·N for odd N. Other pair sets (`ring`, `star:HOST`, a file)
//! are packed into rounds greedily in their given order (each pair into the first round where
//! both its hosts are free). `star:HOST` with `--concurrent-pairs` above 1 is an incast: the
//! leaves' pairs into the centre share their rounds (`pack_incast`), the centre serving them
//! as sessions at once (`net serve --agent --sessions K`); its pairs out stay one a round.

use super::hosts::Pair;
use crate::measure::stats::SplitMix64;

/// The circle method's rounds of directed pairs over `n` hosts (see the module comment).
pub fn circle(n: usize) -> Vec<Vec<Pair>> {
    if n < 2 {
        return Vec::new();
    }
    // With a bye for odd N: slot `m - 1` is then nobody.
    let m = if n % 2 == 0 { n } else { n + 1 };
    let mut forward: Vec<Vec<Pair>> = Vec::with_capacity(m - 1);
    for r in 0..m - 1 {
        let mut round = Vec::with_capacity(m / 2);
        for i in 0..m / 2 {
            // Slots 0..m-1 rotate; the last slot stays.
            let slot = |k: usize| if k == m - 1 { m - 1 } else { (k + r) % (m - 1) };
            let (a, b) = if i == 0 {
                (slot(m - 1), slot(0))
            } else {
                (slot(i), slot(m - 1 - i))
            };
            if a >= n || b >= n {
                continue; // the bye
            }
            // Alternate who sends first so that no host is always the client of round one.
            round.push(if (r + i) % 2 == 0 { (a, b) } else { (b, a) });
        }
        forward.push(round);
    }
    let backward: Vec<Vec<Pair>> = forward
        .iter()
        .map(|round| round.iter().map(|&(a, b)| (b, a)).collect())
        .collect();
    forward.into_iter().chain(backward).collect()
}

/// `pairs` packed into rounds of disjoint pairs, greedily in their order.
pub fn pack(pairs: &[Pair]) -> Vec<Vec<Pair>> {
    let mut rounds: Vec<Vec<Pair>> = Vec::new();
    for &(a, b) in pairs {
        let free = rounds
            .iter()
            .position(|round| round.iter().all(|&(x, y)| x != a && x != b && y != a && y != b));
        match free {
            Some(r) => rounds[r].push((a, b)),
            None => rounds.push(vec![(a, b)]),
        }
    }
    rounds
}

/// `pairs` packed as [`pack`] does, except that pairs into the same destination may share a
/// round when their sources are free: the many-to-one rounds of an incast.
pub fn pack_incast(pairs: &[Pair]) -> Vec<Vec<Pair>> {
    let mut rounds: Vec<Vec<Pair>> = Vec::new();
    for &(a, b) in pairs {
        let fits = |round: &Vec<Pair>| {
            round
                .iter()
                .all(|&(x, y)| x != a && x != b && y != a && (y != b || round.iter().all(|&(_, d)| d == b)))
        };
        match rounds.iter().position(fits) {
            Some(r) => rounds[r].push((a, b)),
            None => rounds.push(vec![(a, b)]),
        }
    }
    rounds
}

/// The rounds in an order fixed by `seed`, and the pairs within each round too (Fisher–Yates
/// with SplitMix64: the same seed gives the same schedule on every machine and build).
pub fn shuffle(rounds: &mut [Vec<Pair>], seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let mut below = |n: usize| ((rng.next_u64() as u128 * n as u128) >> 64) as usize;
    for i in (1..rounds.len()).rev() {
        rounds.swap(i, below(i + 1));
    }
    for round in rounds.iter_mut() {
        for i in (1..round.len()).rev() {
            round.swap(i, below(i + 1));
        }
    }
}

/// One scheduled cell: a directed pair in a round, and how many pairs measure beside it
/// (its batch's size, itself included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub pair: Pair,
    /// 1-based, in the order the rounds run.
    pub round: u32,
    pub concurrent_pairs: u32,
}

/// Every slot of `rounds` in run order: each round cut into batches of at most `k` pairs.
pub fn slots(rounds: &[Vec<Pair>], k: u32) -> Vec<Slot> {
    let k = k.max(1) as usize;
    let mut out = Vec::new();
    for (r, round) in rounds.iter().enumerate() {
        for batch in round.chunks(k) {
            for &pair in batch {
                out.push(Slot {
                    pair,
                    round: r as u32 + 1,
                    concurrent_pairs: batch.len() as u32,
                });
            }
        }
    }
    out
}

/// Rounds of a schedule of `n` hosts and how long it takes: `t_case` seconds a cell, `k` pairs
/// at once — each round takes ⌈its pairs / k⌉ · t_case.
pub fn estimated_seconds(rounds: &[Vec<Pair>], k: u32, t_case: f64) -> f64 {
    let k = k.max(1) as usize;
    rounds.iter().map(|r| r.len().div_ceil(k) as f64 * t_case).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// An incast star: every leaf sends to the centre in one round; the centre's sends to the
    /// leaves share nothing with each other's source, so they stay one a round.
    #[test]
    fn an_incast_star_sends_every_leaf_to_the_centre_at_once() {
        let star: Vec<Pair> = (1..5).flat_map(|i| [(i, 0), (0, i)]).collect();
        let rounds = pack_incast(&star);
        assert_eq!(rounds[0], vec![(1, 0), (2, 0), (3, 0), (4, 0)]);
        assert_eq!(rounds.len(), 5);
        assert!(rounds[1..].iter().all(|r| r.len() == 1 && r[0].0 == 0));
        // Pairs without a shared destination pack as `pack` packs them.
        let ring: Vec<Pair> = (0..4).map(|i| (i, (i + 1) % 4)).collect();
        assert_eq!(pack_incast(&ring), pack(&ring));
        let estimated = estimated_seconds(&rounds, 4, 1.0);
        assert_eq!(estimated, 5.0);
    }

    fn disjoint(round: &[Pair]) -> bool {
        let mut seen = HashSet::new();
        round.iter().all(|&(a, b)| seen.insert(a) && seen.insert(b))
    }

    /// Every ordered pair exactly once, every round disjoint, and the round counts the docs
    /// state: 2·(N−1) of N/2 pairs for even N, 2·N of (N−1)/2 for odd N.
    #[test]
    fn the_circle_method_covers_every_directed_pair_once_in_disjoint_rounds() {
        for n in 2..=13 {
            let rounds = circle(n);
            let expected_rounds = if n % 2 == 0 { 2 * (n - 1) } else { 2 * n };
            assert_eq!(rounds.len(), expected_rounds, "n={n}");
            let all: Vec<Pair> = rounds.iter().flatten().copied().collect();
            assert_eq!(all.len(), n * (n - 1), "n={n}");
            let set: HashSet<Pair> = all.iter().copied().collect();
            assert_eq!(set.len(), n * (n - 1), "n={n}: a pair twice");
            assert!(all.iter().all(|(a, b)| a != b && *a < n && *b < n));
            for round in &rounds {
                assert!(disjoint(round), "n={n}: {round:?}");
                assert_eq!(round.len(), n / 2, "n={n}");
            }
        }
        assert!(circle(1).is_empty());
    }

    #[test]
    fn other_pair_sets_pack_greedily_into_disjoint_rounds() {
        // A ring of 4: (0,1),(2,3) then (1,2),(3,0).
        let ring = pack(&[(0, 1), (1, 2), (2, 3), (3, 0)]);
        assert_eq!(ring, vec![vec![(0, 1), (2, 3)], vec![(1, 2), (3, 0)]]);
        // A star shares its centre: one pair a round.
        let star = pack(&[(0, 1), (1, 0), (0, 2), (2, 0)]);
        assert_eq!(star.len(), 4);
        assert!(star.iter().all(|r| r.len() == 1));
    }

    #[test]
    fn the_shuffle_is_fixed_by_the_seed_and_keeps_every_pair() {
        let base = circle(8);
        let (mut a, mut b, mut c) = (base.clone(), base.clone(), base.clone());
        shuffle(&mut a, 7);
        shuffle(&mut b, 7);
        shuffle(&mut c, 8);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, base);
        let pairs = |r: &[Vec<Pair>]| r.iter().flatten().copied().collect::<HashSet<_>>();
        assert_eq!(pairs(&a), pairs(&base));
        assert!(a.iter().all(|r| disjoint(r)));
    }

    #[test]
    fn batches_of_k_record_how_many_run_at_once() {
        let rounds = vec![vec![(0, 1), (2, 3), (4, 5)], vec![(1, 0)]];
        let s = slots(&rounds, 2);
        let shape: Vec<(u32, u32)> = s.iter().map(|s| (s.round, s.concurrent_pairs)).collect();
        assert_eq!(shape, vec![(1, 2), (1, 2), (1, 1), (2, 1)]);
        assert!(slots(&rounds, 1).iter().all(|s| s.concurrent_pairs == 1));
        assert_eq!(estimated_seconds(&rounds, 2, 3.0), 9.0);
        assert_eq!(estimated_seconds(&rounds, 3, 3.0), 6.0);
        // N = 1000 at 3 s with K >= N/2: 2·999 rounds, 999,000 cells, ~100 minutes.
        let big = circle(1000);
        assert_eq!(big.iter().map(Vec::len).sum::<usize>(), 999_000);
        assert_eq!(estimated_seconds(&big, 500, 3.0), 5994.0);
    }
}
