//! Which hosts and links a matrix flags (issue 30): tests over the cells of a host or a link,
//! corrected for how many are judged, never a band over single values.
//!
//! Each cell (one repetition of a directed pair) is put beside what its partner gets from all
//! its pairs, in log space:
//! - judging host `h` as a source, cell `h → d` against the median of `d`'s column (every
//!   source's pair to `d`, each pair's median over its repetitions);
//! - judging `h` as a destination, cell `s → h` against the median of `s`'s row.
//!
//! The host's own pair is in that median: one odd value among three or more does not move a
//! median, and with it in, one bad link cannot move its neighbours' yardstick.
//! A partner's own slowness is on both sides of the ratio and cancels; what is left is the
//! host's deviation plus noise. A host side with `m` such cells is flagged low (high) when so
//! many of them lie more than [`FLOOR`] below (above) that the exact one-sided sign test
//! (Binomial(m, ½) upper tail, doubled for the two sides) gives a p that Holm's step-down over
//! every host side of the matrix keeps at level `alpha` — and `alpha` is [`ALPHA`] divided
//! among the run's matrices, so a run of identical hosts flags any host in any matrix with
//! probability at most 5 %. The sign test assumes nothing of the noise's shape (a load spike
//! moves one cell, however far) and a bad link is one partner among `N − 1`; the floor keeps a
//! consistent but negligible difference from being a finding.
//!
//! A link `s → d` is judged against the additive prediction `row(s) + column(d) − all`
//! (medians of the pairs' log values): it is flagged when it has at least
//! [`LINK_MIN_REPS`] repetitions, every one of them lies beyond [`FLOOR`] on the same side,
//! and `2 q^R` ≤ `alpha / links`, `q` being the share of all this matrix's cells at least as
//! far out as the link's nearest repetition and `R` its repetitions: the repetitions of a pair
//! run in different passes over the schedule, so load spikes (whose rate `q` is, measured on
//! this run, however heavy their tail) strike them independently; a slow link is far out in
//! all of them. One repetition of a pair is one moment of the machine: a pair is not flagged
//! on one.

use super::Side;
use crate::measure::stats::median_of;
use crate::report::compare::{holm, normal_quantile_upper};

/// Deviations smaller than this fraction are never a finding, however consistent.
pub const FLOOR: f64 = 0.05;
/// The chance that a run of identical hosts flags anything, shared among its matrices.
pub const ALPHA: f64 = 0.05;
/// 1.4826 × MAD estimates the standard deviation of normally distributed values.
pub const MAD_SCALE: f64 = 1.4826;
/// The fewest repetitions of a pair that can make it a flagged link.
pub const LINK_MIN_REPS: usize = 2;
/// The power of the "smallest deviation flagged" the page states: flagged 4 times in 5.
pub const POWER: f64 = 0.8;
/// The most matrices one run's network case has (rr: transactions, p99, CPU of each side):
/// what the default repetitions of a fleet run are planned for.
pub const MATRICES_PLANNED: usize = 4;

/// One side (as source or as destination) of a host, tested.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SideTest {
    /// Cells with a partner to compare against.
    pub cells: u32,
    /// Cells more than [`FLOOR`] below / above their partner's typical value.
    pub low: u32,
    pub high: u32,
    /// The median of the cells' ratios to their partner's typical value (1 = like the others).
    pub ratio: Option<f64>,
    /// The two-sided sign test's p, and after Holm over the matrix's host sides.
    pub p: f64,
    pub holm_p: f64,
    /// The side the test found, when `holm_p` ≤ the matrix's alpha.
    pub side: Option<Side>,
}

/// What a matrix's flags were judged against, for the page and the terminal.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Noise {
    /// The level of this matrix's tests (`ALPHA` / the run's matrices).
    pub alpha: f64,
    /// Host sides tested (with at least one cell).
    pub tests: usize,
    /// The spread of a cell around its partner's typical value: 1.4826 × MAD of the log
    /// ratios, as a fraction (0.03 = ±3 %). None without cells.
    pub spread: Option<f64>,
    /// The fewest and most cells a tested host side has.
    pub cells_min: u32,
    pub cells_max: u32,
    /// How many of `cells_min` cells must lie beyond the floor on one side for the first of
    /// Holm's steps; None when even all of them would not do (the matrix cannot flag a host).
    pub needed: Option<u32>,
    /// The deviation of a host side with `cells_min` cells flagged with probability
    /// [`POWER`] given `spread` (normal noise assumed for this figure only), as a fraction
    /// (0.08 = 8 % slower); None when the matrix cannot flag.
    pub smallest: Option<f64>,
    /// What flags a link with `reps_max` repetitions: each of them more than this fraction
    /// below or above its prediction, a distance beyond which lies at most the third share
    /// of this run's cells; None when no link is judged.
    pub link_edges: Option<(f64, f64, f64)>,
    /// Links judged (with a prediction and at least [`LINK_MIN_REPS`] repetitions).
    pub links_judged: usize,
    /// The most repetitions any pair has (links need [`LINK_MIN_REPS`]).
    pub reps_max: u32,
}

