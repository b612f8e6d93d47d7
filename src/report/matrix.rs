//! The matrix of a fleet run (issue 23): for each network case the run measured, N×N matrices
//! (rows = source host, columns = destination host) of the median over repetitions of the
//! throughput, the p99 latency and the CPU cost per byte or per transaction of each side, with
//! outlier hosts and links flagged by tests over their cells and the worst pairs listed.
//!
//! The rule (docs/methodology.md, "Fleet matrix: outlier hosts and links"; [`flags`]): a host
//! is flagged, as source or as destination, when so many of its cells lie more than 5 % to one
//! side of what its partners get from the other hosts that an exact sign test, corrected by
//! Holm over every host side of the matrix and shared among the run's matrices, says it is
//! not noise; a link when every one of its (at least two) repetitions lies beyond what its row
//! and column predict, where too few of the run's cells lie for it to be noise. Each matrix states
//! the noise it judged against ([`flags::Noise`]). A pair that was planned but has no value
//! (failed, not run yet, or its metric was unavailable) is missing: drawn and listed as
//! missing, never as zero, and left out of every median and test.
//!
//! Built in one pass by a [`Builder`] fed either from a loaded run ([`from_run`], the report of
//! a fleet run) or streamed from the database ([`from_store`], `report --matrix`, which reads
//! only the pairs and the few metrics it draws: a 1000-host run is 999,000 cells).

pub mod flags;
pub mod heatmap;
pub mod synth;

use super::fmt_num;
use crate::case::FleetCase;
use crate::observation::{names, Role};
use crate::store::fleet::RunObservations;
use crate::store::{FleetMachines, RunData, SeenMachine, Store};
use maud::{html, Markup, PreEscaped};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// How many pairs the table of the worst pairs lists per matrix.
pub const WORST: usize = 10;

/// One matrix a fleet run can have: a metric of the network case and how to read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatrixMetric {
    pub name: &'static str,
    pub role: Role,
    pub title: &'static str,
    pub unit: &'static str,
    pub higher_is_better: bool,
    /// File name part of its heat map.
    pub stem: &'static str,
}

/// The matrices, in the order the report shows them; a run gets those its cells hold.
pub const METRICS: &[MatrixMetric] = &[
    MatrixMetric {
        name: names::THROUGHPUT_GBPS,
        role: Role::System,
        title: "median throughput",
        unit: "Gbit/s",
        higher_is_better: true,
        stem: "throughput",
    },
    MatrixMetric {
        name: names::TRANSACTIONS_PER_S,
        role: Role::System,
        title: "median transactions per second",
        unit: "txn/s",
        higher_is_better: true,
        stem: "transactions",
    },
    MatrixMetric {
        name: names::LATENCY_P99_US,
        role: Role::Client,
        title: "median p99 latency",
        unit: "us",
        higher_is_better: false,
        stem: "p99_latency",
    },
    MatrixMetric {
        name: names::CYCLES_PER_BYTE,
        role: Role::Client,
        title: "CPU per byte of the source (client)",
        unit: "cycles/B",
        higher_is_better: false,
        stem: "cpu_per_byte_source",
    },
    MatrixMetric {
        name: names::CYCLES_PER_BYTE,
        role: Role::Server,
        title: "CPU per byte of the destination (server)",
        unit: "cycles/B",
        higher_is_better: false,
        stem: "cpu_per_byte_destination",
    },
    MatrixMetric {
        name: names::CPU_US_PER_TXN,
        role: Role::Client,
        title: "CPU per transaction of the source (client)",
        unit: "us/txn",
        higher_is_better: false,
        stem: "cpu_per_txn_source",
    },
    MatrixMetric {
        name: names::CPU_US_PER_TXN,
        role: Role::Server,
        title: "CPU per transaction of the destination (server)",
        unit: "us/txn",
        higher_is_better: false,
        stem: "cpu_per_txn_destination",
    },
];

/// The metric names the matrices read (each once).
pub fn metric_names() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for m in METRICS {
        if !out.contains(&m.name) {
            out.push(m.name);
        }
    }
    out
}

fn metric_index(name: &str, role: Role) -> Option<usize> {
    METRICS.iter().position(|m| m.name == name && m.role == role)
}

/// Which side of the band an outlier lies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Low,
    High,
}

impl Side {
    /// Whether this side is the bad one for the metric (low throughput, high latency).
    pub fn is_worse(self, metric: &MatrixMetric) -> bool {
        (self == Side::Low) == metric.higher_is_better
    }

    pub fn word(self) -> &'static str {
        match self {
            Side::Low => "low",
            Side::High => "high",
        }
    }
}

/// A host the tests found (`flags`): on which side its cells as source and as destination
/// lie, and each side's test. Only a worse side makes it a flagged host; a better one is
/// reported, not flagged.
#[derive(Debug, Clone, PartialEq)]
pub struct HostFlag {
    pub host: usize,
    pub as_source: Option<Side>,
    pub as_destination: Option<Side>,
    pub source: flags::SideTest,
    pub destination: flags::SideTest,
}

impl HostFlag {
    /// Whether either side is the metric's worse one (low throughput, high latency or CPU).
    pub fn is_worse(&self, metric: &MatrixMetric) -> bool {
        [self.as_source, self.as_destination]
            .into_iter()
            .flatten()
            .any(|side| side.is_worse(metric))
    }
}

/// One matrix: values row-major (`values[source * n + destination]`), None where missing.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub metric: &'static MatrixMetric,
    pub n: usize,
    pub values: Vec<Option<f64>>,
    /// Median of each row (as source) and column (as destination) over the values it has.
    pub row_medians: Vec<Option<f64>>,
    pub column_medians: Vec<Option<f64>>,
    /// The median over every pair's value.
    pub median: Option<f64>,
    pub hosts: Vec<HostFlag>,
    /// Flagged links: (source, destination, side).
    pub links: Vec<(usize, usize, Side)>,
    /// The distinct sources of the values (`tool`, `estimate`, `unavailable: …`).
    pub sources: Vec<String>,
    /// What the flags were judged against.
    pub noise: flags::Noise,
}

impl Matrix {
    pub fn get(&self, source: usize, destination: usize) -> Option<f64> {
        self.values[source * self.n + destination]
    }

    /// Whether the host lies outside the band in this matrix (either side).
    pub fn host_flag(&self, host: usize) -> Option<&HostFlag> {
        self.hosts.iter().find(|h| h.host == host)
    }

    /// The hosts outside the band on the worse side.
    pub fn worse_hosts(&self) -> impl Iterator<Item = &HostFlag> {
        self.hosts.iter().filter(|h| h.is_worse(self.metric))
    }

    /// The links outside both their row's and their column's band on the worse side.
    pub fn worse_links(&self) -> impl Iterator<Item = &(usize, usize, Side)> {
        self.links.iter().filter(|l| l.2.is_worse(self.metric))
    }

    pub fn link_flag(&self, source: usize, destination: usize) -> Option<Side> {
        self.links
            .iter()
            .find(|(s, d, _)| (*s, *d) == (source, destination))
            .map(|l| l.2)
    }

    /// The pairs with a value, worst first (lowest throughput, highest latency and CPU), at
    /// most `limit`.
    pub fn worst(&self, limit: usize) -> Vec<(usize, usize, f64)> {
        let mut all: Vec<(usize, usize, f64)> = (0..self.n * self.n)
            .filter_map(|i| self.values[i].map(|v| (i / self.n, i % self.n, v)))
            .collect();
        let worse_first = |a: &(usize, usize, f64), b: &(usize, usize, f64)| {
            let by = if self.metric.higher_is_better {
                a.2.total_cmp(&b.2)
            } else {
                b.2.total_cmp(&a.2)
            };
            by.then((a.0, a.1).cmp(&(b.0, b.1)))
        };
        if all.len() > limit {
            all.select_nth_unstable_by(limit, worse_first);
            all.truncate(limit);
        }
        all.sort_by(worse_first);
        all
    }

