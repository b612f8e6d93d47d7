//! The HTML report: one self-contained file (inline CSS, charts as inline SVG, no scripts, no
//! network; readable at phone width) telling the story first: the run and how to re-run it, the
//! headline numbers (each group's medians with intervals, as the terminal's table), the
//! findings with the caveats said once and a noise verdict, then charts, the crossover table,
//! per-case statistics, grouped noise warnings and the machine in human units. Sections appear
//! only for what the run holds.

use super::cells::CellSummary;
use super::charts::ChartSpec;
use super::crossover::CrossoverRow;
use super::fmt_num;
use crate::store::RunData;
use maud::{html, Markup, PreEscaped, DOCTYPE};

/// A chart as the report shows it: inline SVG and the file names written beside the report.
pub struct RenderedChart {
    pub spec: ChartSpec,
    pub svg: String,
    pub svg_file: String,
    pub png_file: String,
}

pub struct ReportInput<'a> {
    pub data: &'a RunData,
    pub cells: &'a [CellSummary],
    pub crossovers: &'a [CrossoverRow],
    pub records_crossovers: &'a [super::crossover::RecordsCrossoverRow],
    pub caveats: &'a [(Option<crate::warning::WarningKind>, String)],
    pub warnings: &'a [super::WarningGroup],
    pub noise: &'a [String],
    pub findings: &'a super::findings::Findings,
    pub charts: &'a [RenderedChart],
    pub summary_sheet: Option<&'a RenderedChart>,
    /// A fleet run's matrix section (`super::matrix::section`).
    pub matrix: Option<&'a Markup>,
    /// ` --db PATH` when the run is not in the default database (`super::db_flag`).
    pub db_flag: &'a str,
}

