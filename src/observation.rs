//! What a workload returns for one Case: metrics with their provenance, plus what happened.

use serde::{Deserialize, Serialize};
use std::fmt;

pub mod names;

pub use crate::warning::{Warning, WarningKind};

/// Where a number came from. A missing number is `Unavailable` with the reason, never a 0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// A hardware performance counter (perf_event_open, PERF_TYPE_HARDWARE).
    Pmu,
    /// A kernel software counter (perf_event_open, PERF_TYPE_SOFTWARE).
    Software,
    /// getrusage().
    Rusage,
    /// Counted or timed by iopath itself.
    Tool,
    /// Read from the kernel's own accounting: /proc/net/snmp and netstat, TCP_INFO,
    /// /proc/<tid>/schedstat, /proc/stat, /proc/pressure (docs/output.md names the file).
    Kernel,
    /// Counted from kernel tracepoints sampled by perf_event_open (`measure/trace.rs`): no PMU needed.
    Trace,
    /// Derived from other numbers by a stated model (e.g. cycles = CPU time x TSC frequency).
    Estimate,
    /// Could not be measured here; the reason says why.
    Unavailable(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Pmu => f.write_str("pmu"),
            Source::Software => f.write_str("software"),
            Source::Rusage => f.write_str("rusage"),
            Source::Tool => f.write_str("tool"),
            Source::Estimate => f.write_str("estimate"),
            Source::Kernel => f.write_str("kernel"),
            Source::Trace => f.write_str("trace"),
            Source::Unavailable(reason) => write!(f, "unavailable: {reason}"),
        }
    }
}

impl std::str::FromStr for Source {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "pmu" => Source::Pmu,
            "software" => Source::Software,
            "rusage" => Source::Rusage,
            "tool" => Source::Tool,
            "estimate" => Source::Estimate,
            "kernel" => Source::Kernel,
            "trace" => Source::Trace,
            other => match other.strip_prefix("unavailable") {
                Some(rest) => Source::Unavailable(rest.trim_start_matches(':').trim().to_string()),
                None => return Err(format!("unknown metric source '{other}'")),
            },
        })
    }
}

impl Serialize for Source {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Source {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Whose number it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Client,
    Server,
    System,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Client, Role::Server, Role::System];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
            Role::System => "system",
        }
    }
}

// Display and FromStr ("unknown role 'x' (accepted: client, server, system)"): the one
// spelling that stored metrics and `export --metric role.name` both read.
crate::choice::named_choices!(Role, "role");

/// The highest latency a histogram records (100 s, in ns; longer ones are clamped to it).
pub const LATENCY_HIGHEST_NS: u64 = 100_000_000_000;

/// The largest latency any reading of a histogram gives, in microseconds: the highest
/// recordable up to the top of its bucket, which with 3 significant digits is less than 1/1024
/// above it. A peer's or stored quantile, mean or maximum above it was not read from one
/// ([`out_of_order`]).
pub const LATENCY_MOST_US: f64 = LATENCY_HIGHEST_NS as f64 * (1.0 + 1.0 / 1024.0) / 1e3;

/// One number: snake_case name with the unit in it (`throughput_gbps`), its unit spelled out,
/// and where it came from. `value` is None exactly when the source is Unavailable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    pub name: String,
    pub role: Role,
    pub value: Option<f64>,
    pub unit: String,
    pub source: Source,
}

/// Why a computed value that is not a finite number (x/0, 0/0, an overflow) is missing.
pub const NOT_FINITE: &str = "no finite value (a ratio over zero: nothing was counted in the window)";

impl Metric {
    /// A measured number. A value that is not finite is never shown as a number: it becomes
    /// `unavailable` with [`NOT_FINITE`] as the reason, in every output.
    pub fn new(name: &str, role: Role, value: f64, unit: &str, source: Source) -> Metric {
        if !value.is_finite() {
            return Metric::unavailable(name, role, unit, NOT_FINITE);
        }
        Metric {
            name: name.into(),
            role,
            value: Some(value),
            unit: unit.into(),
            source,
        }
    }

