//! `iopath runs|report|export|compare`: read the results database, never change it (it is
//! opened read-only; `runs --upgrade` is the one deliberate write). Output files never land on
//! the database or any SQLite file, and are written whole or not at all.

use super::error::usage;
use super::output::{safe, Table};
use super::quick::default_report_path;
use super::stored::store_error;
use crate::observation::Role;
use crate::report::compare::{CompareOptions, Comparison, Correction, Difference, Gate, Verdict};
use crate::report::{self, fmt_num};
use crate::store::export::{bmf_json, otava_csv, CsvExporter, Exporter, JsonExporter};
use crate::store::output::{check_path, write_atomic, PathUse};
use crate::store::{tidy, RunData, Store};
use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct RunsArgs {
    /// Results database.
    #[arg(long, default_value_os_t = crate::store::default_db_path())]
    pub db: PathBuf,
    /// Bring a database written by an older iopath up to date first (the only time a reading
    /// command writes to the database).
    #[arg(long)]
    pub upgrade: bool,
    /// Print the runs as a JSON array (docs/output.md) instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The run (default: the newest).
    #[arg(value_parser = super::values::parse_run_id)]
    pub run_id: Option<i64>,
    /// The HTML file to write; charts go into `<name>-charts/` beside it
    /// (default: report-<run>.html beside the database).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Results database.
    #[arg(long, default_value_os_t = crate::store::default_db_path())]
    pub db: PathBuf,
    /// A fleet run's matrix only: heat maps (rows: source host, columns: destination) of
    /// median Gbit/s, p99 latency and CPU per byte or transaction of each side, the worst
    /// pairs, and the hosts and links its tests flag (a host: a sign test of its cells against
    /// its partners', Holm over the hosts; the page and the terminal say the noise judged
    /// against and the smallest deviation it can flag); -o names an .html file
    /// (default: matrix-<run>.html beside the database).
    #[arg(long)]
    pub matrix: bool,
    /// The run's data instead of the HTML, on standard output or into -o (`otava`: every run
    /// of the database unless one is named).
    #[arg(long, value_enum, conflicts_with = "matrix")]
    pub format: Option<ExportFormat>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ExportFormat {
    /// Wide CSV: one row per case and repetition, a value and a source column per metric.
    Csv,
    /// The nested JSON records, one per case and repetition.
    Json,
    /// Tidy CSV: one row per value (run, parameters, repetition, role, metric, unit, value,
    /// source), ready for a dataframe pivot.
    Long,
    /// The long rows as NDJSON, after one line with the run, machine and environment.
    Ndjson,
    /// JSON summary of the run: per-cell statistics, crossovers and findings.
    Summary,
    /// CSV for Apache Otava's change-point detection: one row per run and case (every run of
    /// the database unless a run is named), a time column and a column per metric.
    Otava,
    /// Bencher Metric Format JSON: per case, per metric the median and its bounds.
    Bmf,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The run (default: the newest).
    #[arg(value_parser = super::values::parse_run_id)]
    pub run_id: Option<i64>,
    #[arg(long, value_enum, default_value = "csv")]
    pub format: ExportFormat,
    /// Write to this file instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Results database.
    #[arg(long, default_value_os_t = crate::store::default_db_path())]
    pub db: PathBuf,
}

/// The runs of one side named on the command line: `3` (in --db), `1,2,3`, `other.db:3`,
/// `other.db:1,2,3`, `other.db` (its newest run), or `last:3` / `other.db:last:3` (the 3 newest
/// runs of the other side's plan).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRef {
    pub db: Option<PathBuf>,
    pub pick: Pick,
}

/// Which runs of a database a side takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Pick {
    /// The newest run.
    Newest,
    /// These runs, in this order.
    Ids(Vec<i64>),
    /// The N newest complete runs of the other side's plan (older than the other side's runs
    /// when both are in one database).
    Last(usize),
}

/// `1,2,3` into run ids; None when the text is not a list of numbers.
fn parse_id_list(text: &str) -> Option<Result<Vec<i64>, String>> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let ids: Result<Vec<i64>, String> = parts.iter().map(|p| super::values::parse_run_id(p)).collect();
    Some(ids.and_then(|ids| {
        let mut seen = ids.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() == ids.len() {
            Ok(ids)
        } else {
            Err(format!("'{text}' names a run twice"))
        }
    }))
}