pub(super) const STYLE: &str = "
body { font-family: 'DejaVu Sans', Helvetica, Arial, sans-serif; margin: 1.5em auto; max-width: 1300px;
       color: #222; line-height: 1.4; padding: 0 0.8em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 1.8em; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f3f3f3; }
.findings { background: #eef5ff; border-left: 4px solid #0072b2; padding: 0.5em 1em; margin: 0.8em 0; }
.findings h3 { margin: 0.5em 0 0.2em; font-size: 1em; } .findings ul { margin: 0.2em 0 0.5em; padding-left: 1.3em; }
.rerun { font-size: 0.95em; } .rerun code, .meta code { word-break: break-all; }
.caveat { background: #fff6e0; border-left: 4px solid #e0a000; padding: 0.4em 0.8em; margin: 0.4em 0; }
.noise { background: #fdeeee; border-left: 4px solid #c03030; padding: 0.4em 0.8em; margin: 0.4em 0; }
.failed { color: #b00000; } .est { color: #a05a00; font-weight: bold; }
figure { margin: 1em 0; max-width: 1300px; } figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figure.empty { margin: 0.4em 0; }
figcaption { font-size: 0.85em; color: #555; }
.meta td:first-child { font-weight: bold; }
table.headline td { white-space: nowrap; } small.ci { color: #666; } p.key { font-size: 0.85em; color: #555; }
.side { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
.side .chart { flex: 0 1 900px; min-width: 0; } .side .scroll { flex: 1 1 auto; }
td.case { min-width: 9em; max-width: 16em; }
@media (max-width: 600px) {
  body { padding: 0 0.3em; } table { font-size: 0.78em; } th, td { padding: 2px 4px; }
  td.case { min-width: 7em; max-width: 10em; overflow-wrap: anywhere; }
  table.headline td, table.headline th { padding: 2px 3px; } table.headline small.ci { font-size: 0.8em; }
}
";

/// A stored byte count as the reader reads it (`23.5GiB`, `48KiB`); a negative one as stored.
fn human_bytes(v: f64) -> String {
    if v >= 0.0 {
        crate::case::format_bytes(v.round() as u64)
    } else {
        v.to_string()
    }
}

/// A stored machine or environment value in human units, judged by its key: `*_bytes`,
/// `optmem_max` and `rlimit_*` in bytes, `*_hz` in GHz, `*_mbps` in Mbit/s, `tcp_[rw]mem`
/// (min default max) in bytes; anything else as stored.
pub fn human_value(key: &str, value: &serde_json::Value) -> String {
    let last = key.rsplit('.').next().unwrap_or(key);
    let bytes_key = last.ends_with("bytes") || last == "optmem_max" || key.starts_with("rlimit_");
    match value {
        serde_json::Value::Number(n) => {
            let v = n.as_f64().unwrap_or(f64::NAN);
            if bytes_key {
                human_bytes(v)
            } else if last.ends_with("_hz") {
                format!("{:.2} GHz", v / 1e9)
            } else if last.ends_with("_mbps") {
                format!("{v} Mbit/s")
            } else {
                n.to_string()
            }
        }
        serde_json::Value::String(s) if bytes_key && s.parse::<f64>().is_ok() => {
            human_bytes(s.parse::<f64>().unwrap_or_default())
        }
        serde_json::Value::String(s) if last == "tcp_wmem" || last == "tcp_rmem" => {
            let parts: Vec<String> = s
                .split_whitespace()
                .map(|p| p.parse::<f64>().map_or(p.to_string(), human_bytes))
                .collect();
            format!("{} (min default max)", parts.join(" "))
        }
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "unknown".into(),
        other => other.to_string(),
    }
}

/// Flatten a JSON object into (key path, value) rows, values in human units.
fn flatten(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        serde_json::Value::Array(items) => {
            let text: Vec<String> = items.iter().map(compact).collect();
            out.push((
                prefix.to_string(),
                if text.is_empty() {
                    "none".into()
                } else {
                    text.join("; ")
                },
            ));
        }
        other => out.push((prefix.to_string(), human_value(prefix, other))),
    }
}

/// One array element on one line: `key=value` pairs without the nulls, or the plain value.
fn compact(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Object(map) => map
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| format!("{}={}", k.trim_end_matches("_bytes"), human_value(k, v)))
            .collect::<Vec<_>>()
            .join(" "),
        other => human_value("", other),
    }
}

/// The machine in one line: CPU, CPUs, memory, kernel, virtualised or not.
pub fn machine_line(machine_json: &str) -> Option<String> {
    let m: serde_json::Value = serde_json::from_str(machine_json).ok()?;
    let mut parts = Vec::new();
    if let Some(cpu) = m.get("cpu_model").and_then(|v| v.as_str()) {
        parts.push(cpu.to_string());
    }
    if let Some(n) = m.get("logical_cpus").and_then(|v| v.as_u64()) {
        let smt = match m.get("smt_active").and_then(|v| v.as_bool()) {
            Some(true) => ", SMT on",
            Some(false) => ", SMT off",
            None => "",
        };
        parts.push(format!("{n} logical CPUs{smt}"));
    }
    if let Some(hz) = m.get("tsc_hz").and_then(|v| v.as_f64()) {
        parts.push(format!("TSC {:.2} GHz", hz / 1e9));
    }
    if let Some(b) = m.get("memory_total_bytes").and_then(|v| v.as_f64()) {
        parts.push(format!("{} RAM", human_bytes(b)));
    }
    if let Some(k) = m.get("kernel").and_then(|v| v.as_str()) {
        parts.push(format!("Linux {k}"));
    }
    if m.get("virtualized").and_then(|v| v.as_bool()) == Some(true) {
        parts.push("virtual machine".into());
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn key_values(json: &str) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(v) => flatten("", &v, &mut rows),
        Err(_) => rows.push(("(unreadable)".into(), json.to_string())),
    }
    rows
}

fn source_badge(text: &str) -> Markup {
    html! {
        @if text.contains("estimate") { span.est { (text) } }
        @else if text.starts_with("unavailable") { span.failed { (text) } }
        @else { (text) }
    }
}

fn cell_table(cells: &[CellSummary]) -> Markup {
    html! {
        div.scroll { table {
            // The median right after the case, so a phone shows both without scrolling sideways.
            tr {
                th { "case" } th { "median" } th { "metric" } th { "95% CI of the median" }
                th { "ok" } th { "failed" } th { "mean" } th { "CV" } th { "outliers (MAD)" } th { "source" }
            }
            @for cell in cells {
                @let metric = cell.headline_metric();
                @let summary = metric.and_then(|m| m.summary.as_ref());
                tr {
                    td.case { (cell.label)
                        @if let Some(why) = super::figures::minority_served(cell) {
                            br; span.failed { "MOST CLIENTS FAILED (" (why) "): its figures are those of the few served" }
                        }
                    }
                    td.num { (fmt_num(summary.map(|s| s.median))) }
                    td { @if let Some(m) = metric { (m.role) "." (m.name) } @else { "n/a" } }
                    td.num { @if let Some(s) = summary { (s.ci_text(|v| fmt_num(Some(v)))) } @else { "n/a" } }
                    td.num { (cell.ok) }
                    td.num { @if cell.failures.is_empty() { "0" } @else { span.failed title=(cell.failures.join("\n")) { (cell.failures.len()) } } }
                    td.num { (fmt_num(summary.map(|s| s.mean))) }
                    td.num { @if let Some(s) = summary { (s.cv_text()) } @else { "n/a" } }
                    td.num { @if let Some(s) = summary.filter(|s| s.n >= 5) { (s.outliers.len()) } @else { "n/a (n < 5)" } }
                    td { @if let Some(m) = metric { (source_badge(&m.source_text())) } @else { "missing" } }
                }
            }
        } }
    }
}

fn all_metrics(cells: &[CellSummary]) -> Markup {
    html! {
        @for cell in cells {
            details {
                summary { (cell.label) " - every metric" }
                @if !cell.failures.is_empty() {
                    p.failed { "failed repetitions: " (cell.failures.join(" | ")) }
                }
                div.scroll { table {
                    tr { th { "role" } th { "metric" } th { "unit" } th { "n" } th { "median" } th { "95% CI of the median" } th { "mean" } th { "stddev" } th { "CV" } th { "values per repetition" } th { "source" } }
                    @for m in &cell.metrics {
                        @let s = m.summary.as_ref();
                        tr {
                            td { (m.role) } td { (m.name) } td { (m.unit) }
                            td.num { (m.values.len()) }
                            td.num { (fmt_num(s.map(|s| s.median))) }
                            td.num { @if let Some(s) = s { (s.ci_text(|v| fmt_num(Some(v)))) } @else { "n/a" } }
                            td.num { (fmt_num(s.map(|s| s.mean))) }
                            td.num { (fmt_num(s.and_then(|s| s.stddev))) }
                            td.num { @if let Some(s) = s { (s.cv_text()) } @else { "n/a" } }
                            td.num { (m.values.iter().map(|v| fmt_num(Some(*v))).collect::<Vec<_>>().join(", ")) }
                            td { (source_badge(&m.source_text())) }
                        }
                    }
                } }
                @if !cell.warnings.is_empty() {
                    ul { @for w in &cell.warnings { li { (w) } } }
                }
            }
        }
    }
}

fn chart_figure(chart: &RenderedChart) -> Markup {
    let spec = &chart.spec;
    let table = html! {
        @if let Some((head, rows)) = spec.table.split_first() {
            div.scroll { table {
                tr { @for h in head { th { (h) } } }
                @for row in rows { tr { @for c in row { td { (c) } } } }
            } }
        }
    };
    if !spec.has_points() {
        // Said in a sentence (and its small table, when it has one) instead of an empty chart.
        let reason = spec
            .empty_reason
            .clone()
            .unwrap_or_else(|| "no data in this run".into());
        return html! {
            figure.empty id=(spec.stem) {
                figcaption { strong { (spec.title) } ": " (reason) "." }
                (table)
                @if !spec.table.is_empty() {
                    figcaption { @for line in spec.caption.lines() { (line) " " } }
                }
            }
        };
    }
    html! {
        figure id=(spec.stem) {
            @if spec.table.is_empty() { (PreEscaped(chart.svg.as_str())) }
            @else { div.side { div.chart { (PreEscaped(chart.svg.as_str())) } (table) } }
            figcaption {
                strong { (spec.title) "." } " "
                @if spec.y_per_panel() { "Each panel has its own y scale (their heights differ more than threefold): compare heights within a panel, not across panels. " }
                @for line in spec.caption.lines() {
                    @if line.starts_with("ESTIMATE") { span.est { (line) } } @else { (line) } " "
                }
                " Files: " a href=(chart.svg_file) { (chart.svg_file) } ", " a href=(chart.png_file) { (chart.png_file) }
            }
        }
    }
}

/// The numbers first: each comparison group's headline medians with their 95% intervals,
/// the best at each point in bold and `~` before a median within the noise of the best (the
/// terminal's table, with its intervals).
fn headline_block(input: &ReportInput<'_>) -> Markup {
    use super::findings::{headline_tables, Standing, WITHIN_NOISE_KEY};
    let tables = headline_tables(input.cells, input.findings);
    let marked = tables
        .iter()
        .flat_map(|t| t.rows.iter().flat_map(|r| r.1.iter().flatten()))
        .any(|v| v.standing == Some(Standing::WithinNoise));
    html! {
        @for t in &tables {
            h3 { (t.title) ": " (t.metric) }
            div.scroll { table.headline {
                tr { th { (t.rows_are) } @for p in &t.points { th { (p) } } }
                @for (name, values) in &t.rows {
                    tr {
                        td { (name) }
                        @for v in values {
                            @match v {
                                Some(v) => td.num {
                                    @let median = format!("{}{}", v.standing.map_or("", |s| s.mark()), fmt_num(Some(v.median)));
                                    @if v.standing == Some(Standing::Best) && t.rows.len() > 1 { strong { (median) } } @else { (median) }
                                    @if let Some((lo, hi)) = v.ci95 { br; small.ci { (fmt_num(Some(lo))) ".." (fmt_num(Some(hi))) } }
                                },
                                None => td.num { "-" },
                            }
                        }
                    }
                }
            } }
        }
        p.key {
            "Medians of the repetitions, the 95% interval of the median below each (from 6 repetitions on)"
            @if tables.iter().any(|t| t.rows.len() > 1) { "; the best at each point in bold" }
            @if marked { "; " (WITHIN_NOISE_KEY) }
            "."
        }
    }
}

/// The noise said in a sentence and a table (case, metric, CV, repetitions, what to do), not
/// a paragraph listing every case; the other warnings (outliers, placement) as they are.
fn noise_block(input: &ReportInput<'_>) -> Markup {
    use super::cells::{noise_advice, NOISY_CV};
    let judged = input
        .cells
        .iter()
        .filter(|c| {
            c.headline_metric()
                .and_then(|m| m.summary.as_ref())
                .is_some_and(|s| s.cv.is_some())
        })
        .count();
    let noisy: Vec<(&CellSummary, &super::cells::MetricCell, f64, usize)> = input
        .cells
        .iter()
        .filter_map(|c| {
            let m = c.headline_metric()?;
            let s = m.summary.as_ref()?;
            s.cv.filter(|cv| *cv > NOISY_CV).map(|cv| (c, m, cv, s.n))
        })
        .collect();
    let prefix = "cases vary with a CV above";
    html! {
        @if noisy.is_empty() {
            p { "Every case's coefficient of variation is at most " (format!("{:.0}%", NOISY_CV * 100.0)) "." }
        } @else {
            div.noise {
                (noisy.len()) " of " (judged) " cases vary by more than " (format!("{:.0}%", NOISY_CV * 100.0))
                " (coefficient of variation of the headline metric between repetitions): their medians are less sure than the others', and a difference within that spread is noise. The table says which and what to do."
            }
            div.scroll { table {
                tr { th { "case" } th { "metric" } th { "CV" } th { "repetitions" } th { "what to do" } }
                @for (cell, metric, cv, n) in &noisy {
                    tr {
                        td.case { (cell.label) } td { (metric.name) }
                        td.num { (format!("{:.1}%", cv * 100.0)) } td.num { (n) }
                        td { (noise_advice(cell)) }
                    }
                }
            } }
        }
        // Outliers and placement, which the table does not cover.
        @for n in input.noise.iter().filter(|n| !n.contains(prefix)) { div.noise { (n) } }
    }
}

fn findings_block(input: &ReportInput<'_>) -> Markup {
    let f = input.findings;
    html! {
        div.findings {
            @for g in &f.groups {
                h3 { (g.title) }
                ul { @for line in &g.lines { li { (line) } } }
            }
            @if f.groups.is_empty() {
                p { "Nothing to rank in this run: one contender per point (see the charts and the statistics below)." }
            }
            @if !input.caveats.is_empty() || !input.warnings.is_empty() {
                h3 { "Caveats: unavailable, estimated and substituted" }
                ul {
                    @for (_, c) in input.caveats { li { (c) } }
                    @for g in input.warnings { li { (g.line()) } }
                }
            }
            p { strong { (f.noise) } }
        }
    }
}

pub fn render(input: &ReportInput<'_>) -> String {
    let run = &input.data.run;
    let title = match &run.name {
        Some(name) => format!("iopath report: run {} ({name})", run.id),
        None => format!("iopath report: run {}", run.id),
    };
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { (title) }
                p.rerun { "Re-run this: " code { (run.command_line) } }
                @if let Some(machine) = machine_line(&run.machine_json) { p { "On: " (machine) "." } }
                table.meta {
                    tr { td { "started / ended (UTC)" } td { (run.started_at) " / " (run.ended_at.clone().unwrap_or_else(|| "not finished".into())) } }
                    tr { td { "status" } td { (run.status) } }
                    tr { td { "cells" } td { (run.cells_ok) " ok, " (run.cells_failed) " failed, " (run.cells_planned()) " planned (" (run.cases) " cases x " (run.repetitions) " repetitions" @if run.shuffle { ", shuffled with seed " (run.seed) } "; a cell is one repetition of one case)" } }
                    tr { td { "iopath" } td { (run.tool_version) } }
                }
                @if !input.cells.is_empty() {
                    h2 id="numbers" { "Headline numbers" }
                    (headline_block(input))
                }
                h2 id="findings" { "Findings" }
                (findings_block(input))
                @if !input.charts.is_empty() {
                    h2 id="charts" { "Charts" }
                    p { "Points are the median over the repetitions; error bars are the 95% interval of the median (from 6 repetitions on)." }
                    @if let Some(sheet) = input.summary_sheet {
                        p { "Summary sheet: " a href=(sheet.svg_file) { (sheet.svg_file) } ", " a href=(sheet.png_file) { (sheet.png_file) } }
                    }
                    @for chart in input.charts { (chart_figure(chart)) }
                }
                @if let Some(matrix) = input.matrix { (matrix) }
                @if !input.crossovers.is_empty() {
                    h2 id="crossover" { "Crossover sizes" }
                    p { "The smallest message size from which mode A has a higher median throughput than mode B, significantly (two-sided Mann-Whitney U over the repetitions, p < 0.05), and is never significantly lower at a larger size; the medians cross at the interpolated size (log scale). With fewer than 4 repetitions a side nothing can be significant, so nothing is claimed." }
                    div.scroll { table {
                        tr { th { "A" } th { "vs B" } th { "threads" } th { "A beats B" } th { "B significantly ahead at" } th { "sizes compared" } }
                        @for row in input.crossovers {
                            tr { td { (row.a) } td { (row.b) } td.num { (row.threads) } td { (row.result.describe()) } td { (row.b_ahead_text()) } td.num { (row.sizes_compared) } }
                        }
                    } }
                }
                @if !input.records_crossovers.is_empty() {
                    h2 id="records-crossover" { "Crossover records counts" }
                    p { "Net records: the fewest records per response from which mode A sends more payload per second than mode B, significantly (two-sided Mann-Whitney U over the repetitions, p < 0.05), and never significantly less with more records; the medians cross at the interpolated count. With fewer than 4 repetitions a side nothing is claimed." }
                    div.scroll { table {
                        tr { th { "A" } th { "vs B" } th { "setting" } th { "A beats B" } th { "B significantly ahead at (records)" } th { "counts compared" } }
                        @for row in input.records_crossovers {
                            tr { td { (row.a) } td { (row.b) } td { (row.setting()) } td { (row.describe()) } td { (row.b_ahead_text()) } td.num { (row.counts_compared) } }
                        }
                    } }
                }
                h2 id="cells" { "Per-case statistics" }
                p { "Headline metric per case over its repetitions (cells). Outliers are flagged by the MAD rule (modified z-score above 3.5) and kept." }
                (cell_table(input.cells))
                (all_metrics(input.cells))
                h2 id="noise" { "Noise warnings" }
                (noise_block(input))
                h2 id="environment" { "Environment" }
                div.scroll { table.meta { @for (k, v) in key_values(&run.environment_json) { tr { td { (k) } td { (v) } } } } }
                h2 id="machine" { "Machine" }
                div.scroll { table.meta { @for (k, v) in key_values(&run.machine_json) { tr { td { (k) } td { (v) } } } } }
                p { small { "Generated by iopath " (env!("CARGO_PKG_VERSION")) " from the results database alone; rebuild it any time with " code { "iopath report " (run.id) (input.db_flag) } "." } }
            }
        }
    };
    page.into_string()
}
