//! `iopath net load`.

use super::error::usage;
use super::output::View;
use super::run::RunFlags;
use super::values;
use crate::case::{format_bytes, Case, CopyMode, Direction, LoadCase, RxMode};
use crate::net::workload::load;
use crate::observation::names;
use crate::observation::Role;
use crate::store::Record;
use crate::sweep::Plan;
use clap::Args;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Bulk TCP flows each way (1 to 64; both: this many up and this many down), a list
    /// (1,2,4) or a range (1..8).
    #[arg(long, default_value = "2", value_parser = values::parse_counts_up_to::<{ crate::case::MAX_FLOWS }>)]
    pub flows: values::CountList,
    /// Which way the flows go: up (client to server), down, both (flent's rrul is 4 and 4),
    /// comma-separated.
    #[arg(long, default_value = "up", value_delimiter = ',')]
    pub direction: Vec<Direction>,
    /// The flows' send modes, comma-separated, as `net stream` takes them (two-copy, one-copy,
    /// zero-copy, uring, uring-zc, sendfile, splice); the probe is always one-copy.
    #[arg(long, default_value = "one-copy", value_delimiter = ',')]
    pub mode: Vec<CopyMode>,
    /// The flows' receive modes, comma-separated: copy, scatter, trunc, zerocopy; every --mode
    /// runs with every one. Default: copy for two-copy, scatter for the other modes.
    #[arg(long, value_delimiter = ',', value_name = "RX_MODES")]
    pub rx_mode: Option<Vec<RxMode>>,
    /// Bytes per send of a flow (1 B to 16 MiB).
    #[arg(long, default_value = "64K", value_parser = values::parse_size)]
    pub size: u64,
    /// Bytes of the probe's request and of its response (1 B to 64 KiB).
    #[arg(long, default_value = "64", value_parser = values::parse_size)]
    pub probe_size: u64,
    /// How long the probe runs alone on the idle link before the flows start (its idle
    /// figures); then the flows ramp for --warmup before the loaded window opens.
    #[arg(long, default_value = "2s", value_parser = values::parse_duration)]
    pub idle: Duration,
    /// Round trips of the probe per second (e.g. 100, as ping's -i 0.01), each started on
    /// schedule and every one timed; default: back to back, each as soon as the last is
    /// answered. The idle pass and the window must each hold at least 10.
    #[arg(long, value_name = "PER_S", value_parser = clap::value_parser!(u64).range(1..))]
    pub probe_rate: Option<u64>,
    /// The flows' TCP congestion control (e.g. cubic, bbr, reno), set on both ends' flow
    /// sockets; the probe keeps the default. Default: the kernel's
    /// (net.ipv4.tcp_congestion_control, recorded with the run). Loss-based cubic fills a
    /// deep queue; bbr keeps it short.
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    #[command(flatten)]
    pub window: super::net::WindowFlags,
    /// Fill every message with a pattern from its sequence number and check every byte
    /// received, on both ends.
    #[arg(long)]
    pub verify: bool,
    /// Count the flows with getrusage only, no perf events (the probe never has them).
    #[arg(long)]
    pub no_perf: bool,
    #[command(flatten)]
    pub endpoint: super::net::EndpointFlags,
    #[command(flatten)]
    pub run: RunFlags,
}

/// The validated grid of cases, the same for the command line, a plan file and `ab`.
pub fn load_cases(args: &LoadArgs) -> anyhow::Result<Vec<LoadCase>> {
    let (_, endpoint) = super::net::endpoint_of(&args.endpoint, false)?;
    let rx_modes = args.rx_mode.as_deref().unwrap_or_default();
    super::net::check_rx_modes(rx_modes, args.verify)?;
    let idle_ms = args.idle.as_millis() as u64;
    // Above a million a second the interval is 0 µs, which the case's check refuses.
    let probe_interval_us = args.probe_rate.map(|rate| 1_000_000 / rate);
    let mut net = args.window.net_params(1, args.verify, &endpoint, !args.no_perf);
    // The idle pass is the first part of the warm-up: the server's deadline and
    // --max-session see the whole session.
    net.warmup_ms = net.warmup_ms.saturating_add(idle_ms);
    let mut cases = Vec::new();
    for &direction in &values::distinct(&args.direction) {
        for &flows in args.flows.iter() {
            for &mode in &values::distinct(&args.mode) {
                for rx_mode in super::net::rx_modes_for(mode, rx_modes) {
                    cases.push(LoadCase {
                        flows,
                        direction,
                        mode,
                        rx_mode,
                        size: args.size,
                        probe_size: args.probe_size,
                        idle_ms,
                        probe_interval_us,
                        congestion: args.cc.clone(),
                        net: net.clone(),
                    });
                }
            }
        }
    }
    for case in &cases {
        load::check_case(case).map_err(usage)?;
    }
    Ok(cases)
}

impl TryFrom<&LoadArgs> for Plan {
    type Error = anyhow::Error;
    fn try_from(args: &LoadArgs) -> anyhow::Result<Plan> {
        let cases = load_cases(args)?;
        let endpoint = cases.first().map(|c| c.net.endpoint.clone());
        let cases = cases.into_iter().map(Case::NetLoad).collect();
        args.endpoint.plan(&args.run, endpoint.as_ref(), cases)
    }
}

