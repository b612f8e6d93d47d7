//! What every network workload's observation has alike.

use crate::case::NetParams;
use crate::measure::counters::{latency_then_counting, CounterSample};
use crate::measure::histogram::LatencyHistogram;
use crate::net::alias;
use crate::net::completions::CompletionCounts;
use crate::net::control::{ServerReport, ThreadTally};
use crate::net::session::meter::Metered;
use crate::observation::names;
use crate::observation::{Metric, Observation, Role, Source, ThreadPlacement, Unsupported, WarningKind};
use crate::stop::Stop;

/// Why the client side's figures are missing when none of its threads measured.
pub(crate) const NO_CLIENT_WINDOW: &str = "no client thread saw the measured window";

/// Why the server side's rates and counters are missing when none of its threads measured.
pub(crate) const NO_SERVER_WINDOW: &str =
    "no server thread saw the measured window (each was blocked in recv() from before it opened until after it closed)";
/// Why a per-transaction figure of a request-response workload (rr, crr, udp-rr) is missing.
pub(crate) const NO_TRANSACTION: &str = "no transaction completed inside the window";

/// CPU time (user + system, getrusage) per transaction for one role.
pub(crate) fn cpu_per_transaction(role: Role, counters: &CounterSample, transactions: u64) -> Metric {
    Metric::from_result(
        names::CPU_US_PER_TXN,
        role,
        "us/txn",
        Source::Rusage,
        counters.usage.clone().and_then(|u| {
            if transactions == 0 {
                Err(NO_TRANSACTION.to_string())
            } else {
                Ok((u.user + u.system).as_secs_f64() * 1e6 / transactions as f64)
            }
        }),
    )
}

/// `total / transactions`, counted by iopath.
pub(crate) fn per_transaction(name: &str, role: Role, total: u64, transactions: u64, unit: &str) -> Metric {
    Metric::from_result(
        name,
        role,
        unit,
        Source::Tool,
        if transactions == 0 {
            Err(NO_TRANSACTION.to_string())
        } else {
            Ok(total as f64 / transactions as f64)
        },
    )
}

/// A headline figure of a workload, as its unavailable metric names it: name, role, unit.
pub(crate) type Headline = (&'static str, Role, &'static str);

/// The observation of a case the kernel cannot run: its headline figures unavailable with the
/// kernel's reason, and a warning saying the same.
pub(crate) fn unavailable_observation(refusal: &Unsupported, headline: &[Headline]) -> Observation {
    let reason = refusal.to_string();
    let mut obs = Observation::default();
    obs.warn(WarningKind::Unsupported, reason.clone());
    for &(name, role, unit) in headline {
        obs.push(Metric::unavailable(name, role, unit, reason.clone()));
    }
    obs
}

/// A pass's result with the kernel's refusal of what the case needs (a send or receive mode)
/// made a result, not a failure: the observation of `headline` unavailable with its reason.
/// Any other error stays one.
pub(crate) fn refusal_as_observation(
    result: anyhow::Result<Observation>,
    headline: &[Headline],
) -> anyhow::Result<Observation> {
    match result {
        Ok(obs) => Ok(obs),
        Err(e) => match e.downcast_ref::<Unsupported>() {
            Some(refusal) => Ok(unavailable_observation(refusal, headline)),
            None => Err(e),
        },
    }
}

/// A request/response case (rr, crr, udp-rr) run as `measure::counters::latency_then_counting`
/// runs it: with counters on, a latency pass with no perf event on any thread, then a counting
/// pass; `pass` runs the case with the `NetParams` of its pass. A stop skips the counting pass,
/// and a refusal of what the case needs is `headline` unavailable (`refusal_as_observation`).
pub(crate) fn latency_then_counting_passes(
    net: &NetParams,
    headline: &[Headline],
    stop: Stop,
    pass: impl Fn(NetParams) -> anyhow::Result<Observation>,
) -> anyhow::Result<Observation> {
    let one = |perf: bool| refusal_as_observation(pass(net.with_perf(perf)), headline);
    latency_then_counting(net.perf, one, || !stop.requested())
}

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