impl Noise {
    /// The one-line account of the noise and what it takes to flag, in words.
    pub fn sentence(&self) -> String {
        let Some(spread) = self.spread else {
            return "no cell has a partner to compare against: nothing judged".into();
        };
        let mut out = format!(
            "a cell lies within ±{:.1} % of its partner's typical value (1.4826 × MAD of every cell)",
            100.0 * spread
        );
        let cells = if self.cells_min == self.cells_max {
            format!("{}", self.cells_min)
        } else {
            format!("{} to {}", self.cells_min, self.cells_max)
        };
        match (self.needed, self.smallest) {
            (Some(k), smallest) => {
                out.push_str(&format!(
                    "; a host is flagged when at least {k} of its {} cells as source (or as destination) lie more than {:.0} % to one side (sign test, Holm over {} host sides, level {:.4})",
                    self.cells_min,
                    100.0 * FLOOR,
                    self.tests,
                    self.alpha
                ));
                if let Some(d) = smallest {
                    out.push_str(&format!(
                        "; the smallest deviation flagged 4 times in 5: {:.1} %",
                        100.0 * d
                    ));
                }
            }
            (None, _) => out.push_str(&format!(
                "; CANNOT FLAG A HOST: {cells} cells a host side, and even all of them beyond {:.0} % give p = {:.1e} > {:.1e} (level {:.4} / {} host sides); run more repetitions (--reps) or more hosts",
                100.0 * FLOOR,
                two_sided(self.cells_min, self.cells_min),
                self.alpha / self.tests.max(1) as f64,
                self.alpha,
                self.tests
            )),
        }
        match self.link_edges {
            Some((below, above, share)) => out.push_str(&format!(
                "; a link is flagged when each of its {} repetitions lies more than {:.1} % below (or {:.1} % above) what its row and column predict, as at most {:.2} % of this run's cells do (Bonferroni over {} links)",
                self.reps_max,
                100.0 * below,
                100.0 * above,
                100.0 * share,
                self.links_judged
            )),
            None => out.push_str(&format!(
                "; links are not judged (one repetition a pair: at least {LINK_MIN_REPS} are needed)"
            )),
        }
        out
    }
}

/// P(X ≥ k) for X ~ Binomial(m, q).
pub fn binomial_tail(m: u32, k: u32, q: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > m || q <= 0.0 {
        return 0.0;
    }
    if q >= 1.0 {
        return 1.0;
    }
    let (ln_q, ln_r) = (q.ln(), (1.0 - q).ln());
    // ln C(m, k) + k ln q + (m − k) ln(1 − q), then each next term from the last.
    let mut ln_term: f64 = (1..=k)
        .map(|i| f64::from(m - k + i).ln() - f64::from(i).ln())
        .sum::<f64>()
        + f64::from(k) * ln_q
        + f64::from(m - k) * ln_r;
    let mode = f64::from(m) * q;
    let mut sum = 0.0;
    for j in k..=m {
        let term = ln_term.exp();
        sum += term;
        if f64::from(j) > mode && term < sum * 1e-17 {
            break;
        }
        if j < m {
            ln_term += f64::from(m - j).ln() - f64::from(j + 1).ln() + ln_q - ln_r;
        }
    }
    sum.min(1.0)
}

/// The two-sided sign test's p for `beyond` of `m` cells on one side.
fn two_sided(m: u32, beyond: u32) -> f64 {
    (2.0 * binomial_tail(m, beyond, 0.5)).min(1.0)
}

/// The fewest cells of `m` beyond the floor on one side whose p reaches `level`.
pub fn needed(m: u32, level: f64) -> Option<u32> {
    (0..=m).find(|k| two_sided(m, *k) <= level)
}

/// The fewest cells a host side needs for the test to flag it with one cell the other way (a
/// load spike): `(1 + m) · 2^(1 − m)` at most `level`.
pub fn cells_needed(level: f64) -> u32 {
    (1..200).find(|m| two_sided(*m, m - 1) <= level).unwrap_or(200)
}