    /// A number iopath counted or timed itself (source `tool`).
    pub fn tool(name: &str, role: Role, value: f64, unit: &str) -> Metric {
        Metric::new(name, role, value, unit, Source::Tool)
    }

    pub fn unavailable(name: &str, role: Role, unit: &str, reason: impl Into<String>) -> Metric {
        Metric {
            name: name.into(),
            role,
            value: None,
            unit: unit.into(),
            source: Source::Unavailable(reason.into()),
        }
    }

    /// A metric from a value that may be missing: Err carries the reason.
    pub fn from_result(name: &str, role: Role, unit: &str, source: Source, value: Result<f64, String>) -> Metric {
        match value {
            Ok(v) => Metric::new(name, role, v, unit, source),
            Err(reason) => Metric::unavailable(name, role, unit, reason),
        }
    }

    /// The column key used by exports: `<role>_<name>`.
    pub fn key(&self) -> String {
        format!("{}_{}", self.role.as_str(), self.name)
    }

    /// The one range check of a value iopath did not compute here — a peer's (an agent's
    /// result, a server's report) or the store's: why `value` cannot be one of this metric's,
    /// or None when it can. Every metric iopath measures is a count, a rate, a time, a size
    /// or a ratio of them: finite, not negative, at most [`MAX_VALUE`] (2^53: no count or
    /// rate reaches it, and above it a count is no longer a whole number), and a `_fraction`
    /// at most 1.
    pub fn impossible(&self) -> Option<String> {
        impossible_value(self.role, &self.name, self.value?)
    }

    /// This metric as received from `peer`: a value that fails [`Metric::impossible`] is
    /// unavailable, saying what the peer sent, never shown or stored as a number.
    pub fn from_peer(&self, peer: &str) -> Metric {
        match self.impossible() {
            Some(why) => Metric::unavailable(
                &self.name,
                self.role,
                &self.unit,
                format!("{peer} sent an impossible value ({why})"),
            ),
            None => self.clone(),
        }
    }
}

/// [`Metric::impossible`] of the value `v` of metric `role.name` (for readers that stream
/// rows without making a `Metric`).
pub fn impossible_value(role: Role, name: &str, v: f64) -> Option<String> {
    let what = if !v.is_finite() {
        "not a finite number"
    } else if v < 0.0 && !signed(name) {
        "negative, which no count, rate, time or size is"
    } else if v > MAX_VALUE {
        "larger than any measurement gives (2^53)"
    } else if name.ends_with("_fraction") && v > 1.0 {
        "a fraction above 1"
    } else {
        return None;
    };
    Some(format!("{}.{name} = {v:e} is {what}", role.as_str()))
}

/// The one check of how the values of one observation stand to each other, for values iopath
/// did not compute here (a peer's, the store's), beside [`impossible_value`] for each alone:
/// the bounds every case allows, as certain as arithmetic. The quantiles of one latency
/// histogram (`<what>_p<digits>_<unit>`, p1 < p10 < p50 < p99 < p999 < p9999) never decrease,
/// and none, nor the mean (`<what>_mean_<unit>`), is above the maximum (`<what>_max_<unit>`):
/// all are read from the same histogram (measure/histogram.rs), whose quantiles and maximum
/// are each the highest value of their bucket and whose mean is of bucket midpoints; and in
/// microseconds (`_us`) none is above the longest latency a histogram holds
/// (`LATENCY_MOST_US`, just over 100 s), nor above `longest`, the longest latency
/// the case's windows can record (`Workload::longest_latency`; None: no window of its own).
/// A fraction within 0..=1 is [`impossible_value`]'s. The reason names both metrics; None when
/// every pair stands as it must (a name present twice in a group leaves that group unchecked).
pub fn out_of_order(metrics: &[Metric], longest: Option<std::time::Duration>) -> Option<String> {
    // (role, what, unit) -> [(rank, name, value)]: a quantile's rank is its fraction, the
    // mean's is None (checked against the maximum only), the maximum's 2.
    let mut groups: std::collections::HashMap<(Role, &str, &str), Vec<Ranked>> = std::collections::HashMap::new();
    for metric in metrics {
        let (role, name) = (metric.role, metric.name.as_str());
        let Some(v) = metric.value else { continue };
        if signed(name) {
            continue;
        }
        if let Some(why) = beyond_histogram(role, name, v, longest) {
            return Some(why);
        }
        if let Some((what, rank, unit)) = ranked(name) {
            groups.entry((role, what, unit)).or_default().push((rank, name, v));
        }
    }
    for ((role, _, _), members) in groups {
        // A name given twice (two histograms?) leaves the group unchecked: only what is certain.
        if members
            .iter()
            .enumerate()
            .any(|(i, a)| members[..i].iter().any(|b| b.1 == a.1))
        {
            continue;
        }
        for &(rank_a, a, va) in &members {
            for &(rank_b, b, vb) in &members {
                let must_not_exceed = match (rank_a, rank_b) {
                    (Some(qa), Some(qb)) => qa < qb,
                    // The mean is at most the maximum.
                    (None, Some(qb)) => qb == MAXIMUM_RANK,
                    _ => false,
                };
                if must_not_exceed && va > vb {
                    let role = role.as_str();
                    return Some(format!(
                        "{role}.{a} = {va:e} is above {role}.{b} = {vb:e}, which one histogram never gives"
                    ));
                }
            }
        }
    }
    None
}

