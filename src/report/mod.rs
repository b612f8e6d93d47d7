//! Reports: per-cell statistics, crossover analysis and run comparison (pure functions over
//! stored runs), charts (plotters, SVG + PNG) and the self-contained HTML report. Reads only
//! what the store gives it.

pub mod ab;
pub mod ab_figures;
pub mod cells;
pub mod charts;
pub mod claims;
pub mod compare;
pub mod crossover;
pub mod figures;
pub mod findings;

pub use crate::format::format_number as fmt_num;

pub mod html;
pub mod load_figures;
pub mod matrix;
pub mod remote_fs_figures;
pub mod rr_figures;
pub mod udp_figures;
pub mod udp_rr_figures;

use crate::case::{CopyMode, StreamCase};
use crate::measure::memtraffic;
use crate::observation::names;
use crate::observation::{Role, WarningKind};
use crate::store::{RunData, RunStatus};
use cells::CellSummary;
use std::path::{Path, PathBuf};

/// The workloads' own warnings of one kind across a run's cells.
#[derive(Debug, Clone, PartialEq)]
pub struct WarningGroup {
    pub kind: WarningKind,
    /// Cases with at least one warning of this kind in any of their repetitions.
    pub cells: usize,
    /// The text of the first one.
    pub example: String,
    /// Whether the texts differ between cells, so `example` is one of several.
    pub varied: bool,
}

impl WarningGroup {
    /// One line for the report: what it is, how often, an example, and what to do.
    pub fn line(&self) -> String {
        let example = if self.varied { "e.g. " } else { "" };
        let mut line = format!(
            "{} ({} {}): {example}{}",
            self.kind.title(),
            self.cells,
            if self.cells == 1 { "case" } else { "cases" },
            self.example
        );
        if !self.kind.advice().is_empty() {
            line.push_str(&format!(". What to do: {}.", self.kind.advice()));
        }
        line
    }
}

/// Untyped warnings (from older databases) are told apart by their text with the numbers
/// blanked, so one sort of warning is one group however its numbers vary.
fn text_shape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else if !(c == '.' && out.ends_with('#')) {
            out.push(c);
        }
    }
    out
}

/// The workloads' warnings grouped by kind (untyped ones by text shape), counted in cells,
/// in the order of the kinds.
pub fn warning_groups(cells: &[CellSummary]) -> Vec<WarningGroup> {
    let mut groups: Vec<(WarningKind, String, WarningGroup)> = Vec::new();
    for cell in cells {
        let mut seen: Vec<(WarningKind, String)> = Vec::new();
        for w in &cell.warnings {
            let shape = if w.kind == WarningKind::Other {
                text_shape(&w.text)
            } else {
                String::new()
            };
            let key = (w.kind, shape);
            let counted = seen.contains(&key);
            match groups.iter_mut().find(|(k, s, _)| (*k, s) == (key.0, &key.1)) {
                Some((_, _, g)) => {
                    g.varied |= g.example != w.text;
                    g.cells += usize::from(!counted);
                }
                None => groups.push((
                    key.0,
                    key.1.clone(),
                    WarningGroup {
                        kind: w.kind,
                        cells: 1,
                        example: w.text.clone(),
                        varied: false,
                    },
                )),
            }
            if !counted {
                seen.push(key);
            }
        }
    }
    // Kinds in their declared order; untyped groups (the last kind) as they came, at most 12.
    groups.sort_by_key(|(kind, _, _)| *kind);
    let mut out: Vec<WarningGroup> = groups.into_iter().map(|(_, _, g)| g).collect();
    let typed = out.iter().filter(|g| g.kind != WarningKind::Other).count();
    out.truncate(typed + 12);
    out
}

