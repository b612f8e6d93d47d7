//! Comparing two runs cell by cell, in a way a CI can gate on. For each matched cell and its
//! headline metric (or `--metric`):
//!
//! - the ratio of medians B/A with a 95% percentile-bootstrap interval (2000 resamples of each
//!   run's repetitions, a fixed seed, so the same data always gives the same interval);
//! - a two-sided Mann-Whitney U test (exact for small samples without ties, normal
//!   approximation otherwise), its p-values adjusted for the many cells compared with Holm's
//!   step-down method (controls the chance of any false alarm, as a gate needs);
//! - a verdict against a noise band of ±threshold around a ratio of 1: `faster`/`slower` when
//!   the whole interval lies beyond the band and the adjusted p is below alpha, `no change` when
//!   the whole interval lies inside the band, `inconclusive` otherwise (the interval straddles a
//!   band edge, or the difference is not significant, or too few repetitions to decide).
//!
//! Beside the verdicts: which parameters differ between the runs' cases (why cells do not
//! match) and which parts of the environment fingerprint differ.

use super::cells::{headline, CellSummary};
use crate::case::Case;
use crate::observation::Role;
use crate::store::RunSummary;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

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
    let p = if tie_term == 0.0 && n1 * n2 <= 400 {
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

/// Smallest two-sided p an exact test can give with these sample sizes (no ties).
pub fn smallest_possible_p(n1: usize, n2: usize) -> f64 {
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    exact_two_sided(n1, n2, 0.0)
}

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

/// How to compare.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareOptions {
    /// Half-width of the noise band around a ratio of 1 (0.03 = ±3%).
    pub threshold: f64,
    pub alpha: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            threshold: DEFAULT_THRESHOLD,
            alpha: ALPHA,
        }
    }
}

/// One matched cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareRow {
    pub label: String,
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
    /// p adjusted with Holm's method over every compared cell.
    pub p_holm: f64,
    /// p_holm < alpha.
    pub significant: bool,
    pub verdict: Verdict,
    /// Why the verdict is what it is, in words.
    pub reason: String,
    pub n_a: usize,
    pub n_b: usize,
}

/// One part of the environment fingerprint that differs between the runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    pub name: String,
    pub a: String,
    pub b: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub threshold: f64,
    pub alpha: f64,
    pub rows: Vec<CompareRow>,
    pub only_in_a: usize,
    pub only_in_b: usize,
    /// Case parameters whose values differ between the runs (what keeps cells from matching).
    pub parameter_differences: Vec<Difference>,
    /// Warnings: too few repetitions, cells without the metric.
    pub warnings: Vec<String>,
}

impl Comparison {
    pub fn count(&self, verdict: Verdict) -> usize {
        self.rows.iter().filter(|r| r.verdict == verdict).count()
    }

    /// Cells slower beyond the band and significant: what `--fail-on-regression` fails on.
    pub fn regressions(&self) -> Vec<&CompareRow> {
        self.rows.iter().filter(|r| r.verdict == Verdict::Slower).collect()
    }

