//! Comparing two runs cell by cell, and as a whole, in a way a CI can gate on. For each matched
//! cell and its headline metric (or `--metric`):
//!
//! - the ratio of medians B/A with a 95% percentile-bootstrap interval (2000 resamples of each
//!   run's repetitions, a fixed seed per cell, so the same data always gives the same interval);
//! - a two-sided Mann-Whitney U test (exact for small samples without ties, normal
//!   approximation with the tie correction otherwise), its p-values adjusted for the many cells
//!   compared: Benjamini-Hochberg (false discovery rate) by default, Holm's step-down method
//!   (any false alarm) or none on request;
//! - a verdict against a noise band of ±threshold around a ratio of 1: `faster`/`slower` when
//!   the whole interval lies beyond the band and the adjusted p is below alpha, `no change` when
//!   the whole interval lies inside the band, `inconclusive` otherwise (the interval straddles a
//!   band edge, or the difference is not significant, or too few repetitions to decide).
//!
//! Beside the cells, a whole-run verdict: the geometric mean of the cells' median ratios with a
//! bootstrap interval (the same resamples of repetitions within each cell, summed across cells,
//! so only one resample count of numbers is held at a time) and a sign test across the cells.
//! Before any test, the design: the smallest p each cell can reach after the correction, and
//! how many repetitions would make it decidable. `gate` turns all of it into an exit code.
//!
//! Beside the verdicts: which parameters differ between the runs' cases (why cells do not
//! match) and which parts of the environment fingerprint differ.

use super::cells::{headline, CellSummary};
use crate::case::Case;
use crate::measure::stats::SplitMix64;
use crate::observation::Role;
use crate::store::RunSummary;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;

pub const ALPHA: f64 = 0.05;

/// U of the first sample and the two-sided p-value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    pub u: f64,
    pub p: f64,
}

/// Two-sided Mann-Whitney U test. None when either sample is empty.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 || a.iter().chain(b).any(|v| !v.is_finite()) {
        return None;
    }
    // Midranks of the pooled sample.
    let mut pooled: Vec<(f64, usize)> = a.iter().map(|&v| (v, 0)).chain(b.iter().map(|&v| (v, 1))).collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = pooled.len();
    let mut ranks = vec![0.0; n];
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let midrank = (i + j) as f64 / 2.0 + 1.0;
        ranks[i..=j].iter_mut().for_each(|r| *r = midrank);
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let rank_sum_a: f64 = pooled
        .iter()
        .zip(&ranks)
        .filter(|((_, g), _)| *g == 0)
        .map(|(_, r)| r)
        .sum();
    let u = rank_sum_a - (n1 * (n1 + 1)) as f64 / 2.0;
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let p = if tie_term == 0.0 && n1 * n2 <= EXACT_MAX_PRODUCT {
        exact_two_sided(n1, n2, u)
    } else {
        let mean = n1f * n2f / 2.0;
        let var = n1f * n2f / 12.0 * ((n1f + n2f + 1.0) - tie_term / ((n1f + n2f) * (n1f + n2f - 1.0)));
        if var <= 0.0 {
            1.0
        } else {
            let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
            (2.0 * normal_upper_tail(z)).min(1.0)
        }
    };
    // The normal approximation (used with ties) can claim more than any arrangement of so few
    // values allows: no p is smaller than the exact test's smallest.
    Some(MannWhitney {
        u,
        p: p.max(smallest_possible_p(n1, n2)),
    })
}

/// Exact two-sided p: 2 P(U <= min(u, n1 n2 - u)) from the count of arrangements per U.
fn exact_two_sided(n1: usize, n2: usize, u: f64) -> f64 {
    let max_u = n1 * n2;
    // counts[m][n][u]: arrangements of m and n values with statistic u, built up one value at a time.
    let mut table = vec![vec![Vec::<f64>::new(); n2 + 1]; n1 + 1];
    for m in 0..=n1 {
        for n in 0..=n2 {
            let mut counts = vec![0.0; m * n + 1];
            if m == 0 || n == 0 {
                counts[0] = 1.0;
            } else {
                for (k, c) in counts.iter_mut().enumerate() {
                    // The largest value is from A (adds n to U) or from B (adds nothing).
                    let from_a = if k >= n {
                        table[m - 1][n].get(k - n).copied().unwrap_or(0.0)
                    } else {
                        0.0
                    };
                    let from_b = table[m][n - 1].get(k).copied().unwrap_or(0.0);
                    *c = from_a + from_b;
                }
            }
            table[m][n] = counts;
        }
    }
    let counts = &table[n1][n2];
    let total: f64 = counts.iter().sum();
    let low = u.min(max_u as f64 - u).floor() as usize;
    let tail: f64 = counts.iter().take(low + 1).sum();
    (2.0 * tail / total).min(1.0)
}

/// Smallest two-sided p an exact test can give with these sample sizes (no ties): complete
/// separation, 2 / C(n1 + n2, n1). Computed in log space: constant memory at any size (the
/// table of `exact_two_sided` grows with (n1 n2)^2 and is only built for small samples).
pub fn smallest_possible_p(n1: usize, n2: usize) -> f64 {
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    (2.0 * (-ln_choose(n1 + n2, n1)).exp()).min(1.0)
}

/// ln C(n, k).
fn ln_choose(n: usize, k: usize) -> f64 {
    let k = k.min(n - k);
    (0..k).map(|i| ((n - i) as f64).ln() - ((i + 1) as f64).ln()).sum()
}

