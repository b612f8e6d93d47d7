//! Per-thread counters for a measured window: a hardware perf group, a software perf group
//! (kept apart so one failing does not take the other down) and getrusage(RUSAGE_THREAD).
//! Counters are enabled only between `start()` and `stop()`. Every number keeps its source;
//! what cannot be counted here is `Err(reason)`, never 0.

use crate::observation::{Metric, Observation, Role, Source};
use crate::sys::{procfs, rusage};
use crate::warning::WarningKind;
use perf_event::events::{Hardware, Software};
use perf_event::{Builder, Counter, Group};
use std::io;

/// Why perf metrics are missing when a run was asked not to open perf events.
pub const PERF_OFF: &str = "perf counters off (--no-perf)";

/// Whether counters may include kernel time, and why not when they may not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelPolicy {
    pub include_kernel: bool,
    pub note: Option<String>,
}

/// Capability bits in `CapEff` of /proc/self/status that let perf count the kernel when
/// perf_event_paranoid > 1 (the kernel's perfmon_capable(): CAP_PERFMON, since Linux 5.8, or
/// CAP_SYS_ADMIN).
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;

/// The effective capability set in a /proc/<pid>/status text; None when it has none.
fn effective_caps(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

/// Whether counters may include kernel events for this process.
pub fn kernel_policy() -> KernelPolicy {
    kernel_policy_for(
        procfs::read_i64("/proc/sys/kernel/perf_event_paranoid"),
        procfs::read_trimmed("/proc/self/status").as_deref(),
        nix::unistd::geteuid().is_root(),
    )
}

/// The decision behind [`kernel_policy`], from perf_event_paranoid, the text of
/// /proc/self/status and whether the effective user is root. Kernel events are countable when
/// perf_event_paranoid <= 1, or with CAP_PERFMON or CAP_SYS_ADMIN in the effective set (what
/// the kernel checks; a root without them, as in many containers, may not). Only when the
/// capabilities cannot be read does being root stand for them.
pub fn kernel_policy_for(paranoid: Option<i64>, status: Option<&str>, root: bool) -> KernelPolicy {
    let capable = match status.and_then(effective_caps) {
        Some(caps) => caps & (1 << CAP_PERFMON | 1 << CAP_SYS_ADMIN) != 0,
        None => root,
    };
    if capable || paranoid.is_some_and(|p| p <= 1) {
        KernelPolicy {
            include_kernel: true,
            note: None,
        }
    } else {
        KernelPolicy {
            include_kernel: false,
            note: Some(format!(
                "counters exclude the kernel (perf_event_paranoid={}, without CAP_PERFMON or CAP_SYS_ADMIN): context switches, migrations and kernel cycles are not counted; set kernel.perf_event_paranoid=1 or grant CAP_PERFMON",
                paranoid.map_or("?".into(), |p| p.to_string())
            )),
        }
    }
}

/// Why perf_event_open failed, in words a user can act on.
fn open_error_reason(err: &io::Error, what: &str) -> String {
    match err.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) if what == "hardware" => {
            "no hardware PMU".to_string()
        }
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => format!("{what} event not supported"),
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "perf_event_open not permitted (perf_event_paranoid={})",
            procfs::read_i64("/proc/sys/kernel/perf_event_paranoid").map_or("?".into(), |p| p.to_string())
        ),
        Some(libc::ENOSYS) => "perf_event_open not available in this kernel".to_string(),
        _ => format!("perf_event_open failed: {err}"),
    }
}

struct PerfGroup {
    group: Group,
    members: Vec<Counter>,
}

