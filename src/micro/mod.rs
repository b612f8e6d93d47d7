//! OS microbenchmarks in the style of lmbench (seed 003), one file per benchmark. Every figure
//! is repeated (median, mean, stddev, 95% CI, min, max, n) with the clock-read and loop
//! overheads subtracted and reported beside it. One `MicroCase` is one figure (one point of a
//! curve), so the sweep runner and the store treat micro results like any other case.

pub mod call;
pub mod ctxswitch;
pub mod fs;
pub mod harness;
#[cfg(test)]
mod interrupt_tests;
pub mod levels;
pub mod membw;
pub mod memlat;
pub mod pagefault;
pub mod proc;
pub mod sattolo;
pub mod scratch;
pub mod syscall;
pub mod tcp;
pub mod thread;
pub mod timer;

pub use levels::{detect_levels, Level};

use crate::case::MicroCase;
use crate::observation::Observation;
use crate::stop::{Interrupted, Stop};
use std::path::PathBuf;

/// The benchmarks, in the order `micro all` runs them, with one line each for `micro list`.
pub const BENCHES: [(&str, &str); 11] = [
    (
        "timer",
        "clock read cost and resolution, loop overhead, TSC frequency check",
    ),
    ("call", "procedure call with 0..7 arguments"),
    ("syscall", "getppid (raw syscall), getcwd, 1-byte read of /dev/zero"),
    ("proc", "fork+exit+wait, fork+exec+wait, posix_spawn+wait"),
    ("thread", "thread create+join, time until a new thread runs"),
    (
        "ctxswitch",
        "process pipe ping-pong and thread futex ping-pong, pinned and unpinned",
    ),
    (
        "memlat",
        "pointer-chase latency over working sets, cache levels detected",
    ),
    (
        "membw",
        "memory read, write and copy bandwidth over buffers >= 4x the LLC",
    ),
    ("pagefault", "minor (anonymous) and major (evicted file) page faults"),
    ("tcp", "loopback TCP round trip, bandwidth, connect, teardown"),
    (
        "fs",
        "O_DIRECT 4 KiB sequential/random reads, file cache size, read contention",
    ),
];

/// What the user chose; `plan` turns it into cases.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub quick: bool,
    pub samples: Option<usize>,
    /// memlat working sets from `memlat_min` to `memlat_max` bytes.
    pub memlat_min: Option<u64>,
    pub memlat_max: Option<u64>,
    pub stride: Option<u64>,
    pub hugepages: bool,
    /// membw buffer size (default 4x the LLC).
    pub membw_size: Option<u64>,
    /// pagefault and fs: the directory for files (default the temp dir).
    pub dir: Option<PathBuf>,
    /// fs / pagefault major: the file size.
    pub file_bytes: Option<u64>,
    /// fs cache_read: largest file size.
    pub cache_max: Option<u64>,
    /// fs contention: reader process counts.
    pub procs: Option<Vec<usize>>,
    /// ctxswitch: Some(true) pinned only, Some(false) unpinned only, None both.
    pub pinned: Option<bool>,
    /// proc: the program exec'd and spawned.
    pub program: Option<String>,
    /// Restrict to some variants of the benchmark (e.g. syscall getppid).
    pub variants: Option<Vec<String>>,
}

/// The variants a benchmark has (empty when it has one figure per size instead).
pub fn variants(bench: &str) -> &'static [&'static str] {
    match bench {
        "syscall" => &syscall::VARIANTS,
        "proc" => &proc::VARIANTS,
        "thread" => &thread::VARIANTS,
        "ctxswitch" => &ctxswitch::VARIANTS,
        "membw" => &membw::VARIANTS,
        "pagefault" => &pagefault::VARIANTS,
        "tcp" => &tcp::VARIANTS,
        "fs" => &fs::VARIANTS,
        _ => &[],
    }
}

