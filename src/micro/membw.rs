//! Memory bandwidth: read (sum of 64-bit words), write (fill) and copy (memcpy) over buffers
//! at least 4x the last-level cache, touched before timing so no page faults are timed. Copy
//! bandwidth counts the bytes copied (as `perf bench mem memcpy` does), not read + written.

use super::harness::{self, push_summary, Budget};
use crate::case::MicroCase;
use crate::observation::{Observation, Source, WarningKind};
use crate::sys::mem::{AnonMap, HugePages};
use std::hint::black_box;

pub const VARIANTS: &[&str] = crate::case::Bench::Membw.variants();
const GIB: f64 = (1u64 << 30) as f64;

/// The default buffer: 4x the last-level cache, at least 64 MiB (256 MiB when the LLC is unknown).
pub fn default_size() -> u64 {
    match crate::sys::cache::last_level_bytes() {
        Some(llc) => (4 * llc).max(64 << 20),
        None => 256 << 20,
    }
}

/// Sum all words with eight independent accumulators (so the adds do not serialise).
fn read_sum(words: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    for chunk in words.chunks_exact(8) {
        for i in 0..8 {
            acc[i] = acc[i].wrapping_add(chunk[i]);
        }
    }
    acc.iter().fold(0, |a, b| a.wrapping_add(*b))
}

pub fn run(case: &MicroCase) -> anyhow::Result<Observation> {
    let size = harness::opt_u64(case, "size_bytes", default_size())?;
    if size < 4096 {
        anyhow::bail!("membw: size must be at least 4 KiB, got {size}");
    }
    let variant = case.option("variant").unwrap_or("read");
    let budget = Budget::of(case);
    let samples = budget.samples.min(if harness::is_quick(case) { 5 } else { 11 });
    let mut src = AnonMap::new(size as usize, HugePages::Refuse)?;
    src.as_mut_slice().fill(1); // touch every page before timing
    let mut dst = if variant == "copy" {
        let mut d = AnonMap::new(size as usize, HugePages::Refuse)?;
        d.as_mut_slice().fill(2);
        Some(d)
    } else {
        None
    };
    let mut pass = |value: u8| -> anyhow::Result<()> {
        match variant {
            "read" => {
                black_box(read_sum(src.as_words()));
            }
            "write" => src.as_mut_slice().fill(value),
            "copy" => {
                let d = dst
                    .as_mut()
                    .ok_or_else(|| anyhow::anyhow!("copy needs a destination"))?;
                d.as_mut_slice().copy_from_slice(src.as_slice());
                black_box(d.as_slice()[0]);
            }
            other => anyhow::bail!("membw: unknown variant '{other}' (accepted: {})", VARIANTS.join(", ")),
        }
        Ok(())
    };
    pass(3)?; // warm-up
    let mut gib_s = Vec::with_capacity(samples);
    for i in 0..samples {
        let t0 = harness::now();
        pass(i as u8)?;
        let t1 = harness::now();
        gib_s.push(size as f64 / GIB / (harness::interval_ns(t0, t1) / 1e9));
    }
    let mut obs = Observation::default();
    push_summary(&mut obs, "bandwidth_gib_s", "GiB/s", &gib_s, Source::Tool);
    if let Some(llc) = crate::sys::cache::last_level_bytes() {
        if size < 4 * llc {
            obs.warn(
                WarningKind::CacheResident,
                format!(
                "buffer of {size} bytes is less than 4x the last-level cache ({llc} bytes): caches inflate the figure"
            ),
            );
        }
    }
    harness::push_overheads(&mut obs);
    Ok(obs)
}