/// The human table: one row per case (the median of its repetitions): the flows, the probe's
/// p50 and p99 idle and loaded, the inflation at p50, RPM, the flows' sum and fairness,
/// retransmits; `--wide` adds the rest.
pub fn render_load_table(records: &[Record], view: View) -> String {
    use super::output::{Column, Show};
    let merged = super::output::median_records(records);
    let key = super::output::case_key::<LoadCase>;
    let m = |title, show, name, role| Column::metric(title, show, name, role, records);
    let mut cols = vec![
        key("dir", |c| c.direction.to_string()),
        key("flows", |c| c.flows.to_string()),
        key("mode", |c| c.path()),
        key("size", |c| format_bytes(c.size)),
    ];
    if merged.iter().any(|(_, n)| *n > 1) {
        cols.push(Column::key("reps", |_, n| n.to_string()));
    }
    cols.extend([
        m("idle p50", Show::Default, names::LATENCY_IDLE_P50_US, Role::System),
        m("load p50", Show::Default, names::LATENCY_LOADED_P50_US, Role::System),
        m("load p99", Show::Default, names::LATENCY_LOADED_P99_US, Role::System),
        m("x p50", Show::Default, names::LATENCY_INFLATION_P50, Role::System),
        m("RPM", Show::Default, names::RPM, Role::System),
        m("Gbit/s", Show::Default, names::LOAD_GBPS, Role::System),
        m("jain", Show::Default, names::JAIN_INDEX, Role::System),
        m("retrans", Show::Default, "tcp_retransmits", Role::System),
        m("queue B", Show::Default, names::QDISC_BACKLOG_CLOSE_BYTES, Role::Server),
        m("q drops", Show::Wide, names::QDISC_DROPS, Role::Server),
        m("up queue B", Show::Wide, names::QDISC_BACKLOG_CLOSE_BYTES, Role::Client),
        m("idle p99", Show::Wide, names::LATENCY_IDLE_P99_US, Role::System),
        m("load p90", Show::Wide, names::LATENCY_LOADED_P90_US, Role::System),
        m("load p99.9", Show::Wide, names::LATENCY_LOADED_P999_US, Role::System),
        m("x p99", Show::Wide, names::LATENCY_INFLATION_P99, Role::System),
        m("min flow", Show::Wide, names::FLOW_MIN_GBPS, Role::System),
        m("max flow", Show::Wide, names::FLOW_MAX_GBPS, Role::System),
        m("cli usr s", Show::Wide, names::CPU_USER_S, Role::Client),
        m("cli sys s", Show::Wide, names::CPU_SYS_S, Role::Client),
        m("srv usr s", Show::Wide, names::CPU_USER_S, Role::Server),
        m("srv sys s", Show::Wide, names::CPU_SYS_S, Role::Server),
    ]);
    let mut text = super::output::render_table(&cols, &merged, view);
    text.push_str("latency: the probe's round trips in us (its own connection), idle before the flows start and loaded inside the window; x: loaded over idle\n");
    if records.iter().any(|r| {
        r.observation
            .value(names::QDISC_BACKLOG_CLOSE_BYTES, Role::Server)
            .is_some()
    }) {
        text.push_str("queue B: bytes waiting in the shaped link's queue toward the client as the window closed (up queue B: toward the server); retrans: the server namespace's TCP retransmits\n");
    }
    text.push_str(&super::output::notes(records, view));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cases(argv: &[&str]) -> anyhow::Result<Vec<LoadCase>> {
        let parsed = crate::cli::values::parse_flags::<LoadArgs>(argv)?;
        load_cases(&parsed)
    }

    /// Directions, flow counts and modes cross; the idle pass is the first part of the
    /// warm-up; what the flags refuse is a usage error.
    #[test]
    fn the_grid_crosses_and_bad_input_is_a_usage_error() {
        let grid = cases(&[
            "--direction",
            "up,both",
            "--flows",
            "1,4",
            "--mode",
            "one-copy,zero-copy",
        ])
        .unwrap();
        assert_eq!(grid.len(), 8);
        let first = &grid[0];
        assert_eq!((first.idle_ms, first.net.warmup_ms, first.net.threads), (2000, 2500, 1));
        assert!(cases(&["--flows", "0"]).is_err());
        assert!(cases(&["--flows", "65"]).is_err());
        for (argv, needle) in [
            (vec!["--probe-size", "1M"], "--probe-size 1 B to 64 KiB"),
            (vec!["--rx-mode", "trunc", "--verify"], "--rx-mode trunc discards"),
            (
                vec!["--probe-rate", "5", "--idle", "1s"],
                "fits 5 probes in the 1000 ms idle pass",
            ),
            (vec!["--probe-rate", "2000000"], "--probe-rate above 1000000/s"),
            (
                vec!["--cc", "cubic;rm"],
                "--cc 'cubic;rm' is not a congestion control's name",
            ),
        ] {
            let err = cases(&argv).unwrap_err();
            assert!(err.downcast_ref::<crate::cli::UsageError>().is_some(), "{err}");
            assert!(err.to_string().contains(needle), "{err}");
        }
    }
}
