//! Process creation: fork + exit + wait, fork + exec of a tiny program + wait, and
//! posix_spawn + wait. fork copies the parent's page tables, so its cost grows with the
//! parent's resident size and mappings: every figure carries `parent_rss_bytes`,
//! `parent_mappings` and `parent_threads` of the process that forked. `fork_exit` forks from iopath itself (as it runs the benchmark);
//! `fork_exit_minimal` forks from a freshly exec'd copy of the iopath binary that does nothing
//! but time its forks ([`helper_main`], entered before any argument parsing), the OS floor a
//! minimal C program also sees. The program (default /bin/true) is dynamically linked, so the exec
//! figures include the dynamic loader; the program is printed with the result. A program that
//! has not exited [`PROGRAM_TIMEOUT`] after it was started is killed with its process group and
//! reaped, and the case fails saying so.

use super::harness::{self, push_summary, Budget};
use crate::case::MicroCase;
use crate::observation::names;
use crate::observation::{Metric, Observation, Role, Source};
use crate::stop::Stop;
use crate::sys::process::{self, Program};
use std::io::Read;
use std::time::{Duration, Instant};

/// The first argument that makes the iopath binary the minimal fork helper.
pub const HELPER_ARG: &str = "__fork-floor";

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
    // The child runs beside its parent (on one CPU, the parent waits for it by design): its
    // wait is measured, not another load.
    harness::own_tasks_compete();
    let check_status = |status: i32| -> std::io::Result<()> {
        match status {
            0 => Ok(()),
            s => Err(std::io::Error::other(format!("{program_path} exited with status {s}"))),
        }
    };
    let samples = match variant {
        "fork_exit" => harness::time_per_op(budget, stop, process::fork_exit_wait)?,
        "fork_exit_minimal" => match run_helper(budget, stop)? {
            Ok(floor) => {
                let us: Vec<f64> = floor.samples_ns.iter().map(|ns| ns / 1000.0).collect();
                push_summary(&mut obs, names::TIME_PER_PROCESS_US, "us", &us, Source::Tool);
                push_parent(&mut obs, Some(floor.size));
                harness::push_overheads(&mut obs);
                return Ok(obs);
            }
            Err(why) => {
                obs.push(Metric::unavailable(names::TIME_PER_PROCESS_US, Role::System, "us", why));
                push_parent(&mut obs, None);
                return Ok(obs);
            }
        },
        "fork_exec" | "posix_spawn" => {
            if !std::path::Path::new(program_path).is_file() {
                obs.push(Metric::unavailable(
                    names::TIME_PER_PROCESS_US,
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
    push_summary(&mut obs, names::TIME_PER_PROCESS_US, "us", &us, Source::Tool);
    push_parent(&mut obs, self_size());
    harness::push_overheads(&mut obs);
    Ok(obs)
}

/// The size of a forking process, from its /proc/<pid>/status.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Size {
    /// VmRSS: everything resident, file pages (the binary, libraries) included.
    pub rss_bytes: u64,
    /// RssAnon: resident anonymous memory (heap, stacks), whose page-table entries fork copies
    /// and write-protects; file mappings not yet written are not copied.
    pub anon_bytes: u64,
    pub threads: u64,
    /// Lines of /proc/<pid>/maps: fork copies one VMA (and its page tables) per mapping, so
    /// a parent with many mappings forks more slowly than a minimal C program.
    pub mappings: u64,
}

/// This process's size, from /proc/self/status and /proc/self/maps.
pub fn self_size() -> Option<Size> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    parse_status(&status, &maps)
}

/// VmRSS and RssAnon (kB, as bytes) and Threads of a /proc/<pid>/status text, and the number
/// of mappings (lines) of the same process's /proc/<pid>/maps text.
pub fn parse_status(status: &str, maps: &str) -> Option<Size> {
    let field = |key: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].split_whitespace().next()?.parse().ok()
    };
    Some(Size {
        rss_bytes: field("VmRSS:")? * 1024,
        anon_bytes: field("RssAnon:")? * 1024,
        threads: field("Threads:")?,
        mappings: maps.lines().filter(|l| !l.trim().is_empty()).count() as u64,
    })
}

