//! The charts of `net rr` / `net crr` runs: transactions per second against request size, the
//! latency CDF of every case (drawn from the quantiles each cell stores, the medians over
//! repetitions) with its percentile table beside it, and the same percentiles from p50 to the
//! maximum as a spectrum on a nines axis.

use super::cells::CellSummary;
use super::charts::{ChartSpec, Point, Series, XAxis};
use super::figures::{mode_style, Provenance};
use crate::case::{format_bytes, RrCase};
use crate::net::session::observe::CDF_QUANTILES;
use crate::observation::names;
use crate::observation::Role;

/// The highest quantile the CDF draws (p99.9).
const CDF_CLIP: f64 = 0.999;

/// At most this many CDF panels (cases without their mode); more would be unreadable.
const MAX_CDF_PANELS: usize = 12;

/// What a case is apart from its mode and request size: the panel of the rate chart.
fn rate_panel(c: &RrCase) -> String {
    let mut text = format!(
        "{} resp {} n{} t{}",
        c.kind.as_str(),
        format_bytes(c.response_size),
        c.inflight,
        c.net.threads
    );
    if let Some(rate) = c.rate {
        text.push_str(&format!(" @{rate}/s"));
    }
    text
}

/// What a case is apart from its mode: the panel of the CDF.
fn cdf_panel(c: &RrCase) -> String {
    format!("{} req {}", rate_panel(c), format_bytes(c.request_size))
}

fn median(cell: &CellSummary, name: &str) -> Option<f64> {
    cell.summary(name, Role::Client).map(|s| s.median)
}

pub fn rr_figures(cells: &[CellSummary]) -> Vec<ChartSpec> {
    let rr = super::cells::cases_of::<RrCase>(cells);
    if rr.is_empty() {
        return Vec::new();
    }
    let rate = rate_chart(&rr);
    // The latency CDF: x the latency at each stored quantile (median over repetitions), y the
    // fraction of transactions at or below it; one panel per case without its mode.
    let mut cdf_panels: Vec<String> = Vec::new();
    for (c, _) in &rr {
        if !cdf_panels.contains(&cdf_panel(c)) && cdf_panels.len() < MAX_CDF_PANELS {
            cdf_panels.push(cdf_panel(c));
        }
    }
    let cdf = cdf_chart(&rr, &cdf_panels);
    let spectrum = spectrum_chart(&rr, &cdf_panels);
    vec![rate, cdf, spectrum]
}

/// The CDF's and the spectrum's panel of a case: none when there is one (it needs no name).
fn panel_of(c: &RrCase, cdf_panels: &[String]) -> String {
    if cdf_panels.len() > 1 {
        cdf_panel(c)
    } else {
        String::new()
    }
}

/// Transactions per second against request size: a line per send mode and receive mode, a
/// panel per everything else.
fn rate_chart(rr: &[(&RrCase, &CellSummary)]) -> ChartSpec {
    // A line per send mode and receive mode (named `send/rx` when not the usual pairing).
    let mut modes: Vec<_> = rr.iter().map(|(c, _)| (c.mode, c.rx_mode)).collect();
    modes.sort_unstable();
    modes.dedup();

    // Transactions per second against request size: a panel per everything else.
    let mut panels: Vec<String> = Vec::new();
    for (c, _) in rr {
        if !panels.contains(&rate_panel(c)) {
            panels.push(rate_panel(c));
        }
    }
    let mut provenance = Provenance::default();
    let mut series = Vec::new();
    for panel in &panels {
        for &(mode, rx_mode) in &modes {
            let mut points: Vec<Point> = Vec::new();
            let mut name = mode.to_string();
            for (c, cell) in rr
                .iter()
                .filter(|(c, _)| (c.mode, c.rx_mode) == (mode, rx_mode) && rate_panel(c) == *panel)
            {
                name = c.path();
                points.extend(provenance.point(cell, (names::TRANSACTIONS_PER_S, Role::System), c.request_size as f64));
            }
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            let panel = if panels.len() > 1 { panel.clone() } else { String::new() };
            series.extend(Series::of_points(name, mode_style(mode), panel, points));
        }
    }
    ChartSpec {
        stem: "rr_transactions_vs_size".into(),
        title: "Transactions per second vs request size".into(),
        x_desc: "request size (bytes, log scale)".into(),
        x_axis: XAxis::LogBytes,
        y_desc: "transactions/s".into(),
        caption: provenance.caption("y: system transactions_per_s (transactions completed in the window / window)"),
        empty_reason: provenance.empty_reason(),
        series,
        ..Default::default()
    }
}

