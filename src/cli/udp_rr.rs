//! `iopath net udp-rr`.

use super::error::usage;
use super::output::View;
use super::run::RunFlags;
use super::values;
use crate::case::{format_bytes, Case, UdpRecvMode, UdpRrCase, UdpSendMode};
use crate::net::workload::udp_rr;
use crate::observation::names;
use crate::observation::Role;
use crate::store::Record;
use crate::sweep::Plan;
use clap::Args;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct UdpRrArgs {
    /// Send modes, comma-separated, for requests and responses alike: send (send() of one
    /// buffer), sendmsg (the 8-field gather list), sendmmsg (the requests of one round in one
    /// call; needs --inflight 2 or more), gso (UDP_SEGMENT: one buffer cut into datagrams by
    /// the kernel; needs --inflight 2 or more), zerocopy (MSG_ZEROCOPY, completions read),
    /// uring (io_uring SENDMSG). With one request in flight sendmmsg and gso batch nothing and
    /// the cell reads `unavailable` saying so.
    #[arg(long, default_value = "send,sendmsg", value_delimiter = ',')]
    pub mode: Vec<UdpSendMode>,
    /// Receive modes, comma-separated, used by both ends: recv (one datagram per call),
    /// recvmmsg (up to --inflight per call), gro (UDP_GRO, coalesced datagrams split by the
    /// segment size). Every --mode runs with every one of them. Default: recv.
    #[arg(long, default_value = "recv", value_delimiter = ',', value_name = "RX_MODES")]
    pub rx_mode: Vec<UdpRecvMode>,
    #[command(flatten)]
    pub txn: super::net::TransactionFlags,
    /// A request whose reply has not come within this time is lost: counted, and a new
    /// request takes its place (1ms to 10s).
    #[arg(long, default_value = "200ms", value_parser = values::parse_duration)]
    pub loss_timeout: Duration,
    /// The receive buffer (SO_RCVBUF) asked for on both ends' sockets: 4K, 64K. The kernel
    /// doubles it and has a floor; what it granted is reported (rcvbuf_bytes). A tiny one with
    /// many in flight makes the kernel drop datagrams, to see loss counted.
    #[arg(long, value_parser = values::parse_size)]
    pub rcvbuf: Option<u64>,
    #[command(flatten)]
    pub window: super::net::WindowFlags,
    /// Fill every datagram after its header with a pattern from its sequence number and
    /// check every byte received, on both ends.
    #[arg(long)]
    pub verify: bool,
    /// Count with getrusage only, no perf events.
    #[arg(long)]
    pub no_perf: bool,
    #[command(flatten)]
    pub endpoint: super::net::EndpointFlags,
    #[command(flatten)]
    pub run: RunFlags,
}

/// The validated grid of cases, the same for the command line, a plan file and `ab`.
pub fn udp_rr_cases(args: &UdpRrArgs) -> anyhow::Result<Vec<UdpRrCase>> {
    let (topology, endpoint) = super::net::endpoint_of(&args.endpoint, false)?;
    if topology.ipv6() {
        return Err(usage(format!(
            "--topology {topology}: net udp-rr speaks IPv4 only; leave out ipv6"
        )));
    }
    let loss_timeout_ms = u64::try_from(args.loss_timeout.as_millis()).unwrap_or(u64::MAX);
    if args.loss_timeout.subsec_nanos() % 1_000_000 != 0 || !udp_rr::LOSS_TIMEOUT_MS.contains(&loss_timeout_ms) {
        return Err(usage(format!(
            "--loss-timeout {}: accepted whole milliseconds from 1ms to 10s",
            crate::format::format_duration_s(args.loss_timeout.as_secs_f64())
        )));
    }
    let mut cases = Vec::new();
    for mode in values::distinct(&args.mode) {
        for &rx_mode in &values::distinct(&args.rx_mode) {
            for shape in args.txn.shapes() {
                cases.push(UdpRrCase {
                    mode,
                    rx_mode,
                    request_size: shape.request_size,
                    response_size: shape.response_size,
                    inflight: shape.inflight,
                    rate: args.txn.rate,
                    loss_timeout_ms,
                    rcvbuf: args.rcvbuf,
                    net: args
                        .window
                        .net_params(shape.threads, args.verify, &endpoint, !args.no_perf),
                });
            }
        }
    }
    for case in &cases {
        udp_rr::check_case(case).map_err(usage)?;
    }
    Ok(cases)
}