/// The alias probe's verdict per send mode (`--prove-copies`: net/alias.rs), from the mean
/// `alias_by_reference_fraction` of the mode's stream cells; None when no cell ran it. Said
/// with the `by-reference` warnings when any mode went by reference.
fn alias_verdicts(cells: &[CellSummary]) -> Option<(Option<WarningKind>, String)> {
    use crate::net::alias::Verdict;
    let mut fractions: Vec<(CopyMode, Vec<f64>)> = Vec::new();
    for cell in cells {
        let (Some(s), Some(m)) = (
            cell.case.get::<StreamCase>(),
            cell.metric(names::ALIAS_BY_REFERENCE_FRACTION, Role::System),
        ) else {
            continue;
        };
        match fractions.iter_mut().find(|(mode, _)| *mode == s.mode) {
            Some((_, values)) => values.extend(&m.values),
            None => fractions.push((s.mode, m.values.clone())),
        }
    }
    let mut by_verdict: Vec<(Verdict, Vec<String>)> = Vec::new();
    for (mode, values) in fractions.iter().filter(|(_, v)| !v.is_empty()) {
        let verdict = Verdict::from_fraction(values.iter().sum::<f64>() / values.len() as f64);
        match by_verdict.iter_mut().find(|(v, _)| *v == verdict) {
            Some((_, modes)) => modes.push(mode.to_string()),
            None => by_verdict.push((verdict, vec![mode.to_string()])),
        }
    }
    if by_verdict.is_empty() {
        return None;
    }
    by_verdict.sort_by_key(|(v, _)| *v as u8);
    let listed: Vec<String> = by_verdict
        .iter()
        .map(|(v, modes)| format!("{v}: {}", modes.join(", ")))
        .collect();
    let referenced = by_verdict.iter().any(|(v, _)| *v != Verdict::Copied);
    let mut text = format!(
        "What the kernel did with the sender's bytes (alias probe, --prove-copies): {}.",
        listed.join("; ")
    );
    if referenced {
        text.push_str(
            " By reference: the kernel read the sender's bytes after the send call returned, so a buffer rewritten before the peer has read it arrives rewritten.",
        );
    }
    Some((referenced.then_some(WarningKind::ByReference), text))
}

/// ` --db PATH` for a run stored anywhere but the default database (empty there), so every
/// command printed for the run (resume, report) names the database it is in; a path with
/// characters the shell would split or expand is single-quoted.
pub fn db_flag(db: &Path) -> String {
    if db == crate::store::default_db_path() {
        return String::new();
    }
    let text = db.display().to_string();
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,=@%".contains(c));
    if plain {
        format!(" --db {text}")
    } else {
        format!(" --db '{}'", text.replace('\'', "'\\''"))
    }
}

/// What the reader must know before trusting the numbers, found in the run itself: each with
/// the kind of workload warning that says the same thing (so the two are said once). `db`:
/// the database the run is in, named in the resume command.
/// Metric names as a caveat lists them: a repeated figure's interval bounds (`x_ci95_low`,
/// `x_ci95_high`, internal companions of `x`) said once as "the 95% interval of x", after the
/// other names.
fn caveat_names(names: &[&str]) -> String {
    let mut plain: Vec<&str> = Vec::new();
    let mut intervals: Vec<&str> = Vec::new();
    for name in names {
        match name
            .strip_suffix("_ci95_low")
            .or_else(|| name.strip_suffix("_ci95_high"))
        {
            Some(base) if !intervals.contains(&base) => intervals.push(base),
            Some(_) => {}
            None => plain.push(name),
        }
    }
    let mut parts: Vec<String> = Vec::new();
    if !plain.is_empty() {
        parts.push(plain.join(", "));
    }
    if !intervals.is_empty() {
        parts.push(format!("the 95% interval of {}", intervals.join(", ")));
    }
    parts.join("; ")
}