fn parse_run_ref(text: &str) -> Result<RunRef, String> {
    if text.is_empty() {
        return Err("empty run: give RUN_ID, RUN_ID,RUN_ID,..., last:N, DB:RUN_ID, DB:last:N or DB".into());
    }
    let (db, rest) = match text.rsplit_once("last:") {
        Some((before, n)) if before.is_empty() || before.ends_with(':') => {
            let n = match n.trim().parse::<usize>() {
                Ok(n) if (1..=1000).contains(&n) => n,
                _ => {
                    return Err(format!(
                        "'{text}': last:N takes a number of runs from 1 to 1000 (e.g. last:3)"
                    ))
                }
            };
            let db = before.strip_suffix(':').filter(|d| !d.is_empty()).map(PathBuf::from);
            if before == ":" {
                return Err(format!("'{text}' names no database before ':'"));
            }
            return Ok(RunRef {
                db,
                pick: Pick::Last(n),
            });
        }
        _ => match text.rsplit_once(':') {
            Some((path, ids)) if parse_id_list(ids).is_some() => (Some(path), ids),
            _ => (None, text),
        },
    };
    if let Some(ids) = parse_id_list(rest) {
        let ids = ids?;
        return match db {
            Some("") => Err(format!("'{text}' names no database before ':'")),
            db => Ok(RunRef {
                db: db.map(PathBuf::from),
                pick: Pick::Ids(ids),
            }),
        };
    }
    Ok(RunRef {
        db: Some(PathBuf::from(text)),
        pick: Pick::Newest,
    })
}

