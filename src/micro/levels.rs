//! Finding the memory hierarchy in a latency curve: plateaus of nearly constant latency over
//! growing working sets are the cache levels, the last high one is DRAM. Then reading them
//! against the caches the kernel reports: a level the sweep did not reach past is "not
//! reached", and a boundary that contradicts sysfs says so and why it may. Pure, so the
//! terminal and the report run the same code on the same points and print the same text.

use crate::format::format_bytes;
use crate::sys::cache::CacheInfo;
use serde::{Deserialize, Serialize};

/// One detected level of the hierarchy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// "L1", "L2", "L3", ... or "DRAM".
    pub name: String,
    /// The smallest and largest working sets on the plateau.
    pub min_bytes: u64,
    pub max_bytes: u64,
    /// The plateau's latency: the median of its points.
    pub latency_ns: f64,
    pub points: usize,
}

/// A point joins the current plateau while it is within this factor of the plateau's lowest
/// latency. Cache levels differ by 2.5-10x, so 1.5 separates them while tolerating noise and
/// the slow rise inside a shared last-level cache.
const PLATEAU_TOLERANCE: f64 = 1.5;
/// Latencies at or above this are main memory on any current machine (caches are < 50 ns).
const DRAM_NS: f64 = 50.0;

/// Points more than this factor away from both neighbours are transitions between levels.
const TRANSITION_STEP: f64 = 1.3;

/// A working set whose samples vary more than this (coefficient of variation) cannot show a
/// level: its median may sit anywhere between two. Such points are "unresolved".
pub const NOISY_CV: f64 = 0.2;
/// A plateau needs at least this many steady points to be a level (only the last plateau of
/// the curve, which may end on it, can have fewer).
pub const MIN_LEVEL_POINTS: usize = 2;
/// A plateau past every cache the kernel reports needs this many: two points of a noisy
/// stretch once made an "L4" that does not exist.
pub const MIN_EXTRA_LEVEL_POINTS: usize = 3;

/// Detect the levels in (working-set bytes, latency ns) points, in any order. First the
/// transitions are set aside: points more than 1.3x away from both neighbours (the last point
/// is kept: the curve may end on a level). The rest are grouped into plateaus of points within
/// 1.5x of the plateau's lowest latency. Plateaus need at least two points, except the last
/// one. Consecutive plateaus at DRAM latency (TLB reach effects) merge into one DRAM level.
#[cfg(test)]
pub fn detect_levels(points: &[(u64, f64)]) -> Vec<Level> {
    detect_levels_spread(points)
}

/// The plateaus of the curve (see [`detect_levels`]); a plateau needs [`MIN_LEVEL_POINTS`]
/// points unless it ends the curve.
fn detect_levels_spread(points: &[(u64, f64)]) -> Vec<Level> {
    let mut pts: Vec<(u64, f64)> = points
        .iter()
        .copied()
        .filter(|(s, ns)| *s > 0 && ns.is_finite() && *ns > 0.0)
        .collect();
    pts.sort_by_key(|p| p.0);
    let far = |a: f64, b: f64| a.max(b) / a.min(b) > TRANSITION_STEP;
    let steady: Vec<(u64, f64)> = (0..pts.len())
        .filter(|&i| {
            let last = i + 1 == pts.len();
            let prev_far = i == 0 || far(pts[i - 1].1, pts[i].1);
            let next_far = last || far(pts[i + 1].1, pts[i].1);
            last || !(prev_far && next_far)
        })
        .map(|i| pts[i])
        .collect();
    let mut plateaus: Vec<Vec<(u64, f64)>> = Vec::new();
    for p in steady {
        match plateaus.last_mut() {
            Some(current)
                if p.1 <= lowest(current) * PLATEAU_TOLERANCE && p.1 >= lowest(current) / PLATEAU_TOLERANCE =>
            {
                current.push(p)
            }
            _ => plateaus.push(vec![p]),
        }
    }
    let count = plateaus.len();
    let kept: Vec<Vec<(u64, f64)>> = plateaus
        .into_iter()
        .enumerate()
        .filter(|(i, p)| p.len() >= MIN_LEVEL_POINTS || (*i == count - 1 && count > 1))
        .map(|(_, p)| p)
        .collect();
    // Neighbouring plateaus whose medians are within the tolerance are one level whose latency
    // rises slowly (a shared last-level cache, TLB reach): merge them.
    let mut merged: Vec<Vec<(u64, f64)>> = Vec::new();
    for plateau in kept {
        match merged.last_mut() {
            Some(prev) if within(latency_median(prev), latency_median(&plateau)) => prev.extend(plateau),
            _ => merged.push(plateau),
        }
    }
    let mut levels: Vec<Level> = Vec::new();
    let mut cache_index = 1;
    let mut dram: Vec<(u64, f64)> = Vec::new();
    for plateau in merged {
        if latency_median(&plateau) >= DRAM_NS || !dram.is_empty() {
            dram.extend(plateau);
            continue;
        }
        levels.push(level(format!("L{cache_index}"), &plateau));
        cache_index += 1;
    }
    if !dram.is_empty() {
        levels.push(level("DRAM".into(), &dram));
    }
    levels
}

/// A working set this many times the last-level cache is needed before the curve can be said
/// to have reached main memory: at 1x a random chase still hits in the cache about half the
/// time (and less of the cache is usable: other data, associativity, a VM's share).
pub const BEYOND_LLC: u64 = 2;

