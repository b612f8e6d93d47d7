//! Statistics for repeated measurements: median, mean, spread, a 95% confidence interval from
//! Student's t, the coefficient of variation, and outliers by the MAD rule (flagged, not dropped).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    /// Sample standard deviation (n - 1).
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
    /// 95% confidence interval of the mean (Student's t); equal to the mean when n < 2. The
    /// lower end stops at 0 when no value is negative.
    pub ci95_low: f64,
    pub ci95_high: f64,
    /// stddev / |mean|, 0 when the mean is 0.
    pub cv: f64,
    /// Indexes (into the input order) of values more than 3.5 scaled MADs from the median.
    pub outliers: Vec<usize>,
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

/// Two-sided 95% quantile of Student's t with `df` degrees of freedom.
pub fn t95(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        1..=30 => TABLE[df - 1],
        31..=60 => 2.042 - (df - 30) as f64 * (2.042 - 2.000) / 30.0,
        61..=120 => 2.000 - (df - 60) as f64 * (2.000 - 1.980) / 60.0,
        _ => 1.960,
    }
}

/// Summarise a sample. Returns None for an empty one or one containing NaN.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let stddev = if n > 1 {
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    let mut sorted = values.to_vec();
    let med = median(&mut sorted);
    let half = if n > 1 {
        t95(n - 1) * stddev / (n as f64).sqrt()
    } else {
        0.0
    };
    // A sample with no negative value measures a quantity that cannot be negative (a rate, a
    // time): the symmetric t-interval must not reach below zero.
    let floor = if sorted[0] >= 0.0 { 0.0 } else { f64::NEG_INFINITY };
    Some(Summary {
        n,
        median: med,
        mean,
        stddev,
        min: sorted[0],
        max: sorted[n - 1],
        ci95_low: (mean - half).max(floor),
        ci95_high: mean + half,
        cv: if mean != 0.0 { stddev / mean.abs() } else { 0.0 },
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
        assert!((s.stddev - 2.138089935).abs() < 1e-6);
        assert_eq!(s.median, 4.5);
        let half = 2.365 * s.stddev / 8f64.sqrt();
        assert!((s.ci95_high - (5.0 + half)).abs() < 1e-9);
        assert_eq!(s.outliers, vec![7], "9 is 6 scaled MADs from the median");
    }

    #[test]
    fn single_value_has_zero_width_interval() {
        let s = summarize(&[3.0]).unwrap();
        assert_eq!((s.ci95_low, s.ci95_high, s.stddev), (3.0, 3.0, 0.0));
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[f64::NAN]).is_none());
    }

    /// Found in review: the report showed [-12.27, 44.16] Gbit/s for a throughput.
    #[test]
    fn interval_of_a_non_negative_sample_stops_at_zero() {
        let s = summarize(&[1.0, 30.0, 2.0]).unwrap();
        assert_eq!(s.ci95_low, 0.0);
        let signed = summarize(&[-1.0, 30.0, 2.0]).unwrap();
        assert!(signed.ci95_low < 0.0);
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
