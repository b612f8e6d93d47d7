//! `iopath sweep` and `iopath quick`: flags (stage one) validated into a grid of Cases (stage
//! two), run cell by cell into the results database, then the crossover table.

use super::error::usage;
use super::output::Table;
use super::values::{
    parse_count_list, parse_cpu_list, parse_duration, parse_duration_or_zero, parse_list, parse_size_list,
};
use crate::case::{Case, CopyMode, Endpoint, StreamCase};
use crate::report::{self, fmt_num};
use crate::store::{NewRun, RunRecorder, RunStatus, Store, StoreError, DEFAULT_DB_PATH};
use crate::sweep::{environment::RunEnvironment, order_cells, progress::Progress, run_cells, RunOptions};
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The workload to sweep: net-stream, servers or micro. Not needed with --resume.
    #[arg(required_unless_present = "resume", conflicts_with = "resume")]
    pub workload: Option<String>,
    /// net-stream: copy modes, comma-separated (default two-copy,one-copy,zero-copy).
    #[arg(long, conflicts_with = "resume")]
    pub mode: Option<String>,
    /// net-stream: message sizes, a list (64,4K) or a range of powers of two (default 1K..1M).
    #[arg(long, conflicts_with = "resume")]
    pub size: Option<String>,
    /// net-stream: client thread counts, a list (1,2,4,8) or a range (default 1).
    #[arg(long, conflicts_with = "resume")]
    pub threads: Option<String>,
    /// net-stream: separately allocated fields per message (default 8).
    #[arg(long, conflicts_with = "resume")]
    pub fields: Option<usize>,
    /// net-stream: check every received byte against the sender's pattern.
    #[arg(long, conflicts_with = "resume")]
    pub verify: bool,
    /// servers: models, comma-separated, or all (default all).
    #[arg(long, conflicts_with = "resume")]
    pub model: Option<String>,
    /// servers: what clients ask for, echo:<bytes> or procs:<k>, comma-separated (default echo:64).
    #[arg(long, conflicts_with = "resume")]
    pub request: Option<String>,
    /// servers: concurrent client connections, e.g. 1,10,100 (default 1,10,100).
    #[arg(long, conflicts_with = "resume")]
    pub clients: Option<String>,
    /// servers: load-generator threads (default 1).
    #[arg(long, conflicts_with = "resume")]
    pub client_threads: Option<usize>,
    /// servers: workers of the pool model (default 4).
    #[arg(long, conflicts_with = "resume")]
    pub pool_size: Option<usize>,
    /// net-stream and servers: count with getrusage only, no perf events (they cost time at every
    /// context switch).
    #[arg(long, conflicts_with = "resume")]
    pub no_perf: bool,
    /// micro: benchmarks, comma-separated, as `iopath micro list` names them (e.g. memlat).
    #[arg(long, conflicts_with = "resume")]
    pub bench: Option<String>,
    /// micro: the short variant of each benchmark (fewer samples, smaller sizes).
    #[arg(long, conflicts_with = "resume")]
    pub small: bool,
    /// Repetitions of every case.
    #[arg(long, default_value_t = 5, conflicts_with = "resume")]
    pub reps: u32,
    /// net-stream and servers: measured time per cell (default 3s).
    #[arg(long, conflicts_with = "resume")]
    pub duration: Option<String>,
    /// net-stream and servers: warm-up inside every cell before the window, 0 for none (default 500ms).
    #[arg(long, conflicts_with = "resume")]
    pub warmup: Option<String>,
    /// Run the cells in a random order (fixed by --seed) so drift does not line up with the grid.
    #[arg(long, conflicts_with = "resume")]
    pub shuffle: bool,
    /// Seed for --shuffle (default: from the clock; stored with the run).
    #[arg(long, conflicts_with = "resume")]
    pub seed: Option<u64>,
    /// net-stream and servers: CPUs for the client threads (e.g. 0 or 0-1); default: the scheduler's choice.
    #[arg(long, conflicts_with = "resume")]
    pub client_cpus: Option<String>,
    /// net-stream and servers: CPUs for the server threads.
    #[arg(long, conflicts_with = "resume")]
    pub server_cpus: Option<String>,
    /// Skip the discarded warm-up cell at the start of the sweep.
    #[arg(long, conflicts_with = "resume")]
    pub no_warmup_cell: bool,
    /// A name for the run, shown by `iopath runs` and in the report.
    #[arg(long, conflicts_with = "resume")]
    pub name: Option<String>,
    /// Results database.
    #[arg(long, default_value = DEFAULT_DB_PATH)]
    pub db: PathBuf,
    /// Finish an interrupted or killed run: runs only the cells it is missing (and failed ones).
    #[arg(long, value_name = "RUN_ID")]
    pub resume: Option<i64>,
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

