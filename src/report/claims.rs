//! Published claims: figures kernel developers published (a cover letter, LWN, a commit
//! message) that a run of iopath can re-measure. Each claim in [`CLAIMS`] says where it comes
//! from, what it published (a figure before and after a change), which cases it applies to
//! (which side of the change a case is, and the rest of the case it must be paired on) and,
//! where the change works by a mechanism iopath can see, whether the mechanism happened here.
//! A run holding both sides of a claim gets a finding per published figure: `reproduced`,
//! `not reproduced here: <reason>` or `cannot decide: <reason>`, decided on the ratio of
//! medians after / before with the 95% percentile-bootstrap interval and the Mann-Whitney
//! test that `compare` and the findings use (docs/methodology.md, "Published claims").
//!
//! Adding a claim is one entry of [`CLAIMS`] (and its row in docs/benchmarks.md).

use super::cells::CellSummary;
use super::compare::{bootstrap_ratios, cell_seed, mann_whitney, percentile_interval_95, ALPHA, MIN_REPS_TO_DECIDE};
use super::findings::factor_text;
use crate::case::{Case, CopyMode, RrCase, RrKind, RxMode, StreamCase, Topology, UdpSendMode, UdpStreamCase};
use crate::net::settings::Setting;
use crate::observation::names;
use crate::observation::Role;
use crate::store::ab::{AbRun, Variant};
use crate::sys::rtnetlink::LinkSize;

/// Which side of the published change a case is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Before,
    After,
}

/// One published figure: its value before and after, and the metrics iopath reads for it, the
/// first one measured on both sides winning (a stand-in is named in the finding).
#[derive(Debug, Clone, Copy)]
pub struct Figure {
    /// What the published figure is, as the finding says it: `bytes per cycle`.
    pub what: &'static str,
    pub before: f64,
    pub after: f64,
    /// (what iopath's figure is, metric, role), in order of preference.
    pub metrics: &'static [(&'static str, &'static str, Role)],
}

impl Figure {
    /// The published ratio after / before.
    pub fn ratio(&self) -> f64 {
        self.after / self.before
    }
}

/// Which side of a claim a case is (with the A/B settings it ran with), and the key its other
/// side must share; None for a case the claim is not about.
pub type Applies = fn(&Case, &[Setting]) -> Option<(Side, String)>;

/// A published claim and the cases it applies to.
#[derive(Debug, Clone, Copy)]
pub struct Claim {
    /// Short name: `UDP GSO`.
    pub name: &'static str,
    /// Where it was published.
    pub source: &'static str,
    /// The change: `send → gso`.
    pub change: &'static str,
    /// Which side a case is, and the key a before case and an after case must share (the rest
    /// of the case); None for a case the claim is not about. The settings are those an A/B
    /// run's variant B gave the case's own namespaces (`iopath ab --set`, empty otherwise).
    pub applies: Applies,
    pub figures: &'static [Figure],
    /// Why the change's mechanism did not happen in these cells (None: it happened, or iopath
    /// cannot see it).
    pub mechanism_absent: fn(before: &CellSummary, after: &CellSummary, after_settings: &[Setting]) -> Option<String>,
    /// iopath's figures the source published none of, quoted after the first figure's finding
    /// as ratios after / before with their intervals (what iopath, role): BIG TCP's CPU per
    /// transaction of each side.
    pub also: &'static [(&'static str, &'static str, Role)],
}

/// The case as JSON with `drop` taken out, and the A/B settings it ran with: what two sides
/// of a claim must share.
fn key_without(case: &impl serde::Serialize, drop: &[&str], settings: &[Setting]) -> String {
    let mut value = serde_json::to_value(case).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        for field in drop {
            map.remove(*field);
        }
    }
    let settings: Vec<String> = settings.iter().map(|s| s.to_string()).collect();
    format!("{value} {}", settings.join(" "))
}

fn no_mechanism(_: &CellSummary, _: &CellSummary, _: &[Setting]) -> Option<String> {
    None
}

fn udp_gso(case: &Case, settings: &[Setting]) -> Option<(Side, String)> {
    let c = case.get::<UdpStreamCase>()?;
    let side = match c.mode {
        UdpSendMode::Send => Side::Before,
        UdpSendMode::Gso => Side::After,
        _ => return None,
    };
    // The batch means nothing to send(); gso's is its datagrams per call.
    Some((side, key_without(c, &["mode", "batch"], settings)))
}