impl PerfGroup {
    fn open(builders: &[Builder<'_>], include_kernel: bool, what: &str) -> Result<PerfGroup, String> {
        let mut leader = Group::builder();
        leader.observe_self().any_cpu();
        if include_kernel {
            leader.include_kernel();
        }
        let mut group = leader.build_group().map_err(|e| open_error_reason(&e, what))?;
        let mut members = Vec::with_capacity(builders.len());
        for b in builders {
            let mut b = b.clone();
            b.observe_self().any_cpu();
            if include_kernel {
                b.include_kernel();
            }
            members.push(group.add(&b).map_err(|e| open_error_reason(&e, what))?);
        }
        Ok(PerfGroup { group, members })
    }

    /// Each member's value scaled for multiplexing; the reason for each that cannot be read.
    fn read(&mut self) -> Vec<Result<u64, String>> {
        match self.group.read() {
            Ok(data) => scale_group(
                data.time_enabled(),
                data.time_running(),
                self.members.iter().map(|c| data.get(c).map(|entry| entry.value())),
            ),
            Err(e) => vec![Err(format!("reading counters failed: {e}")); self.members.len()],
        }
    }
}

/// The members' values of one group read, scaled by time enabled / time running (the
/// group was multiplexed). A group that never ran in the window (time running 0: never
/// scheduled, or enabling it failed) counted nothing, and a member missing from the read has
/// no value: both are `Err(reason)`, never 0.
fn scale_group(
    enabled: Option<std::time::Duration>,
    running: Option<std::time::Duration>,
    values: impl Iterator<Item = Option<u64>>,
) -> Vec<Result<u64, String>> {
    let scale = match (enabled, running) {
        (Some(e), Some(r)) if r.is_zero() && !e.is_zero() => {
            Err("counter never scheduled in the window (multiplexed out)")
        }
        (_, Some(r)) if r.is_zero() => Err("counter never ran in the window (enabling it failed)"),
        (Some(e), Some(r)) => Ok(e.as_secs_f64() / r.as_secs_f64()),
        _ => Ok(1.0),
    };
    values
        .map(|v| match (scale, v) {
            (Err(reason), _) => Err(reason.to_string()),
            (Ok(_), None) => Err("counter missing from the group read".to_string()),
            (Ok(scale), Some(v)) => Ok((v as f64 * scale).round() as u64),
        })
        .collect()
}

/// Counter values from one or more threads' windows, each Ok(value) or Err(reason).
#[derive(Debug, Clone, PartialEq)]
pub struct CounterSample {
    pub cycles: Result<u64, String>,
    pub instructions: Result<u64, String>,
    pub cache_references: Result<u64, String>,
    pub cache_misses: Result<u64, String>,
    pub branch_misses: Result<u64, String>,
    pub task_clock_ns: Result<u64, String>,
    pub context_switches: Result<u64, String>,
    pub cpu_migrations: Result<u64, String>,
    pub page_faults: Result<u64, String>,
    pub usage: Result<rusage::Usage, String>,
    pub kernel_included: bool,
}

fn add(a: &Result<u64, String>, b: &Result<u64, String>) -> Result<u64, String> {
    match (a, b) {
        (Ok(x), Ok(y)) => Ok(x + y),
        (Err(e), _) | (_, Err(e)) => Err(e.clone()),
    }
}

impl CounterSample {
    /// Sum of two samples (e.g. all client threads); a counter missing in either is missing.
    pub fn combine(&self, other: &CounterSample) -> CounterSample {
        CounterSample {
            cycles: add(&self.cycles, &other.cycles),
            instructions: add(&self.instructions, &other.instructions),
            cache_references: add(&self.cache_references, &other.cache_references),
            cache_misses: add(&self.cache_misses, &other.cache_misses),
            branch_misses: add(&self.branch_misses, &other.branch_misses),
            task_clock_ns: add(&self.task_clock_ns, &other.task_clock_ns),
            context_switches: add(&self.context_switches, &other.context_switches),
            cpu_migrations: add(&self.cpu_migrations, &other.cpu_migrations),
            page_faults: add(&self.page_faults, &other.page_faults),
            usage: match (&self.usage, &other.usage) {
                (Ok(a), Ok(b)) => Ok(rusage::Usage {
                    user: a.user + b.user,
                    system: a.system + b.system,
                    voluntary_switches: a.voluntary_switches + b.voluntary_switches,
                    involuntary_switches: a.involuntary_switches + b.involuntary_switches,
                    minor_faults: a.minor_faults + b.minor_faults,
                    major_faults: a.major_faults + b.major_faults,
                }),
                (Err(e), _) | (_, Err(e)) => Err(e.clone()),
            },
            kernel_included: self.kernel_included && other.kernel_included,
        }
    }

    /// A sample in which every counter is unavailable for `reason` (no thread measured).
    pub fn missing(reason: &str) -> CounterSample {
        let r = || Err(reason.to_string());
        CounterSample {
            cycles: r(),
            instructions: r(),
            cache_references: r(),
            cache_misses: r(),
            branch_misses: r(),
            task_clock_ns: r(),
            context_switches: r(),
            cpu_migrations: r(),
            page_faults: r(),
            usage: Err(reason.to_string()),
            kernel_included: true,
        }
    }

