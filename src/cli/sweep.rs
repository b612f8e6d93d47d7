//! `iopath sweep` and `iopath quick`. A sweep takes exactly the flags of the direct command
//! (`sweep net-stream` = `net stream`, `sweep servers` = `servers`, `sweep micro <bench>` =
//! `micro <bench>`): the same plan goes to the same runner, and the run is always stored
//! (`--db` defaults to iopath-results/iopath.db). At the end it prints per-cell statistics and
//! the crossover table. `quick` is a preset plan.

use super::error::usage;
use super::output::Table;
use super::run::{self, Destination, RunFlags};
use crate::report::{self, fmt_num};
use crate::store::{Store, StoreError, DEFAULT_DB_PATH};
use crate::sweep::Plan;
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SweepArgs {
    #[command(subcommand)]
    pub workload: Option<SweepWorkload>,
    /// Finish an interrupted or killed run: runs only the cells it is missing (and failed ones).
    #[arg(long, value_name = "RUN_ID")]
    pub resume: Option<i64>,
    /// The results database of the run to resume.
    #[arg(long, default_value = DEFAULT_DB_PATH, value_name = "PATH")]
    pub db: PathBuf,
    /// Run a plan saved as TOML (by the launcher, or written by hand: docs/output.md), with the
    /// same validation as the command it holds; its --db says where the run is stored.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["resume", "db"])]
    pub plan: Option<PathBuf>,
    /// Show the run of --plan or --resume in the live terminal view (workloads take --live).
    #[arg(long)]
    pub live: bool,
}

#[derive(Subcommand, Debug)]
pub enum SweepWorkload {
    /// The flags of `iopath net stream`, stored as a run.
    #[command(after_help = super::examples::SWEEP_NET_STREAM)]
    NetStream(Box<super::net::StreamArgs>),
    /// The flags of `iopath net rr`, stored as a run.
    #[command(after_help = super::examples::SWEEP_NET_RR)]
    NetRr(Box<super::rr::RrArgs>),
    /// The flags of `iopath net crr`, stored as a run.
    #[command(after_help = super::examples::SWEEP_NET_CRR)]
    NetCrr(Box<super::rr::CrrArgs>),
    /// The flags of `iopath net records`, stored as a run.
    #[command(after_help = super::examples::SWEEP_NET_RECORDS)]
    NetRecords(Box<super::records::RecordsArgs>),
    /// The flags of `iopath servers`, stored as a run.
    #[command(after_help = super::examples::SWEEP_SERVERS)]
    Servers(super::servers::ServersArgs),
    /// The subcommands and flags of `iopath micro`, stored as a run.
    #[command(after_help = super::examples::SWEEP_MICRO)]
    Micro(super::micro::MicroArgs),
    /// The deterministic test workload (hidden).
    #[command(hide = true)]
    Fake(super::fake::FakeArgs),
}

#[derive(Args, Debug)]
pub struct QuickArgs {
    /// Results database.
    #[arg(long, default_value = DEFAULT_DB_PATH)]
    pub db: PathBuf,
    /// Where to write the HTML report (default: report-<run>.html beside the database).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// A name for the run.
    #[arg(long, default_value = "quick")]
    pub name: String,
}

/// The grid `iopath quick` runs: every send mode x 5 sizes, one thread, 5 repetitions (the
/// fewest with which a crossover or a `compare` of two quick runs can reach p < 0.05 after
/// corrections), short cells, sized to finish within a minute on a small machine; then the
/// 64 B ping-pong of `net rr` (QUICK_RR), 5 repetitions each. The sizes span the copy/zero-copy
/// thresholds others quote (about 3 KB for io_uring, about 10 KB for MSG_ZEROCOPY).
pub const QUICK_MODES: &str = "two-copy,one-copy,zero-copy,uring,uring-zc,sendfile,splice";
pub const QUICK_SIZES: &str = "1K,4K,16K,64K,256K";
pub const QUICK_THREADS: &str = "1";
pub const QUICK_REPS: u32 = 5;
pub const QUICK_DURATION: &str = "200ms";
pub const QUICK_WARMUP: &str = "50ms";
/// The `net rr` flags of quick's request/response cases.
pub const QUICK_RR: [&str; 8] = [
    "--mode",
    "two-copy,one-copy,zero-copy",
    "--request-size",
    "64",
    "--response-size",
    "64",
    "--inflight",
    "1",
];