    /// Medians per row and column, and the host and link flags of [`flags::judge`] over
    /// `cells` (every repetition: pair index, value) at level `alpha`.
    fn judge(&mut self, cells: &[(u32, f64)], alpha: f64) {
        let n = self.n;
        let mut line: Vec<f64> = Vec::with_capacity(n);
        for i in 0..n {
            line.clear();
            line.extend((0..n).filter_map(|j| self.values[i * n + j]));
            self.row_medians[i] = (!line.is_empty()).then(|| crate::measure::stats::median(&mut line));
            line.clear();
            line.extend((0..n).filter_map(|j| self.values[j * n + i]));
            self.column_medians[i] = (!line.is_empty()).then(|| crate::measure::stats::median(&mut line));
        }
        let mut all: Vec<f64> = self.values.iter().flatten().copied().collect();
        self.median = (!all.is_empty()).then(|| crate::measure::stats::median(&mut all));
        drop(all);
        let judged = flags::judge(n, &self.values, cells, alpha);
        for (h, (source, destination)) in judged.hosts.into_iter().enumerate() {
            if source.side.is_some() || destination.side.is_some() {
                self.hosts.push(HostFlag {
                    host: h,
                    as_source: source.side,
                    as_destination: destination.side,
                    source,
                    destination,
                });
            }
        }
        self.links = judged.links;
        self.noise = judged.noise;
    }
}

/// The pairs of one network case (and concurrency) of a fleet run and their matrices.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The network case, as its label says it.
    pub label: String,
    pub concurrent_pairs: u32,
    /// Whether the pair (row-major) was planned: a planned pair without a value is missing.
    pub planned: Vec<bool>,
    /// Planned pairs with no successful cell at all.
    pub failed: Vec<(usize, usize)>,
    pub matrices: Vec<Matrix>,
}

impl Group {
    pub fn pairs(&self) -> usize {
        self.planned.iter().filter(|p| **p).count()
    }
}

/// Every matrix of a fleet run: the hosts (sorted, numbers in them by value) and a group per
/// network case.
#[derive(Debug, Clone, PartialEq)]
pub struct Fleet {
    pub hosts: Vec<String>,
    pub groups: Vec<Group>,
}

impl Fleet {
    /// Hosts on the worse side of some matrix's band (slower, or costlier in latency or CPU),
    /// each once. A host only better than the rest is not flagged: nothing to fix there.
    pub fn flagged_hosts(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .groups
            .iter()
            .flat_map(|g| &g.matrices)
            .flat_map(|m| m.worse_hosts().map(|h| h.host))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Where host `h` lies outside a band: (the worse findings, the better ones), one per
    /// matrix and kind, as "<matrix title>: <low|high> as source[ and destination]", the
    /// group's label first when the run has several network cases.
    pub fn host_findings(&self, h: usize) -> (Vec<String>, Vec<String>) {
        let (mut worse, mut better) = (Vec::new(), Vec::new());
        for g in &self.groups {
            for m in &g.matrices {
                let Some(flag) = m.host_flag(h) else { continue };
                let case = if self.groups.len() > 1 {
                    format!("{}: ", g.label)
                } else {
                    String::new()
                };
                for (is_worse, out) in [(true, &mut worse), (false, &mut better)] {
                    let sides: Vec<String> = [("source", flag.as_source), ("destination", flag.as_destination)]
                        .into_iter()
                        .filter_map(|(end, side)| side.filter(|s| s.is_worse(m.metric) == is_worse).map(|s| (end, s)))
                        .map(|(end, side)| format!("{} as {end}", side.word()))
                        .collect();
                    if !sides.is_empty() {
                        out.push(format!("{case}{}: {}", m.metric.title, sides.join(", ")));
                    }
                }
            }
        }
        (worse, better)
    }

    /// What `report --matrix` prints under its line: per matrix the noise it judged against,
    /// its flagged hosts (with their tests) and how many links it flagged.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for g in &self.groups {
            for m in &g.matrices {
                out.push(format!(
                    "{} ({}), {}: {} hosts and {} links flagged. Noise: {}.",
                    m.metric.title,
                    m.metric.unit,
                    g.label,
                    m.worse_hosts().count(),
                    m.worse_links().count(),
                    m.noise.sentence()
                ));
                for h in m.worse_hosts() {
                    let sides: Vec<String> = [
                        ("source", h.as_source, &h.source),
                        ("destination", h.as_destination, &h.destination),
                    ]
                    .into_iter()
                    .filter(|(_, side, _)| side.is_some_and(|s| s.is_worse(m.metric)))
                    .map(|(end, side, test)| {
                        format!(
                            "{} as {end}: {}",
                            side.map(Side::word).unwrap_or_default(),
                            test_text(test)
                        )
                    })
                    .collect();
                    out.push(format!(
                        "  flagged host {} {}: {}",
                        h.host + 1,
                        crate::format::escape_control(&self.hosts[h.host]),
                        sides.join("; ")
                    ));
                }
            }
        }
        out
    }

    pub fn flagged_links(&self) -> usize {
        let mut out: Vec<(usize, usize)> = self
            .groups
            .iter()
            .flat_map(|g| &g.matrices)
            .flat_map(|m| m.worse_links().map(|l| (l.0, l.1)))
            .collect();
        out.sort_unstable();
        out.dedup();
        out.len()
    }
}