/// The gso sizes the server's end of a case's topology had: the topology's own, then an A/B
/// run's variant-B settings of the `server` device over them (64 KiB: the kernel's default).
fn gso_sizes(case: &RrCase, settings: &[Setting]) -> (u64, u64) {
    let sizes = Topology::from(&case.net.endpoint).device_sizes();
    let set = |limit: LinkSize| {
        let b = settings.iter().rev().find_map(|s| match s {
            Setting::MaxSize {
                device,
                limit: l,
                bytes,
            } if device == "server" && l == limit.name() => Some(*bytes),
            _ => None,
        });
        b.or(sizes.get(limit)).unwrap_or(65536)
    };
    (set(LinkSize::GsoMax), set(LinkSize::GsoIpv4Max))
}

fn big_tcp(case: &Case, settings: &[Setting]) -> Option<(Side, String)> {
    let c = case.get::<RrCase>()?;
    // The published run: TCP_RR of 80 KB requests and responses (80,000 or 80 KiB).
    let eighty = |s: u64| s == 80_000 || s == 80 << 10;
    if c.kind != RrKind::Rr || !eighty(c.request_size) || !eighty(c.response_size) {
        return None;
    }
    let (gso, gso_v4) = gso_sizes(c, settings);
    let side = if gso.max(gso_v4) > 65536 {
        Side::After
    } else {
        Side::Before
    };
    let mut bare = c.clone();
    match &mut bare.net.endpoint {
        crate::case::Endpoint::Veth { link, .. } => link.sizes = Default::default(),
        crate::case::Endpoint::Netns { sizes, .. } => *sizes = Default::default(),
        _ => return None,
    }
    Some((side, key_without(&bare, &[], &[])))
}

/// The gso limit the kernel reads for a case's packets, by the family of its addresses: over
/// IPv4 gso_ipv4_max_size (Linux 6.3; gso_max_size alone leaves IPv4's packets at 64 KiB),
/// over IPv6 (`--topology veth:ipv6`, `netns:ipv6`) gso_max_size. (family, limit, its value,
/// the other limit's name.)
fn family_gso_limit(case: &RrCase, settings: &[Setting]) -> (&'static str, LinkSize, u64, LinkSize) {
    let (gso, gso_v4) = gso_sizes(case, settings);
    if Topology::from(&case.net.endpoint).ipv6() {
        ("IPv6", LinkSize::GsoMax, gso, LinkSize::GsoIpv4Max)
    } else {
        ("IPv4", LinkSize::GsoIpv4Max, gso_v4, LinkSize::GsoMax)
    }
}

/// BIG TCP needs the gso limit of the addresses' family raised (`family_gso_limit`). On the
/// running kernel, the proof is the packets the devices received: a veth or lo counts a GSO
/// packet as one, so bigger packets raise the bytes per packet.
fn big_tcp_absent(before: &CellSummary, after: &CellSummary, settings: &[Setting]) -> Option<String> {
    let c = after.case.get::<RrCase>()?;
    let (family, limit, bytes, other) = family_gso_limit(c, settings);
    if bytes <= 65536 {
        return Some(format!(
            "the packets stayed at most 64 KiB: this topology's addresses are {family}, whose limit is {} ({bytes}), not {}",
            limit.name(),
            other.name()
        ));
    }
    let per_packet = |c: &CellSummary| Some(c.summary(names::LINK_RX_BYTES_PER_PACKET, Role::System)?.median);
    let (b, a) = (per_packet(before)?, per_packet(after)?);
    (a <= b)
        .then(|| format!("the sizes did not take effect: the devices' bytes per packet did not grow ({b:.0} → {a:.0})"))
}

fn zero_copy_veth(case: &Case, settings: &[Setting]) -> Option<(Side, String)> {
    let c = case.get::<StreamCase>()?;
    if !matches!(Topology::from(&c.net.endpoint), Topology::Veth(_)) || c.rx_mode != RxMode::Trunc {
        return None;
    }
    let side = match c.mode {
        CopyMode::OneCopy => Side::Before,
        CopyMode::ZeroCopy => Side::After,
        _ => return None,
    };
    Some((side, key_without(c, &["mode", "zc_ring"], settings)))
}

/// Zero copy saves the copy only when the kernel did not copy after all.
fn kernel_copied(_: &CellSummary, after: &CellSummary, _: &[Setting]) -> Option<String> {
    let copied = after.summary(names::ZEROCOPY_COPIED_FRACTION, Role::System)?.median;
    (copied >= 0.5).then(|| format!("the kernel copied: copied fraction {copied:.2}"))
}