/// The latency CDF and its table of quantiles per case (clipped at p99.9).
fn cdf_chart(rr: &[(&RrCase, &CellSummary)], cdf_panels: &[String]) -> ChartSpec {
    let mut provenance = Provenance::default();
    let mut series = Vec::new();
    let crr = rr.iter().any(|(c, _)| c.kind == crate::case::RrKind::Crr);
    let mut table = vec![{
        let mut head: Vec<String> = ["case", "p50 us", "p90 us", "p99 us", "p99.9 us", "max us"]
            .map(String::from)
            .to_vec();
        if crr {
            head.extend(["connect p50", "close p50"].map(String::from));
        }
        head
    }];
    for (c, cell) in rr.iter().filter(|(c, _)| cdf_panels.contains(&cdf_panel(c))) {
        let points = cdf_points(cell, (&CDF_QUANTILES, Role::Client), &mut provenance);
        series.extend(Series::of_points(
            c.path(),
            mode_style(c.mode),
            panel_of(c, cdf_panels),
            points,
        ));
        let text = |name: &str| super::fmt_num(median(cell, name));
        let mut row = vec![
            c.label(),
            text(names::LATENCY_P50_US),
            text(names::LATENCY_P90_US),
            text(names::LATENCY_P99_US),
            text(names::LATENCY_P999_US),
            text(names::LATENCY_MAX_US),
        ];
        if crr {
            row.push(text(names::CONNECT_P50_US));
            row.push(text(names::CLOSE_P50_US));
        }
        table.push(row);
    }
    ChartSpec {
        stem: "rr_latency_cdf".into(),
        title: "Latency CDF per case (fraction of transactions at or below a latency)".into(),
        x_desc: "latency (us)".into(),
        x_axis: XAxis::Count,
        y_desc: "fraction of transactions".into(),
        caption: provenance.caption(
            "x: client latency_p1_us .. latency_p999_us (the median over repetitions), clipped at p99.9 so one tail point does not take the x range: p99.99 and the maximum are in the table and on the latency spectrum; rr: request sent (open loop: due) to response; crr: connect() to closed",
        ),
        empty_reason: provenance.empty_reason(),
        series,
        y_range: Some((0.0, 1.0)),
        table,
        ..Default::default()
    }
}

/// One cell's latency CDF from the quantiles it stores (`quantiles` of `role`: metric name and
/// level, as [`CDF_QUANTILES`]): x the median over repetitions at each level, y the level;
/// their sources noted in `provenance`. Clipped at p99.9: one tail point (p99.99, the maximum)
/// would take most of the x range and squeeze the body into its first tenth; the tables and
/// the spectrum hold the rest.
pub(super) fn cdf_points<N: AsRef<str>>(
    cell: &CellSummary,
    (quantiles, role): (&[(N, f64)], Role),
    provenance: &mut Provenance,
) -> Vec<Point> {
    let mut points = Vec::new();
    for (name, q) in quantiles.iter().filter(|(_, q)| *q <= CDF_CLIP) {
        let Some(m) = cell.metric(name.as_ref(), role) else {
            continue;
        };
        provenance.add(m);
        if let Some(s) = &m.summary {
            points.push(Point {
                x: s.median,
                median: *q,
                low: *q,
                high: *q,
            });
        }
    }
    points
}

