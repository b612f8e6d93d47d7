//! The paired statistics of an A/B run (`iopath ab`): every case ran as variant A (the system
//! as it was) and variant B (with the settings), one A and one B per repetition, next to each
//! other in time (ABBA or a seeded random order within each pair). A pair's ratio B/A cancels
//! whatever the machine did over the run; what is left is the settings' effect and the noise
//! between two neighbouring cells.
//!
//! Per cell: the geometric mean of the pairs' ratios B/A with a 95% bootstrap interval (pairs
//! resampled, `compare::cell_seed` of the label, `compare::BOOTSTRAP_RESAMPLES`), the exact
//! two-sided Wilcoxon signed-rank test of the log ratios, p adjusted over the cells
//! (`compare::Correction`), and `compare::decide`'s verdict. Whole run: every cell's log
//! ratios oriented so that up is better, the mean over cells of their means with a stratified
//! bootstrap (pairs resampled within cells), the signed-rank test over all pairs. The gate is
//! `compare::Gate`, with `compare --fail-on-regression`'s exit codes.

use super::compare::{self, CompareOptions, Gate, Verdict};
use crate::measure::stats::SplitMix64;
use crate::observation::Role;
use crate::store::ab::{AbRun, Variant};
use crate::store::RunData;
use serde::Serialize;

/// One case's pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AbRow {
    pub label: String,
    pub metric: String,
    pub unit: String,
    pub higher_is_better: bool,
    /// Pairs with both values.
    pub pairs: usize,
    pub median_a: Option<f64>,
    pub median_b: Option<f64>,
    /// Geometric mean of the pairs' B/A.
    pub ratio: Option<f64>,
    pub ratio_ci95: Option<(f64, f64)>,
    /// Pairs in which B was better, worse (by the metric's direction).
    pub b_better: usize,
    pub b_worse: usize,
    /// Exact two-sided Wilcoxon signed-rank p of ln(B/A), and adjusted over the cells.
    pub p: f64,
    pub p_adjusted: f64,
    pub verdict: Verdict,
    pub reason: String,
    /// The (A, B) values of each pair, in repetition order.
    pub values: Vec<(f64, f64)>,
}

/// The verdict over every pair of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AbWhole {
    pub pairs: usize,
    /// exp(mean over cells of the mean oriented log ratio): above 1 means B is better.
    pub better_ratio: Option<f64>,
    pub better_ratio_ci95: Option<(f64, f64)>,
    pub p: f64,
    pub verdict: Verdict,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AbAnalysis {
    pub threshold: f64,
    pub alpha: f64,
    pub correction: compare::Correction,
    pub rows: Vec<AbRow>,
    pub whole: AbWhole,
    /// Cases without a single complete pair.
    pub unpaired: Vec<String>,
}

/// A cell's label in an A/B run: the case's label and its variant (`one-copy 64KiB t1 [B]`),
/// so that the report's tables and charts tell the two apart.
pub fn variant_label(label: &str, variant: Variant) -> String {
    format!("{label} [{}]", variant.as_str())
}

/// The case's label and the variant of a label made by [`variant_label`].
pub fn split_variant(label: &str) -> Option<(&str, Variant)> {
    if let Some(base) = label.strip_suffix(" [A]") {
        Some((base, Variant::A))
    } else {
        label.strip_suffix(" [B]").map(|base| (base, Variant::B))
    }
}

/// One case's pairs: its label, its headline (name, role, higher is better), the (A, B) values.
struct CasePairs {
    label: String,
    name: &'static str,
    role: Role,
    higher: bool,
    values: Vec<(f64, f64)>,
}

/// The pairs of every case of `data`: variant A's case at position i and variant B's at the
/// same index among the B cases, matched by repetition, with the value of the case's headline.
fn pairs_of(data: &RunData, ab: &AbRun) -> Vec<CasePairs> {
    let a_positions: Vec<usize> = (0..ab.variants.len())
        .filter(|&p| ab.variants[p] == Variant::A)
        .collect();
    let b_positions: Vec<usize> = (0..ab.variants.len())
        .filter(|&p| ab.variants[p] == Variant::B)
        .collect();
    let value = |position: usize, repetition: u32, name: &str, role: Role| {
        data.cells
            .iter()
            .find(|c| c.position == position && c.repetition == repetition && c.error.is_none())
            .and_then(|c| c.observation.metrics.iter().find(|m| m.name == name && m.role == role))
            .and_then(|m| m.value)
    };
    a_positions
        .iter()
        .zip(&b_positions)
        .filter_map(|(&a, &b)| {
            let case = data.cases.get(a)?;
            let h = case.as_workload().headline();
            let values = (0..data.run.repetitions)
                .filter_map(|r| Some((value(a, r, h.name, h.role)?, value(b, r, h.name, h.role)?)))
                .filter(|(x, y)| *x > 0.0 && *y > 0.0)
                .collect();
            Some(CasePairs {
                label: case.label(),
                name: h.name,
                role: h.role,
                higher: h.higher_is_better,
                values,
            })
        })
        .collect()
}

