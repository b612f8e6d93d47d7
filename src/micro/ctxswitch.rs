//! Context switch, as lmbench's lat_ctx measures it: two processes pass a byte back and forth
//! over two pipes; the cost of a pipe write + read measured inside one process is subtracted,
//! leaving the switches: (round trip - 2 x pipe cost) / 2. The same with two threads over a
//! futex (subtracting an uncontended wake + wait). `pinned=yes` puts both on one CPU (every
//! hand-off is a real switch); `pinned=no` leaves placement to the scheduler (on two CPUs
//! that measures cross-CPU wake-up instead). Where each side ran is recorded.

use super::harness::{self, push_summary, push_value, Budget};
use crate::case::MicroCase;
use crate::observation::names;
use crate::observation::{Observation, Role, Source, ThreadPlacement, WarningKind};
use crate::stop::Stop;
use crate::sys::{affinity, futex, process, syscall};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};

pub const VARIANTS: &[&str] = crate::case::Bench::Ctxswitch.variants();

/// Restores the calling thread's CPU affinity when dropped.
struct AffinityGuard(Vec<usize>);

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        let _ = affinity::pin_current_thread(&self.0);
    }
}

pub fn run(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    let budget = Budget::of(case);
    let pinned = match case.option("pinned").unwrap_or("yes") {
        "yes" => true,
        "no" => false,
        other => anyhow::bail!("ctxswitch: pinned must be yes or no, got '{other}'"),
    };
    let allowed = affinity::allowed_cpus()?;
    let _restore = AffinityGuard(allowed.clone());
    let cpu = if pinned {
        let cpu = *allowed.first().ok_or_else(|| anyhow::anyhow!("no CPU allowed"))?;
        affinity::pin_current_thread(&[cpu])?;
        Some(cpu)
    } else {
        None
    };
    let mut obs = Observation::default();
    // The two sides wait for each other (on one CPU when pinned) by design.
    harness::own_tasks_compete();
    match case.option("variant").unwrap_or("pipe_procs") {
        "pipe_procs" => pipe_procs(budget, stop, cpu, &mut obs)?,
        "futex_threads" => futex_threads(budget, stop, cpu, &mut obs)?,
        other => anyhow::bail!(
            "ctxswitch: unknown variant '{other}' (accepted: {})",
            VARIANTS.join(", ")
        ),
    }
    if !pinned && allowed.len() > 1 {
        obs.warn(WarningKind::Unpinned, "unpinned: the two sides may run on different CPUs, so this is cross-CPU wake-up latency, not a pure context switch");
    }
    harness::push_overheads(&mut obs);
    Ok(obs)
}

fn placement(index: usize, pinned: Option<usize>, start: Option<usize>, end: Option<usize>) -> ThreadPlacement {
    ThreadPlacement {
        role: Role::System,
        index,
        pinned: pinned.map(|c| vec![c]),
        cpu_at_start: start,
        cpu_at_end: end,
        migrations: None,
    }
}

/// The echo child is killed and reaped on every early return (its `Child` drops); a stop is
/// noticed between samples, and while waiting for the child's first byte or its exit.
fn pipe_procs(budget: harness::Budget, stop: Stop, cpu: Option<usize>, obs: &mut Observation) -> anyhow::Result<()> {
    // The pipe's own cost: write one byte and read it back, in this process.
    let (r, w) = process::pipe()?;
    let mut byte = [0u8; 1];
    let pipe_cost = harness::time_per_op(budget, stop, || -> std::io::Result<()> {
        syscall::raw_write(w.as_raw_fd(), &byte)?;
        syscall::raw_read(r.as_raw_fd(), &mut byte).map(drop)
    })?;
    drop((r, w));

    let (to_child_r, to_child_w) = process::pipe()?;
    let (to_parent_r, to_parent_w) = process::pipe()?;
    let child = process::fork_pipe_echo(
        to_child_r.as_raw_fd(),
        to_parent_w.as_raw_fd(),
        cpu,
        &[to_child_w.as_raw_fd(), to_parent_r.as_raw_fd()],
    )?;
    drop((to_child_r, to_parent_w));
    let start_cpu = affinity::current_cpu();
    // The child's first byte says where it runs.
    let mut hello = [0u8; 1];
    process::read_exact_fd(&to_parent_r, &mut hello, stop)?;
    let child_cpu = (hello[0] != 255).then_some(hello[0] as usize);
    let round_trip = harness::time_per_op(budget, stop, || -> std::io::Result<()> {
        syscall::raw_write(to_child_w.as_raw_fd(), &byte)?;
        match syscall::raw_read(to_parent_r.as_raw_fd(), &mut byte)? {
            1 => Ok(()),
            _ => Err(std::io::Error::other("echo child went away")),
        }
    })?;
    let end_cpu = affinity::current_cpu();
    drop(to_child_w); // end of file: the child exits
    let status = child.wait(stop)?;
    if status != 0 {
        anyhow::bail!("ctxswitch echo child exited with status {status}");
    }
    finish(obs, &pipe_cost, &round_trip, "pipe_overhead_ns");
    obs.placement.push(placement(0, cpu, start_cpu, end_cpu));
    obs.placement.push(placement(1, cpu, child_cpu, None));
    Ok(())
}