/// The repetitions a fleet run of `hosts` hosts, each host with at least `partners` partners
/// on each side, needs so that a host side can be flagged with one cell the other way in any
/// of [`MATRICES_PLANNED`] matrices: the default of `fleet run --reps`.
pub fn repetitions_needed(hosts: usize, partners: usize) -> u32 {
    if hosts < 3 || partners == 0 {
        // Two hosts: either could be the slow one; nothing to compare against.
        return 1;
    }
    let level = ALPHA / MATRICES_PLANNED as f64 / (2 * hosts) as f64;
    cells_needed(level).div_ceil(partners as u32).max(1)
}

/// 1.4826 × the median absolute deviation from 0 of `values` (reordered).
fn spread_around_zero(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    for v in values.iter_mut() {
        *v = v.abs();
    }
    Some(MAD_SCALE * crate::measure::stats::median(values))
}

/// The flags of one matrix.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Judgement {
    /// Per host: (as source, as destination).
    pub hosts: Vec<(SideTest, SideTest)>,
    /// Flagged links: (source, destination, side).
    pub links: Vec<(usize, usize, Side)>,
    pub noise: Noise,
}

/// Judge a matrix of `n` hosts: `pairs[s * n + d]` the median over the pair's repetitions
/// (None: missing), `cells` every repetition as (pair index, value). Values that are not
/// positive have no ratio and are left out. `alpha`: this matrix's level.
pub fn judge(n: usize, pairs: &[Option<f64>], cells: &[(u32, f64)], alpha: f64) -> Judgement {
    let yard = Yardsticks::of(n, pairs);
    let (low_edge, high_edge) = ((1.0 - FLOOR).ln(), (1.0 + FLOOR).ln());
    let mut source_ratios: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut destination_ratios: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut residuals: Vec<f64> = Vec::with_capacity(cells.len() * 2);
    let mut reps = vec![0u32; pairs.len()];
    for (i, v) in cells {
        let i = *i as usize;
        if *v <= 0.0 || !v.is_finite() {
            continue;
        }
        reps[i] += 1;
        let x = v.ln();
        let (by_column, by_row) = yard.references(i);
        if let Some(r) = by_column {
            source_ratios[i / n].push(x - r);
            residuals.push(x - r);
        }
        if let Some(r) = by_row {
            destination_ratios[i % n].push(x - r);
            residuals.push(x - r);
        }
    }
    let spread_log = spread_around_zero(&mut residuals);
    drop(residuals);
    let test = |ratios: &mut Vec<f64>| side_test(ratios, low_edge, high_edge);
    let mut hosts: Vec<(SideTest, SideTest)> = (0..n)
        .map(|h| (test(&mut source_ratios[h]), test(&mut destination_ratios[h])))
        .collect();
    drop((source_ratios, destination_ratios));
    let tests = holm_over_sides(&mut hosts, alpha);
    let (cells_min, cells_max) = hosts
        .iter()
        .flat_map(|(s, d)| [s.cells, d.cells])
        .filter(|c| *c > 0)
        .fold((u32::MAX, 0), |(lo, hi), c| (lo.min(c), hi.max(c)));
    let cells_min = if tests == 0 { 0 } else { cells_min };
    let first_step = alpha / tests.max(1) as f64;
    let needed_cells = (tests > 0).then(|| needed(cells_min, first_step)).flatten();
    let smallest = match (needed_cells, spread_log) {
        (Some(k), Some(s)) => Some(smallest_flagged(cells_min, k, s)),
        _ => None,
    };
    let judged = judge_links(n, cells, &reps, &yard, alpha);
    Judgement {
        hosts,
        links: judged.links,
        noise: Noise {
            alpha,
            tests,
            spread: spread_log.map(|s| s.exp() - 1.0),
            cells_min,
            cells_max,
            needed: needed_cells,
            smallest,
            link_edges: judged.edges,
            links_judged: judged.judged,
            reps_max: judged.reps_max,
        },
    }
}

/// What a matrix's cells are judged against, in logs: each row's and column's median of the
/// pair values, and the median of them all.
struct Yardsticks {
    n: usize,
    row_median: Vec<Option<f64>>,
    column_median: Vec<Option<f64>>,
    all_median: Option<f64>,
    /// Whether each pair has a (positive) value.
    has_value: Vec<bool>,
}