/// Exact two-sided Wilcoxon signed-rank p of `d` (zeros dropped, ties given mid-ranks; the
/// exact null distribution of the rank sum counted over doubled ranks; a normal approximation
/// above 60 values).
pub fn signed_rank_p(d: &[f64]) -> f64 {
    let mut nonzero: Vec<f64> = d.iter().copied().filter(|x| *x != 0.0 && x.is_finite()).collect();
    let n = nonzero.len();
    if n == 0 {
        return 1.0;
    }
    nonzero.sort_by(|x, y| x.abs().total_cmp(&y.abs()));
    // Doubled mid-ranks, so tied ranks stay whole numbers.
    let mut ranks2 = vec![0usize; n];
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && nonzero[j + 1].abs() == nonzero[i].abs() {
            j += 1;
        }
        for r in ranks2.iter_mut().take(j + 1).skip(i) {
            *r = i + j + 2;
        }
        i = j + 1;
    }
    let total: usize = ranks2.iter().sum();
    let w_plus: usize = nonzero
        .iter()
        .zip(&ranks2)
        .filter(|(x, _)| **x > 0.0)
        .map(|(_, r)| r)
        .sum();
    let extreme = w_plus.min(total - w_plus);
    if n > 60 {
        let mean = total as f64 / 2.0;
        let sd = (ranks2.iter().map(|r| (*r as f64).powi(2)).sum::<f64>() / 4.0).sqrt();
        let z = (mean - extreme as f64) / sd.max(f64::MIN_POSITIVE);
        return (2.0 * compare::standard_normal_upper_tail(z)).min(1.0);
    }
    // counts[s]: sign assignments whose positive doubled-rank sum is s.
    let mut counts = vec![0f64; total + 1];
    counts[0] = 1.0;
    for &r in &ranks2 {
        for s in (r..=total).rev() {
            counts[s] += counts[s - r];
        }
    }
    let tail: f64 = counts[..=extreme].iter().sum();
    (2.0 * tail / 2f64.powi(n as i32)).min(1.0)
}