/// `a` before `b` with the digit runs in them compared as numbers (`h2` before `h10`,
/// `10.0.0.9:7000` before `10.0.0.10:7000`).
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(p), Some(q)) if p.is_ascii_digit() && q.is_ascii_digit() => {
                let dx = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let dy = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (nx, ny) = (&x[..dx], &y[..dy]);
                let trim = |s: &[u8]| {
                    let z = s.iter().take_while(|c| **c == b'0').count();
                    s[z..].to_vec()
                };
                let (tx, ty) = (trim(nx), trim(ny));
                let by = tx.len().cmp(&ty.len()).then_with(|| tx.cmp(&ty));
                if by != Ordering::Equal {
                    return by;
                }
                x = &x[dx..];
                y = &y[dy..];
            }
            (Some(p), Some(q)) => {
                if p != q {
                    return p.cmp(q);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

/// Values of the metrics a matrix draws, as read (a part per reader, merged).
#[derive(Debug, Default)]
pub struct Values {
    /// (position, metric index, value).
    values: Vec<(u32, u8, f64)>,
    /// The distinct sources of each metric's values, by metric index.
    sources: Vec<Vec<String>>,
}

impl Values {
    /// One value of a successful cell and its source (any metric: those no matrix draws are
    /// ignored; an unavailable one only adds its reason to the metric's sources).
    pub fn push(&mut self, position: usize, name: &str, role: Role, value: Option<f64>, source: &str) {
        let Some(m) = metric_index(name, role) else {
            return;
        };
        if self.sources.len() < METRICS.len() {
            self.sources.resize(METRICS.len(), Vec::new());
        }
        if !self.sources[m].iter().any(|s| s == source) {
            self.sources[m].push(source.to_string());
        }
        if let Some(v) = value.filter(|v| v.is_finite()) {
            self.values.push((position as u32, m as u8, v));
        }
    }

    /// Add the values another reader read.
    fn merge(&mut self, other: Values) {
        self.values.extend(other.values);
        self.sources.resize(METRICS.len(), Vec::new());
        for (mine, theirs) in self.sources.iter_mut().zip(other.sources) {
            for source in theirs {
                if !mine.contains(&source) {
                    mine.push(source);
                }
            }
        }
    }
}

/// Collects pairs and values, then builds the matrices. Memory: a few words per case and per
/// value drawn; no observation is kept.
#[derive(Debug, Default)]
pub struct Builder {
    host_ids: HashMap<String, u32>,
    hosts: Vec<String>,
    /// (network case label, concurrency) of each group; a run has a handful.
    groups: Vec<(String, u32)>,
    /// By case position: (source, destination, group).
    pairs: Vec<Option<(u32, u32, u32)>>,
    values: Values,
}

impl Builder {
    fn host(&mut self, name: &str) -> u32 {
        if let Some(id) = self.host_ids.get(name) {
            return *id;
        }
        let id = self.hosts.len() as u32;
        self.hosts.push(name.to_string());
        self.host_ids.insert(name.to_string(), id);
        id
    }

    /// One fleet case: its position, pair, concurrency and the label of its network case (the
    /// same for every pair of that case: labels are unique within a run's grid).
    pub fn pair(&mut self, position: usize, pair: (&str, &str), concurrent_pairs: u32, inner_label: &str) {
        let (s, d) = (self.host(pair.0), self.host(pair.1));
        let found = self
            .groups
            .iter()
            .position(|(l, c)| l == inner_label && *c == concurrent_pairs);
        let g = match found {
            Some(g) => g as u32,
            None => {
                self.groups.push((inner_label.to_string(), concurrent_pairs));
                (self.groups.len() - 1) as u32
            }
        };
        if self.pairs.len() <= position {
            self.pairs.resize(position + 1, None);
        }
        self.pairs[position] = Some((s, d, g));
    }

    /// One value of a successful cell (see [`Values::push`]).
    pub fn value(&mut self, position: usize, name: &str, role: Role, value: Option<f64>, source: &str) {
        self.values.push(position, name, role, value, source);
    }

    /// The matrices, or None when no fleet case was fed.
    pub fn finish(mut self) -> Option<Fleet> {
        if self.hosts.is_empty() {
            return None;
        }
        // Hosts in natural order: old id -> new index.
        let mut order: Vec<u32> = (0..self.hosts.len() as u32).collect();
        order.sort_by(|a, b| natural_cmp(&self.hosts[*a as usize], &self.hosts[*b as usize]));
        let mut index = vec![0usize; order.len()];
        for (new, old) in order.iter().enumerate() {
            index[*old as usize] = new;
        }
        let n = order.len();
        let hosts: Vec<String> = order
            .iter()
            .map(|o| std::mem::take(&mut self.hosts[*o as usize]))
            .collect();
        let mut groups: Vec<Group> = self
            .groups
            .iter()
            .map(|(label, concurrent_pairs)| Group {
                label: label.clone(),
                concurrent_pairs: *concurrent_pairs,
                planned: vec![false; n * n],
                failed: Vec::new(),
                matrices: Vec::new(),
            })
            .collect();
        for (s, d, g) in self.pairs.iter().flatten() {
            groups[*g as usize].planned[index[*s as usize] * n + index[*d as usize]] = true;
        }
        let mut slots: Vec<Vec<Option<Matrix>>> = (0..groups.len()).map(|_| vec![None; METRICS.len()]).collect();
        let Values {
            mut values,
            mut sources,
        } = std::mem::take(&mut self.values);
        for s in &mut sources {
            s.sort();
        }
        values.sort_unstable_by(|a, b| (a.1, a.0).cmp(&(b.1, b.0)).then(a.2.total_cmp(&b.2)));
        let mut start = 0;
        let mut reps: Vec<f64> = Vec::new();
        while start < values.len() {
            let (position, m, _) = values[start];
            let end = start
                + values[start..]
                    .iter()
                    .take_while(|v| (v.0, v.1) == (position, m))
                    .count();
            reps.clear();
            reps.extend(values[start..end].iter().map(|v| v.2));
            start = end;
            let Some(Some((s, d, g))) = self.pairs.get(position as usize) else {
                continue;
            };
            let pair = index[*s as usize] * n + index[*d as usize];
            let slot = &mut slots[*g as usize][m as usize];
            let matrix = slot.get_or_insert_with(|| Matrix {
                metric: &METRICS[m as usize],
                n,
                values: vec![None; n * n],
                row_medians: vec![None; n],
                column_medians: vec![None; n],
                median: None,
                hosts: Vec::new(),
                links: Vec::new(),
                sources: sources.get(m as usize).cloned().unwrap_or_default(),
                noise: flags::Noise::default(),
            });
            matrix.values[pair] = Some(crate::measure::stats::median(&mut reps));
        }
        // The run's chance of a false flag is shared among its matrices.
        let matrices = slots.iter().flatten().filter(|m| m.is_some()).count();
        let alpha = flags::ALPHA / matrices.max(1) as f64;
        for (g, (group, slot)) in groups.iter_mut().zip(slots).enumerate() {
            let mut judged: Vec<Matrix> = Vec::new();
            for (m, matrix) in slot.into_iter().enumerate() {
                let Some(mut matrix) = matrix else { continue };
                // Every repetition of this matrix's pairs (pair index, value), one matrix at a
                // time: the values are sorted by metric, so its metric's are one stretch.
                let from = values.partition_point(|v| (v.1 as usize) < m);
                let to = values.partition_point(|v| (v.1 as usize) <= m);
                let cells: Vec<(u32, f64)> = values[from..to]
                    .iter()
                    .filter_map(|(position, _, v)| {
                        let (s, d, of) = self.pairs.get(*position as usize).copied().flatten()?;
                        (of as usize == g).then(|| ((index[s as usize] * n + index[d as usize]) as u32, *v))
                    })
                    .collect();
                matrix.judge(&cells, alpha);
                judged.push(matrix);
            }
            group.matrices = judged;
            // A planned pair is failed when no matrix has a value for it.
            group.failed = (0..n * n)
                .filter(|i| group.planned[*i] && group.matrices.iter().all(|m| m.values[*i].is_none()))
                .map(|i| (i / n, i % n))
                .collect();
        }
        Some(Fleet { hosts, groups })
    }
}

/// The matrices of a loaded run; None when it has no fleet cell.
pub fn from_run(data: &RunData) -> Option<Fleet> {
    let mut b = Builder::default();
    for (position, case) in data.cases.iter().enumerate() {
        if let Some(f) = case.get::<FleetCase>() {
            b.pair(
                position,
                (&f.source, &f.destination),
                f.concurrent_pairs,
                &f.case.label(),
            );
        }
    }
    for cell in data.cells.iter().filter(|c| c.error.is_none()) {
        for m in &cell.observation.metrics {
            b.value(cell.position, &m.name, m.role, m.value, &m.source.to_string());
        }
    }
    b.finish()
}

/// How many connections read a stored run's values at once (`from_store`).
const VALUE_READERS: usize = 4;

/// The matrices of a stored run, read row by row, with its hosts' machines; None when it has no
/// fleet cell. The pairs (the cases' rows) and parts of the values (an index) are read on
/// connections of their own at once, so that on a cold cache they wait for the disk together.
pub fn from_store(store: &Store, run_id: i64) -> anyhow::Result<Option<(Fleet, FleetMachines)>> {
    let path = store.path();
    let (pairs, values) = std::thread::scope(|scope| {
        let pairs = scope.spawn(move || read_pairs(path, run_id));
        let values = read_values(store, run_id);
        let pairs = pairs
            .join()
            .map_err(|_| anyhow::anyhow!("the reader of the pairs panicked"));
        (pairs, values)
    });
    let mut b = pairs??;
    let (observations, values) = values?;
    b.values = values;
    let machines = store.fleet_machines(&observations, |position, end| {
        let (source, destination, _) = b.pairs.get(position).copied().flatten()?;
        Some(b.hosts[[source, destination][end] as usize].as_str())
    })?;
    Ok(b.finish().map(|fleet| (fleet, machines)))
}

/// A builder holding the run's pairs, read on a connection of its own.
fn read_pairs(path: &Path, run_id: i64) -> anyhow::Result<Builder> {
    let mut b = Builder::default();
    Store::open_existing(path)?.fleet_pairs(run_id, |p| {
        b.pair(
            p.position,
            (&p.source, &p.destination),
            p.concurrent_pairs,
            &p.inner_label,
        );
        Ok(())
    })?;
    Ok(b)
}

/// The run's successful observations and the values the matrices draw from them, read by
/// `VALUE_READERS` connections at once, each a part of the observations: the index pages of a
/// run written cell by cell lie all over the file, and readers at once keep the disk busy.
fn read_values(store: &Store, run_id: i64) -> anyhow::Result<(RunObservations, Values)> {
    let observations = store.ok_observations(run_id)?;
    let values = std::thread::scope(|scope| {
        let readers: Vec<_> = observations
            .split(VALUE_READERS)
            .into_iter()
            .map(|ids| {
                let (observations, path) = (&observations, store.path());
                scope.spawn(move || -> anyhow::Result<Values> {
                    let mut values = Values::default();
                    Store::open_existing(path)?.fleet_values(observations, ids, &metric_names(), |v| {
                        values.push(v.position, v.name, v.role, v.value, v.source);
                    })?;
                    Ok(values)
                })
            })
            .collect();
        let mut values = Values::default();
        for reader in readers {
            values.merge(
                reader
                    .join()
                    .map_err(|_| anyhow::anyhow!("a reader of the values panicked"))??,
            );
        }
        anyhow::Ok(values)
    })?;
    Ok((observations, values))
}

/// A heat map as the page shows it: inline SVG when there is one, else the PNG's file.
pub struct RenderedMap {
    pub group: usize,
    pub metric: &'static MatrixMetric,
    pub svg: Option<String>,
    pub svg_file: Option<String>,
    pub png_file: String,
}

/// Draw every heat map of `fleet` into `charts_dir` through `staging` (named
/// `<charts_name>/matrix_<group>_<metric>.{svg,png}` in the page), SVG only up to
/// `heatmap::MAX_SVG_HOSTS` hosts.
pub fn render_maps(
    fleet: &Fleet,
    staging: &mut crate::store::output::Staging,
    charts_dir: &Path,
    charts_name: &str,
    files: &mut Vec<PathBuf>,
) -> anyhow::Result<Vec<RenderedMap>> {
    let mut out = Vec::new();
    for (g, group) in fleet.groups.iter().enumerate() {
        for m in &group.matrices {
            let stem = format!("matrix_{}_{}", g + 1, m.metric.stem);
            let title = format!("{} ({}), {}", m.metric.title, m.metric.unit, group.label);
            let png_path = charts_dir.join(format!("{stem}.png"));
            let staged = staging.file(&png_path);
            heatmap::png(m, &group.planned, &title, &staged).map_err(|e| {
                anyhow::Error::from(crate::store::StoreError::CannotWrite {
                    path: png_path.clone(),
                    detail: e.to_string(),
                })
            })?;
            files.push(png_path);
            let (svg, svg_file) = if fleet.hosts.len() <= heatmap::MAX_SVG_HOSTS {
                let svg = heatmap::svg(m, &group.planned, &title)?;
                let svg_path = charts_dir.join(format!("{stem}.svg"));
                staging.write(&svg_path, svg.as_bytes())?;
                files.push(svg_path);
                (Some(svg), Some(format!("{charts_name}/{stem}.svg")))
            } else {
                (None, None)
            };
            out.push(RenderedMap {
                group: g,
                metric: m.metric,
                svg,
                svg_file,
                png_file: format!("{charts_name}/{stem}.png"),
            });
        }
    }
    Ok(out)
}

/// A host side's test: "1 / 20 of 21 (ratio 0.50, p 2.1e-5)".
fn test_text(t: &flags::SideTest) -> String {
    match t.ratio {
        Some(ratio) => format!(
            "{} / {} of {} (ratio {ratio:.2}, p {:.1e})",
            t.low, t.high, t.cells, t.holm_p
        ),
        None => "no cells".into(),
    }
}

fn side_text(side: Option<Side>, metric: &MatrixMetric) -> String {
    match side {
        None => "-".into(),
        Some(s) if s.is_worse(metric) => format!("{} (worse)", s.word()),
        Some(s) => format!("{} (better)", s.word()),
    }
}

/// How many hosts are listed by name in the host table before it only lists the flagged.
const HOST_TABLE_ALL: usize = 64;

/// The distinct values of one field over a host's descriptions, joined (`-` when none).
fn distinct(seen: &[SeenMachine], field: impl Fn(&crate::sysinfo::Machine) -> Option<String>) -> String {
    let mut values: Vec<String> = Vec::new();
    for s in seen {
        if let Some(v) = field(&s.machine) {
            if !values.contains(&v) {
                values.push(v);
            }
        }
    }
    if values.is_empty() {
        "-".into()
    } else {
        values.join(" / ")
    }
}

/// The fields (of `iopath sysinfo`'s description) in which a host's descriptions differ from
/// its first one.
pub fn differing_fields(seen: &[SeenMachine]) -> Vec<String> {
    let values: Vec<serde_json::Value> = seen
        .iter()
        .map(|s| serde_json::to_value(&s.machine).unwrap_or_default())
        .collect();
    let Some(serde_json::Value::Object(first)) = values.first() else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for other in &values[1..] {
        for (key, value) in first {
            if other.get(key) != Some(value) && !out.contains(key) {
                out.push(key.clone());
            }
        }
    }
    out
}

/// How many host numbers a line about hosts that differ lists before it only counts.
const HOSTS_LISTED: usize = 20;

/// The host numbers of `hosts` (0-based), the flagged ones marked, at most [`HOSTS_LISTED`].
fn host_numbers(hosts: &[usize], flagged: &[usize]) -> String {
    let mut out: Vec<String> = hosts
        .iter()
        .take(HOSTS_LISTED)
        .map(|h| match flagged.contains(h) {
            true => format!("{} flagged", h + 1),
            false => (h + 1).to_string(),
        })
        .collect();
    if hosts.len() > HOSTS_LISTED {
        out.push("…".into());
    }
    out.join(", ")
}

/// What the hosts table says about the hosts' machines: one line per field (kernel, CPU
/// model, logical CPUs) in which hosts differ (each value with the hosts that have it), and
/// the hosts whose description changed between their cells with the fields that changed.
fn machine_notes(fleet: &Fleet, machines: &FleetMachines, flagged: &[usize]) -> Vec<String> {
    type Field = fn(&crate::sysinfo::Machine) -> Option<String>;
    let fields: [(&str, Field); 3] = [
        ("kernels", |m| m.kernel.clone()),
        ("CPU models", |m| m.cpu_model.clone()),
        ("logical CPU counts", |m| Some(m.logical_cpus.to_string())),
    ];
    let mut notes = Vec::new();
    for (what, field) in fields {
        // Each value to the hosts that had it (a host that changed is under each of its values).
        let mut by_value: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (h, name) in fleet.hosts.iter().enumerate() {
            let mut values: Vec<String> = machines.of(name).iter().filter_map(|s| field(&s.machine)).collect();
            values.dedup();
            for v in values {
                let hosts = by_value.entry(v).or_default();
                if !hosts.contains(&h) {
                    hosts.push(h);
                }
            }
        }
        if by_value.len() > 1 {
            let mut groups: Vec<(String, Vec<usize>)> = by_value.into_iter().collect();
            // The most common first: the odd ones out last.
            groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
            let parts: Vec<String> = groups
                .iter()
                .map(|(value, hosts)| {
                    let n = hosts.len();
                    format!(
                        "{value} on {n} host{} ({})",
                        if n == 1 { "" } else { "s" },
                        host_numbers(hosts, flagged)
                    )
                })
                .collect();
            notes.push(format!("The hosts differ in {what}: {}.", parts.join("; ")));
        }
    }
    let changed: Vec<String> = fleet
        .hosts
        .iter()
        .enumerate()
        .filter(|(_, name)| machines.of(name).len() > 1)
        .map(|(h, name)| {
            let seen = machines.of(name);
            format!(
                "{} {name} ({} descriptions: {})",
                h + 1,
                seen.len(),
                differing_fields(seen).join(", ")
            )
        })
        .collect();
    if !changed.is_empty() {
        let n = changed.len();
        let listed: Vec<String> = changed.into_iter().take(HOSTS_LISTED).collect();
        notes.push(format!(
            "{n} host{} changed between {} cells (the fields that differ): {}{}.",
            if n == 1 { "" } else { "s" },
            if n == 1 { "its" } else { "their" },
            listed.join("; "),
            if n > HOSTS_LISTED { "; …" } else { "" }
        ));
    }
    let recorded = fleet.hosts.iter().filter(|h| !machines.of(h).is_empty()).count();
    if recorded > 0 && recorded < fleet.hosts.len() {
        notes.push(format!(
            "{} of {} hosts have no stored description (no successful cell, or cells stored before iopath kept them).",
            fleet.hosts.len() - recorded,
            fleet.hosts.len()
        ));
    }
    notes
}

/// The matrix section: per network case, each heat map, its flagged hosts and links and the
/// worst pairs; the failed pairs once per case; the hosts with their machines (`machines`:
/// each host's descriptions as its cells stored them).
pub fn section(fleet: &Fleet, maps: &[RenderedMap], machines: &FleetMachines) -> Markup {
    let n = fleet.hosts.len();
    let host = |h: usize| format!("{} {}", h + 1, fleet.hosts[h]);
    html! {
        h2 id="matrix" { "Fleet matrix" }
        p { (n) " hosts, numbered in the heat maps as listed below (rows: source, the client side; columns: destination, the server side). "
            "Each square is the median over the pair's repetitions; dark is worse (low throughput, high latency or CPU). "
            "Grey squares are pairs that were planned and have no value (failed or not run): missing, never zero; white squares were not planned. "
            "Flags (red): a host, as source or as destination, whose cells lie more than " (flags::FLOOR * 100.0) " % to the worse side of what their partners get from the other hosts in so many of its cells that a sign test says it is not noise "
            "(Holm over every host side of a matrix; the run's " (flags::ALPHA * 100.0) " % chance of any false flag shared among its matrices); "
            "a link (red outline) each of whose repetitions (at least " (flags::LINK_MIN_REPS) ") lies more than " (flags::FLOOR * 100.0) " % to the worse side of what its row and column predict, where so few of this run's cells lie that it is not noise (Bonferroni over the links). "
            "Under each heat map: the noise it was judged against and the smallest deviation it can flag. "
            "A host found on the better side is listed as better, not flagged (docs/methodology.md, \"Fleet matrix: outlier hosts and links\")." }
        @for (g, group) in fleet.groups.iter().enumerate() {
            h3 { (group.label) ", " (group.concurrent_pairs) " pair" @if group.concurrent_pairs != 1 { "s" } " at once" }
            p { (group.pairs()) " pairs planned, " (group.failed.len()) " missing (no successful cell)." }
            @for m in &group.matrices {
                (matrix_figure(g, m, maps.iter().find(|r| r.group == g && r.metric == m.metric), &host))
            }
            @if !group.failed.is_empty() {
                details {
                    summary.failed { (group.failed.len()) " missing pairs (planned, no successful cell)" }
                    p { @for (i, (s, d)) in group.failed.iter().take(200).enumerate() {
                        @if i > 0 { ", " } (host(*s)) " → " (host(*d))
                    } @if group.failed.len() > 200 { ", …" } }
                }
            }
        }
        (hosts_table(fleet, machines))
    }
}

/// One matrix of a group: its heat map with the caption, its flagged hosts and links, and its
/// worst pairs. `host`: a host's number and name.
fn matrix_figure(g: usize, m: &Matrix, map: Option<&RenderedMap>, host: &dyn Fn(usize) -> String) -> Markup {
    html! {
        figure id=(format!("matrix_{}_{}", g + 1, m.metric.stem)) {
            @if let Some(map) = map {
                @if let Some(svg) = &map.svg { (PreEscaped(svg.as_str())) }
                @else { img src=(map.png_file) alt=(m.metric.title) style="max-width:100%"; }
            }
            figcaption {
                strong { (m.metric.title) " (" (m.metric.unit) ", " (m.metric.role) "." (m.metric.name) ")." }
                " Source: " (m.sources.join(", ")) "."
                @if m.sources.iter().any(|s| s == "estimate") { " " span.est { "ESTIMATE: CPU time × TSC frequency, no hardware cycle counter." } }
                " Median over all pairs: " (fmt_num(m.median)) " " (m.metric.unit) ". "
                (m.worse_hosts().count()) " hosts and " (m.worse_links().count()) " links flagged (worse)"
                @let better = m.hosts.len() - m.worse_hosts().count();
                @if better > 0 { "; " (better) " hosts better than the rest" }
                ". Noise: " (m.noise.sentence()) "."
                @if let Some(map) = map {
                    " Files: "
                    @if let Some(svg) = &map.svg_file { a href=(svg) { (svg) } ", " }
                    a href=(map.png_file) { (map.png_file) }
                }
            }
        }
        @if !m.hosts.is_empty() {
            div.scroll { table {
                tr { th { "flagged host" } th { "row median (as source)" } th { "as source" } th { "cells low / high of (Holm p)" }
                     th { "column median (as destination)" } th { "as destination" } th { "cells low / high of (Holm p)" } }
                @for h in &m.hosts {
                    tr class=[h.is_worse(m.metric).then_some("failed")] {
                        td { (host(h.host)) }
                        td.num { (fmt_num(m.row_medians[h.host])) }
                        td { (side_text(h.as_source, m.metric)) }
                        td.num { (test_text(&h.source)) }
                        td.num { (fmt_num(m.column_medians[h.host])) }
                        td { (side_text(h.as_destination, m.metric)) }
                        td.num { (test_text(&h.destination)) }
                    }
                }
            } }
        }
        @if !m.links.is_empty() {
            div.scroll { table {
                tr { th { "flagged link: source" } th { "destination" } th { (m.metric.unit) } th { "row median" } th { "column median" } th { "side" } }
                @for (s, d, side) in m.links.iter().take(50) {
                    tr { td { (host(*s)) } td { (host(*d)) } td.num { (fmt_num(m.get(*s, *d))) }
                         td.num { (fmt_num(m.row_medians[*s])) } td.num { (fmt_num(m.column_medians[*d])) } td { (side_text(Some(*side), m.metric)) } }
                }
            } }
            @if m.links.len() > 50 { p { "… and " (m.links.len() - 50) " more flagged links." } }
        }
        details {
            summary { "The " (WORST) " worst pairs: " (m.metric.title) }
            div.scroll { table {
                tr { th { "source" } th { "destination" } th { (m.metric.unit) } th { "vs median of all pairs" } th { "flags" } }
                @for (s, d, v) in m.worst(WORST) {
                    tr {
                        td { (host(s)) } td { (host(d)) } td.num { (fmt_num(Some(v))) }
                        td.num { @if let Some(med) = m.median.filter(|x| *x != 0.0) { (format!("{:.2}×", v / med)) } @else { "n/a" } }
                        td {
                            @if m.link_flag(s, d).is_some() { "link " }
                            @if m.host_flag(s).is_some() { "source-host " }
                            @if m.host_flag(d).is_some() { "destination-host" }
                        }
                    }
                }
            } }
        }
    }
}

/// The fleet's hosts: each one's flags and its machine descriptions as the agents reported them.
fn hosts_table(fleet: &Fleet, machines: &FleetMachines) -> Markup {
    let n = fleet.hosts.len();
    html! {
        h3 { "Hosts" }
        @let flagged = fleet.flagged_hosts();
        @if machines.is_empty() {
            p { "No machine descriptions are stored for this run's cells (measured before iopath kept them, or no cell succeeded)." }
        } @else {
            p { "Kernel, CPU model and logical CPUs: each host's own description (" code { "iopath sysinfo" } ") as the agents reported it with every cell; "
                "a host whose description changed between its cells shows each value." }
            @for note in machine_notes(fleet, machines, &flagged) { p.caveat { (note) } }
        }
        div.scroll { table {
            tr { th { "#" } th { "host" } th { "flagged" } th { "kernel" } th { "CPU model" } th { "logical CPUs" } th { "descriptions" } }
            @for h in 0..n {
                @if n <= HOST_TABLE_ALL || flagged.contains(&h) {
                    @let seen = machines.of(&fleet.hosts[h]);
                    tr {
                        @let (worse, better) = fleet.host_findings(h);
                        td.num { (h + 1) } td { (fleet.hosts[h]) }
                        td {
                            @if !worse.is_empty() { span.failed { "flagged: " (worse.join("; ")) } }
                            @if !worse.is_empty() && !better.is_empty() { br; }
                            @if !better.is_empty() { "better: " (better.join("; ")) }
                            @if worse.is_empty() && better.is_empty() { "-" }
                        }
                        @if seen.is_empty() {
                            td { "not recorded" } td { "-" } td.num { "-" } td.num { "0" }
                        } @else {
                            td { (distinct(seen, |m| m.kernel.clone())) }
                            td { (distinct(seen, |m| m.cpu_model.clone())) }
                            td.num { (distinct(seen, |m| Some(m.logical_cpus.to_string()))) }
                            td.num {
                                @if seen.len() > 1 { span.failed { (seen.len()) " (differ in " (differing_fields(seen).join(", ")) ")" } }
                                @else { "1" }
                            }
                        }
                    }
                }
            }
        } }
        @if n > HOST_TABLE_ALL { p { "Hosts not flagged are numbered in the order of their names (numbers in names compared by value)." } }
    }
}

/// What `write_matrix_report` wrote.
#[derive(Debug, Clone)]
pub struct MatrixFiles {
    pub html: PathBuf,
    pub charts_dir: PathBuf,
    pub chart_files: Vec<PathBuf>,
    pub hosts: usize,
    pub flagged_hosts: usize,
    pub flagged_links: usize,
    /// [`Fleet::summary_lines`]: the noise and the flags of each matrix, for the terminal.
    pub summary: Vec<String>,
}

/// The run has no fleet cell: `report --matrix` has nothing to draw (exit 2 from the CLI).
#[derive(Debug, thiserror::Error)]
#[error("run {run} has no fleet cells (its cases are {workloads}): --matrix draws the pairs of an `iopath fleet run`; `iopath report {run}` writes this run's report")]
pub struct NoFleetCells {
    pub run: i64,
    pub workloads: String,
}

/// `iopath report --matrix`: the matrix page of a stored fleet run, its heat maps as PNG (and
/// SVG up to `heatmap::MAX_SVG_HOSTS` hosts) in `<name>-charts/` beside it, written whole or
/// not at all. Reads only the pairs and the metrics it draws.
pub fn write_matrix_report(store: &Store, run_id: i64, html_path: &Path, db: &Path) -> anyhow::Result<MatrixFiles> {
    let head = store.run_head(run_id)?;
    let Some((fleet, machines)) = from_store(store, run_id)? else {
        let workloads = store.run_workloads(run_id)?;
        return Err(NoFleetCells {
            run: run_id,
            workloads: if workloads.is_empty() {
                "none".into()
            } else {
                workloads.join(", ")
            },
        }
        .into());
    };
    let dir = html_path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let stem = html_path.file_stem().and_then(|s| s.to_str()).unwrap_or("matrix");
    let charts_name = format!("{stem}-charts");
    let charts_dir = dir.join(&charts_name);
    let mut staging = crate::store::output::Staging::new(dir)?;
    let mut chart_files = Vec::new();
    let maps = render_maps(&fleet, &mut staging, &charts_dir, &charts_name, &mut chart_files)?;
    let title = match &head.name {
        Some(name) => format!("iopath matrix: run {} ({name})", head.id),
        None => format!("iopath matrix: run {}", head.id),
    };
    let page = html! {
        (maud::DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(super::html::STYLE)) }
            }
            body {
                h1 { (title) }
                p.rerun { "Re-run this: " code { (head.command_line) } }
                p { "Started " (head.started_at) " (UTC), status " (head.status) "." }
                (section(&fleet, &maps, &machines))
                p { small { "Generated by iopath " (env!("CARGO_PKG_VERSION")) " from the results database alone; rebuild it any time with "
                    code { "iopath report --matrix " (head.id) (super::db_flag(db)) } "." } }
            }
        }
    };
    staging.write(html_path, page.into_string().as_bytes())?;
    staging.commit()?;
    Ok(MatrixFiles {
        html: html_path.to_path_buf(),
        charts_dir,
        chart_files,
        hosts: fleet.hosts.len(),
        flagged_hosts: fleet.flagged_hosts().len(),
        flagged_links: fleet.flagged_links(),
        summary: fleet.summary_lines(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: usize = 0;

    /// A builder over `n` hosts `h1..hn`, all pairs, `reps` repetitions each, with the value
    /// `value(source, destination, repetition)` of throughput (None: the cell failed).
    fn fleet_reps(n: usize, reps: usize, value: impl Fn(usize, usize, usize) -> Option<f64>) -> Fleet {
        let mut b = Builder::default();
        let mut position = 0;
        for s in 0..n {
            for d in (0..n).filter(|d| *d != s) {
                b.pair(
                    position,
                    (&format!("h{}", s + 1), &format!("h{}", d + 1)),
                    1,
                    "one-copy 64KiB t1",
                );
                for r in 0..reps {
                    b.value(position, names::THROUGHPUT_GBPS, Role::System, value(s, d, r), "tool");
                }
                // A metric no matrix draws, and the same name in another role: both ignored.
                b.value(position, names::BYTES_SENT, Role::Client, Some(0.0), "tool");
                b.value(position, names::THROUGHPUT_GBPS, Role::Client, Some(0.0), "tool");
                position += 1;
            }
        }
        b.finish().unwrap()
    }

    /// [`fleet_reps`] with 3 repetitions of the same value: enough cells a host side for 4
    /// or 5 hosts (9 or 12: all beyond the floor give p = 0.004 or 0.0005).
    fn fleet(n: usize, value: impl Fn(usize, usize) -> Option<f64>) -> Fleet {
        fleet_reps(n, 3, |s, d, r| value(s, d).map(|v| v * noise(s + r, d)))
    }

    /// Noise that is deterministic and under 1 %.
    fn noise(s: usize, d: usize) -> f64 {
        1.0 + ((s * 7 + d * 3) % 5) as f64 * 0.002
    }

    #[test]
    fn a_slow_host_in_a_4x4_flags_exactly_that_host() {
        // h3 sends and receives at half speed.
        let f = fleet(4, |s, d| Some(if s == 2 || d == 2 { 5.0 } else { 10.0 }));
        assert_eq!(f.hosts, ["h1", "h2", "h3", "h4"]);
        assert_eq!(f.groups.len(), 1);
        let m = &f.groups[0].matrices;
        assert_eq!(m.len(), 1, "only throughput has values");
        assert_eq!(m[0].metric, &METRICS[TP]);
        assert_eq!(m[0].hosts.len(), 1, "{:?}", m[0].hosts);
        let h = &m[0].hosts[0];
        assert_eq!(
            (h.host, h.as_source, h.as_destination),
            (2, Some(Side::Low), Some(Side::Low))
        );
        assert_eq!((h.source.cells, h.source.low, h.source.high), (9, 9, 0));
        assert!((h.source.ratio.unwrap() - 0.5).abs() < 0.01, "{:?}", h.source);
        assert!(Side::Low.is_worse(m[0].metric));
        assert!(m[0].links.is_empty(), "{:?}", m[0].links);
        assert_eq!(f.flagged_hosts(), vec![2]);
        let (s, d, _) = m[0].worst(1)[0];
        assert!(s == 2 || d == 2);
        let noise = &m[0].noise;
        assert_eq!((noise.tests, noise.cells_min, noise.needed), (8, 9, Some(9)));
        assert!(noise.spread.unwrap() < 0.01, "{noise:?}");
        let said = f.summary_lines().join("\n");
        assert!(said.contains("flagged host 3 h3: low as source: 9 / 0 of 9"), "{said}");
        assert!(said.contains("at least 9 of its 9 cells"), "{said}");
    }

    /// One repetition of 4 hosts is 3 cells a host side: even a host at half speed in every
    /// cell is within what 8 host sides could give by chance, and the page says so.
    #[test]
    fn too_few_cells_flag_nothing_and_say_why() {
        let f = fleet_reps(4, 1, |s, d, _| {
            Some(if s == 2 || d == 2 { 5.0 } else { 10.0 } * noise(s, d))
        });
        let m = &f.groups[0].matrices[0];
        assert!(m.hosts.is_empty() && m.links.is_empty(), "{:?} {:?}", m.hosts, m.links);
        assert_eq!(m.noise.needed, None);
        let said = m.noise.sentence();
        assert!(said.contains("CANNOT FLAG A HOST: 3 cells a host side"), "{said}");
        assert!(said.contains("links are not judged (one repetition a pair"), "{said}");
    }

    /// Seeded noise (a loaded machine: `spread` normal noise, and one cell in 20 a load spike
    /// 10-40 % down) on identical hosts flags no host in any of 50 fleets with the repetitions
    /// `--reps auto` plans (8 hosts: 3, 4 hosts: 5); one host at half rate as a source is
    /// flagged in all of them, and no other host. Links are flagged in 1 of the 100 fleets of
    /// each size (the links' level is 5 % a run: three spikes can strike one pair).
    #[test]
    fn seeded_noise_on_identical_hosts_flags_none_and_a_half_rate_host_always() {
        use crate::measure::stats::SplitMix64;
        for (n, reps, spread) in [(8, 3, 0.03), (4, 5, 0.08)] {
            let mut runs_with_links = 0;
            for seed in 0..50u64 {
                let mut rng = SplitMix64::new(seed);
                let draws: Vec<f64> = (0..n * n * reps)
                    .map(|_| {
                        let spike = if rng.unit() < 0.05 { 0.9 - 0.3 * rng.unit() } else { 1.0 };
                        spike * (1.0 + spread * rng.normal())
                    })
                    .collect();
                let cell = |s: usize, d: usize, r: usize| draws[(s * n + d) * reps + r];
                let healthy = fleet_reps(n, reps, |s, d, r| Some(20.0 * cell(s, d, r)));
                let m = &healthy.groups[0].matrices[0];
                assert!(
                    healthy.flagged_hosts().is_empty(),
                    "{n} hosts, seed {seed}: {:?}",
                    m.hosts
                );
                runs_with_links += usize::from(healthy.flagged_links() > 0);
                let slow = fleet_reps(n, reps, |s, d, r| {
                    Some(if s == 1 { 10.0 } else { 20.0 } * cell(s, d, r))
                });
                let m = &slow.groups[0].matrices[0];
                assert_eq!(slow.flagged_hosts(), vec![1], "{n} hosts, seed {seed}: {:?}", m.hosts);
                runs_with_links += usize::from(slow.flagged_links() > 0);
            }
            assert!(
                runs_with_links <= 1,
                "{n} hosts: links flagged in {runs_with_links} of 100 fleets"
            );
        }
    }

    /// A host only better than the rest (twice the throughput) is found and said, but not
    /// flagged: not in the count, not red, `better:` in the host table; a slow one is flagged.
    #[test]
    fn a_host_better_than_the_rest_is_said_but_not_flagged() {
        let f = fleet(5, |s, d| Some(if s == 1 || d == 1 { 20.0 } else { 10.0 }));
        let m = &f.groups[0].matrices[0];
        assert_eq!(m.hosts.len(), 1, "{:?}", m.hosts);
        assert_eq!(m.worse_hosts().count(), 0);
        assert!(f.flagged_hosts().is_empty());
        assert_eq!(f.flagged_links(), 0);
        let (worse, better) = f.host_findings(1);
        assert!(worse.is_empty(), "{worse:?}");
        assert_eq!(better, ["median throughput: high as source, high as destination"]);
        let html = section(&f, &[], &FleetMachines::default()).into_string();
        assert!(html.contains("better: median throughput: high as source"), "{html}");
        assert!(!html.contains("flagged: "), "{html}");
        assert!(
            html.contains("0 hosts and 0 links flagged (worse); 1 hosts better than the rest."),
            "{html}"
        );
        let slow = fleet(5, |s, d| Some(if s == 1 || d == 1 { 5.0 } else { 10.0 }));
        assert_eq!(slow.flagged_hosts(), vec![1]);
        let html = section(&slow, &[], &FleetMachines::default()).into_string();
        assert!(
            html.contains("flagged: median throughput: low as source, low as destination"),
            "{html}"
        );
    }

    /// The host table shows each host's kernel, CPU model and logical CPUs, says that the
    /// flagged (slow) host is the one on the other kernel, and names the host whose
    /// description changed between its cells with the field that changed.
    #[test]
    fn the_host_table_shows_each_hosts_machine_and_what_differs() {
        let f = fleet(4, |s, d| Some(if s == 2 || d == 2 { 5.0 } else { 10.0 }));
        let machine = |kernel: &str, cpus: usize| crate::sysinfo::Machine {
            kernel: Some(kernel.into()),
            cpu_model: Some("Test CPU 9000".into()),
            logical_cpus: cpus,
            ..Default::default()
        };
        let seen = |m: crate::sysinfo::Machine| SeenMachine { machine: m, cells: 6 };
        let mut machines = FleetMachines::default();
        machines.hosts.insert("h1".into(), vec![seen(machine("6.1.0", 8))]);
        machines
            .hosts
            .insert("h2".into(), vec![seen(machine("6.1.0", 8)), seen(machine("6.1.0", 4))]);
        machines.hosts.insert("h3".into(), vec![seen(machine("6.8.0", 8))]);
        let html = section(&f, &[], &machines).into_string();
        assert!(
            html.contains("The hosts differ in kernels: 6.1.0 on 2 hosts (1, 2); 6.8.0 on 1 host (3 flagged)."),
            "{html}"
        );
        assert!(
            html.contains("The hosts differ in logical CPU counts: 8 on 3 hosts (1, 2, 3 flagged); 4 on 1 host (2)."),
            "{html}"
        );
        assert!(!html.contains("differ in CPU models"), "{html}");
        assert!(
            html.contains(
                "1 host changed between its cells (the fields that differ): 2 h2 (2 descriptions: logical_cpus)."
            ),
            "{html}"
        );
        assert!(html.contains("1 of 4 hosts have no stored description"), "{html}");
        assert!(
            html.contains("<td>6.8.0</td><td>Test CPU 9000</td><td class=\"num\">8</td><td class=\"num\">1</td>"),
            "{html}"
        );
        assert!(html.contains("<td class=\"num\">8 / 4</td>"), "{html}");
        assert!(html.contains("<td>not recorded</td>"), "{html}");
        // No machines stored (a run from before): said once, no notes.
        let html = section(&f, &[], &FleetMachines::default()).into_string();
        assert!(html.contains("No machine descriptions are stored"), "{html}");
        assert!(!html.contains("differ in"), "{html}");
    }

    #[test]
    fn a_single_slow_link_flags_that_link_and_no_host() {
        let f = fleet(4, |s, d| Some(if (s, d) == (0, 3) { 2.0 } else { 10.0 }));
        let m = &f.groups[0].matrices[0];
        assert!(m.hosts.is_empty(), "{:?}", m.hosts);
        assert_eq!(m.links, vec![(0, 3, Side::Low)]);
        assert_eq!((m.worst(1)[0].0, m.worst(1)[0].1), (0, 3));
        assert_eq!(f.flagged_links(), 1);
    }

    #[test]
    fn a_failed_pair_is_missing_never_zero() {
        let f = fleet(4, |s, d| if (s, d) == (1, 2) { None } else { Some(10.0) });
        let g = &f.groups[0];
        let m = &g.matrices[0];
        assert_eq!(m.get(1, 2), None);
        assert!(g.planned[4 + 2], "the pair was planned");
        assert!(!g.planned[0], "a host is not paired with itself");
        assert_eq!(g.failed, vec![(1, 2)]);
        assert!(m.hosts.is_empty() && m.links.is_empty(), "{:?} {:?}", m.hosts, m.links);
        assert!(
            m.worst(100).iter().all(|(_, _, v)| *v > 9.0),
            "missing is not a worst pair"
        );
        assert_eq!(m.worst(100).len(), 11);
        let svg = heatmap::svg(m, &g.planned, "t").unwrap();
        // Once in the failed square, once in the key under the colour bar; no square says 0.
        assert_eq!(svg.matches("\nmissing\n").count(), 2, "{svg}");
        assert!(!svg.contains("\n0\n"), "{svg}");
        let html = section(&f, &[], &FleetMachines::default()).into_string();
        assert!(html.contains("1 missing (no successful cell)"), "{html}");
        assert!(html.contains("2 h2 → 3 h3"), "{html}");
    }

    #[test]
    fn repetitions_give_their_median_and_hosts_sort_by_number() {
        let mut b = Builder::default();
        b.pair(0, ("10.0.0.10:7000", "10.0.0.9:7000"), 2, "rr");
        b.pair(1, ("10.0.0.9:7000", "10.0.0.10:7000"), 2, "rr");
        for v in [1.0, 9.0, 3.0] {
            b.value(0, names::LATENCY_P99_US, Role::Client, Some(v), "tool");
        }
        b.value(1, names::LATENCY_P99_US, Role::Client, None, "unavailable: no answer");
        let f = b.finish().unwrap();
        assert_eq!(f.hosts, ["10.0.0.9:7000", "10.0.0.10:7000"]);
        let m = &f.groups[0].matrices[0];
        assert_eq!(m.metric.name, names::LATENCY_P99_US);
        assert_eq!(m.get(1, 0), Some(3.0));
        assert_eq!(m.get(0, 1), None, "an unavailable value is missing");
        assert_eq!(m.sources, ["tool", "unavailable: no answer"]);
        assert_eq!(f.groups[0].concurrent_pairs, 2);
        assert!(Builder::default().finish().is_none());
    }

    /// The matrices read from the database row by row (the pairs from the cases, the values
    /// from the partial index of migration 4) are those of the loaded run, for a run beside
    /// another in the same database.
    #[test]
    fn streamed_from_the_store_equals_built_from_the_loaded_run() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::create_or_open(&dir.path().join("f.db")).unwrap();
        let mut big = synth::Spec::new(7);
        big.slow_hosts = vec![4];
        big.failed = vec![(1, 5)];
        big.repetitions = 2;
        let big = synth::generate(&mut store, &big, |_, _| {}).unwrap();
        let small = synth::generate(&mut store, &synth::Spec::new(3), |_, _| {}).unwrap();
        for id in [big, small] {
            let loaded = from_run(&store.load_run(id).unwrap()).unwrap();
            let (streamed, machines) = from_store(&store, id).unwrap().unwrap();
            assert_eq!(machines, store.load_run(id).unwrap().fleet_machines, "run {id}");
            assert_eq!(
                machines.hosts.len(),
                streamed.hosts.len(),
                "run {id}: every host's machine"
            );
            assert_eq!(streamed, loaded, "run {id}");
            assert_eq!(streamed.groups[0].label, "one-copy 64KiB t1");
            assert_eq!(streamed.groups[0].matrices[0].sources, ["tool"]);
        }
        let (f, _) = from_store(&store, big).unwrap().unwrap();
        assert_eq!(f.flagged_hosts(), vec![4]);
        assert_eq!(f.groups[0].failed, vec![(1, 5)]);
    }

    /// Every metric a matrix draws is in the partial index `report --matrix` reads: a metric
    /// added to `METRICS` needs a migration that widens the index, or its query fails.
    #[test]
    fn every_matrix_metric_is_in_the_stored_index() {
        for m in METRICS {
            assert!(
                crate::store::schema::FLEET_MATRIX_NAMES.contains(&format!("'{}'", m.name)),
                "{} is not in the index's names: {}",
                m.name,
                crate::store::schema::FLEET_MATRIX_NAMES
            );
        }
    }

    #[test]
    fn hosts_sort_by_the_numbers_in_their_names() {
        assert_eq!(natural_cmp("h2", "h10"), Ordering::Less);
        assert_eq!(natural_cmp("10.0.0.9", "10.0.0.10"), Ordering::Less);
    }
}