/// `parent_rss_bytes`, `parent_rss_anon_bytes`, `parent_threads` and `parent_mappings` of the
/// process that forked (its /proc/<pid>/status and /proc/<pid>/maps, read just before the
/// timed forks).
fn push_parent(obs: &mut Observation, size: Option<Size>) {
    const NAMES: [(&str, &str); 4] = [
        ("parent_rss_bytes", "bytes"),
        ("parent_rss_anon_bytes", "bytes"),
        ("parent_threads", "count"),
        ("parent_mappings", "count"),
    ];
    match size {
        Some(s) => {
            for ((name, unit), v) in NAMES.iter().zip([s.rss_bytes, s.anon_bytes, s.threads, s.mappings]) {
                obs.push(Metric::new(name, Role::System, v as f64, unit, Source::Kernel));
            }
        }
        None => {
            let why = "cannot read /proc/<pid>/status or /proc/<pid>/maps of the forking process";
            for (name, unit) in NAMES {
                obs.push(Metric::unavailable(name, Role::System, unit, why));
            }
        }
    }
}

/// What the helper reports: its size before forking and its per-fork times (ns).
#[derive(Debug, PartialEq)]
pub struct Floor {
    pub size: Size,
    pub samples_ns: Vec<f64>,
}

/// The helper's output: `rss_bytes N`, `rss_anon_bytes N`, `threads N`, `mappings N`, then
/// one `sample_ns X` per sample.
pub fn parse_floor(text: &str) -> Result<Floor, String> {
    let mut samples_ns = Vec::new();
    let (mut rss, mut anon, mut threads, mut mappings) = (None, None, None, None);
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(key), Some(value), None) = (it.next(), it.next(), it.next()) else {
            return Err(format!("the fork helper printed an unexpected line '{line}'"));
        };
        let bad = || format!("the fork helper printed a bad number in '{line}'");
        match key {
            "rss_bytes" => rss = Some(value.parse::<u64>().map_err(|_| bad())?),
            "rss_anon_bytes" => anon = Some(value.parse::<u64>().map_err(|_| bad())?),
            "threads" => threads = Some(value.parse::<u64>().map_err(|_| bad())?),
            "mappings" => mappings = Some(value.parse::<u64>().map_err(|_| bad())?),
            "sample_ns" => samples_ns.push(value.parse::<f64>().map_err(|_| bad())?),
            _ => return Err(format!("the fork helper printed an unexpected line '{line}'")),
        }
    }
    match (rss, anon, threads, mappings) {
        (Some(rss_bytes), Some(anon_bytes), Some(threads), Some(mappings)) if !samples_ns.is_empty() => Ok(Floor {
            size: Size {
                rss_bytes,
                anon_bytes,
                threads,
                mappings,
            },
            samples_ns,
        }),
        _ => Err("the fork helper reported no size or no samples".into()),
    }
}

/// The helper's entry point, called by `main` before anything else when the first argument
/// is [`HELPER_ARG`]: `iopath __fork-floor <samples> <sample_ns>`. It times fork + exit + wait
/// with the same primitive and harness as `fork_exit`, and prints [`Floor`] as text. Returns
/// the exit code (2 on bad arguments).
pub fn helper_main(args: &[String]) -> i32 {
    let (Some(samples), Some(sample_ns)) = (
        args.first()
            .and_then(|a| a.parse::<usize>().ok())
            .filter(|n| (1..=1000).contains(n)),
        args.get(1)
            .and_then(|a| a.parse::<f64>().ok())
            .filter(|n| *n > 0.0 && *n <= 1e9),
    ) else {
        crate::tell!("error: {HELPER_ARG} takes <samples 1..1000> <sample_ns up to 1e9>");
        return 2;
    };
    harness::overheads();
    let Some(size) = self_size() else {
        crate::tell!("error: cannot read /proc/self/status or /proc/self/maps");
        return 1;
    };
    let budget = Budget { samples, sample_ns };
    let never = Stop::never();
    match harness::time_per_op(budget, never, process::fork_exit_wait) {
        Ok(values) => {
            let mut out = format!(
                "rss_bytes {}\nrss_anon_bytes {}\nthreads {}\nmappings {}\n",
                size.rss_bytes, size.anon_bytes, size.threads, size.mappings
            );
            for v in values {
                out.push_str(&format!("sample_ns {v}\n"));
            }
            print!("{out}");
            0
        }
        Err(e) => {
            crate::tell!("error: fork failed: {e}");
            1
        }
    }
}