pub fn typed_caveats(data: &RunData, cells: &[CellSummary], db: &Path) -> Vec<(Option<WarningKind>, String)> {
    let mut out = Vec::new();
    if let Some((copied, loopback)) = findings::zero_copy_copied(cells) {
        if copied > 0.0 {
            let why = if loopback {
                ": loopback delivery - the kernel copies MSG_ZEROCOPY data it delivers to a local socket, so \
                 zero-copy here pays for page pinning and completion notifications on top of a copy"
            } else {
                ""
            };
            out.push((
                Some(WarningKind::ZeroCopyCopied),
                format!(
                    "zero-copy was copied by the kernel in {:.0}% of sends{why}.",
                    copied * 100.0
                ),
            ));
        }
    }
    // Memory traffic that no cell could count is said once, with what it would show and how
    // to get it, instead of a line per reason.
    let memory_note = memory_traffic_note(cells);
    if let Some(note) = &memory_note {
        out.push((None, note.clone()));
    }
    if let Some(caveat) = alias_verdicts(cells) {
        out.push(caveat);
    }
    let mut estimated: Vec<&str> = Vec::new();
    // Unavailable metrics grouped by reason: (reason, metric names).
    let mut unavailable: Vec<(String, Vec<&str>)> = Vec::new();
    for m in cells.iter().flat_map(|c| &c.metrics) {
        if m.name.starts_with("total_") {
            continue;
        }
        if memory_note.is_some() && memtraffic::METRIC_NAMES.contains(&m.name.as_str()) {
            continue;
        }
        if m.is_estimate() && !estimated.contains(&m.name.as_str()) {
            estimated.push(&m.name);
        }
        for s in m.sources.iter().filter(|s| s.starts_with("unavailable")) {
            let reason = s
                .trim_start_matches("unavailable")
                .trim_start_matches(':')
                .trim()
                .to_string();
            match unavailable.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, names)) if !names.contains(&m.name.as_str()) => names.push(&m.name),
                Some(_) => {}
                None => unavailable.push((reason, vec![&m.name])),
            }
        }
    }
    let unavailable = merge_counts_apart(unavailable);
    if !estimated.is_empty() {
        out.push((
            Some(WarningKind::NoHardwareCounters),
            format!(
                "{} are estimates (CPU time x TSC frequency) because no hardware cycle counter was available: \
                 compare them between modes of this run, not with counted cycles from other machines.",
                estimated.join(", ")
            ),
        ));
    }
    for (reason, names) in unavailable {
        let kind = if reason.contains("PMU") || reason.contains("hardware") {
            Some(WarningKind::NoHardwareCounters)
        } else if reason.contains("paranoid") || reason.contains("kernel") {
            Some(WarningKind::CountersRestricted)
        } else {
            None
        };
        out.push((kind, format!("Not measured here ({reason}): {}.", caveat_names(&names))));
    }
    let failed: Vec<&String> = cells.iter().flat_map(|c| &c.failures).collect();
    if let Some(first) = failed.first() {
        out.push((
            Some(WarningKind::CellFailed),
            format!(
                "{} cells failed (recorded, not retried in this report); first error: {first}",
                failed.len()
            ),
        ));
    }
    let run = &data.run;
    if run.cells_ok + run.cells_failed < run.cells_planned() || run.status != RunStatus::Complete {
        out.push((
            None,
            format!(
                "The run is {} with {} of {} cells stored: `iopath run --resume {}{}` runs the missing ones.",
                match run.status {
                    RunStatus::Running => "unfinished (still running, or killed)",
                    other => other.as_str(),
                },
                run.cells_ok + run.cells_failed,
                run.cells_planned(),
                run.id,
                db_flag(db)
            ),
        ));
    }
    out
}

/// The note when a run has memory-traffic figures and none of them has a value in any cell,
/// with the reason dram_bytes gives.
fn memory_traffic_note(cells: &[CellSummary]) -> Option<String> {
    let figures: Vec<&cells::MetricCell> = cells
        .iter()
        .flat_map(|c| &c.metrics)
        .filter(|m| memtraffic::METRIC_NAMES.contains(&m.name.as_str()))
        .collect();
    if figures.is_empty() || figures.iter().any(|m| !m.values.is_empty()) {
        return None;
    }
    let reason = figures
        .iter()
        .filter(|m| m.name == memtraffic::DRAM_BYTES)
        .chain(figures.iter())
        .flat_map(|m| &m.sources)
        .find_map(|s| s.strip_prefix("unavailable"))
        .map(|r| r.trim_start_matches(':').trim().to_string())?;
    Some(memtraffic::unavailable_note(&reason))
}

/// The caveats as text.
pub fn caveats(data: &RunData, cells: &[CellSummary], db: &Path) -> Vec<String> {
    typed_caveats(data, cells, db).into_iter().map(|(_, t)| t).collect()
}

