//! Process creation: fork + exit + wait, fork + exec of a tiny program + wait, and
//! posix_spawn + wait. The program (default /bin/true) is dynamically linked, so the exec
//! figures include the dynamic loader; the program is printed with the result. A program that
//! has not exited [`PROGRAM_TIMEOUT`] after it was started is killed with its process group and
//! reaped, and the case fails saying so.

use super::harness::{self, push_summary, Budget};
use crate::case::MicroCase;
use crate::observation::{Metric, Observation, Role, Source};
use crate::stop::Stop;
use crate::sys::process::{self, Program};
use std::time::Duration;

pub const VARIANTS: &[&str] = crate::case::Bench::Proc.variants();
pub const DEFAULT_PROGRAM: &str = "/bin/true";
/// How long one run of the program may take. /bin/true takes about a millisecond; a program
/// still running after this is not a process-creation benchmark (it waits for input, serves,
/// sleeps) and would otherwise hang the run.
pub const PROGRAM_TIMEOUT: Duration = Duration::from_secs(10);

/// The failure of a program that did not exit within [`PROGRAM_TIMEOUT`].
fn timeout_error(program: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "{program}: the program did not exit within {} (a benchmark program must exit at once, like /bin/true); it was killed with its process group",
            process::seconds(PROGRAM_TIMEOUT)
        ),
    )
}

pub fn run(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    let mut budget = Budget::of(case);
    // A creation costs ~0.1-1 ms: fewer, longer samples keep the run short.
    budget.sample_ns *= 2.0;
    let variant = case.option("variant").unwrap_or("fork_exit");
    let program_path = case.option("program").unwrap_or(DEFAULT_PROGRAM);
    let mut obs = Observation::default();
    let check_status = |status: i32| -> std::io::Result<()> {
        match status {
            0 => Ok(()),
            s => Err(std::io::Error::other(format!("{program_path} exited with status {s}"))),
        }
    };
    let samples = match variant {
        "fork_exit" => harness::time_per_op(budget, stop, || process::fork_exit_wait(stop))?,
        "fork_exec" | "posix_spawn" => {
            if !std::path::Path::new(program_path).is_file() {
                obs.push(Metric::unavailable(
                    "time_per_process_us",
                    Role::System,
                    "us",
                    format!("{program_path} not found"),
                ));
                return Ok(obs);
            }
            let program = Program::new(program_path)?;
            let limit = Some(PROGRAM_TIMEOUT);
            let bounded = |waited: std::io::Result<i32>| match waited {
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Err(timeout_error(program_path)),
                other => other.and_then(check_status),
            };
            if variant == "fork_exec" {
                harness::time_per_op(budget, stop, || bounded(process::fork_exec_wait(&program, stop, limit)))?
            } else {
                harness::time_per_op(budget, stop, || bounded(process::spawn_wait(&program, stop, limit)))?
            }
        }
        other => anyhow::bail!("proc: unknown variant '{other}' (accepted: {})", VARIANTS.join(", ")),
    };
    let us: Vec<f64> = samples.iter().map(|ns| ns / 1000.0).collect();
    push_summary(&mut obs, "time_per_process_us", "us", &us, Source::Tool);
    harness::push_overheads(&mut obs);
    Ok(obs)
}