/// Every published claim iopath knows. Adding one is one entry here.
pub static CLAIMS: &[Claim] = &[
    Claim {
        name: "UDP GSO",
        source: "udpgso_bench cover letter (net-next, April 2018)",
        change: "send → gso",
        applies: udp_gso,
        figures: &[
            Figure {
                what: "bytes per cycle (876 → 2139 MB/s at 11.2 G cycles)",
                before: 876.0,
                after: 2139.0,
                metrics: &[
                    ("bytes per cycle", names::BYTES_PER_CYCLE, Role::Client),
                    (
                        "bytes per CPU-second, standing in for cycles",
                        names::BYTES_PER_CPU_S,
                        Role::Client,
                    ),
                ],
            },
            Figure {
                what: "calls per second (624,666 → 36,282)",
                before: 624_666.0,
                after: 36_282.0,
                metrics: &[("send calls per second", names::CALLS_PER_S, Role::Client)],
            },
        ],
        mechanism_absent: no_mechanism,
        also: &[],
    },
    Claim {
        name: "BIG TCP",
        source: "BIG TCP series (LWN, 2022; TCP_RR 80 KB, ten runs)",
        change: "gso/gro size 64K → 185000",
        applies: big_tcp,
        figures: &[
            Figure {
                what: "median transactions/s (8,841 → 12,796)",
                before: 8841.0,
                after: 12_796.0,
                metrics: &[("transactions/s", names::TRANSACTIONS_PER_S, Role::System)],
            },
            Figure {
                what: "median p99 latency (173.5 → 133 us)",
                before: 173.5,
                after: 133.0,
                metrics: &[("p99 latency", names::LATENCY_P99_US, Role::Client)],
            },
        ],
        mechanism_absent: big_tcp_absent,
        also: &[
            ("client CPU per transaction", names::CPU_US_PER_TXN, Role::Client),
            ("server CPU per transaction", names::CPU_US_PER_TXN, Role::Server),
        ],
    },
    Claim {
        name: "MSG_ZEROCOPY over veth",
        source: "commit of msg_zerocopy.sh (2017), `msg_zerocopy.sh 4 tcp`, receiver truncating",
        change: "one-copy → zero-copy",
        applies: zero_copy_veth,
        figures: &[Figure {
            what: "throughput (7,600 → 17,863 MB/s)",
            before: 7600.0,
            after: 17_863.0,
            metrics: &[("throughput", names::THROUGHPUT_GBPS, Role::System)],
        }],
        mechanism_absent: kernel_copied,
        also: &[],
    },
];

/// iopath's ratio of medians after / before and its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub ratio: f64,
    pub interval: (f64, f64),
}

/// A figure's values on both sides, as iopath measured it.
struct Sides {
    /// What iopath's figure is (the first of the figure's metrics both sides measured).
    what: &'static str,
    before: Vec<f64>,
    after: Vec<f64>,
    /// Why a preferred figure is not it: `bytes per cycle unavailable: no PMU`.
    stand_in: Option<String>,
}

/// What the repetitions say about one published ratio.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Reproduced,
    NotReproduced(String),
    CannotDecide(String),
}

/// iopath's ratio after / before and what it decides about `published` (> 1: a gain, < 1: a
/// drop). Reproduced: the 95% interval of the ratio of medians lies wholly on the published
/// side of 1, the rank test agrees (p < 0.05), and the interval reaches the published ratio
/// (the effect is at least as large as published, within the noise). Not reproduced: the
/// interval lies wholly short of the published ratio (no effect, the other direction, or a
/// smaller one). Cannot decide: too few repetitions, or an interval holding both no change
/// and the published ratio.
pub fn decide(before: &[f64], after: &[f64], published: f64, seed: u64) -> (Decision, Option<Measured>) {
    let n = before.len().min(after.len());
    let ratio = |a: &[f64], b: &[f64]| {
        let median = |v: &[f64]| crate::measure::stats::summarize(v).map(|s| s.median);
        Some(median(b)? / median(a)?).filter(|r| r.is_finite())
    };
    let ci = bootstrap_ratios(before, after, seed).map(|mut r| percentile_interval_95(&mut r));
    let figure = ratio(before, after)
        .zip(ci)
        .map(|(ratio, interval)| Measured { ratio, interval });
    let Some(Measured { interval: (lo, hi), .. }) = figure else {
        return (
            Decision::CannotDecide("no ratio: a side has no value, or its median is 0".into()),
            None,
        );
    };
    if n < MIN_REPS_TO_DECIDE {
        return (
            Decision::CannotDecide(format!(
                "too few repetitions ({} and {}; at least {MIN_REPS_TO_DECIDE} a side)",
                before.len(),
                after.len()
            )),
            figure,
        );
    }
    let gain = published > 1.0;
    // Oriented so that "beyond" means the published direction.
    let (near, far) = if gain { (lo, hi) } else { (1.0 / hi, 1.0 / lo) };
    let claimed = if gain { published } else { 1.0 / published };
    let significant = mann_whitney(before, after).is_some_and(|t| t.p < ALPHA);
    let interval = format!("{}..{}", factor_text(lo), factor_text(hi));
    if far < claimed {
        let why = if near > 1.0 && significant {
            format!(
                "the change is real but smaller: the interval {interval} lies short of the published {}",
                factor_text(published)
            )
        } else {
            format!(
                "the interval {interval} lies short of the published {}",
                factor_text(published)
            )
        };
        return (Decision::NotReproduced(why), figure);
    }
    if near > 1.0 && significant {
        return (Decision::Reproduced, figure);
    }
    (
        Decision::CannotDecide(format!(
            "the interval {interval} holds both no change and the published {}",
            factor_text(published)
        )),
        figure,
    )
}