/// Caveats and workload warnings merged so that each thing is said once: caveats of one kind
/// become one line, and the warning group of that kind adds its count and advice to it instead
/// of a box of its own. Returns the merged caveats, each with its kind, and the groups left over.
pub fn merge_caveats(
    caveats: Vec<(Option<WarningKind>, String)>,
    groups: &[WarningGroup],
) -> (Vec<(Option<WarningKind>, String)>, Vec<WarningGroup>) {
    let mut merged: Vec<(Option<WarningKind>, String)> = Vec::new();
    for (kind, text) in caveats {
        match merged.iter_mut().find(|(k, _)| kind.is_some() && *k == kind) {
            Some((_, line)) => {
                line.push(' ');
                line.push_str(&text);
            }
            None => merged.push((kind, text)),
        }
    }
    let mut rest = Vec::new();
    for g in groups {
        match merged.iter_mut().find(|(k, _)| *k == Some(g.kind)) {
            Some((_, line)) => {
                let cases = if g.cells == 1 { "case" } else { "cases" };
                *line = format!("{} ({} {cases}): {line}", g.kind.title(), g.cells);
                if !g.kind.advice().is_empty() {
                    line.push_str(&format!(" What to do: {}.", g.kind.advice()));
                }
            }
            None => rest.push(g.clone()),
        }
    }
    (merged, rest)
}

/// What `write_report` wrote.
#[derive(Debug, Clone)]
pub struct ReportFiles {
    pub html: PathBuf,
    pub charts_dir: PathBuf,
    pub chart_files: Vec<PathBuf>,
}

/// Everything computed from a run for the report and the terminal.
pub struct Analysis {
    pub cells: Vec<CellSummary>,
    pub crossovers: Vec<crossover::CrossoverRow>,
    /// Net records: from how many records per response one mode beats another.
    pub records_crossovers: Vec<crossover::RecordsCrossoverRow>,
    /// What the reader must know before trusting the numbers, each with the kind of warning it
    /// says (None: a caveat of its own).
    pub caveats: Vec<(Option<WarningKind>, String)>,
    /// The workloads' own warnings, grouped by kind.
    pub warnings: Vec<WarningGroup>,
    pub noise: Vec<String>,
    /// What the run says, first.
    pub findings: findings::Findings,
}

/// `db`: the database the run is in (named in the commands the analysis prints).
pub fn analyze(data: &RunData, db: &Path) -> Analysis {
    let cells = cells::summarize_run(data);
    let crossovers = crossover::stream_crossovers(&cells);
    let (caveats, warnings) = merge_caveats(typed_caveats(data, &cells, db), &warning_groups(&cells));
    let mut found = findings::findings(&cells, &crossovers, &figures::machine_caches(&data.run.machine_json));
    found.groups.extend(findings::claims_group(&cells, data.ab.as_ref()));
    Analysis {
        findings: found,
        crossovers,
        records_crossovers: crossover::records_crossovers(&cells),
        caveats,
        warnings,
        noise: cells::noise_warnings(&cells)
            .into_iter()
            .chain(cells::placement_warnings(data))
            .collect(),
        cells,
    }
}

