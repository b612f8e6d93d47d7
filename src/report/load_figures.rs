//! The charts of `net load` runs: the probe's latency CDF idle and loaded per copy mode of the
//! flows (drawn from the quantiles each cell stores, as rr's CDF), the probe's p50 and p99 idle
//! and loaded per mode with their intervals, and the flows' throughput (the slowest, the
//! fastest, their sum) and Jain's fairness index per mode. A panel per everything else:
//! direction, flows, sizes, topology.

use super::cells::CellSummary;
use super::charts::{ChartSpec, Point, Series, XAxis, OKABE_ITO};
use super::figures::{mode_style, Provenance};
use super::rr_figures::cdf_points;
use crate::case::{format_bytes, Endpoint, LoadCase, Topology};
use crate::net::session::observe::cdf_quantiles_named;
use crate::observation::names;
use crate::observation::Role;

/// At most this many panels (settings without their mode); more would be unreadable.
const MAX_PANELS: usize = 12;

/// How far apart the points of one mode sit, so their error bars do not overprint.
const DODGE: f64 = 0.12;

/// What a case is apart from its copy mode: its panel, and its setting in the findings.
pub(super) fn setting(c: &LoadCase) -> String {
    let mut text = format!(
        "{} {} flow{} {} probe {}",
        c.direction,
        c.flows,
        if c.flows == 1 { "" } else { "s" },
        format_bytes(c.size),
        format_bytes(c.probe_size)
    );
    if !matches!(c.net.endpoint, Endpoint::Loopback { .. }) {
        text.push_str(&format!(" {}", Topology::from(&c.net.endpoint)));
    }
    text
}

pub fn load_figures(cells: &[CellSummary]) -> Vec<ChartSpec> {
    let load = super::cells::cases_of::<LoadCase>(cells);
    if load.is_empty() {
        return Vec::new();
    }
    let mut panels: Vec<String> = Vec::new();
    for (c, _) in &load {
        if !panels.contains(&setting(c)) && panels.len() < MAX_PANELS {
            panels.push(setting(c));
        }
    }
    let load: Vec<_> = load.into_iter().filter(|(c, _)| panels.contains(&setting(c))).collect();
    vec![
        cdf_chart(&load, &panels),
        by_mode_chart(
            &load,
            &panels,
            (
                "load_probe_latency_by_mode",
                "Probe latency idle and under load per copy mode of the flows",
                "latency (us)",
            ),
            &[
                ("idle p50", names::LATENCY_IDLE_P50_US, (OKABE_ITO[0], 2)),
                ("loaded p50", names::LATENCY_LOADED_P50_US, (OKABE_ITO[0], 0)),
                ("idle p99", names::LATENCY_IDLE_P99_US, (OKABE_ITO[1], 2)),
                ("loaded p99", names::LATENCY_LOADED_P99_US, (OKABE_ITO[1], 0)),
            ],
            "y: system latency_idle_p50_us, latency_loaded_p50_us, latency_idle_p99_us, latency_loaded_p99_us (the probe's round trip before the flows started, and inside the window while they ran; the median over repetitions)",
        ),
        by_mode_chart(
            &load,
            &panels,
            (
                "load_flow_throughput_by_mode",
                "Bulk flows' throughput per copy mode: the slowest flow, the fastest, all together",
                "Gbit/s",
            ),
            &[
                ("slowest flow", names::FLOW_MIN_GBPS, (OKABE_ITO[1], 1)),
                ("fastest flow", names::FLOW_MAX_GBPS, (OKABE_ITO[2], 2)),
                ("all flows", names::LOAD_GBPS, (OKABE_ITO[0], 0)),
            ],
            "y: system flow_min_gbps, flow_max_gbps, load_gbps (each flow's bytes received inside the window × 8 / the window; all flows: their sum)",
        ),
        ChartSpec {
            y_range: Some((0.0, 1.0)),
            ..by_mode_chart(
                &load,
                &panels,
                (
                    "load_fairness_by_mode",
                    "Fairness among the bulk flows per copy mode (Jain's index)",
                    "Jain's index",
                ),
                &[("Jain's index", names::JAIN_INDEX, (OKABE_ITO[0], 0))],
                "y: system jain_index ((Σx)² / (n·Σx²) over the flows' rates: 1 when all move alike, 1/n when one moves everything)",
            )
        },
    ]
}

/// The panel of a setting among the chart's `panels`: none when there is one (it needs no name).
fn panel_of(setting: &str, panels: &[String]) -> String {
    if panels.len() > 1 {
        setting.to_string()
    } else {
        String::new()
    }
}