    /// A sample from one window's reads: the hardware group's five members (cycles,
    /// instructions, cache references, cache misses, branch misses), the software group's
    /// four (task clock, context switches, migrations, page faults), and rusage. When the
    /// kernel is excluded (`kernel_excluded` says why), context switches and migrations, which
    /// only happen in the kernel, read 0 without being measured: they are unavailable.
    pub fn from_reads(
        hw: Vec<Result<u64, String>>,
        sw: Vec<Result<u64, String>>,
        usage: Result<rusage::Usage, String>,
        kernel_excluded: Option<&str>,
    ) -> CounterSample {
        let mut hw = hw.into_iter();
        let mut sw = sw.into_iter();
        let next = |it: &mut std::vec::IntoIter<Result<u64, String>>| {
            it.next()
                .unwrap_or_else(|| Err("counter missing from the group read".into()))
        };
        let in_kernel = |v: Result<u64, String>| match (kernel_excluded, v) {
            (Some(why), Ok(_)) => Err(why.to_string()),
            (_, v) => v,
        };
        CounterSample {
            cycles: next(&mut hw),
            instructions: next(&mut hw),
            cache_references: next(&mut hw),
            cache_misses: next(&mut hw),
            branch_misses: next(&mut hw),
            task_clock_ns: next(&mut sw),
            context_switches: in_kernel(next(&mut sw)),
            cpu_migrations: in_kernel(next(&mut sw)),
            page_faults: next(&mut sw),
            usage,
            kernel_included: kernel_excluded.is_none(),
        }
    }

    /// Sum of many samples; None for none.
    pub fn sum<'a>(samples: impl IntoIterator<Item = &'a CounterSample>) -> Option<CounterSample> {
        samples.into_iter().fold(None, |acc: Option<CounterSample>, s| {
            Some(match acc {
                None => s.clone(),
                Some(a) => a.combine(s),
            })
        })
    }

    /// CPU seconds (user + system) from rusage.
    pub fn cpu_seconds(&self) -> Option<f64> {
        self.usage.as_ref().ok().map(|u| (u.user + u.system).as_secs_f64())
    }

    /// The standard metrics for one role, normalised per byte and per unit of work
    /// (`per_unit` names the unit: "msg" or "req"). Cycles fall back to an estimate from CPU
    /// time x TSC frequency, labelled as such.
    pub fn metrics(&self, role: Role, bytes: u64, units: u64, per_unit: &str, tsc_hz: Option<f64>) -> Vec<Metric> {
        let mut out = Vec::new();
        let ru = |name: &str, unit: &str, field: fn(&rusage::Usage) -> f64| {
            let value = self.usage.as_ref().map(field).map_err(Clone::clone);
            Metric::from_result(name, role, unit, Source::Rusage, value)
        };
        out.push(ru("cpu_user_s", "s", |u| u.user.as_secs_f64()));
        out.push(ru("cpu_sys_s", "s", |u| u.system.as_secs_f64()));
        let per = |v: u64, d: u64| if d == 0 { f64::NAN } else { v as f64 / d as f64 };

        // Cycles: the PMU when it exists, else an estimate.
        match (&self.cycles, self.cpu_seconds(), tsc_hz) {
            (Ok(c), _, _) => {
                out.push(Metric::new("cycles", role, *c as f64, "cycles", Source::Pmu));
                out.push(Metric::new(
                    "cycles_per_byte",
                    role,
                    per(*c, bytes),
                    "cycles/B",
                    Source::Pmu,
                ));
            }
            (Err(_), Some(cpu), Some(hz)) => {
                let est = cpu * hz;
                out.push(Metric::new("cycles", role, est, "cycles", Source::Estimate));
                out.push(Metric::new(
                    "cycles_per_byte",
                    role,
                    if bytes == 0 { f64::NAN } else { est / bytes as f64 },
                    "cycles/B",
                    Source::Estimate,
                ));
            }
            (Err(reason), _, _) => {
                out.push(Metric::unavailable("cycles", role, "cycles", reason.clone()));
                out.push(Metric::unavailable("cycles_per_byte", role, "cycles/B", reason.clone()));
            }
        }
        let pmu = |name: &str, unit: &str, v: &Result<u64, String>| {
            Metric::from_result(name, role, unit, Source::Pmu, v.clone().map(|x| x as f64))
        };
        out.push(pmu("instructions", "instructions", &self.instructions));
        out.push(pmu("cache_references", "references", &self.cache_references));
        out.push(pmu("cache_misses", "misses", &self.cache_misses));
        out.push(Metric::from_result(
            "cache_misses_per_kib",
            role,
            "misses/KiB",
            Source::Pmu,
            self.cache_misses.clone().map(|m| {
                if bytes == 0 {
                    f64::NAN
                } else {
                    m as f64 * 1024.0 / bytes as f64
                }
            }),
        ));
        out.push(pmu("branch_misses", "misses", &self.branch_misses));

        let sw =
            |name: &str, unit: &str, v: Result<f64, String>| Metric::from_result(name, role, unit, Source::Software, v);
        out.push(sw(
            "task_clock_s",
            "s",
            self.task_clock_ns.clone().map(|n| n as f64 / 1e9),
        ));
        out.push(sw(
            "context_switches",
            "switches",
            self.context_switches.clone().map(|n| n as f64),
        ));
        out.push(sw(
            &format!("context_switches_per_{per_unit}"),
            &format!("switches/{per_unit}"),
            self.context_switches.clone().map(|n| per(n, units)),
        ));
        out.push(sw(
            "cpu_migrations",
            "migrations",
            self.cpu_migrations.clone().map(|n| n as f64),
        ));
        out.push(sw("page_faults", "faults", self.page_faults.clone().map(|n| n as f64)));
        out.push(ru("voluntary_switches", "switches", |u| u.voluntary_switches as f64));
        out.push(ru("involuntary_switches", "switches", |u| {
            u.involuntary_switches as f64
        }));
        out.push(ru("major_faults", "faults", |u| u.major_faults as f64));
        out
    }
}