/// Write the HTML report to `html_path` and every chart as SVG and PNG into a folder beside it
/// (`<name>-charts/`). Every file is written into a temporary folder first and moved into place
/// only when all of them exist (the HTML last), so a failure (a full disk) leaves no file
/// changed and nothing half-written; an SQLite file is never replaced. `db`: the database the
/// run is in, named in the commands the report prints.
pub fn write_report(data: &RunData, html_path: &Path, db: &Path) -> anyhow::Result<ReportFiles> {
    let analysis = analyze(data, db);
    let dir = html_path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let stem = html_path.file_stem().and_then(|s| s.to_str()).unwrap_or("report");
    let charts_name = format!("{stem}-charts");
    let charts_dir = dir.join(&charts_name);
    let mut staging = crate::store::output::Staging::new(dir)?;
    let mut chart_files = Vec::new();
    let mut render =
        |spec: charts::ChartSpec, sheet: Option<&[charts::ChartSpec]>| -> anyhow::Result<html::RenderedChart> {
            let svg_path = charts_dir.join(format!("{}.svg", spec.stem));
            let png_path = charts_dir.join(format!("{}.png", spec.stem));
            let svg = match sheet {
                Some(specs) => charts::render_sheet_svg(specs, 2)?,
                None => charts::render_svg(&spec)?,
            };
            staging.write(&svg_path, svg.as_bytes())?;
            let staged_png = staging.file(&png_path);
            match sheet {
                Some(specs) => charts::render_sheet_png(specs, 2, &staged_png),
                None => charts::render_png(&spec, &staged_png),
            }
            .map_err(|e| {
                // Name the file the user asked for, not the temporary one.
                let text = e.to_string();
                let staged = format!("cannot write {}: ", staged_png.display());
                let reason = text.strip_prefix(&staged).unwrap_or(&text);
                // An output that cannot be written is exit 2 (store::StoreError::CannotWrite).
                anyhow::Error::from(crate::store::StoreError::CannotWrite {
                    path: png_path.clone(),
                    detail: reason.to_string(),
                })
            })?;
            chart_files.push(svg_path);
            chart_files.push(png_path);
            Ok(html::RenderedChart {
                svg_file: format!("{charts_name}/{}.svg", spec.stem),
                png_file: format!("{charts_name}/{}.png", spec.stem),
                spec,
                svg,
            })
        };
    let specs = figures::all_figures(&analysis.cells, &figures::machine_caches(&data.run.machine_json));
    // The summary sheet holds only the stream charts that draw something.
    let stream_specs: Vec<charts::ChartSpec> = figures::stream_figures(&figures::drawable(&analysis.cells).0)
        .into_iter()
        .map(figures::informative)
        .filter(charts::ChartSpec::has_points)
        .collect();
    let mut rendered = Vec::new();
    for spec in specs {
        rendered.push(render(spec, None)?);
    }
    let sheet = if stream_specs.is_empty() {
        None
    } else {
        let sheet_spec = charts::ChartSpec {
            stem: "summary".into(),
            title: "Summary sheet".into(),
            x_desc: String::new(),
            x_axis: charts::XAxis::Count,
            y_desc: String::new(),
            series: Vec::new(),
            caption: String::new(),
            ..Default::default()
        };
        Some(render(sheet_spec, Some(&stream_specs))?)
    };
    // A fleet run's matrix: its own section, heat maps beside the other charts.
    let matrix = match matrix::from_run(data) {
        Some(fleet) => {
            let maps = matrix::render_maps(&fleet, &mut staging, &charts_dir, &charts_name, &mut chart_files)?;
            Some(matrix::section(&fleet, &maps, &data.fleet_machines))
        }
        None => None,
    };
    let page = html::render(&html::ReportInput {
        data,
        cells: &analysis.cells,
        crossovers: &analysis.crossovers,
        records_crossovers: &analysis.records_crossovers,
        caveats: &analysis.caveats,
        warnings: &analysis.warnings,
        noise: &analysis.noise,
        findings: &analysis.findings,
        charts: &rendered,
        summary_sheet: sheet.as_ref(),
        matrix: matrix.as_ref(),
        db_flag: &db_flag(db),
    });
    staging.write(html_path, page.as_bytes())?;
    staging.commit()?;
    Ok(ReportFiles {
        html: html_path.to_path_buf(),
        charts_dir,
        chart_files,
    })
}

/// Reasons that differ only in whole numbers (`the trace rings lost 64026 events`, one per cell
/// and role) as one reason with the range (`lost 43983-1355622 events`) and every name.
fn merge_counts_apart(reasons: Vec<(String, Vec<&str>)>) -> Vec<(String, Vec<&str>)> {
    // The reason with each whole number as '#', each number's lowest and highest, the names.
    type Group<'n> = (String, Vec<(u64, u64)>, Vec<&'n str>);
    let mut groups: Vec<Group> = Vec::new();
    for (reason, names) in reasons {
        let (shape, numbers) = counts_apart(&reason);
        match groups
            .iter_mut()
            .find(|(s, n, _)| *s == shape && n.len() == numbers.len())
        {
            Some((_, ranges, all)) => {
                for (range, n) in ranges.iter_mut().zip(&numbers) {
                    *range = (range.0.min(*n), range.1.max(*n));
                }
                for name in names {
                    if !all.contains(&name) {
                        all.push(name);
                    }
                }
            }
            None => groups.push((shape, numbers.iter().map(|&n| (n, n)).collect(), names)),
        }
    }
    groups
        .into_iter()
        .map(|(shape, ranges, names)| {
            let mut text = String::new();
            for (i, piece) in shape.split('#').enumerate() {
                if let Some(&(low, high)) = i.checked_sub(1).and_then(|k| ranges.get(k)) {
                    text += &if low == high {
                        low.to_string()
                    } else {
                        format!("{low}-{high}")
                    };
                }
                text += piece;
            }
            (text, names)
        })
        .collect()
}

