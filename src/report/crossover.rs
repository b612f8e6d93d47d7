//! Crossover sizes: for two paths A and B at one thread count (send modes, or, when a run
//! crossed receive modes, send mode x receive mode pairs), the smallest message size
//! from which A beats B significantly (a higher median, and a two-sided Mann-Whitney U test at
//! p < 0.05 on the repetitions — the test `compare` uses) and never loses so again at a larger
//! size, with the size where the median curves cross, interpolated on log2(size). With too few
//! repetitions for the test to reach significance (fewer than 4 a side) the pair is "not tested":
//! neither a crossover nor its absence is claimed.

use super::cells::CellSummary;
use super::compare::{mann_whitney, smallest_possible_p, ALPHA};
use crate::case::{format_bytes, CopyMode, Pick, RecordsCase, RecordsMode, RxMode, StreamCase};
use crate::measure::stats::median;
use crate::observation::names;
use crate::observation::Role;
use std::fmt;

/// Every pair of send modes among `present`, each later mode (in `CopyMode::ALL` order: the
/// plainer paths first) against every earlier one — the seeds' question "does the other path
/// pay off, and from which size?" asked of every pair that was run.
pub fn mode_pairs(present: &[CopyMode]) -> Vec<(CopyMode, CopyMode)> {
    let run: Vec<CopyMode> = CopyMode::ALL.into_iter().filter(|m| present.contains(m)).collect();
    let mut pairs = Vec::new();
    for (j, &a) in run.iter().enumerate() {
        for &b in &run[..j] {
            pairs.push((a, b));
        }
    }
    pairs
}

/// The same question on the receiving side, the send mode held: does receiving with less
/// copying pay off (trunc: what is left when the receiver does not copy at all)?
pub const RX_PAIRS: [(RxMode, RxMode); 6] = [
    (RxMode::Scatter, RxMode::Copy),
    (RxMode::Zerocopy, RxMode::Copy),
    (RxMode::Zerocopy, RxMode::Scatter),
    (RxMode::Trunc, RxMode::Copy),
    (RxMode::Trunc, RxMode::Scatter),
    (RxMode::Trunc, RxMode::Zerocopy),
];

/// One series of the stream charts and one side of a crossover: a send mode, and the receive
/// mode when the run crossed receive modes (None: every cell of the send mode, whatever
/// receiver it was always paired with).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamPath {
    pub mode: CopyMode,
    pub rx: Option<RxMode>,
}

impl StreamPath {
    /// The path of a case: with its receive mode when `crossed`.
    pub fn of(case: &StreamCase, crossed: bool) -> StreamPath {
        StreamPath {
            mode: case.mode,
            rx: crossed.then_some(case.rx_mode),
        }
    }

    pub fn matches(&self, case: &StreamCase) -> bool {
        case.mode == self.mode && self.rx.is_none_or(|rx| rx == case.rx_mode)
    }
}

impl fmt::Display for StreamPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rx {
            Some(rx) => write!(f, "{}/{rx}", self.mode),
            None => write!(f, "{}", self.mode),
        }
    }
}

/// Whether a run crossed receive modes: some case received other than its send mode always
/// did (so some send mode ran with a second receiver, or all with a chosen one). Otherwise
/// charts and crossovers stay per send mode, as before receive modes existed.
pub fn rx_crossed<'a>(cases: impl IntoIterator<Item = &'a StreamCase>) -> bool {
    cases.into_iter().any(|c| c.rx_mode != RxMode::paired_with(c.mode))
}

/// The pairs of paths compared: the send-mode pairs (under each receive mode when crossed)
/// and, when crossed, the receive-mode pairs under each send mode.
fn path_pairs(cases: &[&StreamCase]) -> Vec<(StreamPath, StreamPath)> {
    let mut modes: Vec<CopyMode> = cases.iter().map(|c| c.mode).collect();
    modes.sort_unstable();
    modes.dedup();
    let send_pairs = mode_pairs(&modes);
    if !rx_crossed(cases.iter().copied()) {
        return send_pairs
            .iter()
            .map(|&(a, b)| (StreamPath { mode: a, rx: None }, StreamPath { mode: b, rx: None }))
            .collect();
    }
    let mut rx_modes: Vec<RxMode> = cases.iter().map(|c| c.rx_mode).collect();
    rx_modes.sort_unstable();
    rx_modes.dedup();
    let mut pairs = Vec::new();
    for &rx in &rx_modes {
        for &(a, b) in &send_pairs {
            pairs.push((
                StreamPath { mode: a, rx: Some(rx) },
                StreamPath { mode: b, rx: Some(rx) },
            ));
        }
    }
    for &mode in &modes {
        for &(a, b) in &RX_PAIRS {
            pairs.push((StreamPath { mode, rx: Some(a) }, StreamPath { mode, rx: Some(b) }));
        }
    }
    pairs
}

