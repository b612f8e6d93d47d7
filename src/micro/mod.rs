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
pub mod remote_fs;
pub mod sattolo;
pub mod scratch;
pub mod syscall;
pub mod tcp;
pub mod thread;
pub mod timer;

pub use levels::Level;

pub use crate::case::Bench;

use crate::case::MicroCase;
use crate::observation::Observation;
use crate::stop::{Interrupted, Stop};
use std::path::PathBuf;

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
    /// fs cache_read: the largest working set tried (default: until the knee or another bound).
    pub cache_max: Option<u64>,
    /// fs cache_read: the time budget in seconds (default fs::CACHE_BUDGET_S).
    pub cache_time_s: Option<u64>,
    /// fs contention: reader process counts.
    pub procs: Option<Vec<usize>>,
    /// ctxswitch: Some(true) pinned only, Some(false) unpinned only, None both.
    pub pinned: Option<bool>,
    /// proc: the program exec'd and spawned.
    pub program: Option<String>,
    /// Restrict to some variants of the benchmark (e.g. syscall getppid).
    pub variants: Option<Vec<String>>,
    /// fs --remote: read over sshfs too, with this veth link (`mtu=N,rate=R`, empty: unshaped).
    pub remote: Option<String>,
    /// fs --remote: block sizes (default 4 KiB).
    pub block_sizes: Option<Vec<u64>>,
}

