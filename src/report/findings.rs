//! Findings: what a run says, in a few sentences, before any table or chart. A pure function
//! of the run's case summaries (and the crossovers found in them): per comparison group (a
//! thread count of the stream, a request kind of the servers), which contender wins at each
//! point (message size, clients) and by how much, how much slower the contenders that never win
//! are, and a one-line verdict on the noise. A stream group first answers the seed questions, one
//! sentence each: from which size one-copy overtakes two-copy, and whether zero-copy wins (and
//! how much of it the kernel copied anyway); the other pairs' crossovers are the crossover table.
//! Nothing is claimed that the repetitions cannot support: with too few for the rank test to
//! reach p < 0.05 a winner or crossover is "not tested"; a difference that is not significant is
//! "within the noise"; a mode that sends by reference (sendfile, splice without --verify) is
//! never called fastest without saying so in the same sentence. Every word comes from the data.

use super::cells::{headline, CellSummary, NOISY_CV};
use super::compare::{bootstrap_ratio_ci, mann_whitney, ALPHA};
use super::crossover::{repetitions_text, testable, Crossover, CrossoverRow};
use crate::case::{format_bytes, Case, CopyMode, Endpoint, LoadCase, StreamCase};
use crate::observation::names;
use crate::observation::Role;
use crate::sys::cache::CacheInfo;

/// The winner at one point (a message size, a number of clients) of a group.
#[derive(Debug, Clone, PartialEq)]
pub struct Winner {
    pub x: u64,
    /// The point as the reader reads it: `64KiB`, `100 clients`.
    pub x_text: String,
    pub winner: String,
    /// The second best, and how many times better the winner is (>= 1).
    pub runner_up: Option<(String, f64)>,
    /// Whether the winner is ahead of the runner-up significantly (Mann-Whitney U, p < 0.05).
    pub significant: bool,
    /// Whether the test could say so: enough repetitions a side for p < 0.05 to be reachable
    /// (4 against 4; with fewer, no difference is significant).
    pub tested: bool,
    /// The fewest repetitions among the contenders at this point.
    pub reps: usize,
    /// Whether the winner sends by reference (sendfile, splice without --verify).
    pub by_reference: bool,
    /// Every contender's factor behind the winner at this point (the winner's is 1), and
    /// whether the winner is significantly ahead of it.
    pub behind: Vec<(String, f64, bool)>,
}

/// One comparison group: the contenders at each point and the sentences about them.
#[derive(Debug, Clone, PartialEq)]
pub struct FindingGroup {
    /// `net stream, 1 thread`, `servers, echo:64`.
    pub title: String,
    pub winners: Vec<Winner>,
    /// The sentences: who wins where, crossovers, the contenders that never win.
    pub lines: Vec<String>,
}

/// Everything the findings block says.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Findings {
    pub groups: Vec<FindingGroup>,
    /// One-line verdict on the noise of the headline metric over the cases.
    pub noise: String,
}

impl Findings {
    /// The findings as plain lines (the terminal's form).
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for g in &self.groups {
            out.push(format!("{}:", g.title));
            out.extend(g.lines.iter().map(|l| format!("  {l}")));
        }
        if !self.noise.is_empty() {
            out.push(self.noise.clone());
        }
        out
    }
}

/// Where a cell's headline median stands among its group's contenders at its point (its size,
/// its load): the best median, within the noise of the best (not significantly behind it,
/// Mann-Whitney U p >= 0.05), or significantly behind it; no standing for a contender at a
/// point with too few repetitions to test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Best,
    WithinNoise,
    Behind,
}

impl Standing {
    /// The mark a table puts before the median: `~` within the noise of the best.
    pub fn mark(self) -> &'static str {
        match self {
            Standing::WithinNoise => "~",
            Standing::Best | Standing::Behind => "",
        }
    }
}

/// The line under a table whose medians carry `Standing::mark`.
pub const WITHIN_NOISE_KEY: &str =
    "~: within the noise of the best there (not significantly behind it; Mann-Whitney U p >= 0.05)";

impl Findings {
    /// How `cell` stands at its point, as the findings ranked it (so a table's marks and the
    /// sentences under it agree); None for a cell nothing is ranked against.
    pub fn standing(&self, cell: &CellSummary) -> Option<Standing> {
        let e = entry(cell)?;
        let group = self.groups.iter().find(|g| g.title == e.group)?;
        let point = group.winners.iter().find(|w| w.x == e.x)?;
        if point.winner == e.contender {
            return Some(Standing::Best);
        }
        // Too few repetitions to test: no claim either way (the findings say "not tested").
        if !point.tested {
            return None;
        }
        let (_, _, significant) = point.behind.iter().find(|b| b.0 == e.contender)?;
        Some(if *significant {
            Standing::Behind
        } else {
            Standing::WithinNoise
        })
    }
}

/// The numbers a report opens on: for one comparison group, its contenders (rows) at each
/// point (columns), each the headline median with its interval and its standing at the point;
/// for cases nothing is ranked against (a microbenchmark), one row per case and one column.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadlineTable {
    /// `net stream, 1 thread`, or `Every case` for the unranked ones.
    pub title: String,
    /// The headline metric and its unit: `throughput_gbps (Gbit/s)`.
    pub metric: String,
    /// What the rows are (`mode`, `model`, `case`) and the column titles (`64KiB`, `100 clients`).
    pub rows_are: &'static str,
    pub points: Vec<String>,
    pub rows: Vec<(String, Vec<Option<HeadlineValue>>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeadlineValue {
    pub median: f64,
    pub ci95: Option<(f64, f64)>,
    pub standing: Option<Standing>,
}

fn headline_value(cell: &CellSummary, findings: &Findings) -> Option<HeadlineValue> {
    let s = cell.headline_metric()?.summary.as_ref()?;
    Some(HeadlineValue {
        median: s.median,
        ci95: s.ci95,
        standing: findings.standing(cell),
    })
}

fn metric_title(cell: &CellSummary) -> String {
    match cell.headline_metric() {
        Some(m) => format!("{} ({})", m.name, m.unit),
        None => headline(&cell.case).0.to_string(),
    }
}

/// The headline tables of a run: one per comparison group in the findings' order (the
/// terminal's mode x size table for a stream run), then the cases no group ranks.
pub fn headline_tables(cells: &[CellSummary], findings: &Findings) -> Vec<HeadlineTable> {
    let entries: Vec<Entry> = cells.iter().filter_map(entry).collect();
    let mut tables: Vec<HeadlineTable> = Vec::new();
    for e in &entries {
        if tables.iter().any(|t| t.title == e.group) {
            continue;
        }
        let members: Vec<&Entry> = entries.iter().filter(|m| m.group == e.group).collect();
        let mut xs: Vec<(u64, String)> = members.iter().map(|m| (m.x, m.x_text.clone())).collect();
        xs.sort_by_key(|x| x.0);
        xs.dedup_by_key(|x| x.0);
        let mut contenders: Vec<&str> = Vec::new();
        for m in &members {
            if !contenders.contains(&m.contender.as_str()) {
                contenders.push(&m.contender);
            }
        }
        let rows = contenders
            .iter()
            .map(|c| {
                let values = xs
                    .iter()
                    .map(|(x, _)| {
                        members
                            .iter()
                            .find(|m| m.contender == *c && m.x == *x)
                            .and_then(|m| headline_value(m.cell, findings))
                    })
                    .collect();
                (c.to_string(), values)
            })
            .collect();
        tables.push(HeadlineTable {
            title: e.group.clone(),
            metric: metric_title(e.cell),
            rows_are: e.contenders_are,
            points: xs.into_iter().map(|x| x.1).collect(),
            rows,
        });
    }
    let ranked: Vec<usize> = entries.iter().map(|e| e.cell.position).collect();
    let rest: Vec<&CellSummary> = cells.iter().filter(|c| !ranked.contains(&c.position)).collect();
    if !rest.is_empty() {
        tables.push(HeadlineTable {
            title: "Every case".into(),
            metric: "its headline metric".into(),
            rows_are: "case",
            points: vec!["median".into()],
            rows: rest
                .iter()
                .map(|c| {
                    let why =
                        super::figures::minority_served(c).map_or(String::new(), |why| format!("; not ranked: {why}"));
                    (
                        format!("{} ({}{why})", c.label, metric_title(c)),
                        vec![headline_value(c, findings)],
                    )
                })
                .collect(),
        });
    }
    tables
}

/// "1.4x", "3.2x", "12x"; a small factor keeps the digits that tell it from 1 ("1.04x",
/// "1.004x"), so a significant difference never reads "1.0x".
pub fn factor_text(f: f64) -> String {
    if f >= 9.95 {
        format!("{f:.0}x")
    } else if f >= 1.095 {
        format!("{f:.1}x")
    } else if f >= 1.0095 {
        format!("{f:.2}x")
    } else {
        format!("{f:.3}x")
    }
}

fn factor_range(lo: f64, hi: f64) -> String {
    if factor_text(lo) == factor_text(hi) {
        factor_text(lo)
    } else {
        format!("{}-{}", factor_text(lo).trim_end_matches('x'), factor_text(hi))
    }
}

/// One contender at one point of one group.
struct Entry<'a> {
    group: String,
    contender: String,
    x: u64,
    x_text: String,
    cell: &'a CellSummary,
    by_reference: bool,
    /// The figure contenders are ranked on: the headline, or net load's loaded p99.
    metric: (&'static str, Role),
    /// The workload's words: `mode`/`model`, `size`/`load`, `every size`, `fastest`.
    contenders_are: &'static str,
    axis: &'static str,
    everywhere: &'static str,
    best_word: &'static str,
}

/// Whether a case sends by reference: sendfile and splice without --verify hand the kernel the
/// same message's pages again and again, and nothing tells them when reusing the pages would be
/// safe; a copy mode pays for a copy they skip (`Workload::sends_by_reference`).
pub fn sends_by_reference(case: &Case) -> bool {
    case.as_workload().sends_by_reference()
}

/// The words that go with a by-reference winner, in the same sentence.
const BY_REFERENCE: &str = "by reference (the same message's pages handed to the kernel again and again, with no \
                            completion to say when reusing them is safe; --verify rewrites every message)";

fn entry(cell: &CellSummary) -> Option<Entry<'_>> {
    // Figures from a minority of the cell's clients are not the contender's: never ranked.
    if super::figures::minority_served(cell).is_some() {
        return None;
    }
    // A microbenchmark has one contender per run: nothing to rank.
    let contest = cell.case.as_workload().contest()?;
    let (name, role, _) = headline(&cell.case);
    Some(Entry {
        metric: (name, role),
        group: contest.group,
        contender: contest.contender,
        x: contest.x,
        x_text: contest.x_text,
        by_reference: sends_by_reference(&cell.case),
        contenders_are: contest.contenders_are,
        axis: contest.axis,
        everywhere: contest.everywhere,
        best_word: contest.best_word,
        cell,
    })
}

