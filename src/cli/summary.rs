//! What every measuring command prints when its run has ended, from the stored run: each
//! workload's own table (with the failed cells), and for a run of several cases the crossover
//! tables, the findings, caveats and warnings the report gives too.

use super::output::{Table, View};
use super::run;
use super::stored::store_error;
use crate::report;
use crate::store::Store;

/// What a measuring command prints once its run is stored and closed: the tables of its
/// workloads and, with several cases, the crossovers and the findings.
pub fn print(stored: &run::StoredRun) -> anyhow::Result<()> {
    let store = Store::open_existing(stored.db).map_err(store_error)?;
    let data = store.load_run(stored.run_id)?;
    print_workload_tables(&data.records(), stored.view)?;
    // A planned case with nothing stored (the run was stopped before it) has no row in any
    // table: said here, so the summary still accounts for every case.
    for (position, case) in data.cases.iter().enumerate() {
        if !data.cells.iter().any(|c| c.position == position) {
            crate::say!(
                "not run: {} (no repetition stored; `{}` runs it)",
                super::output::safe(&case.label()),
                run::resume_command(stored.run_id, stored.db, stored.keyed)
            )?;
        }
    }
    // One case has nothing to compare: its table is the whole answer.
    if data.cases.len() < 2 {
        return Ok(());
    }
    let analysis = report::analyze(&data, stored.db);
    print_crossovers(&analysis.crossovers, stored.view)?;
    print_records_crossovers(&analysis.records_crossovers, stored.view)?;
    print_findings(&analysis, true)?;
    // What the repetitions cannot support: the interval of the median needs 6, a significant
    // difference 4 a side.
    let reps = data.run.repetitions as usize;
    if reps < crate::measure::stats::MIN_VALUES_FOR_CI {
        let what = if report::crossover::testable(reps, reps) {
            "confidence intervals of the median (6 needed)"
        } else {
            "confidence intervals of the median (6 needed) or significance (4 a side)"
        };
        crate::tell!("note: {reps} repetition(s) per case: too few for {what}; --reps 6 gives them");
    }
    Ok(())
}

pub(super) fn print_crossovers(rows: &[report::crossover::CrossoverRow], view: View) -> anyhow::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut table = Table::new(&["A", "vs B", "threads", "A has higher throughput", "B ahead at (p<0.05)"]);
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
    let (text, left_out) = table.render_view(view);
    super::output::out(text + &super::output::left_out_line(&left_out))
}

/// Net records' crossovers, within 100 columns unless `--wide`: the sentence column goes
/// first when the settings are long (and the line under the table names it).
fn print_records_crossovers(rows: &[report::crossover::RecordsCrossoverRow], view: View) -> anyhow::Result<()> {
    use super::output::Show;
    if rows.is_empty() {
        return Ok(());
    }
    let mut table = Table::with_columns(&[
        ("A", Show::Key),
        ("vs B", Show::Key),
        ("setting", Show::Key),
        ("A sends more payload", Show::Default),
        ("B ahead at (p<0.05)", Show::Key),
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
    let (text, left_out) = table.render_view(view);
    super::output::out(text + &super::output::left_out_line(&left_out))
}

/// The findings, caveats and grouped warnings: what the run says, after its tables, each
/// wrapped at 100 columns. `failures_listed`: the tables above listed each failed cell with
/// its error, so the caveat that counts them is not said again.
pub(super) fn print_findings(analysis: &report::Analysis, failures_listed: bool) -> anyhow::Result<()> {
    use super::output::{out, wrap};
    crate::say!("Findings:")?;
    for line in analysis.findings.lines() {
        // A wrapped line continues two columns right of where it starts.
        let indent = 2 + line.len() - line.trim_start().len();
        out(wrap(&format!("  {line}"), indent + 2))?;
    }
    for (kind, c) in &analysis.caveats {
        if failures_listed && *kind == Some(crate::warning::WarningKind::CellFailed) {
            continue;
        }
        out(wrap(&format!("caveat: {c}"), 4))?;
    }
    for g in &analysis.warnings {
        out(wrap(&format!("warning: {}", g.line()), 4))?;
    }
    // The full lists are in the report; six cases a line are enough here.
    for n in report::cells::noise_lines(&analysis.cells, 6) {
        out(wrap(&format!("noise: {n}"), 4))?;
    }
    Ok(())
}

/// A stored run's records as each workload's own command prints them (`workloads::of`): the
/// same table `net udp-stream`, `servers` or `micro` shows, one per workload of the run in
/// planned order, then a line per failed cell.
fn print_workload_tables(records: &[crate::store::Record], view: View) -> anyhow::Result<()> {
    let mut kinds: Vec<&str> = Vec::new();
    for r in records {
        if !kinds.contains(&r.case.workload()) {
            kinds.push(r.case.workload());
        }
    }
    for kind in kinds {
        let these: Vec<crate::store::Record> = records.iter().filter(|r| r.case.workload() == kind).cloned().collect();
        let table = super::workloads::of(&these[0].case).table;
        super::output::out(run::records_table(&these, view, table))?;
    }
    Ok(())
}