/// `--threshold 3` or `3%`: a percentage from 0 to 100 (exclusive), as a fraction.
pub(super) fn parse_threshold(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%');
    match number.parse::<f64>() {
        Ok(v) if (0.0..100.0).contains(&v) => Ok(v / 100.0),
        _ => Err(format!(
            "'{text}' is not a percentage from 0 to below 100 (e.g. 3 or 2.5%)"
        )),
    }
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The baseline: RUN_ID in --db, several runs as RUN_ID,RUN_ID,... (3 a side let the
    /// verdicts weigh the spread between runs), DB:RUN_ID or DB:RUN_ID,... in another
    /// database, DB for its newest run, or last:N (DB:last:N) for the N newest runs of the
    /// other side's plan.
    #[arg(value_parser = parse_run_ref, value_name = "RUNS_A")]
    pub run_a: RunRef,
    /// The runs compared with it, named the same ways (`iopath compare main.db:last:3
    /// pr.db:1,2,3`).
    #[arg(value_parser = parse_run_ref, value_name = "RUNS_B")]
    pub run_b: RunRef,
    /// The noise band in percent: a change whose whole 95% interval lies within ±THRESHOLD is
    /// "no change"; one beyond it (and significant) is "faster" or "slower".
    #[arg(long, default_value = "3", value_parser = parse_threshold, value_name = "PERCENT")]
    pub threshold: f64,
    /// A gate for CI: exit 1 when the whole run, or any cell, is slower beyond the noise band
    /// and significant against the spread between runs (after the correction for the many
    /// cells compared); exit 3 when it cannot decide: one run a side with nothing known of the
    /// spread between runs and B slower within the runs, or no cell can reach alpha and the
    /// whole-run verdict is inconclusive; exit 0 otherwise. For CI compare 3 runs a side.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// How the cells' p-values are adjusted for the many cells compared: bh
    /// (Benjamini-Hochberg, false discovery rate), holm (any false alarm) or none.
    #[arg(long, default_value = "bh", value_name = "METHOD")]
    pub correction: Correction,
    /// Match cells on every parameter but these (comma-separated parameter names, e.g.
    /// `--ignore fields` to compare 8 fields against 1, `--ignore duration` for 3 s against
    /// 1 s windows).
    #[arg(long, value_delimiter = ',', value_name = "PARAM")]
    pub ignore: Vec<String>,
    /// Print a Markdown summary for a pull-request comment instead of the table.
    #[arg(long, conflicts_with = "json")]
    pub markdown: bool,
    /// Print the comparison as JSON (docs/output.md) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The metric to compare as role.name (e.g. client.cycles_per_byte); default: each
    /// workload's headline (throughput_gbps for net-stream).
    #[arg(long)]
    pub metric: Option<String>,
    /// Results database.
    #[arg(long, default_value_os_t = crate::store::default_db_path())]
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
    check_path(path, PathUse::Output, Some(db)).map_err(store_error)?;
    check_writable(path)
}

/// The checks of [`check_output_path`] for a report's HTML file, and those its charts need: the
/// charts go into `<name>-charts/` beside it, so the HTML must be a file path (not a device or
/// FIFO such as /dev/stdout, beside which a charts folder would be made in /dev), and that
/// folder, when something is already there, must be a folder (never an SQLite file).
pub fn check_report_path(html: &Path, db: &Path) -> anyhow::Result<()> {
    check_path(html, PathUse::Report, Some(db)).map_err(store_error)?;
    check_writable(html)?;
    if std::fs::metadata(html).is_ok_and(|m| !m.is_file()) {
        return Err(usage(format!(
            "a report cannot be written to {}: it is not a file, and the report's charts need a folder beside \
             it; give a file path such as report.html (its charts go into report-charts/)",
            html.display()
        )));
    }
    let stem = html.file_stem().and_then(|s| s.to_str()).unwrap_or("report");
    let charts = html
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join(format!("{stem}-charts"));
    match std::fs::metadata(&charts) {
        Ok(m) if !m.is_dir() => Err(usage(format!(
            "refusing to write the report's charts into {}: it is a file, not a folder; give -o another name",
            charts.display()
        ))),
        _ => Ok(()),
    }
}

/// Refuse an output path we cannot write before doing any work: exit code 2.
pub fn check_writable(path: &Path) -> anyhow::Result<()> {
    if crate::store::output::descriptor_of(path).is_some() {
        // One of this process's descriptors (/dev/stdout, /dev/fd/3): written where it is.
        return Ok(());
    }
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
    // What each run measured, from its cases (`net-stream`, `servers`, `net-stream+servers`).
    let workloads: Vec<Value> = runs
        .iter()
        .map(|r| store.cases(r.id).map(|cases| tidy::workload_of(&cases)))
        .collect::<anyhow::Result<_>>()
        .map_err(store_error)?;
    if args.json {
        let mut list: Vec<Value> = Vec::with_capacity(runs.len());
        for (r, workload) in runs.iter().zip(&workloads) {
            let mut run = tidy::run_json(r);
            run["workload"] = workload.clone();
            // Where a run copied by `iopath merge` came from; null for one measured here.
            run["source"] = match store.provenance(r.id).map_err(store_error)? {
                Some(p) => json!({
                    "file": p.source_file,
                    "run_id": p.source_run_id,
                    "host": p.source_host,
                    "merged_at": p.merged_at,
                }),
                None => Value::Null,
            };
            list.push(run);
        }
        let mut text = serde_json::to_string_pretty(&list)?;
        text.push('\n');
        super::output::out(text)?;
        return Ok(());
    }
    if runs.is_empty() {
        crate::say!("no runs in {}", args.db.display())?;
        return Ok(());
    }
    let mut table = Table::new(&[
        "id",
        "name",
        "workload",
        "started (UTC)",
        "status",
        "cells ok",
        "failed",
        "planned",
        "command",
    ]);
    for (r, workload) in runs.iter().zip(&workloads) {
        table.row(vec![
            r.id.to_string(),
            safe(r.name.as_deref().unwrap_or_default()).into_owned(),
            workload.as_str().unwrap_or("none").to_string(),
            safe(&r.started_at).into_owned(),
            r.status.to_string(),
            r.cells_ok.to_string(),
            r.cells_failed.to_string(),
            r.cells_planned().to_string(),
            safe(&r.command_line).into_owned(),
        ]);
    }
    super::output::out(table.render())?;
    Ok(())
}

pub fn run_report(args: ReportArgs) -> anyhow::Result<()> {
    if args.matrix {
        return run_matrix(args);
    }
    if let Some(format) = args.format {
        return run_export(ExportArgs {
            run_id: args.run_id,
            format,
            output: args.output,
            db: args.db,
        });
    }
    let store = open(&args.db)?;
    let id = pick_run(&store, args.run_id)?;
    let html = args.output.clone().unwrap_or_else(|| default_report_path(&args.db, id));
    check_report_path(&html, &args.db)?;
    let data = store.load_run(id).map_err(store_error)?;
    let files = report::write_report(&data, &html, &args.db)?;
    crate::say!(
        "report of run {id}: {} ({} chart files in {})",
        files.html.display(),
        files.chart_files.len(),
        files.charts_dir.display()
    )?;
    Ok(())
}

/// `report --matrix`: only the matrix of a fleet run, read without loading the run.
fn run_matrix(args: ReportArgs) -> anyhow::Result<()> {
    if let Some(out) = &args.output {
        let html = out
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"));
        if !html {
            return Err(usage(format!(
                "--matrix writes an HTML page (its heat maps go into a folder beside it): give -o a file ending \
                 in .html, not {}",
                out.display()
            )));
        }
    }
    let store = open(&args.db)?;
    let id = match args.run_id {
        Some(id) => store.run_head(id).map(|h| h.id).map_err(store_error)?,
        None => store.latest_run_id().map_err(store_error)?,
    };
    let html = args.output.clone().unwrap_or_else(|| {
        let report = default_report_path(&args.db, id);
        let name = report.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        // `report-<run>.html` or `<db>-report-<run>.html`: the last `report-` is ours.
        let at = name.rfind("report-").unwrap_or(0);
        let (head, tail) = name.split_at(at);
        report.with_file_name(format!("{head}matrix-{}", tail.strip_prefix("report-").unwrap_or(tail)))
    });
    check_report_path(&html, &args.db)?;
    let files = match report::matrix::write_matrix_report(&store, id, &html, &args.db) {
        Err(e) if e.is::<report::matrix::NoFleetCells>() => return Err(usage(e.to_string())),
        other => other.map_err(store_error)?,
    };
    crate::say!(
        "matrix of run {id}: {} ({} hosts; {} hosts and {} links flagged; {} chart files in {})",
        files.html.display(),
        files.hosts,
        files.flagged_hosts,
        files.flagged_links,
        files.chart_files.len(),
        files.charts_dir.display()
    )?;
    for line in &files.summary {
        crate::say!("{line}")?;
    }
    Ok(())
}

pub fn run_export(args: ExportArgs) -> anyhow::Result<()> {
    let store = open(&args.db)?;
    let id = pick_run(&store, args.run_id)?;
    if let Some(out) = &args.output {
        check_output_path(out, &args.db)?;
    }
    let data = store.load_run(id).map_err(store_error)?;
    let bytes = match args.format {
        ExportFormat::Otava => {
            // A history: every run, unless one is named.
            let ids: Vec<i64> = match args.run_id {
                Some(id) => vec![id],
                None => store.list_runs().map_err(store_error)?.iter().map(|r| r.id).collect(),
            };
            let runs = ids
                .into_iter()
                .map(|id| store.load_run(id))
                .collect::<anyhow::Result<Vec<_>>>()
                .map_err(store_error)?;
            otava_csv(&runs)?
        }
        ExportFormat::Bmf => bmf_json(&data)?,
        ExportFormat::Csv => CsvExporter.serialize(&data.records())?,
        ExportFormat::Json => JsonExporter.serialize(&data.records())?,
        ExportFormat::Long => tidy::long_csv(&data)?,
        ExportFormat::Ndjson => tidy::ndjson(&data)?,
        ExportFormat::Summary => {
            let mut out = serde_json::to_vec_pretty(&summary_json(&data, &args.db))?;
            out.push(b'\n');
            out
        }
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
    let role: Role = role
        .parse()
        .map_err(|_| usage(format!("--metric: unknown role '{role}' ({help})")))?;
    if name.is_empty() {
        return Err(usage(format!("--metric '{text}' has no metric name ({help})")));
    }
    Ok((role, name.to_string()))
}

/// `report --format summary`: the run, per-cell statistics of every metric, the crossovers and
/// the findings (caveats, noise, workload warnings), with the schema version.
pub fn summary_json(data: &RunData, db: &Path) -> Value {
    let analysis = report::analyze(data, db);
    let parse = |t: &str| serde_json::from_str::<Value>(t).unwrap_or(Value::Null);
    let cells: Vec<Value> = analysis
        .cells
        .iter()
        .map(|c| {
            let metrics: Vec<Value> = c
                .metrics
                .iter()
                .map(|m| {
                    let s = m.summary.as_ref();
                    json!({
                        "role": m.role.as_str(),
                        "metric": m.name,
                        "unit": m.unit,
                        "source": m.source_text(),
                        "n": m.values.len(),
                        "median": s.map(|s| tidy::number(Some(s.median))),
                        "mean": s.map(|s| s.mean),
                        "stddev": s.and_then(|s| s.stddev),
                        "min": s.map(|s| tidy::number(Some(s.min))),
                        "max": s.map(|s| tidy::number(Some(s.max))),
                        "ci95": s.and_then(|s| s.ci95).map(|(lo, hi)| [lo, hi]),
                        "cv": s.and_then(|s| s.cv),
                        "outliers": s.map(|s| s.outliers.iter().filter_map(|&i| m.values.get(i)).collect::<Vec<_>>()),
                    })
                })
                .collect();
            json!({
                "position": c.position,
                "workload": c.case.workload(),
                "label": c.label,
                "params": tidy::params(&c.case),
                "ok": c.ok,
                "failed": c.failures.len(),
                "failures": c.failures,
                "headline": c.headline_metric().map(|m| format!("{}.{}", m.role, m.name)),
                "metrics": metrics,
                "warnings": c.warnings,
            })
        })
        .collect();
    let crossovers: Vec<Value> = analysis
        .crossovers
        .iter()
        .map(|x| {
            let (from, crosses_at) = x.result.ahead_from();
            json!({
                "a": x.a.to_string(),
                "b": x.b.to_string(),
                "threads": x.threads,
                "a_ahead_from_size_bytes": from,
                "medians_cross_at_bytes": crosses_at.map(|v| v.round() as u64),
                "sizes_compared": x.sizes_compared,
                "b_ahead_size_bytes": x.b_ahead,
                "text": x.result.describe(),
            })
        })
        .collect();
    let records_crossovers: Vec<Value> = analysis
        .records_crossovers
        .iter()
        .map(|x| {
            let (from, crosses_at) = x.result.ahead_from();
            json!({
                "a": x.a.to_string(),
                "b": x.b.to_string(),
                "record_size_bytes": x.record_size,
                "pick": x.pick.to_string(),
                "outstanding": x.outstanding,
                "threads": x.threads,
                "a_ahead_from_records": from,
                "medians_cross_at_records": crosses_at,
                "counts_compared": x.counts_compared,
                "b_ahead_records": x.b_ahead,
                "text": x.describe(),
            })
        })
        .collect();
    json!({
        "type": "summary",
        "schema_version": tidy::SCHEMA_VERSION,
        "run": tidy::run_json(&data.run),
        "machine": parse(&data.run.machine_json),
        "environment": parse(&data.run.environment_json),
        "cells": cells,
        "crossovers": crossovers,
        "records_crossovers": records_crossovers,
        "findings": {
            "caveats": analysis.caveats.iter().map(|(_, text)| text).collect::<Vec<_>>(),
            "noise": analysis.noise,
            "warnings": analysis.warnings.iter().map(|g| json!({
                "kind": g.kind,
                "cells": g.cells,
                "text": g.line(),
            })).collect::<Vec<_>>(),
        },
    })
}

/// The runs of one side, loaded from their own database.
struct Side {
    db: PathBuf,
    runs: Vec<RunData>,
    cells: Vec<Vec<report::cells::CellSummary>>,
}

impl Side {
    fn new(db: PathBuf, runs: Vec<RunData>) -> Side {
        let cells = runs.iter().map(report::cells::summarize_run).collect();
        Side { db, runs, cells }
    }

    /// A side that names its runs (ids or the newest).
    fn load(run: &RunRef, default_db: &Path) -> anyhow::Result<Side> {
        let db = run.db.clone().unwrap_or_else(|| default_db.to_path_buf());
        let store = open(&db)?;
        let ids = match &run.pick {
            Pick::Ids(ids) => ids.clone(),
            _ => vec![pick_run(&store, None)?],
        };
        let runs = ids
            .iter()
            .map(|&id| store.load_run(id).map_err(store_error))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Side::new(db, runs))
    }

    /// A `last:N` side: the N newest complete runs of `other`'s plan in its database (older
    /// than `other`'s runs when the database is the same).
    fn load_last(run: &RunRef, n: usize, other: &Side, default_db: &Path) -> anyhow::Result<Side> {
        let db = run.db.clone().unwrap_or_else(|| default_db.to_path_buf());
        let store = open(&db)?;
        let ids = other.runs_of_its_plan(&store, &db, n, false, &[])?;
        if ids.is_empty() {
            return Err(usage(format!(
                "last:{n}: {} holds no other complete run of the plan of {} (the same cases)",
                db.display(),
                other.name(false)
            )));
        }
        let runs = ids
            .iter()
            .map(|&id| store.load_run(id).map_err(store_error))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Side::new(db, runs))
    }

    fn ids(&self) -> Vec<i64> {
        self.runs.iter().map(|r| r.run.id).collect()
    }

    /// Up to `limit` runs of this side's plan in `store` (at `db`), newest first, never this
    /// side's, older than its newest when the database is its own; on this side's machine
    /// when `same_host`.
    fn runs_of_its_plan(
        &self,
        store: &Store,
        db: &Path,
        limit: usize,
        same_host: bool,
        also_exclude: &[i64],
    ) -> anyhow::Result<Vec<i64>> {
        let first = &self.runs[0];
        let plan = report::compare::plan_keys(&first.cases);
        let same_plan = |cases: &[crate::case::Case]| report::compare::plan_keys(cases) == plan;
        let host = crate::store::history::hostname(&first.run);
        let same_db = db == self.db;
        let mut exclude = also_exclude.to_vec();
        if same_db {
            exclude.extend(self.ids());
        }
        let filter = crate::store::history::PlanFilter {
            same_plan: &same_plan,
            hostname: host.as_deref().filter(|_| same_host),
            before: same_db.then(|| exclude.iter().copied().max()).flatten(),
            exclude: &exclude,
        };
        store.runs_of_plan(&filter, limit).map_err(store_error)
    }

    fn name(&self, same_db: bool) -> String {
        let mut text = match self.runs.as_slice() {
            [one] => {
                let mut t = format!("run {}", one.run.id);
                if let Some(name) = &one.run.name {
                    t.push_str(&format!(" ({})", safe(name)));
                }
                t
            }
            runs => format!(
                "runs {}",
                runs.iter().map(|r| r.run.id.to_string()).collect::<Vec<_>>().join(",")
            ),
        };
        if !same_db {
            text.push_str(&format!(" in {}", self.db.display()));
        }
        text
    }

    fn runs_json(&self) -> Vec<Value> {
        self.runs
            .iter()
            .map(|r| {
                let mut v = tidy::run_json(&r.run);
                v["db"] = json!(self.db.display().to_string());
                v
            })
            .collect()
    }

    fn cell_slices(&self) -> Vec<&[report::cells::CellSummary]> {
        self.cells.iter().map(Vec::as_slice).collect()
    }

    fn contention(&self) -> report::compare::contention::SideContention {
        let runs: Vec<_> = self
            .runs
            .iter()
            .zip(&self.cells)
            .map(|(r, c)| (&r.run, c.as_slice()))
            .collect();
        report::compare::contention::side(&runs)
    }
}