/// The median and values of the figure `e` is ranked on.
fn values<'a>(e: &Entry<'a>) -> Option<(f64, &'a [f64])> {
    let m = e.cell.metric(e.metric.0, e.metric.1)?;
    let s = m.summary.as_ref()?;
    Some((s.median, &m.values))
}

/// What a point of a group can say: one contender alone, too few repetitions to test, a
/// significant winner, or no significant difference between the best two.
#[derive(Debug, Clone, PartialEq)]
enum Key {
    Alone(String),
    Untested,
    Winner(String),
    Noise,
}

fn key(w: &Winner) -> Key {
    if w.runner_up.is_none() {
        Key::Alone(w.winner.clone())
    } else if !w.tested {
        Key::Untested
    } else if w.significant {
        Key::Winner(w.winner.clone())
    } else {
        Key::Noise
    }
}

/// Runs of consecutive points with the same key: (first, last).
fn segments<T: PartialEq>(winners: &[Winner], key: impl Fn(&Winner) -> T) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (i, w) in winners.iter().enumerate() {
        match out.last_mut() {
            Some((_, last)) if key(&winners[*last]) == key(w) => *last = i,
            _ => out.push((i, i)),
        }
    }
    out
}

/// "at 1KiB", "from 1KiB to 16KiB".
fn span_text(span: &[Winner]) -> String {
    match span {
        [one] => format!("at {}", one.x_text),
        [first, .., last] => format!("from {} to {}", first.x_text, last.x_text),
        [] => String::new(),
    }
}

/// "a", "a and b", "a, b and c".
fn join_and(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn capitalized(line: &str) -> String {
    let mut chars = line.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().collect::<String>() + chars.as_str(),
        None => String::new(),
    }
}

/// The headline metric's name as a word.
fn metric_word(name: &str) -> &str {
    match name {
        names::THROUGHPUT_GBPS => "throughput",
        names::REQUESTS_PER_S => "requests/s",
        names::TRANSACTIONS_PER_S => "transactions/s",
        names::LATENCY_NS => "latency",
        other => other,
    }
}

/// The zero-copy sends the kernel copied (mean over the repetitions of the zero-copy cases in
/// `cells`), and whether they went over loopback. The findings and the caveats both say it.
pub(super) fn zero_copy_copied<'a>(cells: impl IntoIterator<Item = &'a CellSummary>) -> Option<(f64, bool)> {
    let mut not_copied = Vec::new();
    let mut loopback = false;
    for cell in cells {
        if let Some(s) = cell.case.get::<StreamCase>() {
            if s.mode.is_zero_copy() {
                loopback |= matches!(s.net.endpoint, Endpoint::Loopback { .. });
                if let Some(m) = cell.metric(names::ZEROCOPY_NOT_COPIED_FRACTION, Role::System) {
                    not_copied.extend(m.values.iter().copied());
                }
            }
        }
    }
    if not_copied.is_empty() {
        return None;
    }
    Some((1.0 - not_copied.iter().sum::<f64>() / not_copied.len() as f64, loopback))
}

/// What the kernel did with zero-copy sends: "the kernel copied every send (loopback delivers
/// to a local socket)", "the kernel sent 80% of its sends without a copy".
fn copied_clause((copied, loopback): (f64, bool)) -> String {
    let local = if loopback {
        " (loopback delivers to a local socket)"
    } else {
        ""
    };
    if copied >= 0.995 {
        format!("the kernel copied every send{local}, so it pays for pinning pages and completion notifications on top of a copy")
    } else if copied >= 0.5 {
        format!(
            "the kernel copied {:.0}% of its sends{local}, so it pays for pinning pages and completion notifications on top of a copy",
            copied * 100.0
        )
    } else {
        format!(
            "the kernel sent {:.0}% of its sends without a copy",
            (1.0 - copied) * 100.0
        )
    }
}

/// Seed 000's "is it really only two copies?" answered from counted copies: the kernel's
/// receive copies to user space per payload byte (`kernel_copy_bytes_per_byte`, system, source
/// trace) by receive mode, e.g. "the kernel copied 1.00 B per payload byte on receive with copy
/// and scatter, 0.00 B with trunc". None when no cell counted them.
fn receive_copies_sentence(cells: &[&CellSummary]) -> Option<String> {
    let mut parts: Vec<(String, Vec<&str>)> = Vec::new();
    for rx in crate::case::RxMode::ALL {
        let values: Vec<f64> = cells
            .iter()
            .filter(|c| c.case.get::<StreamCase>().is_some_and(|s| s.rx_mode == rx))
            .filter_map(|c| c.metric(names::KERNEL_COPY_BYTES_PER_BYTE, Role::System))
            .flat_map(|m| m.values.iter().copied())
            .collect();
        let (Some(lo), Some(hi)) = (
            values.iter().copied().reduce(f64::min),
            values.iter().copied().reduce(f64::max),
        ) else {
            continue;
        };
        let amount = if hi - lo < 0.005 {
            format!("{lo:.2} B")
        } else {
            format!("{lo:.2}-{hi:.2} B")
        };
        match parts.iter_mut().find(|(a, _)| *a == amount) {
            Some((_, modes)) => modes.push(rx.as_str()),
            None => parts.push((amount, vec![rx.as_str()])),
        }
    }
    let (first, rest) = parts.split_first()?;
    let mut text = format!(
        "Counted at its tracepoints, the kernel copied {} per payload byte to user space on receive with {}",
        first.0,
        join_and(&first.1)
    );
    for (amount, modes) in rest {
        text.push_str(&format!(", {amount} with {}", join_and(modes)));
    }
    text.push('.');
    Some(text)
}

/// Issue 35's network against application CPU: the share of each role's time on CPU that the
/// NET_RX and NET_TX softirqs interrupting its threads took (`softirq_share`, source trace),
/// its range over the cells, e.g. "Counted at its tracepoints, the network stack's softirqs
/// took 15-22% of the client threads' time on CPU and 25% of the server threads'". None when
/// no cell has the figure.
fn softirq_share_sentence(cells: &[&CellSummary]) -> Option<String> {
    let range = |role: Role| -> Option<String> {
        let values: Vec<f64> = cells
            .iter()
            .filter_map(|c| c.metric(names::SOFTIRQ_SHARE, role))
            .flat_map(|m| m.values.iter().map(|v| (v * 100.0).round()))
            .collect();
        let lo = values.iter().copied().reduce(f64::min)?;
        let hi = values.iter().copied().reduce(f64::max)?;
        Some(if lo == hi {
            format!("{lo:.0}%")
        } else {
            format!("{lo:.0}-{hi:.0}%")
        })
    };
    let parts: Vec<String> = [(Role::Client, "client"), (Role::Server, "server")]
        .into_iter()
        .filter_map(|(role, name)| Some(format!("{} of the {name} threads'", range(role)?)))
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "Counted at its tracepoints, the network stack's softirqs took {} time on CPU.",
        parts.join(" and ")
    ))
}

