//! What every microbenchmark shares: the clock with its read overhead and the empty-loop
//! overhead (measured once per process, subtracted from every figure and reported with it),
//! calibrated batches of repeated operations, and the metric scheme for a repeated figure.

use crate::case::MicroCase;
use crate::measure::clock::{Clock, ClockKind};
use crate::measure::stats::{self, summarize};
use crate::measure::system::{CpuPressure, RunQueue, CONTENDED_PCT};
use crate::measure::window::Probe;
use crate::observation::names;
use crate::observation::{Metric, Observation, Role, Source, WarningKind};
use crate::stop::{Interrupted, Stop};
use std::cell::RefCell;
use std::hint::black_box;
use std::sync::OnceLock;
use std::time::Instant;

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
        sample_begin();
        let ns = batch_ns(&oh.clock, iters, &mut op);
        sample_end();
        out.push((ns? - oh.timer_ns) / iters as f64 - oh.loop_ns);
    }
    Ok(out)
}

/// A sample is taken on a busy machine when a thread of this process waited for a CPU more
/// than [`CONTENDED_PCT`] of it (run-queue wait, /proc/self/task/<tid>/schedstat), or some
/// task on the machine waited for a CPU more than this share of it (/proc/pressure/cpu).
pub const BUSY_PRESSURE_PCT: f64 = 10.0;
/// The series is on a busy machine when the hypervisor took more than this share of the CPU
/// time of all CPUs during it (steal, /proc/stat; ticks, so it is read over the whole series).
pub const BUSY_STEAL_PCT: f64 = 5.0;

/// What the samples of the current figure saw of a busy machine, collected by
/// [`sample_begin`]/[`sample_end`] around every timed sample and handed to the figure by
/// [`push_summary`]. Per thread: a case runs its samples on one thread.
#[derive(Default)]
struct BusyLog {
    samples: usize,
    busy: usize,
    max_wait_pct: Option<f64>,
    max_pressure_pct: Option<f64>,
    pressure_missing: Option<String>,
    /// Steal ticks of all CPUs and the time, at the first sample of the series.
    first: Option<(Option<(u64, usize)>, Instant)>,
    open: Option<(RunQueue, CpuPressure, Instant)>,
}

thread_local! {
    static BUSY: RefCell<BusyLog> = RefCell::new(BusyLog::default());
}

/// Steal ticks summed over all CPUs and the number of CPUs, from /proc/stat.
fn steal_ticks() -> Option<(u64, usize)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_steal(&text)
}

/// The `steal` field (the 8th number) of each `cpuN` line of a /proc/stat text, summed.
pub fn parse_steal(text: &str) -> Option<(u64, usize)> {
    let per_cpu: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .filter_map(|l| l.split_whitespace().nth(8)?.parse().ok())
        .collect();
    (!per_cpu.is_empty()).then(|| (per_cpu.iter().sum(), per_cpu.len()))
}

/// Forget what earlier figures' samples saw (a new case begins).
pub fn busy_reset() {
    BUSY.with(|b| *b.borrow_mut() = BusyLog::default());
}

/// A timed sample begins: note this process's run-queue wait and the CPU pressure. Call it
/// outside the timed interval (it reads /proc).
pub fn sample_begin() {
    BUSY.with(|b| {
        let mut b = b.borrow_mut();
        if b.first.is_none() {
            b.first = Some((steal_ticks(), Instant::now()));
        }
        let (mut rq, mut psi) = (RunQueue::default(), CpuPressure::default());
        rq.open();
        psi.open();
        b.open = Some((rq, psi, Instant::now()));
    });
}

