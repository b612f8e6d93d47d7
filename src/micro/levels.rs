//! Finding the memory hierarchy in a latency curve: plateaus of nearly constant latency over
//! growing working sets are the cache levels, the last high one is DRAM. Pure, so the report
//! can run it on stored curve points.

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

/// Detect the levels in (working-set bytes, latency ns) points, in any order. First the
/// transitions are set aside: points more than 1.3x away from both neighbours (the last point
/// is kept: the curve may end on a level). The rest are grouped into plateaus of points within
/// 1.5x of the plateau's lowest latency. Plateaus need at least two points, except the last
/// one. Consecutive plateaus at DRAM latency (TLB reach effects) merge into one DRAM level.
pub fn detect_levels(points: &[(u64, f64)]) -> Vec<Level> {
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
        .filter(|(i, p)| p.len() >= 2 || (*i == count - 1 && count > 1))
        .map(|(_, p)| p)
        .collect();
    // Neighbouring plateaus whose medians are within the tolerance are one level whose latency
    // rises slowly (a shared last-level cache, TLB reach): merge them.
    let mut merged: Vec<Vec<(u64, f64)>> = Vec::new();
    for plateau in kept {
        match merged.last_mut() {
            Some(prev) if within(median_of(prev), median_of(&plateau)) => prev.extend(plateau),
            _ => merged.push(plateau),
        }
    }
    let mut levels: Vec<Level> = Vec::new();
    let mut cache_index = 1;
    let mut dram: Vec<(u64, f64)> = Vec::new();
    for plateau in merged {
        if median_of(&plateau) >= DRAM_NS || !dram.is_empty() {
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

fn within(a: f64, b: f64) -> bool {
    a.max(b) / a.min(b) <= PLATEAU_TOLERANCE
}

fn median_of(points: &[(u64, f64)]) -> f64 {
    let mut lat: Vec<f64> = points.iter().map(|p| p.1).collect();
    crate::measure::stats::median(&mut lat)
}

fn level(name: String, points: &[(u64, f64)]) -> Level {
    Level {
        name,
        min_bytes: points.iter().map(|p| p.0).min().unwrap_or(0),
        max_bytes: points.iter().map(|p| p.0).max().unwrap_or(0),
        latency_ns: median_of(points),
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
        let names: Vec<&str> = levels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["L1", "L2", "L3", "DRAM"]);
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
        let names: Vec<&str> = levels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["L1", "L2", "DRAM"]);
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
        let names: Vec<&str> = levels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["L1", "L2", "L3", "DRAM"]);
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
}
