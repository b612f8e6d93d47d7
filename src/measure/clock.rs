//! The clock iopath times with: the invariant TSC where there is one (its frequency checked
//! against CLOCK_MONOTONIC), otherwise CLOCK_MONOTONIC through `Instant`. The cost of reading
//! the clock is measured so callers can state and subtract it.

use crate::sys::tsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClockKind {
    /// Invariant TSC at this many Hz.
    Tsc { hz: f64 },
    /// CLOCK_MONOTONIC (vDSO clock_gettime).
    Monotonic,
}

/// A calibrated clock. `now()` returns ticks; `ticks_to_ns` converts.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub kind: ClockKind,
    /// Median cost of one `now()` in nanoseconds.
    pub overhead_ns: f64,
}

static TSC_HZ: OnceLock<Option<f64>> = OnceLock::new();
static ORIGIN: OnceLock<Instant> = OnceLock::new();

/// The TSC frequency in Hz, calibrated once per process (20 ms against CLOCK_MONOTONIC), or None
/// where there is no TSC.
pub fn tsc_hz() -> Option<f64> {
    *TSC_HZ.get_or_init(|| tsc::calibrate_hz(Duration::from_millis(20)))
}

impl Clock {
    /// The best clock this machine offers: the TSC when invariant, else CLOCK_MONOTONIC.
    pub fn detect() -> Clock {
        let kind = match (tsc::is_invariant(), tsc_hz()) {
            (true, Some(hz)) => ClockKind::Tsc { hz },
            _ => ClockKind::Monotonic,
        };
        Self::with_kind(kind)
    }

    /// A CLOCK_MONOTONIC clock regardless of the TSC.
    pub fn monotonic() -> Clock {
        Self::with_kind(ClockKind::Monotonic)
    }

    fn with_kind(kind: ClockKind) -> Clock {
        let mut clock = Clock { kind, overhead_ns: 0.0 };
        clock.overhead_ns = clock.measure_overhead_ns();
        clock
    }

    /// Current time in ticks of this clock.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        match self.kind {
            ClockKind::Tsc { .. } => tsc::rdtsc_fenced().unwrap_or(0),
            ClockKind::Monotonic => {
                let origin = ORIGIN.get_or_init(Instant::now);
                origin.elapsed().as_nanos() as u64
            }
        }
    }

    #[inline(always)]
    pub fn ticks_to_ns(&self, ticks: u64) -> f64 {
        match self.kind {
            ClockKind::Tsc { hz } => ticks as f64 * 1e9 / hz,
            ClockKind::Monotonic => ticks as f64,
        }
    }

    /// Median over 31 batches of 1,000 back-to-back reads: the price of one read.
    fn measure_overhead_ns(&self) -> f64 {
        let mut per_read = Vec::with_capacity(31);
        for _ in 0..31 {
            let start = Instant::now();
            let mut sink = 0u64;
            for _ in 0..1000 {
                sink = sink.wrapping_add(self.now());
            }
            std::hint::black_box(sink);
            per_read.push(start.elapsed().as_nanos() as f64 / 1000.0);
        }
        crate::measure::stats::median(&mut per_read)
    }
}
