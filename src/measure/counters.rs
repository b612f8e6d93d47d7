//! Per-thread counters for a measured window: a hardware perf group, a software perf group
//! (kept apart so one failing does not take the other down) and getrusage(RUSAGE_THREAD).
//! Counters are enabled only between `start()` and `stop()`. Every number keeps its source;
//! what cannot be counted here is `Err(reason)`, never 0.

use crate::observation::{Metric, Role, Source};
use crate::sys::{procfs, rusage};
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

/// Kernel events are countable by root, with CAP_PERFMON, or when perf_event_paranoid <= 1.
pub fn kernel_policy() -> KernelPolicy {
    let paranoid = procfs::read_i64("/proc/sys/kernel/perf_event_paranoid");
    let root = nix::unistd::geteuid().is_root();
    if root || paranoid.is_some_and(|p| p <= 1) {
        KernelPolicy {
            include_kernel: true,
            note: None,
        }
    } else {
        KernelPolicy {
            include_kernel: false,
            note: Some(format!(
                "counters exclude the kernel (perf_event_paranoid={}, not root): context switches and kernel cycles are not counted; run as root or set kernel.perf_event_paranoid=1",
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

    /// Values scaled for multiplexing (enabled / running); Err when never scheduled.
    fn read(&mut self) -> Result<Vec<u64>, String> {
        let data = self.group.read().map_err(|e| format!("reading counters failed: {e}"))?;
        let (enabled, running) = (data.time_enabled(), data.time_running());
        let scale = match (enabled, running) {
            (Some(e), Some(r)) if r.is_zero() && !e.is_zero() => {
                return Err("counter never scheduled (multiplexed out)".to_string())
            }
            (Some(e), Some(r)) if !r.is_zero() => e.as_secs_f64() / r.as_secs_f64(),
            _ => 1.0,
        };
        Ok(self
            .members
            .iter()
            .map(|c| {
                data.get(c)
                    .map_or(0, |entry| (entry.value() as f64 * scale).round() as u64)
            })
            .collect())
    }
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
        let u = self.usage.as_ref().map_err(|e| e.clone());
        out.push(Metric::from_result(
            "cpu_user_s",
            role,
            "s",
            Source::Rusage,
            u.clone().map(|u| u.user.as_secs_f64()),
        ));
        out.push(Metric::from_result(
            "cpu_sys_s",
            role,
            "s",
            Source::Rusage,
            u.clone().map(|u| u.system.as_secs_f64()),
        ));
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
        out.push(Metric::from_result(
            "voluntary_switches",
            role,
            "switches",
            Source::Rusage,
            u.clone().map(|u| u.voluntary_switches as f64),
        ));
        out.push(Metric::from_result(
            "involuntary_switches",
            role,
            "switches",
            Source::Rusage,
            u.clone().map(|u| u.involuntary_switches as f64),
        ));
        out.push(Metric::from_result(
            "major_faults",
            role,
            "faults",
            Source::Rusage,
            u.map(|u| u.major_faults as f64),
        ));
        out
    }
}

/// The counters of the calling thread. Open it on the thread to be measured, then call
/// `start()` and `stop()` on that same thread around the measured window.
pub struct ThreadCounters {
    hardware: Result<PerfGroup, String>,
    software: Result<PerfGroup, String>,
    usage_at_start: Result<rusage::Usage, String>,
    kernel_included: bool,
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
            kernel_included: policy.include_kernel,
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
            kernel_included: true,
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
            match g.as_mut().map_err(|e| e.clone()).and_then(|g| g.read()) {
                Ok(values) => values.into_iter().map(Ok).collect(),
                Err(reason) => vec![Err(reason); n],
            }
        };
        let mut hw = read(&mut self.hardware, 5).into_iter();
        let mut sw = read(&mut self.software, 4).into_iter();
        let next = |it: &mut std::vec::IntoIter<Result<u64, String>>| it.next().unwrap_or(Err("missing".into()));
        CounterSample {
            cycles: next(&mut hw),
            instructions: next(&mut hw),
            cache_references: next(&mut hw),
            cache_misses: next(&mut hw),
            branch_misses: next(&mut hw),
            task_clock_ns: next(&mut sw),
            context_switches: next(&mut sw),
            cpu_migrations: next(&mut sw),
            page_faults: next(&mut sw),
            usage: match (&self.usage_at_start, usage_end) {
                (Ok(a), Ok(b)) => Ok(b.since(a)),
                (Err(e), _) => Err(e.clone()),
                (_, Err(e)) => Err(e),
            },
            kernel_included: self.kernel_included,
        }
    }

    /// Whether the hardware group opened (false on VMs without a PMU).
    pub fn hardware_available(&self) -> Result<(), String> {
        self.hardware.as_ref().map(|_| ()).map_err(|e| e.clone())
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