/// The sizes a crossover row lists where B is ahead: "1KiB, 4KiB and 16KiB".
fn sizes_text(sizes: &[u64]) -> String {
    let texts: Vec<String> = sizes.iter().map(|&s| format_bytes(s)).collect();
    join_and(&texts.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The seed question of one pair, as one sentence: "One-copy overtakes two-copy from 32KiB".
fn overtakes_sentence(r: &CrossoverRow) -> String {
    let behind = if r.b_ahead.is_empty() {
        String::new()
    } else {
        format!("; {} is significantly ahead at {}", r.b, sizes_text(&r.b_ahead))
    };
    match &r.result {
        Crossover::From {
            size,
            from_smallest: true,
            ..
        } => format!(
            "{} is ahead of {} from the smallest size, {}, on (significantly, Mann-Whitney U p < 0.05){behind}.",
            r.a,
            r.b,
            format_bytes(*size)
        ),
        Crossover::From { size, .. } => format!(
            "{} overtakes {} from {} (significantly, Mann-Whitney U p < 0.05){behind}.",
            r.a,
            r.b,
            format_bytes(*size)
        ),
        Crossover::NoCrossover if r.b_ahead.is_empty() && !r.a_higher_in_noise.is_empty() => format!(
            "{} never significantly overtakes {} here: its median is higher at {}, but within the noise of the repetitions (Mann-Whitney U p >= 0.05).",
            r.a,
            r.b,
            sizes_text(&r.a_higher_in_noise)
        ),
        Crossover::NoCrossover if r.b_ahead.is_empty() => format!(
            "{} never overtakes {} here: at no size do they differ significantly.",
            r.a, r.b
        ),
        Crossover::NoCrossover if !r.a_ahead.is_empty() => format!(
            "{} is significantly ahead of {} at {}, but {} is at {}: no lasting crossover.",
            r.a,
            r.b,
            sizes_text(&r.a_ahead),
            r.b,
            sizes_text(&r.b_ahead)
        ),
        Crossover::NoCrossover if !r.a_higher_in_noise.is_empty() => format!(
            "{} never significantly overtakes {} here{behind}; {}'s median is higher at {}, within the noise.",
            r.a,
            r.b,
            r.a,
            sizes_text(&r.a_higher_in_noise)
        ),
        Crossover::NoCrossover => format!("{} never overtakes {} here{behind}.", r.a, r.b),
        Crossover::NotTested { reps } => format!(
            "Whether {} overtakes {} is not tested ({} per case, too few for p < 0.05; --reps 6 tests it).",
            r.a,
            r.b,
            repetitions_text(*reps)
        ),
    }
}

/// The zero-copy seed question for one zero-copy mode (`names`: its paths in this group), as
/// one sentence: whether it wins anywhere, where it overtakes a copy mode, and what the kernel
/// did with its sends.
fn zero_copy_sentence(
    mode: CopyMode,
    names: &[String],
    rows: &[&CrossoverRow],
    winners: &[Winner],
    copied: Option<(f64, bool)>,
) -> String {
    let clause = copied.map(copied_clause);
    let with = |s: String| match &clause {
        Some(c) => format!("{s}: {c}."),
        None => format!("{s}."),
    };
    if let Some(reps) = rows.iter().find_map(|r| match r.result {
        Crossover::NotTested { reps } => Some(reps),
        _ => None,
    }) {
        return with(format!(
            "Whether {mode} pays off is not tested ({} per case, too few for p < 0.05; --reps 6 tests it)",
            repetitions_text(reps)
        ));
    }
    let won: Vec<&Winner> = winners
        .iter()
        .filter(|w| w.significant && w.tested && names.contains(&w.winner))
        .collect();
    if !won.is_empty() {
        let at: Vec<&str> = won.iter().map(|w| w.x_text.as_str()).collect();
        return with(format!("{mode} wins at {}", join_and(&at)));
    }
    let overtakes: Vec<String> = rows
        .iter()
        .filter_map(|r| match r.result {
            Crossover::From { size, .. } => Some(format!("{} from {}", r.b, format_bytes(size))),
            _ => None,
        })
        .collect();
    if overtakes.is_empty() {
        with(format!("{mode} never wins here"))
    } else {
        with(format!(
            "{mode} overtakes {} but never wins here",
            join_and(&overtakes.iter().map(String::as_str).collect::<Vec<_>>())
        ))
    }
}

/// The group's alarms (`Workload::alarm`): per contender, the points where the figure's
/// median passed its bound, as one sentence with the range of percentages.
fn alarm_lines(members: &[&Entry]) -> Vec<String> {
    let mut contenders: Vec<&str> = Vec::new();
    for e in members {
        if !contenders.contains(&e.contender.as_str()) {
            contenders.push(&e.contender);
        }
    }
    let mut lines = Vec::new();
    for c in contenders {
        let mut hit: Vec<(&Entry, f64)> = members
            .iter()
            .filter(|e| e.contender == c)
            .filter_map(|e| {
                let alarm = e.cell.case.as_workload().alarm()?;
                let median = e.cell.summary(alarm.metric, alarm.role)?.median;
                (median >= alarm.at_least).then_some((*e, median))
            })
            .collect();
        let Some(alarm) = hit.first().and_then(|(e, _)| e.cell.case.as_workload().alarm()) else {
            continue;
        };
        hit.sort_by_key(|(e, _)| e.x);
        let lo = hit.iter().map(|h| h.1).fold(f64::INFINITY, f64::min) * 100.0;
        let hi = hit.iter().map(|h| h.1).fold(0.0, f64::max) * 100.0;
        let pct = if hi - lo < 0.5 {
            format!("{lo:.0}%")
        } else {
            format!("{lo:.0}-{hi:.0}%")
        };
        let at: Vec<&str> = hit.iter().map(|(e, _)| e.x_text.as_str()).collect();
        lines.push(capitalized(&format!(
            "{c} had {pct} {} at {} (median over the repetitions): {}.",
            alarm.what,
            join_and(&at),
            alarm.advice
        )));
    }
    lines
}

/// The title of the findings' group of published claims (`report::claims`).
pub const CLAIMS_TITLE: &str = "Published claims";

/// The findings' group of published claims a run's cells hold both sides of, and iopath's own
/// finding on the path where zero copy is not copied (issue 36.4) (None: neither);
/// `ab`: an A/B run's record, whose variant B's settings are part of its B cells.
pub fn claims_group(cells: &[CellSummary], ab: Option<&crate::store::ab::AbRun>) -> Option<FindingGroup> {
    let lines: Vec<String> = super::claims::claim_findings(cells, ab)
        .into_iter()
        .chain(super::claims::uncopied_zero_copy_findings(cells))
        .map(|c| c.line)
        .collect();
    (!lines.is_empty()).then(|| FindingGroup {
        title: CLAIMS_TITLE.into(),
        winners: Vec::new(),
        lines,
    })
}

/// The findings of a run's cases. `crossovers` are those found in the same cases.
/// `caches`: the machine's caches stored with the run, to read a memlat curve's levels.
pub fn findings(cells: &[CellSummary], crossovers: &[CrossoverRow], caches: &[CacheInfo]) -> Findings {
    let entries: Vec<Entry> = cells.iter().filter_map(entry).collect();
    let mut group_names: Vec<&str> = Vec::new();
    for e in &entries {
        if !group_names.contains(&e.group.as_str()) {
            group_names.push(&e.group);
        }
    }
    let mut groups: Vec<FindingGroup> = group_names
        .into_iter()
        .filter_map(|name| {
            let members: Vec<&Entry> = entries.iter().filter(|e| e.group == name).collect();
            contest_group(name, &members, crossovers)
        })
        .collect();
    groups.extend(load_groups(cells));
    if let Some(g) = memlat_group(cells, caches) {
        groups.push(g);
    }
    Findings {
        groups,
        noise: noise_verdict(cells),
    }
}

/// One group of contenders' findings (None: no point has a measured winner): a stream's seed
/// questions, who is best where, who is never the best, and the alarms.
fn contest_group(name: &str, members: &[&Entry], crossovers: &[CrossoverRow]) -> Option<FindingGroup> {
    let higher_is_better = headline(&members[0].cell.case).2;
    let winners = winners_by_point(members, higher_is_better);
    if winners.is_empty() {
        return None;
    }
    let contenders: Vec<String> = {
        let mut c: Vec<String> = Vec::new();
        for e in members {
            if !c.contains(&e.contender) {
                c.push(e.contender.clone());
            }
        }
        c
    };
    let by_reference: Vec<&str> = members
        .iter()
        .filter(|e| e.by_reference)
        .map(|e| e.contender.as_str())
        .collect();
    // A name as the findings give it: a by-reference sender says so wherever it is named.
    let named = |n: &str| {
        if by_reference.contains(&n) {
            format!("{n} (by reference)")
        } else {
            n.to_string()
        }
    };
    // The seed questions first (stream): one-copy against two-copy, and zero-copy.
    let (mut lines, zc_explained) = match members[0].cell.case.get::<StreamCase>() {
        Some(s) => stream_seed_lines(s, members, &contenders, &winners, crossovers),
        None => (Vec::new(), false),
    };
    lines.extend(best_where_lines(members, &winners, &named, higher_is_better));
    lines.extend(never_best_lines(
        members,
        &contenders,
        &winners,
        &named,
        higher_is_better,
        zc_explained,
    ));
    lines.extend(alarm_lines(members));
    Some(FindingGroup {
        title: name.to_string(),
        winners,
        lines: lines.into_iter().map(|l| capitalized(&l)).collect(),
    })
}

/// The best contender at each point of the group's axis, with the runner-up, whether it is
/// significantly ahead, and how far behind every other one is.
fn winners_by_point(members: &[&Entry], higher_is_better: bool) -> Vec<Winner> {
    let mut xs: Vec<u64> = members.iter().map(|e| e.x).collect();
    xs.sort_unstable();
    xs.dedup();
    let mut winners = Vec::new();
    for &x in &xs {
        let mut here: Vec<(&Entry, f64, &[f64])> = members
            .iter()
            .filter(|e| e.x == x)
            .filter_map(|e| values(e).map(|(m, v)| (*e, m, v)))
            .filter(|(_, m, _)| m.is_finite() && *m > 0.0)
            .collect();
        if here.is_empty() {
            continue;
        }
        here.sort_by(|a, b| {
            if higher_is_better {
                b.1.total_cmp(&a.1)
            } else {
                a.1.total_cmp(&b.1)
            }
        });
        let best = here[0].1;
        let factor = |m: f64| if higher_is_better { best / m } else { m / best };
        // Ahead means a significant difference and a factor above 1 (equal medians are not
        // ahead, whatever the ranks say).
        let ahead_of =
            |r: &(&Entry, f64, &[f64])| factor(r.1) > 1.0 && mann_whitney(here[0].2, r.2).is_some_and(|t| t.p < ALPHA);
        winners.push(Winner {
            x,
            x_text: here[0].0.x_text.clone(),
            winner: here[0].0.contender.clone(),
            runner_up: here.get(1).map(|r| (r.0.contender.clone(), factor(r.1))),
            significant: here.get(1).is_some_and(ahead_of),
            tested: here.get(1).is_some_and(|r| testable(here[0].2.len(), r.2.len())),
            reps: here.iter().map(|r| r.2.len()).min().unwrap_or(0),
            by_reference: here[0].0.by_reference,
            behind: here
                .iter()
                .map(|r| (r.0.contender.clone(), factor(r.1), ahead_of(r)))
                .collect(),
        });
    }
    winners
}

/// A stream group's seed questions: where one-copy overtakes two-copy, what each zero-copy
/// mode did, the receive copies and the softirq share, and how many more paths cross; and
/// whether a zero-copy mode was explained.
fn stream_seed_lines(
    s: &StreamCase,
    members: &[&Entry],
    contenders: &[String],
    winners: &[Winner],
    crossovers: &[CrossoverRow],
) -> (Vec<String>, bool) {
    let mut lines = Vec::new();
    let mut seed_pairs: Vec<&CrossoverRow> = Vec::new();
    let mut zc_explained = false;
    let rows: Vec<&CrossoverRow> = crossovers.iter().filter(|r| r.threads == s.net.threads).collect();
    for r in rows
        .iter()
        .filter(|r| r.a.mode == CopyMode::OneCopy && r.b.mode == CopyMode::TwoCopy && r.a.rx == r.b.rx)
    {
        seed_pairs.push(r);
        lines.push(overtakes_sentence(r));
    }
    for zc in [CopyMode::ZeroCopy, CopyMode::UringZc] {
        let zc_rows: Vec<&CrossoverRow> = rows
            .iter()
            .copied()
            .filter(|r| r.a.mode == zc && matches!(r.b.mode, CopyMode::TwoCopy | CopyMode::OneCopy) && r.a.rx == r.b.rx)
            .collect();
        let zc_cells: Vec<&CellSummary> = members
            .iter()
            .filter(|e| e.cell.case.get::<StreamCase>().is_some_and(|c| c.mode == zc))
            .map(|e| e.cell)
            .collect();
        if zc_cells.is_empty() {
            continue;
        }
        seed_pairs.extend(zc_rows.iter().copied());
        let names: Vec<String> = contenders
            .iter()
            .filter(|c| {
                members
                    .iter()
                    .any(|e| &e.contender == *c && e.cell.case.get::<StreamCase>().is_some_and(|s| s.mode == zc))
            })
            .cloned()
            .collect();
        lines.push(zero_copy_sentence(
            zc,
            &names,
            &zc_rows,
            winners,
            zero_copy_copied(zc_cells.iter().copied()),
        ));
        zc_explained = true;
    }
    let stream_cells: Vec<&CellSummary> = members.iter().map(|e| e.cell).collect();
    if let Some(line) = receive_copies_sentence(&stream_cells) {
        lines.push(line);
    }
    if let Some(line) = softirq_share_sentence(&stream_cells) {
        lines.push(line);
    }
    let others = rows
        .iter()
        .filter(|r| !seed_pairs.contains(r) && r.result.inside_range().is_some())
        .count();
    if others > 0 {
        lines.push(format!(
            "{others} more pair{} of paths cross{} in this range: see the crossover table.",
            if others == 1 { "" } else { "s" },
            if others == 1 { "es" } else { "" }
        ));
    }
    (lines, zc_explained)
}

/// Who is best where: a sentence per run of points with the same verdict (one contender
/// alone, not tested, within the noise, or a winner and its margin).
fn best_where_lines(
    members: &[&Entry],
    winners: &[Winner],
    named: &dyn Fn(&str) -> String,
    higher_is_better: bool,
) -> Vec<String> {
    let best_word = if higher_is_better {
        members[0].best_word
    } else {
        "lowest"
    };
    let every = members[0].everywhere;
    let kind = members[0].contenders_are;
    let metric_name = metric_word(headline(&members[0].cell.case).0);
    let segs = segments(winners, key);
    let mut lines = Vec::new();
    for &(first, last) in &segs {
        let span = &winners[first..=last];
        let where_ = if segs.len() == 1 && winners.len() > 1 {
            let (a, b) = (&span[0].x_text, &span[span.len() - 1].x_text);
            // "1-100 clients", "1KiB-1MiB".
            let unit = b.find(' ').map(|i| &b[i..]).unwrap_or("");
            let a = a.split(' ').next().unwrap_or(a);
            let b = b.split(' ').next().unwrap_or(b);
            format!("at {every} ({a}-{b}{unit})")
        } else {
            span_text(span)
        };
        let line = match key(&span[0]) {
            Key::Alone(w) => format!("{} alone was measured {where_}", named(&w)),
            Key::Untested => untested_text(span, &where_, named),
            Key::Noise => {
                let mut names: Vec<String> = Vec::new();
                for p in span {
                    for n in std::iter::once(&p.winner).chain(p.runner_up.as_ref().map(|r| &r.0)) {
                        if !names.contains(n) {
                            names.push(n.clone());
                        }
                    }
                }
                let names: Vec<String> = names.iter().map(|n| named(n)).collect();
                format!(
                    "{where_} no {kind} is significantly ahead of the next best: {} are within the noise of \
                     the repetitions",
                    join_and(&names.iter().map(String::as_str).collect::<Vec<_>>())
                )
            }
            Key::Winner(w) => {
                let margins: Vec<f64> = span.iter().filter_map(|p| p.runner_up.as_ref().map(|r| r.1)).collect();
                let lo = margins.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = margins.iter().copied().fold(0.0, f64::max);
                let mut seconds: Vec<&str> = Vec::new();
                for p in span {
                    if let Some((n, _)) = &p.runner_up {
                        if !seconds.contains(&n.as_str()) {
                            seconds.push(n);
                        }
                    }
                }
                let how = if span[0].by_reference {
                    format!(" {BY_REFERENCE}")
                } else {
                    String::new()
                };
                format!(
                    "{w} is {best_word} {where_}{how}, {} ahead of {} on {metric_name}",
                    factor_range(lo, hi),
                    seconds.iter().map(|n| named(n)).collect::<Vec<_>>().join(" / ")
                )
            }
        };
        lines.push(format!("{line}."));
    }
    lines
}

/// Points too few repetitions could not test: the highest medians, by runs of the same one,
/// said as what they are.
fn untested_text(span: &[Winner], where_: &str, named: &dyn Fn(&str) -> String) -> String {
    let runs = segments(span, |w| w.winner.clone());
    let medians: Vec<String> = runs
        .iter()
        .map(|&(a, b)| format!("{} {}", named(&span[a].winner), span_text(&span[a..=b])))
        .collect();
    let reps = span.iter().map(|w| w.reps).min().unwrap_or(0);
    format!(
        "not tested {where_}: {} per case {} too few for a significant difference \
         (--reps 6 tests it and gives error bars); the highest medians were {}",
        repetitions_text(reps),
        if reps == 1 { "is" } else { "are" },
        join_and(&medians.iter().map(String::as_str).collect::<Vec<_>>())
    )
}

/// Contenders that win nowhere: how far behind where the best is significantly ahead.
fn never_best_lines(
    members: &[&Entry],
    contenders: &[String],
    winners: &[Winner],
    named: &dyn Fn(&str) -> String,
    higher_is_better: bool,
    zc_explained: bool,
) -> Vec<String> {
    let mut lines = Vec::new();
    for c in contenders {
        if winners.iter().any(|w| &w.winner == c) {
            continue;
        }
        let behind: Vec<(&str, f64, bool)> = winners
            .iter()
            .filter_map(|w| {
                w.behind
                    .iter()
                    .find(|(n, _, _)| n == c)
                    .map(|(_, f, s)| (w.x_text.as_str(), *f, *s))
            })
            .collect();
        let slower: Vec<f64> = behind.iter().filter(|b| b.2).map(|b| b.1).collect();
        // Only a contender the best beats significantly somewhere is called slower.
        if slower.is_empty() {
            continue;
        }
        let lo = slower.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = slower.iter().copied().fold(0.0, f64::max);
        let noise: Vec<&str> = behind.iter().filter(|b| !b.2).map(|b| b.0).collect();
        let worse = if higher_is_better { "slower" } else { "higher" };
        let unit = members[0].axis;
        let mut line = if noise.is_empty() {
            format!(
                "{} is never the best: {} {worse} than the best at each {unit}",
                named(c),
                factor_range(lo, hi)
            )
        } else {
            format!(
                "{} is never the best: {} {worse} than the best where the difference is significant, \
                 within the noise of the best at {}",
                named(c),
                factor_range(lo, hi),
                join_and(&noise)
            )
        };
        let is_zc = members
            .iter()
            .any(|e| &e.contender == c && e.cell.case.get::<StreamCase>().is_some_and(|s| s.mode.is_zero_copy()));
        if is_zc && !zc_explained {
            let zc: Vec<&CellSummary> = members.iter().filter(|e| &e.contender == c).map(|e| e.cell).collect();
            if let Some(copied) = zero_copy_copied(zc) {
                line.push_str(&format!(", {}", copied_clause(copied)));
            }
        }
        lines.push(format!("{line}."));
    }
    lines
}

/// A net load cell as a contender: its flows' copy mode, ranked on the probe's loaded p99 among
/// the modes of its setting (direction, flows, sizes, topology).
fn load_entry(cell: &CellSummary) -> Option<Entry<'_>> {
    let c = cell.case.get::<LoadCase>()?;
    if super::figures::minority_served(cell).is_some() {
        return None;
    }
    Some(Entry {
        group: format!("net load, {}", super::load_figures::setting(c)),
        contender: c.path(),
        x: c.flows as u64,
        x_text: format!("{} flow{}", c.flows, if c.flows == 1 { "" } else { "s" }),
        by_reference: sends_by_reference(&cell.case),
        metric: (names::LATENCY_LOADED_P99_US, Role::System),
        contenders_are: "mode",
        axis: "flows",
        everywhere: "every load",
        best_word: "lowest",
        cell,
    })
}

/// net load's findings, a group per setting: which copy mode of the flows keeps the probe's
/// p99 lowest under load (the findings' own rank test on the repetitions, with the intervals
/// of the medians and of their ratio), and how much the load inflated the probe in each case.
fn load_groups(cells: &[CellSummary]) -> Vec<FindingGroup> {
    let entries: Vec<Entry> = cells.iter().filter_map(load_entry).collect();
    let mut titles: Vec<&str> = Vec::new();
    for e in &entries {
        if !titles.contains(&e.group.as_str()) {
            titles.push(&e.group);
        }
    }
    titles
        .into_iter()
        .map(|title| {
            let members: Vec<&Entry> = entries.iter().filter(|e| e.group == title).collect();
            let winners = winners_by_point(&members, false);
            let mut lines: Vec<String> = winners.iter().filter_map(|w| lowest_p99_line(w, &members)).collect();
            lines.extend(members.iter().filter_map(|e| inflation_line(e.cell)));
            FindingGroup {
                title: title.to_string(),
                winners,
                lines: lines.iter().map(|l| capitalized(l)).collect(),
            }
        })
        .collect()
}

/// A median and its 95% interval (order statistics, 6 repetitions or more), each number as
/// `fmt` writes it: `85.2 us (95% CI 80.1..90.3 us)`, `1.5x (95% CI 1.2..1.9x)`; with fewer
/// repetitions their range, and that it is no interval.
fn median_text(s: &crate::measure::stats::Summary, fmt: impl Fn(f64) -> String, unit: &str) -> String {
    let (what, (lo, hi), short) = match s.ci95 {
        Some(ci) => ("95% CI".to_string(), ci, ""),
        None => (repetitions_text(s.n), (s.min, s.max), ": too few for a 95% interval"),
    };
    let bare = fmt(lo).trim_end_matches(unit).to_string();
    format!("{} ({what} {bare}..{}{short})", fmt(s.median), fmt(hi))
}

/// Microseconds as the findings write them: `85.2 us`.
fn us_text(v: f64) -> String {
    format!("{} us", super::fmt_num(Some(v)))
}

/// Which copy mode keeps the probe's loaded p99 lowest at one point: named with its margin and
/// the interval of the ratio when the rank test finds it ahead; "within the noise" when it
/// does not; "not tested" when the repetitions cannot reach p < 0.05.
fn lowest_p99_line(w: &Winner, members: &[&Entry]) -> Option<String> {
    let at = |name: &str| members.iter().find(|e| e.x == w.x && e.contender == name).copied();
    let p99 = |e: &Entry| {
        e.cell
            .summary(e.metric.0, e.metric.1)
            .map(|s| median_text(s, us_text, " us"))
    };
    let named = |e: &Entry| {
        if e.by_reference {
            format!("{} (by reference)", e.contender)
        } else {
            e.contender.clone()
        }
    };
    let (Some(best), Some((runner, factor))) = (at(&w.winner), w.runner_up.as_ref()) else {
        return Some(format!("{} alone was measured with {} of load.", w.winner, w.x_text));
    };
    let second = at(runner)?;
    let (best_values, second_values) = (values(best).map(|v| v.1), values(second).map(|v| v.1));
    let (best_values, second_values) = (best_values.unwrap_or_default(), second_values.unwrap_or_default());
    let ratio = match bootstrap_ratio_ci(best_values, second_values) {
        Some((lo, hi)) => format!(
            "{} (95% CI {}..{})",
            factor_text(*factor),
            factor_text(lo).trim_end_matches('x'),
            factor_text(hi)
        ),
        None => factor_text(*factor),
    };
    let p = mann_whitney(best_values, second_values).map_or("n/a".into(), |t| format!("{:.3}", t.p));
    let (best_p99, second_p99) = (p99(best).unwrap_or_default(), p99(second).unwrap_or_default());
    let while_ = format!("while {} run", w.x_text);
    if !w.tested {
        return Some(format!(
            "which copy mode keeps the probe's p99 lowest {while_} is not tested: {} per case {} too few \
             for a significant difference (--reps 6 tests it and gives intervals); the lowest median was \
             {}'s {best_p99}, {ratio} below {}'s {second_p99}.",
            repetitions_text(w.reps),
            if w.reps == 1 { "is" } else { "are" },
            named(best),
            named(second)
        ));
    }
    if !w.significant {
        return Some(format!(
            "no copy mode keeps the probe's p99 significantly lower {while_}: {} {best_p99} and {} \
             {second_p99} are within the noise of the repetitions (ratio {ratio}; Mann-Whitney U p = {p}).",
            named(best),
            named(second)
        ));
    }
    let how = if best.by_reference {
        format!(" {BY_REFERENCE}")
    } else {
        String::new()
    };
    let mut line = format!(
        "{} keeps the probe's p99 lowest {while_}{how}: {best_p99}, {ratio} lower than {}'s {second_p99} \
         (Mann-Whitney U p = {p})",
        best.contender,
        named(second)
    );
    let (ahead, noise): (Vec<_>, Vec<_>) = w.behind.iter().skip(2).partition(|b| b.2);
    if !ahead.is_empty() {
        let others: Vec<String> = ahead
            .iter()
            .map(|b| format!("{} below {}", factor_text(b.1), b.0))
            .collect();
        line.push_str(&format!(
            "; {}",
            join_and(&others.iter().map(String::as_str).collect::<Vec<_>>())
        ));
    }
    if !noise.is_empty() {
        let others: Vec<&str> = noise.iter().map(|b| b.0.as_str()).collect();
        line.push_str(&format!("; {} within the noise of it", join_and(&others)));
    }
    line.push('.');
    Some(line)
}

/// How many times its idle latency the probe took under load in one case, at p50 and p99,
/// with the intervals of the per-repetition ratios (None: no ratio stored).
fn inflation_line(cell: &CellSummary) -> Option<String> {
    let c = cell.case.get::<LoadCase>()?;
    let ratio_text = |name: &str| Some(median_text(cell.summary(name, Role::System)?, factor_text, "x"));
    let p50 = ratio_text(names::LATENCY_INFLATION_P50)?;
    let p99 = ratio_text(names::LATENCY_INFLATION_P99)
        .map(|t| format!(", its p99 {t} the idle p99"))
        .unwrap_or_default();
    Some(format!(
        "with {} flows the probe's loaded p50 is {p50} the idle p50{p99}.",
        c.path()
    ))
}

/// A memlat curve's levels, read as the terminal reads them.
fn memlat_group(cells: &[CellSummary], caches: &[CacheInfo]) -> Option<FindingGroup> {
    let mut values: Vec<(u64, f64)> = Vec::new();
    let mut cvs: Vec<(u64, f64)> = Vec::new();
    for (size, cell) in super::cells::memlat_cells(cells) {
        if let Some(metric) = cell.metric(names::LATENCY_NS, Role::System) {
            values.extend(metric.values.iter().map(|v| (size, *v)));
        }
        cvs.extend(super::cells::memlat_cvs(size, cell));
    }
    if values.is_empty() {
        return None;
    }
    Some(FindingGroup {
        title: format!("micro memlat: {}", crate::micro::levels::HEADING),
        winners: Vec::new(),
        lines: crate::micro::levels::read_levels_spread(&values, &cvs, caches).lines(),
    })
}

/// One line on the noise: how many cases' headline varies more than 5% between repetitions.
pub fn noise_verdict(cells: &[CellSummary]) -> String {
    let mut judged = 0;
    let mut noisy: Vec<(f64, &str)> = Vec::new();
    for cell in cells {
        if let Some(cv) = cell
            .headline_metric()
            .and_then(|m| m.summary.as_ref())
            .and_then(|s| s.cv)
        {
            judged += 1;
            if cv > NOISY_CV {
                noisy.push((cv, &cell.label));
            }
        }
    }
    if judged == 0 {
        return "Noise: not judged (fewer than 2 repetitions per case).".into();
    }
    noisy.sort_by(|a, b| b.0.total_cmp(&a.0));
    let share = noisy.len() as f64 / judged as f64;
    let verdict = if noisy.is_empty() {
        "low"
    } else if share <= 0.2 {
        "moderate"
    } else {
        "high"
    };
    if noisy.is_empty() {
        format!(
            "Noise: {verdict}: every one of {judged} cases varies by at most {:.0}% (CV) between repetitions.",
            NOISY_CV * 100.0
        )
    } else {
        format!(
            "Noise: {verdict}: {} of {judged} cases vary by more than {:.0}% (CV) between repetitions, worst {} at {:.0}%; see Noise.",
            noisy.len(),
            NOISY_CV * 100.0,
            noisy[0].1,
            noisy[0].0 * 100.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::cells::summarize_run;
    use super::super::cells::tests::{run_data, stream_case};
    use super::super::crossover::stream_crossovers;
    use super::*;
    use crate::case::RxMode;
    use crate::observation::{Metric, Source};
    use crate::store::RunData;

    /// `n` repetitions spread tightly (±0.4%) around `v`; the same `v` gives the same values.
    fn reps(v: f64, n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| v * (1.0 + 0.002 * (i as f64 - (n as f64 - 1.0) / 2.0)))
            .collect()
    }

    const SIZES: [u64; 5] = [1024, 4096, 16384, 65536, 262144];

    /// The seed run: two-copy ahead at 1-4 KiB, the two copy modes equal at 16 KiB, one-copy
    /// ahead from 64 KiB; zero-copy, copied by the kernel every time, slowest everywhere; splice
    /// (by reference) fastest at 256 KiB. `n` repetitions per case.
    fn seed_run(n: usize) -> RunData {
        let two = [4.0, 5.0, 6.0, 7.0, 8.0];
        let one = [2.0, 3.0, 6.0, 9.0, 12.0];
        let zc = [1.0, 1.5, 2.0, 3.0, 4.0];
        let splice = [0.5, 1.0, 3.0, 8.0, 20.0];
        let mut cases = Vec::new();
        for (i, &size) in SIZES.iter().enumerate() {
            cases.push((stream_case(CopyMode::TwoCopy, size, 1), reps(two[i], n)));
            cases.push((stream_case(CopyMode::OneCopy, size, 1), reps(one[i], n)));
            cases.push((stream_case(CopyMode::ZeroCopy, size, 1), reps(zc[i], n)));
            cases.push((stream_case(CopyMode::Splice, size, 1), reps(splice[i], n)));
        }
        let mut data = run_data(cases);
        for cell in &mut data.cells {
            if matches!(&cell.case, Case::NetStream(s) if s.mode == CopyMode::ZeroCopy) {
                cell.observation.push(Metric::new(
                    "zerocopy_not_copied_fraction",
                    Role::System,
                    0.0,
                    "fraction",
                    Source::Tool,
                ));
            }
        }
        data
    }

    /// Issue 35: the counted receive copies per payload byte, by receive mode, in one sentence;
    /// none without the figure.
    #[test]
    fn counted_receive_copies_are_said_per_receive_mode() {
        let mut cases = Vec::new();
        for rx in [RxMode::Copy, RxMode::Scatter, RxMode::Trunc] {
            let mut case = stream_case(CopyMode::TwoCopy, 65536, 1);
            if let Case::NetStream(s) = &mut case {
                s.rx_mode = rx;
            }
            cases.push((case, reps(10.0, 2)));
        }
        let plain = summarize_run(&run_data(cases.clone()));
        assert!(!findings(&plain, &[], &[]).lines().join("\n").contains("tracepoints"));
        let mut data = run_data(cases);
        for cell in &mut data.cells {
            let copied = match &cell.case {
                Case::NetStream(s) if s.rx_mode == RxMode::Trunc => 0.0,
                _ => 1.0003,
            };
            cell.observation.push(Metric::new(
                names::KERNEL_COPY_BYTES_PER_BYTE,
                Role::System,
                copied,
                "B/B",
                Source::Trace,
            ));
        }
        let cells = summarize_run(&data);
        let lines = findings(&cells, &stream_crossovers(&cells), &[]).lines().join("\n");
        assert!(
            lines.contains(
                "Counted at its tracepoints, the kernel copied 1.00 B per payload byte to user space on receive with \
                 copy and scatter, 0.00 B with trunc."
            ),
            "{lines}"
        );
    }

    /// Issue 35: each role's softirq share, its range over the cells, in one sentence; none
    /// without the figure.
    #[test]
    fn the_softirq_share_of_each_role_is_said() {
        let cases: Vec<_> = [16384, 65536]
            .into_iter()
            .map(|size| (stream_case(CopyMode::TwoCopy, size, 1), reps(10.0, 2)))
            .collect();
        let plain = summarize_run(&run_data(cases.clone()));
        assert!(!findings(&plain, &[], &[]).lines().join("\n").contains("softirqs took"));
        let mut data = run_data(cases);
        for cell in &mut data.cells {
            let small = matches!(&cell.case, Case::NetStream(s) if s.size == 16384);
            let client = if small { 0.15 } else { 0.22 };
            for (role, share) in [(Role::Client, client), (Role::Server, 0.25)] {
                cell.observation.push(Metric::new(
                    names::SOFTIRQ_SHARE,
                    role,
                    share,
                    "fraction",
                    Source::Trace,
                ));
            }
        }
        let cells = summarize_run(&data);
        let lines = findings(&cells, &stream_crossovers(&cells), &[]).lines().join("\n");
        assert!(
            lines.contains(
                "Counted at its tracepoints, the network stack's softirqs took 15-22% of the client threads' and \
                 25% of the server threads' time on CPU."
            ),
            "{lines}"
        );
    }

    /// Issue 30, item 5: one-copy's median is higher than two-copy's at 64KiB and 256KiB but
    /// within the noise. The sentence says so instead of a bare "never overtakes", and the
    /// table's mark (`Findings::standing`) calls the lower median within the noise of the best.
    #[test]
    fn never_overtakes_owns_up_to_higher_medians_within_the_noise() {
        // ±12% spread: overlapping repetitions, no significant difference anywhere.
        let noisy = |v: f64| -> Vec<f64> { (0..6).map(|i| v * (1.0 + 0.05 * (i as f64 - 2.5))).collect() };
        let two = [10.0, 20.0, 30.0, 29.12, 37.89];
        let one = [9.9, 19.8, 29.9, 29.29, 40.84];
        let mut cases = Vec::new();
        for (i, &size) in SIZES.iter().enumerate() {
            cases.push((stream_case(CopyMode::TwoCopy, size, 1), noisy(two[i])));
            cases.push((stream_case(CopyMode::OneCopy, size, 1), noisy(one[i])));
        }
        let cells = summarize_run(&run_data(cases));
        let rows = stream_crossovers(&cells);
        let f = findings(&cells, &rows, &[]);
        let lines = f.lines().join("\n");
        assert!(
            lines.contains("One-copy never significantly overtakes two-copy here: its median is higher at 64KiB and 256KiB, but within the noise"),
            "{lines}"
        );
        let at = |mode: CopyMode, size: u64| {
            let cell = cells
                .iter()
                .find(|c| matches!(&c.case, Case::NetStream(s) if s.mode == mode && s.size == size))
                .unwrap();
            f.standing(cell)
        };
        assert_eq!(at(CopyMode::OneCopy, 65536), Some(Standing::Best));
        assert_eq!(at(CopyMode::TwoCopy, 65536), Some(Standing::WithinNoise));
        assert_eq!(at(CopyMode::TwoCopy, 1024), Some(Standing::Best));
        assert_eq!(Standing::WithinNoise.mark(), "~");
        // Well apart, the slower is behind, unmarked.
        let (_, g) = seed_findings(6);
        let cells = summarize_run(&seed_run(6));
        let f = Findings {
            groups: vec![g],
            noise: String::new(),
        };
        let zc = cells
            .iter()
            .find(|c| matches!(&c.case, Case::NetStream(s) if s.mode == CopyMode::ZeroCopy && s.size == 1024))
            .unwrap();
        assert_eq!(f.standing(zc), Some(Standing::Behind));
        assert_eq!(Standing::Behind.mark(), "");
    }

    /// Issue 32 B: a UDP stream that lost most of its datagrams says so among the findings
    /// (`Workload::alarm`), with the loss and what its Gbit/s then means; a mode that lost
    /// little is not named.
    #[test]
    fn udp_streams_that_lost_most_datagrams_say_so_in_the_findings() {
        use crate::case::{UdpRecvMode, UdpSendMode, UdpStreamCase};
        // The seed run's loopback parameters, unpinned.
        let Case::NetStream(stream) = stream_case(CopyMode::TwoCopy, 1024, 1) else {
            unreachable!("stream_case makes a stream case")
        };
        let case = |mode: UdpSendMode, size: u64| {
            Case::NetUdpStream(UdpStreamCase {
                mode,
                rx_mode: UdpRecvMode::Recv,
                size,
                batch: 16,
                rate: None,
                rcvbuf: None,
                net: stream.net.clone(),
            })
        };
        let mut data = run_data(vec![
            (case(UdpSendMode::Gso, 1024), reps(2.0, 6)),
            (case(UdpSendMode::Gso, 8192), reps(3.0, 6)),
            (case(UdpSendMode::Sendmmsg, 1024), reps(1.0, 6)),
        ]);
        for cell in &mut data.cells {
            let loss = match (&cell.case, cell.position) {
                (_, 0) => 0.81,
                (_, 1) => 0.93,
                _ => 0.02,
            };
            cell.observation.push(Metric::new(
                names::LOSS_FRACTION,
                Role::System,
                loss,
                "fraction",
                Source::Tool,
            ));
        }
        let cells = summarize_run(&data);
        let f = findings(&cells, &[], &[]);
        let lines = f.lines().join("\n");
        let said: Vec<&str> = lines.lines().filter(|l| l.contains("of its datagrams lost")).collect();
        assert_eq!(said.len(), 1, "{lines}");
        let want = format!(
            "{}/recv had 81-93% of its datagrams lost at 1kib datagrams and 8kib datagrams",
            UdpSendMode::Gso
        );
        assert!(said[0].to_lowercase().contains(&want), "{lines}");
        assert!(said[0].contains("--rate paces it"), "{lines}");
    }

    fn seed_findings(n: usize) -> (Vec<CrossoverRow>, FindingGroup) {
        let cells = summarize_run(&seed_run(n));
        let rows = stream_crossovers(&cells);
        let f = findings(&cells, &rows, &[]);
        assert_eq!(f.groups.len(), 1);
        (rows, f.groups[0].clone())
    }

    /// Whatever the repetitions, no sentence reads "1.0x", and a by-reference mode is never
    /// called fastest without "by reference" in the same sentence.
    fn never_overclaims(lines: &[String]) {
        for l in lines {
            assert!(!l.contains(" 1.0x"), "a factor that reads as no difference: {l}");
            if l.starts_with("Splice is fastest") {
                assert!(l.contains("by reference"), "{l}");
            }
        }
    }

    /// The issue: a 1-repetition sweep said "No crossover between the copy modes" beside
    /// findings naming a winner per size. With one repetition nothing is tested, and it says so.
    #[test]
    fn one_repetition_claims_no_crossover_no_winner_and_no_absence() {
        let (rows, g) = seed_findings(1);
        assert!(!rows.is_empty());
        for r in &rows {
            assert_eq!(r.result, Crossover::NotTested { reps: 1 }, "{r:?}");
            assert_eq!(r.result.describe(), "not tested (1 repetition)");
            assert!(r.b_ahead.is_empty());
        }
        let text = g.lines.join("\n");
        assert!(
            g.lines[0].starts_with("Whether one-copy overtakes two-copy is not tested (1 repetition per case"),
            "{text}"
        );
        assert!(
            g.lines[1].starts_with("Whether zero-copy pays off is not tested"),
            "{text}"
        );
        assert!(g.lines[1].contains("the kernel copied every send"), "{text}");
        for word in [
            "fastest",
            "never the best",
            "no crossover",
            "No crossover",
            "ahead of",
            "slower",
        ] {
            assert!(!text.contains(word), "'{word}' claimed with one repetition:\n{text}");
        }
        assert!(g.winners.iter().all(|w| !w.tested && !w.significant));
        // The medians are still told, as medians, in one sentence, splice named by reference.
        let medians: Vec<&String> = g.lines.iter().filter(|l| l.starts_with("Not tested")).collect();
        assert_eq!(medians.len(), 1, "{text}");
        assert!(
            medians[0].contains("the highest medians were two-copy from 1KiB to 16KiB, one-copy at 64KiB and splice (by reference) at 256KiB"),
            "{text}"
        );
        never_overclaims(&g.lines);
    }

    /// Two repetitions a side: still not testable (the smallest p with 2 against 2 is 1/3).
    #[test]
    fn two_repetitions_are_not_tested_either() {
        let (rows, g) = seed_findings(2);
        assert!(rows.iter().all(|r| r.result == Crossover::NotTested { reps: 2 }));
        assert_eq!(
            rows[0].result.describe(),
            "not tested (2 repetitions: too few for p < 0.05)"
        );
        let text = g.lines.join("\n");
        assert!(text.contains("is not tested (2 repetitions per case"), "{text}");
        assert!(text.contains("2 repetitions per case are too few"), "{text}");
        assert!(!text.contains("fastest") && !text.contains("slower"), "{text}");
        never_overclaims(&g.lines);
    }

    /// Five repetitions: the seed questions come first, one sentence each, from the data;
    /// the size where the two copy modes are equal is within the noise; splice is crowned at
    /// 256 KiB only with "by reference" in the sentence; the other pairs are the table's.
    #[test]
    fn five_repetitions_answer_the_seed_questions_first() {
        let (rows, g) = seed_findings(5);
        let text = g.lines.join("\n");
        let one_two = rows
            .iter()
            .find(|r| r.a.mode == CopyMode::OneCopy && r.b.mode == CopyMode::TwoCopy)
            .unwrap();
        assert_eq!(one_two.result.inside_range(), Some(65536));
        assert_eq!(one_two.b_ahead, vec![1024, 4096]);
        assert_eq!(
            g.lines[0],
            "One-copy overtakes two-copy from 64KiB (significantly, Mann-Whitney U p < 0.05); two-copy is \
             significantly ahead at 1KiB and 4KiB."
        );
        assert!(
            g.lines[1].starts_with("Zero-copy never wins here: the kernel copied every send (loopback"),
            "{text}"
        );
        assert!(
            g.lines[2].contains("more pairs of paths cross in this range: see the crossover table"),
            "{text}"
        );
        assert!(
            !text.contains("Crossovers:"),
            "the pairwise list is a table now:\n{text}"
        );
        assert!(
            text.contains("Two-copy is fastest from 1KiB to 4KiB, 1.7-2.0x ahead of one-copy on throughput."),
            "{text}"
        );
        assert!(
            text.contains(
                "At 16KiB no mode is significantly ahead of the next best: two-copy and one-copy are within the noise"
            ),
            "{text}"
        );
        assert!(
            text.contains("One-copy is fastest at 64KiB, 1.1x ahead of splice (by reference)"),
            "{text}"
        );
        assert!(
            text.contains("Splice is fastest at 256KiB by reference (the same message's pages"),
            "{text}"
        );
        // Zero-copy's line gives only significant factors, and the copy is said once.
        assert!(
            text.contains("Zero-copy is never the best: 3.0-5.0x slower than the best at each size."),
            "{text}"
        );
        assert_eq!(text.matches("the kernel copied").count(), 1, "{text}");
        assert!(g.winners.iter().all(|w| w.tested));
        never_overclaims(&g.lines);
    }

    #[test]
    fn small_significant_factors_keep_their_digits() {
        assert_eq!(factor_text(1.04), "1.04x");
        assert_eq!(factor_text(1.004), "1.004x");
        assert_eq!(factor_text(1.4), "1.4x");
        assert_eq!(factor_text(12.0), "12x");
        assert_eq!(factor_range(1.0, 1.04), "1.000-1.04x");
    }

    /// A mode never best and within the noise of the best at some size: the factor is given
    /// only where the difference is significant, never "1.0x slower".
    #[test]
    fn a_loser_within_the_noise_somewhere_is_not_called_slower_there() {
        let cells = summarize_run(&run_data(vec![
            (stream_case(CopyMode::TwoCopy, 1024, 1), reps(4.0, 5)),
            (stream_case(CopyMode::OneCopy, 1024, 1), reps(4.0, 5)),
            (stream_case(CopyMode::Uring, 1024, 1), reps(4.0, 5)),
            (stream_case(CopyMode::TwoCopy, 4096, 1), reps(8.0, 5)),
            (stream_case(CopyMode::OneCopy, 4096, 1), reps(6.0, 5)),
            (stream_case(CopyMode::Uring, 4096, 1), reps(5.0, 5)),
        ]));
        let f = findings(&cells, &stream_crossovers(&cells), &[]);
        let text = f.groups[0].lines.join("\n");
        assert!(
            text.contains("Uring is never the best: 1.6x slower than the best where the difference is significant, within the noise of the best at 1KiB."),
            "{text}"
        );
        never_overclaims(&f.groups[0].lines);
    }

    /// One-copy ahead at small sizes and behind at large ones: no crossover, said as it is.
    #[test]
    fn a_lead_that_does_not_last_is_not_never_overtakes() {
        let cells = summarize_run(&run_data(vec![
            (stream_case(CopyMode::TwoCopy, 1024, 1), reps(2.0, 5)),
            (stream_case(CopyMode::OneCopy, 1024, 1), reps(4.0, 5)),
            (stream_case(CopyMode::TwoCopy, 65536, 1), reps(9.0, 5)),
            (stream_case(CopyMode::OneCopy, 65536, 1), reps(6.0, 5)),
        ]));
        let f = findings(&cells, &stream_crossovers(&cells), &[]);
        assert_eq!(
            f.groups[0].lines[0],
            "One-copy is significantly ahead of two-copy at 1KiB, but two-copy is at 64KiB: no lasting crossover."
        );
    }

    /// net load over the findings of a run: the load group alone, its lines joined.
    fn load_findings(cases: Vec<(Case, Vec<f64>)>) -> (String, Vec<Winner>) {
        let cells = summarize_run(&super::super::load_figures::tests::load_run(cases));
        let f = findings(&cells, &[], &[]);
        assert_eq!(f.groups.len(), 1, "{:?}", f.groups);
        assert_eq!(f.groups[0].title, "net load, up 2 flows 64KiB probe 64B");
        (f.groups[0].lines.join("\n"), f.groups[0].winners.clone())
    }

    /// Issue 34's acceptance: the copy mode whose flows keep the probe's loaded p99 lowest is
    /// named, with its interval, the ratio's and the rank test's p; the inflation per case.
    #[test]
    fn the_mode_that_keeps_the_probes_p99_lowest_under_load_is_named_with_intervals() {
        use super::super::load_figures::tests::load_case;
        let (text, winners) = load_findings(vec![
            (
                load_case(CopyMode::ZeroCopy, 2),
                vec![205.0, 198.0, 210.0, 195.0, 202.0, 200.0],
            ),
            (
                load_case(CopyMode::OneCopy, 2),
                vec![101.0, 99.0, 103.0, 97.0, 100.0, 100.0],
            ),
            (
                load_case(CopyMode::TwoCopy, 2),
                vec![400.0, 390.0, 410.0, 405.0, 395.0, 400.0],
            ),
        ]);
        assert!(winners[0].significant && winners[0].tested, "{winners:?}");
        assert!(
            text.contains(
                "One-copy keeps the probe's p99 lowest while 2 flows run: 100.0 us (95% CI 97.00..103.0 us), 2.0x (95% CI 2.0..2.1x) lower"
            ),
            "{text}"
        );
        assert!(
            text.contains("lower than zero-copy's 201.0 us (95% CI 195.0..210.0 us)"),
            "{text}"
        );
        assert!(text.contains("Mann-Whitney U p = 0.00"), "{text}");
        assert!(text.contains("; 4.0x below two-copy."), "{text}");
        // Idle is a tenth of loaded in every repetition: 10x with an interval of one point.
        assert!(
            text.contains("With one-copy flows the probe's loaded p50 is 10x (95% CI 10..10x) the idle p50"),
            "{text}"
        );
        assert!(!text.contains("within the noise"), "{text}");
    }

    /// Overlapping repetitions: no mode is crowned, the line says the difference is noise.
    #[test]
    fn modes_whose_p99_overlap_under_load_are_within_the_noise_not_ranked() {
        use super::super::load_figures::tests::load_case;
        let (text, winners) = load_findings(vec![
            (
                load_case(CopyMode::OneCopy, 2),
                vec![100.0, 130.0, 90.0, 120.0, 95.0, 110.0],
            ),
            (
                load_case(CopyMode::ZeroCopy, 2),
                vec![105.0, 125.0, 92.0, 118.0, 99.0, 112.0],
            ),
        ]);
        assert!(winners[0].tested && !winners[0].significant, "{winners:?}");
        assert!(
            text.contains("No copy mode keeps the probe's p99 significantly lower while 2 flows run: one-copy"),
            "{text}"
        );
        assert!(text.contains("are within the noise of the repetitions"), "{text}");
        assert!(!text.contains("keeps the probe's p99 lowest"), "{text}");
        // Three repetitions cannot test it: said so, with the range instead of an interval.
        let (text, _) = load_findings(vec![
            (load_case(CopyMode::OneCopy, 2), vec![100.0, 101.0, 99.0]),
            (load_case(CopyMode::Splice, 2), vec![300.0, 301.0, 299.0]),
        ]);
        assert!(
            text.contains("lowest while 2 flows run is not tested: 3 repetitions per case are too few"),
            "{text}"
        );
        assert!(
            text.contains("one-copy's 100.0 us (3 repetitions 99.00..101.0 us: too few for a 95% interval)"),
            "{text}"
        );
        assert!(text.contains("below splice (by reference)'s"), "{text}");
    }
}