/// The sample ended: was the machine busy during it?
pub fn sample_end() {
    BUSY.with(|b| {
        let mut b = b.borrow_mut();
        let Some((mut rq, mut psi, opened)) = b.open.take() else {
            return;
        };
        let window_s = opened.elapsed().as_secs_f64();
        let value = |metrics: &[crate::observation::Metric], name: &str| {
            metrics.iter().find(|m| m.name == name).and_then(|m| m.value)
        };
        let wait_pct = value(&rq.close(), names::RUNQUEUE_WAIT_MAX_PCT);
        let pressure = psi.close();
        let pressure_pct = value(&pressure, names::CPU_PRESSURE_SOME_S)
            .filter(|_| window_s > 0.0)
            .map(|s| (s / window_s * 100.0).min(100.0));
        if pressure_pct.is_none() {
            b.pressure_missing = pressure.first().map(|m| m.source.to_string());
        }
        b.samples += 1;
        let busy = wait_pct.is_some_and(|w| w > CONTENDED_PCT) || pressure_pct.is_some_and(|p| p > BUSY_PRESSURE_PCT);
        b.busy += usize::from(busy);
        let max = |old: Option<f64>, new: Option<f64>| match (old, new) {
            (Some(a), Some(n)) => Some(a.max(n)),
            (a, n) => a.or(n),
        };
        b.max_wait_pct = max(b.max_wait_pct, wait_pct);
        b.max_pressure_pct = max(b.max_pressure_pct, pressure_pct);
    });
}