/// The largest n1 n2 for which the exact distribution of U is computed; above it (and with
/// ties at any size) the normal approximation with the tie correction is used.
pub const EXACT_MAX_PRODUCT: usize = 400;

/// P(Z > z) for a standard normal (Abramowitz-Stegun 7.1.26 for erfc, error < 1.5e-7).
fn normal_upper_tail(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.3275911 * x.abs());
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let erfc = poly * (-x * x).exp();
    if x >= 0.0 {
        erfc / 2.0
    } else {
        1.0 - erfc / 2.0
    }
}

/// The z with P(Z > z) = `upper` (0 < upper < 1), by bisection on `normal_upper_tail`.
pub fn normal_quantile_upper(upper: f64) -> f64 {
    let (mut lo, mut hi) = (-40.0f64, 40.0f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if normal_upper_tail(mid) > upper {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// The default noise band: changes within ±3% are "no change".
pub const DEFAULT_THRESHOLD: f64 = 0.03;
/// Bootstrap resamples for the interval of the ratio of medians.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;
/// The bootstrap's fixed seed: the same repetitions always give the same interval.
pub const BOOTSTRAP_SEED: u64 = 0x696f_7061_7468;
/// The fewest repetitions a side for which a Mann-Whitney U test can reach p < 0.05.
pub const MIN_REPS_TO_DECIDE: usize = 4;

/// What a matched cell's change means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// B is better beyond the band, and significantly.
    Faster,
    /// B is worse beyond the band, and significantly: a regression.
    Slower,
    /// The whole interval of the ratio lies inside the band.
    NoChange,
    /// The interval straddles a band edge, the change is not significant, or there are too
    /// few repetitions to decide.
    Inconclusive,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::NoChange => "no change",
            Verdict::Inconclusive => "inconclusive",
        })
    }
}

/// How p-values are adjusted for the many cells compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Correction {
    /// Holm's step-down method: controls the chance of any false alarm.
    Holm,
    /// Benjamini-Hochberg: controls the expected share of false alarms among the cells called
    /// changed (the false discovery rate).
    #[default]
    Bh,
    /// Each cell's own p.
    None,
}

impl Correction {
    pub const ALL: [Correction; 3] = [Correction::Holm, Correction::Bh, Correction::None];

    pub fn as_str(self) -> &'static str {
        match self {
            Correction::Holm => "holm",
            Correction::Bh => "bh",
            Correction::None => "none",
        }
    }

    /// In words, for the summary line.
    pub fn describe(self) -> &'static str {
        match self {
            Correction::Holm => "Holm correction",
            Correction::Bh => "Benjamini-Hochberg correction",
            Correction::None => "no correction",
        }
    }

    /// The short name the table's p column carries.
    pub fn column(self) -> &'static str {
        match self {
            Correction::Holm => "p (Holm)",
            Correction::Bh => "p (BH)",
            Correction::None => "p",
        }
    }

    pub fn adjust(self, p: &[f64]) -> Vec<f64> {
        match self {
            Correction::Holm => holm(p),
            Correction::Bh => benjamini_hochberg(p),
            Correction::None => p.to_vec(),
        }
    }

    /// The smallest adjusted p a cell whose own smallest reachable p is `p0` can get among `m`
    /// cells whose smallest reachable p is at best `min_p0`. Holm multiplies the smallest p by
    /// m and never lets a later one fall below it; Benjamini-Hochberg gives back p0 when every
    /// cell reaches its smallest p (the m/rank factors are then 1 at the top rank).
    pub fn best_adjusted(self, p0: f64, min_p0: f64, m: usize) -> f64 {
        match self {
            Correction::Holm => p0.max(m as f64 * min_p0).min(1.0),
            Correction::Bh | Correction::None => p0,
        }
    }

    /// The per-cell alpha a single changed cell must reach (for the detectable-effect
    /// arithmetic): alpha / m under either correction, alpha without one.
    pub fn single_cell_alpha(self, alpha: f64, m: usize) -> f64 {
        match self {
            Correction::None => alpha,
            _ => alpha / m.max(1) as f64,
        }
    }
}

impl fmt::Display for Correction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Correction {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "holm" => Ok(Correction::Holm),
            "bh" | "fdr" | "benjamini-hochberg" => Ok(Correction::Bh),
            "none" => Ok(Correction::None),
            _ => {
                let accepted: Vec<&str> = Correction::ALL.iter().map(|c| c.as_str()).collect();
                Err(format!(
                    "'{text}' is not a correction (accepted: {})",
                    accepted.join(", ")
                ))
            }
        }
    }
}

crate::case::choice_parser!(Correction);

/// How to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOptions {
    /// Half-width of the noise band around a ratio of 1 (0.03 = ±3%).
    pub threshold: f64,
    pub alpha: f64,
    pub correction: Correction,
    /// Parameters left out when matching cells (exact parameter names, see `resolve_ignore`).
    pub ignore: Vec<String>,
}

impl CompareOptions {
    pub fn new(threshold: f64, correction: Correction, ignore: Vec<String>) -> Self {
        CompareOptions {
            threshold,
            alpha: ALPHA,
            correction,
            ignore,
        }
    }
}

/// The defaults: ±3% band, alpha 0.05, Benjamini-Hochberg, every parameter matched.
pub fn default_options() -> CompareOptions {
    CompareOptions::new(DEFAULT_THRESHOLD, Correction::default(), Vec::new())
}

impl Default for CompareOptions {
    fn default() -> Self {
        default_options()
    }
}

