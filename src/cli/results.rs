//! `iopath runs|report|export|compare`: read the results database, never change it (it is
//! opened read-only; `runs --upgrade` is the one deliberate write). Output files never land on
//! the database or any SQLite file, and are written whole or not at all.

use super::error::usage;
use super::output::{safe, Table};
use super::sweep::{default_report_path, store_error};
use crate::observation::Role;
use crate::report::compare::{CompareOptions, Comparison, Correction, Difference, Gate, Verdict};
use crate::report::{self, fmt_num};
use crate::store::export::{bmf_json, otava_csv, CsvExporter, Exporter, JsonExporter};
use crate::store::output::{check_path, write_atomic, PathUse};
use crate::store::{tidy, RunData, Store, DEFAULT_DB_PATH};
use clap::{Args, ValueEnum};
use serde_json::{json, Value};
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
    #[arg(long, default_value = DEFAULT_DB_PATH)]
    pub db: PathBuf,
    /// A fleet run's matrix only: heat maps (rows: source host, columns: destination) of
    /// median Gbit/s, p99 latency and CPU per byte or transaction of each side, the worst
    /// pairs, and the hosts and links its tests flag (a host: a sign test of its cells against
    /// its partners', Holm over the hosts; the page and the terminal say the noise judged
    /// against and the smallest deviation it can flag); -o names an .html file
    /// (default: matrix-<run>.html beside the database).
    #[arg(long)]
    pub matrix: bool,
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
    #[arg(long, default_value = DEFAULT_DB_PATH)]
    pub db: PathBuf,
}

/// A run named on the command line: `3` (in --db), `other.db:3`, or `other.db` (its newest run).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRef {
    pub db: Option<PathBuf>,
    pub id: Option<i64>,
}

fn parse_run_ref(text: &str) -> Result<RunRef, String> {
    if text.is_empty() {
        return Err("empty run: give RUN_ID, DB:RUN_ID or DB".into());
    }
    if let Ok(id) = text.parse::<i64>() {
        return Ok(RunRef { db: None, id: Some(id) });
    }
    if text.trim().bytes().all(|b| b.is_ascii_digit()) {
        // All digits but too large for a run id: no such run (not a database of that name).
        return Err(super::values::parse_run_id(text).unwrap_err());
    }
    if let Some((path, id)) = text.rsplit_once(':') {
        if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
            let id = super::values::parse_run_id(id)?;
            if path.is_empty() {
                return Err(format!("'{text}' names no database before ':'"));
            }
            return Ok(RunRef {
                db: Some(PathBuf::from(path)),
                id: Some(id),
            });
        }
    }
    Ok(RunRef {
        db: Some(PathBuf::from(text)),
        id: None,
    })
}

/// `--correction bh|holm|none`.
fn parse_correction(text: &str) -> Result<Correction, String> {
    text.parse()
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
    /// The baseline run: RUN_ID in --db, DB:RUN_ID in another database, or DB for its newest run.
    #[arg(value_parser = parse_run_ref)]
    pub run_a: RunRef,
    /// The run compared with it, named the same ways (`iopath compare main.db:3 pr.db:1`).
    #[arg(value_parser = parse_run_ref)]
    pub run_b: RunRef,
    /// The noise band in percent: a change whose whole 95% interval lies within ±THRESHOLD is
    /// "no change"; one beyond it (and significant) is "faster" or "slower".
    #[arg(long, default_value = "3", value_parser = parse_threshold, value_name = "PERCENT")]
    pub threshold: f64,
    /// A gate for CI: exit 1 when the whole run, or any cell, is slower beyond the noise band
    /// and significant (after the correction for the many cells compared); exit 3 when the
    /// design cannot decide (no cell can reach alpha and the whole-run verdict is
    /// inconclusive); exit 0 otherwise.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// How the cells' p-values are adjusted for the many cells compared: bh
    /// (Benjamini-Hochberg, false discovery rate), holm (any false alarm) or none.
    #[arg(long, default_value = "bh", value_parser = parse_correction, value_name = "METHOD")]
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

/// `export --format summary`: the run, per-cell statistics of every metric, the crossovers and
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
            let (from, crosses_at) = match &x.result {
                report::crossover::Crossover::From { size, crosses_at, .. } => (Some(*size), *crosses_at),
                _ => (None, None),
            };
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
            let (from, crosses_at) = match &x.result {
                report::crossover::Crossover::From { size, crosses_at, .. } => (Some(*size), *crosses_at),
                _ => (None, None),
            };
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
            "caveats": analysis.caveats,
            "noise": analysis.noise,
            "warnings": analysis.warnings.iter().map(|g| json!({
                "kind": g.kind,
                "cells": g.cells,
                "text": g.line(),
            })).collect::<Vec<_>>(),
        },
    })
}

