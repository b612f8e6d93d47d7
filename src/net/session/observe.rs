//! What every network workload's observation has alike.

use crate::measure::counters::CounterSample;
use crate::net::alias;
use crate::net::control::ThreadTally;
use crate::observation::{Metric, Observation, Role, Source, WarningKind};

/// Why the server side's rates and counters are missing when none of its threads measured.
pub(crate) const NO_SERVER_WINDOW: &str =
    "no server thread saw the measured window (each was blocked in recv() from before it opened until after it closed)";
/// The mean length of the windows of the threads that had one; None when no thread had one.
/// A thread without a window measured nothing and is left out (counting it as a window of
/// length ~0 would halve the mean and double every rate over it).
pub(crate) fn mean_window<'a>(tallies: impl IntoIterator<Item = &'a ThreadTally>) -> Option<f64> {
    let seen: Vec<f64> = tallies.into_iter().filter_map(|t| t.window_s).collect();
    (!seen.is_empty()).then(|| seen.iter().sum::<f64>() / seen.len() as f64)
}

/// The sum of the counters of the threads that measured, or every counter unavailable with
/// `why` when none did (a thread without a window has no sample, not a sample of zeros).
pub(crate) fn measured_counters<'a>(
    samples: impl IntoIterator<Item = &'a Option<CounterSample>>,
    why: &str,
) -> CounterSample {
    CounterSample::sum(samples.into_iter().flatten()).unwrap_or_else(|| CounterSample::missing(why))
}

/// A metric from the peer as it must read: no value means unavailable, whatever the peer said.
pub(crate) fn checked(metric: &Metric) -> Metric {
    match (&metric.value, &metric.source) {
        (None, Source::Unavailable(_)) => metric.clone(),
        (None, _) => Metric::unavailable(&metric.name, metric.role, &metric.unit, "the server sent no value"),
        (Some(v), source) => Metric::new(&metric.name, metric.role, *v, &metric.unit, source.clone()),
    }
}

/// `total / count`, NaN (unavailable) when nothing was counted.
pub(crate) fn per(total: f64, count: f64) -> f64 {
    if count == 0.0 {
        f64::NAN
    } else {
        total / count
    }
}

/// The probe's metrics (source tool: iopath observed what the receiver got) and, when the
/// kernel sent bytes by reference or corrupted them, a warning of that kind.
pub(crate) fn publish_proof(
    obs: &mut Observation,
    mode: impl std::fmt::Display,
    proof: Result<alias::ByteTally, String>,
) {
    let fraction = proof.clone().and_then(|t| {
        t.by_reference_fraction()
            .ok_or_else(|| "the alias probe received no bytes".to_string())
    });
    obs.push(Metric::from_result(
        "alias_by_reference_fraction",
        Role::System,
        "fraction",
        Source::Tool,
        fraction.clone(),
    ));
    let bytes = |count: fn(&alias::ByteTally) -> u64| proof.as_ref().map(|t| count(t) as f64).map_err(Clone::clone);
    obs.push(Metric::from_result(
        "alias_probed_bytes",
        Role::System,
        "B",
        Source::Tool,
        bytes(|t| t.total()),
    ));
    obs.push(Metric::from_result(
        "alias_corrupt_bytes",
        Role::System,
        "B",
        Source::Tool,
        bytes(|t| t.neither),
    ));
    let Ok(tally) = proof else { return };
    if tally.neither > 0 {
        obs.warn(
            WarningKind::Anomaly,
            format!(
                "alias probe: {} of {} bytes arrived as neither the sent nor the rewritten pattern",
                tally.neither,
                tally.total()
            ),
        );
    }
    if let Ok(f) = fraction {
        let verdict = alias::Verdict::from_fraction(f);
        if verdict != alias::Verdict::Copied {
            obs.warn(
                WarningKind::ByReference,
                format!(
                    "alias probe: {mode} {verdict}: the kernel read {:.0}% of the sender's bytes after the send call returned",
                    f * 100.0
                ),
            );
        }
    }
}
