//! Which charts a run gets: built from its cell summaries, one set per workload present
//! (stream: seven charts as small multiples and a summary sheet; servers: requests/s and p99 vs
//! clients and the latency spectrum; micro memlat: latency vs working-set size with its levels).
//! Every caption names the metric's sources.

use super::cells::{CellSummary, MetricCell};
use super::charts::{ChartSpec, Point, Series, XAxis, OKABE_ITO};
use super::crossover::{rx_crossed, StreamPath};
use crate::case::{format_bytes, CopyMode, RecordsCase, RecordsMode, RxMode, ServersCase, StreamCase};
use crate::micro::levels;
use crate::observation::names;
use crate::observation::Role;
use crate::sys::cache::CacheInfo;

/// Each copy mode's colour (Okabe-Ito) and marker/dash style, the same in every chart.
pub(super) fn mode_style(mode: CopyMode) -> ((u8, u8, u8), usize) {
    match mode {
        CopyMode::TwoCopy => (OKABE_ITO[1], 0),
        CopyMode::OneCopy => (OKABE_ITO[0], 1),
        CopyMode::ZeroCopy => (OKABE_ITO[2], 2),
        CopyMode::Uring => (OKABE_ITO[3], 3),
        CopyMode::UringZc => (OKABE_ITO[4], 4),
        CopyMode::Sendfile => (OKABE_ITO[5], 5),
        CopyMode::Splice => (OKABE_ITO[6], 6),
    }
}

/// A stream path's colour and style: the send mode's, except that when the run crossed receive
/// modes the marker/dash style is the receive mode's (the colour stays the send mode's).
fn path_style(path: StreamPath) -> ((u8, u8, u8), usize) {
    let (color, style) = mode_style(path.mode);
    let style = match path.rx {
        None => style,
        Some(rx) => RxMode::ALL.iter().position(|r| *r == rx).unwrap_or(0),
    };
    (color, style)
}

fn threads_panel(t: usize) -> String {
    format!("{t} thread{}", if t == 1 { "" } else { "s" })
}

pub(super) fn point(x: f64, metric: &MetricCell) -> Option<Point> {
    let s = metric.summary.as_ref()?;
    let (low, high) = s.ci95.unwrap_or((s.median, s.median));
    Some(Point {
        x,
        median: s.median,
        low,
        high,
    })
}

/// Sources and unavailable reasons seen over the metric cells drawn.
#[derive(Default)]
pub(super) struct Provenance {
    sources: Vec<String>,
    unavailable: Vec<String>,
    max_n: usize,
}

impl Provenance {
    pub(super) fn add(&mut self, metric: &MetricCell) {
        for s in &metric.sources {
            let list = if s.starts_with("unavailable") {
                &mut self.unavailable
            } else {
                &mut self.sources
            };
            if !list.contains(s) {
                list.push(s.clone());
            }
        }
        if let Some(s) = &metric.summary {
            self.max_n = self.max_n.max(s.n);
        }
    }

    pub(super) fn caption(&self, what: &str) -> String {
        if self.max_n == 0 && !self.unavailable.is_empty() {
            return format!("{what}; not measured in any cell: {}", self.unavailable.join("; "));
        }
        let bars = if self.max_n >= crate::measure::stats::MIN_VALUES_FOR_CI {
            format!("error bars: 95% CI of the median over up to {} repetitions", self.max_n)
        } else {
            format!(
                "no error bars: {} repetitions are too few for a 95% interval of the median (it needs {})",
                self.max_n,
                crate::measure::stats::MIN_VALUES_FOR_CI
            )
        };
        let mut line = format!(
            "{what}; source: {}; {bars}",
            if self.sources.is_empty() {
                "none".into()
            } else {
                self.sources.join(", ")
            },
        );
        if self.sources.iter().any(|s| s == "estimate") {
            line.push_str("\nESTIMATE: cycles = CPU time x TSC frequency (no hardware PMU), not a counted value");
        }
        if !self.unavailable.is_empty() {
            line.push_str(&format!("\nmissing in some cells: {}", self.unavailable.join("; ")));
        }
        line
    }

    pub(super) fn empty_reason(&self) -> Option<String> {
        self.unavailable.first().cloned()
    }

    /// The point of a cell's metric `(name, role)` at `x`, its sources noted (None: the cell
    /// has no such metric, or no summary of it): one point of a chart's series.
    pub(super) fn point(&mut self, cell: &CellSummary, (name, role): (&str, Role), x: f64) -> Option<Point> {
        let m = cell.metric(name, role)?;
        self.add(m);
        point(x, m)
    }
}

fn sorted_unique<T: Ord + Copy>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = items.collect();
    v.sort_unstable();
    v.dedup();
    v
}

struct Metric<'a> {
    name: &'a str,
    role: Role,
    desc: &'a str,
}

impl<'a> Metric<'a> {
    fn new(name: &'a str, role: Role, desc: &'a str) -> Metric<'a> {
        Metric { name, role, desc }
    }
}

/// A stream metric against message size: one series per mode and thread count.
fn stream_vs_size(
    cells: &[(&StreamCase, &CellSummary)],
    paths: &[StreamPath],
    metric: Metric<'_>,
    stem: &str,
    title: &str,
) -> ChartSpec {
    let threads = sorted_unique(cells.iter().map(|(s, _)| s.net.threads));
    let mut provenance = Provenance::default();
    let mut series = Vec::new();
    // One panel per thread count, one series per mode in it.
    for &t in &threads {
        for &path in paths {
            let points: Vec<Point> = cells
                .iter()
                .filter(|(s, _)| path.matches(s) && s.net.threads == t)
                .filter_map(|(s, cell)| provenance.point(cell, (metric.name, metric.role), s.size as f64))
                .collect();
            let panel = if threads.len() > 1 {
                threads_panel(t)
            } else {
                String::new()
            };
            series.extend(Series::of_points(path.to_string(), path_style(path), panel, points));
        }
    }
    ChartSpec {
        stem: stem.into(),
        title: title.into(),
        x_desc: "message size (bytes, log scale)".into(),
        x_axis: XAxis::LogBytes,
        y_desc: metric.desc.into(),
        caption: provenance.caption(&format!("y: {} {}", metric.role, metric.name)),
        empty_reason: provenance.empty_reason(),
        series,
        ..Default::default()
    }
}

/// Time per message against threads, one series per mode at up to three sizes.
fn stream_vs_threads(cells: &[(&StreamCase, &CellSummary)], paths: &[StreamPath]) -> ChartSpec {
    let sizes = sorted_unique(cells.iter().map(|(s, _)| s.size));
    let picked: Vec<u64> = match sizes.len() {
        0..=3 => sizes.clone(),
        n => vec![sizes[0], sizes[n / 2], sizes[n - 1]],
    };
    let mut provenance = Provenance::default();
    let mut series = Vec::new();
    // One panel per message size, one series per mode in it.
    for &size in &picked {
        for &path in paths {
            let points: Vec<Point> = cells
                .iter()
                .filter(|(s, _)| path.matches(s) && s.size == size)
                .filter_map(|(s, cell)| {
                    provenance.point(cell, (names::TIME_PER_MSG_US, Role::System), s.net.threads as f64)
                })
                .collect();
            let panel = format!("{} messages", format_bytes(size));
            series.extend(Series::of_points(path.to_string(), path_style(path), panel, points));
        }
    }
    ChartSpec {
        stem: "time_per_msg_vs_threads".into(),
        title: "Time per message vs threads".into(),
        x_desc: "client threads (one connection each)".into(),
        x_axis: XAxis::Count,
        y_desc: "time per message (us)".into(),
        caption: provenance.caption("y: system time_per_msg_us"),
        empty_reason: provenance.empty_reason(),
        series,
        ..Default::default()
    }
}

/// One band of a stacked per-byte chart: a role's seconds of each repetition (computed by
/// the function from the cell's metrics named in the list) over the role's bytes, drawn under
/// a name in a colour.
struct Band(
    Role,
    &'static [&'static str],
    fn(&[&MetricCell]) -> Vec<f64>,
    &'static str,
    &'static str,
    (u8, u8, u8),
);

/// The repetitions' values of one metric.
fn only(cells: &[&MetricCell]) -> Vec<f64> {
    cells[0].values.clone()
}

/// Repetition by repetition, the sum of the first two metrics less the sum of the next two
/// (never below 0): CPU time less the network softirq time inside it.
fn first_two_less_next_two(cells: &[&MetricCell]) -> Vec<f64> {
    let sum = |a: &MetricCell, b: &MetricCell| a.values.iter().zip(&b.values).map(|(x, y)| x + y).collect::<Vec<f64>>();
    sum(cells[0], cells[1])
        .iter()
        .zip(sum(cells[2], cells[3]))
        .map(|(cpu, net)| (cpu - net).max(0.0))
        .collect()
}