/// A metric from the peer as it must read: no value means unavailable, whatever the peer said,
/// and a value out of range (`Metric::impossible`) is unavailable too.
pub(crate) fn checked(metric: &Metric) -> Metric {
    match (&metric.value, &metric.source) {
        (None, Source::Unavailable(_)) => metric.clone(),
        (None, _) => Metric::unavailable(&metric.name, metric.role, &metric.unit, "the server sent no value"),
        (Some(_), _) => metric.from_peer("the server"),
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
        names::ALIAS_BY_REFERENCE_FRACTION,
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

/// Quantiles of a latency histogram as `role`'s metrics (`names`: metric name and quantile),
/// each unavailable with `why` when the histogram is empty.
pub(crate) fn push_quantiles<N: AsRef<str>>(
    obs: &mut Observation,
    role: Role,
    hist: &LatencyHistogram,
    names: &[(N, f64)],
    why: &str,
) {
    for (name, q) in names {
        let name = name.as_ref();
        obs.push(match hist.quantile_us(*q) {
            Some(v) => Metric::tool(name, role, v, "us"),
            None => Metric::unavailable(name, role, "us", why),
        });
    }
}

/// The latency figures of every request/response workload: the quantiles, then
/// `latency_max_us` and `latency_mean_us`, each unavailable with `why` when nothing completed.
pub(crate) fn push_latency(obs: &mut Observation, hist: &LatencyHistogram, names: &[(&str, f64)], why: &str) {
    push_quantiles(obs, Role::Client, hist, names, why);
    for (name, value) in [
        (names::LATENCY_MAX_US, hist.max_us()),
        (names::LATENCY_MEAN_US, hist.mean_us()),
    ] {
        obs.push(match value {
            Some(v) => Metric::tool(name, Role::Client, v, "us"),
            None => Metric::unavailable(name, Role::Client, "us", why),
        });
    }
}

/// The client's counters as the run measured them: a warning when they exclude the kernel,
/// and (with perf on) when the hardware counters are missing, `estimated` naming what is then
/// estimated from CPU time ("cycles_per_byte is", "cycles are"); then the counters' metrics
/// over `bytes` and `units` (`unit`: what one is) of the threads that measured.
pub(crate) fn push_client_counters<'a>(
    obs: &mut Observation,
    samples: impl Iterator<Item = &'a Option<CounterSample>> + Clone,
    perf: bool,
    estimated: &str,
    (bytes, units, unit): (u64, u64, &str),
    tsc_hz: Option<f64>,
) -> CounterSample {
    if let Some(sample) = CounterSample::sum(samples.clone().flatten()) {
        if !sample.kernel_included {
            obs.warn(WarningKind::CountersRestricted, "counters exclude the kernel (not permitted here): context switches and migrations are unavailable, kernel time is not counted");
        }
        if let (true, Err(reason)) = (perf, &sample.cycles) {
            obs.warn(WarningKind::NoHardwareCounters, format!(
                "hardware counters unavailable ({reason}): {estimated} an estimate from CPU time x TSC frequency; cache misses are not measured"
            ));
        }
    }
    let sample = measured_counters(samples, NO_CLIENT_WINDOW);
    obs.metrics
        .extend(sample.metrics(Role::Client, bytes, units, unit, tsc_hz));
    sample
}

/// A request/response client's side (rr, crr, udp-rr) over its metered threads: counters, CPU
/// and system calls per transaction, then the server's report.
pub(crate) fn push_transaction_sides<'a>(
    obs: &mut Observation,
    metered: impl Iterator<Item = &'a Metered> + Clone,
    perf: bool,
    (bytes, transactions): (u64, u64),
    tsc_hz: Option<f64>,
    server: &ServerReport,
) {
    let syscalls = metered.clone().map(|m| m.syscalls).sum();
    let client_counters = push_client_counters(
        obs,
        metered.map(|m| &m.counters),
        perf,
        "cycles are",
        (bytes, transactions, "txn"),
        tsc_hz,
    );
    obs.push(cpu_per_transaction(Role::Client, &client_counters, transactions));
    obs.push(per_transaction(
        names::SYSCALLS_PER_TXN,
        Role::Client,
        syscalls,
        transactions,
        "syscalls/txn",
    ));
    push_server_metrics(obs, server);
}

/// The first figures of a request/response observation (rr, crr, udp-rr): transactions per
/// second over the window, then the latency figures of every transaction.
pub(crate) fn push_transaction_rate(
    obs: &mut Observation,
    transactions: u64,
    latency: &LatencyHistogram,
    window_s: f64,
) {
    obs.push(Metric::from_result(
        names::TRANSACTIONS_PER_S,
        Role::System,
        "txn/s",
        Source::Tool,
        if window_s > 0.0 {
            Ok(transactions as f64 / window_s)
        } else {
            Err("the window did not open".to_string())
        },
    ));
    push_latency(obs, latency, &CDF_QUANTILES, NO_TRANSACTION);
}

