//! `iopath micro`: list, run one benchmark or all of them, print a table (or JSON/CSV records),
//! the overheads that were subtracted, the memory levels found and where threads ran.

use super::error::usage;
use super::output::{num, Table};
use super::run::RunFlags;
use super::values::parse_size;
use crate::case::{format_bytes, Case, MicroCase};
use crate::micro::{self, harness, Bench, Settings};
use crate::observation::names;
use crate::observation::{Observation, Role};
use crate::store::Record;
use crate::sweep::Plan;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct MicroArgs {
    /// The benchmark; without one, `micro` lists them and their variants.
    #[command(subcommand)]
    pub command: Option<MicroCommand>,
}

#[derive(Subcommand, Debug)]
pub enum MicroCommand {
    /// List the benchmarks and their variants (what `iopath micro` alone prints).
    #[command(hide = true)]
    List,
    /// Run every benchmark (about 75 s here; with --quick a few seconds).
    #[command(after_help = super::examples::MICRO_ALL)]
    All(Box<RunArgs>),
    /// Clock read cost and resolution, loop overhead, TSC frequency check.
    #[command(after_help = super::examples::MICRO_TIMER)]
    Timer(Box<RunArgs>),
    /// Procedure call with 0..7 arguments.
    #[command(after_help = super::examples::MICRO_CALL)]
    Call(Box<RunArgs>),
    /// System calls: getppid (raw), getcwd, 1-byte read of /dev/zero.
    #[command(after_help = super::examples::MICRO_SYSCALL)]
    Syscall(Box<RunArgs>),
    /// Process creation: fork+exit, fork+exec, posix_spawn.
    #[command(after_help = super::examples::MICRO_PROC)]
    Proc(Box<RunArgs>),
    /// Thread creation: create+join, start latency.
    #[command(after_help = super::examples::MICRO_THREAD)]
    Thread(Box<RunArgs>),
    /// Context switch: processes over pipes, threads over a futex; pinned and unpinned.
    #[command(after_help = super::examples::MICRO_CTXSWITCH)]
    Ctxswitch(Box<RunArgs>),
    /// Memory latency curve (pointer chase) with the cache levels detected.
    #[command(after_help = super::examples::MICRO_MEMLAT)]
    Memlat(Box<RunArgs>),
    /// Memory read, write and copy bandwidth.
    #[command(after_help = super::examples::MICRO_MEMBW)]
    Membw(Box<RunArgs>),
    /// Minor and major page faults.
    #[command(after_help = super::examples::MICRO_PAGEFAULT)]
    Pagefault(Box<RunArgs>),
    /// TCP over loopback: round trip, bandwidth, connect, teardown.
    #[command(after_help = super::examples::MICRO_TCP)]
    Tcp(Box<RunArgs>),
    /// File system: O_DIRECT reads, file cache size, read contention.
    #[command(after_help = super::examples::MICRO_FS)]
    Fs(Box<RunArgs>),
}

/// The options of [`RunArgs`] that only some benchmarks read, with those benchmarks. Every
/// option of `RunArgs` is here or in [`SHARED_OPTIONS`] (a unit test holds it), so a new
/// option cannot show in every bench's `--help` by being forgotten.
pub const BENCH_OPTIONS: [(&str, &[&str]); 15] = [
    ("max", &["memlat"]),
    ("min", &["memlat"]),
    ("stride", &["memlat"]),
    ("hugepages", &["memlat"]),
    ("size", &["membw"]),
    ("dir", &["fs", "pagefault"]),
    ("file_size", &["fs", "pagefault"]),
    ("cache_max", &["fs"]),
    ("cache_time", &["fs"]),
    ("procs", &["fs"]),
    ("remote", &["fs"]),
    ("block_size", &["fs"]),
    ("pinned", &["ctxswitch"]),
    ("program", &["proc"]),
    ("topology", &["tcp"]),
];

/// The options of `micro` every benchmark reads (besides the flattened [`RunFlags`]).
pub const SHARED_OPTIONS: [&str; 3] = ["quick", "samples", "variant"];