/// The preset plan of `iopath quick`: the `net stream` flags a user would type for it.
pub fn quick_plan(name: &str) -> anyhow::Result<Plan> {
    use clap::Parser;
    let reps = QUICK_REPS.to_string();
    let argv = [
        "stream",
        "--mode",
        QUICK_MODES,
        "--size",
        QUICK_SIZES,
        "--threads",
        QUICK_THREADS,
        "--duration",
        QUICK_DURATION,
        "--warmup",
        QUICK_WARMUP,
        "--reps",
        &reps,
        "--warmup-cell",
        "--name",
        name,
    ];
    #[derive(Parser)]
    struct Preset {
        #[command(subcommand)]
        net: super::net::NetCommand,
    }
    let preset = Preset::try_parse_from(std::iter::once("quick").chain(argv)).map_err(|e| usage(e.to_string()))?;
    let mut plan = match preset.net {
        super::net::NetCommand::Stream(args) => Plan::try_from(args.as_ref())?,
        _ => unreachable!("the preset names net stream"),
    };
    // The same run measures latency too: 64 B ping-pong, parsed by `net rr`'s own flags.
    let rr_argv = ["rr"]
        .into_iter()
        .chain(QUICK_RR)
        .chain(["--duration", QUICK_DURATION, "--warmup", QUICK_WARMUP]);
    let rr = Preset::try_parse_from(std::iter::once("quick").chain(rr_argv)).map_err(|e| usage(e.to_string()))?;
    match rr.net {
        super::net::NetCommand::Rr(args) => plan.cases.extend(Plan::try_from(args.as_ref())?.cases),
        _ => unreachable!("the preset names net rr"),
    }
    Ok(plan)
}

/// Store errors are the user pointing at the wrong file or run: exit code 2.
pub(super) fn store_error(err: anyhow::Error) -> anyhow::Error {
    if err.downcast_ref::<StoreError>().is_some() {
        usage(err.to_string())
    } else {
        err
    }
}

/// The command line stored with a run started from a plan file: the plan's own command.
static COMMAND_LINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Store `line` as the command line of the run this process starts (plan files, the launcher).
pub(super) fn set_command_line(line: String) {
    let _ = COMMAND_LINE.set(line);
}