/// The sum of the two metrics, repetition by repetition.
fn both(cells: &[&MetricCell]) -> Vec<f64> {
    cells[0]
        .values
        .iter()
        .zip(&cells[1].values)
        .map(|(a, b)| a + b)
        .collect()
}

/// A chart of bands of seconds per byte stacked, one panel per path at the smallest thread
/// count; each band the median over the repetitions of (seconds / bytes) of its role, in ns
/// per byte. `title` is followed by the thread count; `y` says what the bands are.
fn stacked_per_byte(
    cells: &[(&StreamCase, &CellSummary)],
    paths: &[StreamPath],
    bands: &[Band],
    (stem, title, y): (&str, &str, &str),
) -> ChartSpec {
    let threads = sorted_unique(cells.iter().map(|(s, _)| s.net.threads));
    let t = threads.first().copied().unwrap_or(1);
    let mut provenance = Provenance::default();
    let mut series = Vec::new();
    for &path in paths {
        let first_of_path = series.len();
        for Band(role, from, seconds, bytes, name, color) in bands {
            let mut points = Vec::new();
            for (s, cell) in cells.iter().filter(|(s, _)| path.matches(s) && s.net.threads == t) {
                let found: Option<Vec<&MetricCell>> = from.iter().map(|n| cell.metric(n, *role)).collect();
                let (Some(found), Some(b)) = (found, cell.metric(bytes, *role)) else {
                    continue;
                };
                found.iter().for_each(|m| provenance.add(m));
                if found.iter().any(|m| m.values.len() != b.values.len()) {
                    continue;
                }
                let mut per_byte: Vec<f64> = seconds(&found)
                    .iter()
                    .zip(&b.values)
                    .filter(|(_, b)| **b > 0.0)
                    .map(|(c, b)| c / b * 1e9)
                    .collect();
                if per_byte.is_empty() {
                    continue;
                }
                let median = crate::measure::stats::median(&mut per_byte);
                points.push(Point {
                    x: s.size as f64,
                    median,
                    low: median,
                    high: median,
                });
            }
            series.extend(Series::of_points(*name, (*color, 0), path.to_string(), points));
        }
        // A stack is drawn only at the sizes where every band of the panel has its figure: a
        // band missing at one size would otherwise read as a band of 0 there.
        let panel: &mut [Series] = &mut series[first_of_path..];
        let common: Vec<f64> = panel.first().map_or_else(Vec::new, |s| {
            s.points
                .iter()
                .map(|p| p.x)
                .filter(|x| panel.iter().all(|o| o.points.iter().any(|q| q.x == *x)))
                .collect()
        });
        for s in panel.iter_mut() {
            s.points.retain(|p| common.contains(&p.x));
        }
        series.retain(|s| !s.points.is_empty());
    }
    let caption = provenance.caption(&format!("{y}, the median per size, stacked"));
    ChartSpec {
        stem: stem.into(),
        title: format!("{title} ({})", threads_panel(t)),
        x_desc: "message size (bytes, log scale)".into(),
        x_axis: XAxis::LogBytes,
        y_desc: "CPU ns per byte (stacked)".into(),
        caption: caption.replace("error bars: 95% CI of the median", "no error bars (stacked medians)"),
        empty_reason: provenance.empty_reason(),
        series,
        stacked: true,
        ..Default::default()
    }
}

/// CPU time per byte moved, split into user and system time of the client and the server,
/// stacked: one panel per mode at the smallest thread count. Each band is the median over the
/// repetitions of (CPU seconds / bytes) of that role.
fn stream_cpu_per_byte(cells: &[(&StreamCase, &CellSummary)], paths: &[StreamPath]) -> ChartSpec {
    let band = |role, cpu, bytes, name, color| Band(role, cpu, only, bytes, name, color);
    let bands = [
        band(
            Role::Client,
            &[names::CPU_USER_S],
            names::BYTES_SENT,
            "client user",
            OKABE_ITO[0],
        ),
        band(
            Role::Client,
            &[names::CPU_SYS_S],
            names::BYTES_SENT,
            "client system",
            OKABE_ITO[5],
        ),
        band(
            Role::Server,
            &[names::CPU_USER_S],
            names::BYTES_RECEIVED,
            "server user",
            OKABE_ITO[1],
        ),
        band(
            Role::Server,
            &[names::CPU_SYS_S],
            names::BYTES_RECEIVED,
            "server system",
            OKABE_ITO[3],
        ),
    ];
    stacked_per_byte(
        cells,
        paths,
        &bands,
        (
            "cpu_per_byte_vs_size",
            "CPU time per byte, user and system per side",
            "y: client and server cpu_user_s and cpu_sys_s over bytes_sent / bytes_received",
        ),
    )
}

/// The network stack's CPU against the application's, per role, stacked: each role's NET_RX +
/// NET_TX softirq time (trace probe) and the rest of its CPU time (user + system less that
/// softirq, which the kernel charges to the interrupted thread's system time), per byte.
fn stream_net_vs_app_cpu(cells: &[(&StreamCase, &CellSummary)], paths: &[StreamPath]) -> ChartSpec {
    const NET: &[&str] = &[names::SOFTIRQ_NET_RX_S, names::SOFTIRQ_NET_TX_S];
    const APP: &[&str] = &[
        names::CPU_USER_S,
        names::CPU_SYS_S,
        names::SOFTIRQ_NET_RX_S,
        names::SOFTIRQ_NET_TX_S,
    ];
    let bands = [
        Band(
            Role::Client,
            APP,
            first_two_less_next_two,
            names::BYTES_SENT,
            "client application",
            OKABE_ITO[0],
        ),
        Band(
            Role::Client,
            NET,
            both,
            names::BYTES_SENT,
            "client net softirq",
            OKABE_ITO[5],
        ),
        Band(
            Role::Server,
            APP,
            first_two_less_next_two,
            names::BYTES_RECEIVED,
            "server application",
            OKABE_ITO[1],
        ),
        Band(
            Role::Server,
            NET,
            both,
            names::BYTES_RECEIVED,
            "server net softirq",
            OKABE_ITO[3],
        ),
    ];
    stacked_per_byte(
        cells,
        paths,
        &bands,
        (
            "net_vs_app_cpu_vs_size",
            "Network softirq vs application CPU per byte, per side",
            "y: per role, softirq_net_rx_s + softirq_net_tx_s (the softirqs that interrupted the role's threads) and \
             cpu_user_s + cpu_sys_s less them, over bytes_sent / bytes_received",
        ),
    )
}

/// The crossover markers of a throughput chart: one per panel and size, labelled with a
/// letter so that labels stay one character wide and never overprint each other however many
/// pairs cross at the same or neighbouring sizes; the key lines (`a (16KiB, 1 thread): one-copy > two-copy, ...`)
/// go into the caption. `panel` names the panel of a thread count.
pub fn crossover_markers(
    rows: &[super::crossover::CrossoverRow],
    panel: impl Fn(usize) -> String,
) -> (Vec<(String, f64, String)>, Vec<String>) {
    let mut at: Vec<(String, u64, Vec<String>)> = Vec::new();
    let mut found: Vec<(usize, u64, String)> = rows
        .iter()
        .filter_map(|r| Some((r.threads, r.result.inside_range()?, format!("{} > {}", r.a, r.b))))
        .collect();
    found.sort_by_key(|f| (f.0, f.1));
    for (threads, size, pair) in found {
        let p = panel(threads);
        match at.iter_mut().find(|(q, s, _)| *q == p && *s == size) {
            Some((_, _, pairs)) => pairs.push(pair),
            None => at.push((p, size, vec![pair])),
        }
    }
    let letter = |i: usize| {
        let (q, r) = (i / 26, i % 26);
        let c = char::from(b'a' + r as u8);
        if q == 0 {
            c.to_string()
        } else {
            format!("{c}{q}")
        }
    };
    let marks = at
        .iter()
        .enumerate()
        .map(|(i, (p, size, _))| (p.clone(), *size as f64, letter(i)))
        .collect();
    let key = at
        .iter()
        .enumerate()
        .map(|(i, (p, size, pairs))| {
            let where_ = if p.is_empty() {
                format_bytes(*size)
            } else {
                format!("{}, {p}", format_bytes(*size))
            };
            format!("{} ({where_}): {}", letter(i), pairs.join(", "))
        })
        .collect();
    (marks, key)
}