/// One matched cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareRow {
    pub label: String,
    /// Run B's label when it differs (cells matched with `--ignore`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_b: Option<String>,
    /// role.name
    pub metric: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub median_a: f64,
    pub median_b: f64,
    /// (B - A) / |A|; 0 when A's median is 0.
    pub change: f64,
    /// B / A; None when A's median is 0.
    pub ratio: Option<f64>,
    /// 95% percentile-bootstrap interval of the ratio.
    pub ratio_ci95: Option<(f64, f64)>,
    /// Mann-Whitney U two-sided p.
    pub p: f64,
    /// p adjusted over every compared cell with the comparison's `correction`.
    pub p_adjusted: f64,
    /// The smallest p this cell's test could give after the correction (no ties): the cell
    /// can be called faster or slower only when it is below alpha.
    pub smallest_possible_p: f64,
    /// p_adjusted < alpha.
    pub significant: bool,
    pub verdict: Verdict,
    /// The verdict the repetitions within one run a side would give, held back (the cell reads
    /// inconclusive) because a shift of the machine between the runs explains it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_back: Option<Verdict>,
    /// Why the verdict is what it is, in words.
    pub reason: String,
    /// Runs of each side that have the cell.
    pub runs_a: usize,
    pub runs_b: usize,
    /// Repetitions of the cell, summed over the side's runs.
    pub n_a: usize,
    pub n_b: usize,
    /// Coefficient of variation of the metric in run A and run B (None below 2 values).
    pub cv_a: Option<f64>,
    pub cv_b: Option<f64>,
}

/// One part of the environment fingerprint that differs between the runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    pub name: String,
    pub a: String,
    pub b: String,
}

/// What the design (cells × repetitions × correction) can decide, worked out before testing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Design {
    pub cells: usize,
    /// The fewest repetitions a side over the compared cells.
    pub min_reps: usize,
    /// The smallest p any cell's test can give (complete separation, no ties).
    pub smallest_p: f64,
    /// The smallest p any cell can reach after the correction.
    pub smallest_adjusted_p: f64,
    /// Whether any cell can reach p < alpha after the correction.
    pub cells_decidable: bool,
    /// Repetitions a side (equal on both sides) with which a cell could reach alpha with this
    /// many cells and this correction; None when even 1000 cannot.
    pub reps_to_decide: Option<usize>,
    /// The median over the cells of the larger of the two runs' CV.
    pub median_cv: Option<f64>,
    /// The change one cell needs to be detected with 80% power at `median_cv` (a fraction).
    pub detectable_cell: Option<f64>,
    /// The uniform change over all cells the whole-run verdict detects with 80% power.
    pub detectable_run: Option<f64>,
    /// Repetitions a side that detect a change of twice the band in one cell at `median_cv`.
    pub reps_suggested: Option<usize>,
    /// Runs a side and the spread between runs the verdicts are judged against.
    pub spread: runs::Spread,
}

/// The whole-run verdict: every cell's median ratio at once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WholeRun {
    /// Cells in the verdict (compared cells with a positive ratio and enough repetitions).
    pub cells: usize,
    /// What the ratios are: `B/A`, or `B/A, lower-is-better metrics inverted` when the
    /// compared metrics disagree on direction.
    pub basis: String,
    pub higher_is_better: bool,
    /// Geometric mean of the cells' ratios of medians.
    pub geomean_ratio: Option<f64>,
    /// 95% percentile-bootstrap interval of the geometric mean (repetitions resampled within
    /// cells, the cells' own resamples).
    pub ratio_ci95: Option<(f64, f64)>,
    /// Cells whose ratio is above 1, below 1, exactly 1.
    pub cells_up: usize,
    pub cells_down: usize,
    pub cells_equal: usize,
    /// Two-sided exact sign test on the cells' ratios (ties dropped).
    pub p: f64,
    /// The smallest p the test can give: 2^(1 - cells) for the sign test, 0 for the t test.
    pub smallest_possible_p: f64,
    /// The test: `sign test across cells` (one run a side) or `t test on the runs' levels`.
    pub test: String,
    /// The verdict the repetitions within one run a side would give, held back because a
    /// shift of the whole machine between the runs explains it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_back: Option<Verdict>,
    pub verdict: Verdict,
    pub reason: String,
}

/// What `--fail-on-regression` decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Nothing slower, and something could have been found: exit 0.
    Pass,
    /// The whole run or a cell is slower: exit 1.
    Regression(String),
    /// Neither a cell nor the whole run could reach alpha: exit 3.
    Undecidable(String),
}