/// What the samples saw, for the figure `name`: `busy_samples` (count), `busy_runqueue_wait_max_pct`,
/// `busy_cpu_pressure_max_pct` (per sample, the largest) and `busy_steal_pct` (the series),
/// and a `contended` warning when any sample ran on a busy machine. Nothing when no sample
/// was watched. Empties the log.
fn push_busy(obs: &mut Observation, name: &str) {
    let log = BUSY.with(|b| std::mem::take(&mut *b.borrow_mut()));
    if log.samples == 0 {
        return;
    }
    let steal_pct = log.first.and_then(|(before, at)| {
        let (b, cpus) = before?;
        let (a, _) = steal_ticks()?;
        let tick = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .filter(|t| *t > 0)?;
        let cpu_s = at.elapsed().as_secs_f64() * cpus as f64;
        (cpu_s > 0.0).then(|| a.saturating_sub(b) as f64 / tick as f64 / cpu_s * 100.0)
    });
    let kernel = |n: &str, v: f64, unit: &str| Metric::new(n, Role::System, v, unit, Source::Kernel);
    obs.push(kernel("busy_samples", log.busy as f64, "count"));
    let pct = |n: &str, v: Option<f64>, why: &str| match v {
        Some(v) => kernel(n, v, "%"),
        None => Metric::unavailable(n, Role::System, "%", why.to_string()),
    };
    obs.push(pct(
        "busy_runqueue_wait_max_pct",
        log.max_wait_pct,
        "cannot read /proc/self/task/<tid>/schedstat",
    ));
    let psi_why = log
        .pressure_missing
        .clone()
        .unwrap_or_else(|| "cannot read /proc/pressure/cpu".into());
    obs.push(pct(
        "busy_cpu_pressure_max_pct",
        log.max_pressure_pct,
        psi_why.trim_start_matches("unavailable: "),
    ));
    obs.push(pct(
        "busy_steal_pct",
        steal_pct,
        "cannot read steal time from /proc/stat",
    ));
    let stolen = steal_pct.is_some_and(|s| s > BUSY_STEAL_PCT);
    if log.busy > 0 || stolen {
        let mut seen = Vec::new();
        if let Some(w) = log.max_wait_pct.filter(|w| *w > CONTENDED_PCT) {
            seen.push(format!(
                "this process waited up to {w:.0}% of a sample for a CPU (schedstat)"
            ));
        }
        if let Some(p) = log.max_pressure_pct.filter(|p| *p > BUSY_PRESSURE_PCT) {
            seen.push(format!(
                "some task waited for a CPU up to {p:.0}% of a sample (/proc/pressure/cpu)"
            ));
        }
        if let Some(s) = steal_pct.filter(|s| *s > BUSY_STEAL_PCT) {
            seen.push(format!(
                "the hypervisor took {s:.0}% of the CPU time (steal, /proc/stat)"
            ));
        }
        obs.warn(
            WarningKind::Contended,
            format!(
                "{name}: {} of {} samples ran on a busy machine ({}): the figure may be off even when its samples agree; rerun on an idle machine",
                log.busy,
                log.samples,
                seen.join("; ")
            ),
        );
    }
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
/// What the samples saw of a busy machine ([`sample_begin`]) goes with it.
pub fn push_summary(obs: &mut Observation, name: &str, unit: &str, values: &[f64], source: Source) {
    push_busy(obs, name);
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
    push_value(obs, names::TIMER_OVERHEAD_NS, "ns", oh.timer_ns);
    push_value(obs, names::LOOP_OVERHEAD_NS, "ns", oh.loop_ns);
    match oh.clock.kind {
        ClockKind::Tsc { hz } => push_value(obs, names::CLOCK_TSC_HZ, "Hz", hz),
        ClockKind::Monotonic => obs.push(Metric::unavailable(
            names::CLOCK_TSC_HZ,
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

#[cfg(test)]
mod busy_tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn steal_is_summed_over_the_cpu_lines() {
        let stat = "cpu  10 0 5 100 0 0 0 7 0 0\ncpu0 5 0 2 50 0 0 0 3 0 0\ncpu1 5 0 3 50 0 0 0 4 0 0\nintr 1\n";
        assert_eq!(parse_steal(stat), Some((7, 2)));
        assert_eq!(parse_steal("intr 1\n"), None);
    }

    #[test]
    fn a_figure_without_watched_samples_gets_no_busy_metrics() {
        busy_reset();
        let mut obs = Observation::default();
        push_summary(&mut obs, "x_ns", "ns", &[1.0, 1.0, 1.0], Source::Tool);
        assert!(obs.get("busy_samples", Role::System).is_none());
    }

    /// Found in issue 24: `--quick` figures 30% off with a CV under 5%. A sample during which
    /// this thread shares its CPU with two spinning threads waits for it most of the time
    /// (the scheduler gives each runnable thread its share), so it is flagged as busy whatever
    /// its spread.
    #[test]
    fn a_sample_sharing_its_cpu_is_flagged_busy() {
        let Some(&cpu) = crate::sys::affinity::allowed_cpus().unwrap().first() else {
            return;
        };
        if std::fs::read_to_string("/proc/thread-self/schedstat").is_err() {
            eprintln!("no schedstat here: nothing to check");
            return;
        }
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..2)
            .map(|_| {
                let done = done.clone();
                std::thread::spawn(move || {
                    crate::sys::affinity::pin_current_thread(&[cpu]).unwrap();
                    let until = Instant::now() + std::time::Duration::from_secs(5);
                    while !done.load(Ordering::Relaxed) && Instant::now() < until {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let flagged = std::thread::spawn(move || {
            crate::sys::affinity::pin_current_thread(&[cpu]).unwrap();
            busy_reset();
            sample_begin();
            let until = Instant::now() + std::time::Duration::from_millis(300);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            sample_end();
            let mut obs = Observation::default();
            push_summary(&mut obs, "op_ns", "ns", &[5.0, 5.0, 5.0], Source::Tool);
            obs
        })
        .join()
        .unwrap();
        done.store(true, Ordering::Relaxed);
        for s in spinners {
            s.join().unwrap();
        }
        assert_eq!(flagged.value("busy_samples", Role::System), Some(1.0));
        assert!(flagged.value("busy_runqueue_wait_max_pct", Role::System).unwrap() > CONTENDED_PCT);
        let text = format!("{:?}", flagged.warnings);
        assert!(text.contains("op_ns: 1 of 1 samples ran on a busy machine"), "{text}");
        assert!(text.contains("Contended"), "{text}");
    }
}