/// The grid `iopath quick` runs: 3 modes x 6 sizes x 2 thread counts x 3 repetitions, short
/// cells, sized to finish within 90 s on a small machine.
pub const QUICK_SIZES: &str = "1K,4K,16K,64K,256K,1M";
pub const QUICK_THREADS: &str = "1,2";
pub const QUICK_REPS: u32 = 3;
pub const QUICK_DURATION: &str = "300ms";
pub const QUICK_WARMUP: &str = "100ms";

/// A validated stream grid.
struct StreamGrid {
    modes: Vec<CopyMode>,
    sizes: Vec<u64>,
    threads: Vec<usize>,
    fields: usize,
    duration_ms: u64,
    warmup_ms: u64,
    client_cpus: Option<Vec<usize>>,
    server_cpus: Option<Vec<usize>>,
    verify: bool,
    perf: bool,
}

impl StreamGrid {
    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for &threads in &self.threads {
            for &mode in &self.modes {
                for &size in &self.sizes {
                    cases.push(Case::NetStream(StreamCase {
                        mode,
                        size,
                        fields: self.fields,
                        threads,
                        duration_ms: self.duration_ms,
                        warmup_ms: self.warmup_ms,
                        client_cpus: self.client_cpus.clone().map(Into::into),
                        server_cpus: self.server_cpus.clone().map(Into::into),
                        verify: self.verify,
                        endpoint: Endpoint::Loopback { port: 0 },
                        perf: self.perf,
                    }));
                }
            }
        }
        cases
    }
}

fn flag<T>(name: &str, parsed: Result<T, String>) -> anyhow::Result<T> {
    parsed.map_err(|e| usage(format!("--{name}: {e}")))
}

#[allow(clippy::too_many_arguments)]
fn stream_grid(
    mode: &str,
    size: &str,
    threads: &str,
    fields: usize,
    duration: &str,
    warmup: &str,
    client_cpus: Option<&str>,
    server_cpus: Option<&str>,
    verify: bool,
) -> anyhow::Result<StreamGrid> {
    let modes: Vec<CopyMode> = flag("mode", parse_list(mode))?;
    let sizes = flag("size", parse_size_list(size))?;
    if let Some(big) = sizes.iter().find(|&&s| s > 1 << 30) {
        return Err(usage(format!(
            "--size: {big} bytes is above the 1GiB limit per message"
        )));
    }
    let threads = flag("threads", parse_count_list(threads))?;
    if let Some(t) = threads.iter().find(|&&t| t > 256) {
        return Err(usage(format!("--threads: {t} is above the limit of 256")));
    }
    if fields == 0 || fields > 1024 {
        return Err(usage(format!(
            "--fields: {fields} is out of range (accepted: 1 to 1024)"
        )));
    }
    let duration = flag("duration", parse_duration(duration))?;
    let warmup = flag("warmup", parse_duration_or_zero(warmup))?;
    let cpus = |name: &str, text: Option<&str>| -> anyhow::Result<Option<Vec<usize>>> {
        text.map(|t| flag(name, parse_cpu_list(t))).transpose()
    };
    Ok(StreamGrid {
        modes,
        sizes,
        threads,
        fields,
        duration_ms: (duration.as_millis() as u64).max(1),
        warmup_ms: warmup.as_millis() as u64,
        client_cpus: cpus("client-cpus", client_cpus)?,
        server_cpus: cpus("server-cpus", server_cpus)?,
        verify,
        perf: true,
    })
}