impl Gate {
    pub fn exit_code(&self) -> u8 {
        match self {
            Gate::Pass => 0,
            Gate::Regression(_) => 1,
            Gate::Undecidable(_) => 3,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Gate::Pass => "pass",
            Gate::Regression(_) => "regression",
            Gate::Undecidable(_) => "undecidable",
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Gate::Pass => "",
            Gate::Regression(m) | Gate::Undecidable(m) => m,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub threshold: f64,
    pub alpha: f64,
    pub correction: Correction,
    /// Parameters left out of the matching.
    pub ignored: Vec<Difference>,
    pub rows: Vec<CompareRow>,
    pub whole_run: Option<WholeRun>,
    pub design: Design,
    pub only_in_a: usize,
    pub only_in_b: usize,
    /// Case parameters whose values differ between the runs (what keeps cells from matching).
    pub parameter_differences: Vec<Difference>,
    /// Warnings: too few repetitions, cells without the metric.
    pub warnings: Vec<String>,
    /// The contention each side ran under (set by the caller, which has the runs).
    pub contention: Option<contention::Contention>,
}

impl Comparison {
    pub fn count(&self, verdict: Verdict) -> usize {
        self.rows.iter().filter(|r| r.verdict == verdict).count()
    }

    /// Cells slower beyond the band and significant.
    pub fn regressions(&self) -> Vec<&CompareRow> {
        self.rows.iter().filter(|r| r.verdict == Verdict::Slower).collect()
    }

    pub fn whole_run_verdict(&self) -> Verdict {
        self.whole_run.as_ref().map_or(Verdict::Inconclusive, |w| w.verdict)
    }

    /// What `--fail-on-regression` decides: a regression when the whole run or any cell is
    /// slower (with a note when run B ran under materially more contention than run A);
    /// undecidable when a slowdown was held back (one run a side, nothing known of the spread
    /// between runs), when no cell can reach alpha after the correction and the whole-run
    /// verdict decided nothing either, or when no cell matched; otherwise a pass.
    pub fn gate(&self) -> Gate {
        let slower = self.regressions();
        let run_slower = self.whole_run_verdict() == Verdict::Slower;
        if run_slower || !slower.is_empty() {
            let mut message = self.regression_message(&slower, run_slower);
            // Said, not decided on: a change that makes the measured threads wait (more threads,
            // a busier server) is itself a regression, and a hog beside the server is one too.
            if let Some(more) = self.contention.as_ref().and_then(|c| c.b_more.as_ref()) {
                message.push_str(&format!(
                    "; note: {more} - if that load was not the change's, run B again on a quieter machine"
                ));
            }
            return Gate::Regression(format!("{message} (--fail-on-regression)"));
        }
        let held = self
            .whole_run
            .as_ref()
            .is_some_and(|w| w.held_back == Some(Verdict::Slower))
            || self.rows.iter().any(|r| r.held_back == Some(Verdict::Slower));
        if held {
            return Gate::Undecidable(format!(
                "undecidable (--fail-on-regression, exit 3): B reads slower within the runs, but {}",
                runs::no_spread_line()
            ));
        }
        if self.rows.is_empty() {
            return Gate::Undecidable(
                "undecidable (--fail-on-regression, exit 3): no matching cells were compared".to_string(),
            );
        }
        if !self.design.cells_decidable && self.whole_run_verdict() == Verdict::Inconclusive {
            return Gate::Undecidable(format!(
                "undecidable (--fail-on-regression, exit 3): {}; the whole-run verdict is inconclusive",
                self.design.undecidable_line(self.alpha, self.correction)
            ));
        }
        Gate::Pass
    }

    fn regression_message(&self, slower: &[&CompareRow], run_slower: bool) -> String {
        let mut parts = Vec::new();
        if let Some(w) = self.whole_run.as_ref().filter(|_| run_slower) {
            parts.push(format!("the whole run is slower ({})", w.reason));
        }
        if !slower.is_empty() {
            let mut names: Vec<&str> = slower.iter().take(8).map(|r| r.label.as_str()).collect();
            if slower.len() > 8 {
                names.push("…");
            }
            parts.push(format!(
                "{} cell(s) slower beyond the ±{}% band and significant: {}",
                slower.len(),
                trim_float(self.threshold * 100.0),
                names.join(", ")
            ));
        }
        parts.join("; ")
    }

    /// With one run a side and nothing known of the spread between runs: the one line saying
    /// a shift of the machine cannot be told from a change. None otherwise.
    pub fn spread_line(&self) -> Option<String> {
        (self.design.spread.df == 0 && !self.rows.is_empty()).then(runs::no_spread_line)
    }

    pub fn summary_line(&self) -> String {
        let mut line = format!(
            "{} matching cells: {} faster, {} slower, {} no change, {} inconclusive \
             (noise band ±{}%, 95% bootstrap interval of the ratio of medians, Mann-Whitney U with \
             {}, alpha {})",
            self.rows.len(),
            self.count(Verdict::Faster),
            self.count(Verdict::Slower),
            self.count(Verdict::NoChange),
            self.count(Verdict::Inconclusive),
            trim_float(self.threshold * 100.0),
            self.correction.describe(),
            self.alpha
        );
        if self.only_in_a + self.only_in_b > 0 {
            line.push_str(&format!(
                "; {} cells only in run A, {} only in run B",
                self.only_in_a, self.only_in_b
            ));
        }
        line
    }

    /// The whole-run verdict in one line.
    pub fn whole_run_line(&self) -> String {
        match &self.whole_run {
            None => format!("whole run: inconclusive - no cells with a positive ratio and {MIN_REPS_TO_DECIDE} repetitions a side to combine"),
            Some(w) => format!(
                "whole run: {} - geometric mean of {} over {} cells {}, 95% interval {}; {}: {} up, {} down, p {} ({})",
                w.verdict,
                w.basis,
                w.cells,
                w.geomean_ratio.map_or("n/a".into(), fmt_ratio),
                w.ratio_ci95
                    .map_or("n/a".into(), |(lo, hi)| format!("{}..{}", fmt_ratio(lo), fmt_ratio(hi))),
                w.test,
                w.cells_up,
                w.cells_down,
                fmt_p(w.p),
                w.reason
            ),
        }
    }

    /// The design in one line: what the cells can reach, what is detectable, what to run.
    pub fn design_line(&self) -> String {
        let d = &self.design;
        if d.cells == 0 {
            return String::new();
        }
        if d.spread.df > 0 {
            let mut line = format!("design: {} cells, {}", d.cells, d.spread.describe());
            if let Some(run) = d.detectable_run {
                line.push_str(&format!(
                    "; a change of {} over the whole run is detectable (80% power)",
                    pct(run)
                ));
            }
            if d.spread.runs_a.min(d.spread.runs_b) < 3 && d.spread.history_runs == 0 {
                line.push_str("; 3 runs a side give the spread between runs more weight");
            }
            return line;
        }
        let mut line = if d.cells_decidable {
            format!(
                "design: {} cells, {} repetitions a side, {}: a cell can reach p {} (below alpha {})",
                d.cells,
                d.min_reps,
                self.correction.as_str(),
                fmt_p(d.smallest_adjusted_p),
                self.alpha
            )
        } else {
            format!("design: {}", d.undecidable_line(self.alpha, self.correction))
        };
        if let Some(cv) = d.median_cv {
            let cell = d.detectable_cell.map_or("no change in one cell".into(), |v| {
                format!("a change of {} in one cell", pct(v))
            });
            let run = d.detectable_run.map_or("none over the whole run".into(), |v| {
                format!("{} over the whole run", pct(v))
            });
            line.push_str(&format!(
                "; at the median CV of {} {cell} and {run} is detectable (80% power)",
                pct(cv)
            ));
            match d.reps_suggested {
                Some(n) => line.push_str(&format!(
                    "; {n} repetitions a side would detect {}% in one cell",
                    trim_float(self.threshold * 200.0)
                )),
                None => line.push_str(&format!(
                    "; even {MAX_REPS} repetitions a side would not detect {}% in one cell",
                    trim_float(self.threshold * 200.0)
                )),
            }
        }
        line
    }

    /// Why cells did not match, one line per differing parameter; empty when every cell matched.
    pub fn mismatch_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.ignored.is_empty() {
            out.push(format!(
                "cells matched on every parameter but {}",
                self.ignored
                    .iter()
                    .map(|d| format!("{} (run A {}, run B {})", d.name, d.a, d.b))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if self.only_in_a + self.only_in_b == 0 {
            return out;
        }
        if self.parameter_differences.is_empty() {
            out.push(
                "the unmatched cells have the same parameter values as matched ones (a case grid of different shape)"
                    .into(),
            );
        } else {
            let lead = if self.rows.is_empty() {
                "0 matching cells because the case parameters differ"
            } else {
                "cells did not match because the case parameters differ"
            };
            out.push(format!("{lead}:"));
            for d in &self.parameter_differences {
                out.push(format!("  {}: run A {}, run B {}", d.name, d.a, d.b));
            }
        }
        out
    }
}

impl Design {
    /// "no cell can reach p < 0.05 after the Holm correction (...); with 33 cells, 7
    /// repetitions a side are needed"
    pub fn undecidable_line(&self, alpha: f64, correction: Correction) -> String {
        let mut line = format!(
            "no cell can reach p < {alpha} after the {} ({} cells with {} repetitions a side: smallest p {}, {} after the correction)",
            correction.describe(),
            self.cells,
            self.min_reps,
            fmt_p(self.smallest_p),
            fmt_p(self.smallest_adjusted_p)
        );
        match self.reps_to_decide {
            Some(n) => line.push_str(&format!(
                "; with {} cells, {n} repetitions a side are needed",
                self.cells
            )),
            None => line.push_str(&format!("; not even {MAX_REPS} repetitions a side would do")),
        }
        if correction == Correction::Holm && self.cells > 1 {
            line.push_str(" (or --correction bh)");
        }
        line
    }
}

/// The most repetitions `--reps` allows: suggestions stop there.
pub const MAX_REPS: usize = 1000;

fn trim_float(v: f64) -> String {
    let text = format!("{v:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A fraction as a percentage with one decimal: 0.0975 -> "9.8%".
fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

fn fmt_p(p: f64) -> String {
    if p == 0.0 {
        "< 1e-300".to_string()
    } else if p >= 0.001 {
        format!("{p:.3}")
    } else {
        format!("{p:.1e}")
    }
}

/// Whether a larger value of the metric is better: the workload's headline says; otherwise
/// rates and bandwidths are, and times, counts and costs are not.
pub fn higher_is_better(case: &Case, role: Role, name: &str) -> bool {
    let (headline_name, headline_role, higher) = headline(case);
    if name == headline_name && role == headline_role {
        return higher;
    }
    [
        "gbps",
        "per_s",
        "bandwidth",
        "gib_s",
        "mib_s",
        "throughput",
        "not_copied",
        "resident",
    ]
    .iter()
    .any(|k| name.contains(k))
}

/// `BOOTSTRAP_RESAMPLES` resampled ratios median(B*) / median(A*): each side resampled with
/// replacement from a generator seeded with `seed`, its median drawn in constant time from the
/// order statistics (`SplitMix64::resampled_median`: the same distribution as drawing the
/// resample). Time and memory: the two sorted samples and the ratios, whatever the repetition
/// count. None when either side is empty or a resampled median of A is 0.
pub fn bootstrap_ratios(a: &[f64], b: &[f64], seed: u64) -> Option<Vec<f64>> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let sorted = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(|x, y| x.total_cmp(y));
        v
    };
    let (sa, sb) = (sorted(a), sorted(b));
    let mut rng = SplitMix64::new(seed);
    let mut ratios = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        let ma = rng.resampled_median(&sa);
        if ma == 0.0 {
            return None;
        }
        ratios.push(rng.resampled_median(&sb) / ma);
    }
    Some(ratios)
}

/// The 2.5% and 97.5% points of resampled values (sorts them).
fn percentile_interval(values: &mut [f64]) -> (f64, f64) {
    values.sort_by(|x, y| x.total_cmp(y));
    let n = values.len() as f64;
    (values[(n * 0.025) as usize], values[(n * 0.975) as usize - 1])
}

/// The 95% percentile-bootstrap interval of median(B) / median(A) with `BOOTSTRAP_SEED`.
pub fn bootstrap_ratio_ci(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    bootstrap_ratios(a, b, BOOTSTRAP_SEED).map(|mut r| percentile_interval(&mut r))
}

/// A cell's own bootstrap seed: `BOOTSTRAP_SEED` mixed with its label (FNV-1a), so cells do
/// not share a resampling pattern (which would correlate them in the whole-run interval) and
/// a cell's interval does not depend on which other cells were compared.
pub fn cell_seed(label: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in label.bytes() {
        h ^= byte as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    BOOTSTRAP_SEED ^ h
}

/// Holm's step-down adjustment: the i-th smallest of m p-values is multiplied by (m - i),
/// made monotone and capped at 1.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&x, &y| p[x].total_cmp(&p[y]));
    let mut adjusted = vec![1.0; m];
    let mut running: f64 = 0.0;
    for (i, &k) in order.iter().enumerate() {
        running = running.max(((m - i) as f64 * p[k]).min(1.0));
        adjusted[k] = running;
    }
    adjusted
}

/// Benjamini-Hochberg: the i-th smallest of m p-values becomes p m / i, made monotone from the
/// largest down (each is the smallest of its own and every larger one's) and capped at 1.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&x, &y| p[x].total_cmp(&p[y]));
    let mut adjusted = vec![1.0; m];
    let mut running: f64 = 1.0;
    for (i, &k) in order.iter().enumerate().rev() {
        running = running.min(p[k] * m as f64 / (i + 1) as f64).min(1.0);
        adjusted[k] = running;
    }
    adjusted
}

/// Two-sided exact sign test: `up` and `down` counts (ties already dropped).
pub fn sign_test(up: usize, down: usize) -> f64 {
    let n = up + down;
    if n == 0 {
        return 1.0;
    }
    let k = up.min(down);
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let tail: f64 = (0..=k).map(|i| (ln_choose(n, i) + ln_half_n).exp()).sum();
    (2.0 * tail).min(1.0)
}

/// The smallest p the sign test reaches with `cells` cells: 2^(1 - cells).
pub fn sign_test_smallest_p(cells: usize) -> f64 {
    sign_test(cells, 0)
}

/// The verdict for a ratio interval, an adjusted p (`p_name` says which: "BH p", "Holm p")
/// and the sample sizes.
pub fn decide(
    ci: Option<(f64, f64)>,
    p: f64,
    p_name: &str,
    n: (usize, usize),
    higher_is_better: bool,
    options: &CompareOptions,
) -> (Verdict, String) {
    let t = options.threshold;
    if n.0.min(n.1) < MIN_REPS_TO_DECIDE {
        return (
            Verdict::Inconclusive,
            format!(
                "too few repetitions to decide ({} and {}; at least {MIN_REPS_TO_DECIDE} a side)",
                n.0, n.1
            ),
        );
    }
    let Some((lo, hi)) = ci else {
        return (Verdict::Inconclusive, "no ratio: the median of run A is 0".into());
    };
    let interval = format!("interval of B/A {}..{}", fmt_ratio(lo), fmt_ratio(hi));
    let band = format!("band {}..{}", fmt_ratio(1.0 - t), fmt_ratio(1.0 + t));
    if lo >= 1.0 - t && hi <= 1.0 + t {
        return (Verdict::NoChange, format!("{interval} inside the {band}"));
    }
    if lo > 1.0 + t || hi < 1.0 - t {
        if p >= options.alpha {
            return (
                Verdict::Inconclusive,
                format!(
                    "{interval} outside the {band} but not significant ({p_name} {})",
                    fmt_p(p)
                ),
            );
        }
        let better = (lo > 1.0 + t) == higher_is_better;
        let verdict = if better { Verdict::Faster } else { Verdict::Slower };
        return (verdict, format!("{interval} beyond the {band}, {p_name} {}", fmt_p(p)));
    }
    (Verdict::Inconclusive, format!("{interval} straddles the {band}"))
}

/// The standard deviation of ln(median(B) / median(A)) for `reps` repetitions a side whose
/// coefficient of variation is `cv`: a median's is sqrt(pi/2) sigma / sqrt(n) for normal
/// data, and the two sides add.
fn ln_ratio_sd(reps: usize, cv: f64) -> f64 {
    (std::f64::consts::PI / 2.0).sqrt() * cv * (2.0 / reps.max(1) as f64).sqrt()
}

/// z of 80% power.
const POWER_Z: f64 = 0.841_621_2;

/// What a plan of `cells` cells × `reps` repetitions can detect against a run like it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detectable {
    /// Whether one cell can reach alpha after the correction at all.
    pub cell_reachable: bool,
    /// The change (fraction) one cell needs: None when it cannot reach alpha.
    pub cell: Option<f64>,
    /// The uniform change over every cell the whole-run verdict needs: None when the sign test
    /// cannot reach alpha with so few cells, or too few repetitions to decide.
    pub run: Option<f64>,
    /// Repetitions a side that would make one cell reachable; None above `MAX_REPS`.
    pub reps_to_decide: Option<usize>,
}

/// The detectable-effect arithmetic (docs/methodology.md): a cell is decided when its ratio's
/// interval clears the ±`threshold` band and its p clears alpha after the correction; with
/// 80% power that takes threshold + (z(1 - alpha'/2) + z(0.8)) sd, where sd is that of the log
/// ratio of medians and alpha' = alpha / cells for one changed cell among many (alpha without a
/// correction). The whole run's geometric mean has sd / sqrt(cells) and alpha itself.
pub fn detectable_effect(
    reps: usize,
    cells: usize,
    correction: Correction,
    alpha: f64,
    threshold: f64,
    cv: f64,
) -> Detectable {
    let p0 = smallest_possible_p(reps, reps);
    let reachable = |n: usize| {
        let p0 = smallest_possible_p(n, n);
        n >= MIN_REPS_TO_DECIDE && correction.best_adjusted(p0, p0, cells) < alpha
    };
    let cell_reachable = reps >= MIN_REPS_TO_DECIDE && correction.best_adjusted(p0, p0, cells) < alpha;
    let sd = ln_ratio_sd(reps, cv);
    let z = |a: f64| normal_quantile_upper(a / 2.0) + POWER_Z;
    let cell = cell_reachable.then(|| (threshold + z(correction.single_cell_alpha(alpha, cells)) * sd).exp_m1());
    let run = (reps >= MIN_REPS_TO_DECIDE && sign_test_smallest_p(cells) < alpha)
        .then(|| (threshold + z(alpha) * sd / (cells as f64).sqrt()).exp_m1());
    Detectable {
        cell_reachable,
        cell,
        run,
        reps_to_decide: (1..=MAX_REPS).find(|&n| reachable(n)),
    }
}

/// The line a measuring command of several cases and `quick` print before they start: what the plan can detect against a
/// run like it, at the CV above which a cell counts as noisy.
pub fn plan_detectable_line(reps: usize, cells: usize) -> String {
    let cv = super::cells::NOISY_CV;
    let o = default_options();
    let d = detectable_effect(reps, cells, o.correction, o.alpha, o.threshold, cv);
    let lead = format!(
        "detectable against a run like it ({cells} cases × {reps} repetitions, compare's defaults: ±{} band, {}, alpha {}, 80% power, repetitions varying by {} CV)",
        pct(o.threshold),
        o.correction.as_str(),
        o.alpha,
        pct(cv)
    );
    let cell = match d.cell {
        Some(v) => format!("{} in one cell", pct(v)),
        None => match d.reps_to_decide {
            Some(n) => format!("nothing in one cell (needs {n} repetitions)"),
            None => "nothing in one cell".to_string(),
        },
    };
    let run = match d.run {
        Some(v) => format!("{} over the whole run", pct(v)),
        None if reps < MIN_REPS_TO_DECIDE => {
            format!("nothing over the whole run (needs {MIN_REPS_TO_DECIDE} repetitions)")
        }
        None => "nothing over the whole run (needs 6 cases)".to_string(),
    };
    format!("{lead}: {cell}, {run}")
}

fn fmt_ratio(v: f64) -> String {
    format!("{v:.3}")
}

/// Values of each parameter over a run's cases, in first-seen order.
fn param_values(cases: &[Case]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for case in cases {
        let mut pairs = vec![("workload", case.workload().to_string())];
        pairs.extend(case.params());
        for (name, value) in pairs {
            let values = out.entry(name.to_string()).or_default();
            if !values.contains(&value) {
                values.push(value);
            }
        }
    }
    out
}

/// The parameters whose sets of values differ between the two runs' cases.
pub fn parameter_differences(a: &[Case], b: &[Case]) -> Vec<Difference> {
    let (pa, pb) = (param_values(a), param_values(b));
    let show = |v: Option<&Vec<String>>| match v {
        None => "(not a parameter)".to_string(),
        Some(v) if v.len() > 8 => format!("{} … ({} values)", v[..8].join(", "), v.len()),
        Some(v) => v.join(", "),
    };
    let mut names: Vec<&String> = pa.keys().chain(pb.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|n| {
            let sorted = |v: Option<&Vec<String>>| {
                let mut v = v.cloned().unwrap_or_default();
                v.sort();
                v
            };
            sorted(pa.get(*n)) != sorted(pb.get(*n))
        })
        .map(|n| Difference {
            name: n.clone(),
            a: show(pa.get(n)),
            b: show(pb.get(n)),
        })
        .collect()
}

/// The environment fingerprint of a run: iopath's version, kernel, CPU, governor, SMT,
/// mitigations, the sysctls that change the data path, and the machine's shape, as flat
/// name -> text pairs (`unknown` when not recorded). Volatile readings (load average, free
/// memory) are left out: they differ between any two runs.
pub fn fingerprint(run: &RunSummary) -> BTreeMap<String, String> {
    let env: serde_json::Value = serde_json::from_str(&run.environment_json).unwrap_or_default();
    let machine: serde_json::Value = serde_json::from_str(&run.machine_json).unwrap_or_default();
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::Null => "unknown".to_string(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut out = BTreeMap::new();
    out.insert("iopath_version".to_string(), run.tool_version.clone());
    for key in [
        "kernel",
        "cpu_model",
        "cpus_online",
        "smt_active",
        "caches",
        "governor",
        "perf_event_paranoid",
        "optmem_max",
        "tcp_wmem",
        "tcp_rmem",
        "rlimit_memlock",
        "interface",
        "mtu",
    ] {
        out.insert(key.to_string(), text(&env[key]));
    }
    for key in [
        "hostname",
        "kernel_build",
        "virtualized",
        "clocksource",
        "tsc_invariant",
        "transparent_hugepage",
        "io_uring_disabled_sysctl",
        "memory_total_bytes",
    ] {
        out.insert(key.to_string(), text(&machine[key]));
    }
    if let Some(m) = machine["mitigations"].as_object() {
        for (name, status) in m {
            out.insert(format!("mitigations.{name}"), text(status));
        }
    }
    out
}

/// The fingerprint entries that differ (a name missing on one side reads `unknown`).
pub fn environment_differences(a: &RunSummary, b: &RunSummary) -> Vec<Difference> {
    let (fa, fb) = (fingerprint(a), fingerprint(b));
    let mut names: Vec<&String> = fa.keys().chain(fb.keys()).collect();
    names.sort();
    names.dedup();
    let unknown = "unknown".to_string();
    names
        .into_iter()
        .filter_map(|n| {
            let (va, vb) = (fa.get(n).unwrap_or(&unknown), fb.get(n).unwrap_or(&unknown));
            (va != vb).then(|| Difference {
                name: n.clone(),
                a: va.clone(),
                b: vb.clone(),
            })
        })
        .collect()
}

/// The parameters of a case as matched: the workload and every parameter.
fn case_params(case: &Case) -> Vec<(&'static str, String)> {
    let mut pairs = vec![("workload", case.workload().to_string())];
    pairs.extend(case.params());
    pairs
}

/// The key cells are matched on: every parameter but `ignore` and the parameters that only
/// say where in its run's schedule a cell ran (`Workload::schedule_params`: a fleet cell's
/// round, which a different seed changes). Two cells of one run with the same key are told
/// apart by their order (`run_keys`).
fn match_key(case: &Case, ignore: &[String]) -> String {
    let schedule = case.as_workload().schedule_params();
    if ignore.is_empty() {
        // The whole stored case, but for its schedule fields (top-level keys of its JSON).
        let mut value = serde_json::to_value(case).unwrap_or_default();
        if let Some(fields) = value.as_object_mut() {
            schedule.iter().for_each(|name| {
                fields.remove(*name);
            });
        }
        return value.to_string();
    }
    let pairs: Vec<(&str, String)> = case_params(case)
        .into_iter()
        .filter(|(n, _)| !ignore.iter().any(|i| i == n) && !schedule.contains(n))
        .collect();
    serde_json::to_string(&pairs).unwrap_or_default()
}

/// The match keys of one run's cells in order; a key met again in the same run gets its
/// occurrence number, so cells a schedule parameter alone told apart still match one to one.
pub fn run_keys(cells: &[CellSummary], ignore: &[String]) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    cells
        .iter()
        .map(|c| {
            let key = match_key(&c.case, ignore);
            let n = seen.entry(key.clone()).or_default();
            *n += 1;
            if *n == 1 {
                key
            } else {
                format!("{key}#{n}")
            }
        })
        .collect()
}

/// The plan of a run as matching sees it: the sorted match keys of its cases (runs with the
/// same plan compare cell for cell).
pub fn plan_keys(cases: &[Case]) -> Vec<String> {
    let mut keys: Vec<String> = cases.iter().map(|c| match_key(c, &[])).collect();
    keys.sort();
    keys
}

/// Check `--ignore` names against the runs' parameters and resolve them: a name matches a
/// parameter spelled the same, or one with a unit suffix (`duration` is `duration_ms`, `size`
/// is `size_bytes`). Refused (one line, for exit 2): a name neither run has, `workload`, and
/// a name whose removal leaves two cells of one run alike (it varies within a run).
pub fn resolve_ignore(a: &[Case], b: &[Case], names: &[String]) -> Result<Vec<String>, String> {
    let mut known: Vec<&'static str> = a
        .iter()
        .chain(b)
        .flat_map(|c| case_params(c).into_iter().map(|(n, _)| n))
        .collect();
    known.sort();
    known.dedup();
    let mut out = Vec::new();
    for name in names {
        let name = name.trim();
        let found = known
            .iter()
            .find(|k| **k == name || **k == format!("{name}_ms") || **k == format!("{name}_bytes"))
            .filter(|k| **k != "workload");
        match found {
            Some(k) if !out.contains(&k.to_string()) => out.push(k.to_string()),
            Some(_) => {}
            None => {
                return Err(format!(
                    "--ignore: '{name}' is not a parameter of these runs (parameters: {})",
                    known
                        .iter()
                        .filter(|k| **k != "workload")
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        }
    }
    for (run, cases) in [("A", a), ("B", b)] {
        let mut seen: HashMap<String, &Case> = HashMap::new();
        for case in cases {
            // Cells alike before the ignore (a pair measured in two rounds) stay told apart by order.
            let alike = |other: &Case| match_key(other, &[]) == match_key(case, &[]);
            if let Some(other) = seen.insert(match_key(case, &out), case).filter(|o| !alike(o)) {
                return Err(format!(
                    "--ignore {}: run {run}'s cells '{}' and '{}' would match the same cell; ignore only parameters \
                     that differ between the runs, not within one",
                    out.join(","),
                    other.label(),
                    case.label()
                ));
            }
        }
    }
    Ok(out)
}

mod analysis;
pub mod contention;
pub mod runs;
pub use analysis::{compare_cells, compare_runs};

/// The 2.5% and 97.5% points of bootstrap resamples (sorts them): report/ab.rs's paired
/// intervals are cut the way compare's are.
pub fn percentile_interval_95(values: &mut [f64]) -> (f64, f64) {
    percentile_interval(values)
}

/// P(Z > z) of a standard normal: report/ab.rs's signed-rank test above its exact range.
pub fn standard_normal_upper_tail(z: f64) -> f64 {
    normal_upper_tail(z)
}

#[cfg(test)]
mod tests;