/// The cases one benchmark runs under these settings. Unknown benchmark: empty.
pub fn plan(bench: &str, s: &Settings) -> Vec<MicroCase> {
    let mut common: Vec<(&str, String)> = Vec::new();
    if s.quick {
        common.push(("quick", "1".into()));
    }
    if let Some(n) = s.samples {
        common.push(("samples", n.to_string()));
    }
    let case = |extra: Vec<(&str, String)>| {
        let mut opts = common.clone();
        opts.extend(extra);
        MicroCase::new(bench, opts)
    };
    let chosen: Vec<&str> = variants(bench)
        .iter()
        .copied()
        .filter(|v| s.variants.as_ref().is_none_or(|want| want.iter().any(|w| w == v)))
        .collect();
    let dir = s.dir.as_ref().map(|d| d.display().to_string());
    let with_dir = |mut v: Vec<(&'static str, String)>| {
        if let Some(d) = &dir {
            v.push(("dir", d.clone()));
        }
        v
    };
    let mut out = Vec::new();
    match bench {
        "timer" => out.push(case(vec![])),
        "call" => out.extend((0..=7).map(|n| case(vec![("args", n.to_string())]))),
        "syscall" | "thread" | "tcp" => out.extend(chosen.iter().map(|v| case(vec![("variant", v.to_string())]))),
        "proc" => {
            for v in &chosen {
                let mut o = vec![("variant", v.to_string())];
                if *v != "fork_exit" {
                    o.push((
                        "program",
                        s.program.clone().unwrap_or_else(|| proc::DEFAULT_PROGRAM.into()),
                    ));
                }
                out.push(case(o));
            }
        }
        "ctxswitch" => {
            let pins: Vec<&str> = match s.pinned {
                Some(true) => vec!["yes"],
                Some(false) => vec!["no"],
                None => vec!["yes", "no"],
            };
            for v in &chosen {
                for p in &pins {
                    out.push(case(vec![("variant", v.to_string()), ("pinned", p.to_string())]));
                }
            }
        }
        "memlat" => {
            let max = s.memlat_max.unwrap_or(if s.quick { 8 << 20 } else { 256 << 20 });
            let min = s.memlat_min.unwrap_or(1024);
            let stride = s.stride.unwrap_or(memlat::DEFAULT_STRIDE);
            for size in memlat::sizes(min, max, !s.quick) {
                let mut o = vec![("size_bytes", size.to_string()), ("stride_bytes", stride.to_string())];
                if s.hugepages {
                    o.push(("hugepages", "yes".into()));
                }
                out.push(case(o));
            }
        }
        "membw" => {
            let size = s.membw_size.unwrap_or_else(membw::default_size);
            out.extend(
                chosen
                    .iter()
                    .map(|v| case(vec![("variant", v.to_string()), ("size_bytes", size.to_string())])),
            );
        }
        "pagefault" => {
            for v in &chosen {
                let mut o = vec![("variant", v.to_string())];
                if *v == "major" {
                    o = with_dir(o);
                    if let Some(b) = s.file_bytes {
                        o.push(("file_bytes", b.to_string()));
                    }
                }
                out.push(case(o));
            }
        }
        "fs" => {
            for v in &chosen {
                let base = with_dir(vec![("variant", v.to_string())]);
                match *v {
                    "cache_read" => {
                        let max = s.cache_max.unwrap_or(if s.quick { 16 << 20 } else { 256 << 20 });
                        for size in memlat::sizes(1 << 20, max.max(1 << 20), false) {
                            let mut o = base.clone();
                            o.push(("file_bytes", size.to_string()));
                            out.push(case(o));
                        }
                    }
                    "contention" => {
                        let procs = s
                            .procs
                            .clone()
                            .unwrap_or_else(|| if s.quick { vec![1, 2] } else { vec![1, 2, 4] });
                        for n in procs {
                            let mut o = base.clone();
                            o.push(("procs", n.to_string()));
                            if let Some(b) = s.file_bytes {
                                o.push(("file_bytes", b.to_string()));
                            }
                            out.push(case(o));
                        }
                    }
                    _ => {
                        let mut o = base;
                        if let Some(b) = s.file_bytes {
                            o.push(("file_bytes", b.to_string()));
                        }
                        out.push(case(o));
                    }
                }
            }
        }
        _ => {}
    }
    out
}

/// Run one microbenchmark case. Every process, thread, socket and file it creates is gone
/// when it returns, on success and on error. A stop request is noticed within about 100 ms
/// (between samples, inside long samples, while waiting for a child); the result is then
/// `Err(Interrupted)`, also when the stop surfaced as some other failure on the way out (a
/// child killed, a pipe closed).
pub fn run_case(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    let result = match case.bench.as_str() {
        "timer" => timer::run(case, stop),
        "call" => call::run(case, stop),
        "syscall" => syscall::run(case, stop),
        "proc" => proc::run(case, stop),
        "thread" => thread::run(case, stop),
        "ctxswitch" => ctxswitch::run(case, stop),
        "memlat" => memlat::run(case, stop),
        "membw" => membw::run(case, stop),
        "pagefault" => pagefault::run(case, stop),
        "tcp" => tcp::run(case, stop),
        "fs" => fs::run(case, stop),
        other => {
            let names: Vec<&str> = BENCHES.iter().map(|b| b.0).collect();
            anyhow::bail!("unknown microbenchmark '{other}' (known: {})", names.join(", "))
        }
    };
    match result {
        Err(_) if stop.requested() => Err(anyhow::Error::new(Interrupted)),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bench_plans_at_least_one_case() {
        let s = Settings {
            quick: true,
            ..Default::default()
        };
        for (bench, _) in BENCHES {
            let cases = plan(bench, &s);
            assert!(!cases.is_empty(), "{bench} planned nothing");
            assert!(cases.iter().all(|c| c.option("quick") == Some("1")));
        }
        assert!(plan("bogus", &s).is_empty());
    }

    #[test]
    fn variants_can_be_restricted() {
        let s = Settings {
            variants: Some(vec!["getcwd".into()]),
            ..Default::default()
        };
        let cases = plan("syscall", &s);
        assert_eq!(cases.len(), 1);
        assert_eq!(cases[0].option("variant"), Some("getcwd"));
    }
}