/// A run to compare, loaded from its own database.
struct Side {
    db: PathBuf,
    data: RunData,
}

impl Side {
    fn load(run: &RunRef, default_db: &Path) -> anyhow::Result<Side> {
        let db = run.db.clone().unwrap_or_else(|| default_db.to_path_buf());
        let store = open(&db)?;
        let id = pick_run(&store, run.id)?;
        let data = store.load_run(id).map_err(store_error)?;
        Ok(Side { db, data })
    }

    fn name(&self, same_db: bool) -> String {
        let mut text = format!("run {}", self.data.run.id);
        if let Some(name) = &self.data.run.name {
            text.push_str(&format!(" ({})", safe(name)));
        }
        if !same_db {
            text.push_str(&format!(" in {}", self.db.display()));
        }
        text
    }

    fn json(&self) -> Value {
        let mut v = tidy::run_json(&self.data.run);
        v["db"] = json!(self.db.display().to_string());
        v
    }
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
    if let (Some(id), true) = (args.run_a.id, args.run_a == args.run_b) {
        let db = args.run_a.db.clone().unwrap_or_else(|| args.db.clone());
        let options = CompareOptions::new(args.threshold, args.correction, Vec::new());
        if let Some(analysis) = super::ab::show_if_ab(&db, id, &options, args.json)? {
            return super::ab::gate(&analysis, args.fail_on_regression);
        }
    }
    let metric = args.metric.as_deref().map(parse_metric).transpose()?;
    let a = Side::load(&args.run_a, &args.db)?;
    let b = Side::load(&args.run_b, &args.db)?;
    let cells_a = report::cells::summarize_run(&a.data);
    let cells_b = report::cells::summarize_run(&b.data);
    let same_db = a.db == b.db;
    let (name_a, name_b) = (a.name(same_db), b.name(same_db));
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
                "--metric {role}.{name} is not in both runs ({name_a} has: {})",
                known.join(", ")
            )));
        }
    }
    let case_list = |cells: &[report::cells::CellSummary]| cells.iter().map(|c| c.case.clone()).collect::<Vec<_>>();
    let ignore =
        report::compare::resolve_ignore(&case_list(&cells_a), &case_list(&cells_b), &args.ignore).map_err(usage)?;
    let options = CompareOptions::new(args.threshold, args.correction, ignore);
    let comparison = report::compare::compare_cells(
        &cells_a,
        &cells_b,
        metric.as_ref().map(|(r, n)| (*r, n.as_str())),
        &options,
    );
    let env = report::compare::environment_differences(&a.data.run, &b.data.run);
    let gate = comparison.gate();
    if args.json {
        let doc = json!({
            "type": "comparison",
            "schema_version": tidy::SCHEMA_VERSION,
            "a": a.json(),
            "b": b.json(),
            "threshold": comparison.threshold,
            "alpha": comparison.alpha,
            "interval": format!(
                "95% percentile bootstrap of median(B)/median(A), {} resamples, seed {} mixed with each cell's label",
                report::compare::BOOTSTRAP_RESAMPLES,
                report::compare::BOOTSTRAP_SEED
            ),
            "test": "two-sided Mann-Whitney U",
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
        });
        let mut text = serde_json::to_string_pretty(&doc)?;
        text.push('\n');
        super::output::out(text)?;
    } else if args.markdown {
        super::output::out(compare_markdown(&comparison, &name_a, &name_b, &env))?;
    } else {
        crate::say!("{name_a} (A) vs {name_b} (B)")?;
        if !comparison.rows.is_empty() {
            super::output::out(compare_table(&comparison))?;
        }
        crate::say!("{}", comparison.summary_line())?;
        if !comparison.rows.is_empty() {
            crate::say!("{}", comparison.whole_run_line())?;
            crate::say!("{}", comparison.design_line())?;
        }
        for w in &comparison.warnings {
            crate::say!("warning: {}", safe(&w.to_string()))?;
        }
        for line in comparison.mismatch_lines() {
            crate::say!("{}", safe(&line))?;
        }
        if !env.is_empty() {
            crate::say!("environment differences:")?;
            for d in &env {
                crate::say!("  {}: A {}, B {}", safe(&d.name), safe(&d.a), safe(&d.b))?;
            }
        }
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
