//! Per-cell statistics: a run's repetitions grouped by case, each metric summarised (median,
//! mean, stddev, CI95, CV, MAD outliers), plus client+server totals and noise warnings.

use crate::case::Case;
use crate::measure::stats::{summarize, Summary};
use crate::observation::names;
use crate::observation::{Observation, Role, Warning};
use crate::store::RunData;

/// CV above this earns a noise warning.
pub const NOISY_CV: f64 = 0.05;

/// One metric of one case over its repetitions.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricCell {
    pub role: Role,
    pub name: String,
    pub unit: String,
    /// Distinct sources seen over the repetitions (`pmu`, `estimate`, `unavailable: ...`).
    pub sources: Vec<String>,
    /// The available values in repetition order.
    pub values: Vec<f64>,
    pub summary: Option<Summary>,
}

impl MetricCell {
    /// "estimate", "pmu", "pmu+estimate", or the unavailable reason when no value exists.
    pub fn source_text(&self) -> String {
        self.sources.join("+")
    }

    pub fn is_estimate(&self) -> bool {
        self.sources.iter().any(|s| s == "estimate")
    }
}

/// One case of a run: its repetitions summarised.
#[derive(Debug, Clone, PartialEq)]
pub struct CellSummary {
    pub position: usize,
    pub case: Case,
    pub label: String,
    /// Successful repetitions.
    pub ok: usize,
    /// Error text of each failed repetition.
    pub failures: Vec<String>,
    pub metrics: Vec<MetricCell>,
    /// Every distinct warning the workload gave for this case.
    pub warnings: Vec<Warning>,
}

impl CellSummary {
    pub fn metric(&self, name: &str, role: Role) -> Option<&MetricCell> {
        self.metrics.iter().find(|m| m.name == name && m.role == role)
    }

    pub fn summary(&self, name: &str, role: Role) -> Option<&Summary> {
        self.metric(name, role).and_then(|m| m.summary.as_ref())
    }
}

/// The metric that answers "how fast" for a workload, and whether higher is better (the
/// case's `Workload::headline`).
pub fn headline(case: &Case) -> (&'static str, Role, bool) {
    let h = case.as_workload().headline();
    (h.name, h.role, h.higher_is_better)
}

impl CellSummary {
    /// The cell's headline metric: the workload's, for a microbenchmark its bench's (see
    /// `headline`).
    pub fn headline_metric(&self) -> Option<&MetricCell> {
        let (name, role, _) = headline(&self.case);
        self.metric(name, role)
    }
}

/// Metrics summed over client and server per repetition: the whole cost of moving a byte.
pub const TOTALS: [(&str, &str); 3] = [
    (names::CYCLES_PER_BYTE, names::TOTAL_CYCLES_PER_BYTE),
    (names::CONTEXT_SWITCHES_PER_MSG, names::TOTAL_CONTEXT_SWITCHES_PER_MSG),
    (names::CACHE_MISSES_PER_KIB, names::TOTAL_CACHE_MISSES_PER_KIB),
];

fn metric_cell(observations: &[&Observation], name: &str, role: Role) -> Option<MetricCell> {
    let mut unit = None;
    let mut sources: Vec<String> = Vec::new();
    let mut values = Vec::new();
    for obs in observations {
        if let Some(m) = obs.get(name, role) {
            unit.get_or_insert_with(|| m.unit.clone());
            let source = m.source.to_string();
            if !sources.contains(&source) {
                sources.push(source);
            }
            if let Some(v) = m.value.filter(|v| v.is_finite()) {
                values.push(v);
            }
        }
    }
    Some(MetricCell {
        role,
        name: name.to_string(),
        unit: unit?,
        summary: summarize(&values),
        sources,
        values,
    })
}