    pub fn summary_line(&self) -> String {
        let mut line = format!(
            "{} matching cells: {} faster, {} slower, {} no change, {} inconclusive \
             (noise band ±{}%, 95% bootstrap interval of the ratio of medians, Mann-Whitney U with \
             Holm correction, alpha {})",
            self.rows.len(),
            self.count(Verdict::Faster),
            self.count(Verdict::Slower),
            self.count(Verdict::NoChange),
            self.count(Verdict::Inconclusive),
            trim_float(self.threshold * 100.0),
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

    /// Why cells did not match, one line per differing parameter; empty when every cell matched.
    pub fn mismatch_lines(&self) -> Vec<String> {
        if self.only_in_a + self.only_in_b == 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
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

fn trim_float(v: f64) -> String {
    let text = format!("{v:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
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

/// The 95% percentile-bootstrap interval of median(B) / median(A): `BOOTSTRAP_RESAMPLES`
/// resamples of each side with replacement from a generator seeded with `BOOTSTRAP_SEED`.
/// None when either side is empty or a resampled median of A is 0.
pub fn bootstrap_ratio_ci(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut rng = StdRng::seed_from_u64(BOOTSTRAP_SEED);
    let mut ratios = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    let (mut ra, mut rb) = (vec![0.0; a.len()], vec![0.0; b.len()]);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        ra.iter_mut().for_each(|v| *v = a[rng.gen_range(0..a.len())]);
        rb.iter_mut().for_each(|v| *v = b[rng.gen_range(0..b.len())]);
        let ma = crate::measure::stats::median(&mut ra);
        if ma == 0.0 {
            return None;
        }
        ratios.push(crate::measure::stats::median(&mut rb) / ma);
    }
    ratios.sort_by(|x, y| x.total_cmp(y));
    let lo = ratios[(BOOTSTRAP_RESAMPLES as f64 * 0.025) as usize];
    let hi = ratios[(BOOTSTRAP_RESAMPLES as f64 * 0.975) as usize - 1];
    Some((lo, hi))
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

/// The verdict for a ratio interval, an adjusted p and the sample sizes.
pub fn decide(
    ci: Option<(f64, f64)>,
    p_holm: f64,
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
        if p_holm >= options.alpha {
            return (
                Verdict::Inconclusive,
                format!("{interval} outside the {band} but not significant (Holm p {p_holm:.3})"),
            );
        }
        let better = (lo > 1.0 + t) == higher_is_better;
        let verdict = if better { Verdict::Faster } else { Verdict::Slower };
        return (verdict, format!("{interval} beyond the {band}, Holm p {p_holm:.3}"));
    }
    (Verdict::Inconclusive, format!("{interval} straddles the {band}"))
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

/// Match cells by case key; compare `metric` (role, name) or each workload's headline metric.
pub fn compare_cells(
    a: &[CellSummary],
    b: &[CellSummary],
    metric: Option<(Role, &str)>,
    options: &CompareOptions,
) -> Comparison {
    struct Matched<'a> {
        label: String,
        case: &'a Case,
        ma: &'a super::cells::MetricCell,
        mb: &'a super::cells::MetricCell,
        median_a: f64,
        median_b: f64,
        p: f64,
    }
    let mut matched = Vec::new();
    let mut warnings = Vec::new();
    let mut only_in_a = 0;
    for ca in a {
        let key = ca.case.key();
        let Some(cb) = b.iter().find(|c| c.case.key() == key) else {
            only_in_a += 1;
            continue;
        };
        let (ma, mb) = match metric {
            Some((role, name)) => (ca.metric(name, role), cb.metric(name, role)),
            None => {
                let ma = ca.headline_metric();
                (ma, ma.and_then(|m| cb.metric(&m.name, m.role)))
            }
        };
        let (Some(ma), Some(mb)) = (ma, mb) else {
            warnings.push(format!("{}: the metric is not in both runs; not compared", ca.label));
            continue;
        };
        let (Some(sa), Some(sb)) = (&ma.summary, &mb.summary) else {
            warnings.push(format!(
                "{}: {}.{} has no values in one run; not compared",
                ca.label, ma.role, ma.name
            ));
            continue;
        };
        let Some(test) = mann_whitney(&ma.values, &mb.values) else {
            continue;
        };
        matched.push(Matched {
            label: ca.label.clone(),
            case: &ca.case,
            ma,
            mb,
            median_a: sa.median,
            median_b: sb.median,
            p: test.p,
        });
    }
    let adjusted = holm(&matched.iter().map(|m| m.p).collect::<Vec<_>>());
    let mut rows = Vec::new();
    for (m, p_holm) in matched.into_iter().zip(adjusted) {
        let higher = higher_is_better(m.case, m.ma.role, &m.ma.name);
        let ci = bootstrap_ratio_ci(&m.ma.values, &m.mb.values);
        let (n_a, n_b) = (m.ma.values.len(), m.mb.values.len());
        let (verdict, reason) = decide(ci, p_holm, (n_a, n_b), higher, options);
        rows.push(CompareRow {
            label: m.label,
            metric: format!("{}.{}", m.ma.role, m.ma.name),
            unit: m.ma.unit.clone(),
            higher_is_better: higher,
            median_a: m.median_a,
            median_b: m.median_b,
            change: if m.median_a != 0.0 {
                (m.median_b - m.median_a) / m.median_a.abs()
            } else {
                0.0
            },
            ratio: (m.median_a != 0.0).then(|| m.median_b / m.median_a),
            ratio_ci95: ci,
            p: m.p,
            p_holm,
            significant: p_holm < options.alpha,
            verdict,
            reason,
            n_a,
            n_b,
        });
    }
    if let Some(r) = rows.iter().find(|r| r.n_a.min(r.n_b) < MIN_REPS_TO_DECIDE) {
        warnings.insert(
            0,
            format!(
                "too few repetitions to decide: {} and {} repetitions (e.g. {}); no difference can reach \
                 p < {} with fewer than {MIN_REPS_TO_DECIDE} a side - use --reps 6 or more",
                r.n_a, r.n_b, r.label, options.alpha
            ),
        );
    }
    let keys_a: Vec<String> = a.iter().map(|c| c.case.key()).collect();
    let only_in_b = b.iter().filter(|c| !keys_a.contains(&c.case.key())).count();
    let cases = |cells: &[CellSummary]| cells.iter().map(|c| c.case.clone()).collect::<Vec<_>>();
    Comparison {
        threshold: options.threshold,
        alpha: options.alpha,
        rows,
        only_in_a,
        only_in_b,
        parameter_differences: if only_in_a + only_in_b > 0 {
            parameter_differences(&cases(a), &cases(b))
        } else {
            Vec::new()
        },
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_p_values_match_the_tables() {
        // Complete separation: 3 vs 3 gives 2/20, 5 vs 5 gives 2/252.
        let p = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert_eq!(p.u, 0.0);
        assert!((p.p - 0.1).abs() < 1e-12);
        let p = mann_whitney(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert!((p.p - 2.0 / 252.0).abs() < 1e-12);
        // Interleaved samples are not different.
        let p = mann_whitney(&[1.0, 3.0, 5.0, 7.0], &[2.0, 4.0, 6.0, 8.0]).unwrap();
        assert!(p.p > 0.5);
        assert!((smallest_possible_p(3, 3) - 0.1).abs() < 1e-12);
        assert!(smallest_possible_p(4, 4) < ALPHA);
    }

    #[test]
    fn ties_use_the_normal_approximation() {
        let p = mann_whitney(&[1.0; 6], &[1.0; 6]).unwrap();
        assert_eq!(p.p, 1.0);
        let a: Vec<f64> = (0..30).map(|i| (i / 2) as f64).collect();
        let b: Vec<f64> = (0..30).map(|i| 100.0 + (i / 2) as f64).collect();
        assert!(mann_whitney(&a, &b).unwrap().p < 1e-6);
        assert!(mann_whitney(&[], &[1.0]).is_none());
    }

    #[test]
    fn holm_adjusts_step_down_and_stays_monotone() {
        let adj = holm(&[0.01, 0.04, 0.03, 0.5]);
        assert!((adj[0] - 0.04).abs() < 1e-12, "{adj:?}");
        assert!((adj[2] - 0.09).abs() < 1e-12, "{adj:?}");
        assert!((adj[1] - 0.09).abs() < 1e-12, "monotone: {adj:?}");
        assert!((adj[3] - 0.5).abs() < 1e-12, "{adj:?}");
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn bootstrap_is_deterministic_and_brackets_the_ratio() {
        let a = [99.0, 99.4, 99.8, 100.2, 100.6, 101.0];
        let b: Vec<f64> = a.iter().map(|v| v * 1.2).collect();
        let ci = bootstrap_ratio_ci(&a, &b).unwrap();
        assert_eq!(Some(ci), bootstrap_ratio_ci(&a, &b));
        assert!(ci.0 > 1.1 && ci.1 < 1.3 && ci.0 <= 1.2 && ci.1 >= 1.2, "{ci:?}");
        assert_eq!(bootstrap_ratio_ci(&[5.0; 6], &[5.0; 6]), Some((1.0, 1.0)));
        assert!(bootstrap_ratio_ci(&[], &[1.0]).is_none());
    }

    #[test]
    fn verdicts_follow_the_interval_the_band_and_the_test() {
        let o = CompareOptions::default();
        let n = (6, 6);
        assert_eq!(decide(Some((1.1, 1.3)), 0.01, n, true, &o).0, Verdict::Faster);
        assert_eq!(decide(Some((1.1, 1.3)), 0.01, n, false, &o).0, Verdict::Slower);
        assert_eq!(decide(Some((0.7, 0.9)), 0.01, n, true, &o).0, Verdict::Slower);
        assert_eq!(decide(Some((0.99, 1.02)), 0.9, n, true, &o).0, Verdict::NoChange);
        let (v, why) = decide(Some((0.95, 1.10)), 0.2, n, true, &o);
        assert_eq!(v, Verdict::Inconclusive);
        assert!(why.contains("straddles"), "{why}");
        let (v, why) = decide(Some((1.1, 1.3)), 0.2, n, true, &o);
        assert_eq!(v, Verdict::Inconclusive);
        assert!(why.contains("not significant"), "{why}");
        let (v, why) = decide(Some((1.1, 1.3)), 0.01, (3, 3), true, &o);
        assert_eq!(v, Verdict::Inconclusive);
        assert!(why.contains("too few"), "{why}");
    }

    #[test]
    fn parameter_differences_name_what_keeps_cells_apart() {
        use crate::case::{FakeBehaviour, FakeCase};
        let fake = |value| {
            Case::Fake(FakeCase {
                index: 0,
                behaviour: FakeBehaviour::Ok { value },
            })
        };
        let d = parameter_differences(&[fake(5)], &[fake(6)]);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            (d[0].name.as_str(), d[0].a.as_str(), d[0].b.as_str()),
            ("behaviour", "ok:5", "ok:6")
        );
        assert!(parameter_differences(&[fake(5)], &[fake(5)]).is_empty());
    }

    #[test]
    fn normal_tail_is_accurate() {
        assert!((normal_upper_tail(1.959964) - 0.025).abs() < 1e-6);
        assert!((normal_upper_tail(0.0) - 0.5).abs() < 1e-7);
    }
}