/// The six stream charts (empty when the run has no stream cells).
pub fn stream_figures(cells: &[CellSummary]) -> Vec<ChartSpec> {
    let stream = super::cells::cases_of::<StreamCase>(cells);
    if stream.is_empty() {
        return Vec::new();
    }
    // Per send mode, or per send x receive mode pair when the run crossed receive modes.
    let crossed = rx_crossed(stream.iter().map(|(s, _)| *s));
    let paths = sorted_unique(stream.iter().map(|(s, _)| StreamPath::of(s, crossed)));
    let zero_copy_paths: Vec<StreamPath> = paths.iter().copied().filter(|p| p.mode.is_zero_copy()).collect();
    let zerocopy_rx_paths: Vec<StreamPath> = sorted_unique(
        stream
            .iter()
            .filter(|(s, _)| s.rx_mode == RxMode::Zerocopy)
            .map(|(s, _)| StreamPath::of(s, true)),
    );
    let threads = sorted_unique(stream.iter().map(|(s, _)| s.net.threads));
    let mut figures = vec![throughput_with_crossovers(cells, &stream, &paths, &threads)];
    // Against threads only when the run varied them.
    if threads.len() > 1 {
        figures.push(stream_vs_threads(&stream, &paths));
    }
    figures.extend([
        stream_cpu_per_byte(&stream, &paths),
        stream_net_vs_app_cpu(&stream, &paths),
        // A cost per byte falls about as 1/size: on a linear axis everything from 16 KiB on
        // is a flat line at the bottom.
        ChartSpec {
            log_y: true,
            ..stream_vs_size(
                &stream,
                &paths,
                Metric::new(
                    names::TOTAL_CYCLES_PER_BYTE,
                    Role::System,
                    "cycles per byte, client + server",
                ),
                "cycles_per_byte_vs_size",
                "CPU cycles per byte vs message size",
            )
        },
        stream_vs_size(
            &stream,
            &paths,
            Metric::new(
                names::TOTAL_CACHE_MISSES_PER_KIB,
                Role::System,
                "cache misses per KiB, client + server",
            ),
            "cache_misses_vs_size",
            "Cache misses per KiB vs message size",
        ),
        stream_vs_size(
            &stream,
            &paths,
            Metric::new(
                names::TOTAL_CONTEXT_SWITCHES_PER_MSG,
                Role::System,
                "context switches per message, client + server",
            ),
            "context_switches_vs_size",
            "Context switches per message vs message size",
        ),
        ChartSpec {
            y_range: Some((0.0, 1.05)),
            ..stream_vs_size(
                &stream,
                &zero_copy_paths,
                Metric::new(
                    names::ZEROCOPY_NOT_COPIED_FRACTION,
                    Role::System,
                    "fraction of sends not copied",
                ),
                "zerocopy_not_copied_vs_size",
                "Zero-copy: fraction of sends the kernel did not copy",
            )
        },
    ]);
    // What the receive side's kernel mapped instead of copying, when a zerocopy receiver ran.
    if !zerocopy_rx_paths.is_empty() {
        figures.push(ChartSpec {
            y_range: Some((0.0, 1.05)),
            ..stream_vs_size(
                &stream,
                &zerocopy_rx_paths,
                Metric::new(
                    names::RX_MAPPED_FRACTION,
                    Role::Server,
                    "fraction of bytes received mapped",
                ),
                "rx_mapped_vs_size",
                "Receive zero-copy: fraction of received bytes the kernel mapped",
            )
        });
    }
    figures
}

/// Throughput against message size, the crossovers found inside the size range marked in the
/// panel of their thread count at the size from which A is significantly ahead (what the
/// caption promises); a mode ahead from the smallest size on has no crossing to mark (the
/// table says it).
fn throughput_with_crossovers(
    cells: &[CellSummary],
    stream: &[(&StreamCase, &CellSummary)],
    paths: &[StreamPath],
    threads: &[usize],
) -> ChartSpec {
    let (crossover_marks, crossover_key) = crossover_markers(&super::crossover::stream_crossovers(cells), |t| {
        if threads.len() > 1 {
            threads_panel(t)
        } else {
            String::new()
        }
    });
    let mut throughput = stream_vs_size(
        stream,
        paths,
        Metric::new(names::THROUGHPUT_GBPS, Role::System, "throughput (Gbit/s)"),
        "throughput_vs_size",
        "Throughput vs message size",
    );
    if !crossover_marks.is_empty() {
        throughput.caption.push_str(
            "\ndashed verticals: crossovers, at the size from which A is significantly ahead of B \
             (Mann-Whitney U p < 0.05) and never significantly behind at a larger size:",
        );
        for line in &crossover_key {
            throughput.caption.push_str(&format!("\n{line}"));
        }
    }
    throughput.marker_key = crossover_key;
    throughput.panel_markers = crossover_marks;
    throughput
}

/// Each records mode's colour and marker/dash style: copy-out and zero-copy keep the colours
/// of the stream's two-copy and zero-copy, whose cost they share.
fn records_mode_style(mode: RecordsMode) -> ((u8, u8, u8), usize) {
    match mode {
        RecordsMode::CopyOut => (OKABE_ITO[1], 0),
        RecordsMode::Gather => (OKABE_ITO[0], 1),
        RecordsMode::ZeroCopy => (OKABE_ITO[2], 2),
        RecordsMode::UringZc => (OKABE_ITO[4], 3),
    }
}

/// The panel of a records case: its record size, plus whichever other parameter varies in
/// the run (pick, requests in flight, threads), so no panel mixes two settings.
fn records_panel(case: &RecordsCase, all: &[(&RecordsCase, &CellSummary)]) -> String {
    let varies = |f: &dyn Fn(&RecordsCase) -> String| {
        let first = all.first().map(|(c, _)| f(c));
        all.iter().any(|(c, _)| Some(f(c)) != first)
    };
    let mut panel = format!("{} records", format_bytes(case.record_size));
    if varies(&|c| c.pick.to_string()) {
        panel.push_str(&format!(", {}", case.pick));
    }
    if varies(&|c| c.outstanding.to_string()) {
        panel.push_str(&format!(", {} in flight", case.outstanding));
    }
    if varies(&|c| c.net.threads.to_string()) {
        panel.push_str(&format!(", {}", threads_panel(case.net.threads)));
    }
    panel
}

/// The records run's panels in order (record size first), each with its cases.
fn records_panels<'a>(
    cells: &[(&'a RecordsCase, &'a CellSummary)],
) -> Vec<(String, Vec<(&'a RecordsCase, &'a CellSummary)>)> {
    let mut keyed: Vec<((u64, crate::case::Pick, usize, usize), String)> = cells
        .iter()
        .map(|(c, _)| {
            (
                (c.record_size, c.pick, c.outstanding, c.net.threads),
                records_panel(c, cells),
            )
        })
        .collect();
    keyed.sort();
    keyed.dedup();
    keyed
        .into_iter()
        .map(|((size, pick, outstanding, threads), name)| {
            let members = cells
                .iter()
                .filter(|(c, _)| {
                    (c.record_size, c.pick, c.outstanding, c.net.threads) == (size, pick, outstanding, threads)
                })
                .copied()
                .collect();
            (name, members)
        })
        .collect()
}

/// A records metric against records per response: one panel per record size, one series per mode.
fn records_vs_n(cells: &[(&RecordsCase, &CellSummary)], metric: Metric<'_>, stem: &str, title: &str) -> ChartSpec {
    let modes = sorted_unique(cells.iter().map(|(c, _)| c.mode));
    let mut provenance = Provenance::default();
    let mut series = Vec::new();
    for (panel, members) in records_panels(cells) {
        for &mode in &modes {
            let points: Vec<Point> = members
                .iter()
                .filter(|(c, _)| c.mode == mode)
                .filter_map(|(c, cell)| provenance.point(cell, (metric.name, metric.role), c.records as f64))
                .collect();
            series.extend(Series::of_points(
                mode.to_string(),
                records_mode_style(mode),
                panel.clone(),
                points,
            ));
        }
    }
    ChartSpec {
        stem: stem.into(),
        title: title.into(),
        x_desc: "records per response (N)".into(),
        x_axis: XAxis::Count,
        y_desc: metric.desc.into(),
        caption: provenance.caption(&format!("y: {} {}", metric.role, metric.name)),
        empty_reason: provenance.empty_reason(),
        series,
        ..Default::default()
    }
}