/// `micro` with each `<bench>` showing only its own options (and the shared ones); `all` shows
/// every option.
pub fn scope_options(micro: clap::Command) -> clap::Command {
    let benches: Vec<String> = micro
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .filter(|n| n != "all" && n != "list")
        .collect();
    let mut micro = micro;
    for bench in benches {
        let bench_name = bench.clone();
        micro = micro.mut_subcommand(bench, move |mut cmd| {
            let ids: Vec<String> = cmd.get_arguments().map(|a| a.get_id().to_string()).collect();
            for id in ids {
                let only_for = BENCH_OPTIONS.iter().find(|(o, _)| *o == id).map(|(_, b)| *b);
                if only_for.is_some_and(|b| !b.contains(&bench_name.as_str())) {
                    cmd = cmd.mut_arg(id, |a| a.hide(true));
                }
            }
            cmd
        });
    }
    micro
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Short runs with fewer samples and smaller sizes (memlat up to 8 MiB, small files).
    #[arg(long)]
    pub quick: bool,
    /// Samples per figure (default 21, 7 with --quick; the large-memory and file benchmarks use fewer).
    #[arg(long, value_name = "N")]
    pub samples: Option<usize>,
    /// Only these variants, comma-separated (see `iopath micro`).
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
    /// membw: buffer size of read, write and copy (default 4x the last-level cache, at least
    /// 64MiB); write_cached and copy_cached always use a quarter of the L2.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub size: Option<u64>,
    /// fs and pagefault major: directory for the test files (default the temp dir; removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// fs and pagefault major: file size.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub file_size: Option<u64>,
    /// fs cache_read: largest working set (default none; 16MiB with --quick). The working set doubles from 1MiB until
    /// it no longer stays in the page cache (the knee), or --cache-time has passed,
    /// or the next size would take more than half the free space of --dir's file system, or
    /// exceed twice the memory left to the process (MemAvailable and its memory cgroup),
    /// whichever comes first; without a knee it prints "no knee up to X (stopped by: ...)".
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub cache_max: Option<u64>,
    /// fs cache_read: how long the working set may grow (default 30s, 15s with --quick).
    #[arg(long, value_parser = super::values::parse_duration, value_name = "DURATION")]
    pub cache_time: Option<std::time::Duration>,
    /// fs contention: reader process counts, a list 1,2,4 or a range 1..8 (both ends and the
    /// powers of two between; default 1,2,4, 1,2 with --quick).
    #[arg(long, value_name = "LIST", value_parser = super::values::parse_counts_up_to::<MAX_READERS>)]
    pub procs: Option<super::values::CountList>,
    /// fs: read the same files locally and over a real file server built for the run (sshd +
    /// sftp-server in a private network namespace behind a veth pair, mounted with sshfs) and
    /// report the penalty; LINK shapes the link (mtu=N,rate=R, e.g. rate=1gbit; default
    /// unshaped). Needs root and the Debian packages openssh-server openssh-sftp-server sshfs.
    #[arg(long, value_name = "LINK", num_args = 0..=1, default_missing_value = "", require_equals = true)]
    pub remote: Option<String>,
    /// fs --remote: block sizes read, a list 4K,64K or a range 4K..1M (default 4KiB).
    #[arg(long, value_name = "LIST", value_parser = super::values::parse_size_list)]
    pub block_size: Option<super::values::SizeList>,
    /// ctxswitch: pinned to one CPU, not pinned, or both (default both).
    #[arg(long)]
    pub pinned: Option<Pinned>,
    /// proc: the program fork+exec and posix_spawn start (default /bin/true).
    #[arg(long, value_name = "PATH")]
    pub program: Option<String>,
    /// tcp: where the two ends live: loopback, netns (both in a fresh private network
    /// namespace) or veth[:mtu=N][,rate=R] (the server behind a veth pair). Namespaces need root.
    #[arg(long, value_name = "TOPOLOGY", value_parser = super::net::parse_topology)]
    pub topology: Option<crate::net::topology::Topology>,
    #[command(flatten)]
    pub run: RunFlags,
}

/// The most reader processes of `micro fs --procs`.
const MAX_READERS: usize = 64;

/// `micro ctxswitch --pinned`: which of its runs to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pinned {
    Yes,
    No,
    Both,
}

impl Pinned {
    pub const ALL: [Pinned; 3] = [Pinned::Yes, Pinned::No, Pinned::Both];

