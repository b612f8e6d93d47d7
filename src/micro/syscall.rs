//! System call cost: getppid through the raw syscall (nothing cached in libc), getcwd, and a
//! 1-byte read from /dev/zero.

use super::harness::{self, push_summary, Budget};
use crate::case::MicroCase;
use crate::observation::names;
use crate::observation::{Observation, Source};
use crate::stop::Stop;
use crate::sys::syscall;
use std::hint::black_box;
use std::os::fd::AsRawFd;

pub const VARIANTS: &[&str] = crate::case::Bench::Syscall.variants();

pub fn run(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    let budget = Budget::of(case);
    let variant = case.option("variant").unwrap_or("getppid");
    let samples = match variant {
        "getppid" => harness::time_per_op(budget, stop, || -> std::io::Result<()> {
            black_box(syscall::raw_getppid());
            Ok(())
        })?,
        "getcwd" => {
            let mut buf = [0u8; 4096];
            harness::time_per_op(budget, stop, || {
                syscall::raw_getcwd(&mut buf).map(|n| {
                    black_box(n);
                })
            })?
        }
        "read_dev_zero" => {
            let file = std::fs::File::open("/dev/zero")?;
            let fd = file.as_raw_fd();
            let mut byte = [0u8; 1];
            harness::time_per_op(budget, stop, || -> std::io::Result<()> {
                match syscall::raw_read(fd, &mut byte)? {
                    1 => Ok(()),
                    n => Err(std::io::Error::other(format!("read returned {n} bytes"))),
                }
            })?
        }
        other => anyhow::bail!("syscall: unknown variant '{other}' (accepted: {})", VARIANTS.join(", ")),
    };
    let mut obs = Observation::default();
    push_summary(&mut obs, names::TIME_PER_CALL_NS, "ns", &samples, Source::Tool);
    harness::push_overheads(&mut obs);
    Ok(obs)
}