/// Copy-out over zero copy, per records count: the ratio of the medians of payload
/// throughput and of memory traffic per payload byte (above 1: copy-out sends more, or costs
/// more memory traffic per byte).
fn records_ratio(cells: &[(&RecordsCase, &CellSummary)]) -> ChartSpec {
    let mut provenance = Provenance::default();
    let mut series = Vec::new();
    let ratios = [
        (names::THROUGHPUT_GBPS, "payload throughput", OKABE_ITO[0], 0),
        (
            names::DRAM_BYTES_PER_PAYLOAD_BYTE,
            "DRAM bytes per payload byte",
            OKABE_ITO[1],
            1,
        ),
    ];
    for (panel, members) in records_panels(cells) {
        for (name, label, color, style) in ratios {
            let mut points = Vec::new();
            for (c, cell) in members.iter().filter(|(c, _)| c.mode == RecordsMode::CopyOut) {
                let Some(zc) = members
                    .iter()
                    .find(|(z, _)| z.mode == RecordsMode::ZeroCopy && z.records == c.records)
                else {
                    continue;
                };
                let (Some(a), Some(b)) = (cell.metric(name, Role::System), zc.1.metric(name, Role::System)) else {
                    continue;
                };
                provenance.add(a);
                provenance.add(b);
                let (Some(a), Some(b)) = (&a.summary, &b.summary) else {
                    continue;
                };
                if b.median > 0.0 {
                    let ratio = a.median / b.median;
                    points.push(Point {
                        x: c.records as f64,
                        median: ratio,
                        low: ratio,
                        high: ratio,
                    });
                }
            }
            series.extend(Series::of_points(label, (color, style), panel.clone(), points));
        }
    }
    let caption = provenance.caption(
        "y: copy-out's median over zero-copy's median of system throughput_gbps and of dram_bytes_per_payload_byte, per records count",
    );
    ChartSpec {
        stem: "records_copy_out_over_zero_copy".into(),
        title: "Copy-out / zero copy, per records count".into(),
        x_desc: "records per response (N)".into(),
        x_axis: XAxis::Count,
        y_desc: "copy-out / zero-copy (ratio of medians)".into(),
        caption: caption.replace("error bars: 95% CI of the median", "no error bars (ratio of medians)"),
        empty_reason: provenance.empty_reason(),
        series,
        ..Default::default()
    }
}

/// Net records: payload throughput, memory traffic per payload byte and CPU per response
/// against records per response by mode, and the copy-out / zero-copy ratio (empty when the
/// run has no records cells).
pub fn records_figures(cells: &[CellSummary]) -> Vec<ChartSpec> {
    let records = super::cells::cases_of::<RecordsCase>(cells);
    if records.is_empty() {
        return Vec::new();
    }
    let m = |name, role, desc| Metric { name, role, desc };
    let mut figures = vec![
        records_vs_n(
            &records,
            m(names::THROUGHPUT_GBPS, Role::System, "payload throughput (Gbit/s)"),
            "records_throughput_vs_records",
            "Payload throughput vs records per response",
        ),
        records_vs_n(
            &records,
            m(
                names::DRAM_BYTES_PER_PAYLOAD_BYTE,
                Role::System,
                "DRAM bytes read + written per payload byte",
            ),
            "records_dram_per_byte_vs_records",
            "Memory traffic per payload byte vs records per response",
        ),
        records_vs_n(
            &records,
            m(names::CPU_US_PER_RESPONSE, Role::Server, "server CPU per response (us)"),
            "records_server_cpu_vs_records",
            "Server CPU per response vs records per response",
        ),
        records_vs_n(
            &records,
            m(names::CPU_US_PER_RESPONSE, Role::Client, "client CPU per response (us)"),
            "records_client_cpu_vs_records",
            "Client CPU per response vs records per response",
        ),
    ];
    let modes = sorted_unique(records.iter().map(|(c, _)| c.mode));
    if modes.contains(&RecordsMode::CopyOut) && modes.contains(&RecordsMode::ZeroCopy) {
        figures.push(records_ratio(&records));
    }
    figures
}

/// Why a cell's figures come from a minority of its clients or connections: the median over
/// its repetitions of the system `served_fraction` is below one half (or, for cells stored
/// without it, a `minority-served` warning). Such a cell is never drawn as a contender.
pub fn minority_served(cell: &CellSummary) -> Option<String> {
    use crate::observation::WarningKind;
    match cell.summary(names::SERVED_FRACTION, Role::System) {
        Some(s) if s.median < 0.5 => {
            let pct = s.median * 100.0;
            let pct = if pct >= 1.0 || pct == 0.0 {
                format!("{pct:.0}")
            } else {
                format!("{pct:.1}")
            };
            Some(format!(
                "{pct}% of its clients or connections served, median over repetitions"
            ))
        }
        Some(_) => None,
        None => cell
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::MinorityServed)
            .then(|| "most of its clients failed".to_string()),
    }
}

/// The servers cells' failure counts beside a figure: a row per model and clients with the
/// figure's median, the clients served, and the failed and timed-out requests (medians over
/// the repetitions), marked when the figures come from a minority of the clients.
fn servers_table(
    servers: &[(&crate::case::ServersCase, &CellSummary)],
    name: &str,
    role: Role,
    head: &str,
) -> Vec<Vec<String>> {
    let one_request = servers.iter().all(|(s, _)| s.request == servers[0].0.request);
    let mut table = vec![
        ["model", "clients", head, "served", "failed req", "timed out", "status"]
            .map(String::from)
            .to_vec(),
    ];
    let med = |cell: &CellSummary, name: &str, role: Role| cell.summary(name, role).map(|s| s.median);
    // Counts as whole numbers (a median of two repetitions may end in .5).
    let count = |v: Option<f64>| match v {
        Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
        other => super::fmt_num(other),
    };
    for (s, cell) in servers {
        let failed =
            med(cell, names::ERRORS, Role::Client).map(|e| e - med(cell, names::TIMEOUTS, Role::Client).unwrap_or(0.0));
        table.push(vec![
            if one_request {
                s.model.to_string()
            } else {
                format!("{} {}", s.model, s.request)
            },
            s.clients.to_string(),
            super::fmt_num(med(cell, name, role)),
            count(med(cell, names::CLIENTS_SERVED, Role::Client)),
            count(failed),
            count(med(cell, names::TIMEOUTS, Role::Client)),
            match minority_served(cell) {
                Some(_) => "most clients failed: not drawn".into(),
                None if cell.ok == 0 => "failed".into(),
                None => "ok".into(),
            },
        ]);
    }
    table
}

/// The caption line naming the cells left out of a chart because their figures come from a
/// minority of their clients.
fn left_out_line(left_out: &[String]) -> String {
    if left_out.is_empty() {
        String::new()
    } else {
        format!(
            "\nNOT DRAWN (figures from a minority of clients or connections, never ranked): {}",
            left_out.join("; ")
        )
    }
}

/// Servers: requests/s and client p99 latency against clients, one series per model, each
/// with the failure counts beside it; cells whose figures come from a minority of their
/// clients are left out of every chart and named.
pub fn servers_figures(cells: &[CellSummary]) -> Vec<ChartSpec> {
    let servers = super::cells::cases_of::<ServersCase>(cells);
    if servers.is_empty() {
        return Vec::new();
    }
    // One series per model and request kind (echo:64, procs:2...).
    let mut models: Vec<(crate::case::Model, crate::case::Request)> = Vec::new();
    for (s, _) in &servers {
        if !models.contains(&(s.model, s.request)) {
            models.push((s.model, s.request));
        }
    }
    let left_out: Vec<String> = servers
        .iter()
        .filter_map(|(s, cell)| {
            minority_served(cell).map(|why| format!("{} at {} clients ({why})", s.model, s.clients))
        })
        .collect();
    let one_request = models.iter().all(|(_, r)| *r == models[0].1);
    let run = ServersRun {
        servers,
        models,
        left_out,
        one_request,
    };
    vec![
        run.vs_clients(
            names::REQUESTS_PER_S,
            Role::System,
            "servers_requests_vs_clients",
            "Requests per second vs clients",
            "requests/s",
            "req/s",
        ),
        run.vs_clients(
            names::LATENCY_P99_US,
            Role::Client,
            "servers_p99_vs_clients",
            "p99 latency vs clients",
            "p99 latency (us)",
            "p99 us",
        ),
        run.latency_spectrum(),
    ]
}

/// A run's servers cells as the charts draw them: a series per model and request kind, the
/// cells whose figures come from a minority of their clients left out and named.
struct ServersRun<'a> {
    servers: Vec<(&'a ServersCase, &'a CellSummary)>,
    models: Vec<(crate::case::Model, crate::case::Request)>,
    left_out: Vec<String>,
    one_request: bool,
}