/// A's and B's repetitions at one size.
#[derive(Debug, Clone, PartialEq)]
pub struct SizePoint {
    pub size: u64,
    pub a: Vec<f64>,
    pub b: Vec<f64>,
}

impl SizePoint {
    /// A's median minus B's, signed so that positive means A is better.
    fn lead(&self, higher_is_better: bool) -> f64 {
        let diff = median(&mut self.a.clone()) - median(&mut self.b.clone());
        if higher_is_better {
            diff
        } else {
            -diff
        }
    }

    /// Whether the difference between A and B is significant.
    fn significant(&self) -> bool {
        mann_whitney(&self.a, &self.b).is_some_and(|t| t.p < ALPHA)
    }

    fn a_wins(&self, higher_is_better: bool) -> bool {
        self.lead(higher_is_better) > 0.0 && self.significant()
    }

    fn b_wins(&self, higher_is_better: bool) -> bool {
        self.lead(higher_is_better) < 0.0 && self.significant()
    }

    /// Whether the test can reach p < 0.05 with this many repetitions a side.
    fn testable(&self) -> bool {
        testable(self.a.len(), self.b.len())
    }
}

/// Whether two samples of `n1` and `n2` repetitions can differ significantly at all: the
/// smallest p the exact rank test can give is below 0.05 (from 4 against 4, or 3 against 5).
pub fn testable(n1: usize, n2: usize) -> bool {
    smallest_possible_p(n1, n2) < ALPHA
}

/// "1 repetition", "3 repetitions".
pub fn repetitions_text(n: usize) -> String {
    format!("{n} repetition{}", if n == 1 { "" } else { "s" })
}

#[derive(Debug, Clone, PartialEq)]
pub enum Crossover {
    /// A beats B significantly from `size` on. `crosses_at` is the interpolated size where the
    /// medians cross: None when A's median was ahead at every smaller size (`from_smallest`:
    /// `size` is the smallest size compared, so there is nothing below it).
    From {
        size: u64,
        crosses_at: Option<f64>,
        from_smallest: bool,
    },
    /// Every size was tested and A never got significantly ahead to stay.
    NoCrossover,
    /// Too few repetitions for the rank test to reach p < 0.05 at some size (`reps`: the fewest
    /// a side): neither a crossover nor its absence can be claimed.
    NotTested { reps: usize },
}

impl Crossover {
    /// Where A is significantly ahead from and where the medians cross, as the JSON gives
    /// them: (None, None) when A never gets ahead to stay.
    pub fn ahead_from(&self) -> (Option<u64>, Option<f64>) {
        match self {
            Crossover::From { size, crosses_at, .. } => (Some(*size), *crosses_at),
            _ => (None, None),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Crossover::From {
                size,
                crosses_at: Some(x),
                ..
            } => {
                format!(
                    "from {} (medians cross at ~{})",
                    format_bytes(*size),
                    format_bytes(x.round() as u64)
                )
            }
            Crossover::From {
                size,
                crosses_at: None,
                from_smallest: true,
            } => {
                format!("from {} (ahead from the smallest size)", format_bytes(*size))
            }
            Crossover::From {
                size, crosses_at: None, ..
            } => {
                format!(
                    "from {} (ahead by the medians below it, not significantly)",
                    format_bytes(*size)
                )
            }
            Crossover::NoCrossover => "no crossover in the range".into(),
            Crossover::NotTested { reps } => not_tested_text(*reps),
        }
    }