impl TryFrom<&UdpRrArgs> for Plan {
    type Error = anyhow::Error;
    fn try_from(args: &UdpRrArgs) -> anyhow::Result<Plan> {
        let cases = udp_rr_cases(args)?;
        let endpoint = cases.first().map(|c| c.net.endpoint.clone());
        let cases = cases.into_iter().map(Case::NetUdpRr).collect();
        args.endpoint.plan(&args.run, endpoint.as_ref(), cases)
    }
}

/// The human table: one row per case (the median of its repetitions): the paths, sizes, in
/// flight, threads, rate; transactions/s, p50 and p99, lost transactions and their share,
/// CPU per transaction of each side; `--wide` adds the rest.
pub fn render_udp_rr_table(records: &[Record], view: View) -> String {
    use super::output::{Column, Show};
    let merged = super::output::median_records(records);
    let repeated = merged.iter().any(|(_, n)| *n > 1);
    let key = super::output::case_key::<UdpRrCase>;
    let m = |title, show, name, role| Column::metric(title, show, name, role, records);
    let mut cols = vec![
        key("mode", |c| c.path()),
        key("req", |c| format_bytes(c.request_size)),
        key("resp", |c| format_bytes(c.response_size)),
        key("n", |c| c.inflight.to_string()),
        key("thr", |c| c.net.threads.to_string()),
        key("rate", |c| c.rate.map_or("closed".to_string(), |r| r.to_string())),
    ];
    if repeated {
        cols.push(Column::key("reps", |_, n| n.to_string()));
    }
    cols.extend([
        m("txn/s", Show::Default, names::TRANSACTIONS_PER_S, Role::System),
        m("p50 us", Show::Default, names::LATENCY_P50_US, Role::Client),
        m("p99 us", Show::Default, names::LATENCY_P99_US, Role::Client),
        m("lost", Show::Default, names::TXN_LOST, Role::Client),
        m("cli us/txn", Show::Default, names::CPU_US_PER_TXN, Role::Client),
        m("srv us/txn", Show::Default, names::CPU_US_PER_TXN, Role::Server),
        m("lost frac", Show::Wide, names::TXN_LOST_FRACTION, Role::Client),
        m("late", Show::Wide, names::REPLIES_LATE, Role::Client),
        m("dup", Show::Wide, names::REPLIES_DUPLICATE, Role::Client),
        m("cli drops", Show::Wide, names::SOCKET_DROPS, Role::Client),
        m("srv drops", Show::Wide, names::SOCKET_DROPS, Role::Server),
        m("p90 us", Show::Wide, names::LATENCY_P90_US, Role::Client),
        m("p99.9 us", Show::Wide, names::LATENCY_P999_US, Role::Client),
        m("max us", Show::Wide, names::LATENCY_MAX_US, Role::Client),
        m("cli sc/txn", Show::Wide, names::SYSCALLS_PER_TXN, Role::Client),
        m("srv sc/txn", Show::Wide, names::SYSCALLS_PER_TXN, Role::Server),
    ]);
    let mut text = super::output::render_table(&cols, &merged, view);
    text.push_str("latency: client, request sent (open loop: due) until its reply arrived; lost: no reply within --loss-timeout\n");
    text.push_str(&super::output::notes(records, view));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cases(argv: &[&str]) -> anyhow::Result<Vec<UdpRrCase>> {
        let parsed = crate::cli::values::parse_flags::<UdpRrArgs>(argv)?;
        udp_rr_cases(&parsed)
    }

    #[test]
    fn modes_cross_and_bad_input_is_a_usage_error() {
        let grid = cases(&[
            "--mode",
            "send,uring",
            "--rx-mode",
            "recv,recvmmsg",
            "--inflight",
            "1,4",
        ])
        .unwrap();
        assert_eq!(grid.len(), 8);
        assert_eq!(grid[0].path(), "send/recv");
        assert_eq!(grid[0].loss_timeout_ms, 200);
        for (argv, needle) in [
            (vec!["--request-size", "8"], "--request-size 8"),
            (vec!["--response-size", "64K"], "65507"),
            (vec!["--inflight", "100"], "accepted 1 to 64"),
            (vec!["--loss-timeout", "20s"], "--loss-timeout"),
        ] {
            let err = cases(&argv).unwrap_err();
            assert!(err.downcast_ref::<crate::cli::UsageError>().is_some(), "{err}");
            assert!(err.to_string().contains(needle), "{needle}: {err}");
        }
        assert!(crate::cli::values::parse_flags::<UdpRrArgs>(&["--mode", "sendfile"]).is_err());
        assert!(crate::cli::values::parse_flags::<UdpRrArgs>(&["--align", "page"]).is_err());
    }
}