/// A case's copy mode as its x: the path's place among the run's paths (1, 2, …), and the
/// x labels.
fn mode_axis(load: &[(&LoadCase, &CellSummary)]) -> (Vec<String>, Vec<(f64, String)>) {
    let mut modes: Vec<_> = load.iter().map(|(c, _)| (c.mode, c.rx_mode)).collect();
    modes.sort_unstable();
    modes.dedup();
    let paths: Vec<String> = modes
        .iter()
        .filter_map(|m| load.iter().find(|(c, _)| (c.mode, c.rx_mode) == *m))
        .map(|(c, _)| c.path())
        .collect();
    let labels = paths
        .iter()
        .enumerate()
        .map(|(i, p)| ((i + 1) as f64, p.clone()))
        .collect();
    (paths, labels)
}

/// A series of a per-mode chart: its name, the metric it plots, its colour and style.
type ModeSeries<'a> = (&'a str, &'a str, ((u8, u8, u8), usize));

/// Metrics of each case at its copy mode: a series per metric (name, metric, colour and
/// style), its points dodged around the mode's tick, a panel per setting.
fn by_mode_chart(
    load: &[(&LoadCase, &CellSummary)],
    panels: &[String],
    (stem, title, y_desc): (&str, &str, &str),
    metrics: &[ModeSeries],
    what: &str,
) -> ChartSpec {
    let (paths, x_labels) = mode_axis(load);
    let mut provenance = Provenance::default();
    let mut series = Vec::new();
    for panel in panels {
        for (i, &(name, metric, style)) in metrics.iter().enumerate() {
            let offset = (i as f64 - (metrics.len() - 1) as f64 / 2.0) * DODGE;
            let points: Vec<Point> = load
                .iter()
                .filter(|(c, _)| setting(c) == *panel)
                .filter_map(|(c, cell)| {
                    let x = paths.iter().position(|p| *p == c.path())? as f64 + 1.0 + offset;
                    provenance.point(cell, (metric, Role::System), x)
                })
                .collect();
            series.extend(Series::of_points(name, style, panel_of(panel, panels), points));
        }
    }
    ChartSpec {
        stem: stem.into(),
        title: title.into(),
        x_desc: "copy mode of the flows".into(),
        x_axis: XAxis::Category,
        y_desc: y_desc.into(),
        caption: provenance.caption(what),
        empty_reason: provenance.empty_reason(),
        series,
        x_labels,
        ..Default::default()
    }
}