/// The smallest p the signed-rank test reaches with `n` pairs: 2^(1 - n).
pub fn smallest_possible_p(n: usize) -> f64 {
    2f64.powi(1 - n as i32).min(1.0)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Bootstrap of exp(mean over strata of each stratum's mean): pairs resampled within each.
fn stratified_bootstrap(strata: &[Vec<f64>], seed: u64) -> Option<(f64, f64)> {
    let strata: Vec<&Vec<f64>> = strata.iter().filter(|s| !s.is_empty()).collect();
    if strata.is_empty() {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let mut means: Vec<f64> = (0..compare::BOOTSTRAP_RESAMPLES)
        .map(|_| {
            let total: f64 = strata
                .iter()
                .map(|s| (0..s.len()).map(|_| s[rng.index(s.len())]).sum::<f64>() / s.len() as f64)
                .sum();
            (total / strata.len() as f64).exp()
        })
        .collect();
    Some(compare::percentile_interval_95(&mut means))
}

/// The fewest pairs whose signed-rank test can reach p < 0.05 (2^(1-6) = 0.031).
pub const MIN_PAIRS_TO_DECIDE: usize = 6;

/// `compare::decide` for `pairs` pairs: inconclusive below [`MIN_PAIRS_TO_DECIDE`] (compare's
/// own minimum counts repetitions a side of a rank-sum test).
fn decide_pairs(
    ci: Option<(f64, f64)>,
    p: f64,
    p_name: &str,
    pairs: usize,
    higher_is_better: bool,
    options: &CompareOptions,
) -> (Verdict, String) {
    if pairs < MIN_PAIRS_TO_DECIDE {
        return (
            Verdict::Inconclusive,
            format!(
                "too few pairs to decide ({pairs}; the signed-rank test needs {MIN_PAIRS_TO_DECIDE} to reach p < 0.05)"
            ),
        );
    }
    compare::decide(ci, p, p_name, (pairs, pairs), higher_is_better, options)
}

/// The paired analysis of an A/B run.
pub fn analyse(data: &RunData, ab: &AbRun, options: &CompareOptions) -> AbAnalysis {
    let mut rows = Vec::new();
    let mut unpaired = Vec::new();
    for CasePairs {
        label,
        name,
        role,
        higher,
        values,
    } in pairs_of(data, ab)
    {
        if values.is_empty() {
            unpaired.push(label);
            continue;
        }
        let d: Vec<f64> = values.iter().map(|(a, b)| (b / a).ln()).collect();
        let ci = stratified_bootstrap(std::slice::from_ref(&d), compare::cell_seed(&label));
        let better = |x: &f64| if higher { *x > 0.0 } else { *x < 0.0 };
        let worse = |x: &f64| if higher { *x < 0.0 } else { *x > 0.0 };
        let unit = data
            .cells
            .iter()
            .flat_map(|c| c.observation.metrics.iter())
            .find(|m| m.name == name && m.role == role)
            .map(|m| m.unit.clone())
            .unwrap_or_default();
        rows.push(AbRow {
            metric: format!("{role}.{name}"),
            unit,
            higher_is_better: higher,
            pairs: values.len(),
            median_a: crate::measure::stats::median_of(&values.iter().map(|v| v.0).collect::<Vec<_>>()),
            median_b: crate::measure::stats::median_of(&values.iter().map(|v| v.1).collect::<Vec<_>>()),
            ratio: Some(mean(&d).exp()),
            ratio_ci95: ci,
            b_better: d.iter().filter(|x| better(x)).count(),
            b_worse: d.iter().filter(|x| worse(x)).count(),
            p: signed_rank_p(&d),
            p_adjusted: 1.0,
            verdict: Verdict::Inconclusive,
            reason: String::new(),
            values,
            label,
        });
    }
    let adjusted = options.correction.adjust(&rows.iter().map(|r| r.p).collect::<Vec<_>>());
    let p_name = match options.correction {
        compare::Correction::None => "p".to_string(),
        c => format!("{} p", c.as_str().to_uppercase().replace("HOLM", "Holm")),
    };
    for (row, p) in rows.iter_mut().zip(adjusted) {
        row.p_adjusted = p;
        (row.verdict, row.reason) = decide_pairs(row.ratio_ci95, p, &p_name, row.pairs, row.higher_is_better, options);
    }
    let oriented: Vec<Vec<f64>> = rows
        .iter()
        .map(|r| {
            r.values
                .iter()
                .map(|(a, b)| if r.higher_is_better { (b / a).ln() } else { (a / b).ln() })
                .collect()
        })
        .collect();
    let all: Vec<f64> = oriented.iter().flatten().copied().collect();
    let better_ratio =
        (!oriented.is_empty()).then(|| (oriented.iter().map(|d| mean(d)).sum::<f64>() / oriented.len() as f64).exp());
    let ci = stratified_bootstrap(&oriented, compare::BOOTSTRAP_SEED);
    let p = signed_rank_p(&all);
    let (verdict, reason) = decide_pairs(ci, p, "p", all.len(), true, options);
    AbAnalysis {
        threshold: options.threshold,
        alpha: options.alpha,
        correction: options.correction,
        rows,
        whole: AbWhole {
            pairs: all.len(),
            better_ratio,
            better_ratio_ci95: ci,
            p,
            verdict,
            reason: reason.replace("B/A", "B/A (up: B better)"),
        },
        unpaired,
    }
}

impl AbAnalysis {
    /// What `--fail-on-regression` decides, as `compare` does: a regression when the whole run
    /// or a cell is worse with B; undecidable when no cell can reach alpha with its pairs and
    /// the whole run decided nothing; a pass otherwise.
    pub fn gate(&self) -> Gate {
        let worse: Vec<&str> = self
            .rows
            .iter()
            .filter(|r| r.verdict == Verdict::Slower)
            .map(|r| r.label.as_str())
            .collect();
        if self.whole.verdict == Verdict::Slower || !worse.is_empty() {
            let mut parts = Vec::new();
            if self.whole.verdict == Verdict::Slower {
                parts.push(format!("the whole run is worse with B ({})", self.whole.reason));
            }
            if !worse.is_empty() {
                parts.push(format!("{} cell(s) worse with B: {}", worse.len(), worse.join(", ")));
            }
            return Gate::Regression(format!("{} (--fail-on-regression)", parts.join("; ")));
        }
        if self.rows.is_empty() {
            return Gate::Undecidable("undecidable (--fail-on-regression, exit 3): no complete A/B pair".into());
        }
        let m = self.rows.len();
        let min_p0 = self
            .rows
            .iter()
            .map(|r| smallest_possible_p(r.pairs))
            .fold(1.0, f64::min);
        let decidable = self
            .rows
            .iter()
            .any(|r| self.correction.best_adjusted(smallest_possible_p(r.pairs), min_p0, m) < self.alpha);
        if !decidable && self.whole.verdict == Verdict::Inconclusive {
            return Gate::Undecidable(format!(
                "undecidable (--fail-on-regression, exit 3): no cell can reach p < {} with its pairs ({MIN_PAIRS_TO_DECIDE} or more pairs a cell can; --reps sets them) and the whole-run verdict is inconclusive",
                self.alpha
            ));
        }
        Gate::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signed_rank_test_is_exact_for_small_samples() {
        // Six pairs all one way: 2 / 2^6.
        assert!((signed_rank_p(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) - 2.0 / 64.0).abs() < 1e-12);
        assert!((smallest_possible_p(6) - 2.0 / 64.0).abs() < 1e-12);
        assert_eq!(signed_rank_p(&[0.0, 0.0]), 1.0);
        // Symmetric data: p of 1.
        assert!((signed_rank_p(&[1.0, -1.0, 2.0, -2.0]) - 1.0).abs() < 1e-12);
        // Large samples take the normal approximation and still see a clear shift.
        let shifted: Vec<f64> = (0..100).map(|i| 0.5 + (i % 7) as f64 - 3.0).collect();
        let p = signed_rank_p(&shifted);
        assert!(p > 0.0 && p < 0.05, "{p}");
    }

    /// An A/B run of one stream case: A's and B's throughput per repetition.
    fn ab_run(a: &[f64], b: &[f64]) -> (RunData, AbRun) {
        use crate::case::CopyMode;
        use crate::report::cells::tests::{run_data, stream_case};
        let case = stream_case(CopyMode::TwoCopy, 4096, 1);
        let mut data = run_data(vec![(case.clone(), a.to_vec()), (case, b.to_vec())]);
        data.run.repetitions = a.len() as u32;
        let ab = AbRun {
            settings: vec!["dev:client:gro=off".into()],
            pair_order: "abba".into(),
            scope: "topology".into(),
            variants: vec![Variant::A, Variant::B],
        };
        (data, ab)
    }

    #[test]
    fn the_gate_finds_a_paired_slowdown_passes_no_change_and_cannot_decide_three_pairs() {
        let options = CompareOptions::default();
        // Both variants drift together from pair to pair; B is 10% lower in every pair.
        let a = [10.0, 12.0, 9.0, 11.0, 13.0, 10.5];
        let b: Vec<f64> = a.iter().map(|v| v * 0.9).collect();
        let (data, ab) = ab_run(&a, &b);
        let analysis = analyse(&data, &ab, &options);
        assert_eq!(analysis.rows[0].verdict, Verdict::Slower, "{analysis:?}");
        assert_eq!(analysis.rows[0].b_worse, 6);
        assert_eq!(analysis.gate().exit_code(), 1);
        let (data, ab) = ab_run(&a, &a);
        let analysis = analyse(&data, &ab, &options);
        assert_eq!(analysis.whole.verdict, Verdict::NoChange);
        assert_eq!(analysis.gate().exit_code(), 0);
        let (data, ab) = ab_run(&a[..3], &b[..3]);
        let analysis = analyse(&data, &ab, &options);
        assert_eq!(analysis.gate().exit_code(), 3, "{analysis:?}");
        assert!(analysis.rows[0].reason.contains("too few pairs"));
    }

    #[test]
    fn stratified_bootstrap_holds_a_constant_shift() {
        let (lo, hi) = stratified_bootstrap(&[vec![0.1; 5], vec![0.1; 3]], 1).unwrap();
        assert!((lo - 0.1f64.exp()).abs() < 1e-12 && (hi - 0.1f64.exp()).abs() < 1e-12);
    }
}
