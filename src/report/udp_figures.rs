//! The charts of `net udp-stream` runs: throughput (what the server received) and the share of
//! datagrams lost against datagram size, a line per send/receive mode pair, a panel per
//! everything else (threads, rate, receive buffer, batch).

use super::cells::CellSummary;
use super::charts::{ChartSpec, Point, Series, XAxis, OKABE_ITO};
use super::figures::Provenance;
use crate::case::{format_bytes, UdpRecvMode, UdpSendMode, UdpStreamCase};
use crate::observation::names;
use crate::observation::Role;

/// What a case is apart from its modes and size: the panel.
fn panel(c: &UdpStreamCase) -> String {
    let mut text = format!("t{}", c.net.threads);
    if c.batches() {
        text.push_str(&format!(" b{}", c.batch));
    }
    text.push_str(&c.rate.map_or(" unpaced".to_string(), |r| format!(" @{r}/s")));
    if let Some(rcvbuf) = c.rcvbuf {
        text.push_str(&format!(" rcvbuf {}", format_bytes(rcvbuf)));
    }
    text
}

/// A mode pair's colour (its send mode) and style (its receive mode).
pub(super) fn style(mode: UdpSendMode, rx: UdpRecvMode) -> ((u8, u8, u8), usize) {
    let colour = UdpSendMode::ALL.iter().position(|m| *m == mode).unwrap_or(0);
    let style = UdpRecvMode::ALL.iter().position(|m| *m == rx).unwrap_or(0);
    (OKABE_ITO[colour % OKABE_ITO.len()], style)
}

/// What places a case on a mode-pair chart: its send and receive modes, its panel and its x.
pub(super) type Place<C> = fn(&C) -> (UdpSendMode, UdpRecvMode, String, f64);

/// A mode-pair chart's words (stem, title, y description, what its caption says y is), the
/// metric it plots and its y range, if fixed.
pub(super) type PairChart<'a> = ((&'a str, &'a str, &'a str, &'a str), &'a str, Option<(f64, f64)>);

/// The mode-pair charts of workload `C`'s cells, none without a case: each of `charts` plots
/// its metric of `role` against the x named `x_desc`. udp-stream's and udp-rr's figures.
pub(super) fn mode_pair_figures<C: crate::case::Workload>(
    cells: &[CellSummary],
    place: Place<C>,
    (role, x_desc): (Role, &str),
    charts: &[PairChart],
) -> Vec<ChartSpec> {
    let cases = super::cells::cases_of::<C>(cells);
    if cases.is_empty() {
        return Vec::new();
    }
    charts
        .iter()
        .map(|&(text, name, y_range)| mode_pair_chart(&cases, place, text, (name, role), x_desc, y_range))
        .collect()
}

/// One chart of `name` (of `role`) against the x that `place` gives each case, a line per
/// send/receive mode pair and a panel per distinct panel text.
fn mode_pair_chart<C>(
    cases: &[(&C, &CellSummary)],
    place: Place<C>,
    (stem, title, y_desc, what): (&str, &str, &str, &str),
    (name, role): (&str, Role),
    x_desc: &str,
    y_range: Option<(f64, f64)>,
) -> ChartSpec {
    let placed: Vec<_> = cases.iter().map(|(c, cell)| (place(c), *cell)).collect();
    let mut pairs: Vec<_> = placed.iter().map(|((m, r, _, _), _)| (*m, *r)).collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut panels: Vec<&String> = Vec::new();
    for ((_, _, p, _), _) in &placed {
        if !panels.contains(&p) {
            panels.push(p);
        }
    }
    let mut provenance = Provenance::default();
    let mut series = Vec::new();
    for p in &panels {
        for &(mode, rx) in &pairs {
            let mut points: Vec<Point> = placed
                .iter()
                .filter(|((m, r, panel, _), _)| (*m, *r) == (mode, rx) && panel == *p)
                .filter_map(|((_, _, _, x), cell)| provenance.point(cell, (name, role), *x))
                .collect();
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            let panel = if panels.len() > 1 { (*p).clone() } else { String::new() };
            series.extend(Series::of_points(
                format!("{mode}/{rx}"),
                style(mode, rx),
                panel,
                points,
            ));
        }
    }
    ChartSpec {
        stem: stem.into(),
        title: title.into(),
        x_desc: x_desc.into(),
        x_axis: XAxis::LogBytes,
        y_desc: y_desc.into(),
        caption: provenance.caption(what),
        empty_reason: provenance.empty_reason(),
        series,
        y_range,
        ..Default::default()
    }
}

pub fn udp_figures(cells: &[CellSummary]) -> Vec<ChartSpec> {
    mode_pair_figures::<UdpStreamCase>(
        cells,
        |c| (c.mode, c.rx_mode, panel(c), c.size as f64),
        (Role::System, "datagram size (bytes, log scale)"),
        &[
            (
                (
                    "udp_throughput_vs_size",
                    "UDP throughput received vs datagram size",
                    "Gbit/s",
                    "y: system throughput_gbps (payload bytes the server received in its window × 8 / window)",
                ),
                names::THROUGHPUT_GBPS,
                None,
            ),
            (
                (
                    "udp_loss_vs_size",
                    "UDP datagrams lost vs datagram size",
                    "share of datagrams lost",
                    "y: system loss_fraction (datagrams sent in the session that never arrived, after the server's drain / sent)",
                ),
                names::LOSS_FRACTION,
                Some((0.0, 1.0)),
            ),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panels_name_what_is_not_on_the_axes_and_pairs_differ_in_colour_or_style() {
        let mut seen = Vec::new();
        for mode in UdpSendMode::ALL {
            for rx in UdpRecvMode::ALL {
                let s = style(mode, rx);
                assert!(!seen.contains(&s), "{mode}/{rx}");
                seen.push(s);
            }
        }
        let case = UdpStreamCase {
            mode: UdpSendMode::Gso,
            rx_mode: UdpRecvMode::Recv,
            size: 1024,
            batch: 16,
            rate: None,
            rcvbuf: Some(4096),
            net: crate::case::NetParams {
                threads: 2,
                ..crate::case::NetParams::for_test()
            },
        };
        assert_eq!(panel(&case), "t2 b16 unpaced rcvbuf 4KiB");
        assert!(udp_figures(&[]).is_empty());
    }
}