/// `reason` with each whole number (a digit run not touching '.', '#' or another number's
/// separator) replaced by '#', and those numbers; a reason with '#' or an unparsable run is
/// kept whole.
fn counts_apart(reason: &str) -> (String, Vec<u64>) {
    if reason.contains('#') {
        return (reason.to_string(), Vec::new());
    }
    let bytes = reason.as_bytes();
    let (mut shape, mut numbers, mut i) = (String::new(), Vec::new(), 0);
    while i < bytes.len() {
        let end = i + bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        let touches = |k: usize| bytes.get(k).is_some_and(|b| *b == b'.' || *b == b',');
        let whole = end > i && !(i > 0 && touches(i - 1)) && !touches(end);
        match reason[i..end].parse::<u64>() {
            Ok(n) if whole => {
                shape.push('#');
                numbers.push(n);
                i = end;
            }
            _ => {
                let next = end.max(i + reason[i..].chars().next().map_or(1, char::len_utf8));
                shape += &reason[i..next];
                i = next;
            }
        }
    }
    (shape, numbers)
}

#[cfg(test)]
mod tests {
    use super::cells::tests::{run_data, stream_case};
    use super::*;

    /// One caveat for reasons that differ only in a count (one per cell and role), with the
    /// range; decimals and other reasons stay as they are.
    #[test]
    fn reasons_that_differ_only_in_counts_are_one_caveat_with_the_range() {
        let lost = |n: u64| format!("the trace rings lost {n} events (the drain fell behind)");
        let merged = merge_counts_apart(vec![
            (lost(64026), vec!["a", "b"]),
            (lost(1355622), vec!["b", "c"]),
            ("no hardware PMU".to_string(), vec!["d"]),
            (lost(43983), vec!["a"]),
            ("copied fraction 1.00 of 2 sends".to_string(), vec!["e"]),
        ]);
        assert_eq!(
            merged,
            vec![
                (
                    "the trace rings lost 43983-1355622 events (the drain fell behind)".to_string(),
                    vec!["a", "b", "c"]
                ),
                ("no hardware PMU".to_string(), vec!["d"]),
                ("copied fraction 1.00 of 2 sends".to_string(), vec!["e"]),
            ]
        );
    }

    /// Issue 32 B: a caveat never lists a figure's interval bounds as metric names.
    #[test]
    fn caveats_say_an_interval_once_instead_of_its_bound_names() {
        assert_eq!(
            caveat_names(&[
                "a_ns_ci95_low",
                "a_ns_ci95_high",
                "b_ns",
                "c_ns_ci95_high",
                "c_ns_ci95_low"
            ]),
            "b_ns; the 95% interval of a_ns, c_ns"
        );
        assert_eq!(caveat_names(&["b_ns", "d_ns"]), "b_ns, d_ns");
        assert_eq!(caveat_names(&["a_ns_ci95_low"]), "the 95% interval of a_ns");
    }
    use crate::case::CopyMode;

    #[test]
    fn alias_verdicts_are_one_caveat_per_run_with_the_by_reference_warnings() {
        let mut data = run_data(vec![
            (stream_case(CopyMode::OneCopy, 65536, 1), vec![1.0]),
            (stream_case(CopyMode::Sendfile, 65536, 1), vec![1.0]),
            (stream_case(CopyMode::Splice, 65536, 1), vec![1.0]),
        ]);
        for (cell, fraction) in data.cells.iter_mut().zip([0.0, 1.0, 1.0]) {
            let metric =
                crate::observation::Metric::tool("alias_by_reference_fraction", Role::System, fraction, "fraction");
            cell.observation.push(metric);
            if fraction > 0.0 {
                cell.observation
                    .warn(WarningKind::ByReference, "alias probe: by reference");
            }
        }
        let summaries = cells::summarize_run(&data);
        let (caveats, groups) = merge_caveats(
            typed_caveats(&data, &summaries, Path::new("r.db")),
            &warning_groups(&summaries),
        );
        let line = caveats
            .iter()
            .map(|(_, text)| text)
            .find(|c| c.contains("alias probe"))
            .expect("an alias caveat");
        assert!(
            line.contains("copied: one-copy; by reference: sendfile, splice."),
            "{line}"
        );
        assert!(line.starts_with("Sent by reference (2 cases):"), "{line}");
        assert!(groups.iter().all(|g| g.kind != WarningKind::ByReference));
        assert_eq!(alias_verdicts(&[]), None);
    }

