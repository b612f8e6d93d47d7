//! The run-to-run level of a comparison (docs/methodology.md, "Comparing two runs"). A run is
//! one draw of the machine's state: its cells share whatever the machine did while it ran
//! (other load, frequency, placement, cache layout), so the unit of replication for "did B
//! change" is the run, not the repetition. Each run gives one value per cell (the log of its
//! median) and one per whole run (the mean of those logs over the cells); the spread of these
//! values between runs of one side, pooled over the sides and over earlier runs of the same
//! plan, is the noise a change must clear. The test is Student's t on the log values.

use serde::Serialize;

/// A whole-machine shift between two runs larger than this factor (a run at half or double the
/// speed of the other) is taken as more than any run-to-run spread explains, when nothing is
/// known of the spread (one run a side, no history). Issue 30 saw 0.577 between two runs of
/// one plan back to back on a shared 2-CPU machine; a factor of 2 leaves room for that.
pub const MACHINE_DRIFT_MAX: f64 = 2.0;

/// The most earlier runs of the same plan read for the run-to-run spread.
pub const HISTORY_RUNS: usize = 10;

/// Where a comparison's run-to-run spread comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    pub runs_a: usize,
    pub runs_b: usize,
    /// Earlier runs of the same plan on the same machine read for the spread (only when each
    /// side has one run).
    pub history_runs: usize,
    /// Degrees of freedom of the pooled spread: (runs a side - 1) summed over A, B and the
    /// history. 0: nothing is known of the spread between runs.
    pub df: usize,
    /// Standard deviation between runs of the whole-run level (mean log median over the
    /// cells), pooled; a fraction (0.02 = runs differ by about 2%). None when df is 0.
    pub run_sd: Option<f64>,
}

impl Spread {
    /// In words: "3 and 3 runs, spread 1.2% between runs (4 degrees of freedom)".
    pub fn describe(&self) -> String {
        let runs = format!("{} and {} runs", self.runs_a, self.runs_b);
        let from = if self.history_runs > 0 {
            format!(
                ", the spread from {} earlier runs of this plan on this machine",
                self.history_runs
            )
        } else {
            String::new()
        };
        match self.run_sd {
            Some(sd) => format!(
                "{runs}{from}: the whole run varies {:.1}% between runs ({} degrees of freedom)",
                sd * 100.0,
                self.df
            ),
            None => format!("{runs}: nothing known of the spread between runs"),
        }
    }
}

/// The line that says one run a side cannot separate a shift of the machine from a change.
pub fn no_spread_line() -> String {
    format!(
        "one run a side and no earlier runs of this plan on this machine: a shift of the whole machine \
         between the runs cannot be told from a change; only a change beyond ×{:.1}..×{:.0} is decided \
         (assumed: the machine does not drift by more than a factor of {:.0} between runs) - compare 3 runs a \
         side (`iopath compare 1,2,3 4,5,6`) or keep earlier runs of the plan in the database",
        1.0 / MACHINE_DRIFT_MAX,
        MACHINE_DRIFT_MAX,
        MACHINE_DRIFT_MAX
    )
}

/// Whether a ratio interval lies wholly beyond what a machine drift explains.
pub fn beyond_drift(ci: (f64, f64)) -> bool {
    ci.0 > MACHINE_DRIFT_MAX || ci.1 < 1.0 / MACHINE_DRIFT_MAX
}

/// Sum of squared deviations from the group's mean, and the group's degrees of freedom.
fn squares(values: &[f64]) -> (f64, usize) {
    if values.len() < 2 {
        return (0.0, 0);
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    (values.iter().map(|v| (v - mean) * (v - mean)).sum(), values.len() - 1)
}

/// The pooled variance of groups of per-run values around their own group means, with its
/// degrees of freedom; None when no group has two values.
pub fn pooled_variance(groups: &[&[f64]]) -> Option<(f64, usize)> {
    let (ss, df) = groups
        .iter()
        .map(|g| squares(g))
        .fold((0.0, 0), |(s, d), (s2, d2)| (s + s2, d + d2));
    (df > 0).then(|| (ss / df as f64, df))
}

/// Student's t on per-run log values: the ratio exp(mean B - mean A) with a 95% interval and
/// a two-sided p, against the spread pooled over A, B and `history`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunTest {
    pub ratio: f64,
    pub ci: (f64, f64),
    pub p: f64,
    pub df: usize,
    /// The pooled standard deviation between runs (log scale).
    pub sd: f64,
}

