//! The timer itself: cost and resolution of the clock iopath uses (and of CLOCK_MONOTONIC),
//! the empty-loop overhead, and the TSC frequency checked against CLOCK_MONOTONIC. The cost of
//! a clock read and of a loop iteration are what every other benchmark subtracts.

use super::harness::{self, overheads, push_summary, push_value, Budget};
use crate::case::MicroCase;
use crate::measure::clock::{Clock, ClockKind};
use crate::observation::names;
use crate::observation::{Metric, Observation, Role, Source};
use crate::stop::Stop;
use crate::sys::tsc;
use std::convert::Infallible;
use std::hint::black_box;
use std::time::Duration;

pub fn run(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    let budget = Budget::of(case);
    let oh = overheads();
    let mut obs = Observation::default();

    // Cost of one read: batches of 1,000 back-to-back reads.
    let read_cost = |clock: &Clock| -> Vec<f64> {
        (0..budget.samples)
            .map(|_| {
                let start = std::time::Instant::now();
                let mut sink = 0u64;
                for _ in 0..1000 {
                    sink = sink.wrapping_add(clock.now());
                }
                black_box(sink);
                start.elapsed().as_nanos() as f64 / 1000.0
            })
            .collect()
    };
    push_summary(
        &mut obs,
        names::TIMER_READ_NS,
        "ns",
        &read_cost(&oh.clock),
        Source::Tool,
    );
    harness::check(stop)?;
    push_summary(
        &mut obs,
        "clock_gettime_read_ns",
        "ns",
        &read_cost(&Clock::monotonic()),
        Source::Tool,
    );

    harness::check(stop)?;

    // Resolution: the smallest non-zero step between two consecutive reads.
    let resolution: Vec<f64> = (0..budget.samples)
        .map(|_| {
            let mut best = u64::MAX;
            for _ in 0..1000 {
                let a = oh.clock.now();
                let mut b = oh.clock.now();
                while b == a {
                    b = oh.clock.now();
                }
                best = best.min(b - a);
            }
            oh.clock.ticks_to_ns(best)
        })
        .collect();
    push_summary(&mut obs, "timer_resolution_ns", "ns", &resolution, Source::Tool);

    // Empty-loop overhead per iteration, as subtracted elsewhere.
    harness::check(stop)?;
    let loops = harness::time_per_op(budget, stop, || -> Result<(), Infallible> {
        black_box(());
        Ok(())
    })?;
    // time_per_op already subtracted the loop overhead: add it back to show the raw figure.
    let loops: Vec<f64> = loops.iter().map(|v| v + oh.loop_ns).collect();
    push_summary(&mut obs, "loop_iteration_ns", "ns", &loops, Source::Tool);

    // TSC: invariance and frequency, calibrated again over a longer window to check it.
    push_value(
        &mut obs,
        "tsc_invariant",
        "bool",
        if tsc::is_invariant() { 1.0 } else { 0.0 },
    );
    let window = if harness::is_quick(case) { 50 } else { 200 };
    let check_hz = tsc::calibrate_hz_while(Duration::from_millis(window), || !stop.requested());
    harness::check(stop)?;
    match (oh.clock.kind, check_hz) {
        (ClockKind::Tsc { hz }, Some(check)) => {
            push_value(&mut obs, "tsc_hz", "Hz", hz);
            push_value(&mut obs, "tsc_drift_vs_monotonic_ppm", "ppm", (check - hz) / hz * 1e6);
        }
        _ => {
            let why = "no invariant TSC: CLOCK_MONOTONIC is the clock";
            obs.push(Metric::unavailable("tsc_hz", Role::System, "Hz", why));
            obs.push(Metric::unavailable(
                "tsc_drift_vs_monotonic_ppm",
                Role::System,
                "ppm",
                why,
            ));
        }
    }
    harness::push_overheads(&mut obs);
    Ok(obs)
}