/// Client + server per repetition; a repetition missing either side is left out.
fn total_cell(observations: &[&Observation], name: &str, total_name: &str) -> Option<MetricCell> {
    let mut unit = None;
    let mut sources: Vec<String> = Vec::new();
    let mut values = Vec::new();
    for obs in observations {
        let (client, server) = (obs.get(name, Role::Client), obs.get(name, Role::Server));
        for side in [client, server].into_iter().flatten() {
            unit.get_or_insert_with(|| side.unit.clone());
            let source = side.source.to_string();
            if !sources.contains(&source) {
                sources.push(source);
            }
        }
        if let (Some(a), Some(b)) = (client.and_then(|c| c.value), server.and_then(|s| s.value)) {
            values.push(a + b);
        }
    }
    Some(MetricCell {
        role: Role::System,
        name: total_name.to_string(),
        unit: unit?,
        summary: summarize(&values),
        sources,
        values,
    })
}

/// The cells of one workload type with their case (`cases_of::<StreamCase>(cells)`), in order:
/// what every workload's charts start from.
pub fn cases_of<T: crate::case::Workload>(cells: &[CellSummary]) -> Vec<(&T, &CellSummary)> {
    cells.iter().filter_map(|c| c.case.get::<T>().map(|t| (t, c))).collect()
}

/// micro memlat's cells with their working set's size in bytes (a cell without one is left
/// out).
pub fn memlat_cells(cells: &[CellSummary]) -> impl Iterator<Item = (u64, &CellSummary)> {
    cells.iter().filter_map(|cell| {
        let m = cell.case.get::<crate::case::MicroCase>()?;
        if m.bench != crate::case::Bench::Memlat {
            return None;
        }
        let size = m
            .options
            .iter()
            .find(|(k, _)| k == "size_bytes")
            .and_then(|(_, v)| v.parse::<u64>().ok())?;
        Some((size, cell))
    })
}

/// A memlat cell's spread per repetition (bytes, CV), from its latency means and deviations.
pub fn memlat_cvs(size: u64, cell: &CellSummary) -> Vec<(u64, f64)> {
    match (
        cell.metric(names::LATENCY_NS_MEAN, Role::System),
        cell.metric(names::LATENCY_NS_STDDEV, Role::System),
    ) {
        (Some(mean), Some(sd)) => crate::micro::levels::cvs_of(size, &mean.values, &sd.values),
        _ => Vec::new(),
    }
}

/// Summarise every case of a run, in planned order.
pub fn summarize_run(data: &RunData) -> Vec<CellSummary> {
    data.cases
        .iter()
        .enumerate()
        .map(|(position, case)| {
            let cells: Vec<_> = data.cells.iter().filter(|c| c.position == position).collect();
            let label = match data.ab.as_ref().and_then(|ab| ab.variants.get(position)) {
                Some(variant) => super::ab::variant_label(&case.label(), *variant),
                None => case.label(),
            };
            summarize_case(
                position,
                case,
                label,
                cells.iter().map(|c| (&c.observation, c.error.as_ref())),
            )
        })
        .collect()
}

/// One case's repetitions (each an observation, or the error of a failed one) summarised.
fn summarize_case<'a>(
    position: usize,
    case: &Case,
    label: String,
    repetitions: impl Iterator<Item = (&'a Observation, Option<&'a String>)>,
) -> CellSummary {
    let (ok, failed): (Vec<_>, Vec<_>) = repetitions.partition(|(_, e)| e.is_none());
    let observations: Vec<&Observation> = ok.iter().map(|(o, _)| *o).collect();
    let mut keys: Vec<(Role, String)> = Vec::new();
    for obs in &observations {
        for m in &obs.metrics {
            if !keys.iter().any(|(r, n)| *r == m.role && *n == m.name) {
                keys.push((m.role, m.name.clone()));
            }
        }
    }
    let mut metrics: Vec<MetricCell> = keys
        .iter()
        .filter_map(|(role, name)| metric_cell(&observations, name, *role))
        .collect();
    for (name, total) in TOTALS {
        if let Some(cell) = total_cell(&observations, name, total) {
            metrics.push(cell);
        }
    }
    let mut warnings: Vec<Warning> = Vec::new();
    for w in observations.iter().flat_map(|o| &o.warnings) {
        if !warnings.contains(w) {
            warnings.push(w.clone());
        }
    }
    CellSummary {
        position,
        case: case.clone(),
        label,
        ok: observations.len(),
        failures: failed.iter().filter_map(|(_, e)| e.cloned()).collect(),
        metrics,
        warnings,
    }
}