    #[test]
    fn caveats_group_repeated_warnings_and_unavailable_metrics() {
        let mut data = run_data(vec![
            (stream_case(CopyMode::OneCopy, 1024, 1), vec![1.0, 1.1]),
            (stream_case(CopyMode::OneCopy, 4096, 1), vec![2.0, 2.1]),
        ]);
        for (i, cell) in data.cells.iter_mut().enumerate() {
            cell.observation.warn(
                WarningKind::ZeroCopyCopied,
                format!("zero-copy: the kernel copied 100% of sends ({i} of {i})"),
            );
            cell.observation.warn(WarningKind::Unpinned, "threads were not pinned");
            // As an older database stored them: text only, twice the same shape.
            cell.observation.warnings.push(
                serde_json::from_str(&format!("\"{i} threads migrated between CPUs during the window\"")).unwrap(),
            );
        }
        data.run.cells_ok = 4;
        data.run.repetitions = 2;
        let summaries = cells::summarize_run(&data);
        let caveats = caveats(&data, &summaries, Path::new("r.db"));
        let groups = warning_groups(&summaries);
        let kinds: Vec<(WarningKind, usize, bool)> = groups.iter().map(|g| (g.kind, g.cells, g.varied)).collect();
        assert_eq!(
            kinds,
            vec![
                (WarningKind::Unpinned, 2, false),
                (WarningKind::ZeroCopyCopied, 2, true),
                (WarningKind::Other, 2, true)
            ],
            "{groups:?}"
        );
        assert!(groups[0]
            .line()
            .starts_with("Threads not pinned (2 cases): threads were not pinned. What to do: pin"));
        assert!(
            groups[1].line().contains("(2 cases): e.g. zero-copy"),
            "{}",
            groups[1].line()
        );
        assert!(
            groups[2].line().starts_with("Workload warning (2 cases): e.g. "),
            "{}",
            groups[2].line()
        );
        assert!(caveats
            .iter()
            .any(|c| c == "Not measured here (no hardware PMU): cache_misses_per_kib."));
        assert!(caveats.iter().any(|c| c.starts_with("cycles_per_byte are estimates")));
        assert!(
            !caveats.iter().any(|c| c.contains("--resume")),
            "a complete run needs no resume: {caveats:?}"
        );
    }

    /// A run whose memory-traffic figures all read unavailable gets one note that says what
    /// they would show and how to get them, and no per-reason line for them; a run where they
    /// were counted gets no note.
    #[test]
    fn unavailable_memory_traffic_is_explained_once() {
        use crate::observation::{Metric, Source};
        let vm = memtraffic::VM_REASON;
        let mut data = run_data(vec![
            (stream_case(CopyMode::OneCopy, 1024, 1), vec![1.0, 1.1]),
            (stream_case(CopyMode::TwoCopy, 1024, 1), vec![2.0, 2.1]),
        ]);
        for cell in data.cells.iter_mut() {
            for name in memtraffic::METRIC_NAMES {
                cell.observation.push(Metric::unavailable(name, Role::System, "B", vm));
            }
        }
        data.run.cells_ok = 4;
        data.run.repetitions = 2;
        let notes = caveats(&data, &cells::summarize_run(&data), Path::new("r.db"));
        let about: Vec<&String> = notes.iter().filter(|c| c.contains("dram_bytes")).collect();
        assert_eq!(about.len(), 1, "{notes:?}");
        assert_eq!(*about[0], memtraffic::unavailable_note(vm));
        assert!(about[0].contains("bare metal") && about[0].contains("CAP_PERFMON"));

        for cell in data.cells.iter_mut() {
            cell.observation.metrics.retain(|m| m.name != memtraffic::DRAM_BYTES);
            cell.observation.push(Metric::new(
                memtraffic::DRAM_BYTES,
                Role::System,
                4096.0,
                "B",
                Source::Pmu,
            ));
        }
        let notes = caveats(&data, &cells::summarize_run(&data), Path::new("r.db"));
        assert!(!notes.iter().any(|c| c.contains("would show")), "{notes:?}");
        assert!(
            notes
                .iter()
                .any(|c| c.starts_with(&format!("Not measured here ({vm})"))),
            "the figures still missing are listed as usual: {notes:?}"
        );
    }