impl ServersRun<'_> {
    /// The cells of one model and request kind that are drawn.
    fn cells_of(
        &self,
        (model, request): (crate::case::Model, crate::case::Request),
    ) -> impl Iterator<Item = &(&ServersCase, &CellSummary)> {
        self.servers
            .iter()
            .filter(move |(s, c)| s.model == model && s.request == request && minority_served(c).is_none())
    }

    /// The series of the `i`th model and request kind (its name, colour and style), in `panel`.
    fn series(&self, i: usize, points: Vec<Point>, panel: String) -> Series {
        let (model, request) = self.models[i];
        Series {
            name: if self.one_request {
                model.to_string()
            } else {
                format!("{model} {request}")
            },
            color: OKABE_ITO[i % OKABE_ITO.len()],
            points,
            panel,
            style: i,
        }
    }

    /// One metric against the number of clients, with its table.
    fn vs_clients(&self, name: &str, role: Role, stem: &str, title: &str, desc: &str, head: &str) -> ChartSpec {
        let mut provenance = Provenance::default();
        let mut series = Vec::new();
        for (i, model) in self.models.iter().enumerate() {
            let points: Vec<Point> = self
                .cells_of(*model)
                .filter_map(|(s, cell)| provenance.point(cell, (name, role), s.clients as f64))
                .collect();
            if !points.is_empty() {
                series.push(self.series(i, points, String::new()));
            }
        }
        let left_out = &self.left_out;
        ChartSpec {
            stem: stem.into(),
            title: title.into(),
            x_desc: "concurrent clients".into(),
            x_axis: XAxis::Count,
            y_desc: desc.into(),
            caption: provenance.caption(&format!("y: {role} {name}")) + &left_out_line(left_out),
            empty_reason: provenance.empty_reason().or_else(|| {
                (!left_out.is_empty()).then(|| "every cell's figures come from a minority of its clients".into())
            }),
            series,
            table: servers_table(&self.servers, name, role, head),
            ..Default::default()
        }
    }

    /// The latency spectrum: p50..max on a tail axis, one panel per number of clients.
    fn latency_spectrum(&self) -> ChartSpec {
        let mut clients: Vec<usize> = self.servers.iter().map(|(s, _)| s.clients).collect();
        clients.sort_unstable();
        clients.dedup();
        let mut provenance = Provenance::default();
        let mut series = Vec::new();
        for &n in &clients {
            for (i, model) in self.models.iter().enumerate() {
                let Some((_, cell)) = self.cells_of(*model).find(|(s, _)| s.clients == n) else {
                    continue;
                };
                let names = [
                    names::LATENCY_P50_US,
                    names::LATENCY_P90_US,
                    names::LATENCY_P99_US,
                    names::LATENCY_P999_US,
                    names::LATENCY_MAX_US,
                ];
                let points: Vec<Point> = names
                    .iter()
                    .zip(super::charts::TAIL_POINTS)
                    .filter_map(|(name, (_, x))| provenance.point(cell, (name, Role::Client), x))
                    .collect();
                if !points.is_empty() {
                    series.push(self.series(i, points, format!("{n} client{}", if n == 1 { "" } else { "s" })));
                }
            }
        }
        ChartSpec {
            stem: "servers_latency_spectrum".into(),
            title: "Latency percentiles (p50 to max) per number of clients".into(),
            x_desc: "percentile (tail axis)".into(),
            x_axis: XAxis::Tail,
            y_desc: "latency (us)".into(),
            caption: provenance.caption(
                "y: client latency_p50_us .. latency_max_us; failed and timed-out requests: the tables beside requests/s and p99",
            ) + &left_out_line(&self.left_out),
            empty_reason: provenance.empty_reason(),
            series,
            log_y: true,
            ..Default::default()
        }
    }
}

/// The caches the kernel reported on the machine the run was stored with (its `caches`), or
/// none when the stored description has none.
pub fn machine_caches(machine_json: &str) -> Vec<CacheInfo> {
    serde_json::from_str::<serde_json::Value>(machine_json)
        .ok()
        .and_then(|m| serde_json::from_value(m.get("caches")?.clone()).ok())
        .unwrap_or_default()
}

/// The memory levels of a latency curve read against the machine's caches (the same reading
/// and text as `iopath micro memlat` prints), as markers at the largest working set of each
/// plateau, ("L1 1.22 ns"), and the lines for the caption.
pub fn memlat_levels(
    points: &[(u64, f64)],
    cvs: &[(u64, f64)],
    caches: &[CacheInfo],
) -> (Vec<(f64, String)>, Vec<String>) {
    let hierarchy = levels::read_levels_spread(points, cvs, caches);
    let markers = hierarchy
        .rows
        .iter()
        .filter_map(|r| {
            let l = r.level.as_ref()?;
            Some((
                l.max_bytes as f64,
                format!("{} {} ns", r.name, levels::ns_text(l.latency_ns)),
            ))
        })
        .collect();
    (markers, hierarchy.lines())
}

/// Micro memlat: latency against working-set size. Each point is the median over repetitions
/// of the per-repetition figure (itself the median of its samples), the statistic the terminal
/// prints; the levels are read from the same medians.
pub fn micro_figures(cells: &[CellSummary], caches: &[CacheInfo]) -> Vec<ChartSpec> {
    let mut provenance = Provenance::default();
    let mut points = Vec::new();
    let mut values: Vec<(u64, f64)> = Vec::new();
    let mut cvs: Vec<(u64, f64)> = Vec::new();
    for (size, cell) in super::cells::memlat_cells(cells) {
        if let Some(metric) = cell.metric(names::LATENCY_NS, Role::System) {
            provenance.add(metric);
            points.extend(point(size as f64, metric));
            values.extend(metric.values.iter().map(|v| (size, *v)));
        }
        cvs.extend(super::cells::memlat_cvs(size, cell));
    }
    if points.is_empty() {
        return Vec::new();
    }
    let (markers, _) = memlat_levels(&values, &cvs, caches);
    let hierarchy = levels::read_levels_spread(&values, &cvs, caches);
    let mut caption =
        provenance.caption("y: system latency_ns (random pointer chase), the median per working set over repetitions");
    // The levels as a table beside the chart; its notes stay in the caption.
    let mut table = Vec::new();
    if !hierarchy.rows.is_empty() {
        caption.push_str(&format!("\nthe table: {}", levels::HEADING));
        table.push(vec![
            "level".to_string(),
            "working sets".to_string(),
            "latency (ns)".to_string(),
            "kernel reports".to_string(),
        ]);
        for r in &hierarchy.rows {
            table.push(match (&r.level, &r.missing) {
                (Some(l), _) => vec![
                    r.name.clone(),
                    format!("{}..{}", format_bytes(l.min_bytes), format_bytes(l.max_bytes)),
                    levels::ns_text(l.latency_ns),
                    r.kernel.clone(),
                ],
                (None, missing) => vec![
                    r.name.clone(),
                    missing.clone().unwrap_or_else(|| "not found in the curve".into()),
                    String::new(),
                    r.kernel.clone(),
                ],
            });
        }
        for n in &hierarchy.notes {
            caption.push_str(&format!("\nnote: {n}"));
        }
    }
    vec![ChartSpec {
        stem: "memlat_vs_size".into(),
        title: "Memory load latency vs working set".into(),
        x_desc: "working set (bytes, log scale)".into(),
        x_axis: XAxis::LogBytes,
        y_desc: "latency per load (ns, median)".into(),
        caption,
        empty_reason: provenance.empty_reason(),
        series: vec![Series {
            name: "memlat".into(),
            color: OKABE_ITO[0],
            points,
            ..Default::default()
        }],
        markers,
        log_y: true,
        table,
        ..Default::default()
    }]
}