/// Both sides, `last:N` resolved against the side that names its runs.
fn load_sides(args: &CompareArgs) -> anyhow::Result<(Side, Side)> {
    match (&args.run_a.pick, &args.run_b.pick) {
        (Pick::Last(_), Pick::Last(_)) => Err(usage(
            "last:N on both sides: name the runs of one side (e.g. `iopath compare last:3 7`)",
        )),
        (Pick::Last(n), _) => {
            let b = Side::load(&args.run_b, &args.db)?;
            Ok((Side::load_last(&args.run_a, *n, &b, &args.db)?, b))
        }
        (_, Pick::Last(n)) => {
            let a = Side::load(&args.run_a, &args.db)?;
            let b = Side::load_last(&args.run_b, *n, &a, &args.db)?;
            Ok((a, b))
        }
        _ => Ok((Side::load(&args.run_a, &args.db)?, Side::load(&args.run_b, &args.db)?)),
    }
}

/// Earlier runs of A's plan on A's machine in A's database (never a run of either side),
/// when each side has one run: what the spread between runs is judged on.
fn history(a: &Side, b: &Side) -> anyhow::Result<Side> {
    if a.runs.len() > 1 || b.runs.len() > 1 {
        return Ok(Side::new(a.db.clone(), Vec::new()));
    }
    let store = open(&a.db)?;
    let b_ids = if b.db == a.db { b.ids() } else { Vec::new() };
    let ids = a.runs_of_its_plan(&store, &a.db, report::compare::runs::HISTORY_RUNS, true, &b_ids)?;
    let runs = ids
        .iter()
        .map(|&id| store.load_run(id).map_err(store_error))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Side::new(a.db.clone(), runs))
}