impl Yardsticks {
    fn of(n: usize, pairs: &[Option<f64>]) -> Yardsticks {
        let log_pair: Vec<Option<f64>> = pairs.iter().map(|v| v.filter(|v| *v > 0.0).map(f64::ln)).collect();
        // Each row's and column's pair values, sorted.
        let mut rows: Vec<Vec<f64>> = vec![Vec::new(); n];
        let mut columns: Vec<Vec<f64>> = vec![Vec::new(); n];
        for (i, y) in log_pair.iter().enumerate() {
            if let Some(y) = y {
                rows[i / n].push(*y);
                columns[i % n].push(*y);
            }
        }
        for line in rows.iter_mut().chain(columns.iter_mut()) {
            line.sort_by(f64::total_cmp);
        }
        let all: Vec<f64> = log_pair.iter().flatten().copied().collect();
        Yardsticks {
            n,
            all_median: median_of(&all),
            row_median: rows.iter().map(|r| median_of(r)).collect(),
            column_median: columns.iter().map(|c| median_of(c)).collect(),
            has_value: log_pair.iter().map(Option::is_some).collect(),
        }
    }

    /// A pair's yardsticks: its destination's column, its source's row (None: no value).
    fn references(&self, i: usize) -> (Option<f64>, Option<f64>) {
        match self.has_value[i] {
            true => (self.column_median[i % self.n], self.row_median[i / self.n]),
            false => (None, None),
        }
    }

    /// A pair's additive prediction: its row's plus its column's median, less the overall one.
    fn prediction(&self, i: usize) -> Option<f64> {
        self.has_value[i].then_some(())?;
        Some(self.row_median[i / self.n]? + self.column_median[i % self.n]? - self.all_median?)
    }
}

/// A host side's sign test: its cells' log ratios to their yardsticks beyond the floor on
/// each side (reordered).
fn side_test(ratios: &mut [f64], low_edge: f64, high_edge: f64) -> SideTest {
    let cells = ratios.len() as u32;
    if cells == 0 {
        return SideTest {
            p: 1.0,
            holm_p: 1.0,
            ..Default::default()
        };
    }
    let low = ratios.iter().filter(|r| **r < low_edge).count() as u32;
    let high = ratios.iter().filter(|r| **r > high_edge).count() as u32;
    let ratio = crate::measure::stats::median(ratios).exp();
    SideTest {
        cells,
        low,
        high,
        ratio: Some(ratio),
        p: two_sided(cells, low.max(high)),
        holm_p: 1.0,
        side: None,
    }
}

/// Holm over the host sides that have cells, flagging those at or under `alpha`; returns how
/// many were tested.
fn holm_over_sides(hosts: &mut [(SideTest, SideTest)], alpha: f64) -> usize {
    let mut tested: Vec<&mut SideTest> = hosts
        .iter_mut()
        .flat_map(|(s, d)| [s, d])
        .filter(|t| t.cells > 0)
        .collect();
    let p: Vec<f64> = tested.iter().map(|t| t.p).collect();
    for (t, adjusted) in tested.iter_mut().zip(holm(&p)) {
        t.holm_p = adjusted;
        if adjusted <= alpha {
            t.side = Some(if t.low >= t.high { Side::Low } else { Side::High });
        }
    }
    p.len()
}

/// A matrix's links judged: those flagged, the edges the rule asks of a link with the most
/// repetitions, how many were judged and the most repetitions of a pair.
struct LinksJudged {
    links: Vec<(usize, usize, Side)>,
    edges: Option<(f64, f64, f64)>,
    judged: usize,
    reps_max: u32,
}