/// The values of a figure's first metric both cells measured, with its name.
fn figure_values(figure: &Figure, before: &CellSummary, after: &CellSummary) -> Option<Sides> {
    let mut unavailable = None;
    for (what, name, role) in figure.metrics {
        let (Some(b), Some(a)) = (before.metric(name, *role), after.metric(name, *role)) else {
            continue;
        };
        if b.values.is_empty() || a.values.is_empty() {
            // Said once, for the first (preferred) figure: why the stand-in is used.
            if unavailable.is_none() {
                let source = if b.values.is_empty() {
                    b.source_text()
                } else {
                    a.source_text()
                };
                unavailable = Some(format!(
                    "{what} {}",
                    if source.is_empty() {
                        "unavailable".into()
                    } else {
                        source
                    }
                ));
            }
            continue;
        }
        return Some(Sides {
            what,
            before: b.values.clone(),
            after: a.values.clone(),
            stand_in: unavailable,
        });
    }
    None
}

/// `claim.also` as iopath measured it in both cells: `; also client CPU per transaction
/// 0.91x (0.85x..0.97x)`, each a ratio of medians after / before with its 95% bootstrap
/// interval (empty when the claim has none or the cells lack them).
fn also_measured(claim: &Claim, before: &CellSummary, after: &CellSummary) -> String {
    claim
        .also
        .iter()
        .filter_map(|(what, name, role)| {
            let b = &before.metric(name, *role)?.values;
            let a = &after.metric(name, *role)?.values;
            let median = |v: &[f64]| crate::measure::stats::summarize(v).map(|s| s.median);
            let r = Some(median(a)? / median(b)?).filter(|r| r.is_finite())?;
            let (lo, hi) = percentile_interval_95(&mut bootstrap_ratios(b, a, cell_seed(&after.label))?);
            Some(format!(
                "; also {what} {} ({}..{})",
                factor_text(r),
                factor_text(lo),
                factor_text(hi)
            ))
        })
        .collect()
}

/// One finding about a published figure.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimFinding {
    pub claim: &'static str,
    pub decision: Decision,
    pub line: String,
}

/// The settings variant B of an A/B run gave `cell`'s own namespaces (empty for an A cell, a
/// host-scoped run, any other run, and a setting that does not parse).
fn variant_settings(cell: &CellSummary, ab: Option<&AbRun>) -> Vec<Setting> {
    match ab {
        Some(ab) if ab.scope == "topology" && ab.variants.get(cell.position) == Some(&Variant::B) => {
            ab.settings.iter().filter_map(|s| s.parse().ok()).collect()
        }
        _ => Vec::new(),
    }
}

/// The findings of every claim whose both sides `cells` hold, paired on the rest of the case;
/// `ab`: the run's A/B record, whose variant B's settings are part of its B cells.
pub fn claim_findings(cells: &[CellSummary], ab: Option<&AbRun>) -> Vec<ClaimFinding> {
    let mut out = Vec::new();
    for claim in CLAIMS {
        let sides: Vec<(&CellSummary, Side, String, Vec<Setting>)> = cells
            .iter()
            .filter_map(|c| {
                let settings = variant_settings(c, ab);
                (claim.applies)(&c.case, &settings).map(|(s, k)| (c, s, k, settings))
            })
            .collect();
        for (after, _, key, settings) in sides.iter().filter(|s| s.1 == Side::After) {
            let Some((before, ..)) = sides.iter().find(|s| s.1 == Side::Before && s.2 == *key) else {
                continue;
            };
            let absent = (claim.mechanism_absent)(before, after, settings);
            let mut also = also_measured(claim, before, after);
            for figure in claim.figures {
                let head = format!(
                    "{} ({}), {} at {}: published {} = {}",
                    claim.name,
                    claim.source,
                    claim.change,
                    after.label,
                    figure.what,
                    factor_text(figure.ratio())
                );
                let Some(Sides {
                    what,
                    before: b,
                    after: a,
                    stand_in,
                }) = figure_values(figure, before, after)
                else {
                    out.push(ClaimFinding {
                        claim: claim.name,
                        decision: Decision::CannotDecide("iopath has none of its figures here".into()),
                        line: format!("cannot decide: {head}; iopath measured none of its figures in these cells"),
                    });
                    continue;
                };
                let (mut decision, measured) = decide(&b, &a, figure.ratio(), cell_seed(&after.label));
                if let Some(why) = &absent {
                    decision = Decision::NotReproduced(why.clone());
                }
                let ours = match measured {
                    Some(Measured {
                        ratio: r,
                        interval: (lo, hi),
                    }) => format!(
                        "iopath's {what} {} ({}..{}, {} and {} repetitions)",
                        factor_text(r),
                        factor_text(lo),
                        factor_text(hi),
                        b.len(),
                        a.len()
                    ),
                    None => format!("iopath's {what}: no ratio"),
                };
                let mut stand_in = stand_in.map(|s| format!(" ({s})")).unwrap_or_default();
                // Quoted once, after the first figure's finding.
                stand_in.push_str(&std::mem::take(&mut also));
                let line = match &decision {
                    Decision::Reproduced => format!("reproduced: {head}; {ours}{stand_in}"),
                    Decision::NotReproduced(why) => format!("not reproduced here: {why}; {head}; {ours}{stand_in}"),
                    Decision::CannotDecide(why) => format!("cannot decide: {why}; {head}; {ours}{stand_in}"),
                };
                out.push(ClaimFinding {
                    claim: claim.name,
                    decision,
                    line,
                });
            }
        }
    }
    out
}