/// Turn round trips and the per-hop overhead into the per-switch figure and push all three.
fn finish(obs: &mut Observation, overhead: &[f64], round_trip: &[f64], overhead_name: &str) {
    let hop_cost = crate::measure::stats::median(&mut overhead.to_vec());
    let per_switch: Vec<f64> = round_trip.iter().map(|rt| (rt - 2.0 * hop_cost) / 2.0).collect();
    push_summary(obs, names::TIME_PER_SWITCH_NS, "ns", &per_switch, Source::Tool);
    push_summary(obs, "round_trip_ns", "ns", round_trip, Source::Tool);
    push_summary(obs, overhead_name, "ns", overhead, Source::Tool);
}

/// Word values of the futex ping-pong.
const MAIN_TURN: u32 = 0;
const PARTNER_TURN: u32 = 1;
const STOP: u32 = 2;

/// Tells the partner thread to stop when dropped (also on an early error return).
struct StopPartner<'a>(&'a AtomicU32);

impl Drop for StopPartner<'_> {
    fn drop(&mut self) {
        self.0.store(STOP, Ordering::Release);
        let _ = futex::wake(self.0, 1);
    }
}

/// The partner thread is told to stop and joined on every return; a stop is noticed between
/// samples.
fn futex_threads(budget: harness::Budget, stop: Stop, cpu: Option<usize>, obs: &mut Observation) -> anyhow::Result<()> {
    // An uncontended wake (nobody waiting) + a wait that returns at once (value changed).
    let probe = AtomicU32::new(0);
    let hop = harness::time_per_op(budget, stop, || -> std::io::Result<()> {
        futex::wake(&probe, 1)?;
        futex::wait(&probe, 1)
    })?;

    let word = AtomicU32::new(MAIN_TURN);
    let main_start = affinity::current_cpu();
    let (round_trip, partner_cpus) = std::thread::scope(|scope| -> anyhow::Result<_> {
        let partner = scope.spawn(|| -> std::io::Result<(Option<usize>, Option<usize>)> {
            if let Some(cpu) = cpu {
                affinity::pin_current_thread(&[cpu])?;
            }
            let start = affinity::current_cpu();
            loop {
                match word.load(Ordering::Acquire) {
                    PARTNER_TURN => {
                        word.store(MAIN_TURN, Ordering::Release);
                        futex::wake(&word, 1)?;
                    }
                    STOP => return Ok((start, affinity::current_cpu())),
                    seen => futex::wait(&word, seen)?,
                }
            }
        });
        let partner_stop = StopPartner(&word);
        let rt = harness::time_per_op(budget, stop, || -> std::io::Result<()> {
            word.store(PARTNER_TURN, Ordering::Release);
            futex::wake(&word, 1)?;
            while word.load(Ordering::Acquire) == PARTNER_TURN {
                futex::wait(&word, PARTNER_TURN)?;
            }
            Ok(())
        });
        drop(partner_stop);
        let cpus = partner
            .join()
            .map_err(|_| anyhow::anyhow!("futex partner thread panicked"))??;
        Ok((rt?, cpus))
    })?;
    finish(obs, &hop, &round_trip, "futex_overhead_ns");
    obs.placement
        .push(placement(0, cpu, main_start, affinity::current_cpu()));
    obs.placement.push(placement(1, cpu, partner_cpus.0, partner_cpus.1));
    if let (Some(a), Some(b)) = (affinity::current_cpu(), partner_cpus.1) {
        push_value(obs, "same_cpu", "bool", if a == b { 1.0 } else { 0.0 });
    }
    Ok(())
}