/// Links: every repetition beyond the floor from the additive prediction, on one side, and
/// so far out that this run's cells rarely are: p = 2 q^R, q the share of all cells at least
/// as far out as the link's nearest repetition, Bonferroni over the links.
fn judge_links(n: usize, cells: &[(u32, f64)], reps: &[u32], yard: &Yardsticks, alpha: f64) -> LinksJudged {
    let (low_edge, high_edge) = ((1.0 - FLOOR).ln(), (1.0 + FLOOR).ln());
    // Per pair: the nearest repetition on each side (largest residual, smallest residual).
    let mut nearest: Vec<(f64, f64)> = vec![(f64::NEG_INFINITY, f64::INFINITY); reps.len()];
    let mut link_residuals: Vec<f64> = Vec::new();
    for (i, v) in cells {
        let i = *i as usize;
        if let (Some(p), true) = (yard.prediction(i), *v > 0.0 && v.is_finite()) {
            let r = v.ln() - p;
            link_residuals.push(r);
            nearest[i] = (nearest[i].0.max(r), nearest[i].1.min(r));
        }
    }
    link_residuals.sort_by(f64::total_cmp);
    let total = link_residuals.len();
    let links_judged = (0..reps.len())
        .filter(|i| reps[*i] as usize >= LINK_MIN_REPS && yard.prediction(*i).is_some())
        .count();
    let link_level = alpha / links_judged.max(1) as f64;
    let mut links: Vec<(usize, usize, Side)> = Vec::new();
    for (i, (low_nearest, high_nearest)) in nearest.iter().enumerate() {
        let r = reps[i] as i32;
        if (r as usize) < LINK_MIN_REPS || total == 0 || yard.prediction(i).is_none() {
            continue;
        }
        let share_at_or_below = |x: f64| link_residuals.partition_point(|y| *y <= x) as f64 / total as f64;
        let share_at_or_above = |x: f64| (total - link_residuals.partition_point(|y| *y < x)) as f64 / total as f64;
        if *low_nearest < low_edge && 2.0 * share_at_or_below(*low_nearest).powi(r) <= link_level {
            links.push((i / n, i % n, Side::Low));
        } else if *high_nearest > high_edge && 2.0 * share_at_or_above(*high_nearest).powi(r) <= link_level {
            links.push((i / n, i % n, Side::High));
        }
    }
    let reps_max = reps.iter().copied().max().unwrap_or(0);
    // What the rule asks of a link with the most repetitions: the share of cells it may cross.
    let edges = (total > 0 && reps_max as usize >= LINK_MIN_REPS).then(|| {
        let share = (link_level / 2.0).powf(1.0 / f64::from(reps_max));
        let at = ((share * total as f64).floor() as usize).min(total - 1);
        let below = link_residuals[at].min(low_edge);
        let above = link_residuals[total - 1 - at].max(high_edge);
        (1.0 - below.exp(), above.exp() - 1.0, share)
    });
    LinksJudged {
        links,
        edges,
        judged: links_judged,
        reps_max,
    }
}

/// The deviation (a fraction below 1) that puts at least `k` of `m` cells beyond the floor
/// with probability [`POWER`], each cell's log ratio normal with deviation `spread` around it.
fn smallest_flagged(m: u32, k: u32, spread: f64) -> f64 {
    // The per-cell chance q of lying beyond the floor that gives the power, by bisection.
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..60 {
        let q = (lo + hi) / 2.0;
        if binomial_tail(m, k, q) < POWER {
            lo = q;
        } else {
            hi = q;
        }
    }
    let q = hi.min(1.0 - 1e-12);
    // P(−δ + σ Z < ln(1 − FLOOR)) = q  ⇔  δ = σ Φ⁻¹(q) − ln(1 − FLOOR).
    let delta = spread.max(1e-9) * normal_quantile_upper(1.0 - q) - (1.0 - FLOOR).ln();
    1.0 - (-delta).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binomial_tail_matches_counting() {
        assert!((binomial_tail(4, 3, 0.5) - 5.0 / 16.0).abs() < 1e-12);
        assert!((binomial_tail(10, 0, 0.3) - 1.0).abs() < 1e-12);
        assert_eq!(binomial_tail(3, 4, 0.5), 0.0);
        assert!((binomial_tail(14, 14, 0.5) - 2f64.powi(-14)).abs() < 1e-18);
        // 1 - P(X <= 1) for Binomial(5, 0.2) = 1 - 0.8^5 - 5 * 0.2 * 0.8^4.
        let expected = 1.0 - 0.8f64.powi(5) - 5.0 * 0.2 * 0.8f64.powi(4);
        assert!((binomial_tail(5, 2, 0.2) - expected).abs() < 1e-12);
        // Large m stays finite and in [0, 1].
        let t = binomial_tail(100_000, 50_500, 0.5);
        assert!(t > 0.0 && t < 0.01, "{t}");
    }

    /// The default repetitions: 8 hosts need 3 (16 cells a side of 7 partners), 4 hosts 5,
    /// 1000 hosts 1; 2 hosts cannot be told apart at all.
    #[test]
    fn the_repetitions_a_fleet_needs_follow_its_host_count() {
        assert_eq!(repetitions_needed(8, 7), 3);
        assert_eq!(repetitions_needed(4, 3), 5);
        assert_eq!(repetitions_needed(1000, 999), 1);
        assert_eq!(repetitions_needed(17, 16), 2);
        assert_eq!(
            repetitions_needed(18, 17),
            1,
            "fleet run --reps's help says: 1 from 18 hosts up"
        );
        assert_eq!(repetitions_needed(2, 1), 1);
        // What was planned can flag: all but one of the cells beyond the floor.
        let level = ALPHA / MATRICES_PLANNED as f64 / 16.0;
        assert!(two_sided(21, 20) <= level);
        assert!(needed(7, level).is_none(), "one repetition of 8 hosts cannot flag");
    }
}