/// The counters of the calling thread. Open it on the thread to be measured, then call
/// `start()` and `stop()` on that same thread around the measured window.
pub struct ThreadCounters {
    hardware: Result<PerfGroup, String>,
    software: Result<PerfGroup, String>,
    usage_at_start: Result<rusage::Usage, String>,
    /// Why the kernel is excluded from counting (the policy's note), None when it is not.
    kernel_excluded: Option<String>,
}

impl ThreadCounters {
    /// Open (disabled) hardware and software groups for the calling thread.
    pub fn open(policy: &KernelPolicy) -> ThreadCounters {
        let hw: Vec<Builder> = [
            Hardware::CPU_CYCLES,
            Hardware::INSTRUCTIONS,
            Hardware::CACHE_REFERENCES,
            Hardware::CACHE_MISSES,
            Hardware::BRANCH_MISSES,
        ]
        .into_iter()
        .map(Builder::new)
        .collect();
        let sw: Vec<Builder> = [
            Software::TASK_CLOCK,
            Software::CONTEXT_SWITCHES,
            Software::CPU_MIGRATIONS,
            Software::PAGE_FAULTS,
        ]
        .into_iter()
        .map(Builder::new)
        .collect();
        ThreadCounters {
            hardware: PerfGroup::open(&hw, policy.include_kernel, "hardware"),
            software: PerfGroup::open(&sw, policy.include_kernel, "software"),
            usage_at_start: Err("window not started".into()),
            kernel_excluded: (!policy.include_kernel).then(|| {
                policy
                    .note
                    .clone()
                    .unwrap_or_else(|| "counters exclude the kernel".to_string())
            }),
        }
    }

    /// No perf events at all, only getrusage: for runs where a perf event's cost at every
    /// context switch must not touch the result. Perf metrics then read unavailable(reason).
    pub fn rusage_only(reason: &str) -> ThreadCounters {
        ThreadCounters {
            hardware: Err(reason.to_string()),
            software: Err(reason.to_string()),
            usage_at_start: Err("window not started".into()),
            // Nothing excludes the kernel: there is simply nothing to count it with.
            kernel_excluded: None,
        }
    }

    /// Reset and enable the groups and snapshot rusage: the window begins.
    pub fn start(&mut self) {
        for g in [&mut self.hardware, &mut self.software].into_iter().flatten() {
            // A failure here shows up as an error when reading.
            let _ = g.group.reset().and_then(|_| g.group.enable());
        }
        self.usage_at_start = rusage::thread().map_err(|e| format!("getrusage failed: {e}"));
    }

    /// Disable the groups and read everything: the window ends.
    pub fn stop(&mut self) -> CounterSample {
        let usage_end = rusage::thread().map_err(|e| format!("getrusage failed: {e}"));
        for g in [&mut self.hardware, &mut self.software].into_iter().flatten() {
            let _ = g.group.disable();
        }
        let read = |g: &mut Result<PerfGroup, String>, n: usize| -> Vec<Result<u64, String>> {
            match g {
                Ok(g) => g.read(),
                Err(reason) => vec![Err(reason.clone()); n],
            }
        };
        let hw = read(&mut self.hardware, 5);
        let sw = read(&mut self.software, 4);
        let usage = match (&self.usage_at_start, usage_end) {
            (Ok(a), Ok(b)) => Ok(b.since(a)),
            (Err(e), _) => Err(e.clone()),
            (_, Err(e)) => Err(e),
        };
        CounterSample::from_reads(hw, sw, usage, self.kernel_excluded.as_deref())
    }
}