    pub fn as_str(self) -> &'static str {
        match self {
            Pinned::Yes => "yes",
            Pinned::No => "no",
            Pinned::Both => "both",
        }
    }

    /// The one pinning to measure, or `None` for both.
    fn only(self) -> Option<bool> {
        match self {
            Pinned::Yes => Some(true),
            Pinned::No => Some(false),
            Pinned::Both => None,
        }
    }
}

crate::case::named_choices!(Pinned, "pinning");

impl MicroCommand {
    /// The benchmarks this command names and its flags; None for `list`.
    pub fn benches(&self) -> Option<(Vec<Bench>, &RunArgs)> {
        fn one(bench: Bench, a: &RunArgs) -> Option<(Vec<Bench>, &RunArgs)> {
            Some((vec![bench], a))
        }
        match self {
            MicroCommand::List => None,
            MicroCommand::All(a) => Some((Bench::ALL.to_vec(), a.as_ref())),
            MicroCommand::Timer(a) => one(Bench::Timer, a),
            MicroCommand::Call(a) => one(Bench::Call, a),
            MicroCommand::Syscall(a) => one(Bench::Syscall, a),
            MicroCommand::Proc(a) => one(Bench::Proc, a),
            MicroCommand::Thread(a) => one(Bench::Thread, a),
            MicroCommand::Ctxswitch(a) => one(Bench::Ctxswitch, a),
            MicroCommand::Memlat(a) => one(Bench::Memlat, a),
            MicroCommand::Membw(a) => one(Bench::Membw, a),
            MicroCommand::Pagefault(a) => one(Bench::Pagefault, a),
            MicroCommand::Tcp(a) => one(Bench::Tcp, a),
            MicroCommand::Fs(a) => one(Bench::Fs, a),
        }
    }
}

/// The plan of `micro <bench>`: one case per figure.
pub fn micro_plan(benches: &[Bench], args: &RunArgs) -> anyhow::Result<Plan> {
    let s = settings(benches, args)?;
    let topology = args.topology.clone().unwrap_or_default();
    if !topology.is_loopback() {
        if !benches.contains(&Bench::Tcp) {
            return Err(super::error::usage("--topology is for micro tcp only"));
        }
        if !topology.starts_server() {
            return Err(super::error::usage(format!(
                "--topology {topology}: micro tcp starts its own server (accepted: loopback, netns, veth[:mtu=N][,rate=R])"
            )));
        }
        topology.check().map_err(super::error::usage)?;
        topology.check_answers().map_err(super::error::usage)?;
    }
    let cases = benches
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
        .map(|mut case| {
            if case.bench == Bench::Tcp && !topology.is_loopback() {
                case.options.push(("topology".into(), topology.to_string()));
                case.options.sort();
            }
            Case::Micro(case)
        })
        .collect();
    Ok(args.run.plan(cases, &topology.interface()))
}

/// The plan of `micro <bench>` and its run flags (None: `micro` alone, which lists them).
pub fn measuring(args: &MicroArgs) -> Option<anyhow::Result<(Plan, &RunFlags)>> {
    let (benches, flags) = args.command.as_ref()?.benches()?;
    Some(micro_plan(&benches, flags).map(|plan| (plan, &flags.run)))
}