/// One member of a histogram's group: its rank, name and value.
type Ranked<'a> = (Option<f64>, &'a str, f64);

/// Why `v` cannot be the latency quantile, mean or maximum `role.name` (`<what>_p<digits>_us`,
/// `_mean_us`, `_max_us`): above the longest latency a histogram holds
/// (`LATENCY_MOST_US`), or above `longest`, the longest its case's windows can
/// record. None for any other name or a value within both. Part of [`out_of_order`], and
/// applied alone where values are read one at a time (the matrix's).
pub fn beyond_histogram(role: Role, name: &str, v: f64, longest: Option<std::time::Duration>) -> Option<String> {
    let (_, _, unit) = ranked(name)?;
    if unit != "us" {
        return None;
    }
    let held = LATENCY_MOST_US;
    let role = role.as_str();
    if v > held {
        return Some(format!(
            "{role}.{name} = {v:e} is above the longest latency a histogram holds ({held:e} us)"
        ));
    }
    let window_us = longest?.as_secs_f64() * 1e6;
    (v > window_us).then(|| {
        format!("{role}.{name} = {v:e} is above the longest latency the case's windows can record ({window_us:e} us)")
    })
}

/// A maximum's rank among the quantiles: above every one (their fractions are below 1).
const MAXIMUM_RANK: f64 = 2.0;

/// `<what>_p<digits>_<unit>` as (what, its fraction, unit): p1 is 0.01, p50 0.5, p999 0.999,
/// p9999 0.9999; `<what>_max_<unit>` as rank MAXIMUM_RANK, `<what>_mean_<unit>` as None.
fn ranked(name: &str) -> Option<(&str, Option<f64>, &str)> {
    let (rest, unit) = name.rsplit_once('_')?;
    let (what, stat) = rest.rsplit_once('_')?;
    if what.is_empty() || unit.is_empty() {
        return None;
    }
    let rank = match stat {
        "max" => Some(MAXIMUM_RANK),
        "mean" => None,
        _ => {
            let digits = stat
                .strip_prefix('p')
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))?;
            let n: f64 = digits.parse().ok()?;
            // p1..p9 are percent; more digits read as a decimal fraction (p50 0.5, p999 0.999).
            Some(if digits.len() == 1 {
                n / 100.0
            } else {
                n / 10f64.powi(digits.len() as i32)
            })
        }
    };
    Some((what, rank, unit))
}

/// The figures that are a difference of two measurements (remote − local), whose summaries
/// (`_min`, `_ci95_low`, ...) may fall below zero: the only metrics a negative value can be.
const SIGNED: [&str; 1] = [names::PENALTY_PER_READ_US];

/// Whether `name` is a signed figure or one of its summaries.
fn signed(name: &str) -> bool {
    SIGNED.iter().any(|base| {
        name.strip_prefix(base)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
    })
}

/// The largest value a metric may hold (2^53), see [`Metric::impossible`].
pub const MAX_VALUE: f64 = 9_007_199_254_740_992.0;