/// Store errors are the user pointing at the wrong file or run: exit code 2.
pub(super) fn store_error(err: anyhow::Error) -> anyhow::Error {
    if err.downcast_ref::<StoreError>().is_some() {
        usage(err.to_string())
    } else {
        err
    }
}

pub(super) fn command_line() -> String {
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

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
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

/// Run the missing cells of `run_id`, then close the run. Returns whether it was interrupted.
fn execute_run(store: &mut Store, run_id: i64) -> anyhow::Result<bool> {
    let run = store.run(run_id).map_err(store_error)?;
    let cases = store.cases(run_id)?;
    let done = store.done_cells(run_id)?;
    let cells = order_cells(cases.len(), run.repetitions, &done, run.shuffle, run.seed);
    let stop = crate::sys::signal::install_stop_handler();
    if !done.is_empty() {
        eprintln!(
            "run {run_id}: {} cells already stored, {} to run",
            done.len(),
            cells.len()
        );
    }
    store.set_run_status(run_id, RunStatus::Running)?;
    let progress = Progress::new(cells.len());
    let options = RunOptions {
        warmup_cell: run.warmup_cell,
    };
    let end = {
        let mut recorder = RunRecorder { store, run_id };
        run_cells(
            &cases,
            &cells,
            &mut |case| crate::sweep::execute_case(case, stop),
            &mut recorder,
            stop,
            options,
            &progress,
        )?
    };
    store.set_run_status(
        run_id,
        if end.interrupted {
            RunStatus::Interrupted
        } else {
            RunStatus::Complete
        },
    )?;
    if end.failed > 0 {
        eprintln!(
            "{} cells failed; their errors are stored (see the report or `iopath export`)",
            end.failed
        );
    }
    if end.interrupted {
        eprintln!(
            "stopped after {} cells; everything so far is saved. Continue with: iopath sweep --resume {run_id} --db {}",
            end.recorded,
            store.path().display()
        );
    }
    Ok(end.interrupted)
}

fn print_crossovers(rows: &[report::crossover::CrossoverRow]) {
    if rows.is_empty() {
        return;
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
    println!("Crossover sizes (non-overlapping 95% CIs):");
    print!("{}", table.render());
}

fn print_cells(cells: &[report::cells::CellSummary]) {
    let mut table = Table::new(&["cell", "ok", "failed", "metric", "median", "95% CI", "CV"]);
    for c in cells {
        let metric = c.headline_metric();
        let s = metric.and_then(|m| m.summary.as_ref());
        table.row(vec![
            c.label.clone(),
            c.ok.to_string(),
            c.failures.len().to_string(),
            metric.map(|m| m.name.clone()).unwrap_or_else(|| "n/a".into()),
            fmt_num(s.map(|s| s.median)),
            s.map(|s| format!("{}..{}", fmt_num(Some(s.ci95_low)), fmt_num(Some(s.ci95_high))))
                .unwrap_or_else(|| "n/a".into()),
            s.map(|s| format!("{:.1}%", s.cv * 100.0))
                .unwrap_or_else(|| "n/a".into()),
        ]);
    }
    print!("{}", table.render());
}

fn new_run(name: Option<String>, reps: u32, shuffle: bool, seed: u64, warmup_cell: bool, cases: Vec<Case>) -> NewRun {
    NewRun {
        name,
        command_line: command_line(),
        repetitions: reps,
        shuffle,
        seed,
        warmup_cell,
        machine_json: serde_json::to_string(&crate::sysinfo::describe()).unwrap_or_else(|_| "{}".into()),
        environment_json: serde_json::to_string(&RunEnvironment::capture("lo")).unwrap_or_else(|_| "{}".into()),
        cases,
    }
}

/// Refuse flags that belong to another workload, naming the ones that apply.
fn refuse_foreign(workload: &str, given: &[(&str, bool)]) -> anyhow::Result<()> {
    if let Some((flag, _)) = given.iter().find(|(_, present)| *present) {
        return Err(usage(format!(
            "--{flag} does not apply to {workload} sweeps (see iopath sweep --help)"
        )));
    }
    Ok(())
}

fn stream_cases(args: &SweepArgs) -> anyhow::Result<Vec<Case>> {
    refuse_foreign(
        "net-stream",
        &[
            ("model", args.model.is_some()),
            ("request", args.request.is_some()),
            ("clients", args.clients.is_some()),
            ("client-threads", args.client_threads.is_some()),
            ("pool-size", args.pool_size.is_some()),
            ("bench", args.bench.is_some()),
            ("small", args.small),
        ],
    )?;
    let mut grid = stream_grid(
        args.mode.as_deref().unwrap_or("two-copy,one-copy,zero-copy"),
        args.size.as_deref().unwrap_or("1K..1M"),
        args.threads.as_deref().unwrap_or("1"),
        args.fields.unwrap_or(8),
        args.duration.as_deref().unwrap_or("3s"),
        args.warmup.as_deref().unwrap_or("500ms"),
        args.client_cpus.as_deref(),
        args.server_cpus.as_deref(),
        args.verify,
    )?;
    grid.perf = !args.no_perf;
    Ok(grid.cases())
}

fn servers_cases(args: &SweepArgs) -> anyhow::Result<Vec<Case>> {
    use crate::servers::{Model, Request};
    refuse_foreign(
        "servers",
        &[
            ("mode", args.mode.is_some()),
            ("size", args.size.is_some()),
            ("threads", args.threads.is_some()),
            ("fields", args.fields.is_some()),
            ("verify", args.verify),
            ("bench", args.bench.is_some()),
            ("small", args.small),
        ],
    )?;
    let models: Vec<Model> = match args.model.as_deref().unwrap_or("all").trim() {
        "all" => Model::ALL.to_vec(),
        text => flag("model", parse_list(text))?,
    };
    let requests: Vec<Request> = flag("request", parse_list(args.request.as_deref().unwrap_or("echo:64")))?;
    let clients = flag(
        "clients",
        parse_count_list(args.clients.as_deref().unwrap_or("1,10,100")),
    )?;
    if let Some(c) = clients.iter().find(|&&c| c > 20_000) {
        return Err(usage(format!("--clients: {c} is above the limit of 20000 connections")));
    }
    let client_threads = args.client_threads.unwrap_or(1);
    if !(1..=64).contains(&client_threads) {
        return Err(usage(format!(
            "--client-threads: {client_threads} is out of range (accepted: 1 to 64)"
        )));
    }
    let pool_size = args.pool_size.unwrap_or(4);
    if !(1..=1024).contains(&pool_size) {
        return Err(usage(format!(
            "--pool-size: {pool_size} is out of range (accepted: 1 to 1024)"
        )));
    }
    let duration = flag("duration", parse_duration(args.duration.as_deref().unwrap_or("3s")))?;
    let warmup = flag(
        "warmup",
        parse_duration_or_zero(args.warmup.as_deref().unwrap_or("500ms")),
    )?;
    let cpus = |name: &str, text: &Option<String>| -> anyhow::Result<Option<crate::case::CpuList>> {
        match text {
            Some(t) => flag(name, parse_cpu_list(t)).map(|c| Some(c.into())),
            None => Ok(None),
        }
    };
    let (client_cpus, server_cpus) = (
        cpus("client-cpus", &args.client_cpus)?,
        cpus("server-cpus", &args.server_cpus)?,
    );
    let mut cases = Vec::new();
    for request in &requests {
        for model in &models {
            for &c in &clients {
                cases.push(Case::Servers(crate::case::ServersCase {
                    model: *model,
                    request: *request,
                    clients: c,
                    duration_ms: (duration.as_millis() as u64).max(1),
                    warmup_ms: warmup.as_millis() as u64,
                    rate: None,
                    client_threads,
                    pool_size,
                    server_cpus: server_cpus.clone(),
                    client_cpus: client_cpus.clone(),
                    perf: !args.no_perf,
                }));
            }
        }
    }
    Ok(cases)
}

fn micro_cases(args: &SweepArgs) -> anyhow::Result<Vec<Case>> {
    refuse_foreign(
        "micro",
        &[
            ("mode", args.mode.is_some()),
            ("size", args.size.is_some()),
            ("threads", args.threads.is_some()),
            ("fields", args.fields.is_some()),
            ("verify", args.verify),
            ("model", args.model.is_some()),
            ("request", args.request.is_some()),
            ("clients", args.clients.is_some()),
            ("client-threads", args.client_threads.is_some()),
            ("pool-size", args.pool_size.is_some()),
            ("no-perf", args.no_perf),
            ("duration", args.duration.is_some()),
            ("warmup", args.warmup.is_some()),
            ("client-cpus", args.client_cpus.is_some()),
            ("server-cpus", args.server_cpus.is_some()),
        ],
    )?;
    let Some(list) = args.bench.as_deref() else {
        return Err(usage(format!(
            "micro sweeps need --bench (accepted: {})",
            crate::micro::Bench::names()
        )));
    };
    let settings = crate::micro::Settings {
        quick: args.small,
        ..Default::default()
    };
    let mut cases = Vec::new();
    for bench in list.split(',').map(str::trim) {
        let bench: crate::micro::Bench = bench.parse().map_err(|e| usage(format!("--bench: {e}")))?;
        cases.extend(crate::micro::plan(bench, &settings).into_iter().map(Case::Micro));
    }
    Ok(cases)
}

pub fn run_sweep(args: SweepArgs) -> anyhow::Result<()> {
    let run_id = match args.resume {
        Some(id) => {
            let mut store = if args.db.is_file() {
                open_for_writing(&args.db)?
            } else {
                return Err(store_error(StoreError::Missing(args.db.clone()).into()));
            };
            store.run(id).map_err(store_error)?;
            execute_run(&mut store, id)?;
            id
        }
        None => {
            let workload = args.workload.as_deref().unwrap_or_default();
            if args.reps == 0 || args.reps > 1000 {
                return Err(usage(format!(
                    "--reps: {} is out of range (accepted: 1 to 1000)",
                    args.reps
                )));
            }
            let cases = match workload {
                "net-stream" => stream_cases(&args)?,
                "servers" => servers_cases(&args)?,
                "micro" => micro_cases(&args)?,
                other => {
                    return Err(usage(format!(
                        "unknown workload '{other}' for sweep (accepted: net-stream, servers, micro)"
                    )))
                }
            };
            let mut store = open_for_writing(&args.db)?;
            let seed = args.seed.unwrap_or_else(clock_seed);
            let run = new_run(
                args.name.clone(),
                args.reps,
                args.shuffle,
                seed,
                !args.no_warmup_cell,
                cases,
            );
            let id = store.create_run(&run)?;
            eprintln!(
                "run {id}: {} cases x {} repetitions into {}",
                run.cases.len(),
                args.reps,
                args.db.display()
            );
            execute_run(&mut store, id)?;
            id
        }
    };
    let store = Store::open_existing(&args.db).map_err(store_error)?;
    let data = store.load_run(run_id)?;
    let analysis = report::analyze(&data);
    print_cells(&analysis.cells);
    print_crossovers(&analysis.crossovers);
    for n in &analysis.noise {
        eprintln!("warning: {n}");
    }
    println!(
        "run {run_id} stored in {}; write its report with: iopath report {run_id} --db {}",
        args.db.display(),
        args.db.display()
    );
    // A script must be able to tell that cells were lost: exit 1, with everything kept.
    let failed: usize = analysis.cells.iter().map(|c| c.failures.len()).sum();
    if failed > 0 {
        anyhow::bail!(
            "{failed} cells failed (stored with their errors; `iopath sweep --resume {run_id} --db {}` retries them)",
            args.db.display()
        );
    }
    Ok(())
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
    let grid = stream_grid(
        "two-copy,one-copy,zero-copy",
        QUICK_SIZES,
        QUICK_THREADS,
        8,
        QUICK_DURATION,
        QUICK_WARMUP,
        None,
        None,
        false,
    )?;
    if let Some(out) = &args.output {
        super::results::check_writable(out)?;
    }
    let started = std::time::Instant::now();
    let mut store = open_for_writing(&args.db)?;
    let run = new_run(Some(args.name.clone()), QUICK_REPS, false, 0, true, grid.cases());
    let run_id = store.create_run(&run)?;
    eprintln!(
        "iopath quick: run {run_id}, {} cases x {QUICK_REPS} repetitions ({} cells of {QUICK_DURATION}) into {}",
        run.cases.len(),
        run.cases.len() * QUICK_REPS as usize,
        args.db.display()
    );
    let interrupted = execute_run(&mut store, run_id)?;
    let data = store.load_run(run_id)?;
    let html = args
        .output
        .clone()
        .unwrap_or_else(|| default_report_path(&args.db, run_id));
    let files = report::write_report(&data, &html)?;
    let analysis = report::analyze(&data);
    print_crossovers(&analysis.crossovers);
    for c in &analysis.caveats {
        println!("caveat: {c}");
    }
    if !analysis.warnings.is_empty() {
        let kinds: Vec<String> = analysis
            .warnings
            .iter()
            .map(|g| format!("{} ({} cells)", g.kind.title(), g.cells))
            .collect();
        println!("workload warnings: {}: see the report", kinds.join(", "));
    }
    if !analysis.noise.is_empty() {
        println!(
            "{} noise warnings (CV above 5% or outliers): see the report",
            analysis.noise.len()
        );
    }
    println!(
        "{} cells in {:.0} s{}. Report: {} (charts in {})",
        data.cells.len(),
        started.elapsed().as_secs_f64(),
        if interrupted { " (interrupted)" } else { "" },
        files.html.display(),
        files.charts_dir.display()
    );
    Ok(())
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
    fn quick_grid_is_three_modes_six_sizes_two_thread_counts() {
        let grid = stream_grid(
            "two-copy,one-copy,zero-copy",
            QUICK_SIZES,
            QUICK_THREADS,
            8,
            QUICK_DURATION,
            QUICK_WARMUP,
            None,
            None,
            false,
        )
        .unwrap();
        let cases = grid.cases();
        assert_eq!(cases.len(), 3 * 6 * 2);
        assert_eq!(cases[0].label(), "two-copy 1KiB t1");
        assert_eq!(cases.last().unwrap().label(), "zero-copy 1MiB t2");
    }

    #[test]
    fn bad_grid_flags_are_usage_errors() {
        let bad = [
            ("two-copy,bogus", "1K", "1"),
            ("two-copy", "1K..", "1"),
            ("two-copy", "2G", "1"),
            ("two-copy", "1K", "0"),
            ("two-copy", "1K", "1000"),
        ];
        for (mode, size, threads) in bad {
            let err = stream_grid(mode, size, threads, 8, "1s", "0", None, None, false)
                .err()
                .unwrap();
            assert!(
                err.downcast_ref::<crate::cli::UsageError>().is_some(),
                "{mode} {size} {threads}: {err}"
            );
        }
    }
}