fn ratio_text(r: &crate::report::compare::CompareRow) -> (String, String) {
    let ratio = r.ratio.map_or("n/a".into(), |v| format!("{v:.3}"));
    let ci = r
        .ratio_ci95
        .map_or("n/a".into(), |(lo, hi)| format!("{lo:.3}..{hi:.3}"));
    (ratio, ci)
}

fn compare_table(c: &Comparison) -> String {
    let mut table = Table::new(&[
        "cell",
        "metric",
        "median A",
        "median B",
        "B/A",
        "95% CI",
        c.correction.column(),
        "verdict",
    ]);
    for r in &c.rows {
        let (ratio, ci) = ratio_text(r);
        table.row(vec![
            safe(&r.label).into_owned(),
            safe(&r.metric).into_owned(),
            fmt_num(Some(r.median_a)),
            fmt_num(Some(r.median_b)),
            ratio,
            ci,
            format!("{:.3}", r.p_adjusted),
            r.verdict.to_string(),
        ]);
    }
    table.render()
}

fn compare_markdown(c: &Comparison, a: &str, b: &str, env: &[Difference]) -> String {
    let mut md = format!("### iopath compare: {a} (A) → {b} (B)\n\n");
    let regressions = c.count(Verdict::Slower);
    let lead = if regressions > 0 {
        format!(":warning: **{regressions} slower**")
    } else {
        "**0 slower**".to_string()
    };
    md.push_str(&format!(
        "{lead}, {} faster, {} no change, {} inconclusive over {} matching cells \
         (noise band ±{}%, 95% bootstrap interval of B/A, Mann-Whitney U with {}).\n\n",
        c.count(Verdict::Faster),
        c.count(Verdict::NoChange),
        c.count(Verdict::Inconclusive),
        c.rows.len(),
        c.threshold * 100.0,
        c.correction.describe()
    ));
    md.push_str(&format!("{}\n\n", c.whole_run_line()));
    if !c.rows.is_empty() {
        md.push_str(&format!(
            "| cell | metric | median A | median B | B/A | 95% CI | {} | verdict |\n",
            c.correction.column()
        ));
        md.push_str("|---|---|--:|--:|--:|--:|--:|---|\n");
        for r in &c.rows {
            let (ratio, ci) = ratio_text(r);
            let verdict = match r.verdict {
                Verdict::Slower => "**slower**".to_string(),
                v => v.to_string(),
            };
            md.push_str(&format!(
                "| {} | `{}` | {} | {} | {ratio} | {ci} | {:.3} | {verdict} |\n",
                safe(&r.label).replace('|', "\\|"),
                safe(&r.metric),
                fmt_num(Some(r.median_a)),
                fmt_num(Some(r.median_b)),
                r.p_adjusted
            ));
        }
        md.push('\n');
    }
    let design = c.design_line();
    if !design.is_empty() {
        md.push_str(&format!("{design}\n\n"));
    }
    if let Some(line) = c.spread_line() {
        md.push_str(&format!("{line}\n\n"));
    }
    for line in c.contention.iter().flat_map(|c| c.lines()) {
        md.push_str(&format!("- {line}\n"));
    }
    if c.contention.is_some() {
        md.push('\n');
    }
    for w in &c.warnings {
        md.push_str(&format!("> warning: {}\n", safe(&w.to_string())));
    }
    for line in c.mismatch_lines() {
        md.push_str(&format!("- {}\n", safe(line.trim())));
    }
    if !env.is_empty() {
        md.push_str("\n<details><summary>Environment differences</summary>\n\n");
        for d in env {
            md.push_str(&format!(
                "- `{}`: A `{}`, B `{}`\n",
                safe(&d.name),
                safe(&d.a),
                safe(&d.b)
            ));
        }
        md.push_str("\n</details>\n");
    }
    md
}