pub(super) fn command_line() -> String {
    if let Some(line) = COMMAND_LINE.get() {
        return line.clone();
    }
    std::env::args()
        .map(|a| {
            if a.contains(char::is_whitespace) || a.is_empty() {
                format!("'{a}'")
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn open_for_writing(db: &Path) -> anyhow::Result<Store> {
    Store::create_or_open(db).map_err(|e| {
        if e.downcast_ref::<StoreError>().is_some() {
            store_error(e)
        } else {
            usage(format!("--db {}: {e:#}", db.display()))
        }
    })
}

fn print_crossovers(rows: &[report::crossover::CrossoverRow]) -> std::io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut table = Table::new(&[
        "A",
        "vs B",
        "threads",
        "A has higher throughput",
        "B significantly ahead at",
    ]);
    for r in rows {
        table.row(vec![
            r.a.to_string(),
            r.b.to_string(),
            r.threads.to_string(),
            r.result.describe(),
            r.b_ahead_text(),
        ]);
    }
    crate::say!("Crossover sizes (higher median, Mann-Whitney U p < 0.05 over the repetitions):")?;
    super::output::out(table.render())
}

fn print_records_crossovers(rows: &[report::crossover::RecordsCrossoverRow]) -> std::io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut table = Table::new(&[
        "A",
        "vs B",
        "setting",
        "A sends more payload",
        "B significantly ahead at",
    ]);
    for r in rows {
        table.row(vec![
            r.a.to_string(),
            r.b.to_string(),
            r.setting(),
            r.describe(),
            r.b_ahead_text(),
        ]);
    }
    crate::say!("Crossover records counts (higher median payload throughput, Mann-Whitney U p < 0.05):")?;
    super::output::out(table.render())
}

/// The findings, caveats and grouped warnings: what the run says, after its tables.
fn print_findings(analysis: &report::Analysis) -> std::io::Result<()> {
    crate::say!("Findings:")?;
    for line in analysis.findings.lines() {
        crate::say!("  {line}")?;
    }
    for c in &analysis.caveats {
        crate::say!("caveat: {c}")?;
    }
    for g in &analysis.warnings {
        crate::say!("warning: {}", g.line())?;
    }
    // The full lists are in the report; six cases a line are enough here.
    for n in report::cells::noise_lines(&analysis.cells, 6) {
        crate::say!("noise: {n}")?;
    }
    Ok(())
}

fn print_cells(cells: &[report::cells::CellSummary]) -> std::io::Result<()> {
    let mut table = Table::new(&["case", "ok", "failed", "metric", "median", "95% CI of median", "CV"]);
    for c in cells {
        let metric = c.headline_metric();
        let s = metric.and_then(|m| m.summary.as_ref());
        table.row(vec![
            c.label.clone(),
            c.ok.to_string(),
            c.failures.len().to_string(),
            metric.map(|m| m.name.clone()).unwrap_or_else(|| "n/a".into()),
            fmt_num(s.map(|s| s.median)),
            s.map(|s| s.ci_text(|v| fmt_num(Some(v))))
                .unwrap_or_else(|| "n/a".into()),
            s.map(|s| s.cv_text()).unwrap_or_else(|| "n/a".into()),
        ]);
    }
    super::output::out(table.render())
}

/// The workload's plan and its flags shared with the direct command.
pub(super) fn plan_of(workload: &SweepWorkload) -> anyhow::Result<(Plan, &RunFlags)> {
    Ok(match workload {
        SweepWorkload::NetStream(a) => (Plan::try_from(a.as_ref())?, &a.run),
        SweepWorkload::NetRr(a) => (Plan::try_from(a.as_ref())?, &a.run),
        SweepWorkload::NetCrr(a) => (Plan::try_from(a.as_ref())?, &a.args.run),
        SweepWorkload::NetRecords(a) => (Plan::try_from(a.as_ref())?, &a.run),
        SweepWorkload::Servers(a) => (Plan::try_from(a)?, &a.run),
        SweepWorkload::Micro(a) => {
            let Some((benches, flags)) = a.command.benches() else {
                return Err(usage(
                    "sweep micro needs a benchmark, e.g. `iopath sweep micro memlat` (see `iopath micro list`)",
                ));
            };
            (super::micro::micro_plan(&benches, flags)?, &flags.run)
        }
        SweepWorkload::Fake(a) => (Plan::try_from(a)?, &a.run),
    })
}

pub fn run_sweep(args: SweepArgs) -> anyhow::Result<()> {
    let mut args = args;
    if let Some(path) = args.plan.take() {
        let (file, workload) = super::planfile::PlanFile::load(&path)?;
        set_command_line(file.command_line());
        args.workload = Some(workload);
    }
    let (executed, flags) =
        match (&args.workload, args.resume) {
            (Some(workload), _) => {
                let (plan, flags) = plan_of(workload)?;
                let db = flags.db.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_DB_PATH));
                let mut outputs = run::Outputs::from(flags);
                outputs.live |= args.live;
                outputs.detectable = true;
                let executed = run::execute(&plan, Destination::NewRun(&db), outputs)?;
                (executed, Some(flags))
            }
            (None, Some(id)) => {
                let plan = run::resume_plan(&args.db, id)?;
                (
                    run::execute(
                        &plan,
                        Destination::Resume(&args.db, id),
                        run::Outputs {
                            live: args.live,
                            ..Default::default()
                        },
                    )?,
                    None,
                )
            }
            (None, None) => return Err(usage(
                "sweep needs a workload (net-stream, net-rr, net-crr, net-records, servers, micro), --plan or --resume",
            )),
        };
    let (Some(db), Some(run_id)) = (executed.db.clone(), executed.run_id) else {
        anyhow::bail!("the sweep stored no run");
    };
    if let Some(flags) = flags.filter(|f| f.json || f.csv || f.json_stream) {
        run::print_records(flags, &executed.records, |_| String::new())?;
        return run::conclude(&executed);
    }
    let store = Store::open_existing(&db).map_err(store_error)?;
    let data = store.load_run(run_id)?;
    let analysis = report::analyze(&data);
    print_cells(&analysis.cells)?;
    print_crossovers(&analysis.crossovers)?;
    print_records_crossovers(&analysis.records_crossovers)?;
    print_findings(&analysis)?;
    if data.run.repetitions < 3 {
        eprintln!(
            "note: {} repetition(s) per case: no confidence intervals or significance; --reps 5 gives them",
            data.run.repetitions
        );
    }
    run::conclude(&executed)
}

