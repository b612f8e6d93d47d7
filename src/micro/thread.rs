//! Thread creation: Rust's `std::thread::spawn` + join (`create_join`), a bare
//! `pthread_create` + `pthread_join` (`pthread_create_join`, the C library's floor, what a C
//! program measures), and the time from the spawn call until the new thread runs its first
//! instruction (read on the TSC, which is synchronised across CPUs when invariant).

use super::harness::{self, push_summary, Budget};
use crate::case::MicroCase;
use crate::observation::names;
use crate::observation::{Observation, Source};
use crate::stop::Stop;

pub const VARIANTS: &[&str] = crate::case::Bench::Thread.variants();

pub fn run(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    let budget = Budget::of(case);
    let variant = case.option("variant").unwrap_or("create_join");
    let mut obs = Observation::default();
    // The new thread competes with its creator for the CPU: that wait is measured.
    harness::own_tasks_compete();
    match variant {
        "create_join" => {
            let samples = harness::time_per_op(budget, stop, || -> std::io::Result<()> {
                let handle = std::thread::Builder::new().spawn(|| std::hint::black_box(1u64))?;
                handle
                    .join()
                    .map(drop)
                    .map_err(|_| std::io::Error::other("thread panicked"))
            })?;
            let us: Vec<f64> = samples.iter().map(|ns| ns / 1000.0).collect();
            push_summary(&mut obs, names::TIME_PER_THREAD_US, "us", &us, Source::Tool);
        }
        "pthread_create_join" => {
            let samples = harness::time_per_op(budget, stop, crate::sys::thread::create_join)?;
            let us: Vec<f64> = samples.iter().map(|ns| ns / 1000.0).collect();
            push_summary(&mut obs, names::TIME_PER_THREAD_US, "us", &us, Source::Tool);
        }
        "start_latency" => {
            let count = budget.samples * 20;
            let mut values = Vec::with_capacity(count);
            for i in 0..count + 5 {
                harness::check(stop)?;
                let t0 = harness::now();
                let handle = std::thread::Builder::new().spawn(harness::now)?;
                let t1 = handle.join().map_err(|_| anyhow::anyhow!("thread panicked"))?;
                if i >= 5 {
                    // The first few are warm-up (stack allocation caches, first-touch).
                    values.push(harness::interval_ns(t0, t1) / 1000.0);
                }
            }
            push_summary(&mut obs, names::THREAD_START_LATENCY_US, "us", &values, Source::Tool);
        }
        other => anyhow::bail!("thread: unknown variant '{other}' (accepted: {})", VARIANTS.join(", ")),
    }
    harness::push_overheads(&mut obs);
    Ok(obs)
}