#[cfg(test)]
mod metric_tests {
    use super::*;

    /// Found by review: x/0 reached JSON as `null` beside a `tool` source and CSV as `NaN`.
    #[test]
    fn a_value_that_is_not_finite_is_unavailable_with_a_reason() {
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let m = Metric::tool("messages_per_s", Role::System, v, "msg/s");
            assert_eq!(m.value, None);
            assert_eq!(m.source, Source::Unavailable(NOT_FINITE.into()));
        }
        assert_eq!(Metric::tool("x", Role::System, 2.0, "u").value, Some(2.0));
    }

    /// Issue 31.4's per-case bounds, new values: quantiles out of order, one above the
    /// maximum, the mean above the maximum are refused naming both metrics; ordered ones,
    /// other roles, other histograms and signed figures pass.
    #[test]
    fn values_out_of_order_name_both_metrics() {
        let c = Role::Client;
        let refused = [
            vec![(c, "latency_p50_us", 812.0), (c, "latency_p99_us", 640.5)],
            vec![(c, "latency_p999_us", 7.25e3), (c, "latency_p9999_us", 7.0e3)],
            vec![(c, "queue_p10_us", 33.0), (c, "queue_max_us", 32.5)],
            vec![(c, "latency_mean_us", 91.0), (c, "latency_max_us", 90.0)],
            vec![(c, "latency_p1_us", 4.0), (c, "latency_p25_us", 3.0)],
            // Above what a histogram holds (100 s), alone or in order.
            vec![(c, "exchange_p99_us", 1.2e8), (c, "exchange_max_us", 1.3e8)],
        ];
        let metrics = |values: &[(Role, &str, f64)]| -> Vec<Metric> {
            values
                .iter()
                .map(|(role, name, v)| Metric::tool(name, *role, *v, "us"))
                .collect()
        };
        for values in refused {
            let why = out_of_order(&metrics(&values), None).unwrap_or_else(|| panic!("{values:?} passed"));
            assert!(why.contains(values[0].1), "{why}");
            assert!(why.contains(values[1].1) || why.contains("longest latency"), "{why}");
            let obs = Observation {
                metrics: metrics(&values),
                ..Default::default()
            };
            assert_eq!(obs.out_of_order(None).as_ref(), Some(&why));
            // Unavailable, a value is not compared.
            let mut partly = metrics(&values);
            for m in &mut partly {
                *m = Metric::unavailable(&m.name, m.role, "us", "none");
            }
            partly[1] = metrics(&values)[1].clone();
            assert_eq!(
                out_of_order(&partly, None).is_some(),
                why.contains("longest latency"),
                "{partly:?}"
            );
        }
        let passed = [
            vec![
                (c, "latency_p50_us", 10.0),
                (c, "latency_p90_us", 10.0),
                (c, "latency_p999_us", 55.0),
                (c, "latency_max_us", 55.0),
                (c, "latency_mean_us", 12.0),
            ],
            // Other roles, other figures: no order between them.
            vec![(c, "latency_p99_us", 5.0), (Role::Server, "latency_p50_us", 9.0)],
            vec![(c, "close_p99_us", 5.0), (c, "connect_p50_us", 9.0)],
            vec![(c, "latency_p99_us", 5.0), (c, "drain_p50_ns", 9.0)],
            // The mean may be above a quantile.
            vec![(c, "latency_mean_us", 70.0), (c, "latency_p50_us", 9.0)],
            // 99 s: within what a histogram holds; a bound of another unit is not this one's.
            vec![
                (c, "latency_p999_us", 9.9e7),
                (c, "latency_max_us", 9.9e7),
                (c, "send_lag_p50_ms", 4e8),
            ],
            // Not quantiles.
            vec![
                (c, "latency_ns_mean", 70.0),
                (c, "runqueue_wait_max_pct", 9.0),
                (c, "gso_max_size", 1.0),
            ],
        ];
        for values in passed {
            assert_eq!(out_of_order(&metrics(&values), None), None, "{values:?}");
        }
    }

    /// Found by review (issue 31): a stored or received latency far beyond the case's window
    /// passed the check, which knew only what a histogram holds (100 s).
    #[test]
    fn a_latency_longer_than_the_cases_windows_allow_is_refused() {
        let c = Role::Client;
        // A 2.5 s session (window and warm-up): at most 2 x 2.5 s + 1 s = 6 s recorded.
        let longest = crate::case::latency_bound(2.5);
        assert_eq!(longest, Some(std::time::Duration::from_secs(6)));
        let latency = |name: &str, v: f64| vec![Metric::tool(name, c, v, "us")];
        for (name, v) in [
            ("latency_p50_us", 6.5e6),
            ("connect_max_us", 4.2e7),
            ("exchange_mean_us", 6_000_001.0),
        ] {
            let why = out_of_order(&latency(name, v), longest).unwrap_or_else(|| panic!("{name} {v} passed"));
            assert!(why.contains(name) && why.contains("case's windows"), "{why}");
            // Without a window of its own only the histogram's bound applies.
            assert_eq!(out_of_order(&latency(name, v), None), None);
            assert!(beyond_histogram(c, name, v, longest).is_some());
        }
        // Within the bound, or not a latency in microseconds: passes.
        for (name, v) in [
            ("latency_p999_us", 5.9e6),
            ("latency_max_us", 6e6),
            ("drain_p50_ns", 9e12),
        ] {
            assert_eq!(out_of_order(&latency(name, v), longest), None, "{name} {v}");
        }
        // No window: no bound from it.
        assert_eq!(crate::case::latency_bound(0.0), None);
    }

    #[test]
    fn a_peers_impossible_value_is_unavailable() {
        let with = |name: &str, v: f64| Metric {
            value: Some(v),
            ..Metric::tool(name, Role::Client, 0.0, "u")
        };
        for (name, v) in [
            ("requests_per_s", -0.5),
            ("requests_per_s", -7e3),
            ("latency_p99_us", 3e17),
            ("latency_p99_us", f64::MAX),
            ("latency_p99_us", f64::NEG_INFINITY),
            ("latency_p99_us", f64::NAN),
            ("served_fraction", 1.25),
        ] {
            let m = with(name, v);
            assert!(m.impossible().is_some(), "{name} {v}");
            let seen = m.from_peer("agent 10.9.9.9:7000");
            assert_eq!(seen.value, None, "{name} {v}");
            assert!(
                matches!(&seen.source, Source::Unavailable(why) if why.contains("10.9.9.9")),
                "{seen:?}"
            );
        }
        for (name, v) in [
            ("requests_per_s", 0.0),
            ("bytes_sent", 4.5e15),
            ("served_fraction", 1.0),
        ] {
            assert_eq!(with(name, v).impossible(), None);
            assert_eq!(with(name, v).from_peer("p"), with(name, v));
        }
    }
}