/// The default report path, beside the database: `report-<run>.html` for the default
/// `iopath.db`, `<db name>-report-<run>.html` for any other, so two databases in one folder
/// never overwrite each other's reports.
pub(super) fn default_report_path(db: &Path, run_id: i64) -> PathBuf {
    let stem = db.file_stem().and_then(|s| s.to_str()).unwrap_or("iopath");
    let name = if stem == "iopath" {
        format!("report-{run_id}.html")
    } else {
        format!("{stem}-report-{run_id}.html")
    };
    db.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join(name)
}

pub fn run_quick(args: QuickArgs) -> anyhow::Result<()> {
    let plan = quick_plan(&args.name)?;
    if let Some(out) = &args.output {
        super::results::check_output_path(out, &args.db)?;
    }
    let started = std::time::Instant::now();
    eprintln!(
        "iopath quick: {} cases x {QUICK_REPS} repetitions ({} cells of {QUICK_DURATION}) into {}",
        plan.cases.len(),
        plan.cases.len() * QUICK_REPS as usize,
        args.db.display()
    );
    let outputs = run::Outputs {
        detectable: true,
        ..Default::default()
    };
    let executed = run::execute(&plan, Destination::NewRun(&args.db), outputs)?;
    let Some(run_id) = executed.run_id else {
        anyhow::bail!("quick stored no run");
    };
    let store = Store::open_existing(&args.db).map_err(store_error)?;
    let data = store.load_run(run_id)?;
    let html = args
        .output
        .clone()
        .unwrap_or_else(|| default_report_path(&args.db, run_id));
    let files = report::write_report(&data, &html)?;
    let analysis = report::analyze(&data);
    print_crossovers(&analysis.crossovers)?;
    print_findings(&analysis)?;
    crate::say!(
        "{} cells in {:.0} s{}. Report: {} (charts in {})",
        data.cells.len(),
        started.elapsed().as_secs_f64(),
        if executed.end.interrupted { " (interrupted)" } else { "" },
        files.html.display(),
        files.charts_dir.display()
    )?;
    run::conclude(&executed)
}

#[cfg(test)]
mod tests {
    use super::default_report_path;
    use std::path::Path;

    /// Found in review: two databases in one folder wrote the same report-1.html.
    #[test]
    fn report_names_do_not_collide_across_databases() {
        assert_eq!(
            default_report_path(Path::new("r/iopath.db"), 1),
            Path::new("r/report-1.html")
        );
        assert_eq!(
            default_report_path(Path::new("r/f.db"), 1),
            Path::new("r/f-report-1.html")
        );
        assert_eq!(
            default_report_path(Path::new("q.db"), 2),
            Path::new("./q-report-2.html")
        );
    }

    use super::*;

    #[test]
    fn quick_grid_is_every_send_mode_at_five_sizes_and_three_ping_pongs() {
        let plan = quick_plan("quick").unwrap();
        assert_eq!(plan.cases.len(), crate::case::CopyMode::ALL.len() * 5 + 3);
        assert_eq!(plan.repetitions, QUICK_REPS);
        assert!(plan.warmup_cell);
        let labels: Vec<String> = plan.cases.iter().map(|c| c.label()).collect();
        assert!(labels.contains(&"two-copy 1KiB t1".to_string()), "{labels:?}");
        assert!(labels.contains(&"uring-zc 256KiB t1".to_string()), "{labels:?}");
        assert!(labels.contains(&"splice 4KiB t1".to_string()), "{labels:?}");
        assert!(labels.contains(&"rr one-copy 64B/64B n1 t1".to_string()), "{labels:?}");
        assert_eq!(plan.cases[0].workload(), "net-stream", "the warm-up cell is a stream's");
    }
}
