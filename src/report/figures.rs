//! Which charts a run gets: built from its cell summaries, one set per workload present
//! (stream: six charts and a summary sheet; servers: requests/s and p99 vs clients; micro
//! memlat: latency vs working-set size). Every caption names the metric's sources.

use super::cells::{CellSummary, MetricCell};
use super::charts::{ChartSpec, Point, Series, XAxis};
use crate::case::{format_bytes, Case, CopyMode, StreamCase};
use crate::observation::Role;

fn mode_color(mode: CopyMode) -> (u8, u8, u8) {
    match mode {
        CopyMode::TwoCopy => (200, 55, 45),
        CopyMode::OneCopy => (35, 95, 200),
        CopyMode::ZeroCopy => (25, 150, 70),
    }
}

/// The n-th shade of a colour: the base, then lighter, then darker.
fn shade(color: (u8, u8, u8), n: usize) -> (u8, u8, u8) {
    let mix = |c: u8, toward: f64, amount: f64| (c as f64 + (toward - c as f64) * amount).round() as u8;
    let (toward, amount) = match n % 4 {
        0 => (0.0, 0.0),
        1 => (255.0, 0.45),
        2 => (0.0, 0.45),
        _ => (255.0, 0.7),
    };
    (
        mix(color.0, toward, amount),
        mix(color.1, toward, amount),
        mix(color.2, toward, amount),
    )
}

const PALETTE: [(u8, u8, u8); 8] = [
    (35, 95, 200),
    (200, 55, 45),
    (25, 150, 70),
    (150, 70, 190),
    (230, 140, 20),
    (20, 160, 170),
    (120, 120, 120),
    (180, 60, 130),
];