/// A chart only where it carries information: a series whose every value is 0 is left out
/// and named in the caption (when every series is, the chart is that one sentence); a chart
/// whose points all share one x value (one message size, one number of clients) becomes a
/// small table of its medians instead of dots over a lone tick. Tail axes and CDFs, whose x
/// is the quantity drawn, are kept.
pub fn informative(mut spec: ChartSpec) -> ChartSpec {
    if !spec.has_points() {
        return spec;
    }
    let zero = |s: &Series| {
        s.points
            .iter()
            .all(|p| p.median == 0.0 && p.low == 0.0 && p.high == 0.0)
    };
    let mut zeros: Vec<String> = Vec::new();
    for s in spec.series.iter().filter(|s| !s.points.is_empty() && zero(s)) {
        let name = if s.panel.is_empty() {
            s.name.clone()
        } else {
            format!("{} ({})", s.name, s.panel)
        };
        if !zeros.contains(&name) {
            zeros.push(name);
        }
    }
    if !zeros.is_empty() {
        spec.series.retain(|s| !zero(s));
        if spec.has_points() {
            spec.caption
                .push_str(&format!("\nalways 0, not drawn: {}", zeros.join(", ")));
        } else {
            spec.empty_reason = Some(format!("every value is 0 ({})", zeros.join(", ")));
            return spec;
        }
    }
    let is_cdf = spec.y_range == Some((0.0, 1.0)) && spec.stem.ends_with("_cdf");
    let mut xs: Vec<f64> = spec.series.iter().flat_map(|s| s.points.iter().map(|p| p.x)).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    if spec.x_axis == XAxis::Tail || is_cdf || xs.len() != 1 {
        return spec;
    }
    let x_text = match spec.x_axis {
        XAxis::LogBytes => format_bytes(xs[0] as u64),
        XAxis::Category => spec
            .x_labels
            .iter()
            .find(|(x, _)| *x == xs[0])
            .map_or_else(String::new, |(_, name)| name.clone()),
        _ => super::fmt_num(Some(xs[0])),
    };
    let what = spec.x_desc.split(" (").next().unwrap_or_default().to_string();
    spec.empty_reason = Some(format!(
        "one {what} only ({x_text}): the medians are in the table, a chart would be dots over one tick"
    ));
    if spec.table.is_empty() {
        let mut table = vec![vec![
            "series".to_string(),
            format!("{} (median)", spec.y_desc),
            "95% CI of the median".to_string(),
        ]];
        for s in &spec.series {
            for p in &s.points {
                let name = if s.panel.is_empty() {
                    s.name.clone()
                } else {
                    format!("{}, {}", s.name, s.panel)
                };
                let ci = if p.high > p.low {
                    format!("{} .. {}", super::fmt_num(Some(p.low)), super::fmt_num(Some(p.high)))
                } else {
                    "n/a".into()
                };
                table.push(vec![name, super::fmt_num(Some(p.median)), ci]);
            }
        }
        spec.table = table;
    }
    spec.series.clear();
    spec
}

/// Every chart for the workloads present in the run.
/// `caches`: the machine's caches as stored with the run ([`machine_caches`]).
pub fn all_figures(cells: &[CellSummary], caches: &[CacheInfo]) -> Vec<ChartSpec> {
    // Servers charts leave such cells out themselves, beside their failure tables; any other
    // workload's cell whose figures come from a minority of its connections is left out here.
    let (drawn, left_out) = drawable(cells);
    let mut figures = stream_figures(&drawn);
    figures.extend(records_figures(&drawn));
    figures.extend(servers_figures(cells));
    figures.extend(super::rr_figures::rr_figures(&drawn));
    figures.extend(super::udp_figures::udp_figures(&drawn));
    figures.extend(super::udp_rr_figures::udp_rr_figures(&drawn));
    figures.extend(super::load_figures::load_figures(&drawn));
    figures.extend(micro_figures(&drawn, caches));
    figures.extend(super::remote_fs_figures::remote_fs_figures(&drawn));
    figures.extend(super::ab_figures::ab_figures(&drawn));
    for f in figures.iter_mut().filter(|f| !f.stem.starts_with("servers_")) {
        f.caption.push_str(&left_out_line(&left_out));
    }
    figures.into_iter().map(informative).collect()
}

/// The cells other than servers' whose figures come from the majority of their connections,
/// and a description of each one left out (servers cells are all kept: their charts decide).
pub fn drawable(cells: &[CellSummary]) -> (Vec<CellSummary>, Vec<String>) {
    let mut left_out = Vec::new();
    let drawn = cells
        .iter()
        .filter(|c| {
            let why = if c.case.as_workload().charts_judge_minority() {
                None
            } else {
                minority_served(c)
            };
            if let Some(why) = &why {
                left_out.push(format!("{} ({why})", c.label));
            }
            why.is_none()
        })
        .cloned()
        .collect();
    (drawn, left_out)
}

#[cfg(test)]
mod tests {
    use super::super::cells::summarize_run;
    use super::super::cells::tests::{run_data, stream_case};
    use super::*;
    use crate::case::Case;

    fn records_case(mode: RecordsMode, record_size: u64, records: usize) -> Case {
        Case::NetRecords(RecordsCase {
            mode,
            record_size,
            records,
            table_bytes: 1 << 20,
            pick: crate::case::Pick::Random,
            outstanding: 1,
            net: crate::case::NetParams::for_test(),
            prove_copies: false,
            align: crate::case::Align::Page,
        })
    }

    #[test]
    fn records_runs_get_panels_per_record_size_the_ratio_and_the_crossover() {
        let five = |v: f64| vec![v, v * 1.01, v * 0.99, v * 1.02, v * 0.98];
        let data = run_data(vec![
            (records_case(RecordsMode::CopyOut, 128, 8), five(4.0)),
            (records_case(RecordsMode::CopyOut, 128, 16), five(4.0)),
            (records_case(RecordsMode::ZeroCopy, 128, 8), five(2.0)),
            (records_case(RecordsMode::ZeroCopy, 128, 16), five(8.0)),
            (records_case(RecordsMode::CopyOut, 1024, 8), five(4.0)),
            (records_case(RecordsMode::ZeroCopy, 1024, 8), five(4.0)),
        ]);
        let cells = summarize_run(&data);
        let figures = records_figures(&cells);
        let stems: Vec<&str> = figures.iter().map(|f| f.stem.as_str()).collect();
        assert_eq!(
            stems,
            [
                "records_throughput_vs_records",
                "records_dram_per_byte_vs_records",
                "records_server_cpu_vs_records",
                "records_client_cpu_vs_records",
                "records_copy_out_over_zero_copy"
            ]
        );
        assert_eq!(figures[0].panels(), ["128B records", "1KiB records"]);
        assert!(figures[0].caption.contains("source: tool"), "{}", figures[0].caption);
        // No DRAM metric in these cells: nothing drawn, never zeros.
        assert!(!figures[1].has_points());
        let ratio = &figures[4].series[0];
        assert_eq!(ratio.name, "payload throughput");
        assert_eq!(ratio.points.iter().map(|p| p.median).collect::<Vec<_>>(), [2.0, 0.5]);
        let rows = crate::report::crossover::records_crossovers(&cells);
        let zc = rows
            .iter()
            .find(|r| r.a == RecordsMode::ZeroCopy && r.b == RecordsMode::CopyOut && r.record_size == 128)
            .unwrap();
        assert!(
            zc.describe().starts_with("from 16 records of 128B"),
            "{}",
            zc.describe()
        );
        assert_eq!(zc.b_ahead, vec![8]);
        // Every chart of a stream-only run is unchanged: no records chart appears there.
        assert!(records_figures(&summarize_run(&run_data(vec![(
            stream_case(CopyMode::OneCopy, 1024, 1),
            vec![1.0]
        )])))
        .is_empty());
    }

    #[test]
    fn stream_runs_get_seven_charts_with_sources_in_captions() {
        let data = run_data(vec![
            (stream_case(CopyMode::OneCopy, 1024, 1), vec![1.0, 1.1, 0.9]),
            (stream_case(CopyMode::OneCopy, 4096, 1), vec![2.0, 2.1, 1.9]),
            (stream_case(CopyMode::TwoCopy, 1024, 1), vec![1.0, 1.1, 0.9]),
        ]);
        let figures = all_figures(&summarize_run(&data), &[]);
        // One thread count: no chart against threads.
        assert_eq!(figures.len(), 7);
        assert!(figures.iter().all(|f| f.stem != "time_per_msg_vs_threads"));
        assert_eq!(figures[0].series.len(), 2);
        let cycles = figures.iter().find(|f| f.stem == "cycles_per_byte_vs_size").unwrap();
        assert!(cycles.caption.contains("ESTIMATE"), "{}", cycles.caption);
        let cache = figures.iter().find(|f| f.stem == "cache_misses_vs_size").unwrap();
        assert!(cache.series.is_empty());
        assert_eq!(cache.empty_reason.as_deref(), Some("unavailable: no hardware PMU"));
        // No trace probe figures: nothing to stack.
        let net = figures.iter().find(|f| f.stem == "net_vs_app_cpu_vs_size").unwrap();
        assert!(net.series.is_empty());
    }