/// The window's length and the transactions the client completed inside it.
pub(crate) fn push_window_transactions(obs: &mut Observation, window_s: f64, transactions: u64) {
    obs.push(Metric::tool(names::WINDOW_S, Role::System, window_s, "s"));
    obs.push(Metric::tool(
        names::TRANSACTIONS,
        Role::Client,
        transactions as f64,
        "txn",
    ));
}

/// The end of a request/response observation: a warning when client threads never saw the
/// window, with `--verify` both ends' counts (`client_verify`: the responses found intact and
/// found corrupt) and their warning, then where every thread ran (`place`).
pub(crate) fn finish_transactions<'a>(
    obs: &mut Observation,
    clients: impl Iterator<Item = &'a Metered> + Clone,
    (verified, corrupt): (u64, u64),
    server: &ServerReport,
    net: &NetParams,
) {
    let idle = clients.clone().filter(|m| m.counters.is_none()).count();
    if idle > 0 {
        obs.warn(
            WarningKind::Starved,
            format!("{idle} client threads never saw the measured window (starved of CPU?)"),
        );
    }
    if net.verify {
        push_verify_counts(obs, Role::Client, verified, corrupt);
        push_verify_counts(obs, Role::Server, server.verified_messages, server.corrupt_messages);
        let corrupted = (corrupt + server.corrupt_messages > 0).then(|| {
            format!(
                "{corrupt} responses and {} requests arrived corrupted",
                server.corrupt_messages
            )
        });
        warn_verify(obs, "rates, latency and CPU", corrupted);
    }
    place(obs, clients.map(|m| m.placement.clone()), server, net);
}

/// What one serving thread of a byte stream (stream, a sink) counted in its window.
pub(crate) struct ServedBytes<'a> {
    pub tally: &'a ThreadTally,
    pub counters: &'a Option<CounterSample>,
    pub placement: &'a ThreadPlacement,
}

/// A byte stream's server report over its serving threads: counters, CPU and system calls per
/// `unit` (a message, a read), then `own` (the system probes'), then the bytes received, with
/// each thread's placement and tally; the workload adds what is its own.
pub(crate) fn received_report<'a>(
    threads: impl IntoIterator<Item = ServedBytes<'a>>,
    unit: &str,
    own: Vec<Metric>,
    tsc_hz: Option<f64>,
) -> ServerReport {
    let threads: Vec<ServedBytes<'a>> = threads.into_iter().collect();
    let bytes: u64 = threads.iter().map(|t| t.tally.bytes).sum();
    let messages: u64 = threads.iter().map(|t| t.tally.messages).sum();
    // Only the threads that saw the window have counters; none at all is a result (every
    // counter unavailable, with the reason), not an error.
    let counters = measured_counters(threads.iter().map(|t| t.counters), NO_SERVER_WINDOW);
    let mut metrics = counters.metrics(Role::Server, bytes, messages, unit, tsc_hz);
    metrics.extend(own);
    metrics.push(Metric::tool(names::BYTES_RECEIVED, Role::Server, bytes as f64, "B"));
    ServerReport {
        metrics,
        placement: threads.iter().map(|t| t.placement.clone()).collect(),
        threads: threads.iter().map(|t| t.tally.clone()).collect(),
        ..ServerReport::default()
    }
}

/// What one serving thread of a request/response session (rr, crr, udp-rr) counted.
pub(crate) struct ServedTransactions<'a> {
    pub transactions: u64,
    /// `--verify`: requests found intact and found corrupt.
    pub verified: u64,
    pub corrupt: u64,
    pub metered: &'a Metered,
}