/// What zero copy saves where the kernel does not copy (issue 36.4): a udp-stream run across
/// `--topology veth:peer=drop` (no local delivery, so nothing copies a zero-copy send's pages)
/// holding `send` and `zerocopy` or `uring-zc`, paired on the rest of the case. No one published
/// a figure for this path; the finding is iopath's own: the copied fraction (the proof) and the
/// client's CPU per datagram against send's, the ratio of medians with its 95% percentile-
/// bootstrap interval (`compare`'s), decided on the interval alone: below 1, zero copy saves
/// CPU here; above 1, it costs more at this size; holding 1, no difference shown.
pub fn uncopied_zero_copy_findings(cells: &[CellSummary]) -> Vec<ClaimFinding> {
    let side = |c: &CellSummary| {
        let u = c.case.get::<UdpStreamCase>()?;
        Topology::from(&u.net.endpoint)
            .peer_drops_udp()
            .then(|| (u.mode, key_without(u, &["mode", "batch"], &[])))
    };
    let sides: Vec<(&CellSummary, UdpSendMode, String)> =
        cells.iter().filter_map(|c| side(c).map(|(m, k)| (c, m, k))).collect();
    let mut out = Vec::new();
    for (after, mode, key) in sides
        .iter()
        .filter(|s| matches!(s.1, UdpSendMode::Zerocopy | UdpSendMode::UringZc))
    {
        let Some((before, ..)) = sides.iter().find(|s| s.1 == UdpSendMode::Send && s.2 == *key) else {
            continue;
        };
        let copied = after
            .summary(names::ZEROCOPY_COPIED_FRACTION, Role::System)
            .map(|s| s.median);
        let proof = match copied {
            Some(f) if f < 0.5 => format!("zero copy not copied here: copied fraction {f:.2}"),
            Some(f) => format!("zero copy copied after all here: copied fraction {f:.2}"),
            None => "zero copy's copies unknown here: no copied fraction".to_string(),
        };
        let values = |c: &CellSummary| {
            c.metric(names::CPU_US_PER_DATAGRAM, Role::Client)
                .map(|m| m.values.clone())
                .unwrap_or_default()
        };
        let (b, a) = (values(before), values(after));
        let (decision, cost) = cost_against_send(&b, &a, cell_seed(&after.label));
        let line = format!("{mode} across veth:peer=drop, {}: {proof}; {cost}", after.label);
        out.push(ClaimFinding {
            claim: "zero copy not copied",
            decision,
            line,
        });
    }
    out
}