/// Noise warnings with advice, grouped: one line per piece of advice listing the cases whose
/// headline CV is above 5% (with their CV), and one line listing the MAD outliers (kept, not
/// dropped). "Cases" are the distinct parameter sets; "cells" are case x repetition.
pub fn noise_warnings(cells: &[CellSummary]) -> Vec<String> {
    noise_lines(cells, usize::MAX)
}

/// What to do about a noisy cell: depends on whether its threads were pinned and whether one
/// repetition already takes many samples.
pub fn noise_advice(cell: &CellSummary) -> &'static str {
    let workload = cell.case.as_workload();
    if workload.samples_within_repetition() {
        "add --reps, or stop other load on the machine (each repetition already takes many samples)"
    } else if workload.pinning().any() {
        "the threads are pinned, so look for other load on the machine (load average under \
         Environment), then lengthen --duration or add --reps"
    } else {
        "pin the threads (--client-cpus/--server-cpus), lengthen --duration, add --reps, or stop \
         other load on the machine"
    }
}

/// The noise warnings with at most `max_items` cases listed per line ("… and 27 more"), for
/// the terminal.
pub fn noise_lines(cells: &[CellSummary], max_items: usize) -> Vec<String> {
    let list = |items: &[String]| {
        if items.len() > max_items {
            format!("{} and {} more", items[..max_items].join(", "), items.len() - max_items)
        } else {
            items.join(", ")
        }
    };
    let mut noisy: Vec<(&'static str, Vec<String>)> = Vec::new();
    let mut outliers: Vec<String> = Vec::new();
    let mut judged = 0;
    for cell in cells {
        let Some(metric) = cell.headline_metric() else {
            continue;
        };
        let name = metric.name.as_str();
        let Some(s) = &metric.summary else { continue };
        judged += usize::from(s.cv.is_some());
        if let Some(cv) = s.cv.filter(|cv| *cv > NOISY_CV) {
            let advice = noise_advice(cell);
            let item = format!("{} ({name} {:.1}%, n={})", cell.label, cv * 100.0, s.n);
            match noisy.iter_mut().find(|(a, _)| *a == advice) {
                Some((_, items)) => items.push(item),
                None => noisy.push((advice, vec![item])),
            }
        }
        for &i in &s.outliers {
            outliers.push(format!(
                "{} ({name} {})",
                cell.label,
                crate::report::fmt_num(metric.values.get(i).copied())
            ));
        }
    }
    let mut out = Vec::new();
    for (advice, items) in noisy {
        out.push(format!(
            "{} of {judged} cases vary with a CV above {:.0}% between repetitions: {}. What to do: {advice}.",
            items.len(),
            NOISY_CV * 100.0,
            list(&items)
        ));
    }
    if !outliers.is_empty() {
        out.push(format!(
            "{} repetitions are outliers by the MAD rule (kept in the statistics): {}.",
            outliers.len(),
            list(&outliers)
        ));
    }
    out
}

/// Whether the client and server threads of one repetition ran on a common CPU (at the start or
/// the end of the window); None when the placement was not recorded.
fn shared_a_cpu(obs: &Observation) -> Option<bool> {
    let cpus = |role: Role| -> Vec<usize> {
        obs.placement
            .iter()
            .filter(|p| p.role == role)
            .flat_map(|p| [p.cpu_at_start, p.cpu_at_end])
            .flatten()
            .collect()
    };
    let (client, server) = (cpus(Role::Client), cpus(Role::Server));
    if client.is_empty() || server.is_empty() {
        return None;
    }
    Some(client.iter().any(|c| server.contains(c)))
}

/// Cases whose client and server shared a CPU in some repetitions and not in others: their
/// repetitions measured two different placements (on loopback that alone can change a result
/// several-fold), so their spread is not noise of one setup.
pub fn placement_warnings(data: &RunData) -> Vec<String> {
    let mut out = Vec::new();
    for (position, case) in data.cases.iter().enumerate() {
        let mut shared = Vec::new();
        let mut apart = Vec::new();
        for cell in data
            .cells
            .iter()
            .filter(|c| c.position == position && c.error.is_none())
        {
            match shared_a_cpu(&cell.observation) {
                Some(true) => shared.push(cell.repetition),
                Some(false) => apart.push(cell.repetition),
                None => {}
            }
        }
        if !shared.is_empty() && !apart.is_empty() {
            let list = |reps: &[u32]| reps.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ");
            out.push(format!(
                "{}: client and server shared a CPU in repetitions {} but not in {}: the repetitions measured different placements; pin both sides (--client-cpus, --server-cpus)",
                case.label(),
                list(&shared),
                list(&apart)
            ));
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::case::{CopyMode, StreamCase};
    use crate::observation::{Metric, Source};
    use crate::store::{RunSummary, StoredCell};

    pub fn stream_case(mode: CopyMode, size: u64, threads: usize) -> Case {
        Case::NetStream(
            StreamCase::for_test(mode, size)
                .with_fields(8)
                .with_threads(threads)
                .with_window_ms(100, 10)
                .with_perf(),
        )
    }

    pub fn observation(gbps: f64) -> Observation {
        let mut o = Observation::default();
        o.push(Metric::new(
            "throughput_gbps",
            Role::System,
            gbps,
            "Gbit/s",
            Source::Tool,
        ));
        o.push(Metric::new(
            "cycles_per_byte",
            Role::Client,
            1.0,
            "cycles/B",
            Source::Estimate,
        ));
        o.push(Metric::new(
            "cycles_per_byte",
            Role::Server,
            2.0,
            "cycles/B",
            Source::Estimate,
        ));
        o.push(Metric::unavailable(
            "cache_misses_per_kib",
            Role::Client,
            "misses/KiB",
            "no hardware PMU",
        ));
        o
    }

    /// Found in review: servers repetitions differed 4x because client and server shared a CPU
    /// in some of them and not in others, and nothing said so.
    #[test]
    fn repetitions_with_different_placements_are_named() {
        use crate::observation::ThreadPlacement;
        let mut data = run_data(vec![(stream_case(CopyMode::OneCopy, 1024, 1), vec![1.0, 4.0, 4.1])]);
        let place = |client: usize, server: usize| {
            [(Role::Client, client), (Role::Server, server)]
                .map(|(role, cpu)| ThreadPlacement {
                    role,
                    index: 0,
                    pinned: None,
                    cpu_at_start: Some(cpu),
                    cpu_at_end: Some(cpu),
                    migrations: Some(0),
                })
                .to_vec()
        };
        data.cells[0].observation.placement = place(0, 0);
        data.cells[1].observation.placement = place(0, 1);
        data.cells[2].observation.placement = place(1, 0);
        let warnings = placement_warnings(&data);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("repetitions 0 but not in 1, 2"),
            "the store's numbering: {warnings:?}"
        );
        for cell in &mut data.cells {
            cell.observation.placement = place(0, 1);
        }
        assert!(placement_warnings(&data).is_empty());
    }

    /// Issue 19 E13: `micro fs` pushes `fs_type_magic` (the ext4 magic number) before its
    /// figures, and the headline was the first system metric with values. Each bench names its
    /// own: the time per block read, the bandwidth of the readers (higher is better).
    #[test]
    fn a_micro_bench_headlines_its_own_figure_not_the_first_metric() {
        use crate::case::{Bench, MicroCase};
        let cell = |variant: &str, metrics: &[(&str, f64)]| {
            let case = Case::Micro(MicroCase::new(Bench::Fs, vec![("variant", variant.to_string())]));
            CellSummary {
                position: 0,
                label: case.label(),
                case,
                ok: 1,
                failures: Vec::new(),
                metrics: metrics
                    .iter()
                    .map(|(name, v)| MetricCell {
                        role: Role::System,
                        name: name.to_string(),
                        unit: "u".into(),
                        sources: vec!["tool".into()],
                        values: vec![*v],
                        summary: summarize(&[*v]),
                    })
                    .collect(),
                warnings: Vec::new(),
            }
        };
        let seq = cell(
            "seq_read",
            &[
                ("fs_type_magic", 61267.0),
                ("time_per_read_us", 80.0),
                ("bandwidth_mib_s", 48.0),
            ],
        );
        assert_eq!(seq.headline_metric().map(|m| m.name.as_str()), Some("time_per_read_us"));
        assert!(!headline(&seq.case).2, "a time: lower is better");
        let contention = cell(
            "contention",
            &[("fs_type_magic", 61267.0), ("bandwidth_total_mib_s", 500.0)],
        );
        assert_eq!(
            contention.headline_metric().map(|m| m.name.as_str()),
            Some("bandwidth_total_mib_s")
        );
        assert!(headline(&contention.case).2, "a bandwidth: higher is better");
        // Without its figure (every sample below resolution) a cell has no headline rather
        // than a setting passed off as one.
        let none = cell("cache_read", &[("fs_type_magic", 61267.0)]);
        assert!(none.headline_metric().is_none());
    }

    /// A run from (case, per-repetition throughput) pairs; NaN makes a failed repetition.
    pub fn run_data(cases: Vec<(Case, Vec<f64>)>) -> RunData {
        let mut cells = Vec::new();
        for (position, (case, values)) in cases.iter().enumerate() {
            for (rep, v) in values.iter().enumerate() {
                cells.push(StoredCell {
                    position,
                    repetition: rep as u32,
                    case: case.clone(),
                    observation: if v.is_nan() {
                        Observation::default()
                    } else {
                        observation(*v)
                    },
                    error: v.is_nan().then(|| "boom".to_string()),
                    elapsed_s: 0.1,
                });
            }
        }
        RunData {
            run: RunSummary {
                id: 1,
                name: None,
                command_line: "iopath sweep".into(),
                tool_version: "0".into(),
                started_at: "2026-01-01T00:00:00Z".into(),
                ended_at: None,
                status: crate::store::RunStatus::Complete,
                repetitions: 3,
                shuffle: false,
                seed: 0,
                warmup_cell: false,
                machine_json: "{}".into(),
                environment_json: "{}".into(),
                cases: cases.len(),
                cells_ok: 0,
                cells_failed: 0,
            },
            cases: cases.into_iter().map(|(c, _)| c).collect(),
            cells,
            fleet_machines: Default::default(),
            ab: None,
        }
    }

    #[test]
    fn cells_summarise_values_sources_totals_and_failures() {
        let data = run_data(vec![(
            stream_case(CopyMode::OneCopy, 1024, 1),
            vec![1.0, 2.0, f64::NAN, 3.0],
        )]);
        let cells = summarize_run(&data);
        assert_eq!(cells.len(), 1);
        let c = &cells[0];
        assert_eq!((c.ok, c.failures.len()), (3, 1));
        let s = c.summary("throughput_gbps", Role::System).unwrap();
        assert_eq!((s.n, s.median), (3, 2.0));
        let total = c.metric("total_cycles_per_byte", Role::System).unwrap();
        assert_eq!(total.values, vec![3.0, 3.0, 3.0]);
        assert!(total.is_estimate());
        let cache = c.metric("cache_misses_per_kib", Role::Client).unwrap();
        assert!(cache.summary.is_none());
        assert_eq!(cache.source_text(), "unavailable: no hardware PMU");
    }

    #[test]
    fn noisy_cells_get_advice_and_steady_ones_do_not() {
        let data = run_data(vec![
            (stream_case(CopyMode::OneCopy, 1024, 1), vec![10.0, 10.1, 9.9]),
            (stream_case(CopyMode::TwoCopy, 1024, 1), vec![10.0, 13.0, 8.0]),
        ]);
        let warnings = noise_warnings(&summarize_run(&data));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("1 of 2 cases vary with a CV above 5%"),
            "{warnings:?}"
        );
        assert!(
            warnings[0].contains("two-copy 1KiB t1 (throughput_gbps"),
            "{warnings:?}"
        );
        assert!(warnings[0].contains("--duration"));
    }
}
