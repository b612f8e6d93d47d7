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
/// Not for a self-contending bench ([`own_tasks_compete`]): see [`BUSY_OTHER_PCT`].
pub const BUSY_PRESSURE_PCT: f64 = 10.0;
/// The series is on a busy machine when the hypervisor took more than this share of the CPU
/// time of all CPUs during it (steal, /proc/stat; ticks, so it is read over the whole series).
pub const BUSY_STEAL_PCT: f64 = 5.0;
/// A self-contending bench's series is on a busy machine when other processes took more than
/// this share of the time of the CPUs it could run on, beyond the resolution of the ticks
/// ([`OtherCpu::busy`]).
pub const BUSY_OTHER_PCT: f64 = 10.0;

/// What the samples of the current figure saw of a busy machine, collected by
/// [`sample_begin`]/[`sample_end`] around every timed sample and handed to the figure by
/// [`push_summary`]. Per thread: a case runs its samples on one thread.
#[derive(Default)]
struct BusyLog {
    /// The bench's own tasks (a child process, a second thread) compete for the CPU with the
    /// thread that times them, so its run-queue wait and the CPU pressure are what is measured,
    /// not evidence of other load. Kept from one figure to the next of a case.
    self_contending: bool,
    samples: usize,
    /// Samples whose run-queue wait or CPU pressure was above its threshold.
    busy: usize,
    max_wait_pct: Option<f64>,
    max_pressure_pct: Option<f64>,
    pressure_missing: Option<String>,
    /// /proc/stat, this process's CPU time and the time, at the first sample of the series.
    first: Option<SeriesStart>,
    open: Option<(RunQueue, CpuPressure, Instant)>,
}

/// The series' starting point for the evidence read over the whole series.
struct SeriesStart {
    at: Instant,
    /// Every CPU's ticks (empty when /proc/stat cannot be read).
    ticks: Vec<CpuTicks>,
    /// CPU time of this process and its reaped children (getrusage SELF + CHILDREN).
    own: Option<std::time::Duration>,
    /// The CPUs the timing thread may run on (its affinity), which its tasks inherit.
    cpus: Vec<usize>,
}

thread_local! {
    static BUSY: RefCell<BusyLog> = RefCell::new(BusyLog::default());
}

/// One `cpuN` line of /proc/stat, in ticks (USER_HZ).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTicks {
    pub cpu: usize,
    /// user + nice + system + irq + softirq.
    pub busy: u64,
    pub steal: u64,
}

/// The `cpuN` lines of a /proc/stat text (the aggregate `cpu` line is left out).
pub fn parse_cpu_ticks(text: &str) -> Vec<CpuTicks> {
    text.lines()
        .filter_map(|l| {
            let rest = l
                .strip_prefix("cpu")
                .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))?;
            let mut fields = rest.split_whitespace();
            let cpu = fields.next()?.parse().ok()?;
            let f: Vec<u64> = fields.map(|v| v.parse().ok()).collect::<Option<_>>()?;
            // user nice system idle iowait irq softirq steal
            (f.len() >= 8).then(|| CpuTicks {
                cpu,
                busy: f[0] + f[1] + f[2] + f[5] + f[6],
                steal: f[7],
            })
        })
        .collect()
}

fn cpu_ticks() -> Vec<CpuTicks> {
    std::fs::read_to_string("/proc/stat")
        .map(|t| parse_cpu_ticks(&t))
        .unwrap_or_default()
}

/// The `steal` field (the 8th number) of each `cpuN` line of a /proc/stat text, summed, and
/// the number of CPUs.
pub fn parse_steal(text: &str) -> Option<(u64, usize)> {
    steal_of(&parse_cpu_ticks(text))
}

fn steal_of(ticks: &[CpuTicks]) -> Option<(u64, usize)> {
    (!ticks.is_empty()).then(|| (ticks.iter().map(|t| t.steal).sum(), ticks.len()))
}