/// The client's CPU per datagram of a zero-copy mode (`after`) against send's (`before`): the
/// ratio of medians, its 95% bootstrap interval, and what the interval says.
fn cost_against_send(before: &[f64], after: &[f64], seed: u64) -> (Decision, String) {
    let median = |v: &[f64]| crate::measure::stats::summarize(v).map(|s| s.median);
    let ratio = median(after)
        .zip(median(before))
        .map(|(a, b)| a / b)
        .filter(|r| r.is_finite());
    let ci = bootstrap_ratios(before, after, seed).map(|mut r| percentile_interval_95(&mut r));
    let (Some(r), Some((lo, hi))) = (ratio, ci) else {
        let why = "no client CPU per datagram on both sides".to_string();
        return (Decision::CannotDecide(why.clone()), why);
    };
    let figure = format!(
        "client CPU per datagram {} of send's ({}..{}, {} and {} repetitions)",
        factor_text(r),
        factor_text(lo),
        factor_text(hi),
        before.len(),
        after.len()
    );
    if before.len().min(after.len()) < MIN_REPS_TO_DECIDE {
        let why = format!("too few repetitions to decide (at least {MIN_REPS_TO_DECIDE} a side)");
        return (Decision::CannotDecide(why.clone()), format!("{figure}: {why}"));
    }
    if hi < 1.0 {
        (Decision::Reproduced, format!("{figure}: it saves CPU per datagram"))
    } else if lo > 1.0 {
        let why = "it costs more at this size".to_string();
        (Decision::NotReproduced(why.clone()), format!("{figure}: {why}"))
    } else {
        let why = "the interval holds 1: no difference shown".to_string();
        (Decision::CannotDecide(why.clone()), format!("{figure}: {why}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Endpoint, Link};
    use crate::measure::stats::summarize;
    use crate::report::cells::tests::stream_case;
    use crate::report::cells::MetricCell;

    /// A udp-stream case over loopback of `size`-byte datagrams, sent one per call in `mode`.
    fn udp_case(mode: UdpSendMode, size: u64) -> UdpStreamCase {
        let mut case: UdpStreamCase = serde_json::from_value(serde_json::json!({
            "mode": "send", "rx_mode": "recv", "size": size, "batch": 1, "rate": null,
            "rcvbuf": null, "threads": 1, "duration_ms": 100, "warmup_ms": 10,
            "client_cpus": null, "server_cpus": null, "verify": false,
            "endpoint": {"kind": "loopback", "port": 0}, "perf": true
        }))
        .unwrap();
        case.mode = mode;
        case
    }

    /// A stream over veth, the receiver truncating: the zero-copy claim's cases.
    fn veth_case(mode: CopyMode) -> Case {
        let mut case = stream_case(mode, 64 << 10, 1);
        if let Case::NetStream(s) = &mut case {
            s.rx_mode = RxMode::Trunc;
            s.net.endpoint = Endpoint::Veth {
                port: 0,
                link: Link::default(),
            };
        }
        case
    }

    fn metric(name: &str, role: Role, values: &[f64]) -> MetricCell {
        MetricCell {
            role,
            name: name.into(),
            unit: "x".into(),
            sources: vec!["tool".into()],
            values: values.to_vec(),
            summary: summarize(values),
        }
    }

    fn cell(case: Case, metrics: Vec<MetricCell>) -> CellSummary {
        CellSummary {
            position: 0,
            label: case.label(),
            case,
            ok: metrics.first().map_or(0, |m| m.values.len()),
            failures: Vec::new(),
            metrics,
            warnings: Vec::new(),
        }
    }

    fn zero_copy_run(before: &[f64], after: &[f64], copied: f64) -> Vec<ClaimFinding> {
        let one = cell(
            veth_case(CopyMode::OneCopy),
            vec![metric(names::THROUGHPUT_GBPS, Role::System, before)],
        );
        let zc = cell(
            veth_case(CopyMode::ZeroCopy),
            vec![
                metric(names::THROUGHPUT_GBPS, Role::System, after),
                metric(
                    names::ZEROCOPY_COPIED_FRACTION,
                    Role::System,
                    &vec![copied; after.len()],
                ),
            ],
        );
        claim_findings(&[one, zc], None)
    }

    #[test]
    fn a_gain_as_large_as_published_is_reproduced() {
        let f = zero_copy_run(
            &[10.0, 10.2, 9.9, 10.1, 10.0, 9.8],
            &[24.0, 23.5, 24.2, 23.9, 24.1, 23.7],
            0.0,
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].decision, Decision::Reproduced, "{}", f[0].line);
        assert!(
            f[0].line.starts_with("reproduced: MSG_ZEROCOPY over veth"),
            "{}",
            f[0].line
        );
        assert!(
            f[0].line.contains("published throughput (7,600 → 17,863 MB/s) = 2.4x"),
            "{}",
            f[0].line
        );
    }

    #[test]
    fn a_kernel_that_copied_refutes_the_claim_with_the_copied_fraction() {
        let f = zero_copy_run(&[10.0, 10.2, 9.9, 10.1], &[10.1, 10.0, 10.2, 9.9], 1.0);
        assert!(matches!(f[0].decision, Decision::NotReproduced(_)));
        assert!(
            f[0].line
                .starts_with("not reproduced here: the kernel copied: copied fraction 1.00"),
            "{}",
            f[0].line
        );
    }

    #[test]
    fn a_gain_short_of_the_published_one_is_not_reproduced() {
        let f = zero_copy_run(&[10.0, 10.2, 9.9, 10.1, 10.0], &[15.0, 15.2, 14.9, 15.1, 15.0], 0.0);
        match &f[0].decision {
            Decision::NotReproduced(why) => assert!(why.contains("real but smaller"), "{why}"),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn an_interval_holding_both_no_change_and_the_claim_cannot_decide() {
        let f = zero_copy_run(&[10.0, 30.0, 5.0, 20.0, 12.0], &[8.0, 40.0, 30.0, 11.0, 25.0], 0.0);
        match &f[0].decision {
            Decision::CannotDecide(why) => assert!(why.contains("holds both"), "{why}"),
            d => panic!("{d:?}: {}", f[0].line),
        }
        let few = zero_copy_run(&[10.0, 10.1], &[24.0, 24.1], 0.0);
        match &few[0].decision {
            Decision::CannotDecide(why) => assert!(why.contains("too few repetitions"), "{why}"),
            d => panic!("{d:?}"),
        }
    }

    /// A published drop (calls per second fell 17×) is decided in its own direction, and the
    /// stand-in figure says why it stands in.
    #[test]
    fn udp_gso_decides_a_drop_and_names_the_stand_in_for_cycles() {
        let udp = |mode: UdpSendMode| {
            let mut case = udp_case(mode, 1472);
            if mode == UdpSendMode::Gso {
                case.batch = 64;
            }
            Case::NetUdpStream(case)
        };
        let mut cycles = metric(names::BYTES_PER_CYCLE, Role::Client, &[]);
        cycles.sources = vec!["unavailable: no PMU".into()];
        let send = cell(
            udp(UdpSendMode::Send),
            vec![
                cycles.clone(),
                metric(names::BYTES_PER_CPU_S, Role::Client, &[1e9, 1.01e9, 0.99e9, 1e9]),
                metric(names::CALLS_PER_S, Role::Client, &[600e3, 610e3, 590e3, 605e3]),
            ],
        );
        let gso = cell(
            udp(UdpSendMode::Gso),
            vec![
                cycles,
                metric(names::BYTES_PER_CPU_S, Role::Client, &[2.6e9, 2.5e9, 2.55e9, 2.62e9]),
                metric(names::CALLS_PER_S, Role::Client, &[30e3, 31e3, 29e3, 30.5e3]),
            ],
        );
        let f = claim_findings(&[send, gso], None);
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].decision, Decision::Reproduced, "{}", f[0].line);
        assert!(
            f[0].line.contains("(bytes per cycle unavailable: no PMU)"),
            "{}",
            f[0].line
        );
        assert_eq!(f[1].decision, Decision::Reproduced, "{}", f[1].line);
    }

    /// Issue 36.4's own finding: udp-stream across `veth:peer=drop`, send against zerocopy,
    /// the copied fraction as the proof and the CPU per datagram's ratio with its interval.
    #[test]
    fn zero_copy_across_a_dropping_peer_says_what_it_saves_with_the_copied_fraction() {
        let udp = |mode: UdpSendMode, topology: &str| {
            let mut case = udp_case(mode, 1400);
            let t: Topology = topology.parse().unwrap();
            if let Topology::Veth(link) = t {
                case.net.endpoint = crate::case::Endpoint::Veth { port: 0, link };
            }
            Case::NetUdpStream(case)
        };
        let run = |topology: &str, send: &[f64], zc: &[f64], copied: f64| {
            let send = cell(
                udp(UdpSendMode::Send, topology),
                vec![metric(names::CPU_US_PER_DATAGRAM, Role::Client, send)],
            );
            let zc = cell(
                udp(UdpSendMode::Zerocopy, topology),
                vec![
                    metric(names::CPU_US_PER_DATAGRAM, Role::Client, zc),
                    metric(names::ZEROCOPY_COPIED_FRACTION, Role::System, &vec![copied; zc.len()]),
                ],
            );
            uncopied_zero_copy_findings(&[send, zc])
        };
        let send = [8.0, 8.1, 7.9, 8.05, 7.95, 8.0];
        let f = run("veth:peer=drop", &send, &[6.0, 6.1, 5.9, 6.05, 5.95, 6.0], 0.0);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].decision, Decision::Reproduced, "{}", f[0].line);
        assert!(
            f[0].line.starts_with("zerocopy across veth:peer=drop, ")
                && f[0].line.contains(
                    ": zero copy not copied here: copied fraction 0.00; client CPU per datagram 0.750x of send's ("
                )
                && f[0].line.ends_with("6 and 6 repetitions): it saves CPU per datagram"),
            "{}",
            f[0].line
        );
        let f = run("veth:peer=drop", &send, &[9.0, 9.1, 8.9, 9.05, 8.95, 9.0], 0.0);
        assert!(f[0].line.ends_with("it costs more at this size"), "{}", f[0].line);
        let f = run("veth:peer=drop", &send, &[6.0, 10.0, 7.0, 9.0, 8.0, 8.5], 1.0);
        assert!(
            f[0].line
                .contains("zero copy copied after all here: copied fraction 1.00")
                && f[0].line.ends_with("the interval holds 1: no difference shown"),
            "{}",
            f[0].line
        );
        let f = run("veth:peer=drop", &send[..2], &[6.0, 6.1], 0.0);
        assert!(f[0].line.contains("too few repetitions"), "{}", f[0].line);
        // Only across a dropping peer: over plain veth the kernel copies, and it is not this finding.
        assert!(run("veth", &send, &[6.0; 6], 1.0).is_empty());
    }

    /// BIG TCP as `iopath ab` runs it: the same rr case as A and B, B's devices given the
    /// sizes; the devices' bytes per packet are the proof they took effect, and the IPv4
    /// variant is what an IPv4 pair needs.
    #[test]
    fn big_tcp_pairs_an_ab_runs_variants_and_asks_for_proof() {
        let rr: RrCase = serde_json::from_value(serde_json::json!({
            "kind": "rr", "mode": "one-copy", "rx_mode": "copy", "request_size": 80000,
            "response_size": 80000, "fields": 1, "inflight": 1, "rate": null, "threads": 1,
            "duration_ms": 100, "warmup_ms": 10, "client_cpus": null, "server_cpus": null,
            "verify": false, "endpoint": {"kind": "veth", "port": 0}, "perf": true, "align": "page"
        }))
        .unwrap();
        let run = |rr: &RrCase, per_packet_b: f64, limit: &str| {
            let side = |position: usize, tps: &[f64], per_packet: f64| {
                let mut c = cell(
                    Case::NetRr(rr.clone()),
                    vec![
                        metric(names::TRANSACTIONS_PER_S, Role::System, tps),
                        metric(names::LINK_RX_BYTES_PER_PACKET, Role::System, &[per_packet; 6]),
                        metric(names::CPU_US_PER_TXN, Role::Client, &[40.0 * 8841.0 / tps[0]; 6]),
                    ],
                );
                c.position = position;
                c
            };
            let cells = [
                side(0, &[8800.0, 8850.0, 8790.0, 8860.0, 8840.0, 8820.0], 20_000.0),
                side(
                    1,
                    &[12_800.0, 12_900.0, 12_750.0, 12_850.0, 12_790.0, 12_820.0],
                    per_packet_b,
                ),
            ];
            let ab = AbRun {
                settings: ["server", "client"]
                    .map(|end| format!("dev:{end}:{limit}=185000"))
                    .to_vec(),
                pair_order: "abba".into(),
                scope: "topology".into(),
                variants: vec![Variant::A, Variant::B],
            };
            claim_findings(&cells, Some(&ab))
        };
        let f = run(&rr, 40_000.0, "gso_ipv4_max_size");
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].decision, Decision::Reproduced, "{}", f[0].line);
        // Each side's CPU per transaction, which the source did not publish, is quoted once;
        // a side the cells lack (the server's here) is left out.
        assert!(
            f[0].line.contains("; also client CPU per transaction 0."),
            "{}",
            f[0].line
        );
        assert!(
            !f[0].line.contains("server CPU") && !f[1].line.contains("also"),
            "{f:?}"
        );
        let f = run(&rr, 20_000.0, "gso_ipv4_max_size");
        assert!(
            f[0].line
                .starts_with("not reproduced here: the sizes did not take effect"),
            "{}",
            f[0].line
        );
        let f = run(&rr, 40_000.0, "gso_max_size");
        assert!(f[0].line.contains("whose limit is gso_ipv4_max_size"), "{}", f[0].line);
        // Over IPv6 (`veth:ipv6`) gso_max_size is the limit: raising it reproduces, raising
        // only the IPv4 variant is the reason it did not.
        let mut v6 = rr.clone();
        if let crate::case::Endpoint::Veth { link, .. } = &mut v6.net.endpoint {
            link.ipv6 = true;
        }
        let f = run(&v6, 40_000.0, "gso_max_size");
        assert_eq!(f[0].decision, Decision::Reproduced, "{}", f[0].line);
        let f = run(&v6, 40_000.0, "gso_ipv4_max_size");
        assert!(
            f[0].line.starts_with(
                "not reproduced here: the packets stayed at most 64 KiB: this topology's addresses are IPv6, whose limit is gso_max_size (65536), not gso_ipv4_max_size"
            ),
            "{}",
            f[0].line
        );
    }
}
