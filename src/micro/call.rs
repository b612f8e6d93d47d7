//! Procedure call with 0..7 integer arguments. Each function is `#[inline(never)]` and called
//! through a function pointer hidden behind `black_box`, so the compiler can neither inline
//! the call, constant-fold it nor hoist it out of the loop.

use super::harness::{self, push_summary, Budget};
use crate::case::MicroCase;
use crate::observation::names;
use crate::observation::{Observation, Source};
use crate::stop::Stop;
use std::convert::Infallible;
use std::hint::black_box;

#[inline(never)]
fn f0() -> u64 {
    1
}
#[inline(never)]
fn f1(a: u64) -> u64 {
    a
}
#[inline(never)]
fn f2(a: u64, b: u64) -> u64 {
    a ^ b
}
#[inline(never)]
fn f3(a: u64, b: u64, c: u64) -> u64 {
    a ^ b ^ c
}
#[inline(never)]
fn f4(a: u64, b: u64, c: u64, d: u64) -> u64 {
    a ^ b ^ c ^ d
}
#[inline(never)]
fn f5(a: u64, b: u64, c: u64, d: u64, e: u64) -> u64 {
    a ^ b ^ c ^ d ^ e
}
#[inline(never)]
fn f6(a: u64, b: u64, c: u64, d: u64, e: u64, f: u64) -> u64 {
    a ^ b ^ c ^ d ^ e ^ f
}
#[inline(never)]
fn f7(a: u64, b: u64, c: u64, d: u64, e: u64, f: u64, g: u64) -> u64 {
    a ^ b ^ c ^ d ^ e ^ f ^ g
}

pub fn run(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    let args = harness::opt_u64(case, "args", 0)?;
    let budget = Budget::of(case);
    let mut acc = 0u64;
    let samples = {
        let acc = &mut acc;
        macro_rules! timed {
            ($f:expr, $ty:ty, ($($a:expr),*)) => {{
                let f: $ty = black_box($f);
                harness::time_per_op(budget, stop, || -> Result<(), Infallible> {
                    *acc = acc.wrapping_add(f($($a),*));
                    Ok(())
                })
            }};
        }
        match args {
            0 => timed!(f0, fn() -> u64, ()),
            1 => timed!(f1, fn(u64) -> u64, (1)),
            2 => timed!(f2, fn(u64, u64) -> u64, (1, 2)),
            3 => timed!(f3, fn(u64, u64, u64) -> u64, (1, 2, 3)),
            4 => timed!(f4, fn(u64, u64, u64, u64) -> u64, (1, 2, 3, 4)),
            5 => timed!(f5, fn(u64, u64, u64, u64, u64) -> u64, (1, 2, 3, 4, 5)),
            6 => timed!(f6, fn(u64, u64, u64, u64, u64, u64) -> u64, (1, 2, 3, 4, 5, 6)),
            7 => timed!(f7, fn(u64, u64, u64, u64, u64, u64, u64) -> u64, (1, 2, 3, 4, 5, 6, 7)),
            other => anyhow::bail!("call: args must be 0..7, got {other}"),
        }
    }?;
    black_box(acc);
    let mut obs = Observation::default();
    push_summary(&mut obs, names::TIME_PER_CALL_NS, "ns", &samples, Source::Tool);
    harness::push_overheads(&mut obs);
    Ok(obs)
}
