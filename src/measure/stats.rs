//! Statistics for repeated measurements. The headline is the median, with a distribution-free
//! 95% confidence interval of the median from order statistics (as benchstat gives it: it
//! needs at least 6 values); the mean, spread and coefficient of variation come beside it, and
//! outliers by the MAD rule are flagged, not dropped. Fewer values than a statistic needs give
//! no statistic, never a made-up one.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    /// Sample standard deviation (n - 1); None below 2 values.
    pub stddev: Option<f64>,
    pub min: f64,
    pub max: f64,
    /// A confidence interval of the median with at least 95% coverage, from order statistics
    /// (no assumption about the distribution); None below [`MIN_VALUES_FOR_CI`] values.
    pub ci95: Option<(f64, f64)>,
    /// stddev / |mean|; None below 2 values or when the mean is 0.
    pub cv: Option<f64>,
    /// Indexes (into the input order) of values more than 3.5 scaled MADs from the median.
    pub outliers: Vec<usize>,
}

impl Summary {
    /// The interval as `low..high` with `fmt`, or why there is none.
    pub fn ci_text(&self, fmt: impl Fn(f64) -> String) -> String {
        match self.ci95 {
            Some((low, high)) => format!("{}..{}", fmt(low), fmt(high)),
            None => format!("n/a (n={} < {MIN_VALUES_FOR_CI})", self.n),
        }
    }

    /// The coefficient of variation as a percentage, or n/a.
    pub fn cv_text(&self) -> String {
        self.cv.map_or("n/a".into(), |cv| format!("{:.1}%", cv * 100.0))
    }
}

/// Median of the values (sorts them in place). NaN for an empty slice.
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// The median of the finite values (the slice is left as it is); None when there are none.
pub fn median_of(values: &[f64]) -> Option<f64> {
    let mut finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    (!finite.is_empty()).then(|| median(&mut finite))
}

/// SplitMix64 (Steele, Lea and Flood 2014): a small, fast, portable generator for resampling and
/// seeded test data. The same seed gives the same stream on every machine and build, which
/// `rand`'s `SmallRng` does not promise.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform index below `n` (> 0) by Lemire's multiply-shift; the bias is below n / 2^64.
    pub fn index(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Uniform in (0, 1).
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A standard normal deviate (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    /// A Gamma(shape, 1) deviate for shape >= 1 (Marsaglia and Tsang 2000).
    pub fn gamma(&mut self, shape: f64) -> f64 {
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            if self.unit().ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }

    /// A Beta(a, b) deviate for a, b >= 1.
    pub fn beta(&mut self, a: f64, b: f64) -> f64 {
        let x = self.gamma(a);
        x / (x + self.gamma(b))
    }

    /// The median of a resample with replacement of `sorted` (ascending, not empty), drawn in
    /// constant time: the k-th smallest of n uniforms is Beta(k, n + 1 - k), and mapping a
    /// uniform u to the value of rank ceil(n u) is how a resample draws, so the resample's k-th
    /// smallest value is `sorted[ceil(n U_(k)) - 1]`. For an even n the next order statistic
    /// is U_(k) + (1 - U_(k)) Beta(1, n - k). The same distribution as drawing n indexes and
    /// taking their median, without the n draws.
    pub fn resampled_median(&mut self, sorted: &[f64]) -> f64 {
        let n = sorted.len();
        let at = |u: f64| sorted[((n as f64 * u).ceil() as usize).clamp(1, n) - 1];
        if n % 2 == 1 {
            let k = n.div_ceil(2);
            at(self.beta(k as f64, (n + 1 - k) as f64))
        } else {
            let k = n / 2;
            let u = self.beta(k as f64, (n + 1 - k) as f64);
            let next = u + (1.0 - u) * (1.0 - self.unit().powf(1.0 / (n - k) as f64));
            (at(u) + at(next)) / 2.0
        }
    }
}

/// The fewest values that have a distribution-free 95% interval of the median: with 5, even
/// [min, max] covers the median only 93.75% of the time.
pub const MIN_VALUES_FOR_CI: usize = 6;

/// The 95% confidence interval of the median of `sorted` (ascending): [x_(j), x_(n+1-j)] with
/// the largest j whose coverage 1 - 2 P(Binomial(n, 1/2) < j) is still at least 95%.
pub fn median_ci95(sorted: &[f64]) -> Option<(f64, f64)> {
    let n = sorted.len();
    if n < MIN_VALUES_FOR_CI {
        return None;
    }
    // P(B <= k) for B ~ Binomial(n, 1/2), summed in log space so large n does not underflow.
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let mut ln_choose = 0.0f64; // ln C(n, 0)
    let mut cdf = 0.0f64;
    let mut j = 0usize; // order statistics are 1-based: the interval is [x_(j), x_(n+1-j)]
    for k in 0..n / 2 {
        cdf += (ln_choose + ln_half_n).exp();
        if 2.0 * cdf > 0.05 {
            break;
        }
        j = k + 1;
        ln_choose += ((n - k) as f64).ln() - ((k + 1) as f64).ln();
    }
    (j >= 1).then(|| (sorted[j - 1], sorted[n - j]))
}

/// Summarise a sample. Returns None for an empty one or one containing NaN.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let stddev = (n > 1).then(|| (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt());
    let mut sorted = values.to_vec();
    let med = median(&mut sorted);
    Some(Summary {
        n,
        median: med,
        mean,
        stddev,
        min: sorted[0],
        max: sorted[n - 1],
        ci95: median_ci95(&sorted),
        cv: stddev.filter(|_| mean != 0.0).map(|sd| sd / mean.abs()),
        outliers: mad_outliers(values),
    })
}