/// The probe's latency CDF idle (dotted) and loaded (solid), a colour per copy mode, a panel
/// per setting, with the percentiles and the inflation beside it.
fn cdf_chart(load: &[(&LoadCase, &CellSummary)], panels: &[String]) -> ChartSpec {
    let idle = cdf_quantiles_named(names::LATENCY_IDLE);
    let loaded = cdf_quantiles_named(names::LATENCY_LOADED);
    let mut provenance = Provenance::default();
    let mut series = Vec::new();
    let mut table = vec![[
        "case",
        "idle p50 us",
        "idle p99 us",
        "loaded p50 us",
        "loaded p99 us",
        "loaded p99.9 us",
        "x p50",
    ]
    .map(String::from)
    .to_vec()];
    for (c, cell) in load {
        let (colour, _) = mode_style(c.mode);
        for (pass, quantiles, style) in [("idle", &idle, 2), ("loaded", &loaded, 0)] {
            let points = cdf_points(cell, (quantiles, Role::System), &mut provenance);
            series.extend(Series::of_points(
                format!("{} {pass}", c.path()),
                (colour, style),
                panel_of(&setting(c), panels),
                points,
            ));
        }
        let text = |name: &str| super::fmt_num(cell.summary(name, Role::System).map(|s| s.median));
        table.push(vec![
            c.label(),
            text(names::LATENCY_IDLE_P50_US),
            text(names::LATENCY_IDLE_P99_US),
            text(names::LATENCY_LOADED_P50_US),
            text(names::LATENCY_LOADED_P99_US),
            text(names::LATENCY_LOADED_P999_US),
            text(names::LATENCY_INFLATION_P50),
        ]);
    }
    ChartSpec {
        stem: "load_latency_cdf".into(),
        title: "Probe latency CDF idle and under load per copy mode of the flows".into(),
        x_desc: "probe round trip (us)".into(),
        x_axis: XAxis::Count,
        y_desc: "fraction of round trips".into(),
        caption: provenance.caption(
            "x: system latency_idle_p1_us .. latency_idle_p999_us (dotted: before the flows started) and latency_loaded_p1_us .. latency_loaded_p999_us (solid: inside the window while they ran), the median over repetitions, clipped at p99.9; x p50: latency_inflation_p50, loaded over idle",
        ),
        empty_reason: provenance.empty_reason(),
        series,
        y_range: Some((0.0, 1.0)),
        table,
        ..Default::default()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::cells::summarize_run;
    use super::super::cells::tests::run_data;
    use super::*;
    use crate::case::{Case, CopyMode, Direction, NetParams, RxMode};
    use crate::observation::{Metric, Source};
    use crate::store::RunData;

    pub(crate) fn load_case(mode: CopyMode, flows: usize) -> Case {
        Case::NetLoad(LoadCase {
            flows,
            direction: Direction::Up,
            mode,
            rx_mode: RxMode::paired_with(mode),
            size: 64 << 10,
            probe_size: 64,
            idle_ms: 500,
            probe_interval_us: None,
            congestion: None,
            net: NetParams {
                warmup_ms: 600,
                ..NetParams::for_test()
            },
        })
    }

    /// A run of net-load cells: per case, per repetition, the probe's loaded p99 (us); every
    /// other quantile q at p99 × (1 + q) / 1.99, idle a tenth of loaded, and the flows' figures.
    pub(crate) fn load_run(cases: Vec<(Case, Vec<f64>)>) -> RunData {
        let mut data = run_data(cases.iter().map(|(c, v)| (c.clone(), vec![0.0; v.len()])).collect());
        let p99s: Vec<f64> = cases.iter().flat_map(|(_, v)| v.iter().copied()).collect();
        for (cell, p99) in data.cells.iter_mut().zip(p99s) {
            let mut obs = crate::observation::Observation::default();
            let tool = |name: &str, v: f64, unit: &str| Metric::new(name, Role::System, v, unit, Source::Tool);
            for (stem, scale) in [(names::LATENCY_IDLE, 0.1), (names::LATENCY_LOADED, 1.0)] {
                for (name, q) in cdf_quantiles_named(stem) {
                    obs.push(tool(&name, p99 * scale * (1.0 + q) / 1.99, "us"));
                }
            }
            let inflation = obs.value(names::LATENCY_LOADED_P50_US, Role::System).unwrap()
                / obs.value(names::LATENCY_IDLE_P50_US, Role::System).unwrap();
            obs.push(tool(names::LATENCY_INFLATION_P50, inflation, "ratio"));
            obs.push(tool(names::FLOW_MIN_GBPS, 4.0, "Gbit/s"));
            obs.push(tool(names::FLOW_MAX_GBPS, 6.0, "Gbit/s"));
            obs.push(tool(names::LOAD_GBPS, 10.0, "Gbit/s"));
            obs.push(tool(names::JAIN_INDEX, 0.96, "index"));
            cell.observation = obs;
        }
        data
    }

    #[test]
    fn load_runs_get_idle_and_loaded_cdfs_and_the_per_mode_charts() {
        let data = load_run(vec![
            (load_case(CopyMode::OneCopy, 2), vec![100.0; 3]),
            (load_case(CopyMode::ZeroCopy, 2), vec![200.0; 3]),
            (load_case(CopyMode::OneCopy, 4), vec![300.0; 3]),
        ]);
        let figures = load_figures(&summarize_run(&data));
        let stems: Vec<&str> = figures.iter().map(|f| f.stem.as_str()).collect();
        assert_eq!(
            stems,
            [
                "load_latency_cdf",
                "load_probe_latency_by_mode",
                "load_flow_throughput_by_mode",
                "load_fairness_by_mode"
            ]
        );
        let cdf = &figures[0];
        assert_eq!(cdf.series.len(), 6, "idle and loaded per case");
        assert_eq!(cdf.table.len(), 4, "a heading and one row per case");
        let loaded = cdf.series.iter().find(|s| s.name == "zero-copy loaded").unwrap();
        assert_eq!(loaded.panel, "up 2 flows 64KiB probe 64B");
        assert_eq!(loaded.points.last().unwrap().median, 0.999, "clipped at p99.9 as rr's");
        assert!(loaded.points.windows(2).all(|w| w[0].x <= w[1].x));

        let by_mode = &figures[1];
        assert_eq!(by_mode.x_axis, XAxis::Category);
        let labels: Vec<&str> = by_mode.x_labels.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["one-copy", "zero-copy"]);
        let loaded_p99 = by_mode
            .series
            .iter()
            .find(|s| s.name == "loaded p99" && s.panel == "up 2 flows 64KiB probe 64B")
            .unwrap();
        // Dodged around each mode's tick, the p99 of zero-copy at the second.
        assert_eq!(loaded_p99.points.len(), 2);
        assert!((loaded_p99.points[1].x - 2.0).abs() < 0.5 && loaded_p99.points[1].x != 2.0);
        assert!((loaded_p99.points[1].median - 200.0).abs() < 1e-9);
        assert_eq!(figures[3].y_range, Some((0.0, 1.0)));
        assert!(load_figures(&[]).is_empty());
    }
}