/// The heading above [`Hierarchy::lines`] in the terminal and the report.
pub const HEADING: &str =
    "memory levels in the latency curve (median latency per working set; kernel: the cpu0 caches in sysfs)";

/// One line of the reading: a level found in the curve, or one it did not reach.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelRow {
    /// "L1", "L3 (or beyond)", "beyond L3", "DRAM".
    pub name: String,
    /// The plateau, or None when the curve did not reach (or start below) this level.
    pub level: Option<Level>,
    /// What the kernel reports for it, e.g. "L1 data 48KiB", "main memory".
    pub kernel: String,
    /// Why there is no plateau ("not reached", "not measured").
    pub missing: Option<String>,
}

/// The levels of a curve read against the kernel's caches, with a note for each contradiction.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Hierarchy {
    pub rows: Vec<LevelRow>,
    pub notes: Vec<String>,
}

impl Hierarchy {
    /// The text both the terminal and the report show: one line per level, then the notes.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .rows
            .iter()
            .map(|r| match (&r.level, &r.missing) {
                (Some(l), _) => format!(
                    "{}: {}..{}, {} ns; kernel: {}",
                    r.name,
                    format_bytes(l.min_bytes),
                    format_bytes(l.max_bytes),
                    ns_text(l.latency_ns),
                    r.kernel
                ),
                (None, missing) => format!(
                    "{}: {}; kernel: {}",
                    r.name,
                    missing.as_deref().unwrap_or("not found in the curve"),
                    r.kernel
                ),
            })
            .collect();
        out.extend(self.notes.iter().map(|n| format!("note: {n}")));
        out
    }
}

/// A latency with three significant digits.
pub fn ns_text(ns: f64) -> String {
    if ns < 10.0 {
        format!("{ns:.2}")
    } else if ns < 100.0 {
        format!("{ns:.1}")
    } else {
        format!("{ns:.0}")
    }
}

/// One point per working set: the median of its latencies (one per repetition; each is itself
/// the median of that repetition's samples). Both the terminal and the report read levels
/// from this, never from a mean. Sorted by size; points that are not finite and positive are
/// left out.
pub fn median_per_size(points: &[(u64, f64)]) -> Vec<(u64, f64)> {
    let mut sizes: Vec<u64> = points.iter().map(|p| p.0).filter(|s| *s > 0).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
        .into_iter()
        .filter_map(|size| {
            let mut lat: Vec<f64> = points
                .iter()
                .filter(|p| p.0 == size && p.1.is_finite() && p.1 > 0.0)
                .map(|p| p.1)
                .collect();
            (!lat.is_empty()).then(|| (size, crate::measure::stats::median(&mut lat)))
        })
        .collect()
}

/// The data (or unified) cache of each level the kernel reports, by level.
fn data_caches(caches: &[CacheInfo]) -> Vec<&CacheInfo> {
    let mut out: Vec<&CacheInfo> = Vec::new();
    for c in caches.iter().filter(|c| c.kind != "Instruction" && c.size_bytes > 0) {
        if !out.iter().any(|o| o.level == c.level) {
            out.push(c);
        }
    }
    out.sort_by_key(|c| c.level);
    out
}

fn cache_text(c: &CacheInfo) -> String {
    format!("L{} {} {}", c.level, c.kind.to_lowercase(), format_bytes(c.size_bytes))
}

/// Why a cache boundary seen in a latency curve may not be where the kernel puts it.
fn boundary_reasons(c: &CacheInfo, last_level: bool) -> String {
    let mut why = vec![
        "TLB reach (with 4 KiB pages the TLBs cover far less than the larger caches, and beyond them every load also walks the page tables; rerun with --hugepages to tell)",
    ];
    if last_level {
        why.insert(
            0,
            "the share of this cache the run really gets (a VM, an L3 split among core complexes, other tenants)",
        );
        why.push("an inclusive cache also holding copies of the levels below it");
    }
    if c.level >= 2 {
        why.push("prefetching and the replacement policy blurring the edge");
    }
    format!("this may be due to {}", why.join("; "))
}

/// Read the levels of a latency curve (points: working-set bytes, latency ns; several per size
/// are reduced to their median) against the caches the kernel reports. The last plateau is
/// called DRAM only when the curve reached past [`BEYOND_LLC`] times the last-level cache;
/// levels the curve did not reach, or started above, are rows without a plateau; a plateau
/// whose edge contradicts the kernel's size gets a note saying what may explain it.
#[cfg(test)]
pub fn read_levels(points: &[(u64, f64)], caches: &[CacheInfo]) -> Hierarchy {
    read_levels_spread(points, &[], caches)
}

/// Whether the working set `size` has a CV above [`NOISY_CV`] in `cvs` (the largest of its
/// repetitions counts).
fn is_noisy(size: u64, cvs: &[(u64, f64)]) -> bool {
    cvs.iter().any(|(s, cv)| *s == size && *cv > NOISY_CV)
}

