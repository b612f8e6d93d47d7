//! `iopath runs|report|export|compare`: read the results database, never change it (it is
//! opened read-only; `runs --upgrade` is the one deliberate write). Output files never land on
//! the database or any SQLite file, and are written whole or not at all.

use super::error::usage;
use super::output::Table;
use super::sweep::{default_report_path, store_error};
use crate::observation::Role;
use crate::report::{self, fmt_num};
use crate::store::export::{CsvExporter, Exporter, JsonExporter};
use crate::store::output::{check_output, write_atomic};
use crate::store::{Store, DEFAULT_DB_PATH};
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct RunsArgs {
    /// Results database.
    #[arg(long, default_value = DEFAULT_DB_PATH)]
    pub db: PathBuf,
    /// Bring a database written by an older iopath up to date first (the only time a reading
    /// command writes to the database).
    #[arg(long)]
    pub upgrade: bool,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The run (default: the newest).
    pub run_id: Option<i64>,
    /// The HTML file to write; charts go into `<name>-charts/` beside it
    /// (default: report-<run>.html beside the database).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Results database.
    #[arg(long, default_value = DEFAULT_DB_PATH)]
    pub db: PathBuf,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ExportFormat {
    Csv,
    Json,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The run (default: the newest).
    pub run_id: Option<i64>,
    #[arg(long, value_enum, default_value = "csv")]
    pub format: ExportFormat,
    /// Write to this file instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Results database.
    #[arg(long, default_value = DEFAULT_DB_PATH)]
    pub db: PathBuf,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The baseline run.
    pub run_a: i64,
    /// The run compared with it.
    pub run_b: i64,
    /// The metric to compare as role.name (e.g. client.cycles_per_byte); default: each
    /// workload's headline (throughput_gbps for net-stream).
    #[arg(long)]
    pub metric: Option<String>,
    /// Results database.
    #[arg(long, default_value = DEFAULT_DB_PATH)]
    pub db: PathBuf,
}

fn open(db: &Path) -> anyhow::Result<Store> {
    Store::open_existing(db).map_err(store_error)
}

fn pick_run(store: &Store, id: Option<i64>) -> anyhow::Result<i64> {
    match id {
        Some(id) => store.run(id).map(|r| r.id).map_err(store_error),
        None => store.latest_run_id().map_err(store_error),
    }
}

/// Refuse an output path that is the database `db` (or any SQLite file), or that we cannot
/// write, before doing any work: exit code 2.
pub fn check_output_path(path: &Path, db: &Path) -> anyhow::Result<()> {
    check_output(path, db).map_err(store_error)?;
    check_writable(path)
}

/// Refuse an output path we cannot write before doing any work: exit code 2.
pub fn check_writable(path: &Path) -> anyhow::Result<()> {
    if path.is_dir() {
        return Err(usage(format!(
            "output {} is a folder; give a file name such as report.html",
            path.display()
        )));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(usage(format!(
            "cannot write {}: the folder {} does not exist",
            path.display(),
            dir.display()
        )));
    }
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        // A device or FIFO (/dev/stdout) is written in place, not created in its folder.
        return Ok(());
    }
    let probe = dir.join(format!(".iopath-write-test-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(usage(format!("cannot write into {}: {e}", dir.display()))),
    }
}

pub fn run_runs(args: RunsArgs) -> anyhow::Result<()> {
    if args.upgrade {
        drop(Store::upgrade(&args.db).map_err(store_error)?);
    }
    let store = open(&args.db)?;
    let runs = store.list_runs().map_err(store_error)?;
    if runs.is_empty() {
        crate::say!("no runs in {}", args.db.display())?;
        return Ok(());
    }
    let mut table = Table::new(&[
        "id",
        "name",
        "started (UTC)",
        "status",
        "cells ok",
        "failed",
        "planned",
        "command",
    ]);
    for r in runs {
        table.row(vec![
            r.id.to_string(),
            r.name.clone().unwrap_or_default(),
            r.started_at.clone(),
            r.status.to_string(),
            r.cells_ok.to_string(),
            r.cells_failed.to_string(),
            r.cells_planned().to_string(),
            r.command_line.clone(),
        ]);
    }
    super::output::out(table.render())?;
    Ok(())
}

pub fn run_report(args: ReportArgs) -> anyhow::Result<()> {
    let store = open(&args.db)?;
    let id = pick_run(&store, args.run_id)?;
    let html = args.output.clone().unwrap_or_else(|| default_report_path(&args.db, id));
    check_output_path(&html, &args.db)?;
    let data = store.load_run(id).map_err(store_error)?;
    let files = report::write_report(&data, &html)?;
    crate::say!(
        "report of run {id}: {} ({} chart files in {})",
        files.html.display(),
        files.chart_files.len(),
        files.charts_dir.display()
    )?;
    Ok(())
}

pub fn run_export(args: ExportArgs) -> anyhow::Result<()> {
    let store = open(&args.db)?;
    let id = pick_run(&store, args.run_id)?;
    if let Some(out) = &args.output {
        check_output_path(out, &args.db)?;
    }
    let records = store.load_run(id).map_err(store_error)?.records();
    let bytes = match args.format {
        ExportFormat::Csv => CsvExporter.serialize(&records)?,
        ExportFormat::Json => JsonExporter.serialize(&records)?,
    };
    match &args.output {
        Some(path) => write_atomic(path, &bytes).map_err(store_error)?,
        None => super::output::out(String::from_utf8_lossy(&bytes))?,
    }
    Ok(())
}

fn parse_metric(text: &str) -> anyhow::Result<(Role, String)> {
    let help = "accepted: role.name with role client, server or system, e.g. system.throughput_gbps";
    let (role, name) = text
        .split_once('.')
        .ok_or_else(|| usage(format!("--metric '{text}' has no role ({help})")))?;
    let role = match role {
        "client" => Role::Client,
        "server" => Role::Server,
        "system" => Role::System,
        other => return Err(usage(format!("--metric: unknown role '{other}' ({help})"))),
    };
    if name.is_empty() {
        return Err(usage(format!("--metric '{text}' has no metric name ({help})")));
    }
    Ok((role, name.to_string()))
}

pub fn run_compare(args: CompareArgs) -> anyhow::Result<()> {
    let metric = args.metric.as_deref().map(parse_metric).transpose()?;
    let store = open(&args.db)?;
    let a = store
        .load_run(pick_run(&store, Some(args.run_a))?)
        .map_err(store_error)?;
    let b = store
        .load_run(pick_run(&store, Some(args.run_b))?)
        .map_err(store_error)?;
    let cells_a = report::cells::summarize_run(&a);
    let cells_b = report::cells::summarize_run(&b);
    if let Some((role, name)) = &metric {
        let held = |cells: &[report::cells::CellSummary]| cells.iter().any(|c| c.metric(name, *role).is_some());
        if !held(&cells_a) || !held(&cells_b) {
            let mut known: Vec<String> = cells_a
                .iter()
                .flat_map(|c| c.metrics.iter().map(|m| format!("{}.{}", m.role, m.name)))
                .collect();
            known.sort();
            known.dedup();
            return Err(usage(format!(
                "--metric {role}.{name} is not in both runs (run {} has: {})",
                args.run_a,
                known.join(", ")
            )));
        }
    }
    let comparison = report::compare::compare_cells(&cells_a, &cells_b, metric.as_ref().map(|(r, n)| (*r, n.as_str())));
    let mut table = Table::new(&["cell", "metric", "median A", "median B", "change", "p", "verdict"]);
    for r in &comparison.rows {
        table.row(vec![
            r.label.clone(),
            r.metric.clone(),
            fmt_num(Some(r.median_a)),
            fmt_num(Some(r.median_b)),
            format!("{:+.1}%", r.change * 100.0),
            format!("{:.3}", r.p),
            r.verdict(),
        ]);
    }
    crate::say!("run {} (A) vs run {} (B)", args.run_a, args.run_b)?;
    if !comparison.rows.is_empty() {
        super::output::out(table.render())?;
    }
    crate::say!("{}", comparison.summary_line())?;
    Ok(())
}