/// Scheduler ticks per second (USER_HZ, the unit of /proc/stat).
fn tick_hz() -> Option<f64> {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|t| *t > 0)
        .map(|t| t as f64)
}

/// CPU time of this process (all its threads, living and ended) and of its reaped children.
fn own_cpu_time() -> Option<std::time::Duration> {
    let me = crate::sys::rusage::process().ok()?;
    let children = crate::sys::rusage::children().ok()?;
    Some(me.user + me.system + children.user + children.system)
}

/// What other processes took of the CPUs a series ran on: their busy time from /proc/stat
/// minus this process's own CPU time including its reaped children (getrusage), as a share of
/// those CPUs' time over the series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OtherCpu {
    pub pct: f64,
    /// The resolution of `pct`: one tick per CPU over the series (/proc/stat counts whole
    /// ticks), in percent.
    pub margin_pct: f64,
}

impl OtherCpu {
    /// Other processes took more than [`BUSY_OTHER_PCT`] of the CPUs even after the
    /// resolution of the ticks is allowed for.
    pub fn busy(&self) -> bool {
        self.pct - self.margin_pct > BUSY_OTHER_PCT
    }
}

/// The other processes' share of `cpus` CPUs over `wall_s` seconds, from the growth of those
/// CPUs' busy ticks (`busy_ticks`, at `tick_hz` a second) and this process's own CPU time in
/// that while (`own_cpu_s`, children included). None when the series has no length.
pub fn other_cpu(busy_ticks: u64, tick_hz: f64, own_cpu_s: f64, wall_s: f64, cpus: usize) -> Option<OtherCpu> {
    if wall_s <= 0.0 || cpus == 0 || tick_hz <= 0.0 {
        return None;
    }
    let other_s = (busy_ticks as f64 / tick_hz - own_cpu_s).max(0.0);
    Some(OtherCpu {
        pct: (other_s / (wall_s * cpus as f64) * 100.0).min(100.0),
        margin_pct: 100.0 / tick_hz / wall_s,
    })
}

