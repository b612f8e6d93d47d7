//! Latency histogram: HDR (3 significant digits, 1 ns .. 100 s), recorded in nanoseconds and
//! read out in microseconds. Per-thread histograms merge into one.

use hdrhistogram::Histogram;
use std::time::Duration;

pub struct LatencyHistogram {
    hist: Histogram<u64>,
}

/// The range every latency histogram holds, defined with the observation that checks stored and
/// peer latencies against it (`observation::out_of_order`).
pub use crate::observation::{LATENCY_HIGHEST_NS as HIGHEST_NS, LATENCY_MOST_US as MOST_US};

impl LatencyHistogram {
    pub fn new() -> LatencyHistogram {
        LatencyHistogram {
            // Bounds and precision are constants that hdrhistogram accepts.
            hist: Histogram::new_with_bounds(1, HIGHEST_NS, 3).expect("valid histogram bounds"),
        }
    }

    /// Record one latency; values beyond the range are clamped to it.
    pub fn record_ns(&mut self, ns: u64) {
        self.hist.saturating_record(ns.clamp(1, HIGHEST_NS));
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.hist.add(&other.hist);
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The latency at quantile `q` (0..=1) in microseconds, None when empty.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        (self.count() > 0).then(|| self.hist.value_at_quantile(q) as f64 / 1e3)
    }

    pub fn max_us(&self) -> Option<f64> {
        (self.count() > 0).then(|| self.hist.max() as f64 / 1e3)
    }

    pub fn mean_us(&self) -> Option<f64> {
        (self.count() > 0).then(|| self.hist.mean() / 1e3)
    }

    /// The mean of the fastest `keep` (0..=1) of the values, in microseconds: the trimmed mean
    /// the responsiveness draft takes of its probes (TM95: the slowest 5 % dropped). None when
    /// empty.
    pub fn trimmed_mean_us(&self, keep: f64) -> Option<f64> {
        let wanted = ((self.count() as f64 * keep.clamp(0.0, 1.0)).ceil() as u64).max(1);
        let (mut taken, mut sum) = (0u64, 0.0);
        for bucket in self.hist.iter_recorded() {
            let n = bucket.count_at_value().min(wanted - taken);
            sum += n as f64 * self.hist.median_equivalent(bucket.value_iterated_to()) as f64;
            taken += n;
            if taken == wanted {
                break;
            }
        }
        (self.count() > 0).then(|| sum / taken as f64 / 1e3)
    }
}

/// A duration in whole nanoseconds, as the histograms take it (saturating at u64::MAX).
pub fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trimmed_mean_drops_the_slowest() {
        let mut h = LatencyHistogram::new();
        assert_eq!(h.trimmed_mean_us(0.95), None);
        for _ in 0..95 {
            h.record_ns(1000);
        }
        for _ in 0..5 {
            h.record_ns(1_000_000);
        }
        let tm95 = h.trimmed_mean_us(0.95).unwrap();
        assert!((tm95 - 1.0).abs() < 0.01, "{tm95}");
        let all = h.trimmed_mean_us(1.0).unwrap();
        assert!(all > 50.0, "{all}");
    }

    /// Clamped and read at the top of its bucket, the longest latency is still within MOST_US.
    #[test]
    fn no_reading_is_above_most_us() {
        let mut h = LatencyHistogram::new();
        for ns in [u64::MAX, HIGHEST_NS, HIGHEST_NS - 1, 3] {
            h.record_ns(ns);
        }
        for v in [h.quantile_us(1.0), h.quantile_us(0.9999), h.max_us(), h.mean_us()] {
            let v = v.unwrap();
            assert!(v <= MOST_US, "{v} > {MOST_US}");
        }
        assert!(h.max_us().unwrap() >= HIGHEST_NS as f64 / 1e3);
    }

    #[test]
    fn quantiles_of_a_known_spread() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        for i in 1..=500u64 {
            a.record_ns(i * 1000);
        }
        for i in 501..=1000u64 {
            b.record_ns(i * 1000);
        }
        a.merge(&b);
        assert_eq!(a.count(), 1000);
        let p50 = a.quantile_us(0.5).unwrap();
        assert!((p50 - 500.0).abs() <= 1.0, "{p50}");
        let p99 = a.quantile_us(0.99).unwrap();
        assert!((p99 - 990.0).abs() <= 1.0, "{p99}");
        assert!((a.max_us().unwrap() - 1000.0).abs() <= 1.0);
        assert_eq!(LatencyHistogram::new().quantile_us(0.5), None);
    }
}
