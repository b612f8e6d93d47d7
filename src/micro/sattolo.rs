//! Sattolo's algorithm: a uniformly random permutation that is a single cycle, so a pointer
//! chase through it visits every element once before repeating and hardware prefetchers
//! cannot guess the next address.

use rand::{Rng, RngExt};

/// The successor table of one random cycle over 0..n: next[i] is where i points.
pub fn cycle(n: usize, rng: &mut impl Rng) -> Vec<usize> {
    let mut next: Vec<usize> = (0..n).collect();
    // Sattolo: like Fisher-Yates but j < i strictly, which yields exactly one cycle.
    for i in (1..n).rev() {
        let j = rng.random_range(0..i);
        next.swap(i, j);
    }
    next
}

/// The length of the cycle through 0 (n when the table is one cycle covering everything).
pub fn cycle_len(next: &[usize]) -> usize {
    if next.is_empty() {
        return 0;
    }
    let (mut at, mut len) = (0usize, 0usize);
    loop {
        at = match next.get(at) {
            Some(&n) => n,
            None => return len,
        };
        len += 1;
        if at == 0 || len > next.len() {
            return len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    proptest! {
        #[test]
        fn sattolo_is_one_cycle_over_everything(n in 2usize..5000, seed in any::<u64>()) {
            let next = cycle(n, &mut SmallRng::seed_from_u64(seed));
            prop_assert_eq!(cycle_len(&next), n);
            let mut sorted = next.clone();
            sorted.sort_unstable();
            prop_assert_eq!(sorted, (0..n).collect::<Vec<_>>());
            prop_assert!(next.iter().enumerate().all(|(i, &j)| i != j), "no fixed points");
        }
    }

    #[test]
    fn two_cycles_are_detected() {
        // 0 -> 1 -> 0 and 2 -> 3 -> 2: the cycle through 0 has length 2, not 4.
        assert_eq!(cycle_len(&[1, 0, 3, 2]), 2);
        assert_eq!(cycle_len(&[]), 0);
    }
}
