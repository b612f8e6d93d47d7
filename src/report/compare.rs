//! Comparing two runs cell by cell: the change in median of the headline metric and a two-sided
//! Mann-Whitney U test (exact for small samples without ties, normal approximation otherwise).

use super::cells::CellSummary;
use crate::observation::Role;

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

/// One matched cell.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareRow {
    pub label: String,
    pub metric: String,
    pub median_a: f64,
    pub median_b: f64,
    /// (B - A) / A.
    pub change: f64,
    pub p: f64,
    pub significant: bool,
    pub n_a: usize,
    pub n_b: usize,
}

impl CompareRow {
    /// "+12.3%" when significant, "~" otherwise.
    pub fn verdict(&self) -> String {
        if self.significant {
            format!("{:+.1}%", self.change * 100.0)
        } else {
            "~".into()
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub rows: Vec<CompareRow>,
    pub only_in_a: usize,
    pub only_in_b: usize,
}

impl Comparison {
    pub fn summary_line(&self) -> String {
        let up = self.rows.iter().filter(|r| r.significant && r.change > 0.0).count();
        let down = self.rows.iter().filter(|r| r.significant && r.change < 0.0).count();
        let same = self.rows.len() - up - down;
        let mut line = format!(
            "{} matching cells: {up} higher, {down} lower, {same} not significantly different (~) \
             (two-sided Mann-Whitney U, p < {ALPHA})",
            self.rows.len()
        );
        if self.only_in_a + self.only_in_b > 0 {
            line.push_str(&format!(
                "; {} cells only in run A, {} only in run B",
                self.only_in_a, self.only_in_b
            ));
        }
        if let Some(r) = self.rows.iter().find(|r| smallest_possible_p(r.n_a, r.n_b) >= ALPHA) {
            line.push_str(&format!(
                "; note: with {} and {} repetitions no difference can reach p < {ALPHA} - use --reps 4 or more",
                r.n_a, r.n_b
            ));
        }
        line
    }
}

/// Match cells by case key; compare `metric` (role, name) or each workload's headline metric.
pub fn compare_cells(a: &[CellSummary], b: &[CellSummary], metric: Option<(Role, &str)>) -> Comparison {
    let mut rows = Vec::new();
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
            continue;
        };
        let (Some(sa), Some(sb)) = (&ma.summary, &mb.summary) else {
            continue;
        };
        let Some(test) = mann_whitney(&ma.values, &mb.values) else {
            continue;
        };
        let change = if sa.median != 0.0 {
            (sb.median - sa.median) / sa.median.abs()
        } else {
            0.0
        };
        rows.push(CompareRow {
            label: ca.label.clone(),
            metric: format!("{}.{}", ma.role, ma.name),
            median_a: sa.median,
            median_b: sb.median,
            change,
            p: test.p,
            significant: test.p < ALPHA,
            n_a: sa.n,
            n_b: sb.n,
        });
    }
    let keys_a: Vec<String> = a.iter().map(|c| c.case.key()).collect();
    let only_in_b = b.iter().filter(|c| !keys_a.contains(&c.case.key())).count();
    Comparison {
        rows,
        only_in_a,
        only_in_b,
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
    fn normal_tail_is_accurate() {
        assert!((normal_upper_tail(1.959964) - 0.025).abs() < 1e-6);
        assert!((normal_upper_tail(0.0) - 0.5).abs() < 1e-7);
    }
}
