//! Memory bandwidth: read (sum of 64-bit words), write (fill) and copy (memcpy) over buffers
//! at least 4x the last-level cache, touched before timing so no page faults are timed. Copy
//! bandwidth counts the bytes copied (as `perf bench mem memcpy` does), not read + written.

use super::harness::{self, push_summary, Budget};
use crate::case::MicroCase;
use crate::observation::{Observation, Source, WarningKind};
use crate::stop::Stop;
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

/// Bytes a pass handles between looks at the stop flag: milliseconds of work, beside which one
/// atomic load is nothing.
const CHUNK: usize = 16 << 20;

/// Run `f` over consecutive pieces `start..end` of `0..len` of at most [`CHUNK`] bytes (whole
/// 64-byte lines), with a look at `stop` after each.
fn in_chunks(len: usize, stop: Stop, mut f: impl FnMut(usize, usize)) -> anyhow::Result<()> {
    let mut start = 0;
    while start < len {
        let end = (start + CHUNK).min(len);
        f(start, end);
        start = end;
        harness::check(stop)?;
    }
    Ok(())
}

pub fn run(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    let size = harness::opt_u64(case, "size_bytes", default_size())?;
    if size < 4096 {
        anyhow::bail!("membw: size must be at least 4 KiB, got {size}");
    }
    let variant = case.option("variant").unwrap_or("read");
    if !VARIANTS.contains(&variant) {
        anyhow::bail!("membw: unknown variant '{variant}' (accepted: {})", VARIANTS.join(", "));
    }
    let budget = Budget::of(case);
    let samples = budget.samples.min(if harness::is_quick(case) { 5 } else { 11 });
    let len = size as usize;
    let mut src = AnonMap::new(len, HugePages::Refuse)?;
    // Touch every page before timing.
    in_chunks(len, stop, |a, b| src.as_mut_slice()[a..b].fill(1))?;
    let mut dst = if variant == "copy" {
        let mut d = AnonMap::new(len, HugePages::Refuse)?;
        in_chunks(len, stop, |a, b| d.as_mut_slice()[a..b].fill(2))?;
        Some(d)
    } else {
        None
    };
    let mut pass = |value: u8| -> anyhow::Result<()> {
        match (variant, dst.as_mut()) {
            ("read", _) => {
                let words = src.as_words();
                let mut sum = 0u64;
                in_chunks(len, stop, |a, b| {
                    sum = sum.wrapping_add(read_sum(&words[a / 8..b / 8]));
                })?;
                black_box(sum);
            }
            ("write", _) => {
                let bytes = src.as_mut_slice();
                in_chunks(len, stop, |a, b| bytes[a..b].fill(value))?;
            }
            ("copy", Some(d)) => {
                let (from, to) = (src.as_slice(), d.as_mut_slice());
                in_chunks(len, stop, |a, b| to[a..b].copy_from_slice(&from[a..b]))?;
                black_box(d.as_slice()[0]);
            }
            _ => anyhow::bail!("membw: variant '{variant}' has no buffers"),
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