pub fn run_compare(args: CompareArgs) -> anyhow::Result<()> {
    // One A/B run named on both sides: its variant B against its A (as `iopath ab --show`).
    let same_one_run = match (&args.run_a.pick, args.run_a == args.run_b) {
        (Pick::Ids(ids), true) if ids.len() == 1 => Some(ids[0]),
        _ => None,
    };
    if let Some(id) = same_one_run {
        let db = args.run_a.db.clone().unwrap_or_else(|| args.db.clone());
        let options = CompareOptions::new(args.threshold, args.correction, Vec::new());
        if let Some(analysis) = super::ab::show_if_ab(&db, id, &options, args.json)? {
            return super::ab::gate(&analysis, args.fail_on_regression);
        }
    }
    let metric = args.metric.as_deref().map(parse_metric).transpose()?;
    let (a, b) = load_sides(&args)?;
    let history = history(&a, &b)?;
    let (cells_a, cells_b) = (&a.cells[0], &b.cells[0]);
    let same_db = a.db == b.db;
    let (name_a, name_b) = (a.name(same_db), b.name(same_db));
    if let Some((role, name)) = &metric {
        let held = |cells: &[report::cells::CellSummary]| cells.iter().any(|c| c.metric(name, *role).is_some());
        if !held(cells_a) || !held(cells_b) {
            let mut known: Vec<String> = cells_a
                .iter()
                .flat_map(|c| c.metrics.iter().map(|m| format!("{}.{}", m.role, m.name)))
                .collect();
            known.sort();
            known.dedup();
            return Err(usage(format!(
                "--metric {role}.{name} is not in both runs ({name_a} has: {})",
                known.join(", ")
            )));
        }
    }
    let case_list = |cells: &[report::cells::CellSummary]| cells.iter().map(|c| c.case.clone()).collect::<Vec<_>>();
    let ignore =
        report::compare::resolve_ignore(&case_list(cells_a), &case_list(cells_b), &args.ignore).map_err(usage)?;
    let options = CompareOptions::new(args.threshold, args.correction, ignore);
    let mut comparison = report::compare::compare_runs(
        &a.cell_slices(),
        &b.cell_slices(),
        &history.cell_slices(),
        metric.as_ref().map(|(r, n)| (*r, n.as_str())),
        &options,
    );
    comparison.contention = Some(report::compare::contention::contention(a.contention(), b.contention()));
    let env = report::compare::environment_differences(&a.runs[0].run, &b.runs[0].run);
    let gate = comparison.gate();
    if args.json {
        let doc = comparison_json(&comparison, (&a, &b), &history, &options, &env, &gate);
        let mut text = serde_json::to_string_pretty(&doc)?;
        text.push('\n');
        super::output::out(text)?;
    } else if args.markdown {
        super::output::out(compare_markdown(&comparison, &name_a, &name_b, &env))?;
    } else {
        print_comparison(&comparison, (&name_a, &name_b), &env)?;
    }
    if args.fail_on_regression {
        match gate {
            Gate::Pass => {}
            Gate::Regression(message) => anyhow::bail!("{message}"),
            Gate::Undecidable(message) => return Err(super::error::exit_with(3, message)),
        }
    }
    Ok(())
}