/// Which perf events open on this machine for the calling thread: (event name, Ok or the
/// reason it does not open). Used by `iopath sysinfo`.
pub fn probe_events() -> Vec<(&'static str, Result<(), String>)> {
    let hw = [
        ("cycles", Hardware::CPU_CYCLES),
        ("instructions", Hardware::INSTRUCTIONS),
        ("cache-references", Hardware::CACHE_REFERENCES),
        ("cache-misses", Hardware::CACHE_MISSES),
        ("branch-misses", Hardware::BRANCH_MISSES),
    ];
    let sw = [
        ("task-clock", Software::TASK_CLOCK),
        ("context-switches", Software::CONTEXT_SWITCHES),
        ("cpu-migrations", Software::CPU_MIGRATIONS),
        ("page-faults", Software::PAGE_FAULTS),
    ];
    let open = |b: Builder<'_>, what: &str| -> Result<(), String> {
        let mut b = b;
        b.observe_self().any_cpu();
        b.build().map(drop).map_err(|e| open_error_reason(&e, what))
    };
    let mut out: Vec<(&'static str, Result<(), String>)> = Vec::new();
    for (name, ev) in hw {
        out.push((name, open(Builder::new(ev), "hardware")));
    }
    for (name, ev) in sw {
        out.push((name, open(Builder::new(ev), "software")));
    }
    out
}

/// Latency without the cost of counting, as rr, crr and servers run a case: with `perf` off,
/// `pass(false)` alone; with it on, `pass(false)` is the latency pass (no perf event on any
/// thread), whose figures are the result, and when it measured a client p50 and `go_on()`
/// holds, `pass(true)` is the counting pass whose counters are merged in ([`merge_counting`];
/// docs/methodology.md).
pub fn latency_then_counting(
    perf: bool,
    mut pass: impl FnMut(bool) -> anyhow::Result<Observation>,
    go_on: impl Fn() -> bool,
) -> anyhow::Result<Observation> {
    let mut obs = pass(false)?;
    if !perf {
        // --no-perf: PERF_OFF is the reason, as the figures say.
        return Ok(obs);
    }
    let measured = obs
        .metrics
        .iter()
        .any(|m| m.name == "latency_p50_us" && m.role == Role::Client && m.value.is_some());
    // Unsupported, nothing measured or stopped: a counting pass would add nothing. The
    // latency pass's figures must not blame a --no-perf nobody passed.
    if !measured || !go_on() {
        let why = match measured {
            false => "the latency pass measured no client p50",
            true => "the run was stopped",
        };
        relabel_perf_off(
            &mut obs,
            &format!("{LATENCY_PASS_NO_PERF}; no counting pass ran ({why})"),
        );
        return Ok(obs);
    }
    merge_counting(&mut obs, pass(true)?);
    relabel_perf_off(
        &mut obs,
        &format!("{LATENCY_PASS_NO_PERF}; the counting pass did not give this figure"),
    );
    Ok(obs)
}

/// Why the latency pass of a run with counters on has no perf figure (by design).
pub const LATENCY_PASS_NO_PERF: &str = "the latency pass opens no perf event";

/// Whether `m` is missing because perf was off for its pass.
fn perf_off(m: &Metric) -> bool {
    m.value.is_none() && matches!(&m.source, Source::Unavailable(r) if r == PERF_OFF)
}

/// Every figure missing as [`PERF_OFF`] given `reason` instead (a run with counters on:
/// `--no-perf` was not the reason).
fn relabel_perf_off(obs: &mut Observation, reason: &str) {
    for m in obs.metrics.iter_mut().filter(|m| perf_off(m)) {
        m.source = Source::Unavailable(reason.to_string());
    }
}

