//! What every microbenchmark shares: the clock with its read overhead and the empty-loop
//! overhead (measured once per process, subtracted from every figure and reported with it),
//! calibrated batches of repeated operations, and the metric scheme for a repeated figure.

use crate::case::MicroCase;
use crate::measure::clock::{Clock, ClockKind};
use crate::measure::stats::{self, summarize};
use crate::observation::{Metric, Observation, Role, Source, WarningKind};
use crate::stop::{Interrupted, Stop};
use std::hint::black_box;
use std::sync::OnceLock;

/// The costs subtracted from every result.
#[derive(Debug, Clone, Copy)]
pub struct Overheads {
    pub clock: Clock,
    /// One clock read, in ns (median).
    pub timer_ns: f64,
    /// One iteration of an empty counted loop around a call that does nothing, in ns (median).
    pub loop_ns: f64,
}

static OVERHEADS: OnceLock<Overheads> = OnceLock::new();

/// The overheads of this process, measured on first use.
pub fn overheads() -> &'static Overheads {
    OVERHEADS.get_or_init(|| {
        let clock = Clock::detect();
        let mut per_iter = Vec::with_capacity(31);
        for _ in 0..31 {
            let ns = batch_ns(&clock, 100_000, &mut || -> Result<(), String> {
                black_box(());
                Ok(())
            })
            .unwrap_or(f64::NAN);
            per_iter.push((ns - clock.overhead_ns) / 100_000.0);
        }
        Overheads {
            clock,
            timer_ns: clock.overhead_ns,
            loop_ns: stats::median(&mut per_iter).max(0.0),
        }
    })
}

/// Time `iters` back-to-back calls of `op` (no overhead subtracted).
#[inline(always)]
fn batch_ns<E>(clock: &Clock, iters: u64, op: &mut impl FnMut() -> Result<(), E>) -> Result<f64, E> {
    let t0 = clock.now();
    for _ in 0..iters {
        op()?;
    }
    let t1 = clock.now();
    Ok(clock.ticks_to_ns(t1.saturating_sub(t0)))
}

/// How many samples to take and how long each should last.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub samples: usize,
    pub sample_ns: f64,
}

impl Budget {
    /// The case's budget: `samples` option if given, else 21 samples of 10 ms (7 of 2 ms with
    /// `quick`).
    pub fn of(case: &MicroCase) -> Budget {
        let quick = is_quick(case);
        let samples = case
            .option("samples")
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(if quick { 7 } else { 21 });
        Budget {
            samples,
            sample_ns: if quick { 2e6 } else { 10e6 },
        }
    }
}

pub fn is_quick(case: &MicroCase) -> bool {
    case.option("quick") == Some("1")
}

/// Per-operation times in ns: warm up and pick a batch length that lasts about
/// `budget.sample_ns`, then time `budget.samples` batches; each sample is
/// (batch time - one clock read) / iterations - loop overhead. `stop` is looked at between
/// batches (never inside one), so a stop request ends this within one sample; the error is
/// then [`Interrupted`]. An operation that can block for long must watch `stop` itself.
pub fn time_per_op<E>(budget: Budget, stop: Stop, mut op: impl FnMut() -> Result<(), E>) -> anyhow::Result<Vec<f64>>
where
    anyhow::Error: From<E>,
{
    let oh = overheads();
    let mut iters: u64 = 1;
    loop {
        check(stop)?;
        let ns = batch_ns(&oh.clock, iters, &mut op)?;
        if ns >= budget.sample_ns || iters >= 1 << 32 {
            break;
        }
        // Grow towards the target, at most 10x per step so a slow first call does not mislead.
        let factor = if ns <= 0.0 {
            10.0
        } else {
            (budget.sample_ns / ns).clamp(1.5, 10.0)
        };
        iters = ((iters as f64) * factor).ceil() as u64;
    }
    let mut out = Vec::with_capacity(budget.samples);
    for _ in 0..budget.samples {
        check(stop)?;
        let ns = batch_ns(&oh.clock, iters, &mut op)?;
        out.push((ns - oh.timer_ns) / iters as f64 - oh.loop_ns);
    }
    Ok(out)
}

/// Err([`Interrupted`]) once a stop was requested: the check every long loop makes between
/// samples or batches.
#[inline]
pub fn check(stop: Stop) -> anyhow::Result<()> {
    if stop.requested() {
        return Err(anyhow::Error::new(Interrupted));
    }
    Ok(())
}

/// Time one interval measured by the caller's two clock reads, in ns, minus one clock read.
pub fn interval_ns(t0: u64, t1: u64) -> f64 {
    let oh = overheads();
    oh.clock.ticks_to_ns(t1.saturating_sub(t0)) - oh.timer_ns
}

/// Read the clock.
#[inline(always)]
pub fn now() -> u64 {
    overheads().clock.now()
}