    /// Whether A is significantly ahead from a size inside the range, after sizes where it was
    /// not: a crossover to mark on a chart (at `size`).
    pub fn inside_range(&self) -> Option<u64> {
        match self {
            Crossover::From {
                size,
                from_smallest: false,
                ..
            } => Some(*size),
            _ => None,
        }
    }
}

/// "not tested (1 repetition)", "not tested (3 repetitions: too few for p < 0.05)".
pub fn not_tested_text(reps: usize) -> String {
    if reps == 1 {
        "not tested (1 repetition)".into()
    } else {
        format!("not tested ({}: too few for p < 0.05)", repetitions_text(reps))
    }
}

/// Find the crossover in `points` (any order). `higher_is_better` for throughput.
pub fn find_crossover(points: &[SizePoint], higher_is_better: bool) -> Crossover {
    let mut points = points.to_vec();
    points.sort_by_key(|p| p.size);
    if points.iter().any(|p| !p.testable()) {
        let reps = points.iter().map(|p| p.a.len().min(p.b.len())).min().unwrap_or(0);
        return Crossover::NotTested { reps };
    }
    let lead = |p: &SizePoint| p.lead(higher_is_better);
    let wins = |p: &SizePoint| p.a_wins(higher_is_better);
    let loses = |p: &SizePoint| p.b_wins(higher_is_better);
    let Some(first) = (0..points.len()).find(|&i| wins(&points[i]) && !points[i + 1..].iter().any(loses)) else {
        return Crossover::NoCrossover;
    };
    // The last size before `first` where A was not ahead by median brackets the crossing.
    let crosses_at = (0..first).rev().find(|&k| lead(&points[k]) <= 0.0).map(|k| {
        let (lo, hi) = (&points[k], &points[k + 1]);
        let (d0, d1) = (lead(lo), lead(hi));
        let t = if d1 - d0 != 0.0 { -d0 / (d1 - d0) } else { 0.0 };
        let (x0, x1) = ((lo.size as f64).log2(), (hi.size as f64).log2());
        (x0 + t.clamp(0.0, 1.0) * (x1 - x0)).exp2()
    });
    Crossover::From {
        size: points[first].size,
        crosses_at,
        from_smallest: first == 0,
    }
}

/// One row of the crossover table.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossoverRow {
    pub a: StreamPath,
    pub b: StreamPath,
    pub threads: usize,
    pub result: Crossover,
    /// Sizes where both modes have a summary.
    pub sizes_compared: usize,
    /// Sizes where B is significantly ahead (the other half of the answer).
    pub b_ahead: Vec<u64>,
    /// Sizes where A is significantly ahead (with no crossover: A led somewhere, B later).
    pub a_ahead: Vec<u64>,
    /// Sizes where A's median is higher but not significantly (within the noise): what a
    /// "never overtakes" must own up to, since the table shows A's higher median there.
    pub a_higher_in_noise: Vec<u64>,
}

