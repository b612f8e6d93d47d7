//! Memory latency: a dependent pointer chase over one random cycle (Sattolo) through a
//! working set of `size_bytes`, one element every `stride_bytes`. Every load depends on the
//! previous one and its address is unpredictable, so the time per load is the latency of the
//! level that holds the working set (plus TLB misses when it outgrows the TLB's reach).

use super::harness::{self, push_summary, Budget};
use super::sattolo;
use crate::case::MicroCase;
use crate::observation::names;
use crate::observation::{Observation, Source, WarningKind};
use crate::stop::Stop;
use crate::sys::mem::{ChaseBuffer, HugePages};
use rand::SeedableRng;

pub const DEFAULT_STRIDE: u64 = 64;

/// Loads between looks at the stop flag: a few ms at DRAM latency, and one atomic load per
/// 65,536 dependent loads is nothing beside them.
const CHASE_CHUNK: u64 = 1 << 16;

/// Walk `steps` (a multiple of 16) from slot `from` in pieces of [`CHASE_CHUNK`], looking at
/// `stop` between pieces; returns the slot reached.
fn chase(buffer: &ChaseBuffer, from: usize, steps: u64, stop: Stop) -> anyhow::Result<usize> {
    let (mut at, mut left) = (from, steps);
    while left > 0 {
        let n = left.min(CHASE_CHUNK);
        at = buffer.chase_from(at, n);
        left -= n;
        harness::check(stop)?;
    }
    Ok(at)
}

pub fn run(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    let size = harness::opt_u64(case, "size_bytes", 16 * 1024)?;
    let stride = harness::opt_u64(case, "stride_bytes", DEFAULT_STRIDE)?;
    if stride < 8 || stride % 8 != 0 {
        anyhow::bail!("memlat: stride must be a multiple of 8 bytes, got {stride}");
    }
    let slots = (size / stride) as usize;
    if slots < 2 {
        anyhow::bail!("memlat: size {size} holds fewer than 2 elements of stride {stride}");
    }
    let huge = match case.option("hugepages").unwrap_or("no") {
        "yes" => HugePages::Want,
        "no" => HugePages::Refuse,
        other => anyhow::bail!("memlat: hugepages must be yes or no, got '{other}'"),
    };
    let quick = harness::is_quick(case);
    let budget = Budget::of(case);
    let samples = if quick {
        budget.samples.min(5)
    } else {
        budget.samples.min(9)
    };

    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5a77_0105 ^ size);
    let next = sattolo::cycle(slots, &mut rng);
    harness::check(stop)?;
    let covered = sattolo::cycle_len(&next);
    if covered != slots {
        anyhow::bail!("memlat: the chase cycle covers {covered} of {slots} elements");
    }
    let buffer = ChaseBuffer::new(&next, stride as usize, huge)?;
    drop(next);
    harness::check(stop)?;
    // Warm-up: one full walk, which must come back to where it started.
    let back = chase(&buffer, 0, round16(slots as u64), stop)?;
    if slots % 16 == 0 && back != 0 {
        anyhow::bail!("memlat: a walk of {slots} steps ended at element {back}, not 0");
    }
    let min_steps = if quick { 1 << 17 } else { 1 << 20 };
    let steps = round16((slots as u64).clamp(min_steps, 1 << 21));
    let oh = harness::overheads();
    let mut per_load = Vec::with_capacity(samples);
    // Each sample goes on around the cycle from where the last one stopped.
    let mut at = back;
    for _ in 0..samples {
        harness::sample_begin();
        let t0 = harness::now();
        let reached = chase(&buffer, at, steps, stop);
        let t1 = harness::now();
        harness::sample_end();
        at = reached?;
        // The loop runs 16 dependent loads per iteration: its overhead is shared by 16.
        per_load.push(harness::interval_ns(t0, t1) / steps as f64 - oh.loop_ns / 16.0);
    }
    let mut obs = Observation::default();
    push_summary(&mut obs, names::LATENCY_NS, "ns", &per_load, Source::Tool);
    harness::push_value(&mut obs, "chase_elements", "count", slots as f64);
    if huge == HugePages::Want {
        let thp = crate::sys::procfs::read_trimmed("/sys/kernel/mm/transparent_hugepage/enabled");
        if thp.as_deref().is_some_and(|t| t.contains("[never]")) || thp.is_none() {
            obs.warn(
                WarningKind::Substituted,
                "hugepages=yes but transparent huge pages are off here: 4 KiB pages were used",
            );
        }
    }
    harness::push_overheads(&mut obs);
    Ok(obs)
}

fn round16(n: u64) -> u64 {
    n.div_ceil(16) * 16
}

/// The default working-set sizes: powers of two from `min` to `max` with the 1.5x point
/// between each pair, so plateau edges are resolved.
pub fn sizes(min: u64, max: u64, with_midpoints: bool) -> Vec<u64> {
    let mut out = Vec::new();
    let mut s = min.max(1).next_power_of_two();
    while s <= max {
        out.push(s);
        let mid = s + s / 2;
        if with_midpoints && mid < max && mid < s * 2 {
            out.push(mid);
        }
        s = match s.checked_mul(2) {
            Some(v) => v,
            None => break,
        };
    }
    if out.last() != Some(&max) && max >= min {
        out.push(max);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_sizes() {
        assert_eq!(sizes(1024, 4096, true), vec![1024, 1536, 2048, 3072, 4096]);
        assert_eq!(sizes(1024, 4096, false), vec![1024, 2048, 4096]);
        assert_eq!(sizes(1024, 5000, false), vec![1024, 2048, 4096, 5000]);
    }
}