    /// Issue 35: each role's CPU split into its network softirq time and the rest, per byte.
    #[test]
    fn net_vs_app_cpu_stacks_softirq_under_the_rest_of_each_roles_cpu() {
        use crate::observation::{Metric, Source};
        let m = |name: &str, role, v| Metric::new(name, role, v, "s", Source::Trace);
        let metrics = vec![
            m(names::CPU_USER_S, Role::Client, 0.1),
            m(names::CPU_SYS_S, Role::Client, 0.5),
            m(names::SOFTIRQ_NET_RX_S, Role::Client, 0.2),
            m(names::SOFTIRQ_NET_TX_S, Role::Client, 0.0),
            m(names::BYTES_SENT, Role::Client, 1e9),
            m(names::CPU_USER_S, Role::Server, 0.1),
            m(names::CPU_SYS_S, Role::Server, 0.3),
            m(names::SOFTIRQ_NET_RX_S, Role::Server, 0.05),
            m(names::SOFTIRQ_NET_TX_S, Role::Server, 0.0),
            m(names::BYTES_RECEIVED, Role::Server, 1e9),
        ];
        let data = run_of(vec![(stream_case(CopyMode::TwoCopy, 65536, 1), metrics)]);
        let figures = stream_figures(&summarize_run(&data));
        let net = figures.iter().find(|f| f.stem == "net_vs_app_cpu_vs_size").unwrap();
        let per_byte: Vec<(&str, f64)> = net
            .series
            .iter()
            .map(|s| (s.name.as_str(), s.points[0].median))
            .collect();
        let expect = [
            ("client application", 0.4),
            ("client net softirq", 0.2),
            ("server application", 0.35),
            ("server net softirq", 0.05),
        ];
        for ((name, got), (want_name, want)) in per_byte.iter().zip(expect) {
            assert_eq!(*name, want_name);
            assert!((got - want).abs() < 1e-9, "{name}: {got} ns/B, want {want}");
        }
        assert_eq!(per_byte.len(), 4);
        assert!(net.stacked);
    }

