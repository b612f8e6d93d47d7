//! Findings: what a run says, in a few sentences, before any table or chart. A pure function
//! of the run's case summaries (and the crossovers found in them): per comparison group (a
//! thread count of the stream, a request kind of the servers), which contender wins at each
//! point (message size, clients) and by how much, where the crossovers are or that there is
//! none, how much slower the contenders that never win are (and, for zero-copy, how much of
//! it the kernel copied anyway), and a one-line verdict on the noise. Nothing is hard-coded:
//! every word comes from the data.

use super::cells::{headline, CellSummary, NOISY_CV};
use super::compare::{mann_whitney, ALPHA};
use super::crossover::{Crossover, CrossoverRow};
use crate::case::{format_bytes, Case, CopyMode, Endpoint};
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
    /// Whether the test could say so: at least 4 repetitions a side (with fewer, no difference
    /// reaches p < 0.05).
    pub tested: bool,
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

/// "1.4x", "3.2x", "12x".
pub fn factor_text(f: f64) -> String {
    if f >= 9.95 {
        format!("{f:.0}x")
    } else {
        format!("{f:.1}x")
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
}

fn entry(cell: &CellSummary) -> Option<Entry<'_>> {
    let (group, contender, x, x_text) = match &cell.case {
        Case::NetStream(s) => (
            format!(
                "net stream, {} thread{}",
                s.threads,
                if s.threads == 1 { "" } else { "s" }
            ),
            // The send mode, with the receive mode when it is not the usual pairing.
            s.path(false),
            s.size,
            format_bytes(s.size),
        ),
        Case::NetRecords(r) => (
            format!(
                "net records, {} records, {} outstanding, {} thread{}",
                format_bytes(r.record_size),
                r.outstanding,
                r.threads,
                if r.threads == 1 { "" } else { "s" }
            ),
            r.mode.to_string(),
            r.records as u64,
            format!("{} record{}", r.records, if r.records == 1 { "" } else { "s" }),
        ),
        Case::Servers(s) => (
            format!("servers, {}", s.request),
            s.model.to_string(),
            s.clients as u64,
            format!("{} client{}", s.clients, if s.clients == 1 { "" } else { "s" }),
        ),
        Case::NetRr(r) => (
            format!(
                "net {}, {} responses, {} in flight, {} thread{}{}",
                r.kind.as_str(),
                format_bytes(r.response_size),
                r.inflight,
                r.threads,
                if r.threads == 1 { "" } else { "s" },
                r.rate.map_or(String::new(), |rate| format!(", {rate}/s offered"))
            ),
            // The send mode, with the receive mode when it is not the usual pairing.
            r.path(),
            r.request_size,
            format!("{} requests", format_bytes(r.request_size)),
        ),
        // A microbenchmark has one contender per run: nothing to rank.
        Case::Micro(_) | Case::Fake(_) => return None,
    };
    Some(Entry {
        group,
        contender,
        x,
        x_text,
        cell,
    })
}

/// Whether a workload's contenders are copy modes compared across message sizes (net stream,
/// net rr/crr, net records), not server models across loads.
fn by_size(case: &Case) -> bool {
    matches!(case, Case::NetStream(_) | Case::NetRr(_) | Case::NetRecords(_))
}

/// The values of the cell's headline metric.
fn values(cell: &CellSummary) -> Option<(f64, &[f64])> {
    let m = cell.headline_metric()?;
    let s = m.summary.as_ref()?;
    Some((s.median, &m.values))
}

/// The fewest repetitions a side with which the rank test can reach p < 0.05.
const MIN_TESTED: usize = 4;

/// Runs of consecutive points with the same significant (or untested) winner, or with no
/// significant winner: (first, last).
fn segments(winners: &[Winner]) -> Vec<(usize, usize)> {
    let key = |w: &Winner| (w.significant || !w.tested).then(|| (w.winner.clone(), w.tested));
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (i, w) in winners.iter().enumerate() {
        match out.last_mut() {
            Some((_, last)) if key(&winners[*last]) == key(w) => *last = i,
            _ => out.push((i, i)),
        }
    }
    out
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
        "throughput_gbps" => "throughput",
        "requests_per_s" => "requests/s",
        "transactions_per_s" => "transactions/s",
        "latency_ns" => "latency",
        other => other,
    }
}