/// The latency spectrum: the quantiles from p50 on against a "nines" axis, the maximum one
/// step past the last.
fn spectrum_chart(rr: &[(&RrCase, &CellSummary)], cdf_panels: &[String]) -> ChartSpec {
    // The same quantiles from p50 on against a "nines" axis (x = log10 1/(1-p): p90 at 1,
    // p99 at 2, ...), the maximum one step past the last: the tail that a CDF squeezes
    // against 1.
    let tail: Vec<(&str, f64)> = CDF_QUANTILES.iter().copied().filter(|(_, q)| *q >= 0.5).collect();
    let nines = |q: f64| -(1.0 - q).log10();
    let max_x = tail.last().map_or(4.0, |(_, q)| nines(*q).round() + 1.0);
    let mut x_labels: Vec<(f64, String)> = tail
        .iter()
        .map(|(name, q)| {
            let label = name.trim_start_matches("latency_").trim_end_matches("_us");
            // p999 is p99.9, p9999 p99.99.
            let label = match label.strip_prefix("p99").filter(|rest| !rest.is_empty()) {
                Some(rest) => format!("p99.{rest}"),
                None => label.to_string(),
            };
            (nines(*q), label)
        })
        .collect();
    x_labels.push((max_x, "max".into()));
    let mut spectrum_provenance = Provenance::default();
    let mut spectrum_series = Vec::new();
    for (c, cell) in rr.iter().filter(|(c, _)| cdf_panels.contains(&cdf_panel(c))) {
        let points: Vec<Point> = tail
            .iter()
            .map(|(name, q)| (*name, nines(*q)))
            .chain([(names::LATENCY_MAX_US, max_x)])
            .filter_map(|(name, x)| spectrum_provenance.point(cell, (name, Role::Client), x))
            .collect();
        spectrum_series.extend(Series::of_points(
            c.path(),
            mode_style(c.mode),
            panel_of(c, cdf_panels),
            points,
        ));
    }
    ChartSpec {
        stem: "rr_latency_spectrum".into(),
        title: "Latency percentile spectrum per case (p50 to max on a nines axis)".into(),
        x_desc: "percentile (x = log10 1/(1-p))".into(),
        x_axis: XAxis::Tail,
        y_desc: "latency (us)".into(),
        caption: spectrum_provenance.caption(
            "y: client latency_p50_us .. latency_p9999_us and latency_max_us (the median over repetitions); x: each percentile p at log10(1/(1-p)), the maximum one step past p99.99",
        ),
        empty_reason: spectrum_provenance.empty_reason(),
        series: spectrum_series,
        log_y: true,
        x_labels,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::cells::summarize_run;
    use super::super::cells::tests::run_data;
    use super::*;
    use crate::case::Case;
    use crate::case::{CopyMode, RrKind};
    use crate::observation::{Metric, Source};

    fn case(mode: CopyMode, request_size: u64) -> Case {
        Case::NetRr(RrCase {
            kind: RrKind::Rr,
            mode,
            rx_mode: crate::case::RxMode::paired_with(mode),
            request_size,
            response_size: 64,
            fields: 1,
            inflight: 1,
            net: crate::case::NetParams {
                warmup_ms: 10,
                perf: true,
                ..crate::case::NetParams::for_test()
            },
            rate: None,
            align: crate::case::Align::Page,
            rx_wake: crate::case::RxWake::Data,
        })
    }

    #[test]
    fn rr_runs_get_a_rate_chart_and_a_cdf_with_its_table() {
        let zerocopy_rx = |mut case: Case| {
            if let Case::NetRr(c) = &mut case {
                c.rx_mode = crate::case::RxMode::Zerocopy;
            }
            case
        };
        let mut data = run_data(vec![
            (case(CopyMode::OneCopy, 64), vec![1.0, 1.0, 1.0]),
            (case(CopyMode::OneCopy, 1024), vec![1.0, 1.0, 1.0]),
            (case(CopyMode::TwoCopy, 64), vec![1.0, 1.0, 1.0]),
            (zerocopy_rx(case(CopyMode::OneCopy, 64)), vec![1.0, 1.0, 1.0]),
        ]);
        for cell in &mut data.cells {
            cell.observation.push(Metric::new(
                "transactions_per_s",
                Role::System,
                1e5,
                "txn/s",
                Source::Tool,
            ));
            for (i, (name, _)) in CDF_QUANTILES.iter().enumerate() {
                cell.observation
                    .push(Metric::new(name, Role::Client, 5.0 + i as f64, "us", Source::Tool));
            }
            cell.observation
                .push(Metric::new("latency_max_us", Role::Client, 100.0, "us", Source::Tool));
        }
        let cells = summarize_run(&data);
        let figures = rr_figures(&cells);
        assert_eq!(figures.len(), 3);
        let spectrum = &figures[2];
        assert_eq!(spectrum.stem, "rr_latency_spectrum");
        let labels: Vec<&str> = spectrum.x_labels.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["p50", "p75", "p90", "p95", "p99", "p99.9", "p99.99", "max"]);
        let xs: Vec<f64> = spectrum.series[0].points.iter().map(|p| p.x).collect();
        assert!(
            (xs[4] - 2.0).abs() < 1e-9 && (xs[6] - 4.0).abs() < 1e-9 && xs[7] == 5.0,
            "{xs:?}"
        );
        assert!(spectrum.log_y);
        let rate = &figures[0];
        assert_eq!(rate.series.len(), 3, "one series per send and receive mode");
        assert!(rate.series.iter().any(|s| s.name == "one-copy/zerocopy"));
        let one_copy = rate.series.iter().find(|s| s.name == "one-copy").unwrap();
        assert_eq!(
            one_copy.points.iter().map(|p| p.x).collect::<Vec<_>>(),
            vec![64.0, 1024.0]
        );
        let cdf = &figures[1];
        assert_eq!(cdf.table.len(), 5, "a heading and one row per case");
        let first = &cdf.series[0];
        // Clipped at p99.9 (issue 32 B: one tail point took 90% of the x range).
        assert_eq!(
            first.points.len(),
            CDF_QUANTILES.iter().filter(|q| q.1 <= CDF_CLIP).count()
        );
        assert!(first
            .points
            .windows(2)
            .all(|w| w[0].x <= w[1].x && w[0].median <= w[1].median));
        assert_eq!(first.points.last().unwrap().median, 0.999);
        assert!(cdf.caption.contains("clipped at p99.9"), "{}", cdf.caption);
        assert!(cdf.caption.contains("source: tool"), "{}", cdf.caption);
    }
}
