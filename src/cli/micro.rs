//! `iopath micro`: list, run one benchmark or all of them, print a table (or JSON/CSV records),
//! the overheads that were subtracted, the memory levels found and where threads ran.

use super::dbrun::DbRun;
use super::error::usage;
use super::output::{num, Table};
use super::values::{parse_count_list, parse_size};
use crate::case::{format_bytes, Case, MicroCase};
use crate::micro::{self, harness, Bench, Settings};
use crate::observation::{Observation, Role};
use crate::store::export::{CsvExporter, Exporter, JsonExporter};
use crate::store::Record;
use clap::{Args, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct MicroArgs {
    #[command(subcommand)]
    pub command: MicroCommand,
}

#[derive(Subcommand, Debug)]
pub enum MicroCommand {
    /// List the benchmarks and their variants.
    List,
    /// Run every benchmark (about 75 s here; with --quick a few seconds).
    All(Box<RunArgs>),
    /// Clock read cost and resolution, loop overhead, TSC frequency check.
    Timer(Box<RunArgs>),
    /// Procedure call with 0..7 arguments.
    Call(Box<RunArgs>),
    /// System calls: getppid (raw), getcwd, 1-byte read of /dev/zero.
    Syscall(Box<RunArgs>),
    /// Process creation: fork+exit, fork+exec, posix_spawn.
    Proc(Box<RunArgs>),
    /// Thread creation: create+join, start latency.
    Thread(Box<RunArgs>),
    /// Context switch: processes over pipes, threads over a futex; pinned and unpinned.
    Ctxswitch(Box<RunArgs>),
    /// Memory latency curve (pointer chase) with the cache levels detected.
    Memlat(Box<RunArgs>),
    /// Memory read, write and copy bandwidth.
    Membw(Box<RunArgs>),
    /// Minor and major page faults.
    Pagefault(Box<RunArgs>),
    /// TCP over loopback: round trip, bandwidth, connect, teardown.
    Tcp(Box<RunArgs>),
    /// File system: O_DIRECT reads, file cache size, read contention.
    Fs(Box<RunArgs>),
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Short runs with fewer samples and smaller sizes (memlat up to 8 MiB, small files).
    #[arg(long)]
    pub quick: bool,
    /// Samples per figure (default 21, 7 with --quick; the large-memory and file benchmarks use fewer).
    #[arg(long, value_name = "N")]
    pub samples: Option<usize>,
    /// Only these variants, comma-separated (see `iopath micro list`).
    #[arg(long, value_name = "LIST")]
    pub variant: Option<String>,
    /// memlat: largest working set (default 256MiB, 8MiB with --quick).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub max: Option<u64>,
    /// memlat: smallest working set (default 1KiB).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub min: Option<u64>,
    /// memlat: distance between chased elements in bytes, a multiple of 8 (default 64).
    #[arg(long, value_parser = parse_size, value_name = "BYTES")]
    pub stride: Option<u64>,
    /// memlat: ask for transparent huge pages (MADV_HUGEPAGE).
    #[arg(long)]
    pub hugepages: bool,
    /// membw: buffer size (default 4x the last-level cache, at least 64MiB).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub size: Option<u64>,
    /// fs and pagefault major: directory for the test files (default the temp dir; removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// fs and pagefault major: file size.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub file_size: Option<u64>,
    /// fs cache_read: largest file (default 256MiB, 16MiB with --quick).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub cache_max: Option<u64>,
    /// fs contention: reader process counts (default 1,2,4; 1,2 with --quick).
    #[arg(long, value_name = "LIST")]
    pub procs: Option<String>,
    /// ctxswitch: yes, no or both (default both).
    #[arg(long, value_name = "yes|no|both")]
    pub pinned: Option<String>,
    /// proc: the program fork+exec and posix_spawn start (default /bin/true).
    #[arg(long, value_name = "PATH")]
    pub program: Option<String>,
    /// Print the records as JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the records as CSV.
    #[arg(long)]
    pub csv: bool,
    /// Also store the results as a run in this results database (created if missing; the
    /// machine description goes with it), e.g. iopath-results/iopath.db.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}

pub fn run(args: MicroArgs) -> anyhow::Result<()> {
    match args.command {
        MicroCommand::List => {
            print!("{}", list());
            Ok(())
        }
        MicroCommand::All(a) => run_benches(&Bench::ALL, a),
        MicroCommand::Timer(a) => run_benches(&[Bench::Timer], a),
        MicroCommand::Call(a) => run_benches(&[Bench::Call], a),
        MicroCommand::Syscall(a) => run_benches(&[Bench::Syscall], a),
        MicroCommand::Proc(a) => run_benches(&[Bench::Proc], a),
        MicroCommand::Thread(a) => run_benches(&[Bench::Thread], a),
        MicroCommand::Ctxswitch(a) => run_benches(&[Bench::Ctxswitch], a),
        MicroCommand::Memlat(a) => run_benches(&[Bench::Memlat], a),
        MicroCommand::Membw(a) => run_benches(&[Bench::Membw], a),
        MicroCommand::Pagefault(a) => run_benches(&[Bench::Pagefault], a),
        MicroCommand::Tcp(a) => run_benches(&[Bench::Tcp], a),
        MicroCommand::Fs(a) => run_benches(&[Bench::Fs], a),
    }
}

fn list() -> String {
    let mut t = Table::new(&["bench", "variants", "what it measures"]);
    for bench in Bench::ALL {
        let v = bench.variants();
        t.row(vec![
            bench.to_string(),
            if v.is_empty() { "-".into() } else { v.join(",") },
            bench.description().to_string(),
        ]);
    }
    t.render()
}

/// Stage two: check the flags and turn them into Settings.
fn settings(benches: &[Bench], a: &RunArgs) -> anyhow::Result<Settings> {
    if a.samples == Some(0) {
        return Err(usage("--samples must be at least 1"));
    }
    if let Some(stride) = a.stride {
        if stride < 8 || stride % 8 != 0 {
            return Err(usage(format!(
                "--stride must be a multiple of 8 bytes, at least 8; got {stride}"
            )));
        }
    }
    if let (Some(min), Some(max)) = (a.min, a.max) {
        if min > max {
            return Err(usage(format!("--min ({min}) is larger than --max ({max})")));
        }
    }
    if let (Some(min), None) = (a.min, a.max) {
        let default_max: u64 = if a.quick { 8 << 20 } else { 256 << 20 };
        if min > default_max {
            return Err(usage(format!(
                "--min ({min}) is larger than the default --max ({default_max}); give --max too"
            )));
        }
    }
    if let Some(max) = a.max {
        let stride = a.stride.unwrap_or(micro::memlat::DEFAULT_STRIDE);
        if max < 2 * stride {
            return Err(usage(format!(
                "--max must hold at least two elements of {stride} bytes; got {max}"
            )));
        }
    }
    if a.size.is_some_and(|s| s < 4096) {
        return Err(usage("--size must be at least 4KiB"));
    }
    if let Some(dir) = &a.dir {
        micro::scratch::check_dir(dir).map_err(usage)?;
    }
    check_resources(a)?;
    let pinned = match a.pinned.as_deref() {
        None | Some("both") => None,
        Some("yes") => Some(true),
        Some("no") => Some(false),
        Some(other) => {
            return Err(usage(format!(
                "--pinned '{other}' is not accepted (accepted: yes, no, both)"
            )))
        }
    };
    if let Some(p) = &a.program {
        if !std::path::Path::new(p).is_file() {
            return Err(usage(format!("--program '{p}' is not a file")));
        }
    }
    let procs = match &a.procs {
        None => None,
        Some(text) => {
            let p = parse_count_list(text).map_err(|e| usage(format!("--procs: {e}")))?;
            if p.iter().any(|n| *n > 64) {
                return Err(usage("--procs accepts 1..64 readers"));
            }
            Some(p)
        }
    };
    let variants = match &a.variant {
        None => None,
        Some(text) => {
            let wanted: Vec<String> = text.split(',').map(|s| s.trim().to_string()).collect();
            let known: Vec<&str> = benches.iter().flat_map(|b| b.variants().iter().copied()).collect();
            if let Some(bad) = wanted.iter().find(|w| !known.contains(&w.as_str())) {
                return Err(usage(format!(
                    "--variant '{bad}' is not a variant of {} (accepted: {})",
                    benches.iter().map(|b| b.name()).collect::<Vec<_>>().join(", "),
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                )));
            }
            Some(wanted)
        }
    };
    Ok(Settings {
        quick: a.quick,
        samples: a.samples,
        memlat_min: a.min,
        memlat_max: a.max,
        stride: a.stride,
        hugepages: a.hugepages,
        membw_size: a.size,
        dir: a.dir.clone(),
        file_bytes: a.file_size,
        cache_max: a.cache_max,
        procs,
        pinned,
        program: a.program.clone(),
        variants,
    })
}

/// Refuse memory sizes that would push the machine into the OOM killer and files that would
/// fill the disk: buffers up to a third of MemAvailable, files up to half the free space.
fn check_resources(a: &RunArgs) -> anyhow::Result<()> {
    let available = crate::sys::procfs::meminfo_bytes("MemAvailable:");
    if let Some(available) = available {
        // membw copy needs two buffers; memlat needs its buffer and a successor table.
        for (flag, bytes) in [("--size", a.size.map(|s| 2 * s)), ("--max", a.max.map(|m| m + m / 4))] {
            if let Some(bytes) = bytes.filter(|b| *b > available / 3) {
                return Err(usage(format!(
                    "{flag} needs about {} of memory, more than a third of the {} available",
                    format_bytes(bytes),
                    format_bytes(available)
                )));
            }
        }
    }
    let dir = micro::scratch::base_dir(a.dir.as_ref().and_then(|d| d.to_str()));
    if let Ok(stat) = nix::sys::statvfs::statvfs(&dir) {
        let free = stat.blocks_available().saturating_mul(stat.fragment_size());
        let readers = a
            .procs
            .as_deref()
            .and_then(|p| parse_count_list(p).ok())
            .and_then(|p| p.into_iter().max())
            .unwrap_or(4) as u64;
        let needs = [
            ("--file-size", a.file_size.map(|f| f.saturating_mul(readers))),
            ("--cache-max", a.cache_max),
        ];
        for (flag, bytes) in needs {
            if let Some(bytes) = bytes.filter(|b| *b > free / 2) {
                return Err(usage(format!(
                    "{flag} needs {} of files in {}, more than half of its {} free",
                    format_bytes(bytes),
                    dir.display(),
                    format_bytes(free)
                )));
            }
        }
    }
    Ok(())
}

fn run_benches(benches: &[Bench], args: Box<RunArgs>) -> anyhow::Result<()> {
    let s = settings(benches, &args)?;
    let cases: Vec<MicroCase> = benches
        .iter()
        .flat_map(|b| {
            // `--variant` restricts only the benchmarks that have that variant.
            let mut own = s.clone();
            if let Some(v) = &s.variants {
                let mine: Vec<String> = v
                    .iter()
                    .filter(|x| b.variants().contains(&x.as_str()))
                    .cloned()
                    .collect();
                own.variants = if mine.is_empty() && benches.len() > 1 {
                    None
                } else {
                    Some(mine)
                };
            }
            micro::plan(*b, &own)
        })
        .collect();
    let mut db = match &args.db {
        Some(path) => Some(DbRun::start(
            path,
            cases.iter().cloned().map(Case::Micro).collect(),
            "lo",
        )?),
        None => None,
    };
    let stop = crate::sys::signal::install_stop_handler();
    let mut interrupted = false;
    let progress = std::io::stderr().is_terminal();
    let mut records = Vec::with_capacity(cases.len());
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        if stop.requested() {
            eprintln!(
                "stopped after {i} of {} cases (Ctrl-C); the results so far follow",
                cases.len()
            );
            interrupted = true;
            break;
        }
        if progress {
            eprintln!("[{}/{}] {}", i + 1, cases.len(), case.label());
        }
        let started = std::time::Instant::now();
        let result = micro::run_case(case, stop).map_err(|err| format!("{err:#}"));
        if let Some(db) = db.as_mut() {
            db.record(i, &result, started.elapsed().as_secs_f64())?;
        }
        let (observation, error) = match result {
            Ok(obs) => (obs, None),
            Err(err) => {
                eprintln!("error: {}: {err}", case.label());
                failures.push(case.label());
                let mut obs = Observation::default();
                obs.warn(crate::observation::WarningKind::CellFailed, format!("failed: {err}"));
                (obs, Some(err))
            }
        };
        records.push(Record {
            run_id: db.as_ref().map(|d| d.run_id),
            error,
            label: case.label(),
            case: Case::Micro(case.clone()),
            repetition: 0,
            observation,
        });
    }
    if args.json {
        print!("{}", String::from_utf8_lossy(&JsonExporter.serialize(&records)?));
    } else if args.csv {
        print!("{}", String::from_utf8_lossy(&CsvExporter.serialize(&records)?));
    } else {
        print!("{}", render(&records));
    }
    if let Some(db) = db {
        db.finish(interrupted)?;
    }
    if !failures.is_empty() {
        anyhow::bail!(
            "{} of {} cases failed: {}",
            failures.len(),
            records.len(),
            failures.join("; ")
        );
    }
    Ok(())
}

/// The headline figures of a record: metrics that have a `<name>_n` companion.
fn figures(obs: &Observation) -> Vec<&crate::observation::Metric> {
    obs.metrics
        .iter()
        .filter(|m| {
            !harness::SUMMARY_SUFFIXES.iter().any(|s| m.name.ends_with(s))
                && (obs.get(&format!("{}_n", m.name), m.role).is_some() || m.value.is_none())
        })
        .collect()
}

/// The human-readable report: one row per figure, then notes.
pub fn render(records: &[Record]) -> String {
    let mut t = Table::new(&[
        "case", "figure", "median", "mean", "stddev", "ci95", "min", "n", "unit", "source",
    ]);
    let mut notes: Vec<String> = Vec::new();
    for r in records {
        let obs = &r.observation;
        let v = |name: &str, suffix: &str| obs.value(&format!("{name}{suffix}"), Role::System);
        for m in figures(obs) {
            t.row(vec![
                r.label.clone(),
                m.name.clone(),
                num(m.value),
                num(v(&m.name, "_mean")),
                num(v(&m.name, "_stddev")),
                match (v(&m.name, "_ci95_low"), v(&m.name, "_ci95_high")) {
                    (Some(lo), Some(hi)) => format!("{}..{}", num(Some(lo)), num(Some(hi))),
                    _ => "n/a".into(),
                },
                num(v(&m.name, "_min")),
                v(&m.name, "_n").map_or("n/a".into(), |n| format!("{n:.0}")),
                m.unit.clone(),
                m.source.to_string(),
            ]);
        }
        for p in &obs.placement {
            notes.push(format!(
                "{}: side {} pinned to {} ran on cpu {} (start) / {} (end)",
                r.label,
                p.index,
                p.pinned.as_ref().map_or("none".into(), |c| format!("{c:?}")),
                p.cpu_at_start.map_or("?".into(), |c| c.to_string()),
                p.cpu_at_end.map_or("?".into(), |c| c.to_string()),
            ));
        }
        for w in &obs.warnings {
            notes.push(format!("{}: {w}", r.label));
        }
    }
    let mut out = t.render();
    if let Some(obs) = records
        .iter()
        .map(|r| &r.observation)
        .find(|o| o.value("timer_overhead_ns", Role::System).is_some())
    {
        out.push_str(&format!(
            "\nsubtracted from every figure: clock read {} ns, loop iteration {} ns (clock: {})\n",
            num(obs.value("timer_overhead_ns", Role::System)),
            num(obs.value("loop_overhead_ns", Role::System)),
            obs.value("clock_tsc_hz", Role::System)
                .map_or("CLOCK_MONOTONIC".to_string(), |hz| format!(
                    "TSC at {:.3} GHz",
                    hz / 1e9
                )),
        ));
    }
    out.push_str(&memlat_levels(records));
    out.push_str(&cache_knee(records));
    if !notes.is_empty() {
        out.push_str("\nnotes:\n");
        for n in notes {
            out.push_str(&format!("  {n}\n"));
        }
    }
    out
}

fn size_of(r: &Record, option: &str) -> Option<u64> {
    match &r.case {
        Case::Micro(c) => c.option(option).and_then(|s| s.parse().ok()),
        _ => None,
    }
}

fn is_bench(r: &Record, bench: Bench, variant: Option<&str>) -> bool {
    matches!(&r.case, Case::Micro(c) if c.bench == bench && (variant.is_none() || c.option("variant") == variant))
}

/// The detected memory levels next to the caches the kernel reports.
fn memlat_levels(records: &[Record]) -> String {
    let points: Vec<(u64, f64)> = records
        .iter()
        .filter(|r| is_bench(r, Bench::Memlat, None))
        .filter_map(|r| {
            Some((
                size_of(r, "size_bytes")?,
                r.observation.value("latency_ns", Role::System)?,
            ))
        })
        .collect();
    if points.len() < 2 {
        return String::new();
    }
    let mut out = String::from("\nmemory levels detected in the latency curve:\n");
    let levels = micro::detect_levels(&points);
    let caches = crate::sys::cache::cpu0_caches();
    let mut t = Table::new(&["level", "working sets", "latency_ns", "kernel says"]);
    for l in &levels {
        let says = match l.name.strip_prefix('L').and_then(|n| n.parse::<u32>().ok()) {
            Some(n) => caches
                .iter()
                .find(|c| c.level == n && c.kind != "Instruction")
                .map_or("no such cache in sysfs".into(), |c| {
                    format!("L{n} {} {}", c.kind.to_lowercase(), format_bytes(c.size_bytes))
                }),
            None => "main memory".into(),
        };
        t.row(vec![
            l.name.clone(),
            format!("{}..{}", format_bytes(l.min_bytes), format_bytes(l.max_bytes)),
            num(Some(l.latency_ns)),
            says,
        ]);
    }
    out.push_str(&t.render());
    out
}

/// The file cache size knee from residency, with the re-read times beside it.
fn cache_knee(records: &[Record]) -> String {
    let read = |name: &str| -> Vec<(u64, f64)> {
        records
            .iter()
            .filter(|r| is_bench(r, Bench::Fs, Some("cache_read")))
            .filter_map(|r| Some((size_of(r, "file_bytes")?, r.observation.value(name, Role::System)?)))
            .collect()
    };
    let resident = read("resident_fraction");
    let times = read("read_time_per_mib_us");
    let Some(largest) = resident.iter().map(|p| p.0).max() else {
        return String::new();
    };
    let fastest = times.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let slowest = times.iter().map(|p| p.1).fold(0.0, f64::max);
    match micro::fs::detect_knee(&resident) {
        Some(knee) => format!(
            "\nfile cache: from {} on, files no longer stay in the page cache (mincore); re-reads take {}..{} us/MiB\n",
            format_bytes(knee),
            num(Some(fastest)),
            num(Some(slowest))
        ),
        None => format!(
            "\nfile cache: no knee up to {}: every file stayed resident in the page cache (mincore), so the cache holds at least that (raise --cache-max); re-reads took {}..{} us/MiB, the spread being CPU caches vs DRAM, not the disk\n",
            format_bytes(largest),
            num(Some(fastest)),
            num(Some(slowest))
        ),
    }
}