/// `compare --json`: the runs on each side, the method, the gate, the verdicts and every row.
fn comparison_json(
    comparison: &Comparison,
    (a, b): (&Side, &Side),
    history: &Side,
    options: &CompareOptions,
    env: &[Difference],
    gate: &Gate,
) -> Value {
    json!({
        "type": "comparison",
        "schema_version": tidy::SCHEMA_VERSION,
        "a": a.runs_json()[0],
        "b": b.runs_json()[0],
        "runs_a": a.runs_json(),
        "runs_b": b.runs_json(),
        "history_runs": history.ids(),
        "spread": comparison.design.spread,
        "contention": comparison.contention,
        "threshold": comparison.threshold,
        "alpha": comparison.alpha,
        "interval": format!(
            "95% percentile bootstrap of median(B)/median(A), {} resamples, seed {} mixed with each cell's label",
            report::compare::BOOTSTRAP_RESAMPLES,
            report::compare::BOOTSTRAP_SEED
        ),
        "test": if comparison.design.spread.df > 0 {
            "Student's t on the runs' log medians, spread pooled between runs"
        } else {
            "two-sided Mann-Whitney U"
        },
        "correction": comparison.correction,
        "ignore": options.ignore,
        "ignored": comparison.ignored,
        "design": comparison.design,
        "whole_run": comparison.whole_run,
        "gate": {
            "decision": gate.name(),
            "exit_code": gate.exit_code(),
            "message": gate.message(),
        },
        "verdicts": {
            "faster": comparison.count(Verdict::Faster),
            "slower": comparison.count(Verdict::Slower),
            "no-change": comparison.count(Verdict::NoChange),
            "inconclusive": comparison.count(Verdict::Inconclusive),
        },
        "rows": comparison.rows,
        "only_in_a": comparison.only_in_a,
        "only_in_b": comparison.only_in_b,
        "parameter_differences": comparison.parameter_differences,
        "environment_differences": env,
        "warnings": comparison.warnings,
    })
}