/// The kernel refuses a feature a case needs (io_uring disabled, a syscall missing from this
/// kernel...): the case cannot run here, which is a result to report, not a failure. Workloads
/// return it inside their `anyhow::Error`; callers find it with `downcast_ref::<Unsupported>()`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} unavailable: {reason}")]
pub struct Unsupported {
    /// The feature, e.g. `io_uring`.
    pub what: String,
    /// Why not, with what the user can do about it.
    pub reason: String,
}

impl Unsupported {
    pub fn new(what: impl Into<String>, reason: impl Into<String>) -> Unsupported {
        Unsupported {
            what: what.into(),
            reason: reason.into(),
        }
    }

    /// `Some` when `err` is the kernel refusing `what` (not permitted, not implemented, not
    /// supported); None for any other error, which stays an error.
    pub fn refused(what: &str, err: &std::io::Error) -> Option<Unsupported> {
        let why = match err.raw_os_error()? {
            libc::EPERM | libc::EACCES => "not permitted here (a sysctl such as kernel.io_uring_disabled, seccomp, or a container profile forbids it)",
            libc::ENOSYS => "this kernel does not implement it",
            libc::EOPNOTSUPP | libc::ENOPROTOOPT => "not supported here",
            _ => return None,
        };
        Some(Unsupported::new(what, format!("{why} ({err})")))
    }
}

