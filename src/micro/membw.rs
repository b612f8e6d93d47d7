//! Memory bandwidth: read (sum of 64-bit words), write (fill) and copy (memcpy) over buffers
//! at least 4x the last-level cache, touched before timing so no page faults are timed. Copy
//! bandwidth counts the bytes copied (as `perf bench mem memcpy` does), not read + written.
//!
//! Two figures per operation, each labelled by its variant and `call_bytes` (the bytes one
//! `memset`/`memcpy` call handles):
//! - `write`, `copy`: the machine's peak as a user's large copy runs it: the whole buffer in
//!   one C-library call per pass (pieces of at most [`WHOLE_CALL`]). Above its non-temporal
//!   threshold (a fraction of the last-level cache) glibc streams past the caches with
//!   non-temporal stores; copying in cache-sized pieces would keep it below that threshold
//!   and measure a slower, cache-polluting copy instead.
//! - `write_cached`, `copy_cached`: the cache-resident figure: buffers of [`cached_size`] (both
//!   of copy's fit in half the L2), handled again and again, always in the caches.

use super::harness::{self, push_summary, Budget};
use crate::case::MicroCase;
use crate::observation::names;
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

/// Bytes the read pass (our own loop) handles between looks at the stop flag: milliseconds of
/// work, beside which one atomic load is nothing.
const CHUNK: usize = 16 << 20;

/// The most one `memset`/`memcpy` call of the whole-buffer variants handles: above every
/// non-temporal threshold, and a stop request still waits for at most one such call (about
/// 50 ms at 10 GiB/s).
pub const WHOLE_CALL: usize = 512 << 20;

/// The buffer of the cache-resident variants: a quarter of cpu0's L2 (so copy's source and
/// destination fit in half of it), between 16 KiB and 1 MiB; 128 KiB when sysfs has no L2.
pub fn cached_size() -> u64 {
    crate::sys::cache::cpu0_caches()
        .iter()
        .find(|c| c.level == 2 && c.kind != "Instruction" && c.size_bytes > 0)
        .map_or(128 << 10, |l2| (l2.size_bytes / 4).clamp(16 << 10, 1 << 20))
}

/// Run `f` over consecutive pieces `start..end` of `0..len` of at most `piece` bytes, with a
/// look at `stop` after each.
fn in_pieces(len: usize, piece: usize, stop: Stop, mut f: impl FnMut(usize, usize)) -> anyhow::Result<()> {
    let mut start = 0;
    while start < len {
        let end = (start + piece).min(len);
        f(start, end);
        start = end;
        harness::check(stop)?;
    }
    Ok(())
}

/// Run `f` in pieces of [`CHUNK`] bytes.
fn in_chunks(len: usize, stop: Stop, f: impl FnMut(usize, usize)) -> anyhow::Result<()> {
    in_pieces(len, CHUNK, stop, f)
}

pub fn run(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    let variant = case.option("variant").unwrap_or("read");
    if !VARIANTS.contains(&variant) {
        anyhow::bail!("membw: unknown variant '{variant}' (accepted: {})", VARIANTS.join(", "));
    }
    let cached = variant.ends_with("_cached");
    let size = harness::opt_u64(case, "size_bytes", if cached { cached_size() } else { default_size() })?;
    if size < 4096 {
        anyhow::bail!("membw: size must be at least 4 KiB, got {size}");
    }
    let budget = Budget::of(case);
    let len = size as usize;
    let mut src = AnonMap::new(len, HugePages::Refuse)?;
    // Touch every page before timing.
    in_chunks(len, stop, |a, b| src.as_mut_slice()[a..b].fill(1))?;
    let mut dst = if variant.starts_with("copy") {
        let mut d = AnonMap::new(len, HugePages::Refuse)?;
        in_chunks(len, stop, |a, b| d.as_mut_slice()[a..b].fill(2))?;
        Some(d)
    } else {
        None
    };
    let mut obs = Observation::default();
    if cached {
        // Many passes per sample, timed as repeated operations like every short figure.
        let mut value = 0u8;
        let ns = harness::time_per_op(budget, stop, || -> anyhow::Result<()> {
            value = value.wrapping_add(1);
            match dst.as_mut() {
                Some(d) => {
                    d.as_mut_slice().copy_from_slice(src.as_slice());
                    black_box(d.as_slice()[0]);
                }
                None => {
                    src.as_mut_slice().fill(value);
                    black_box(src.as_slice()[0]);
                }
            }
            Ok(())
        })?;
        let gib_s: Vec<f64> = ns.iter().map(|ns| size as f64 / GIB / (ns / 1e9)).collect();
        push_summary(&mut obs, names::BANDWIDTH_GIB_S, "GiB/s", &gib_s, Source::Tool);
        harness::push_value(&mut obs, "call_bytes", "bytes", size as f64);
        harness::push_overheads(&mut obs);
        return Ok(obs);
    }
    let samples = budget.samples.min(if harness::is_quick(case) { 5 } else { 11 });
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
                in_pieces(len, WHOLE_CALL, stop, |a, b| bytes[a..b].fill(value))?;
                black_box(src.as_slice()[0]);
            }
            ("copy", Some(d)) => {
                let (from, to) = (src.as_slice(), d.as_mut_slice());
                in_pieces(len, WHOLE_CALL, stop, |a, b| to[a..b].copy_from_slice(&from[a..b]))?;
                black_box(d.as_slice()[0]);
            }
            _ => anyhow::bail!("membw: variant '{variant}' has no buffers"),
        }
        Ok(())
    };
    pass(3)?; // warm-up
    let mut gib_s = Vec::with_capacity(samples);
    for i in 0..samples {
        harness::sample_begin();
        let t0 = harness::now();
        pass(i as u8)?;
        let t1 = harness::now();
        harness::sample_end();
        gib_s.push(size as f64 / GIB / (harness::interval_ns(t0, t1) / 1e9));
    }
    push_summary(&mut obs, names::BANDWIDTH_GIB_S, "GiB/s", &gib_s, Source::Tool);
    let call = if variant == "read" { 0 } else { len.min(WHOLE_CALL) };
    if call > 0 {
        harness::push_value(&mut obs, "call_bytes", "bytes", call as f64);
    }
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
