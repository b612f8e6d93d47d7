//! The charts of `micro fs --remote` runs, as the seed drew them: per-block read time remote
//! and local against file size (a panel per access pattern and block size), and under
//! contention against the number of readers (a panel per block size). Each point is the
//! median over repetitions of the per-repetition median, with its interval.

use super::cells::CellSummary;
use super::charts::{ChartSpec, Point, Series, XAxis, OKABE_ITO};
use super::figures::Provenance;
use crate::case::{format_bytes, Bench, MicroCase};
use crate::observation::names;
use crate::observation::Role;

/// The two sides drawn: figure name, series name, colour, style.
const SIDES: [(&str, &str, usize, usize); 2] = [
    (names::LOCAL_TIME_PER_READ_US, "local", 0, 0),
    (names::REMOTE_TIME_PER_READ_US, "remote (sshfs)", 1, 1),
];

fn number(case: &MicroCase, name: &str) -> Option<u64> {
    case.option(name)?.parse().ok()
}

/// The remote fs cells: (case, cell).
fn remote_cells(cells: &[CellSummary]) -> Vec<(&MicroCase, &CellSummary)> {
    cells
        .iter()
        .filter_map(|c| c.case.get::<MicroCase>().map(|m| (m, c)))
        .filter(|(m, _)| m.bench == Bench::Fs && m.option("remote").is_some())
        .collect()
}

/// One chart: x from `x_of`, a panel from `panel_of`, local and remote lines per panel.
fn chart(
    cases: &[(&MicroCase, &CellSummary)],
    x_of: impl Fn(&MicroCase) -> Option<u64>,
    panel_of: impl Fn(&MicroCase) -> String,
) -> (Vec<Series>, Provenance) {
    let mut provenance = Provenance::default();
    let mut panels: Vec<String> = Vec::new();
    for (c, _) in cases {
        if !panels.contains(&panel_of(c)) {
            panels.push(panel_of(c));
        }
    }
    let mut series = Vec::new();
    for panel in &panels {
        for (figure, name, color, style) in SIDES {
            let mut points: Vec<Point> = cases
                .iter()
                .filter(|(c, _)| panel_of(c) == *panel)
                .filter_map(|(c, cell)| provenance.point(cell, (figure, Role::System), x_of(c)? as f64))
                .collect();
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            series.extend(Series::of_points(
                name,
                (OKABE_ITO[color], style),
                panel.clone(),
                points,
            ));
        }
    }
    (series, provenance)
}

pub fn remote_fs_figures(cells: &[CellSummary]) -> Vec<ChartSpec> {
    let cases = remote_cells(cells);
    let block = |c: &MicroCase| format_bytes(number(c, "block_bytes").unwrap_or(4096));
    let mut out = Vec::new();
    let reads: Vec<_> = cases
        .iter()
        .copied()
        .filter(|(c, _)| matches!(c.option("variant"), Some("seq_read" | "rand_read")))
        .collect();
    if !reads.is_empty() {
        let (series, provenance) = chart(
            &reads,
            |c| number(c, "file_bytes"),
            |c| format!("{} {}", c.option("variant").unwrap_or("?"), block(c)),
        );
        out.push(ChartSpec {
            stem: "fs_remote_vs_local".into(),
            title: "Per-block read time, remote (sshfs) vs local, by file size".into(),
            x_desc: "file size (bytes, log scale)".into(),
            x_axis: XAxis::LogBytes,
            y_desc: "time per block read (us, median)".into(),
            caption: provenance.caption(
                "y: system local_time_per_read_us and remote_time_per_read_us, the median per case over repetitions; page caches dropped on both sides before every pass",
            ),
            empty_reason: provenance.empty_reason(),
            series,
            log_y: true,
            ..Default::default()
        });
    }
    let contention: Vec<_> = cases
        .iter()
        .copied()
        .filter(|(c, _)| c.option("variant") == Some("contention"))
        .collect();
    if !contention.is_empty() {
        let (series, provenance) = chart(
            &contention,
            |c| number(c, "procs"),
            |c| match number(c, "file_bytes") {
                Some(b) => format!("{} blocks, files of {}", block(c), format_bytes(b)),
                None => format!("{} blocks, files of the default size", block(c)),
            },
        );
        out.push(ChartSpec {
            stem: "fs_remote_contention".into(),
            title: "Per-block read time against readers at once, remote (sshfs) vs local".into(),
            x_desc: "reader processes (each its own file)".into(),
            x_axis: XAxis::Count,
            y_desc: "time per block read (us, median)".into(),
            caption: provenance.caption(
                "y: system local_time_per_read_us and remote_time_per_read_us over every reader, the median per case over repetitions",
            ),
            empty_reason: provenance.empty_reason(),
            series,
            log_y: true,
            ..Default::default()
        });
    }
    out
}