/// The names of the companion metrics of a repeated figure `name` (see docs/output.md).
pub const SUMMARY_SUFFIXES: [&str; 7] = ["_mean", "_stddev", "_ci95_low", "_ci95_high", "_min", "_max", "_n"];

/// Push a repeated figure: `name` holds the median; `name_mean`, `_stddev`, `_ci95_low`,
/// `_ci95_high`, `_min`, `_max` (same unit) and `name_n` (count) hold the rest. A CV above 5%
/// adds a warning (outliers are not dropped; the sweep runner flags them across repetitions).
pub fn push_summary(obs: &mut Observation, name: &str, unit: &str, values: &[f64], source: Source) {
    let Some(s) = summarize(values) else {
        obs.push(Metric::unavailable(name, Role::System, unit, "no valid samples"));
        return;
    };
    // Every figure here is a positive quantity: a median at or below zero means the operation
    // is lost in the overheads subtracted from it, which is a limit of resolution, not a value.
    if s.median <= 0.0 {
        let reason = "at or below the subtracted loop and clock overhead: too small to resolve here";
        obs.push(Metric::unavailable(name, Role::System, unit, reason));
        obs.warn(
            WarningKind::BelowResolution,
            format!("{name}: {reason} (median {:.2} {unit} after subtraction)", s.median),
        );
        return;
    }
    let m = |suffix: &str, v: f64, unit: &str| {
        Metric::new(&format!("{name}{suffix}"), Role::System, v, unit, source.clone())
    };
    let too_few = |suffix: &str, why: String| Metric::unavailable(&format!("{name}{suffix}"), Role::System, unit, why);
    obs.push(m("", s.median, unit));
    obs.push(m("_mean", s.mean, unit));
    obs.push(match s.stddev {
        Some(sd) => m("_stddev", sd, unit),
        None => too_few("_stddev", "one sample has no spread".into()),
    });
    // The interval is of the median, the headline figure.
    let no_ci = || format!("fewer than {} samples", crate::measure::stats::MIN_VALUES_FOR_CI);
    match s.ci95 {
        Some((low, high)) => {
            obs.push(m("_ci95_low", low, unit));
            obs.push(m("_ci95_high", high, unit));
        }
        None => {
            obs.push(too_few("_ci95_low", no_ci()));
            obs.push(too_few("_ci95_high", no_ci()));
        }
    }
    obs.push(m("_min", s.min, unit));
    obs.push(m("_max", s.max, unit));
    obs.push(m("_n", s.n as f64, "count"));
    if let Some(cv) = s.cv.filter(|cv| *cv > 0.05 && s.n > 2) {
        obs.warn(WarningKind::Noisy, format!(
            "{name}: samples vary by {:.0}% (CV); the machine was busy or the figure is noisy, rerun with more --samples",
            cv * 100.0
        ));
    }
}

/// A single figure measured by iopath.
pub fn push_value(obs: &mut Observation, name: &str, unit: &str, value: f64) {
    obs.push(Metric::tool(name, Role::System, value, unit));
}

/// Record the overheads that were subtracted, with the clock used.
pub fn push_overheads(obs: &mut Observation) {
    let oh = overheads();
    push_value(obs, "timer_overhead_ns", "ns", oh.timer_ns);
    push_value(obs, "loop_overhead_ns", "ns", oh.loop_ns);
    match oh.clock.kind {
        ClockKind::Tsc { hz } => push_value(obs, "clock_tsc_hz", "Hz", hz),
        ClockKind::Monotonic => obs.push(Metric::unavailable(
            "clock_tsc_hz",
            Role::System,
            "Hz",
            "no invariant TSC: timed with CLOCK_MONOTONIC",
        )),
    }
}

/// A numeric option, or the default.
pub fn opt_u64(case: &MicroCase, name: &str, default: u64) -> anyhow::Result<u64> {
    match case.option(name) {
        None => Ok(default),
        Some(text) => text
            .parse()
            .map_err(|_| anyhow::anyhow!("option {name}='{text}' is not a whole number")),
    }
}

#[cfg(test)]
mod resolution_tests {
    use super::*;

    /// Found in review: `micro call` printed negative times in a debug build, where the
    /// subtracted loop overhead exceeded what a call cost. Such a figure is unavailable.
    #[test]
    fn a_figure_lost_in_the_overheads_is_unavailable_not_negative() {
        let mut obs = Observation::default();
        push_summary(&mut obs, "call_ns", "ns", &[-4.1, -3.9, -4.3], Source::Tool);
        let m = obs.get("call_ns", Role::System).unwrap();
        assert_eq!(m.value, None);
        assert!(m.source.to_string().starts_with("unavailable: at or below"));
        assert!(obs.get("call_ns_mean", Role::System).is_none());
        let mut ok = Observation::default();
        push_summary(&mut ok, "call_ns", "ns", &[1.0, 1.1, 0.9], Source::Tool);
        assert_eq!(ok.value("call_ns", Role::System), Some(1.0));
    }
}