/// The zero-copy sends the kernel copied (mean over the repetitions of the zero-copy cases in
/// `cells`), and whether they went over loopback.
fn zero_copy_copied(cells: &[&CellSummary]) -> Option<(f64, bool)> {
    let mut not_copied = Vec::new();
    let mut loopback = false;
    for cell in cells {
        if let Case::NetStream(s) = &cell.case {
            if s.mode.is_zero_copy() {
                loopback |= matches!(s.endpoint, Endpoint::Loopback { .. });
                if let Some(m) = cell.metric("zerocopy_not_copied_fraction", Role::System) {
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
    let mut groups = Vec::new();
    for name in group_names {
        let members: Vec<&Entry> = entries.iter().filter(|e| e.group == name).collect();
        let higher_is_better = headline(&members[0].cell.case).2;
        let metric_name = headline(&members[0].cell.case).0;
        let mut xs: Vec<u64> = members.iter().map(|e| e.x).collect();
        xs.sort_unstable();
        xs.dedup();
        let mut winners = Vec::new();
        for &x in &xs {
            let mut here: Vec<(&Entry, f64, &[f64])> = members
                .iter()
                .filter(|e| e.x == x)
                .filter_map(|e| values(e.cell).map(|(m, v)| (*e, m, v)))
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
            winners.push(Winner {
                x,
                x_text: here[0].0.x_text.clone(),
                winner: here[0].0.contender.clone(),
                runner_up: here.get(1).map(|r| (r.0.contender.clone(), factor(r.1))),
                significant: here
                    .get(1)
                    .and_then(|r| mann_whitney(here[0].2, r.2))
                    .is_some_and(|t| t.p < ALPHA),
                tested: here
                    .get(1)
                    .is_some_and(|r| here[0].2.len() >= MIN_TESTED && r.2.len() >= MIN_TESTED),
                behind: here
                    .iter()
                    .map(|r| {
                        let significant = mann_whitney(here[0].2, r.2).is_some_and(|t| t.p < ALPHA);
                        (r.0.contender.clone(), factor(r.1), significant)
                    })
                    .collect(),
            });
        }
        if winners.is_empty() {
            continue;
        }
        let mut lines = Vec::new();
        let contenders: Vec<String> = {
            let mut c: Vec<String> = Vec::new();
            for e in &members {
                if !c.contains(&e.contender) {
                    c.push(e.contender.clone());
                }
            }
            c
        };
        let best_word = if higher_is_better {
            match &members[0].cell.case {
                Case::NetStream(_) | Case::NetRr(_) => "fastest",
                _ => "best",
            }
        } else {
            "lowest"
        };
        let every = match &members[0].cell.case {
            Case::NetStream(_) | Case::NetRr(_) => "every size",
            _ => "every load",
        };
        let segs = segments(&winners);
        let metric_name = metric_word(metric_name);
        for &(first, last) in &segs {
            let span = &winners[first..=last];
            let range = |a: &str, b: &str| {
                // "1-100 clients", "1KiB-1MiB".
                let unit = b.find(' ').map(|i| &b[i..]).unwrap_or("");
                let a = a.split(' ').next().unwrap_or(a);
                let b = b.split(' ').next().unwrap_or(b);
                format!("{a}-{b}{unit}")
            };
            let where_ = if segs.len() == 1 && winners.len() > 1 {
                format!("at {every} ({})", range(&span[0].x_text, &span[span.len() - 1].x_text))
            } else if first == last {
                format!("at {}", span[0].x_text)
            } else {
                format!("from {} to {}", span[0].x_text, span[span.len() - 1].x_text)
            };
            let margins: Vec<f64> = span.iter().filter_map(|p| p.runner_up.as_ref().map(|r| r.1)).collect();
            let (lo, hi) = (
                margins.iter().copied().reduce(f64::min),
                margins.iter().copied().reduce(f64::max),
            );
            let mut names: Vec<&str> = Vec::new();
            for p in span {
                for n in std::iter::once(&p.winner).chain(p.runner_up.as_ref().map(|r| &r.0)) {
                    if !names.contains(&n.as_str()) {
                        names.push(n);
                    }
                }
            }
            let line =
                if !span[0].significant && span[0].tested {
                    let apart = match (lo, hi) {
                        (Some(lo), Some(hi)) => format!(" (best medians {} apart)", factor_range(lo, hi)),
                        _ => String::new(),
                    };
                    if span.iter().all(|p| p.runner_up.is_none()) {
                        format!("{} alone was measured {where_}", span[0].winner)
                    } else {
                        format!(
                        "{where_} no {} is significantly ahead of the next best: {} lead by turns, within the noise \
                         of the repetitions{apart}",
                        if by_size(&members[0].cell.case) { "mode" } else { "model" },
                        join_and(&names)
                    )
                    }
                } else {
                    let w = &span[0].winner;
                    let seconds: Vec<&str> = names.iter().copied().filter(|n| n != w).collect();
                    let untested = if span[0].tested || span.iter().all(|p| p.runner_up.is_none()) {
                        String::new()
                    } else {
                        format!(
                            " (by the medians only: fewer than {MIN_TESTED} repetitions a side cannot be tested \
                             for significance; --reps 5 can)"
                        )
                    };
                    match (lo, hi) {
                        (Some(lo), Some(hi)) => format!(
                            "{w} is {best_word} {where_}, {} ahead of {} on {metric_name}{untested}",
                            factor_range(lo, hi),
                            seconds.join(" / ")
                        ),
                        _ => format!("{w} is {best_word} {where_}"),
                    }
                };
            lines.push(format!("{line}."));
        }
        // Crossovers of this group (stream only): one sentence each, or that there is none.
        if let Case::NetStream(s) = &members[0].cell.case {
            let rows: Vec<&CrossoverRow> = crossovers.iter().filter(|r| r.threads == s.threads).collect();
            let found: Vec<String> = rows
                .iter()
                .filter(|r| matches!(r.result, Crossover::From { .. }))
                .map(|r| format!("{} overtakes {} {}", r.a, r.b, r.result.describe()))
                .collect();
            if !found.is_empty() {
                lines.push(format!("Crossovers: {}.", found.join("; ")));
            } else if !rows.is_empty() {
                lines.push("No crossover between the copy modes in this size range.".into());
            }
        }
        // Contenders that win nowhere: how far behind, and why when the data says so.
        for c in &contenders {
            if winners.iter().any(|w| &w.winner == c) {
                continue;
            }
            let behind: Vec<(f64, bool)> = winners
                .iter()
                .filter_map(|w| w.behind.iter().find(|(n, _, _)| n == c).map(|(_, f, s)| (*f, *s)))
                .collect();
            // Only a contender the best beats significantly somewhere is called slower.
            if !behind.iter().any(|(_, s)| *s) {
                continue;
            }
            let behind: Vec<f64> = behind.into_iter().map(|(f, _)| f).collect();
            let (Some(lo), Some(hi)) = (
                behind.iter().copied().reduce(f64::min),
                behind.iter().copied().reduce(f64::max),
            ) else {
                continue;
            };
            let worse = if higher_is_better { "slower" } else { "higher" };
            let mut line = format!(
                "{c} is never the best: {} {worse} than the best at each {}",
                factor_range(lo, hi),
                if by_size(&members[0].cell.case) { "size" } else { "load" }
            );
            if c == &CopyMode::ZeroCopy.to_string() || c == &CopyMode::UringZc.to_string() {
                let zc: Vec<&CellSummary> = members.iter().map(|e| e.cell).collect();
                if let Some((copied, loopback)) = zero_copy_copied(&zc) {
                    if copied >= 0.5 {
                        line.push_str(&format!(
                            ", because the kernel copied {:.0}% of its sends anyway{}, so it pays for pinning \
                             pages and completion notifications on top of a copy",
                            copied * 100.0,
                            if loopback {
                                " (loopback delivers to a local socket)"
                            } else {
                                ""
                            }
                        ));
                    } else {
                        line.push_str(&format!(
                            " although the kernel sent {:.0}% of its sends without a copy",
                            (1.0 - copied) * 100.0
                        ));
                    }
                }
            }
            lines.push(format!("{line}."));
        }
        groups.push(FindingGroup {
            title: name.to_string(),
            winners,
            lines: lines.into_iter().map(|l| capitalized(&l)).collect(),
        });
    }
    if let Some(g) = memlat_group(cells, caches) {
        groups.push(g);
    }
    Findings {
        groups,
        noise: noise_verdict(cells),
    }
}

/// A memlat curve's levels, read as the terminal reads them.
fn memlat_group(cells: &[CellSummary], caches: &[CacheInfo]) -> Option<FindingGroup> {
    let mut values: Vec<(u64, f64)> = Vec::new();
    let mut cvs: Vec<(u64, f64)> = Vec::new();
    for cell in cells {
        let Case::Micro(m) = &cell.case else { continue };
        if m.bench != crate::case::Bench::Memlat {
            continue;
        }
        let size = m
            .options
            .iter()
            .find(|(k, _)| k == "size_bytes")
            .and_then(|(_, v)| v.parse::<u64>().ok());
        if let (Some(size), Some(metric)) = (size, cell.metric("latency_ns", Role::System)) {
            values.extend(metric.values.iter().map(|v| (size, *v)));
        }
        if let (Some(size), Some(mean), Some(sd)) = (
            size,
            cell.metric("latency_ns_mean", Role::System),
            cell.metric("latency_ns_stddev", Role::System),
        ) {
            cvs.extend(crate::micro::levels::cvs_of(size, &mean.values, &sd.values));
        }
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

    fn five(v: f64) -> Vec<f64> {
        vec![v, v * 1.01, v * 0.99, v * 1.005, v * 0.995]
    }

    #[test]
    fn the_winner_per_size_and_its_margin_come_from_the_medians() {
        // Two-copy wins small sizes, one-copy large ones; zero-copy never wins.
        let data = run_data(vec![
            (stream_case(CopyMode::TwoCopy, 1024, 1), five(4.0)),
            (stream_case(CopyMode::OneCopy, 1024, 1), five(2.0)),
            (stream_case(CopyMode::ZeroCopy, 1024, 1), five(0.5)),
            (stream_case(CopyMode::TwoCopy, 65536, 1), five(10.0)),
            (stream_case(CopyMode::OneCopy, 65536, 1), five(15.0)),
            (stream_case(CopyMode::ZeroCopy, 65536, 1), five(3.0)),
            (stream_case(CopyMode::TwoCopy, 1 << 20, 1), five(12.0)),
            (stream_case(CopyMode::OneCopy, 1 << 20, 1), five(24.0)),
            (stream_case(CopyMode::ZeroCopy, 1 << 20, 1), five(6.0)),
        ]);
        let cells = summarize_run(&data);
        let f = findings(&cells, &stream_crossovers(&cells), &[]);
        assert_eq!(f.groups.len(), 1);
        let g = &f.groups[0];
        assert_eq!(g.title, "net stream, 1 thread");
        let won: Vec<(u64, &str)> = g.winners.iter().map(|w| (w.x, w.winner.as_str())).collect();
        assert_eq!(
            won,
            vec![(1024, "two-copy"), (65536, "one-copy"), (1 << 20, "one-copy")]
        );
        let first = &g.winners[0];
        assert!(first.tested);
        assert_eq!(
            first.runner_up.as_ref().map(|r| (r.0.as_str(), r.1)),
            Some(("one-copy", 2.0))
        );
        assert!(first.significant);
        assert!(
            g.lines[0].starts_with("Two-copy is fastest at 1KiB, 2.0x ahead of one-copy on throughput"),
            "{:?}",
            g.lines
        );
        assert!(
            g.lines[1].starts_with("One-copy is fastest from 64KiB to 1MiB, 1.5-2.0x ahead of two-copy"),
            "{:?}",
            g.lines
        );
        assert!(
            g.lines
                .iter()
                .any(|l| l.starts_with("Crossovers: one-copy overtakes two-copy from 64KiB")),
            "{:?}",
            g.lines
        );
        assert!(
            g.lines
                .iter()
                .any(|l| l.starts_with("Zero-copy is never the best: 4.0-8.0x slower")),
            "{:?}",
            g.lines
        );
        assert!(f.noise.starts_with("Noise: low"), "{}", f.noise);
    }

    #[test]
    fn one_winner_everywhere_is_one_sentence_and_too_few_repetitions_are_not_tested() {
        let data = run_data(vec![
            (stream_case(CopyMode::TwoCopy, 1024, 2), vec![4.0, 4.1]),
            (stream_case(CopyMode::OneCopy, 1024, 2), vec![2.0, 2.1]),
            (stream_case(CopyMode::TwoCopy, 4096, 2), vec![8.0, 8.1]),
            (stream_case(CopyMode::OneCopy, 4096, 2), vec![6.0, 6.1]),
        ]);
        let cells = summarize_run(&data);
        let f = findings(&cells, &stream_crossovers(&cells), &[]);
        let g = &f.groups[0];
        assert_eq!(g.title, "net stream, 2 threads");
        assert!(
            g.lines[0].starts_with("Two-copy is fastest at every size (1KiB-4KiB), 1.3-2.0x ahead of one-copy"),
            "{:?}",
            g.lines
        );
        assert!(g.lines[0].contains("by the medians only"), "{:?}", g.lines);
        assert_eq!(g.winners[1].winner, "two-copy");
        assert!(!g.winners[1].significant && !g.winners[1].tested);
        assert!(g.lines.iter().any(|l| l.starts_with("No crossover")), "{:?}", g.lines);
    }
}