fn point(x: f64, metric: &MetricCell) -> Option<Point> {
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
struct Provenance {
    sources: Vec<String>,
    unavailable: Vec<String>,
    max_n: usize,
}

impl Provenance {
    fn add(&mut self, metric: &MetricCell) {
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

    fn caption(&self, what: &str) -> String {
        if self.max_n == 0 && !self.unavailable.is_empty() {
            return format!("{what}; not measured in any cell: {}", self.unavailable.join("; "));
        }
        let mut line = format!(
            "{what}; source: {}; error bars: 95% CI of the mean over up to {} repetitions",
            if self.sources.is_empty() {
                "none".into()
            } else {
                self.sources.join(", ")
            },
            self.max_n
        );
        if self.sources.iter().any(|s| s == "estimate") {
            line.push_str("\nESTIMATE: cycles = CPU time x TSC frequency (no hardware PMU), not a counted value");
        }
        if !self.unavailable.is_empty() {
            line.push_str(&format!("\nmissing in some cells: {}", self.unavailable.join("; ")));
        }
        line
    }

    fn empty_reason(&self) -> Option<String> {
        self.unavailable.first().cloned()
    }
}

fn stream_cells(cells: &[CellSummary]) -> Vec<(&StreamCase, &CellSummary)> {
    cells
        .iter()
        .filter_map(|c| match &c.case {
            Case::NetStream(s) => Some((s, c)),
            _ => None,
        })
        .collect()
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

/// A stream metric against message size: one series per mode and thread count.
fn stream_vs_size(
    cells: &[(&StreamCase, &CellSummary)],
    modes: &[CopyMode],
    metric: Metric<'_>,
    stem: &str,
    title: &str,
) -> ChartSpec {
    let threads = sorted_unique(cells.iter().map(|(s, _)| s.threads));
    let mut provenance = Provenance::default();
    let mut series = Vec::new();
    for &mode in modes {
        for (n, &t) in threads.iter().enumerate() {
            let mut points = Vec::new();
            for (s, cell) in cells.iter().filter(|(s, _)| s.mode == mode && s.threads == t) {
                if let Some(m) = cell.metric(metric.name, metric.role) {
                    provenance.add(m);
                    points.extend(point(s.size as f64, m));
                }
            }
            if !points.is_empty() {
                series.push(Series {
                    name: format!("{mode} t{t}"),
                    color: shade(mode_color(mode), n),
                    points,
                });
            }
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
        markers: Vec::new(),
        y_range: None,
    }
}

/// Time per message against threads, one series per mode at up to three sizes.
fn stream_vs_threads(cells: &[(&StreamCase, &CellSummary)], modes: &[CopyMode]) -> ChartSpec {
    let sizes = sorted_unique(cells.iter().map(|(s, _)| s.size));
    let picked: Vec<u64> = match sizes.len() {
        0..=3 => sizes.clone(),
        n => vec![sizes[0], sizes[n / 2], sizes[n - 1]],
    };
    let mut provenance = Provenance::default();
    let mut series = Vec::new();
    for &mode in modes {
        for (n, &size) in picked.iter().enumerate() {
            let mut points = Vec::new();
            for (s, cell) in cells.iter().filter(|(s, _)| s.mode == mode && s.size == size) {
                if let Some(m) = cell.metric("time_per_msg_us", Role::System) {
                    provenance.add(m);
                    points.extend(point(s.threads as f64, m));
                }
            }
            if !points.is_empty() {
                series.push(Series {
                    name: format!("{mode} {}", format_bytes(size)),
                    color: shade(mode_color(mode), n),
                    points,
                });
            }
        }
    }
    ChartSpec {
        stem: "time_per_msg_vs_threads".into(),
        title: "Time per message vs threads".into(),
        x_desc: "client threads (each with its own connection and server thread)".into(),
        x_axis: XAxis::Count,
        y_desc: "time per message (us)".into(),
        caption: provenance.caption("y: system time_per_msg_us"),
        empty_reason: provenance.empty_reason(),
        series,
        markers: Vec::new(),
        y_range: None,
    }
}

/// The six stream charts (empty when the run has no stream cells).
pub fn stream_figures(cells: &[CellSummary]) -> Vec<ChartSpec> {
    let stream = stream_cells(cells);
    if stream.is_empty() {
        return Vec::new();
    }
    let modes = sorted_unique(stream.iter().map(|(s, _)| s.mode));
    let m = |name, role, desc| Metric { name, role, desc };
    vec![
        stream_vs_size(
            &stream,
            &modes,
            m("throughput_gbps", Role::System, "throughput (Gbit/s)"),
            "throughput_vs_size",
            "Throughput vs message size",
        ),
        stream_vs_threads(&stream, &modes),
        stream_vs_size(
            &stream,
            &modes,
            m(
                "total_cycles_per_byte",
                Role::System,
                "cycles per byte, client + server",
            ),
            "cycles_per_byte_vs_size",
            "CPU cycles per byte vs message size",
        ),
        stream_vs_size(
            &stream,
            &modes,
            m(
                "total_cache_misses_per_kib",
                Role::System,
                "cache misses per KiB, client + server",
            ),
            "cache_misses_vs_size",
            "Cache misses per KiB vs message size",
        ),
        stream_vs_size(
            &stream,
            &modes,
            m(
                "total_context_switches_per_msg",
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
                &[CopyMode::ZeroCopy],
                m(
                    "zerocopy_not_copied_fraction",
                    Role::System,
                    "fraction of sends not copied",
                ),
                "zerocopy_not_copied_vs_size",
                "Zero-copy: fraction of sends the kernel did not copy",
            )
        },
    ]
}

/// Servers: requests/s and client p99 latency against clients, one series per model.
pub fn servers_figures(cells: &[CellSummary]) -> Vec<ChartSpec> {
    let servers: Vec<(&crate::case::ServersCase, &CellSummary)> = cells
        .iter()
        .filter_map(|c| match &c.case {
            Case::Servers(s) => Some((s, c)),
            _ => None,
        })
        .collect();
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
    let one_request = models.iter().all(|(_, r)| *r == models[0].1);
    let chart = |name: &str, role: Role, stem: &str, title: &str, desc: &str| {
        let mut provenance = Provenance::default();
        let mut series = Vec::new();
        for (i, (model, request)) in models.iter().enumerate() {
            let mut points = Vec::new();
            for (s, cell) in servers
                .iter()
                .filter(|(s, _)| s.model == *model && s.request == *request)
            {
                if let Some(m) = cell.metric(name, role) {
                    provenance.add(m);
                    points.extend(point(s.clients as f64, m));
                }
            }
            if !points.is_empty() {
                series.push(Series {
                    name: if one_request {
                        model.to_string()
                    } else {
                        format!("{model} {request}")
                    },
                    color: PALETTE[i % PALETTE.len()],
                    points,
                });
            }
        }
        ChartSpec {
            stem: stem.into(),
            title: title.into(),
            x_desc: "concurrent clients".into(),
            x_axis: XAxis::Count,
            y_desc: desc.into(),
            caption: provenance.caption(&format!("y: {role} {name}")),
            empty_reason: provenance.empty_reason(),
            series,
            markers: Vec::new(),
            y_range: None,
        }
    };
    vec![
        chart(
            "requests_per_s",
            Role::System,
            "servers_requests_vs_clients",
            "Requests per second vs clients",
            "requests/s",
        ),
        chart(
            "latency_p99_us",
            Role::Client,
            "servers_p99_vs_clients",
            "p99 latency vs clients",
            "p99 latency (us)",
        ),
    ]
}

/// Cache-level plateaus of the memory-latency curve, from the micro workload's detector, as
/// markers at the largest working set of each plateau: (size in bytes, "L1 1.2 ns").
pub fn memlat_levels(points: &[(u64, f64)]) -> Vec<(f64, String)> {
    crate::micro::detect_levels(points)
        .into_iter()
        .map(|level| {
            (
                level.max_bytes as f64,
                format!("{} {:.1} ns", level.name, level.latency_ns),
            )
        })
        .collect()
}

/// Micro memlat: latency against working-set size.
pub fn micro_figures(cells: &[CellSummary]) -> Vec<ChartSpec> {
    let mut provenance = Provenance::default();
    let mut points = Vec::new();
    for cell in cells {
        let Case::Micro(m) = &cell.case else { continue };
        if m.bench != crate::case::Bench::Memlat {
            continue;
        }
        let Some(size) = m
            .options
            .iter()
            .find(|(k, _)| k == "size_bytes")
            .and_then(|(_, v)| v.parse::<u64>().ok())
        else {
            continue;
        };
        if let Some(metric) = cell.metric("latency_ns", Role::System) {
            provenance.add(metric);
            points.extend(point(size as f64, metric));
        }
    }
    if points.is_empty() {
        return Vec::new();
    }
    let curve: Vec<(u64, f64)> = points.iter().map(|p| (p.x as u64, p.median)).collect();
    vec![ChartSpec {
        stem: "memlat_vs_size".into(),
        title: "Memory load latency vs working set".into(),
        x_desc: "working set (bytes, log scale)".into(),
        x_axis: XAxis::LogBytes,
        y_desc: "latency per load (ns)".into(),
        caption: provenance.caption("y: system latency_ns (random pointer chase)"),
        empty_reason: provenance.empty_reason(),
        series: vec![Series {
            name: "memlat".into(),
            color: PALETTE[0],
            points,
        }],
        markers: memlat_levels(&curve),
        y_range: None,
    }]
}

/// Every chart for the workloads present in the run.
pub fn all_figures(cells: &[CellSummary]) -> Vec<ChartSpec> {
    let mut figures = stream_figures(cells);
    figures.extend(servers_figures(cells));
    figures.extend(micro_figures(cells));
    figures
}

#[cfg(test)]
mod tests {
    use super::super::cells::summarize_run;
    use super::super::cells::tests::{run_data, stream_case};
    use super::*;

    #[test]
    fn stream_runs_get_six_charts_with_sources_in_captions() {
        let data = run_data(vec![
            (stream_case(CopyMode::OneCopy, 1024, 1), vec![1.0, 1.1, 0.9]),
            (stream_case(CopyMode::OneCopy, 4096, 1), vec![2.0, 2.1, 1.9]),
            (stream_case(CopyMode::TwoCopy, 1024, 1), vec![1.0, 1.1, 0.9]),
        ]);
        let figures = all_figures(&summarize_run(&data));
        assert_eq!(figures.len(), 6);
        assert_eq!(figures[0].series.len(), 2);
        let cycles = figures.iter().find(|f| f.stem == "cycles_per_byte_vs_size").unwrap();
        assert!(cycles.caption.contains("ESTIMATE"), "{}", cycles.caption);
        let cache = figures.iter().find(|f| f.stem == "cache_misses_vs_size").unwrap();
        assert!(cache.series.is_empty());
        assert_eq!(cache.empty_reason.as_deref(), Some("unavailable: no hardware PMU"));
    }

    fn run_of(cases: Vec<(Case, Vec<crate::observation::Metric>)>) -> crate::store::RunData {
        let mut data = run_data(vec![]);
        for (position, (case, metrics)) in cases.into_iter().enumerate() {
            for repetition in 0..3 {
                data.cells.push(crate::store::StoredCell {
                    position,
                    repetition,
                    case: case.clone(),
                    observation: crate::observation::Observation {
                        metrics: metrics.clone(),
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

    #[test]
    fn memlat_runs_get_a_latency_curve_with_cache_levels_marked() {
        use crate::observation::{Metric, Source};
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
            .map(|(size, ns)| {
                let case = Case::Micro(crate::case::MicroCase {
                    bench: crate::case::Bench::Memlat,
                    options: vec![("size_bytes".into(), size.to_string())],
                });
                (
                    case,
                    vec![Metric::new("latency_ns", Role::System, ns, "ns", Source::Tool)],
                )
            })
            .collect();
        let figures = all_figures(&summarize_run(&run_of(cases)));
        assert_eq!(figures.len(), 1);
        assert_eq!(figures[0].stem, "memlat_vs_size");
        assert_eq!(figures[0].series[0].points.len(), 11);
        assert!(!figures[0].markers.is_empty(), "the plateaus should be marked");
        assert!(figures[0].markers[0].1.starts_with("L1"), "{:?}", figures[0].markers);
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
        let figures = all_figures(&summarize_run(&run_of(cases)));
        let stems: Vec<&str> = figures.iter().map(|f| f.stem.as_str()).collect();
        assert_eq!(stems, vec!["servers_requests_vs_clients", "servers_p99_vs_clients"]);
        assert_eq!(figures[0].series.len(), 2);
        assert_eq!(figures[1].series[0].points.len(), 3);
    }

    #[test]
    fn runs_without_stream_cells_get_no_stream_charts() {
        assert!(all_figures(&[]).is_empty());
    }
}