/// Run the helper (this same iopath binary, freshly exec'd) and read its figures. The outer
/// error is a stop; the inner one says why the floor could not be measured here.
fn run_helper(budget: Budget, stop: Stop) -> anyhow::Result<Result<Floor, String>> {
    let exe = match std::env::current_exe() {
        Ok(p) if p.file_name().is_some_and(|n| n == "iopath") => p,
        Ok(p) => {
            return Ok(Err(format!(
                "the running program {} is not the iopath binary, which is the fork helper",
                p.display()
            )))
        }
        Err(e) => return Ok(Err(format!("cannot find the iopath binary: {e}"))),
    };
    let mut child = match std::process::Command::new(&exe)
        .arg(HELPER_ARG)
        .arg(budget.samples.to_string())
        .arg(format!("{}", budget.sample_ns))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Ok(Err(format!("cannot start the fork helper {}: {e}", exe.display()))),
    };
    // The helper's run: calibration plus its samples, a few seconds at most.
    let limit = PROGRAM_TIMEOUT + Duration::from_secs_f64(budget.sample_ns * 1e-9 * (budget.samples as f64 + 30.0));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(Err(format!("waiting for the fork helper: {e}")));
            }
        }
        if stop.requested() || started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            harness::check(stop)?;
            return Ok(Err(format!(
                "the fork helper did not finish within {}; it was killed",
                process::seconds(limit)
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    if !status.success() {
        return Ok(Err(format!("the fork helper failed ({status}): {}", err.trim())));
    }
    Ok(parse_floor(&out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_and_helper_output_parse() {
        let status = "Name:\tiopath\nVmRSS:\t    1536 kB\nRssAnon:\t 512 kB\nThreads:\t1\n";
        let maps = "55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 42 /usr/bin/x\n7ffc1a000000-7ffc1a021000 rw-p 00000000 00:00 0 [stack]\n";
        let size = Size {
            rss_bytes: 1536 * 1024,
            anon_bytes: 512 * 1024,
            threads: 1,
            mappings: 2,
        };
        assert_eq!(parse_status(status, maps), Some(size));
        assert_eq!(parse_status("Name: x\n", maps), None);
        let f = parse_floor(
            "rss_bytes 1572864\nrss_anon_bytes 524288\nthreads 1\nmappings 2\nsample_ns 150000\nsample_ns 160000\n",
        )
        .unwrap();
        assert_eq!(f.size, size);
        assert_eq!(f.samples_ns, vec![150000.0, 160000.0]);
        assert!(parse_floor("rss_bytes 1\nrss_anon_bytes 1\nthreads 1\nmappings 1\n").is_err());
        assert!(
            parse_floor("rss_bytes 1\nrss_anon_bytes 1\nthreads 1\nsample_ns 1\n").is_err(),
            "no mappings"
        );
        assert!(parse_floor("rss_bytes 1\nthreads 1\nsample_ns 1\n").is_err());
        assert!(parse_floor("rss_bytes x\nthreads 1\nsample_ns 1\n").is_err());
        assert!(parse_floor("hello\n").is_err());
    }

    #[test]
    fn own_size_is_read() {
        let s = self_size().unwrap();
        assert!(s.rss_bytes >= s.anon_bytes && s.anon_bytes > 0 && s.threads >= 1);
        // The binary, the heap, the stack and the vdso at least.
        assert!(s.mappings >= 4, "{s:?}");
    }

    #[test]
    fn helper_refuses_bad_arguments() {
        assert_eq!(helper_main(&["0".into(), "1000".into()]), 2);
        assert_eq!(helper_main(&["x".into()]), 2);
    }
}