    /// A run that crossed receive modes: one series per send x receive pair, named
    /// `send/rx`, and the mapped-fraction chart when a zerocopy receiver ran.
    #[test]
    fn crossed_rx_modes_get_a_series_per_pair() {
        let rx = |mode, size, rx| match stream_case(mode, size, 1) {
            Case::NetStream(mut s) => {
                s.rx_mode = rx;
                Case::NetStream(s)
            }
            other => other,
        };
        let data = run_data(vec![
            (rx(CopyMode::OneCopy, 1024, RxMode::Scatter), vec![1.0, 1.1, 0.9]),
            (rx(CopyMode::OneCopy, 1024, RxMode::Trunc), vec![2.0, 2.1, 1.9]),
            (rx(CopyMode::ZeroCopy, 1024, RxMode::Zerocopy), vec![1.0, 1.1, 0.9]),
        ]);
        // One size only: the report shows these as tables (`informative`); the series are
        // what they are built from.
        let figures = stream_figures(&summarize_run(&data));
        let names: Vec<&str> = figures[0].series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["one-copy/scatter", "one-copy/trunc", "zero-copy/zerocopy"]);
        assert_eq!(figures.len(), 8);
        assert!(figures.iter().any(|f| f.stem == "rx_mapped_vs_size"));
    }

    /// A run of three repetitions of each case, every one with the same metrics.
    fn run_of(cases: Vec<(Case, Vec<crate::observation::Metric>)>) -> crate::store::RunData {
        run_of_repetitions(
            cases
                .into_iter()
                .map(|(case, metrics)| (case, vec![metrics; 3]))
                .collect(),
        )
    }

    /// A run of each case with the metrics of each of its repetitions.
    fn run_of_repetitions(cases: Vec<(Case, Vec<Vec<crate::observation::Metric>>)>) -> crate::store::RunData {
        let mut data = run_data(vec![]);
        for (position, (case, repetitions)) in cases.into_iter().enumerate() {
            for (repetition, metrics) in repetitions.into_iter().enumerate() {
                data.cells.push(crate::store::StoredCell {
                    position,
                    repetition: repetition as u32,
                    case: case.clone(),
                    observation: crate::observation::Observation {
                        metrics,
                        ..Default::default()
                    },
                    error: None,
                    elapsed_s: 0.1,
                });
            }
            data.cases.push(case);
        }
        data
    }

    /// A micro memlat case at one working-set size.
    fn memlat_case(size: u64) -> Case {
        Case::Micro(crate::case::MicroCase {
            bench: crate::case::Bench::Memlat,
            options: vec![("size_bytes".into(), size.to_string())],
        })
    }

    /// micro memlat's latency metric.
    fn latency_ns(ns: f64) -> crate::observation::Metric {
        use crate::observation::{Metric, Source};
        Metric::new("latency_ns", Role::System, ns, "ns", Source::Tool)
    }

    #[test]
    fn memlat_runs_get_a_latency_curve_with_cache_levels_marked() {
        let curve = [
            (1u64 << 10, 1.0),
            (1 << 12, 1.0),
            (1 << 14, 1.05),
            (1 << 16, 4.0),
            (1 << 18, 4.1),
            (1 << 20, 4.0),
        ]
        .into_iter()
        .chain([
            (1u64 << 23, 20.0),
            (1 << 24, 20.5),
            (1 << 26, 90.0),
            (1 << 27, 91.0),
            (1 << 28, 90.5),
        ]);
        let cases = curve
            .map(|(size, ns)| (memlat_case(size), vec![latency_ns(ns)]))
            .collect();
        let figures = all_figures(&summarize_run(&run_of(cases)), &[]);
        assert_eq!(figures.len(), 1);
        assert_eq!(figures[0].stem, "memlat_vs_size");
        assert_eq!(figures[0].series[0].points.len(), 11);
        assert!(!figures[0].markers.is_empty(), "the plateaus should be marked");
        assert!(figures[0].markers[0].1.starts_with("L1"), "{:?}", figures[0].markers);
    }

    /// Found in review: the report and the terminal must read the same statistic (the median
    /// per working set, not a mean) and print the same levels text, checked against the
    /// machine's caches stored with the run.
    #[test]
    fn memlat_chart_plots_medians_and_reads_levels_like_the_terminal() {
        // Three repetitions per working set; the third is an outlier 10x off, so a mean would
        // differ from the median.
        let curve = [
            (1u64 << 10, 1.2),
            (1 << 12, 1.2),
            (1 << 14, 1.2),
            (1 << 16, 3.8),
            (1 << 17, 3.8),
            (1 << 18, 3.9),
            (1 << 21, 60.0),
            (1 << 23, 300.0),
        ];
        let data = run_of_repetitions(
            curve
                .iter()
                .map(|(size, ns)| {
                    (
                        memlat_case(*size),
                        [1.0, 1.02, 10.0].map(|f| vec![latency_ns(ns * f)]).to_vec(),
                    )
                })
                .collect(),
        );
        let machine = r#"{"caches": [
            {"level": 1, "kind": "Data", "size_bytes": 49152, "line_bytes": 64, "ways": 12, "shared_cpus": "0"},
            {"level": 2, "kind": "Unified", "size_bytes": 1048576, "line_bytes": 64, "ways": 8, "shared_cpus": "0"},
            {"level": 3, "kind": "Unified", "size_bytes": 33554432, "line_bytes": 64, "ways": 16, "shared_cpus": "0-1"}]}"#;
        let caches = machine_caches(machine);
        assert_eq!(caches.len(), 3);
        let figures = all_figures(&summarize_run(&data), &caches);
        let chart = &figures[0];
        let plotted: Vec<f64> = chart.series[0].points.iter().map(|p| p.median).collect();
        let medians: Vec<f64> = curve.iter().map(|(_, ns)| ns * 1.02).collect();
        assert_eq!(plotted, medians, "the median of the repetitions, not their mean");
        // The terminal's reading of the same records: every repetition's point.
        let points: Vec<(u64, f64)> = curve
            .iter()
            .flat_map(|(size, ns)| [1.0, 1.02, 10.0].map(|f| (*size, ns * f)))
            .collect();
        let hierarchy = levels::read_levels(&points, &caches);
        assert_eq!(chart.table.len(), hierarchy.rows.len() + 1, "{:?}", chart.table);
        for (row, level) in chart.table[1..].iter().zip(&hierarchy.rows) {
            assert_eq!(row[0], level.name);
            if let Some(l) = &level.level {
                assert_eq!(row[2], levels::ns_text(l.latency_ns));
            }
        }
        assert!(
            chart
                .table
                .iter()
                .any(|r| r[0] == "DRAM" && r[1].starts_with("not reached")),
            "{:?}",
            chart.table
        );
        assert!(chart.caption.contains(levels::HEADING));
        assert!(chart.log_y, "latencies over levels are drawn on a log axis");
        let names: Vec<&str> = chart.markers.iter().map(|m| m.1.split(" ").next().unwrap()).collect();
        assert_eq!(names, ["L1", "L2", "L3"], "{:?}", chart.markers);
        assert!(chart.markers[2].1.starts_with("L3 (or beyond)"), "{:?}", chart.markers);
        assert!(!chart.caption.contains("of the mean"), "{}", chart.caption);
    }

    #[test]
    fn servers_runs_get_requests_and_p99_per_model() {
        use crate::observation::{Metric, Source};
        let mut cases = Vec::new();
        for model in [crate::case::Model::Threads, crate::case::Model::Epoll] {
            for clients in [1usize, 4, 16] {
                let case = Case::Servers(crate::case::ServersCase {
                    warmup_ms: 10,
                    ..crate::case::ServersCase::new(model, crate::case::Request::Echo(64), clients, 100)
                });
                let metrics = vec![
                    Metric::new(
                        "requests_per_s",
                        Role::System,
                        1000.0 * clients as f64,
                        "req/s",
                        Source::Tool,
                    ),
                    Metric::new("latency_p99_us", Role::Client, 50.0, "us", Source::Tool),
                ];
                cases.push((case, metrics));
            }
        }
        let figures = all_figures(&summarize_run(&run_of(cases)), &[]);
        let stems: Vec<&str> = figures.iter().map(|f| f.stem.as_str()).collect();
        assert_eq!(
            stems,
            vec![
                "servers_requests_vs_clients",
                "servers_p99_vs_clients",
                "servers_latency_spectrum"
            ]
        );
        // One panel per number of clients, p99 at x = 2 on the tail axis.
        assert_eq!(figures[2].panels(), vec!["1 client", "4 clients", "16 clients"]);
        assert_eq!(figures[2].series[0].points[0].x, 2.0);
        assert_eq!(figures[0].series.len(), 2);
        assert_eq!(figures[1].series[0].points.len(), 3);
    }

    /// Issue 19 E12: a model whose clients mostly failed is left out of every servers chart
    /// (never ranked best), named in the captions, and its failure counts sit beside the
    /// rate and the p99.
    #[test]
    fn servers_cells_served_by_a_minority_of_clients_are_not_drawn() {
        use crate::observation::{Metric, Source};
        let mut cases = Vec::new();
        for (model, served, timeouts) in [
            (crate::case::Model::Iterative, 0.001, 999.0),
            (crate::case::Model::Epoll, 1.0, 0.0),
        ] {
            let case = Case::Servers(crate::case::ServersCase::new(
                model,
                crate::case::Request::Echo(64),
                1000,
                100,
            ));
            let tool = |name: &str, role, v: f64, unit: &str| Metric::new(name, role, v, unit, Source::Tool);
            let metrics = vec![
                // The iterative model's one client is fast: it would rank best.
                tool(
                    "requests_per_s",
                    Role::System,
                    if served < 0.5 { 40391.0 } else { 9000.0 },
                    "req/s",
                ),
                tool(
                    "latency_p99_us",
                    Role::Client,
                    if served < 0.5 { 39.8 } else { 900.0 },
                    "us",
                ),
                tool("latency_p50_us", Role::Client, 20.0, "us"),
                tool("served_fraction", Role::System, served, "fraction"),
                tool("clients_served", Role::Client, served * 1000.0, "clients"),
                tool("errors", Role::Client, timeouts, "errors"),
                tool("timeouts", Role::Client, timeouts, "requests"),
            ];
            cases.push((case, metrics));
        }
        let cells = summarize_run(&run_of(cases));
        assert!(minority_served(&cells[0]).is_some());
        assert_eq!(minority_served(&cells[1]), None);
        let figures = servers_figures(&cells);
        for f in &figures {
            let names: Vec<&str> = f.series.iter().map(|s| s.name.as_str()).collect();
            assert_eq!(names, ["epoll"], "{}: only the model that served its clients", f.stem);
            assert!(
                f.caption.contains("NOT DRAWN") && f.caption.contains("iterative at 1000 clients"),
                "{}",
                f.caption
            );
        }
        let table = &figures[1].table;
        assert_eq!(table[0][2], "p99 us");
        let iterative = table.iter().find(|r| r[0] == "iterative").unwrap();
        assert_eq!(iterative[2], "39.80");
        assert_eq!(iterative[3], "1", "clients served");
        assert_eq!(iterative[5], "999", "timed out");
        assert!(iterative[6].starts_with("most clients failed"));
        assert_eq!(table.iter().find(|r| r[0] == "epoll").unwrap()[6], "ok");
    }

    /// Issue 18 E: no chart without information. A series constant at 0 is a sentence, not a
    /// line along the axis; points at a single x are a table, not dots over one tick.
    #[test]
    fn constant_zero_series_and_single_x_charts_become_text_and_tables() {
        let pt = |x: f64, v: f64| Point {
            x,
            median: v,
            low: v,
            high: v,
        };
        let series = |name: &str, points: Vec<Point>| Series {
            name: name.into(),
            points,
            ..Default::default()
        };
        let chart = |series: Vec<Series>| ChartSpec {
            stem: "s".into(),
            title: "t".into(),
            x_desc: "message size (bytes, log scale)".into(),
            x_axis: XAxis::LogBytes,
            y_desc: "context switches per message".into(),
            caption: "y: system x".into(),
            series,
            ..Default::default()
        };
        // Every series 0: one sentence naming them.
        let all_zero = informative(chart(vec![
            series("one-copy", vec![pt(1024.0, 0.0), pt(4096.0, 0.0)]),
            series("two-copy", vec![pt(1024.0, 0.0), pt(4096.0, 0.0)]),
        ]));
        assert!(!all_zero.has_points());
        assert_eq!(
            all_zero.empty_reason.as_deref(),
            Some("every value is 0 (one-copy, two-copy)")
        );
        // One series 0 among others: left out and named in the caption.
        let one_zero = informative(chart(vec![
            series("one-copy", vec![pt(1024.0, 0.0), pt(4096.0, 0.0)]),
            series("two-copy", vec![pt(1024.0, 2.0), pt(4096.0, 3.0)]),
        ]));
        assert_eq!(one_zero.series.len(), 1);
        assert!(
            one_zero.caption.ends_with("always 0, not drawn: one-copy"),
            "{}",
            one_zero.caption
        );
        // A value that is sometimes 0 is information: drawn as it is.
        let some_zero = chart(vec![series("one-copy", vec![pt(1024.0, 0.0), pt(4096.0, 1.0)])]);
        assert_eq!(informative(some_zero.clone()), some_zero);
        // One x value: a table of the medians with their intervals.
        let mut single = chart(vec![
            series(
                "one-copy",
                vec![Point {
                    x: 65536.0,
                    median: 2.0,
                    low: 1.5,
                    high: 2.5,
                }],
            ),
            series("two-copy", vec![pt(65536.0, 3.0)]),
        ]);
        single.series[1].panel = "2 threads".into();
        let single = informative(single);
        assert!(!single.has_points());
        assert_eq!(
            single.empty_reason.as_deref(),
            Some("one message size only (64KiB): the medians are in the table, a chart would be dots over one tick")
        );
        assert_eq!(single.table.len(), 3);
        assert_eq!(single.table[1], ["one-copy", "2.00", "1.50 .. 2.50"]);
        assert_eq!(single.table[2], ["two-copy, 2 threads", "3.00", "n/a"]);
        // A tail axis keeps its one panel of percentiles.
        let mut tail = chart(vec![series("epoll", vec![pt(2.0, 5.0)])]);
        tail.x_axis = XAxis::Tail;
        assert_eq!(informative(tail.clone()), tail);
    }

    /// The class of E12: any workload's cell whose figures come from a minority of its
    /// connections (it publishes `served_fraction` below one half) is left out of its charts
    /// and named, not only servers'.
    #[test]
    fn any_cell_served_by_a_minority_of_its_connections_is_left_out() {
        let mut data = run_data(vec![
            (stream_case(CopyMode::OneCopy, 1024, 1), vec![1.0, 1.1, 0.9]),
            (stream_case(CopyMode::OneCopy, 4096, 1), vec![9.0, 9.1, 8.9]),
            (stream_case(CopyMode::TwoCopy, 1024, 1), vec![1.0, 1.1, 0.9]),
            (stream_case(CopyMode::TwoCopy, 4096, 1), vec![2.0, 2.1, 1.9]),
        ]);
        for cell in data.cells.iter_mut() {
            // One-copy at 4 KiB: one of its four connections carried everything.
            let served = if cell.position == 1 { 0.25 } else { 1.0 };
            cell.observation.push(crate::observation::Metric::tool(
                "served_fraction",
                Role::System,
                served,
                "fraction",
            ));
        }
        let figures = all_figures(&summarize_run(&data), &[]);
        let throughput = &figures[0];
        let one_copy = throughput.series.iter().find(|s| s.name == "one-copy").unwrap();
        assert_eq!(one_copy.points.iter().map(|p| p.x).collect::<Vec<_>>(), [1024.0]);
        assert!(
            throughput.caption.contains("NOT DRAWN")
                && throughput
                    .caption
                    .contains("one-copy 4KiB t1 (25% of its clients or connections served"),
            "{}",
            throughput.caption
        );
    }

    #[test]
    fn runs_without_stream_cells_get_no_stream_charts() {
        assert!(all_figures(&[], &[]).is_empty());
    }
}