/// Declare that this bench's own tasks (a child process, a second thread) compete for the CPU
/// with the thread that times them: its run-queue wait and the CPU pressure are then the thing
/// measured, and the busy verdict of its figures is [`OtherCpu`] over the whole series instead.
/// Holds for the rest of the case (on this thread) from the next figure on.
pub fn own_tasks_compete() {
    BUSY.with(|b| b.borrow_mut().self_contending = true);
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
            b.first = Some(SeriesStart {
                ticks: cpu_ticks(),
                own: own_cpu_time(),
                cpus: crate::sys::affinity::allowed_cpus().unwrap_or_default(),
                at: Instant::now(),
            });
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

/// What was read over the whole series, at its end.
#[derive(Debug, Clone, Copy, Default)]
struct SeriesEvidence {
    steal_pct: Option<f64>,
    /// Only for a self-contending series.
    other: Option<OtherCpu>,
}

impl SeriesEvidence {
    /// Read the series' end against its start.
    fn read(start: &SeriesStart, self_contending: bool) -> SeriesEvidence {
        let wall_s = start.at.elapsed().as_secs_f64();
        let now = cpu_ticks();
        let (Some(hz), false, false, true) = (tick_hz(), start.ticks.is_empty(), now.is_empty(), wall_s > 0.0) else {
            return SeriesEvidence::default();
        };
        // The growth of one count, summed over the CPUs kept (one that came online meanwhile
        // has no start and is left out).
        let delta = |pick: fn(&CpuTicks) -> u64, keep: &dyn Fn(usize) -> bool| -> u64 {
            now.iter()
                .filter(|a| keep(a.cpu))
                .filter_map(|a| {
                    let b = start.ticks.iter().find(|b| b.cpu == a.cpu)?;
                    Some(pick(a).saturating_sub(pick(b)))
                })
                .sum()
        };
        let stolen_s = delta(|t| t.steal, &|_| true) as f64 / hz;
        let steal_pct = Some(stolen_s / (wall_s * start.ticks.len() as f64) * 100.0);
        let watched = |cpu: usize| start.cpus.contains(&cpu);
        let own_s = own_cpu_time()
            .zip(start.own)
            .and_then(|(end, begin)| end.checked_sub(begin))
            .map(|d| d.as_secs_f64());
        let other = match own_s {
            Some(own_s) if self_contending => {
                let cpus = now.iter().filter(|t| watched(t.cpu)).count();
                other_cpu(delta(|t| t.busy, &watched), hz, own_s, wall_s, cpus)
            }
            _ => None,
        };
        SeriesEvidence { steal_pct, other }
    }
}

/// The verdict on a figure: how many of its samples count as busy, and what was seen (empty:
/// not busy). A single-threaded bench is judged per sample (its own run-queue wait, the CPU
/// pressure); a self-contending one as a whole by what other processes took of its CPUs,
/// every sample busy or none. Steal above [`BUSY_STEAL_PCT`] is seen in both.
fn judge(log: &BusyLog, series: &SeriesEvidence) -> (usize, Vec<String>) {
    let mut seen = Vec::new();
    let busy = if log.self_contending {
        match series.other.filter(OtherCpu::busy) {
            Some(o) => {
                seen.push(format!(
                    "other processes took {:.0}% (± {:.1}%) of the CPU time of the CPUs it ran on (busy_other_cpu_pct: /proc/stat busy ticks less this process's and its children's CPU time, getrusage; its own tasks waiting for each other are what it measures, not counted)",
                    o.pct, o.margin_pct
                ));
                log.samples
            }
            None => 0,
        }
    } else {
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
        log.busy
    };
    if let Some(s) = series.steal_pct.filter(|s| *s > BUSY_STEAL_PCT) {
        seen.push(format!(
            "the hypervisor took {s:.0}% of the CPU time (steal, /proc/stat)"
        ));
    }
    (busy, seen)
}

/// What the samples saw, for the figure `name`: `busy_samples` (count), `busy_runqueue_wait_max_pct`,
/// `busy_cpu_pressure_max_pct` (per sample, the largest), `busy_steal_pct` (the series) and,
/// for a self-contending bench, `busy_other_cpu_pct` (the series); a `contended` warning when
/// the verdict ([`judge`]) saw a busy machine. Nothing when no sample was watched. Empties
/// the log (but for the self-contending declaration).
fn push_busy(obs: &mut Observation, name: &str) {
    let log = BUSY.with(|b| {
        let mut b = b.borrow_mut();
        let log = std::mem::take(&mut *b);
        b.self_contending = log.self_contending;
        log
    });
    if log.samples == 0 {
        return;
    }
    let series = log
        .first
        .as_ref()
        .map(|start| SeriesEvidence::read(start, log.self_contending))
        .unwrap_or_default();
    let (busy, seen) = judge(&log, &series);
    let kernel = |n: &str, v: f64, unit: &str| Metric::new(n, Role::System, v, unit, Source::Kernel);
    obs.push(kernel("busy_samples", busy as f64, "count"));
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
        series.steal_pct,
        "cannot read steal time from /proc/stat",
    ));
    if log.self_contending {
        obs.push(pct(
            "busy_other_cpu_pct",
            series.other.map(|o| o.pct),
            "cannot read /proc/stat, getrusage or this thread's CPU affinity",
        ));
    }
    if !seen.is_empty() {
        let what = if log.self_contending {
            format!("the series of {} samples ran on a busy machine", log.samples)
        } else {
            format!("{busy} of {} samples ran on a busy machine", log.samples)
        };
        obs.warn(
            WarningKind::Contended,
            format!(
                "{name}: {what} ({}): the figure may be off even when its samples agree; rerun on an idle machine",
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

/// Write `bytes` bytes to `to`, `chunk` after `chunk` (the last one cut short), looking at the
/// stop flag before each: a long write still stops within one chunk's time.
pub fn write_in_chunks(to: &mut impl std::io::Write, chunk: &[u8], bytes: u64, stop: Stop) -> anyhow::Result<()> {
    let mut left = bytes;
    while left > 0 {
        check(stop)?;
        let n = left.min(chunk.len() as u64) as usize;
        to.write_all(&chunk[..n])?;
        left -= n as u64;
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
    fn cpu_ticks_are_busy_and_steal_per_cpu() {
        let stat = "cpu  10 0 5 100 0 0 0 7 0 0\ncpu0 5 1 2 50 9 3 4 3 0 0\ncpu1 5 0 3 50 0 0 0 4 0 0\nintr 1\n";
        let ticks = parse_cpu_ticks(stat);
        assert_eq!(
            ticks,
            vec![
                CpuTicks {
                    cpu: 0,
                    busy: 5 + 1 + 2 + 3 + 4,
                    steal: 3
                },
                CpuTicks {
                    cpu: 1,
                    busy: 8,
                    steal: 4
                },
            ]
        );
        assert!(parse_cpu_ticks("cpu0 1 2 3\n").is_empty(), "too few fields");
    }

    /// Issue 24 follow-up: a bench whose own tasks share the CPU is judged by what OTHER
    /// processes took of its CPUs over the series: busy ticks less its own CPU time.
    #[test]
    fn other_processes_share_of_the_cpus_decides_a_self_contending_series() {
        // One CPU, 100 ticks a second, 1 s: 100 busy ticks of which this process took 0.97 s.
        let idle = other_cpu(100, 100.0, 0.97, 1.0, 1).unwrap();
        assert!((idle.pct - 3.0).abs() < 1e-9 && (idle.margin_pct - 1.0).abs() < 1e-9);
        assert!(!idle.busy());
        // Another process took half of it.
        let shared = other_cpu(100, 100.0, 0.5, 1.0, 1).unwrap();
        assert!((shared.pct - 50.0).abs() < 1e-9 && shared.busy());
        // Two CPUs: 30 ticks of others over 2 CPU-seconds is 15%, beyond 10% + 1%.
        assert!(other_cpu(130, 100.0, 1.0, 1.0, 2).unwrap().busy());
        // 11.5% is within the resolution of ticks (+/- 2% over 0.5 s): not flagged.
        let close = other_cpu(50, 100.0, 0.4425, 0.5, 1).unwrap();
        assert!((close.pct - 11.5).abs() < 1e-9 && !close.busy());
        // A short series cannot resolve a small share: 20% over 50 ms is one tick.
        let short = other_cpu(5, 100.0, 0.04, 0.05, 1).unwrap();
        assert!((short.margin_pct - 20.0).abs() < 1e-9 && !short.busy());
        // This process counted more than the ticks (ticks are coarse): nobody else ran.
        assert_eq!(other_cpu(10, 100.0, 0.2, 1.0, 1).unwrap().pct, 0.0);
        assert_eq!(other_cpu(10, 100.0, 0.0, 0.0, 1), None);
        assert_eq!(other_cpu(10, 100.0, 0.0, 1.0, 0), None);
    }

    /// The verdict: a self-contending series ignores its own run-queue wait and CPU pressure
    /// (every sample of `micro thread` waited, on an idle machine); a single-threaded one is
    /// judged per sample as before.
    #[test]
    fn a_self_contending_verdict_ignores_its_own_wait() {
        let log = |self_contending| BusyLog {
            self_contending,
            samples: 21,
            busy: 21,
            max_wait_pct: Some(80.0),
            max_pressure_pct: Some(60.0),
            ..BusyLog::default()
        };
        let quiet = SeriesEvidence {
            steal_pct: Some(0.0),
            other: Some(OtherCpu {
                pct: 1.0,
                margin_pct: 2.0,
            }),
        };
        assert_eq!(judge(&log(true), &quiet), (0, vec![]));
        let (busy, seen) = judge(&log(false), &quiet);
        assert_eq!(busy, 21);
        assert!(
            seen[0].contains("waited up to 80% of a sample for a CPU (schedstat)"),
            "{seen:?}"
        );
        assert!(
            seen[1].contains("up to 60% of a sample (/proc/pressure/cpu)"),
            "{seen:?}"
        );
        let loaded = SeriesEvidence {
            steal_pct: Some(0.0),
            other: Some(OtherCpu {
                pct: 40.0,
                margin_pct: 2.0,
            }),
        };
        let (busy, seen) = judge(&log(true), &loaded);
        assert_eq!(busy, 21);
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert!(seen[0].starts_with("other processes took 40% (± 2.0%)"), "{seen:?}");
        assert!(seen[0].contains("(busy_other_cpu_pct: /proc/stat"), "{seen:?}");
        // Steal is seen either way; unreadable evidence flags nothing.
        let stolen = SeriesEvidence {
            steal_pct: Some(9.0),
            other: None,
        };
        let (busy, seen) = judge(&log(true), &stolen);
        assert_eq!(busy, 0);
        assert!(seen[0].contains("hypervisor took 9%"), "{seen:?}");
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
        let Some(flagged) = sample_beside_two_spinners(false) else {
            return;
        };
        assert_eq!(flagged.value("busy_samples", Role::System), Some(1.0));
        assert!(flagged.value("busy_runqueue_wait_max_pct", Role::System).unwrap() > CONTENDED_PCT);
        let text = format!("{:?}", flagged.warnings);
        assert!(text.contains("op_ns: 1 of 1 samples ran on a busy machine"), "{text}");
        assert!(text.contains("Contended"), "{text}");
    }

    /// Spinning threads of a single-threaded bench; of a self-contending bench, its own tasks.
    /// Returns what the figure of one 300 ms sample shared with them on one CPU says, or None
    /// where schedstat is missing.
    fn sample_beside_two_spinners(self_contending: bool) -> Option<Observation> {
        let &cpu = crate::sys::affinity::allowed_cpus().unwrap().first()?;
        if std::fs::read_to_string("/proc/thread-self/schedstat").is_err() {
            crate::tell!("no schedstat here: nothing to check");
            return None;
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
        let obs = std::thread::spawn(move || {
            crate::sys::affinity::pin_current_thread(&[cpu]).unwrap();
            busy_reset();
            if self_contending {
                own_tasks_compete();
            }
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
        Some(obs)
    }

    /// Issue 24 follow-up: `micro thread` flagged 21 of 21 samples busy on an idle machine,
    /// its own new threads being the waiting it saw. A self-contending bench waits for its
    /// own tasks (here: two spinning threads of this process on its CPU) without that being
    /// evidence; whether other processes were busy meanwhile is the only verdict.
    #[test]
    fn a_self_contending_bench_ignores_its_own_run_queue_wait() {
        let Some(obs) = sample_beside_two_spinners(true) else {
            return;
        };
        // It did wait (the figure says so) ...
        assert!(obs.value("busy_runqueue_wait_max_pct", Role::System).unwrap() > CONTENDED_PCT);
        // ... but that wait is not why it may be flagged.
        let text = format!("{:?}", obs.warnings);
        assert!(!text.contains("schedstat") && !text.contains("pressure/cpu"), "{text}");
        let other = obs.get("busy_other_cpu_pct", Role::System).expect("busy_other_cpu_pct");
        match obs.value("busy_samples", Role::System) {
            Some(0.0) => assert!(!text.contains("Contended") || text.contains("hypervisor"), "{text}"),
            Some(1.0) => assert!(text.contains("other processes took"), "{text}"),
            v => panic!("busy_samples {v:?}"),
        }
        assert!(other.value.is_some(), "{other:?}");
    }
}