/// `micro` without a benchmark (and the hidden `micro list`): the list of them.
pub fn print_list() -> anyhow::Result<()> {
    super::output::out(list())
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

/// More samples than this would only allocate: each figure keeps every sample.
/// Whether a stored micro case (a resumed run) keeps the limits of `micro <bench>`: whole
/// numbers, samples in range, and buffers within a third of `headroom` as `check_resources`
/// demands of the flags (membw copies between two buffers, memlat adds a successor table).
pub fn check_case(c: &crate::case::MicroCase, headroom: Option<u64>) -> Result<(), String> {
    let number = |name: &str| number_option(c, name);
    for (name, _) in &c.options {
        if name.ends_with("_bytes") || matches!(name.as_str(), "samples" | "procs" | "args") {
            number(name)?;
        }
    }
    if let Some(n) = number("samples")?.filter(|n| !(1..=MAX_SAMPLES as u64).contains(n)) {
        return Err(format!("{n} samples (accepted: 1 to {MAX_SAMPLES})"));
    }
    let need = memory_bytes(c)?;
    match headroom {
        Some(h) if need > h / 3 => Err(format!(
            "it needs about {} of memory, more than a third of the {} available",
            format_bytes(need),
            format_bytes(h)
        )),
        _ => Ok(()),
    }
}

/// The bytes a micro case's buffers take: membw copies between two buffers, memlat adds a
/// successor table (a quarter) to its buffer; the others hold one buffer of `size_bytes`.
pub fn memory_bytes(c: &crate::case::MicroCase) -> Result<u64, String> {
    let size = number_option(c, "size_bytes")?.unwrap_or(0);
    Ok(match c.bench {
        Bench::Membw => size.saturating_mul(2),
        Bench::Memlat => size.saturating_add(size / 4),
        _ => size,
    })
}

/// A micro option that must be a whole number, if given.
fn number_option(c: &crate::case::MicroCase, name: &str) -> Result<Option<u64>, String> {
    c.option(name)
        .map(|t| {
            t.parse::<u64>()
                .map_err(|_| format!("option {name}='{t}' is not a whole number"))
        })
        .transpose()
}

const MAX_SAMPLES: usize = 100_000;

/// Stage two: check the flags and turn them into Settings.
fn settings(benches: &[Bench], a: &RunArgs) -> anyhow::Result<Settings> {
    if let Some(n) = a.samples.filter(|n| !(1..=MAX_SAMPLES).contains(n)) {
        return Err(usage(format!(
            "--samples {n} is out of range (accepted: 1 to {MAX_SAMPLES})"
        )));
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
    let stride = a.stride.unwrap_or(micro::memlat::DEFAULT_STRIDE);
    for (flag, bytes) in [("--max", a.max), ("--min", a.min)] {
        if let Some(bytes) = bytes.filter(|b| *b < stride.saturating_mul(2)) {
            return Err(usage(format!(
                "{flag} must hold at least two elements of {stride} bytes (the stride); got {bytes}"
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
    let pinned = a.pinned.and_then(Pinned::only);
    if let Some(p) = &a.program {
        use std::os::unix::fs::PermissionsExt;
        let executable = std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        if !executable {
            return Err(usage(format!(
                "--program '{p}' is not an executable file (accepted: a path to a program, e.g. /bin/true)"
            )));
        }
    }
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
    let (remote, block_sizes) = remote_settings(benches, a, variants.as_deref())?;
    Ok(Settings {
        remote,
        block_sizes,
        quick: a.quick,
        samples: a.samples,
        memlat_min: a.min,
        memlat_max: a.max,
        stride: a.stride,
        hugepages: a.hugepages,
        membw_size: a.size,
        dir: a.dir.as_deref().map(micro::scratch::resolved),
        file_bytes: a.file_size,
        cache_max: a.cache_max,
        cache_time_s: a.cache_time.map(|d| d.as_secs_f64().ceil() as u64),
        procs: a.procs.clone(),
        pinned,
        program: a.program.clone(),
        variants,
    })
}

/// `--remote` and `--block-size`: the link text (empty: unshaped) and the block sizes.
type RemoteSettings = (Option<String>, Option<Vec<u64>>);

fn remote_settings(benches: &[Bench], a: &RunArgs, variants: Option<&[String]>) -> anyhow::Result<RemoteSettings> {
    let Some(link) = &a.remote else {
        if a.block_size.is_some() {
            return Err(usage("--block-size is for micro fs --remote only"));
        }
        return Ok((None, None));
    };
    if benches != [Bench::Fs] {
        return Err(usage("--remote is for micro fs only"));
    }
    if variants.is_some_and(|v| v.iter().any(|x| x == "cache_read")) {
        return Err(usage(
            "--remote measures seq_read, rand_read and contention (accepted with --variant), not cache_read",
        ));
    }
    let base = micro::scratch::base_dir(a.dir.as_ref().and_then(|d| d.to_str()));
    micro::remote_fs::check_base(&base).map_err(|e| usage(format!("--dir for --remote: {e}")))?;
    if !link.is_empty() {
        match format!("veth:{link}").parse::<crate::net::topology::Topology>() {
            Ok(crate::net::topology::Topology::Veth(l)) if l.delay_us.is_none() && l.loss_ppm.is_none() => {}
            _ => {
                return Err(usage(format!(
                    "--remote={link} is not accepted (accepted: --remote, or --remote=LINK with LINK mtu=N,rate=R, e.g. rate=1gbit)"
                )))
            }
        }
    }
    if let Some(bad) = a.block_size.iter().flatten().find(|b| **b % 4096 != 0 || **b > 1 << 20) {
        return Err(usage(format!(
            "--block-size {bad} is not accepted (accepted: multiples of 4KiB up to 1MiB)"
        )));
    }
    micro::remote_fs::check().map_err(usage)?;
    Ok((Some(link.clone()), a.block_size.clone()))
}

/// Refuse memory sizes that would push the machine into the OOM killer and files that would
/// fill the disk: buffers up to a third of MemAvailable, files up to half the free space.
fn check_resources(a: &RunArgs) -> anyhow::Result<()> {
    if let Some(available) = crate::sys::procfs::memory_headroom() {
        // membw copy needs two buffers; memlat needs its buffer and a successor table.
        let needs = [
            ("--size", a.size.map(|s| s.saturating_mul(2))),
            ("--max", a.max.map(|m| m.saturating_add(m / 4))),
        ];
        for (flag, bytes) in needs {
            if let Some(bytes) = bytes.filter(|b| *b > available / 3) {
                return Err(usage(format!(
                    "{flag} needs about {} of memory, more than a third of the {} available (MemAvailable and the memory cgroup's limit)",
                    format_bytes(bytes),
                    format_bytes(available)
                )));
            }
        }
    }
    let dir = micro::scratch::base_dir(a.dir.as_ref().and_then(|d| d.to_str()));
    if let Ok(stat) = nix::sys::statvfs::statvfs(&dir) {
        let free = stat.blocks_available().saturating_mul(stat.fragment_size());
        let readers = a.procs.iter().flatten().max().copied().unwrap_or(4) as u64;
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

/// The figures of a record: metrics that have a `<name>_n` companion (or are unavailable),
/// the case's headline (`MicroCase::headline`: what a user runs the bench for) first.
fn figures<'a>(case: &Case, obs: &'a Observation) -> Vec<&'a crate::observation::Metric> {
    let mut figures: Vec<&crate::observation::Metric> = obs
        .metrics
        .iter()
        .filter(|m| {
            !harness::SUMMARY_SUFFIXES.iter().any(|s| m.name.ends_with(s))
                && (obs.get(&format!("{}_n", m.name), m.role).is_some() || m.value.is_none())
        })
        .collect();
    let headline = case.as_workload().headline().name;
    figures.sort_by_key(|m| m.name != headline);
    figures
}

/// The human-readable report: one row per figure, each case's headline first; by default the
/// median, its 95% interval, n, the unit and the source in at most 100 characters (`--wide`
/// adds mean, stddev and min); then the overheads subtracted, memory levels, the file cache
/// knee and the notes. Repetitions are numbered as the store numbers them (from 0).
pub fn render(records: &[Record], view: super::output::View) -> String {
    use super::output::Show;
    let mut t = Table::with_columns(&[
        ("case", Show::Key),
        ("figure", Show::Key),
        ("median", Show::Default),
        ("ci95", Show::Default),
        ("n", Show::Default),
        ("unit", Show::Default),
        ("source", Show::Spare),
        ("mean", Show::Wide),
        ("stddev", Show::Wide),
        ("min", Show::Wide),
    ]);
    let mut notes: Vec<String> = Vec::new();
    let repeated = records.iter().any(|r| r.repetition > 0);
    for r in records {
        let obs = &r.observation;
        let label = if repeated {
            format!("{} rep {}", r.label, r.repetition)
        } else {
            r.label.clone()
        };
        let v = |name: &str, suffix: &str| obs.value(&format!("{name}{suffix}"), Role::System);
        for m in figures(&r.case, obs) {
            t.row(vec![
                label.clone(),
                m.name.clone(),
                num(m.value),
                match (v(&m.name, "_ci95_low"), v(&m.name, "_ci95_high")) {
                    (Some(lo), Some(hi)) => format!("{}..{}", num(Some(lo)), num(Some(hi))),
                    _ => "n/a".into(),
                },
                v(&m.name, "_n").map_or("n/a".into(), |n| format!("{n:.0}")),
                m.unit.clone(),
                m.source.to_string(),
                num(v(&m.name, "_mean")),
                num(v(&m.name, "_stddev")),
                num(v(&m.name, "_min")),
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
        if let Some(line) = how_measured(r) {
            notes.push(format!("{}: {line}", r.label));
        }
    }
    let (table, left_out) = t.render_view(view);
    let mut out = table + &super::output::left_out_line(&left_out);
    if let Some(obs) = records
        .iter()
        .map(|r| &r.observation)
        .find(|o| o.value(names::TIMER_OVERHEAD_NS, Role::System).is_some())
    {
        out.push('\n');
        out.push_str(&super::output::wrap(
            &format!(
                "subtracted from every figure: clock read {} ns, loop iteration {} ns (clock: {})",
                num(obs.value(names::TIMER_OVERHEAD_NS, Role::System)),
                num(obs.value(names::LOOP_OVERHEAD_NS, Role::System)),
                obs.value(names::CLOCK_TSC_HZ, Role::System)
                    .map_or("CLOCK_MONOTONIC".to_string(), |hz| format!(
                        "TSC at {:.3} GHz",
                        hz / 1e9
                    )),
            ),
            2,
        ));
    }
    out.push_str(&memlat_levels(records));
    out.push_str(&cache_knee(records));
    if !notes.is_empty() {
        out.push_str("\nplacement:\n");
        for n in notes {
            out.push_str(&super::output::wrap(&format!("  {n}"), 4));
        }
    }
    out.push_str(&super::output::notes(records, view));
    out
}

/// What a figure depends on that its label does not say: the size of the process that forked
/// (proc) and how much one C-library call handled (membw).
fn how_measured(r: &Record) -> Option<String> {
    let c = r.case.get::<MicroCase>()?;
    let v = |name: &str| r.observation.value(name, Role::System);
    let variant = c.option("variant").unwrap_or("");
    match c.bench {
        Bench::Proc => {
            let who = if variant == "fork_exit_minimal" {
                "a minimal helper (the iopath binary, freshly exec'd)"
            } else {
                "iopath"
            };
            let mappings = v("parent_mappings").map_or(String::new(), |m| format!(", {m} mappings"));
            // Measured here: fork time grows with the parent's mappings (a C program: 23
            // mappings 113 us, 43 mappings 137 us), which is most of what separates this
            // floor from a minimal C program's.
            Some(format!(
                "forked from {who}: {} resident ({} anonymous), {} thread(s){mappings}; fork copies every mapping, so a parent with more forks slower (a minimal C program has about 23)",
                format_bytes(v("parent_rss_bytes")? as u64),
                format_bytes(v("parent_rss_anon_bytes")? as u64),
                v("parent_threads")?
            ))
        }
        Bench::Membw if variant != "read" => {
            let call = if variant.starts_with("copy") {
                "memcpy"
            } else {
                "memset"
            };
            let what = if variant.ends_with("_cached") {
                "cache-resident"
            } else {
                "whole buffer: the peak a large copy reaches"
            };
            Some(format!(
                "one {call} call of {} per pass ({what})",
                format_bytes(v("call_bytes")? as u64)
            ))
        }
        Bench::Thread => match variant {
            "create_join" => Some("Rust std::thread::spawn + join".into()),
            "pthread_create_join" => Some("bare pthread_create + pthread_join".into()),
            _ => None,
        },
        _ => None,
    }
}

fn size_of(r: &Record, option: &str) -> Option<u64> {
    r.case.get::<MicroCase>()?.option(option).and_then(|s| s.parse().ok())
}

fn is_bench(r: &Record, bench: Bench, variant: Option<&str>) -> bool {
    r.case
        .get::<MicroCase>()
        .is_some_and(|c| c.bench == bench && (variant.is_none() || c.option("variant") == variant))
}

/// The memory levels detected in the latency curve (the median latency per working set over
/// repetitions), read against the caches the kernel reports: the same lines the report shows
/// under its memlat chart.
fn memlat_levels(records: &[Record]) -> String {
    let points: Vec<(u64, f64)> = records
        .iter()
        .filter(|r| is_bench(r, Bench::Memlat, None))
        .filter_map(|r| {
            Some((
                size_of(r, "size_bytes")?,
                r.observation.value(names::LATENCY_NS, Role::System)?,
            ))
        })
        .collect();
    if micro::levels::median_per_size(&points).len() < 2 {
        return String::new();
    }
    // The spread of each working set (CV of its samples): noisy ones are unresolved.
    let cvs: Vec<(u64, f64)> = records
        .iter()
        .filter(|r| is_bench(r, Bench::Memlat, None))
        .flat_map(|r| {
            let v = |name: &str| r.observation.value(name, Role::System);
            match (
                size_of(r, "size_bytes"),
                v(names::LATENCY_NS_MEAN),
                v(names::LATENCY_NS_STDDEV),
            ) {
                (Some(size), Some(mean), Some(sd)) => micro::levels::cvs_of(size, &[mean], &[sd]),
                _ => Vec::new(),
            }
        })
        .collect();
    let hierarchy = micro::levels::read_levels_spread(&points, &cvs, &crate::sys::cache::cpu0_caches());
    let mut out = format!("\n{}:\n", micro::levels::HEADING);
    for line in hierarchy.lines() {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

/// The file cache size from each `cache_read` record: the knee (the first working set that
/// did not stay in the page cache, by mincore) with the sizes, resident fractions and re-read
/// times just below and at it, or "no knee up to X (stopped by: ...)".
fn cache_knee(records: &[Record]) -> String {
    let runs: Vec<&Record> = records
        .iter()
        .filter(|r| is_bench(r, Bench::Fs, Some("cache_read")))
        .collect();
    let mut out = String::new();
    for r in &runs {
        let Some(line) = cache_knee_line(&r.observation) else {
            continue;
        };
        let line = if runs.len() > 1 {
            format!("file cache ({} rep {}): {line}", r.label, r.repetition)
        } else {
            format!("file cache: {line}")
        };
        out.push('\n');
        out.push_str(&super::output::wrap(&line, 2));
    }
    out
}

/// The knee line of one `cache_read` observation; None for a record without the figure.
pub fn cache_knee_line(obs: &Observation) -> Option<String> {
    let v = |name: &str| obs.value(name, Role::System);
    let knee = obs.get("file_cache_bytes", Role::System)?;
    let pct = |f: f64| format!("{:.0}%", f * 100.0);
    let us = |name: &str| v(name).map_or("n/a".to_string(), |t| format!("{} us/MiB", num(Some(t))));
    Some(match knee.value {
        Some(bytes) => {
            let at = format!(
                "{} re-read at {} with {} resident",
                format_bytes(bytes as u64),
                us("read_time_per_mib_us"),
                v("resident_fraction").map_or("n/a".into(), pct)
            );
            let below = match (v("below_knee_bytes"), v("below_knee_resident_fraction")) {
                (Some(b), Some(f)) => format!(
                    "{} re-read at {} with {} resident, ",
                    format_bytes(b as u64),
                    us("below_knee_read_time_per_mib_us"),
                    pct(f)
                ),
                _ => "the first size already did not fit, ".into(),
            };
            format!(
                "about {} (file_cache_bytes: the first working set that did not stay in the page cache, by mincore): {below}{at}",
                format_bytes(bytes as u64)
            )
        }
        None => {
            let reason = knee.source.to_string();
            let reason = reason.strip_prefix("unavailable: ").unwrap_or(&reason).to_string();
            match (v("largest_tried_bytes"), v("resident_fraction")) {
                (Some(b), Some(f)) => format!(
                    "{reason} (mincore), so the cache holds at least that; {} re-read at {} with {} resident, the speed of memory, not of the disk",
                    format_bytes(b as u64),
                    us("read_time_per_mib_us"),
                    pct(f)
                ),
                _ => reason,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Args;

    /// Every option of `micro` is either read by all benches or listed with the benches that
    /// read it: one added without either would show in every bench's `--help`.
    #[test]
    fn every_option_is_scoped() {
        let common: Vec<String> = RunFlags::augment_args(clap::Command::new("flags"))
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect();
        let micro = RunArgs::augment_args(clap::Command::new("micro"));
        let unscoped: Vec<String> = micro
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .filter(|id| !common.contains(id) && !SHARED_OPTIONS.contains(&id.as_str()))
            .filter(|id| !BENCH_OPTIONS.iter().any(|(o, _)| o == id))
            .collect();
        assert!(
            unscoped.is_empty(),
            "options of micro neither shared nor scoped: {unscoped:?}"
        );
        for (option, benches) in BENCH_OPTIONS {
            assert!(
                micro.get_arguments().any(|a| a.get_id() == option),
                "{option} is not an option"
            );
            for bench in benches {
                assert!(
                    Bench::ALL.iter().any(|b| b.to_string() == *bench),
                    "{option}: no bench {bench}"
                );
            }
        }
    }
}