impl CrossoverRow {
    /// "4KiB, 1MiB" or "none".
    pub fn b_ahead_text(&self) -> String {
        if self.b_ahead.is_empty() {
            "none".into()
        } else {
            self.b_ahead
                .iter()
                .map(|&s| format_bytes(s))
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

/// The sizes of the points that `keep` keeps, smallest first.
fn sizes_where(points: &[SizePoint], keep: impl Fn(&SizePoint) -> bool) -> Vec<u64> {
    let mut sizes: Vec<u64> = points.iter().filter(|p| keep(p)).map(|p| p.size).collect();
    sizes.sort_unstable();
    sizes
}

/// Sizes at which A beats B significantly.
pub fn sizes_where_a_wins(points: &[SizePoint], higher_is_better: bool) -> Vec<u64> {
    sizes_where(points, |p| p.a_wins(higher_is_better))
}

/// Sizes at which A's median is better than B's but not significantly.
pub fn sizes_where_a_leads_in_noise(points: &[SizePoint], higher_is_better: bool) -> Vec<u64> {
    sizes_where(points, |p| p.lead(higher_is_better) > 0.0 && !p.significant())
}

/// Sizes at which B beats A significantly.
pub fn sizes_where_b_wins(points: &[SizePoint], higher_is_better: bool) -> Vec<u64> {
    sizes_where(points, |p| p.b_wins(higher_is_better))
}

/// The cases of workload `T` with their system throughput's repetitions, where there are any:
/// what both crossover tables compare.
fn throughput_of<T: crate::case::Workload>(cells: &[CellSummary]) -> Vec<(&T, &Vec<f64>)> {
    super::cells::cases_of::<T>(cells)
        .into_iter()
        .filter_map(|(case, c)| {
            c.metric(names::THROUGHPUT_GBPS, Role::System)
                .filter(|m| !m.values.is_empty())
                .map(|m| (case, &m.values))
        })
        .collect()
}

/// The points of A against B among `measured` (the cases of one setting): every x (a message
/// size, a records count) at which both were measured, in increasing order.
fn pair_points<T>(
    measured: &[(&T, &Vec<f64>)],
    x_of: impl Fn(&T) -> u64,
    is_a: impl Fn(&T) -> bool,
    is_b: impl Fn(&T) -> bool,
) -> Vec<SizePoint> {
    let values_at = |is: &dyn Fn(&T) -> bool, x: u64| {
        measured
            .iter()
            .find(|(case, _)| is(case) && x_of(case) == x)
            .map(|(_, values)| (*values).clone())
    };
    let mut xs: Vec<u64> = measured.iter().map(|(case, _)| x_of(case)).collect();
    xs.sort_unstable();
    xs.dedup();
    xs.into_iter()
        .filter_map(|x| {
            Some(SizePoint {
                size: x,
                a: values_at(&is_a, x)?,
                b: values_at(&is_b, x)?,
            })
        })
        .collect()
}

/// Every pair of paths and thread count present in a run's stream cells, on throughput.
pub fn stream_crossovers(cells: &[CellSummary]) -> Vec<CrossoverRow> {
    let stream = throughput_of::<StreamCase>(cells);
    let mut threads: Vec<usize> = stream.iter().map(|(s, _)| s.net.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    let cases: Vec<&StreamCase> = stream.iter().map(|(s, _)| *s).collect();
    let mut rows = Vec::new();
    for (a, b) in path_pairs(&cases) {
        for &t in &threads {
            let at_threads: Vec<_> = stream.iter().filter(|(s, _)| s.net.threads == t).copied().collect();
            let points = pair_points(&at_threads, |s| s.size, |s| a.matches(s), |s| b.matches(s));
            if points.is_empty() {
                continue;
            }
            rows.push(CrossoverRow {
                a,
                b,
                threads: t,
                result: find_crossover(&points, true),
                sizes_compared: points.len(),
                b_ahead: sizes_where_b_wins(&points, true),
                a_ahead: sizes_where_a_wins(&points, true),
                a_higher_in_noise: sizes_where_a_leads_in_noise(&points, true),
            });
        }
    }
    rows
}

/// The records pairs: does sending in place (gather, zero copy) beat copying out, and from
/// how many records per response?
pub const RECORDS_PAIRS: [(RecordsMode, RecordsMode); 4] = [
    (RecordsMode::ZeroCopy, RecordsMode::CopyOut),
    (RecordsMode::Gather, RecordsMode::CopyOut),
    (RecordsMode::ZeroCopy, RecordsMode::Gather),
    (RecordsMode::UringZc, RecordsMode::CopyOut),
];

/// One row of the records crossover table: for one record size (and pick, requests in flight,
/// threads), the smallest records count from which A sends more payload than B, significantly
/// (the same test as the stream's, with the records count in place of the message size).
#[derive(Debug, Clone, PartialEq)]
pub struct RecordsCrossoverRow {
    pub a: RecordsMode,
    pub b: RecordsMode,
    pub record_size: u64,
    pub pick: Pick,
    pub outstanding: usize,
    pub threads: usize,
    /// `size` in the result is a records count.
    pub result: Crossover,
    pub counts_compared: usize,
    /// Records counts where B is significantly ahead.
    pub b_ahead: Vec<u64>,
}

impl RecordsCrossoverRow {
    /// "from 16 records of 128B (medians cross at ~13 records)".
    pub fn describe(&self) -> String {
        let of = format_bytes(self.record_size);
        match self.result {
            Crossover::From {
                size,
                crosses_at: Some(x),
                ..
            } => format!("from {size} records of {of} (medians cross at ~{x:.0} records)"),
            Crossover::From {
                size,
                crosses_at: None,
                from_smallest: true,
            } => format!("from {size} records of {of} (ahead from the fewest records)"),
            Crossover::From {
                size, crosses_at: None, ..
            } => {
                format!("from {size} records of {of} (ahead by the medians with fewer, not significantly)")
            }
            Crossover::NoCrossover => "no crossover in the range".into(),
            Crossover::NotTested { reps } => not_tested_text(reps),
        }
    }

    /// "the 1KiB records, random, 1 in flight, 1 thread".
    pub fn setting(&self) -> String {
        format!(
            "{} records, {}, {} in flight, {} thread{}",
            format_bytes(self.record_size),
            self.pick,
            self.outstanding,
            self.threads,
            if self.threads == 1 { "" } else { "s" }
        )
    }

    pub fn b_ahead_text(&self) -> String {
        if self.b_ahead.is_empty() {
            "none".into()
        } else {
            self.b_ahead
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

/// Every records mode pair and setting present in a run, on payload throughput.
pub fn records_crossovers(cells: &[CellSummary]) -> Vec<RecordsCrossoverRow> {
    let records = throughput_of::<RecordsCase>(cells);
    let setting = |r: &RecordsCase| (r.record_size, r.pick, r.outstanding, r.net.threads);
    let mut settings: Vec<_> = records.iter().map(|(r, _)| setting(r)).collect();
    settings.sort_unstable();
    settings.dedup();
    let mut rows = Vec::new();
    for (a, b) in RECORDS_PAIRS {
        for &s in &settings {
            let at_setting: Vec<_> = records.iter().filter(|(r, _)| setting(r) == s).copied().collect();
            let points = pair_points(&at_setting, |r| r.records as u64, |r| r.mode == a, |r| r.mode == b);
            if points.is_empty() {
                continue;
            }
            rows.push(RecordsCrossoverRow {
                a,
                b,
                record_size: s.0,
                pick: s.1,
                outstanding: s.2,
                threads: s.3,
                result: find_crossover(&points, true),
                counts_compared: points.len(),
                b_ahead: sizes_where_b_wins(&points, true),
            });
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Case;

    #[test]
    fn every_pair_of_the_modes_run_is_compared_later_against_earlier() {
        let pairs = mode_pairs(&[CopyMode::Sendfile, CopyMode::TwoCopy, CopyMode::OneCopy]);
        assert_eq!(
            pairs,
            vec![
                (CopyMode::OneCopy, CopyMode::TwoCopy),
                (CopyMode::Sendfile, CopyMode::TwoCopy),
                (CopyMode::Sendfile, CopyMode::OneCopy),
            ]
        );
        assert_eq!(mode_pairs(&CopyMode::ALL).len(), 21);
        assert!(mode_pairs(&[CopyMode::Uring]).is_empty());
    }

    /// Five repetitions a side: the three given and two close to the outer ones, so the test
    /// can reach significance (with 3 against 3 it never can).
    fn five(v: &[f64; 3]) -> Vec<f64> {
        vec![v[0], v[1], v[2], v[0] + 0.01, v[2] - 0.01]
    }

    fn points(rows: &[(u64, [f64; 3], [f64; 3])]) -> Vec<SizePoint> {
        rows.iter()
            .map(|(size, a, b)| SizePoint {
                size: *size,
                a: five(a),
                b: five(b),
            })
            .collect()
    }

    /// The size A is ahead from and where the medians cross, for a crossover with a crossing.
    fn crossing(p: &[SizePoint]) -> (u64, f64) {
        match find_crossover(p, true) {
            Crossover::From {
                size,
                crosses_at: Some(x),
                ..
            } => (size, x),
            other => panic!("{other:?}"),
        }
    }

    /// Found in review: an interrupted quick with one value per case claimed "B significantly
    /// ahead at 1KiB, 4KiB, ...".
    #[test]
    fn one_or_three_values_a_side_claim_nothing() {
        for n in [1, 3] {
            let p = vec![SizePoint {
                size: 1024,
                a: vec![1.0; n],
                b: vec![9.0; n],
            }];
            assert_eq!(find_crossover(&p, false), Crossover::NotTested { reps: n });
            assert!(sizes_where_b_wins(&p, true).is_empty(), "n = {n}");
        }
    }

    #[test]
    fn crossover_in_the_middle_is_interpolated_between_the_bracketing_sizes() {
        let p = points(&[
            (1024, [1.0, 1.1, 0.9], [2.0, 2.1, 1.9]),
            (4096, [3.0, 3.1, 2.9], [3.5, 3.6, 3.4]),
            (16384, [6.0, 6.1, 5.9], [4.0, 4.1, 3.9]),
            (65536, [9.0, 9.1, 8.9], [5.0, 5.1, 4.9]),
        ]);
        let (size, x) = crossing(&p);
        assert_eq!(size, 16384);
        // Lead -0.5 at 4 KiB, +2.0 at 16 KiB: a fifth of the way in log2 = 2^(12.4).
        assert!((x - 12.4f64.exp2()).abs() < 1.0, "{x}");
    }

    #[test]
    fn crossover_at_the_first_size_has_no_interpolated_point() {
        let p = points(&[
            (64, [5.0, 5.1, 4.9], [1.0, 1.1, 0.9]),
            (128, [6.0, 6.1, 5.9], [2.0, 2.1, 1.9]),
        ]);
        assert_eq!(
            find_crossover(&p, true),
            Crossover::From {
                size: 64,
                crosses_at: None,
                from_smallest: true,
            }
        );
        assert!(find_crossover(&p, true).describe().contains("from 64B"));
    }

    #[test]
    fn no_crossover_when_a_never_wins() {
        let p = points(&[
            (64, [1.0, 1.1, 0.9], [5.0, 5.1, 4.9]),
            (128, [2.0, 2.1, 1.9], [6.0, 6.1, 5.9]),
        ]);
        assert_eq!(find_crossover(&p, true), Crossover::NoCrossover);
        assert_eq!(Crossover::NoCrossover.describe(), "no crossover in the range");
        assert_eq!(sizes_where_b_wins(&p, true), vec![64, 128]);
    }

    #[test]
    fn overlapping_noisy_intervals_are_not_a_crossover() {
        // A ahead by median everywhere, but not significantly.
        let p = points(&[
            (64, [1.0, 3.0, 2.2], [1.5, 2.5, 1.8]),
            (128, [1.0, 4.0, 2.9], [2.0, 3.0, 2.5]),
        ]);
        assert_eq!(find_crossover(&p, true), Crossover::NoCrossover);
    }

    #[test]
    fn a_later_significant_loss_moves_the_crossover_past_it() {
        let p = points(&[
            (64, [5.0, 5.1, 4.9], [1.0, 1.1, 0.9]),
            (128, [1.0, 1.1, 0.9], [5.0, 5.1, 4.9]),
            (256, [5.0, 5.1, 4.9], [1.0, 1.1, 0.9]),
        ]);
        let (size, x) = crossing(&p);
        assert_eq!(size, 256);
        assert!(x > 128.0 && x < 256.0);
    }

    /// Cells of one send mode under two receive modes: the rows compare the receive modes under
    /// that send mode, named `send/rx`; a run of the old pairings keeps the send-mode rows.
    #[test]
    fn crossed_rx_modes_give_rows_per_send_and_rx_pair() {
        use crate::report::cells::summarize_run as summarize;
        use crate::report::cells::tests::{run_data, stream_case};
        let with_rx = |case: Case, rx: RxMode| match case {
            Case::NetStream(mut s) => {
                s.rx_mode = rx;
                Case::NetStream(s)
            }
            other => other,
        };
        let mut data = Vec::new();
        for size in [1024u64, 4096, 16384] {
            let slow = five(&[1.0, 1.1, 0.9]);
            let fast = five(&[3.0, 3.1, 2.9]);
            data.push((with_rx(stream_case(CopyMode::OneCopy, size, 1), RxMode::Scatter), slow));
            data.push((with_rx(stream_case(CopyMode::OneCopy, size, 1), RxMode::Trunc), fast));
        }
        let cells = summarize(&run_data(data));
        let rows = stream_crossovers(&cells);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].a.to_string(), "one-copy/trunc");
        assert_eq!(rows[0].b.to_string(), "one-copy/scatter");
        assert_eq!(
            rows[0].result,
            Crossover::From {
                size: 1024,
                crosses_at: None,
                from_smallest: true,
            }
        );

        let old = vec![
            (stream_case(CopyMode::OneCopy, 1024, 1), five(&[3.0, 3.1, 2.9])),
            (stream_case(CopyMode::TwoCopy, 1024, 1), five(&[1.0, 1.1, 0.9])),
        ];
        let rows = stream_crossovers(&summarize(&run_data(old)));
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(
            (rows[0].a.to_string(), rows[0].b.to_string()),
            ("one-copy".into(), "two-copy".into())
        );
    }

    #[test]
    fn records_crossover_speaks_in_records_counts() {
        let row = RecordsCrossoverRow {
            a: RecordsMode::ZeroCopy,
            b: RecordsMode::CopyOut,
            record_size: 128,
            pick: Pick::Random,
            outstanding: 1,
            threads: 1,
            result: find_crossover(
                &points(&[
                    (8, [1.0, 1.1, 0.9], [2.0, 2.1, 1.9]),
                    (16, [3.0, 3.1, 2.9], [2.0, 2.1, 1.9]),
                ]),
                true,
            ),
            counts_compared: 2,
            b_ahead: vec![8],
        };
        assert!(
            row.describe()
                .starts_with("from 16 records of 128B (medians cross at ~"),
            "{}",
            row.describe()
        );
        assert_eq!(row.b_ahead_text(), "8");
        assert_eq!(row.setting(), "128B records, random, 1 in flight, 1 thread");
    }

    #[test]
    fn lower_is_better_flips_the_test() {
        let p = points(&[(64, [1.0, 1.1, 0.9], [5.0, 5.1, 4.9])]);
        assert_eq!(
            find_crossover(&p, false),
            Crossover::From {
                size: 64,
                crosses_at: None,
                from_smallest: true,
            }
        );
        assert_eq!(find_crossover(&p, true), Crossover::NoCrossover);
    }

    /// The issue: a marker sat at the interpolated median crossing (~19.5 KiB) while the table
    /// said "from 1 MiB". Markers sit at the size from which A is significantly ahead; pairs
    /// crossing at the same size share one marker; labels are letters, explained in the key.
    #[test]
    fn chart_markers_sit_where_a_is_significantly_ahead_one_per_size() {
        let row = |a: CopyMode, b: CopyMode, threads: usize, result: Crossover| CrossoverRow {
            a: StreamPath { mode: a, rx: None },
            b: StreamPath { mode: b, rx: None },
            threads,
            result,
            sizes_compared: 3,
            b_ahead: Vec::new(),
            a_ahead: Vec::new(),
            a_higher_in_noise: Vec::new(),
        };
        let from = |size: u64, from_smallest: bool| Crossover::From {
            size,
            crosses_at: Some(19_500.0),
            from_smallest,
        };
        let rows = vec![
            row(CopyMode::OneCopy, CopyMode::TwoCopy, 1, from(1 << 20, false)),
            row(CopyMode::Splice, CopyMode::TwoCopy, 1, from(1 << 20, false)),
            row(CopyMode::Sendfile, CopyMode::TwoCopy, 1, from(16384, false)),
            row(CopyMode::Uring, CopyMode::TwoCopy, 1, from(1024, true)),
            row(
                CopyMode::ZeroCopy,
                CopyMode::TwoCopy,
                1,
                Crossover::NotTested { reps: 1 },
            ),
            row(CopyMode::OneCopy, CopyMode::TwoCopy, 2, from(16384, false)),
        ];
        let (marks, key) = crate::report::figures::crossover_markers(&rows, |t| format!("{t} thr"));
        assert_eq!(
            marks,
            vec![
                ("1 thr".to_string(), 16384.0, "a".to_string()),
                ("1 thr".to_string(), 1048576.0, "b".to_string()),
                ("2 thr".to_string(), 16384.0, "c".to_string()),
            ]
        );
        assert_eq!(
            key,
            vec![
                "a (16KiB, 1 thr): sendfile > two-copy",
                "b (1MiB, 1 thr): one-copy > two-copy, splice > two-copy",
                "c (16KiB, 2 thr): one-copy > two-copy",
            ]
        );
    }
}