/// Where one thread of a workload ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadPlacement {
    pub role: Role,
    pub index: usize,
    /// The CPUs it was pinned to, or None when it was left to the scheduler.
    pub pinned: Option<Vec<usize>>,
    pub cpu_at_start: Option<usize>,
    pub cpu_at_end: Option<usize>,
    /// CPU migrations inside the measured window (software counter), when known.
    pub migrations: Option<u64>,
}

/// The result of running one Case once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub metrics: Vec<Metric>,
    /// Things the user should know about this result (copied zero-copy sends, unpinned run...).
    pub warnings: Vec<Warning>,
    pub placement: Vec<ThreadPlacement>,
    /// Both hosts' machine descriptions (`machine`, as `sysinfo` reads them) of a cell measured between two agents (a
    /// fleet cell: the agent's `agent_result`); None for every other cell. Not part of the
    /// observation's JSON (`--json`, exports and the agent protocol stay as they are): the
    /// store keeps each distinct description once (store/machines.rs) and the matrix's host
    /// table shows them.
    #[serde(skip)]
    pub pair_machines: Option<Box<PairMachines>>,
}

/// The machines at the two ends of a pair, as the source agent reported them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairMachines {
    /// The agent that ran the client side.
    pub source: crate::machine::Machine,
    /// The agent that served it, as it described itself to the source.
    pub destination: crate::machine::Machine,
}

impl Observation {
    pub fn push(&mut self, metric: Metric) {
        self.metrics.push(metric);
    }

    /// The metric with this name and role, if present.
    pub fn get(&self, name: &str, role: Role) -> Option<&Metric> {
        self.metrics.iter().find(|m| m.name == name && m.role == role)
    }

    /// Its value, if present and available.
    pub fn value(&self, name: &str, role: Role) -> Option<f64> {
        self.get(name, role).and_then(|m| m.value)
    }

    /// Add a warning of this kind (once: an identical one is not repeated).
    pub fn warn(&mut self, kind: WarningKind, text: impl Into<String>) {
        let warning = Warning::new(kind, text);
        if !self.warnings.contains(&warning) {
            self.warnings.push(warning);
        }
    }

    /// [`out_of_order`] of this observation's values, `longest` its case's longest latency.
    pub fn out_of_order(&self, longest: Option<std::time::Duration>) -> Option<String> {
        out_of_order(&self.metrics, longest)
    }

    /// Whether any warning is of this kind.
    #[cfg(test)]
    pub fn has_warning(&self, kind: WarningKind) -> bool {
        self.warnings.iter().any(|w| w.kind == kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_round_trips_through_text() {
        for s in [
            Source::Pmu,
            Source::Software,
            Source::Rusage,
            Source::Tool,
            Source::Estimate,
            Source::Unavailable("no hardware PMU".into()),
        ] {
            assert_eq!(s.to_string().parse::<Source>().unwrap(), s);
        }
        assert!("bogus".parse::<Source>().is_err());
    }

    #[test]
    fn kernel_refusals_are_unsupported_and_other_errors_are_not() {
        let eperm = std::io::Error::from_raw_os_error(libc::EPERM);
        let u = Unsupported::refused("io_uring", &eperm).unwrap();
        assert!(u.to_string().starts_with("io_uring unavailable: not permitted"), "{u}");
        let err: anyhow::Error = u.clone().into();
        assert_eq!(err.downcast_ref::<Unsupported>(), Some(&u));
        let enosys = std::io::Error::from_raw_os_error(libc::ENOSYS);
        assert!(Unsupported::refused("io_uring", &enosys).is_some());
        let emfile = std::io::Error::from_raw_os_error(libc::EMFILE);
        assert_eq!(Unsupported::refused("io_uring", &emfile), None);
    }

    #[test]
    fn unavailable_metric_has_no_value() {
        let m = Metric::unavailable("cycles_per_byte", Role::Client, "cycles/B", "no hardware PMU");
        assert_eq!(m.value, None);
        assert_eq!(m.source.to_string(), "unavailable: no hardware PMU");
        let json = serde_json::to_string(&m).unwrap();
        assert!(json.contains("\"value\":null"));
    }
}
