//! The fake workload (hidden): does what its case says — return, sleep, fail, panic — so the
//! runner's semantics can be tested deterministically. `Stubborn` also holds a child process
//! and a scratch file while it ignores the stop request, registered for the forced exit of a
//! second signal, so tests can check that nothing survives it.

use crate::case::{FakeBehaviour, FakeCase};
use crate::observation::{names, Metric, Observation, Role, Source};
use crate::stop::{Interrupted, Stop};
use std::sync::Mutex;
use std::time::Duration;

/// Multiplies every value when set (tests): two runs of the same cases then differ by a known
/// ratio while their cases, and so their keys, stay equal.
pub const SCALE_ENV: &str = "IOPATH_FAKE_SCALE";

/// Seeds the `noise:VALUE~SD` cells (tests): the same seed repeats a run's values, another
/// seed draws new ones from the same distribution.
pub const SEED_ENV: &str = "IOPATH_FAKE_SEED";

/// The value of the `call`-th repetition of a `noise` case at `index`: `value` + `sd` times a
/// standard normal deviate from SplitMix64 seeded with (seed, index, call).
pub fn noise_value(seed: u64, index: usize, call: u64, value: f64, sd: f64) -> f64 {
    let mixed = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03))
        .wrapping_add(call.wrapping_mul(0x8CB9_2BA7_2F3D_8DD7));
    value + sd * crate::measure::stats::SplitMix64::new(mixed).normal()
}

/// The n-th call of the case at `index` in this process, counted from 0.
fn call_number(index: usize) -> u64 {
    static CALLS: Mutex<Vec<u64>> = Mutex::new(Vec::new());
    let mut calls = CALLS.lock().unwrap_or_else(|e| e.into_inner());
    if calls.len() <= index {
        calls.resize(index + 1, 0);
    }
    calls[index] += 1;
    calls[index] - 1
}

pub fn run(case: &FakeCase, stop: Stop) -> anyhow::Result<Observation> {
    let scale: f64 = std::env::var(SCALE_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let observe = |value: f64| {
        let value = value * scale;
        let mut obs = Observation::default();
        obs.push(Metric::new(names::FAKE_VALUE, Role::System, value, "1", Source::Tool));
        obs
    };
    match case.behaviour {
        FakeBehaviour::Ok { value } => Ok(observe(value as f64)),
        FakeBehaviour::Jitter { value, jitter } => {
            const STEPS: [f64; 6] = [-1.0, -0.6, -0.2, 0.2, 0.6, 1.0];
            let step = STEPS[(call_number(case.index) % 6) as usize];
            Ok(observe(value as f64 + step * jitter as f64))
        }
        FakeBehaviour::Noise { value, sd } => {
            let seed = std::env::var(SEED_ENV).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
            let call = call_number(case.index);
            Ok(observe(noise_value(seed, case.index, call, value as f64, sd as f64)))
        }
        FakeBehaviour::Sleep { ms } => {
            if stop.sleep(Duration::from_millis(ms)) {
                Ok(observe(ms as f64))
            } else {
                Err(Interrupted.into())
            }
        }
        FakeBehaviour::Stubborn { ms } => stubborn(ms).map(|()| observe(ms as f64)),
        FakeBehaviour::Fail => anyhow::bail!("fake failure (as asked)"),
        FakeBehaviour::Panic => panic!("fake panic (as asked)"),
    }
}

/// Sleep without looking at the stop flag, with a child (`sleep`) in its own process group
/// and a scratch file, both registered for the forced exit and cleaned up on the way out.
fn stubborn(ms: u64) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    let scratch = std::env::temp_dir().join(format!("iopath-fake-{}", std::process::id()));
    std::fs::write(&scratch, b"fake scratch")?;
    let mut child = std::process::Command::new("sleep")
        .arg(format!("{}", ms / 1000 + 1))
        .process_group(0)
        .spawn()?;
    let pgid = child.id() as i32;
    let path = scratch.clone();
    let guard = crate::sys::signal::on_forced_exit(move || {
        crate::sys::signal::kill_process_group(pgid);
        let _ = std::fs::remove_file(&path);
    });
    crate::tell!("fake: stubborn cell holds child {pgid} and {}", scratch.display());
    std::thread::sleep(Duration::from_millis(ms));
    drop(guard);
    crate::sys::signal::kill_process_group(pgid);
    let _ = child.wait();
    let _ = std::fs::remove_file(&scratch);
    Ok(())
}