/// A request/response server's report over its serving threads (`txn_bytes`: a request and
/// its response): counters, CPU and system calls per transaction and the transactions
/// served, then `own` (the workload's own figures, then the system probes'), with each
/// thread's placement and tally and the verify counts.
pub(crate) fn transaction_report(
    threads: &[ServedTransactions<'_>],
    txn_bytes: u64,
    own: Vec<Metric>,
    tsc_hz: Option<f64>,
) -> ServerReport {
    let transactions: u64 = threads.iter().map(|t| t.transactions).sum();
    let syscalls: u64 = threads.iter().map(|t| t.metered.syscalls).sum();
    let counters = measured_counters(threads.iter().map(|t| &t.metered.counters), NO_SERVER_WINDOW);
    let mut metrics = counters.metrics(Role::Server, transactions * txn_bytes, transactions, "txn", tsc_hz);
    metrics.push(cpu_per_transaction(Role::Server, &counters, transactions));
    metrics.push(per_transaction(
        names::SYSCALLS_PER_TXN,
        Role::Server,
        syscalls,
        transactions,
        "syscalls/txn",
    ));
    metrics.push(Metric::tool(
        names::TRANSACTIONS_SERVED,
        Role::Server,
        transactions as f64,
        "txn",
    ));
    metrics.extend(own);
    ServerReport {
        metrics,
        placement: threads.iter().map(|t| t.metered.placement.clone()).collect(),
        verified_messages: threads.iter().map(|t| t.verified).sum(),
        corrupt_messages: threads.iter().map(|t| t.corrupt).sum(),
        warnings: Vec::new(),
        threads: threads
            .iter()
            .map(|t| ThreadTally {
                bytes: t.transactions * txn_bytes,
                messages: t.transactions,
                window_s: None,
                syscalls: t.metered.syscalls,
            })
            .collect(),
    }
}

/// The server's metrics as they must read (`checked`).
pub(crate) fn push_server_metrics(obs: &mut Observation, server: &ServerReport) {
    obs.metrics.extend(server.metrics.iter().map(checked));
}

/// The end of every client-and-server observation: where each thread ran (the client's, then
/// the server's), the placement warnings, and the server's own warnings relayed.
pub(crate) fn place(
    obs: &mut Observation,
    clients: impl Iterator<Item = ThreadPlacement>,
    server: &ServerReport,
    net: &NetParams,
) {
    obs.placement = clients.chain(server.placement.iter().cloned()).collect();
    warn_placement(obs, net.client_cpus.is_some(), net.server_cpus.is_some());
    relay_server_warnings(obs, &server.warnings);
}

/// The warning of every run with `--verify` (`what`: what the extra work is included in),
/// and the anomaly when something arrived corrupted (`corrupted`: its text, None: nothing did).
pub(crate) fn warn_verify(obs: &mut Observation, what: &str, corrupted: Option<String>) {
    obs.warn(
        WarningKind::VerifyCost,
        format!("--verify writes and checks every byte: {what} include that work"),
    );
    if let Some(text) = corrupted {
        obs.warn(WarningKind::Anomaly, text);
    }
}

/// The zero-copy completion counts of a case's sockets as system metrics, in this order:
/// zerocopy_sends, zerocopy_completions, zerocopy_completed_sends, zerocopy_copied_sends.
pub(crate) fn push_completion_counts(obs: &mut Observation, c: &CompletionCounts) {
    obs.push(Metric::tool("zerocopy_sends", Role::System, c.sends as f64, "calls"));
    obs.push(Metric::tool(
        names::ZEROCOPY_COMPLETIONS,
        Role::System,
        c.notifications as f64,
        "notifications",
    ));
    obs.push(Metric::tool(
        "zerocopy_completed_sends",
        Role::System,
        c.completed as f64,
        "calls",
    ));
    obs.push(Metric::tool(
        "zerocopy_copied_sends",
        Role::System,
        c.copied as f64,
        "calls",
    ));
}

/// zerocopy_copied_fraction: of the completed sends, those the kernel copied after all.
pub(crate) fn copied_fraction(c: &CompletionCounts) -> Metric {
    Metric::from_result(
        names::ZEROCOPY_COPIED_FRACTION,
        Role::System,
        "fraction",
        Source::Tool,
        c.not_copied_fraction()
            .map(|f| 1.0 - f)
            .ok_or_else(|| "no completion arrived".to_string()),
    )
}

/// A completion id no send call took is a bookkeeping fault worth a warning.
pub(crate) fn warn_unexpected_completions(obs: &mut Observation, c: &CompletionCounts) {
    if c.unexpected > 0 {
        obs.warn(
            WarningKind::Anomaly,
            format!("{} zero-copy completion ids did not match any send call", c.unexpected),
        );
    }
}

/// Warn when neither side, or only one, was pinned (`--client-cpus`, `--server-cpus`).
pub(crate) fn warn_unpinned(obs: &mut Observation, client_pinned: bool, server_pinned: bool) {
    match (client_pinned, server_pinned) {
        (false, false) => obs.warn(
            WarningKind::Unpinned,
            "threads were not pinned: where the scheduler put them can change results several-fold; use --client-cpus and --server-cpus",
        ),
        (false, true) | (true, false) => obs.warn(
            WarningKind::Unpinned,
            "only one side was pinned; the other ran where the scheduler put it",
        ),
        (true, true) => {}
    }
}

/// [`warn_unpinned`], and a warning when any thread in `obs.placement` migrated between CPUs
/// inside the window.
pub(crate) fn warn_placement(obs: &mut Observation, client_pinned: bool, server_pinned: bool) {
    warn_unpinned(obs, client_pinned, server_pinned);
    let moved = obs
        .placement
        .iter()
        .filter(|p| p.migrations.is_some_and(|m| m > 0))
        .count();
    if moved > 0 {
        obs.warn(
            WarningKind::Migrated,
            format!("{moved} threads migrated between CPUs during the window"),
        );
    }
}

/// Jain's fairness index over the flows' (or clients') rates: (Σx)² / (n·Σx²), 1 when all are
/// equal, 1/n when one has everything; None when there are none or all are zero.
pub(crate) fn jain_index(rates: &[f64]) -> Option<f64> {
    let sum: f64 = rates.iter().sum();
    let squares: f64 = rates.iter().map(|x| x * x).sum();
    (squares > 0.0).then(|| sum * sum / (rates.len() as f64 * squares))
}

/// The `--verify` counts of one role: messages checked intact and messages found corrupt.
pub(crate) fn push_verify_counts(obs: &mut Observation, role: crate::observation::Role, verified: u64, corrupt: u64) {
    obs.push(Metric::tool("verified_messages", role, verified as f64, "messages"));
    obs.push(Metric::tool(names::CORRUPT_MESSAGES, role, corrupt as f64, "messages"));
}

/// A remote server's warnings, which come as text over the control connection.
pub(crate) fn relay_server_warnings(obs: &mut Observation, warnings: &[String]) {
    for w in warnings {
        obs.warn(WarningKind::Other, w.clone());
    }
}

/// The quantiles stored for the latency CDF (the report draws it from these), with their
/// metric names; p50..p99.9 and max are the headline percentiles.
pub const CDF_QUANTILES: [(&str, f64); 10] = [
    ("latency_p1_us", 0.01),
    ("latency_p10_us", 0.10),
    ("latency_p25_us", 0.25),
    (names::LATENCY_P50_US, 0.50),
    ("latency_p75_us", 0.75),
    (names::LATENCY_P90_US, 0.90),
    ("latency_p95_us", 0.95),
    (names::LATENCY_P99_US, 0.99),
    (names::LATENCY_P999_US, 0.999),
    ("latency_p9999_us", 0.9999),
];

/// [`CDF_QUANTILES`] under another stem: `latency_idle` names them `latency_idle_p1_us` …
/// `latency_idle_p9999_us` (net load's probe, idle and loaded), so every CDF the report draws
/// stores the same quantiles.
pub fn cdf_quantiles_named(stem: &str) -> Vec<(String, f64)> {
    CDF_QUANTILES
        .iter()
        .map(|(name, q)| (name.replacen("latency", stem, 1), *q))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement(migrations: Option<u64>) -> ThreadPlacement {
        ThreadPlacement {
            role: Role::Client,
            index: 0,
            pinned: None,
            cpu_at_start: None,
            cpu_at_end: None,
            migrations,
        }
    }

    /// (Moved from net/workload/common.rs, which the records coordinator no longer needs.)
    #[test]
    fn pinning_both_sides_leaves_no_placement_warning_and_migrations_are_counted() {
        let mut obs = Observation::default();
        warn_placement(&mut obs, true, true);
        assert!(obs.warnings.is_empty());
        obs.placement = vec![
            placement(Some(2)),
            placement(Some(0)),
            placement(None),
            placement(Some(1)),
        ];
        warn_placement(&mut obs, true, false);
        assert!(obs.has_warning(WarningKind::Unpinned));
        let migrated: Vec<_> = obs
            .warnings
            .iter()
            .filter(|w| w.kind == WarningKind::Migrated)
            .collect();
        assert_eq!(migrated.len(), 1);
        assert!(
            migrated[0].text.starts_with("2 threads migrated"),
            "{}",
            migrated[0].text
        );
    }
}