/// One case's options beyond those every case of the run shares.
type Options = Vec<(&'static str, String)>;

/// The cases one benchmark runs under these settings.
pub fn plan(bench: Bench, s: &Settings) -> Vec<MicroCase> {
    let mut common: Options = Vec::new();
    if s.quick {
        common.push(("quick", "1".into()));
    }
    if let Some(n) = s.samples {
        common.push(("samples", n.to_string()));
    }
    let chosen: Vec<&'static str> = bench
        .variants()
        .iter()
        .copied()
        .filter(|v| s.variants.as_ref().is_none_or(|want| want.iter().any(|w| w == v)))
        .collect();
    let variant = |v: &str| vec![("variant", v.to_string())];
    let cases: Vec<Options> = match bench {
        Bench::Timer => vec![vec![]],
        Bench::Call => (0..=7).map(|n| vec![("args", n.to_string())]).collect(),
        Bench::Syscall | Bench::Thread | Bench::Tcp => chosen.iter().map(|v| variant(v)).collect(),
        Bench::Proc => chosen
            .iter()
            .map(|v| {
                let mut o = variant(v);
                if !v.starts_with("fork_exit") {
                    o.push((
                        "program",
                        s.program.clone().unwrap_or_else(|| proc::DEFAULT_PROGRAM.into()),
                    ));
                }
                o
            })
            .collect(),
        Bench::Ctxswitch => {
            let pins: Vec<&str> = match s.pinned {
                Some(true) => vec!["yes"],
                Some(false) => vec!["no"],
                None => vec!["yes", "no"],
            };
            let mut out = Vec::new();
            for v in &chosen {
                for p in &pins {
                    out.push(vec![("variant", v.to_string()), ("pinned", p.to_string())]);
                }
            }
            out
        }
        Bench::Memlat => memlat_cases(s),
        Bench::Membw => {
            // --size sets the whole buffers; the cache-resident variants keep theirs.
            let size = s.membw_size.unwrap_or_else(membw::default_size);
            chosen
                .iter()
                .map(|v| {
                    let size = if v.ends_with("_cached") {
                        membw::cached_size()
                    } else {
                        size
                    };
                    vec![("variant", v.to_string()), ("size_bytes", size.to_string())]
                })
                .collect()
        }
        Bench::Pagefault => chosen
            .iter()
            .map(|v| {
                let mut o = variant(v);
                if *v == "major" {
                    o = with_dir(o, s);
                    if let Some(b) = s.file_bytes {
                        o.push(("file_bytes", b.to_string()));
                    }
                }
                o
            })
            .collect(),
        Bench::Fs if s.remote.is_some() => remote_fs_cases(&chosen, s),
        Bench::Fs => fs_cases(&chosen, s),
    };
    cases
        .into_iter()
        .map(|extra| {
            let mut opts = common.clone();
            opts.extend(extra);
            MicroCase::new(bench, opts)
        })
        .collect()
}

/// The options with `--dir`'s folder, when given.
fn with_dir(mut v: Options, s: &Settings) -> Options {
    if let Some(d) = &s.dir {
        v.push(("dir", d.display().to_string()));
    }
    v
}

/// memlat's working sets from `--min` to `--max`, with the stride and `--hugepages`.
fn memlat_cases(s: &Settings) -> Vec<Options> {
    let max = s.memlat_max.unwrap_or(if s.quick { 8 << 20 } else { 256 << 20 });
    let min = s.memlat_min.unwrap_or(1024);
    let stride = s.stride.unwrap_or(memlat::DEFAULT_STRIDE);
    memlat::sizes(min, max, !s.quick)
        .into_iter()
        .map(|size| {
            let mut o = vec![("size_bytes", size.to_string()), ("stride_bytes", stride.to_string())];
            if s.hugepages {
                o.push(("hugepages", "yes".into()));
            }
            o
        })
        .collect()
}

/// fs --remote: the same variants read locally and over sshfs, per block size and file size
/// (contention: per number of readers).
fn remote_fs_cases(chosen: &[&str], s: &Settings) -> Vec<Options> {
    let mut out = Vec::new();
    let link = s.remote.clone().unwrap_or_default();
    let blocks = s.block_sizes.clone().unwrap_or_else(|| vec![remote_fs::DEFAULT_BLOCK]);
    let sizes = match s.file_bytes {
        Some(b) => vec![b],
        None if s.quick => vec![256 << 10, 1 << 20],
        None => vec![1 << 20, 4 << 20, 16 << 20],
    };
    for v in chosen.iter().filter(|v| **v != "cache_read") {
        for block in &blocks {
            let mut base = with_dir(
                vec![
                    ("variant", v.to_string()),
                    ("remote", remote_fs::SERVER.to_string()),
                    ("block_bytes", block.to_string()),
                ],
                s,
            );
            if !link.is_empty() {
                base.push(("link", link.clone()));
            }
            if *v == "contention" {
                // The seed's shape: 1..N readers, each its own file of the same size.
                let procs = s.procs.clone().unwrap_or_else(|| {
                    if s.quick {
                        vec![1, 2]
                    } else {
                        remote_fs::SEED_READERS.to_vec()
                    }
                });
                out.extend(readers_cases(&base, procs, s));
            } else {
                for size in &sizes {
                    let mut o = base.clone();
                    o.push(("file_bytes", size.to_string()));
                    out.push(o);
                }
            }
        }
    }
    out
}

/// A contention case per number of readers, each reading `--file-size` when given.
fn readers_cases(base: &Options, procs: Vec<usize>, s: &Settings) -> Vec<Options> {
    procs
        .into_iter()
        .map(|n| {
            let mut o = base.clone();
            o.push(("procs", n.to_string()));
            if let Some(b) = s.file_bytes {
                o.push(("file_bytes", b.to_string()));
            }
            o
        })
        .collect()
}

/// fs's local variants: cache_read's one growing case, contention's per number of readers,
/// the others one each.
fn fs_cases(chosen: &[&str], s: &Settings) -> Vec<Options> {
    let mut out = Vec::new();
    for v in chosen {
        let base = with_dir(vec![("variant", v.to_string())], s);
        match *v {
            "cache_read" => {
                // One case grows its working set until the knee or a bound
                // (fs::CacheStop): the sizes depend on what the run finds.
                let mut o = base.clone();
                if let Some(max) = s.cache_max {
                    o.push(("cache_max_bytes", max.to_string()));
                }
                if let Some(t) = s.cache_time_s {
                    o.push(("budget_s", t.to_string()));
                }
                out.push(o);
            }
            "contention" => {
                let procs = s
                    .procs
                    .clone()
                    .unwrap_or_else(|| if s.quick { vec![1, 2] } else { vec![1, 2, 4] });
                out.extend(readers_cases(&base, procs, s));
            }
            _ => {
                let mut o = base;
                if let Some(b) = s.file_bytes {
                    o.push(("file_bytes", b.to_string()));
                }
                out.push(o);
            }
        }
    }
    out
}

/// Run one microbenchmark case. Every process, thread, socket and file it creates is gone
/// when it returns, on success and on error. A stop request is noticed within about 100 ms
/// (between samples, inside long samples, while waiting for a child); the result is then
/// `Err(Interrupted)`, also when the stop surfaced as some other failure on the way out (a
/// child killed, a pipe closed).
pub fn run_case(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    harness::busy_reset();
    let result = match case.bench {
        Bench::Timer => timer::run(case, stop),
        Bench::Call => call::run(case, stop),
        Bench::Syscall => syscall::run(case, stop),
        Bench::Proc => proc::run(case, stop),
        Bench::Thread => thread::run(case, stop),
        Bench::Ctxswitch => ctxswitch::run(case, stop),
        Bench::Memlat => memlat::run(case, stop),
        Bench::Membw => membw::run(case, stop),
        Bench::Pagefault => pagefault::run(case, stop),
        Bench::Tcp => tcp::run(case, stop),
        Bench::Fs if case.option("remote").is_some() => remote_fs::run(case, stop),
        Bench::Fs => fs::run(case, stop),
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
        for bench in Bench::ALL {
            let cases = plan(bench, &s);
            assert!(!cases.is_empty(), "{bench} planned nothing");
            assert!(cases.iter().all(|c| c.option("quick") == Some("1") && c.bench == bench));
        }
    }

    #[test]
    fn variants_can_be_restricted() {
        let s = Settings {
            variants: Some(vec!["getcwd".into()]),
            ..Default::default()
        };
        let cases = plan(Bench::Syscall, &s);
        assert_eq!(cases.len(), 1);
        assert_eq!(cases[0].option("variant"), Some("getcwd"));
    }
}