    /// Found in review: the zero-copy and the estimate caveats were each said twice, once as a
    /// caveat and once as a workload warning of the same kind.
    #[test]
    fn caveats_and_warnings_of_one_kind_are_said_once() {
        let caveats = vec![
            (
                Some(WarningKind::NoHardwareCounters),
                "cycles are estimates.".to_string(),
            ),
            (
                Some(WarningKind::NoHardwareCounters),
                "Not measured here (no hardware PMU): x.".to_string(),
            ),
            (None, "The run is interrupted.".to_string()),
        ];
        let group = |kind, cells| WarningGroup {
            kind,
            cells,
            example: "e".into(),
            varied: false,
        };
        let groups = vec![
            group(WarningKind::NoHardwareCounters, 3),
            group(WarningKind::Unpinned, 1),
        ];
        let (merged, rest) = merge_caveats(caveats, &groups);
        assert_eq!(merged.len(), 2, "{merged:?}");
        assert!(
            merged[0]
                .1
                .starts_with("No hardware counters (3 cases): cycles are estimates. Not measured here"),
            "{merged:?}"
        );
        assert!(merged[0].1.contains("What to do:"), "{merged:?}");
        assert_eq!(rest, vec![group(WarningKind::Unpinned, 1)]);
    }

    /// Issue 18 F: every command the report prints for a run names its database unless it is
    /// the default one.
    #[test]
    fn printed_commands_name_the_database_unless_it_is_the_default() {
        assert_eq!(db_flag(Path::new(crate::store::DEFAULT_DB_PATH)), "");
        assert_eq!(db_flag(Path::new("/tmp/x.db")), " --db /tmp/x.db");
        assert_eq!(db_flag(Path::new("my runs/it's.db")), " --db 'my runs/it'\\''s.db'");
        let mut data = run_data(vec![(stream_case(CopyMode::OneCopy, 1024, 1), vec![1.0])]);
        data.run.status = RunStatus::Interrupted;
        data.run.cells_ok = 1;
        let cells = cells::summarize_run(&data);
        let resume = |db: &str| {
            caveats(&data, &cells, Path::new(db))
                .into_iter()
                .find(|c| c.contains("--resume"))
                .expect("a resume caveat")
        };
        assert!(
            resume("lab.db").contains("`iopath run --resume 1 --db lab.db`"),
            "{}",
            resume("lab.db")
        );
        assert!(resume(crate::store::DEFAULT_DB_PATH).contains("`iopath run --resume 1`"));
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("lab.db");
        let files = write_report(&data, &dir.path().join("r.html"), &db).unwrap();
        let html = std::fs::read_to_string(files.html).unwrap();
        let with_db = format!("iopath run --resume 1 --db {}", db.display());
        assert!(html.contains(&with_db), "the resume caveat names the database");
        let report = format!("iopath report 1 --db {}", db.display());
        assert!(html.contains(&report), "the footer names the database");
    }

    #[test]
    fn report_holds_every_chart_the_crossover_table_and_caveats() {
        let data = run_data(vec![
            (stream_case(CopyMode::TwoCopy, 1024, 1), vec![2.0, 2.1, 1.9, 2.05, 1.95]),
            (stream_case(CopyMode::OneCopy, 1024, 1), vec![1.0, 1.1, 0.9, 1.05, 0.95]),
            (
                stream_case(CopyMode::TwoCopy, 65536, 1),
                vec![4.0, 4.1, 3.9, 4.05, 3.95],
            ),
            (
                stream_case(CopyMode::OneCopy, 65536, 1),
                vec![8.0, 8.1, 7.9, 8.05, f64::NAN],
            ),
            // A second thread count, so the chart against threads is drawn.
            (stream_case(CopyMode::OneCopy, 1024, 2), vec![1.0, 1.1, 0.9, 1.05, 0.95]),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let files = write_report(&data, &dir.path().join("r.html"), &dir.path().join("lab.db")).unwrap();
        let html = std::fs::read_to_string(&files.html).unwrap();
        for stem in [
            "throughput_vs_size",
            "time_per_msg_vs_threads",
            "cycles_per_byte_vs_size",
            "cache_misses_vs_size",
        ] {
            assert!(html.contains(&format!("id=\"{stem}\"")), "{stem} missing");
            assert!(files.charts_dir.join(format!("{stem}.png")).is_file());
        }
        assert!(files.charts_dir.join("summary.png").is_file());
        assert!(html.contains("Crossover sizes") && html.contains("from 64KiB"));
        assert!(html.contains("1 cells failed"));
        assert!(html.contains("estimates"));
        assert!(!html.contains("<script"), "self-contained, no scripts");
    }
}