/// `compare`'s text: the table, the summary lines, contention, warnings, what did not match
/// and the environment's differences.
fn print_comparison(comparison: &Comparison, (name_a, name_b): (&str, &str), env: &[Difference]) -> anyhow::Result<()> {
    crate::say!("{name_a} (A) vs {name_b} (B)")?;
    if !comparison.rows.is_empty() {
        super::output::out(compare_table(comparison))?;
    }
    crate::say!("{}", comparison.summary_line())?;
    if !comparison.rows.is_empty() {
        crate::say!("{}", comparison.whole_run_line())?;
        crate::say!("{}", comparison.design_line())?;
        if let Some(line) = comparison.spread_line() {
            crate::say!("{line}")?;
        }
    }
    for line in comparison.contention.iter().flat_map(|c| c.lines()) {
        crate::say!("{line}")?;
    }
    for w in &comparison.warnings {
        crate::say!("warning: {}", safe(&w.to_string()))?;
    }
    for line in comparison.mismatch_lines() {
        crate::say!("{}", safe(&line))?;
    }
    if !env.is_empty() {
        crate::say!("environment differences:")?;
        for d in env {
            crate::say!("  {}: A {}, B {}", safe(&d.name), safe(&d.a), safe(&d.b))?;
        }
    }
    Ok(())
}