/// Latency without the cost of counting (rr, crr, servers): a case runs a latency pass with
/// no perf event on any thread, then a counting pass with them. Into the latency pass's
/// observation: every counter figure of the counting pass (perf
/// hardware and software counts, and what the latency pass had unavailable because perf was
/// off, with the counting pass's own reason when it could not count them either), its counter
/// warnings, its p50 as `latency_p50_counted_us`, and the transactions the
/// per-transaction counter figures are over as `counted_transactions` (client) and
/// `counted_transactions_served` (server).
pub fn merge_counting(obs: &mut Observation, counted: Observation) {
    for metric in counted.metrics {
        let counter = matches!(metric.source, Source::Pmu | Source::Software);
        let at = obs
            .metrics
            .iter()
            .position(|m| m.name == metric.name && m.role == metric.role);
        match at {
            Some(i)
                if counter
                    || (obs.metrics[i].value.is_none() && (metric.value.is_some() || perf_off(&obs.metrics[i]))) =>
            {
                obs.metrics[i] = metric
            }
            None if counter => obs.metrics.push(metric),
            _ if metric.name == "latency_p50_us" && metric.role == Role::Client => {
                obs.push(Metric {
                    name: "latency_p50_counted_us".to_string(),
                    ..metric
                });
            }
            _ if metric.name == "transactions" || metric.name == "transactions_served" => {
                obs.push(Metric {
                    name: format!("counted_{}", metric.name),
                    ..metric
                });
            }
            _ => {}
        }
    }
    for warning in counted.warnings {
        let counters = matches!(
            warning.kind,
            WarningKind::CountersRestricted | WarningKind::NoHardwareCounters
        );
        if counters && !obs.warnings.contains(&warning) {
            obs.warnings.push(warning);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The latency pass's figures stay; the counting pass adds its counters (replacing what
    /// perf-off left unavailable), its counter warnings, and its p50 as the cost of counting.
    #[test]
    fn the_counting_pass_adds_counters_and_states_its_latency() {
        let mut quiet = Observation::default();
        quiet.push(Metric::tool("latency_p50_us", Role::Client, 10.0, "us"));
        quiet.push(Metric::new(
            "cpu_us_per_txn",
            Role::Client,
            3.0,
            "us/txn",
            Source::Rusage,
        ));
        quiet.push(Metric::unavailable(
            "cycles_per_txn",
            Role::Client,
            "cycles/txn",
            PERF_OFF,
        ));
        let mut counted = Observation::default();
        counted.push(Metric::tool("latency_p50_us", Role::Client, 14.0, "us"));
        counted.push(Metric::new(
            "cpu_us_per_txn",
            Role::Client,
            4.0,
            "us/txn",
            Source::Rusage,
        ));
        counted.push(Metric::new(
            "cycles_per_txn",
            Role::Client,
            9000.0,
            "cycles/txn",
            Source::Pmu,
        ));
        counted.push(Metric::new(
            "context_switches_per_txn",
            Role::Server,
            2.0,
            "/txn",
            Source::Software,
        ));
        counted.warn(WarningKind::CountersRestricted, "no kernel");
        counted.warn(WarningKind::Unpinned, "not pinned");
        merge_counting(&mut quiet, counted);
        let get = |name: &str, role: Role| {
            let m = quiet.metrics.iter().find(|m| m.name == name && m.role == role).unwrap();
            (m.value, m.source.clone())
        };
        assert_eq!(get("latency_p50_us", Role::Client), (Some(10.0), Source::Tool));
        assert_eq!(get("cpu_us_per_txn", Role::Client), (Some(3.0), Source::Rusage));
        assert_eq!(get("cycles_per_txn", Role::Client), (Some(9000.0), Source::Pmu));
        assert_eq!(
            get("context_switches_per_txn", Role::Server),
            (Some(2.0), Source::Software)
        );
        assert_eq!(get("latency_p50_counted_us", Role::Client), (Some(14.0), Source::Tool));
        let kinds: Vec<_> = quiet.warnings.iter().map(|w| w.kind).collect();
        assert_eq!(kinds, vec![WarningKind::CountersRestricted]);
    }

    /// Found by review: with counters on, a figure the counting pass could not count either (no
    /// hardware PMU) or that no counting pass added said "perf counters off (--no-perf)" though
    /// nobody passed --no-perf. It now gives the true reason; with --no-perf, that flag.
    #[test]
    fn a_figure_missing_after_the_latency_pass_names_the_true_reason() {
        let latency_pass = || {
            let mut obs = Observation::default();
            obs.push(Metric::tool("latency_p50_us", Role::Client, 10.0, "us"));
            obs.push(Metric::unavailable(
                "cycles_per_txn",
                Role::Client,
                "cycles/txn",
                PERF_OFF,
            ));
            obs.push(Metric::unavailable(
                "cycles_per_txn",
                Role::Server,
                "cycles/txn",
                PERF_OFF,
            ));
            obs
        };
        let reason = |obs: &Observation, role: Role| obs.get("cycles_per_txn", role).unwrap().source.to_string();
        // The counting pass has no PMU either: its reason; a figure it did not give at all:
        // the latency pass's design, not the flag.
        let obs = latency_then_counting(
            true,
            |perf| {
                Ok(match perf {
                    false => latency_pass(),
                    true => {
                        let mut counted = Observation::default();
                        counted.push(Metric::tool("latency_p50_us", Role::Client, 12.0, "us"));
                        counted.push(Metric::unavailable(
                            "cycles_per_txn",
                            Role::Client,
                            "cycles/txn",
                            "no hardware PMU",
                        ));
                        counted
                    }
                })
            },
            || true,
        )
        .unwrap();
        assert_eq!(reason(&obs, Role::Client), "unavailable: no hardware PMU");
        let server = reason(&obs, Role::Server);
        assert!(server.contains(LATENCY_PASS_NO_PERF), "{server}");
        assert!(!server.contains("--no-perf"), "{server}");
        // No counting pass (stopped): says so.
        let obs = latency_then_counting(true, |_| Ok(latency_pass()), || false).unwrap();
        let client = reason(&obs, Role::Client);
        assert!(
            client.contains("no counting pass ran (the run was stopped)"),
            "{client}"
        );
        assert!(!client.contains("--no-perf"), "{client}");
        // --no-perf: the flag is the reason.
        let obs = latency_then_counting(false, |_| Ok(latency_pass()), || true).unwrap();
        assert_eq!(reason(&obs, Role::Client), format!("unavailable: {PERF_OFF}"));
    }

    #[test]
    fn software_counters_count_this_thread() {
        let mut c = ThreadCounters::open(&kernel_policy());
        c.start();
        let v: Vec<u8> = vec![1; 8 << 20];
        std::hint::black_box(&v);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let s = c.stop();
        match &s.task_clock_ns {
            Ok(ns) => assert!(*ns > 0),
            Err(reason) => eprintln!("software counters unavailable here: {reason}"),
        }
        assert!(s.usage.is_ok());
        if let Err(reason) = &s.cycles {
            assert!(!reason.is_empty());
        }
    }

    #[test]
    fn missing_cycles_become_an_estimate() {
        let sample = CounterSample {
            cycles: Err("no hardware PMU".into()),
            instructions: Err("no hardware PMU".into()),
            cache_references: Err("no hardware PMU".into()),
            cache_misses: Err("no hardware PMU".into()),
            branch_misses: Err("no hardware PMU".into()),
            task_clock_ns: Ok(1_000_000),
            context_switches: Ok(10),
            cpu_migrations: Ok(0),
            page_faults: Ok(3),
            usage: Ok(rusage::Usage {
                user: std::time::Duration::from_millis(1),
                ..Default::default()
            }),
            kernel_included: true,
        };
        let m = sample.metrics(Role::Client, 1000, 10, "msg", Some(2e9));
        let cpb = m.iter().find(|m| m.name == "cycles_per_byte").unwrap();
        assert_eq!(cpb.source, Source::Estimate);
        assert!((cpb.value.unwrap() - 2000.0).abs() < 1e-6);
        let misses = m.iter().find(|m| m.name == "cache_misses").unwrap();
        assert_eq!(misses.value, None);
        assert_eq!(misses.source.to_string(), "unavailable: no hardware PMU");
        let cs = m.iter().find(|m| m.name == "context_switches_per_msg").unwrap();
        assert_eq!(cs.value, Some(1.0));
    }

    const STATUS_NO_CAPS: &str =
        "Name:\tiopath\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n";

    fn status_with_caps(caps: u64) -> String {
        format!("Name:\tiopath\nCapPrm:\t{caps:016x}\nCapEff:\t{caps:016x}\nCapBnd:\t000001ffffffffff\n")
    }

    /// The docs promised CAP_PERFMON; the code looked at the user id only. What the kernel
    /// checks above perf_event_paranoid 1 is CAP_PERFMON or CAP_SYS_ADMIN in the effective set.
    #[test]
    fn the_kernel_is_counted_with_cap_perfmon_or_cap_sys_admin_or_paranoid_at_most_1() {
        let perfmon = status_with_caps(1 << 38);
        let sys_admin = status_with_caps(1 << 21);
        let other_caps = status_with_caps(!(1u64 << 38 | 1 << 21) & 0x1ff_ffff_ffff);
        assert!(kernel_policy_for(Some(2), Some(&perfmon), false).include_kernel);
        assert!(kernel_policy_for(Some(2), Some(&sys_admin), false).include_kernel);
        assert!(kernel_policy_for(Some(1), Some(STATUS_NO_CAPS), false).include_kernel);
        assert!(kernel_policy_for(Some(-1), None, false).include_kernel);
        // A root without either capability (a container) is refused by the kernel.
        let p = kernel_policy_for(Some(2), Some(&other_caps), true);
        assert!(!p.include_kernel);
        let note = p.note.unwrap();
        assert!(
            note.contains("perf_event_paranoid=2") && note.contains("CAP_PERFMON"),
            "{note}"
        );
        assert!(!kernel_policy_for(Some(3), Some(STATUS_NO_CAPS), false).include_kernel);
        // Capabilities unreadable: root stands for them.
        assert!(kernel_policy_for(Some(2), None, true).include_kernel);
        assert!(!kernel_policy_for(Some(2), Some("Name:\tx\n"), false).include_kernel);
        assert!(!kernel_policy_for(None, None, false).include_kernel);
    }

    fn all_ok(n: usize) -> Vec<Result<u64, String>> {
        (1..=n as u64).map(|v| Ok(v * 10)).collect()
    }

    fn metric<'a>(m: &'a [Metric], name: &str) -> &'a Metric {
        m.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("no {name}"))
    }

    /// With the kernel excluded, context switches and migrations read 0 without having been
    /// counted (they happen only in the kernel): they are unavailable with the reason, while
    /// what user space does (page faults, task clock) stays a software count.
    #[test]
    fn kernel_only_counts_are_unavailable_when_the_kernel_is_excluded() {
        let why = kernel_policy_for(Some(2), Some(STATUS_NO_CAPS), false).note.unwrap();
        let zeros = vec![Ok(0u64); 4];
        let sample = CounterSample::from_reads(all_ok(5), zeros, Ok(Default::default()), Some(&why));
        assert!(!sample.kernel_included);
        let m = sample.metrics(Role::Server, 1000, 10, "msg", None);
        for name in ["context_switches", "context_switches_per_msg", "cpu_migrations"] {
            assert_eq!(metric(&m, name).value, None, "{name}");
            assert_eq!(metric(&m, name).source, Source::Unavailable(why.clone()), "{name}");
        }
        assert_eq!(metric(&m, "page_faults").source, Source::Software);
        assert_eq!(metric(&m, "page_faults").value, Some(0.0));
        assert_eq!(metric(&m, "task_clock_s").source, Source::Software);
        // Kernel included: the same zeros are real counts.
        let sample = CounterSample::from_reads(all_ok(5), vec![Ok(0); 4], Ok(Default::default()), None);
        let m = sample.metrics(Role::Server, 1000, 10, "msg", None);
        assert_eq!(metric(&m, "context_switches").value, Some(0.0));
        assert_eq!(metric(&m, "context_switches").source, Source::Software);
    }

    /// A group member that could not be read, or a group that never ran in the window, is
    /// unavailable with the reason; it used to read 0.
    #[test]
    fn an_unread_or_unscheduled_counter_is_unavailable_not_0() {
        use std::time::Duration;
        let ms = Duration::from_millis;
        // Multiplexed half the time: scaled x2.
        let v = scale_group(Some(ms(10)), Some(ms(5)), [Some(3), Some(4)].into_iter());
        assert_eq!(v, vec![Ok(6), Ok(8)]);
        // Never scheduled, or never enabled: nothing was counted.
        for (enabled, running) in [(ms(10), ms(0)), (ms(0), ms(0))] {
            let v = scale_group(Some(enabled), Some(running), [Some(0), Some(0)].into_iter());
            assert!(
                v.iter().all(|r| r.as_ref().is_err_and(|e| e.contains("never"))),
                "{v:?}"
            );
        }
        // One member missing from the read.
        let v = scale_group(Some(ms(10)), Some(ms(10)), [Some(5), None, Some(7)].into_iter());
        assert_eq!(v[0], Ok(5));
        assert_eq!(v[1], Err("counter missing from the group read".to_string()));
        assert_eq!(v[2], Ok(7));

        // Through the sample to the metrics: the missing member (instructions) is
        // unavailable with its reason; its neighbours keep their values.
        let mut hw = all_ok(5);
        hw[1] = v[1].clone();
        let sw = scale_group(Some(ms(10)), Some(ms(0)), [Some(0); 4].into_iter());
        let sample = CounterSample::from_reads(hw, sw, Ok(Default::default()), None);
        let m = sample.metrics(Role::Client, 1000, 10, "msg", Some(1e9));
        assert_eq!(metric(&m, "instructions").value, None);
        assert_eq!(
            metric(&m, "instructions").source,
            Source::Unavailable("counter missing from the group read".into())
        );
        assert_eq!(metric(&m, "cycles").value, Some(10.0));
        assert_eq!(metric(&m, "cache_references").value, Some(30.0));
        for name in ["task_clock_s", "context_switches", "cpu_migrations", "page_faults"] {
            assert_eq!(metric(&m, name).value, None, "{name}");
            assert!(
                metric(&m, name)
                    .source
                    .to_string()
                    .starts_with("unavailable: counter never"),
                "{name}"
            );
        }
        // Fewer values than members: the rest are missing, not 0.
        let sample = CounterSample::from_reads(vec![Ok(1)], vec![], Ok(Default::default()), None);
        assert!(sample.branch_misses.is_err() && sample.page_faults.is_err());
    }
}