/// The stretches of consecutive noisy working sets (CV above [`NOISY_CV`]) of a curve, as
/// notes: "unresolved: 4MiB..6MiB: its samples vary too much to show a level (CV 48%, 85%)".
pub fn unresolved(points: &[(u64, f64)], cvs: &[(u64, f64)]) -> Vec<String> {
    let curve = median_per_size(points);
    let cv_of = |size: u64| cvs.iter().filter(|(s, _)| *s == size).map(|p| p.1).fold(0.0, f64::max);
    let mut out = Vec::new();
    let mut run: Vec<u64> = Vec::new();
    let flush = |run: &mut Vec<u64>, out: &mut Vec<String>| {
        if let (Some(first), Some(last)) = (run.first(), run.last()) {
            let cvs: Vec<String> = run.iter().map(|s| format!("{:.0}%", cv_of(*s) * 100.0)).collect();
            let range = if first == last {
                format_bytes(*first)
            } else {
                format!("{}..{}", format_bytes(*first), format_bytes(*last))
            };
            out.push(format!(
                "unresolved: {range}: its samples vary too much to show a level (CV {}; a level needs CV <= {:.0}%); rerun with more --samples on an idle machine",
                cvs.join(", "),
                NOISY_CV * 100.0
            ));
        }
        run.clear();
    };
    for (size, _) in curve {
        if is_noisy(size, cvs) {
            run.push(size);
        } else {
            flush(&mut run, &mut out);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// The (bytes, CV) pairs of one working set from its repetitions' `latency_ns_mean` and
/// `latency_ns_stddev` values (in repetition order), for [`read_levels_spread`].
pub fn cvs_of(size: u64, means: &[f64], stddevs: &[f64]) -> Vec<(u64, f64)> {
    means
        .iter()
        .zip(stddevs)
        .filter(|(m, s)| **m > 0.0 && m.is_finite() && s.is_finite())
        .map(|(m, s)| (size, s / m))
        .collect()
}

/// [`read_levels`] with the spread (CV) of each working set, as (bytes, CV) pairs (several per
/// working set: the largest counts). Stretches of noisy working sets (CV above [`NOISY_CV`])
/// are named in "unresolved" notes, and a plateau past the kernel's caches that is mostly
/// noisy is not a level. Plateaus that match a cache the kernel reports keep their rows (their
/// name comes from the kernel), so a noisy L1 never renumbers the levels above it.
pub fn read_levels_spread(points: &[(u64, f64)], cvs: &[(u64, f64)], caches: &[CacheInfo]) -> Hierarchy {
    let mut out = read_levels_inner(points, cvs, caches);
    out.notes.extend(unresolved(points, cvs));
    out
}

fn read_levels_inner(points: &[(u64, f64)], cvs: &[(u64, f64)], caches: &[CacheInfo]) -> Hierarchy {
    let curve = median_per_size(points);
    let mut out = Hierarchy::default();
    let (Some(first), Some(last)) = (curve.first(), curve.last()) else {
        return out;
    };
    let (sweep_min, sweep_max) = (first.0, last.0);
    let detected = detect_levels_spread(&curve);
    let kernel = data_caches(caches);
    let Some(llc) = kernel.last().copied() else {
        return levels_unchecked(detected);
    };
    // Caches smaller than the smallest working set cannot show in the curve.
    let skipped: Vec<&CacheInfo> = kernel.iter().copied().filter(|c| c.size_bytes < sweep_min).collect();
    for c in &skipped {
        out.rows.push(LevelRow {
            name: format!("L{}", c.level),
            level: None,
            kernel: cache_text(c),
            missing: Some(format!(
                "not measured: the curve starts at {}, above this cache (lower --min)",
                format_bytes(sweep_min)
            )),
        });
    }
    let offset = skipped.last().map_or(0, |c| c.level);
    let reached_memory = sweep_max >= llc.size_bytes.saturating_mul(BEYOND_LLC);
    let mut number = offset;
    let mut dram: Option<Level> = None;
    for l in detected {
        if l.name == "DRAM" {
            dram = Some(l);
            continue;
        }
        number += 1;
        let name = format!("L{number}");
        let Some(c) = kernel.iter().find(|c| c.level == number) else {
            match level_beyond_caches(l, name, &curve, cvs, llc) {
                Ok((row, note)) => {
                    out.notes.push(note);
                    out.rows.push(row);
                }
                Err(note) => {
                    number -= 1;
                    out.notes.push(note);
                }
            }
            continue;
        };
        out.notes.extend(edge_note(&name, &l, c, &kernel, llc, &curve));
        out.rows.push(LevelRow {
            name,
            level: Some(l),
            kernel: cache_text(c),
            missing: None,
        });
    }
    if reached_memory {
        // Kernel caches the curve passed without a plateau were merged into a neighbour or
        // crossed in a transition: say nothing more than the rows above show.
        out.rows.push(LevelRow {
            name: "DRAM".into(),
            missing: dram.is_none().then(|| "not found in the curve".into()),
            level: dram,
            kernel: "main memory".into(),
        });
        return out;
    }
    curve_ends_short(&mut out, dram, &kernel, llc, number, sweep_max);
    out
}

/// The levels when the kernel reports no cache sizes: as the curve shows them, the last one
/// called DRAM by its latency alone.
fn levels_unchecked(detected: Vec<Level>) -> Hierarchy {
    let mut out = Hierarchy::default();
    for l in detected {
        out.rows.push(LevelRow {
            name: l.name.clone(),
            kernel: if l.name == "DRAM" {
                "main memory".into()
            } else {
                "no cache sizes (sysfs)".into()
            },
            level: Some(l),
            missing: None,
        });
    }
    out.notes.push(
        "the kernel reports no cache sizes (sysfs): the levels are not checked against the machine, and the last one is called DRAM by its latency alone".into(),
    );
    out
}

/// A plateau past the caches the kernel reports: a level with its note (TLB reach or a
/// memory-side cache), or Err with the note saying why it is not one (mostly noisy, or too
/// short).
fn level_beyond_caches(
    l: Level,
    name: String,
    curve: &[(u64, f64)],
    cvs: &[(u64, f64)],
    llc: &CacheInfo,
) -> Result<(LevelRow, String), String> {
    let in_plateau: Vec<u64> = curve
        .iter()
        .map(|p| p.0)
        .filter(|s| (l.min_bytes..=l.max_bytes).contains(s))
        .collect();
    let noisy = in_plateau.iter().filter(|s| is_noisy(**s, cvs)).count();
    if noisy * 2 > in_plateau.len() {
        return Err(format!(
            "unresolved: {}..{}: a plateau past the caches the kernel reports (up to L{}) whose points mostly vary by more than {:.0}% (CV) is not a level",
            format_bytes(l.min_bytes),
            format_bytes(l.max_bytes),
            llc.level,
            NOISY_CV * 100.0
        ));
    }
    if l.points < MIN_EXTRA_LEVEL_POINTS {
        return Err(format!(
            "unresolved: {}..{}: a plateau of {} point(s) past the caches the kernel reports (up to L{}) is too short to be a level (it needs {MIN_EXTRA_LEVEL_POINTS}); rerun with more --samples on an idle machine",
            format_bytes(l.min_bytes),
            format_bytes(l.max_bytes),
            l.points,
            llc.level
        ));
    }
    let note = format!(
        "{name}: a plateau beyond the caches the kernel reports (up to L{}): TLB reach (page walks added to each load beyond it; rerun with --hugepages) or a memory-side cache",
        llc.level
    );
    let row = LevelRow {
        name,
        level: Some(l),
        kernel: "no such cache in sysfs".into(),
        missing: None,
    };
    Ok((row, note))
}

/// Where a plateau's edge disagrees with its cache's size: the curve leaves it below the size
/// the kernel reports, or goes on past it (and what may cause that).
fn edge_note(
    name: &str,
    l: &Level,
    c: &CacheInfo,
    kernel: &[&CacheInfo],
    llc: &CacheInfo,
    curve: &[(u64, f64)],
) -> Option<String> {
    let next_above = |bytes: u64| curve.iter().map(|p| p.0).find(|s| *s > bytes);
    let lower: u64 = kernel.iter().filter(|k| k.level < c.level).map(|k| k.size_bytes).sum();
    let is_llc = c.level == llc.level;
    match next_above(l.max_bytes) {
        Some(hi) if c.size_bytes > hi => Some(format!(
            "{name}: the curve leaves it between {} and {}, below the {} the kernel reports; {}",
            format_bytes(l.max_bytes),
            format_bytes(hi),
            format_bytes(c.size_bytes),
            boundary_reasons(c, is_llc)
        )),
        _ if l.max_bytes > c.size_bytes => {
            let why = if lower > 0 && l.max_bytes <= c.size_bytes + lower {
                "an exclusive (victim) cache, which also holds what the levels below it evicted"
            } else {
                "prefetching, or a curve too noisy to show the edge (rerun with more --samples)"
            };
            Some(format!(
                "{name}: the plateau goes on to {}, past the {} the kernel reports; this may be due to {why}",
                format_bytes(l.max_bytes),
                format_bytes(c.size_bytes),
            ))
        }
        _ => None,
    }
}

/// The curve ends below (or near) the last-level cache: its last plateau cannot be called
/// main memory, and the levels past it (numbered from `number`) were not reached.
fn curve_ends_short(
    out: &mut Hierarchy,
    dram: Option<Level>,
    kernel: &[&CacheInfo],
    llc: &CacheInfo,
    mut number: u32,
    sweep_max: u64,
) {
    let raise = format!(
        "raise --max to at least {}",
        format_bytes(llc.size_bytes.saturating_mul(BEYOND_LLC))
    );
    let ends = if sweep_max < llc.size_bytes {
        format!(
            "the curve ends at {}, below the {} L{} the kernel reports",
            format_bytes(sweep_max),
            format_bytes(llc.size_bytes),
            llc.level
        )
    } else {
        format!(
            "the curve ends at {}, less than {}x the {} L{} the kernel reports, so part of it still hits in that cache",
            format_bytes(sweep_max),
            BEYOND_LLC,
            format_bytes(llc.size_bytes),
            llc.level
        )
    };
    let dram_seen = dram.is_some();
    if let Some(l) = dram {
        let (name, kernel_text) = match kernel.iter().find(|c| c.level == number + 1) {
            Some(c) => {
                number += 1;
                (format!("L{number} (or beyond)"), cache_text(c))
            }
            None => (format!("beyond L{number}"), cache_text(llc)),
        };
        let mut note = format!("{name}: {ends} — {raise}");
        if l.latency_ns >= DRAM_NS {
            note.push_str(&format!(
                "; its latency ({} ns) is already that of main memory: {}",
                ns_text(l.latency_ns),
                boundary_reasons(llc, true)
            ));
        }
        out.notes.push(note);
        out.rows.push(LevelRow {
            name,
            level: Some(l),
            kernel: kernel_text,
            missing: None,
        });
    }
    // The first level without a plateau says why; the ones after it only what to do.
    let mut explained = dram_seen;
    let mut not_reached = |c: Option<&CacheInfo>| {
        let text = match (explained, c) {
            (true, _) => format!("not reached — {raise}"),
            (false, Some(c)) if c.level != llc.level => {
                format!("not reached: the curve ends at {} — {raise}", format_bytes(sweep_max))
            }
            (false, _) => format!("not reached: {ends} — {raise}"),
        };
        explained = true;
        text
    };
    for c in kernel.iter().filter(|c| c.level > number) {
        out.rows.push(LevelRow {
            name: format!("L{}", c.level),
            level: None,
            kernel: cache_text(c),
            missing: Some(not_reached(Some(c))),
        });
    }
    out.rows.push(LevelRow {
        name: "DRAM".into(),
        level: None,
        kernel: "main memory".into(),
        missing: Some(not_reached(None)),
    });
}

fn within(a: f64, b: f64) -> bool {
    a.max(b) / a.min(b) <= PLATEAU_TOLERANCE
}

/// The median latency of the points (NaN when none is finite).
fn latency_median(points: &[(u64, f64)]) -> f64 {
    crate::measure::stats::median_of(&points.iter().map(|p| p.1).collect::<Vec<_>>()).unwrap_or(f64::NAN)
}

fn level(name: String, points: &[(u64, f64)]) -> Level {
    Level {
        name,
        min_bytes: points.iter().map(|p| p.0).min().unwrap_or(0),
        max_bytes: points.iter().map(|p| p.0).max().unwrap_or(0),
        latency_ns: latency_median(points),
        points: points.len(),
    }
}

fn lowest(points: &[(u64, f64)]) -> f64 {
    points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;
    const M: u64 = 1024 * 1024;

    #[test]
    fn three_caches_and_dram() {
        let curve = [
            (4 * K, 1.2),
            (8 * K, 1.2),
            (16 * K, 1.25),
            (32 * K, 1.3),
            (48 * K, 2.8), // transition
            (64 * K, 4.1),
            (128 * K, 4.2),
            (256 * K, 4.4),
            (512 * K, 7.0), // transition
            (M, 14.0),
            (4 * M, 15.0),
            (16 * M, 16.0),
            (32 * M, 30.0), // transition
            (64 * M, 85.0),
            (128 * M, 100.0),
            (256 * M, 120.0),
        ];
        let levels = detect_levels(&curve);
        assert_eq!(level_names(&levels), ["L1", "L2", "L3", "DRAM"]);
        assert_eq!((levels[0].min_bytes, levels[0].max_bytes), (4 * K, 32 * K));
        assert_eq!((levels[1].min_bytes, levels[1].max_bytes), (64 * K, 256 * K));
        assert_eq!((levels[2].min_bytes, levels[2].max_bytes), (M, 16 * M));
        assert_eq!(levels[3].min_bytes, 64 * M);
        assert_eq!(levels[3].max_bytes, 256 * M, "DRAM plateaus merged");
        assert!((levels[1].latency_ns - 4.2).abs() < 1e-9);
    }

    #[test]
    fn sparse_quick_curve_measured_on_a_busy_vm() {
        // `micro memlat --quick` on the 2-vCPU EPYC VM while others compiled: the L3 part is
        // too steep and too sparse to be a plateau, and must not be named one.
        let curve = [
            (K, 1.22),
            (2 * K, 1.21),
            (4 * K, 1.21),
            (8 * K, 1.21),
            (16 * K, 1.21),
            (32 * K, 2.18),
            (64 * K, 3.78),
            (128 * K, 3.70),
            (256 * K, 3.69),
            (512 * K, 10.23),
            (M, 14.53),
            (2 * M, 53.64),
            (4 * M, 136.9),
            (8 * M, 308.6),
        ];
        let levels = detect_levels(&curve);
        assert_eq!(level_names(&levels), ["L1", "L2", "DRAM"]);
        assert_eq!((levels[0].min_bytes, levels[0].max_bytes), (K, 16 * K));
        assert_eq!((levels[1].min_bytes, levels[1].max_bytes), (64 * K, 256 * K));
    }

    #[test]
    fn full_curve_measured_on_a_busy_vm() {
        // `micro memlat` (release, 1 KiB..256 MiB): the L3 rises from 12.5 to 21 ns before
        // falling off to DRAM; that is one level, not an L3 and an "L4".
        let curve = [
            (K, 1.27),
            (3 * K / 2, 1.30),
            (2 * K, 1.29),
            (3 * K, 1.26),
            (4 * K, 1.22),
            (6 * K, 1.21),
            (8 * K, 1.22),
            (12 * K, 1.23),
            (16 * K, 1.25),
            (24 * K, 1.26),
            (32 * K, 1.34),
            (48 * K, 3.75),
            (64 * K, 3.77),
            (96 * K, 3.77),
            (128 * K, 4.00),
            (192 * K, 3.89),
            (256 * K, 3.99),
            (384 * K, 5.64),
            (512 * K, 7.49),
            (768 * K, 12.52),
            (M, 14.25),
            (3 * M / 2, 15.61),
            (2 * M, 16.27),
            (3 * M, 16.98),
            (4 * M, 17.12),
            (6 * M, 20.57),
            (8 * M, 20.97),
            (12 * M, 78.91),
            (16 * M, 101.2),
            (24 * M, 138.0),
            (32 * M, 291.9),
            (48 * M, 218.0),
            (64 * M, 206.4),
            (96 * M, 330.2),
            (128 * M, 290.7),
            (192 * M, 392.7),
            (256 * M, 221.4),
        ];
        let levels = detect_levels(&curve);
        assert_eq!(level_names(&levels), ["L1", "L2", "L3", "DRAM"]);
        assert_eq!((levels[0].min_bytes, levels[0].max_bytes), (K, 32 * K));
        assert_eq!((levels[1].min_bytes, levels[1].max_bytes), (48 * K, 256 * K));
        assert_eq!(levels[2].max_bytes, 8 * M);
        assert_eq!(levels[3].max_bytes, 256 * M);
        assert!(
            levels[3].latency_ns > 100.0,
            "DRAM latency is the median of all its points"
        );
    }

    #[test]
    fn order_and_noise_do_not_matter() {
        let mut curve = vec![
            (K, 1.0),
            (2 * K, 1.1),
            (4 * K, 0.95),
            (8 * K, 5.0),
            (16 * K, 5.3),
            (32 * K, 5.1),
        ];
        curve.reverse();
        let levels = detect_levels(&curve);
        assert_eq!(levels.len(), 2);
        assert_eq!(levels[0].name, "L1");
        assert_eq!(levels[1].name, "L2");
        assert_eq!(levels[1].points, 3);
    }

    #[test]
    fn flat_and_empty_curves() {
        assert!(detect_levels(&[]).is_empty());
        let flat = detect_levels(&[(K, 2.0), (2 * K, 2.0), (4 * K, 2.1)]);
        assert_eq!(flat.len(), 1);
        assert_eq!(flat[0].name, "L1");
        // Garbage points are ignored, not fatal.
        assert!(detect_levels(&[(0, 1.0), (K, f64::NAN)]).is_empty());
    }

    #[test]
    fn a_curve_ending_in_a_single_dram_point_keeps_it() {
        let levels = detect_levels(&[(K, 1.0), (2 * K, 1.0), (8 * M, 90.0)]);
        assert_eq!(levels.last().map(|l| l.name.as_str()), Some("DRAM"));
    }

    /// A cache as sysfs reports it, with 64-byte lines.
    fn cache(level: u32, kind: &str, size_bytes: u64) -> CacheInfo {
        CacheInfo {
            level,
            kind: kind.into(),
            size_bytes,
            line_bytes: Some(64),
            ways: None,
            shared_cpus: None,
        }
    }

    /// The caches sysfs reports on the 2-vCPU EPYC VM these curves come from.
    fn epyc_vm() -> Vec<CacheInfo> {
        vec![
            cache(1, "Data", 48 * K),
            cache(1, "Instruction", 32 * K),
            cache(2, "Unified", M),
            cache(3, "Unified", 32 * M),
        ]
    }

    /// Issue 24: `micro memlat --max 128M` printed "L4: 4MiB..6MiB, 27.5 ns; kernel: no such
    /// cache" from two points with CV 48% and 85%. Noisy points are unresolved, not a level,
    /// and a two-point plateau past the kernel's caches is too short to be one.
    #[test]
    fn a_noisy_stretch_past_the_l3_is_unresolved_not_an_l4() {
        let caches = vec![
            cache(1, "Data", 48 * K),
            cache(2, "Unified", 512 * K),
            cache(3, "Unified", 2 * M),
        ];
        let curve = [
            (K, 1.2),
            (2 * K, 1.2),
            (4 * K, 1.2),
            (8 * K, 1.2),
            (16 * K, 1.2),
            (32 * K, 1.3),
            (48 * K, 2.5),
            (64 * K, 4.0),
            (128 * K, 4.1),
            (256 * K, 4.2),
            (512 * K, 6.5),
            (M, 12.0),
            (3 * M / 2, 12.2),
            (2 * M, 12.5),
            (3 * M, 18.0),
            (4 * M, 27.5),
            (6 * M, 27.0),
            (8 * M, 50.0),
            (16 * M, 90.0),
            (32 * M, 95.0),
            (64 * M, 100.0),
            (128 * M, 105.0),
        ];
        // Without the spread, the level 3 found (the kernel's L3) is followed by a "plateau" of
        // two points past the L3: too short.
        let plain = read_levels(&curve, &caches);
        assert_eq!(names(&plain), ["L1", "L2", "L3", "DRAM"], "{plain:?}");
        assert!(
            plain
                .notes
                .iter()
                .any(|n| n.starts_with("unresolved: 4MiB..6MiB: a plateau of 2 point(s)")),
            "{:?}",
            plain.notes
        );
        // With it, the two points are named with their spread.
        let cvs: Vec<(u64, f64)> = curve
            .iter()
            .map(|p| match p.0 {
                s if s == 4 * M => (s, 0.48),
                s if s == 6 * M => (s, 0.85),
                s => (s, 0.02),
            })
            .collect();
        let spread = read_levels_spread(&curve, &cvs, &caches);
        assert_eq!(names(&spread), ["L1", "L2", "L3", "DRAM"], "{spread:?}");
        assert!(!spread.lines().iter().any(|l| l.starts_with("L4")));
        assert!(
            spread.notes.iter().any(
                |n| n.starts_with("unresolved: 4MiB..6MiB: its samples vary too much to show a level (CV 48%, 85%")
            ),
            "{:?}",
            spread.notes
        );
        // Three noisy points past the L3 are not a level either; three quiet ones are.
        let mut long = curve.to_vec();
        long.push((5 * M, 27.2));
        let noisy: Vec<(u64, f64)> = long
            .iter()
            .map(|p| (p.0, if (4 * M..=6 * M).contains(&p.0) { 0.5 } else { 0.02 }))
            .collect();
        let h = read_levels_spread(&long, &noisy, &caches);
        assert_eq!(names(&h), ["L1", "L2", "L3", "DRAM"], "{h:?}");
        assert!(h
            .notes
            .iter()
            .any(|n| n.starts_with("unresolved: 4MiB..6MiB: a plateau past the caches")));
        let quiet: Vec<(u64, f64)> = long.iter().map(|p| (p.0, 0.02)).collect();
        let h = read_levels_spread(&long, &quiet, &caches);
        assert_eq!(names(&h), ["L1", "L2", "L3", "L4", "DRAM"], "{h:?}");
        assert!(!h.notes.iter().any(|n| n.starts_with("unresolved")));
        // A noisy stretch inside a kernel cache keeps the level's name and row, with a note.
        let noisy_l1: Vec<(u64, f64)> = curve
            .iter()
            .map(|p| (p.0, if p.0 <= 4 * K { 0.3 } else { 0.02 }))
            .collect();
        let h = read_levels_spread(&curve, &noisy_l1, &caches);
        assert_eq!(names(&h), names(&plain));
        assert!(
            h.notes.iter().any(|n| n.starts_with("unresolved: 1KiB..4KiB")),
            "{:?}",
            h.notes
        );
    }

    fn level_names(levels: &[Level]) -> Vec<&str> {
        levels.iter().map(|l| l.name.as_str()).collect()
    }

    fn names(h: &Hierarchy) -> Vec<&str> {
        h.rows.iter().map(|r| r.name.as_str()).collect()
    }

    fn row<'a>(h: &'a Hierarchy, name: &str) -> &'a LevelRow {
        h.rows
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no {name}: {h:?}"))
    }

    /// Found in review: `micro all --quick` printed `DRAM 8MiB..8MiB` and no L3 on a machine
    /// whose L3 is 32 MiB. A curve that ends below the L3 has not reached main memory.
    #[test]
    fn a_curve_ending_below_the_l3_has_not_reached_dram() {
        let curve = [
            (K, 1.2),
            (2 * K, 1.2),
            (4 * K, 1.2),
            (8 * K, 1.2),
            (16 * K, 1.2),
            (32 * K, 1.25),
            (64 * K, 3.8),
            (128 * K, 3.7),
            (256 * K, 3.7),
            (512 * K, 10.2),
            (M, 14.5),
            (2 * M, 25.0),
            (4 * M, 60.0),
            (8 * M, 300.0),
        ];
        assert_eq!(detect_levels(&curve).last().unwrap().name, "DRAM", "the old reading");
        let h = read_levels(&curve, &epyc_vm());
        assert_eq!(names(&h), ["L1", "L2", "L3 (or beyond)", "DRAM"]);
        let l3 = row(&h, "L3 (or beyond)");
        assert_eq!(l3.level.as_ref().map(|l| l.max_bytes), Some(8 * M));
        assert_eq!(l3.kernel, "L3 unified 32MiB");
        let dram = row(&h, "DRAM");
        assert!(dram.level.is_none());
        assert_eq!(
            dram.missing.as_deref(),
            Some("not reached — raise --max to at least 64MiB")
        );
        let note = h
            .notes
            .iter()
            .find(|n| n.starts_with("L3 (or beyond)"))
            .expect("a note");
        assert!(
            note.contains(
                "the curve ends at 8MiB, below the 32MiB L3 the kernel reports — raise --max to at least 64MiB"
            ),
            "{note}"
        );
        assert!(note.contains("already that of main memory"), "{note}");
        assert!(note.contains("share of this cache"), "{note}");
        let lines = h.lines();
        assert!(lines.iter().any(|l| l.starts_with("DRAM: not reached")), "{lines:?}");
        assert!(!lines.iter().any(|l| l.starts_with("DRAM: 8MiB")), "{lines:?}");
    }

    #[test]
    fn a_curve_ending_before_any_dram_like_point_lists_the_levels_not_reached() {
        let curve = [
            (K, 1.2),
            (4 * K, 1.2),
            (16 * K, 1.2),
            (64 * K, 3.8),
            (128 * K, 3.7),
            (256 * K, 3.8),
        ];
        let h = read_levels(&curve, &epyc_vm());
        assert_eq!(names(&h), ["L1", "L2", "L3", "DRAM"]);
        let l3 = row(&h, "L3");
        assert!(l3.level.is_none());
        assert_eq!(
            l3.missing.as_deref(),
            Some("not reached: the curve ends at 256KiB, below the 32MiB L3 the kernel reports — raise --max to at least 64MiB")
        );
        assert_eq!(
            row(&h, "DRAM").missing.as_deref(),
            Some("not reached — raise --max to at least 64MiB")
        );
    }

    #[test]
    fn ending_just_past_the_l3_is_not_yet_main_memory() {
        let curve = [
            (K, 1.2),
            (4 * K, 1.2),
            (64 * K, 3.8),
            (128 * K, 3.8),
            (2 * M, 15.0),
            (4 * M, 15.5),
            (48 * M, 90.0),
            (56 * M, 95.0),
        ];
        let h = read_levels(&curve, &epyc_vm());
        assert_eq!(names(&h), ["L1", "L2", "L3", "beyond L3", "DRAM"]);
        assert!(
            h.notes.iter().any(|n| n.contains("less than 2x the 32MiB L3")),
            "{:?}",
            h.notes
        );
        assert!(row(&h, "DRAM").level.is_none());
    }

    /// Found in review: `memlat --max 64M` placed the L3 at 1.5-4 MiB on a machine whose
    /// sysfs says 32 MiB, without a word.
    #[test]
    fn an_l3_edge_far_below_the_kernels_size_says_why_it_may_be() {
        let curve = [
            (K, 1.2),
            (4 * K, 1.2),
            (16 * K, 1.2),
            (32 * K, 1.3),
            (48 * K, 3.7),
            (64 * K, 3.8),
            (256 * K, 3.9),
            (512 * K, 7.5),
            (3 * M / 2, 15.0),
            (2 * M, 16.0),
            (4 * M, 18.0),
            (6 * M, 80.0),
            (8 * M, 95.0),
            (16 * M, 100.0),
            (64 * M, 110.0),
        ];
        let h = read_levels(&curve, &epyc_vm());
        assert_eq!(names(&h), ["L1", "L2", "L3", "DRAM"]);
        assert!(
            row(&h, "DRAM").level.is_some(),
            "64MiB is 2x the L3: main memory reached"
        );
        assert!(
            !h.notes.iter().any(|n| n.starts_with("L1:")),
            "L1 edge 32..48KiB fits 48KiB: {:?}",
            h.notes
        );
        let l2 = h
            .notes
            .iter()
            .find(|n| n.starts_with("L2:"))
            .expect("L2 ends at 256KiB, not 1MiB");
        assert!(
            l2.contains("between 256KiB and 512KiB, below the 1MiB the kernel reports"),
            "{l2}"
        );
        assert!(l2.contains("TLB reach"), "{l2}");
        let l3 = h.notes.iter().find(|n| n.starts_with("L3:")).expect("a note on the L3");
        assert!(
            l3.contains("between 4MiB and 6MiB, below the 32MiB the kernel reports"),
            "{l3}"
        );
        assert!(l3.contains("share of this cache the run really gets"), "{l3}");
        assert!(l3.contains("inclusive"), "{l3}");
    }

    #[test]
    fn a_plateau_past_the_kernels_size_may_be_an_exclusive_cache() {
        let curve = |l2_end: u64| {
            [
                (K, 1.2),
                (8 * K, 1.2),
                (32 * K, 1.2),
                (64 * K, 4.0),
                (512 * K, 4.0),
                (l2_end, 4.1),
                (4 * M, 15.0),
                (8 * M, 15.0),
                (80 * M, 100.0),
                (128 * M, 100.0),
            ]
        };
        let h = read_levels(&curve(M + 32 * K), &epyc_vm());
        let l2 = h
            .notes
            .iter()
            .find(|n| n.starts_with("L2:"))
            .expect("L2 goes on past 1MiB");
        assert!(l2.contains("goes on to 1.0MiB, past the 1MiB"), "{l2}");
        assert!(l2.contains("exclusive"), "{l2}");
        // Past even L1 + L2: not an exclusive cache.
        let h = read_levels(&curve(3 * M), &epyc_vm());
        let l2 = h
            .notes
            .iter()
            .find(|n| n.starts_with("L2:"))
            .expect("L2 goes on to 3MiB");
        assert!(l2.contains("prefetching"), "{l2}");
    }

    #[test]
    fn a_curve_starting_above_l1_numbers_from_l2() {
        let curve = [
            (64 * K, 3.8),
            (128 * K, 3.8),
            (256 * K, 3.9),
            (2 * M, 15.0),
            (4 * M, 15.5),
            (80 * M, 100.0),
            (128 * M, 105.0),
        ];
        let h = read_levels(&curve, &epyc_vm());
        assert_eq!(names(&h), ["L1", "L2", "L3", "DRAM"]);
        assert!(row(&h, "L1")
            .missing
            .as_deref()
            .unwrap()
            .starts_with("not measured: the curve starts at 64KiB"));
        assert_eq!(row(&h, "L2").level.as_ref().map(|l| l.min_bytes), Some(64 * K));
    }

    #[test]
    fn without_sysfs_caches_the_levels_are_not_checked_and_say_so() {
        let h = read_levels(&[(K, 1.0), (2 * K, 1.0), (8 * M, 90.0)], &[]);
        assert_eq!(names(&h), ["L1", "DRAM"]);
        assert!(h.notes[0].contains("no cache sizes"), "{:?}", h.notes);
        assert!(read_levels(&[], &epyc_vm()).rows.is_empty());
    }

    #[test]
    fn repetitions_are_reduced_to_their_median_per_working_set() {
        let pts = [
            (2 * K, 5.0),
            (K, 1.0),
            (K, 9.0),
            (K, 2.0),
            (2 * K, 6.0),
            (4 * K, f64::NAN),
        ];
        assert_eq!(median_per_size(&pts), vec![(K, 2.0), (2 * K, 5.5)]);
    }

    #[test]
    fn latencies_have_three_significant_digits() {
        assert_eq!(ns_text(1.234), "1.23");
        assert_eq!(ns_text(21.04), "21.0");
        assert_eq!(ns_text(308.6), "309");
    }
}