/// Indexes of values whose modified z-score 0.6745 |x - median| / MAD exceeds 3.5
/// (Iglewicz and Hoaglin). With MAD 0, or fewer than 5 values (too few for the MAD of the rest
/// to judge by), nothing is an outlier.
pub fn mad_outliers(values: &[f64]) -> Vec<usize> {
    if values.len() < 5 {
        return Vec::new();
    }
    let med = median(&mut values.to_vec());
    let mad = median(&mut values.iter().map(|v| (v - med).abs()).collect::<Vec<_>>());
    if mad == 0.0 {
        return Vec::new();
    }
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| 0.6745 * (*v - med).abs() / mad > 3.5)
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The constant-time resampled median has the distribution of the direct one.
    #[test]
    fn resampled_median_matches_drawing_the_resample() {
        for n in [1usize, 2, 5, 6, 7, 40] {
            let sorted: Vec<f64> = (0..n).map(|i| (i * i) as f64).collect();
            let mut g = SplitMix64::new(n as u64);
            let draws = 20_000;
            let mut fast: Vec<f64> = (0..draws).map(|_| g.resampled_median(&sorted)).collect();
            let mut slow: Vec<f64> = (0..draws)
                .map(|_| {
                    let mut r: Vec<f64> = (0..n).map(|_| sorted[g.index(n)]).collect();
                    median(&mut r)
                })
                .collect();
            fast.sort_by(|a, b| a.total_cmp(b));
            slow.sort_by(|a, b| a.total_cmp(b));
            let spread = sorted[n - 1] - sorted[0] + 1.0;
            for q in [0.1, 0.3, 0.5, 0.7, 0.9] {
                let i = (q * draws as f64) as usize;
                assert!(
                    (fast[i] - slow[i]).abs() <= 0.1 * spread,
                    "n {n} q {q}: {} vs {}",
                    fast[i],
                    slow[i]
                );
            }
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            assert!((mean(&fast) - mean(&slow)).abs() < 0.02 * spread, "n {n}");
        }
    }

    #[test]
    fn splitmix_is_reproducible_and_spreads() {
        let (mut a, mut b) = (SplitMix64::new(1), SplitMix64::new(1));
        assert_eq!(a.next_u64(), b.next_u64());
        let mut counts = [0usize; 4];
        (0..4000).for_each(|_| counts[a.index(4)] += 1);
        assert!(counts.iter().all(|&c| (900..1100).contains(&c)), "{counts:?}");
        let draws: Vec<f64> = (0..4000).map(|_| a.normal()).collect();
        let mean = draws.iter().sum::<f64>() / 4000.0;
        let var = draws.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 3999.0;
        assert!(mean.abs() < 0.1 && (var - 1.0).abs() < 0.1, "{mean} {var}");
    }

    #[test]
    fn median_of_leaves_out_what_is_not_finite() {
        assert_eq!(median_of(&[1.0, 2.0, 10.0]), Some(2.0));
        assert_eq!(median_of(&[1.0, f64::NAN, 2.0]), Some(1.5));
        assert_eq!(median_of(&[f64::INFINITY]), None);
        assert_eq!(median_of(&[]), None);
    }

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn summary_of_known_sample() {
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.n, 8);
        assert!((s.mean - 5.0).abs() < 1e-12);
        assert!((s.stddev.unwrap() - 2.138089935).abs() < 1e-6);
        assert_eq!(s.median, 4.5);
        // n = 8: P(B <= 0) = 1/256, P(B <= 1) = 9/256 > 0.025, so [x_(1), x_(8)].
        assert_eq!(s.ci95, Some((2.0, 9.0)));
        assert_eq!(s.outliers, vec![7], "9 is 6 scaled MADs from the median");
    }

    /// Found in review: one value printed `1.57..1.57 0.0%` as if it had a spread.
    #[test]
    fn too_few_values_have_no_interval_and_no_spread() {
        let s = summarize(&[3.0]).unwrap();
        assert_eq!((s.ci95, s.stddev, s.cv), (None, None, None));
        let five = summarize(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!(five.ci95, None, "5 values cannot give a 95% interval of the median");
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[f64::NAN]).is_none());
    }

    #[test]
    fn median_interval_matches_binomial_tables() {
        let sorted: Vec<f64> = (1..=100).map(f64::from).collect();
        // Tables give ranks 40 and 61 for n = 100 at >= 95%.
        assert_eq!(median_ci95(&sorted), Some((40.0, 61.0)));
        let six: Vec<f64> = (1..=6).map(f64::from).collect();
        assert_eq!(median_ci95(&six), Some((1.0, 6.0)));
        let many: Vec<f64> = (0..100_000).map(f64::from).collect();
        let (lo, hi) = median_ci95(&many).unwrap();
        assert!(
            lo > 49_600.0 && hi < 50_400.0 && lo < 50_000.0 && hi > 50_000.0,
            "{lo} {hi}"
        );
    }

    /// Found in review: with 3 repetitions, one deviation is 0 and any spread got flagged.
    #[test]
    fn too_few_values_have_no_outliers() {
        assert!(mad_outliers(&[10.0, 10.1, 30.0]).is_empty());
        assert_eq!(mad_outliers(&[10.0, 10.1, 9.9, 10.05, 30.0]), vec![4]);
    }

    #[test]
    fn mad_flags_the_far_value_only() {
        let v = [10.0, 10.2, 9.9, 10.1, 10.0, 30.0];
        assert_eq!(mad_outliers(&v), vec![5]);
        assert!(mad_outliers(&[1.0, 1.0, 1.0, 5.0]).is_empty(), "MAD 0 flags nothing");
    }
}