pub fn run_test(a: &[f64], b: &[f64], history: &[f64]) -> Option<RunTest> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (var, df) = pooled_variance(&[a, b, history])?;
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let diff = mean(b) - mean(a);
    let sd = var.sqrt();
    let se = sd * (1.0 / a.len() as f64 + 1.0 / b.len() as f64).sqrt();
    let q = t_quantile_upper(0.025, df);
    let p = if se > 0.0 {
        (2.0 * t_upper_tail((diff / se).abs(), df)).min(1.0)
    } else if diff == 0.0 {
        1.0
    } else {
        0.0
    };
    Some(RunTest {
        ratio: diff.exp(),
        ci: ((diff - q * se).exp(), (diff + q * se).exp()),
        p,
        df,
        sd,
    })
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, nine coefficients; relative error below 1e-13).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let series = C[1..]
        .iter()
        .enumerate()
        .fold(C[0], |s, (i, c)| s + c / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + series.ln()
}

/// The continued fraction of the regularized incomplete beta (modified Lentz).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    let tiny = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    d = 1.0 / if d.abs() < tiny { tiny } else { d };
    let mut h = d;
    for m in 1..500 {
        let m = m as f64;
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        let odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        for step in [even, odd] {
            d = 1.0 + step * d;
            d = 1.0 / if d.abs() < tiny { tiny } else { d };
            c = 1.0 + step / c;
            c = if c.abs() < tiny { tiny } else { c };
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// I_x(a, b), the regularized incomplete beta function.
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front = (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// P(T > t) for Student's t with `df` degrees of freedom (t >= 0).
pub fn t_upper_tail(t: f64, df: usize) -> f64 {
    let v = df as f64;
    0.5 * incomplete_beta(v / 2.0, 0.5, v / (v + t * t))
}

/// The t with P(T > t) = `upper`, by bisection.
pub fn t_quantile_upper(upper: f64, df: usize) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1e6f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if t_upper_tail(mid, df) > upper {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_distribution_matches_the_tables() {
        for (df, q) in [(1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (100, 1.984)] {
            assert!((t_quantile_upper(0.025, df) - q).abs() < 2e-3, "df {df}");
        }
        assert!((t_upper_tail(0.0, 5) - 0.5).abs() < 1e-12);
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn the_spread_pools_every_group_around_its_own_mean() {
        // Two groups each spread ±1 around different means: variance 1 + 1 over 2 df... and the
        // shift between the groups is not spread.
        let (var, df) = pooled_variance(&[&[0.0, 2.0], &[10.0, 12.0]]).unwrap();
        assert_eq!(df, 2);
        assert!((var - 2.0).abs() < 1e-12);
        assert!(pooled_variance(&[&[1.0], &[2.0]]).is_none());
        let t = run_test(&[0.0, 0.01, -0.01], &[-0.1, -0.11, -0.09], &[]).unwrap();
        assert_eq!(t.df, 4);
        assert!(t.p < 0.001 && t.ci.1 < 0.93, "{t:?}");
        assert!(run_test(&[0.0], &[-0.1], &[]).is_none(), "one run a side, no history");
        let h = run_test(&[0.0], &[-0.1], &[0.0, 0.2, -0.2]).unwrap();
        assert!(h.p > 0.05, "{h:?}: a spread of 20% between runs hides a 10% shift");
    }

    #[test]
    fn only_a_shift_beyond_the_drift_bound_is_decided_without_a_spread() {
        assert!(beyond_drift((0.3, 0.45)));
        assert!(!beyond_drift((0.45, 0.6)));
        assert!(beyond_drift((2.1, 3.0)));
    }
}
