//! `iopath net rr` and `iopath net crr`.

use super::error::usage;
use super::output::View;
use super::run::RunFlags;
use super::values;
use crate::case::{format_bytes, Case, CopyMode, RrCase, RrKind};
use crate::net::workload::rr;
use crate::observation::names;
use crate::observation::Role;
use crate::store::Record;
use crate::sweep::Plan;
use clap::Args;

#[derive(Args, Debug)]
pub struct RrArgs {
    /// Send modes, comma-separated, for requests and responses alike: two-copy, one-copy,
    /// zero-copy, uring, uring-zc, sendfile, splice (see `net stream --help`). The uring modes
    /// submit every message on its own (one io_uring_enter that also waits for its result), as
    /// a request must leave before its response can come. crr takes every mode but zero-copy:
    /// MSG_ZEROCOPY's completions arrive on the socket's error queue, numbered per socket, and
    /// a socket closed every transaction would take its uncollected completions with it
    /// (uring-zc's notifications arrive on the ring instead, so it can follow).
    /// Default: two-copy,one-copy,zero-copy for rr; two-copy,one-copy for crr.
    #[arg(long, value_delimiter = ',')]
    pub mode: Option<Vec<CopyMode>>,
    /// Receive modes, comma-separated, used by both ends (the server reading requests, the
    /// client reading responses); every --mode runs with every one of them: copy (recv into
    /// one buffer), scatter (recvmsg into the fields), trunc (recv with MSG_TRUNC: the kernel
    /// drops the bytes, so what is left is the send and the kernel's own path; not with
    /// --verify), zerocopy (TCP_ZEROCOPY_RECEIVE; messages smaller than a page are always
    /// copied, and it is refused as unavailable where the kernel cannot map the socket).
    /// Default: copy for two-copy, scatter for the other modes.
    #[arg(long, value_delimiter = ',', value_name = "RX_MODES")]
    pub rx_mode: Option<Vec<crate::case::RxMode>>,
    #[command(flatten)]
    pub txn: super::net::TransactionFlags,
    /// Separately heap-allocated fields per message (1 to 1024); every size must be at least
    /// this many bytes.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub fields: u32,
    #[command(flatten)]
    pub window: super::net::WindowFlags,
    #[command(flatten)]
    pub align: super::net::AlignFlag,
    #[command(flatten)]
    pub rx_wake: super::net::RxWakeFlag,
    /// Fill every request and response with a pattern from its sequence number and check
    /// every byte received, on both ends.
    #[arg(long)]
    pub verify: bool,
    /// Count with getrusage only, no perf events (they cost time at every context switch).
    #[arg(long)]
    pub no_perf: bool,
    #[command(flatten)]
    pub endpoint: super::net::EndpointFlags,
    #[command(flatten)]
    pub run: RunFlags,
}

/// `net crr`: the flags of `net rr`, run as connect-request-response-close.
#[derive(Args, Debug)]
pub struct CrrArgs {
    #[command(flatten)]
    pub args: RrArgs,
}

/// The validated grid of cases, the same for the command line, a plan file and `ab`.
pub fn rr_cases(args: &RrArgs, kind: RrKind) -> anyhow::Result<Vec<RrCase>> {
    let (_, endpoint) = super::net::endpoint_of(&args.endpoint, false)?;
    let modes = match (&args.mode, kind) {
        (Some(m), _) => values::distinct(m),
        (None, RrKind::Rr) => vec![CopyMode::TwoCopy, CopyMode::OneCopy, CopyMode::ZeroCopy],
        (None, RrKind::Crr) => vec![CopyMode::TwoCopy, CopyMode::OneCopy],
    };
    let fields = u64::from(args.fields);
    for (flag, sizes) in [
        ("--request-size", &args.txn.request_size),
        ("--response-size", &args.txn.response_size),
    ] {
        if let Some(big) = sizes.iter().find(|s| **s > rr::MAX_MESSAGE) {
            return Err(usage(format!(
                "{flag} {} is too large (accepted: up to 16M)",
                crate::format::format_bytes_exact(*big)
            )));
        }
        if let Some(small) = sizes.iter().find(|s| **s < fields) {
            return Err(usage(format!(
                "{flag} {} with --fields {fields}: every field needs at least 1 byte (use --fields {small} or fewer)",
                format_bytes(*small)
            )));
        }
    }
    let rx_modes = args.rx_mode.as_deref().unwrap_or_default();
    super::net::check_rx_modes(rx_modes, args.verify)?;
    if kind == RrKind::Crr {
        if args.txn.inflight.iter().any(|n| *n != 1) {
            return Err(usage(
                "--inflight is for net rr: crr carries one transaction per connection",
            ));
        }
        if args.txn.rate.is_some() {
            return Err(usage(
                "--rate is for net rr: crr is closed loop (each thread connects, asks, hears and closes in turn)",
            ));
        }
    }
    let mut cases = Vec::new();
    for &mode in &modes {
        for rx_mode in super::net::rx_modes_for(mode, rx_modes) {
            for shape in args.txn.shapes() {
                cases.push(RrCase {
                    kind,
                    mode,
                    rx_mode,
                    request_size: shape.request_size,
                    response_size: shape.response_size,
                    fields: args.fields as usize,
                    inflight: shape.inflight,
                    net: args
                        .window
                        .net_params(shape.threads, args.verify, &endpoint, !args.no_perf),
                    rate: args.txn.rate,
                    align: args.align.align,
                    rx_wake: args.rx_wake.or(crate::case::RxWake::Data),
                });
            }
        }
    }
    for case in &cases {
        rr::check_case(case).map_err(usage)?;
    }
    Ok(cases)
}

fn plan(args: &RrArgs, kind: RrKind) -> anyhow::Result<Plan> {
    let cases = rr_cases(args, kind)?;
    let endpoint = cases.first().map(|c| c.net.endpoint.clone());
    let cases = cases.into_iter().map(Case::NetRr).collect();
    args.endpoint.plan(&args.run, endpoint.as_ref(), cases)
}

impl TryFrom<&RrArgs> for Plan {
    type Error = anyhow::Error;
    fn try_from(args: &RrArgs) -> anyhow::Result<Plan> {
        plan(args, RrKind::Rr)
    }
}

impl TryFrom<&CrrArgs> for Plan {
    type Error = anyhow::Error;
    fn try_from(args: &CrrArgs) -> anyhow::Result<Plan> {
        plan(&args.args, RrKind::Crr)
    }
}

/// The human table: one row per case (the median of its repetitions). By default the case,
/// transactions/s, p50 and p99 latency (crr: the connect, exchange and close medians) and the
/// CPU per transaction of each side, in at most 100 characters; `--wide` adds every other
/// column. Then what the latency counts, the `sources:` line and the notes grouped by kind.
pub fn render_rr_table(records: &[Record], view: View) -> String {
    use super::output::{Column, Show};
    let merged = super::output::median_records(records);
    let repeated = merged.iter().any(|(_, n)| *n > 1);
    let crr = merged
        .iter()
        .any(|(r, _)| r.case.get::<RrCase>().is_some_and(|c| c.kind == RrKind::Crr));
    let key = super::output::case_key::<RrCase>;
    let m = |title, show, name, role| Column::metric(title, show, name, role, records);
    let mut cols = vec![
        key("kind", |c| c.kind.as_str().to_string()),
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
    ]);
    if crr {
        cols.extend([
            m("conn p50", Show::Default, names::CONNECT_P50_US, Role::Client),
            m("xchg p50", Show::Default, names::EXCHANGE_P50_US, Role::Client),
            m("close p50", Show::Default, names::CLOSE_P50_US, Role::Client),
        ]);
    }
    cols.extend([
        m("cli us/txn", Show::Default, names::CPU_US_PER_TXN, Role::Client),
        m("srv us/txn", Show::Default, names::CPU_US_PER_TXN, Role::Server),
        m("p90 us", Show::Wide, names::LATENCY_P90_US, Role::Client),
        m("p99.9 us", Show::Wide, names::LATENCY_P999_US, Role::Client),
        m("max us", Show::Wide, names::LATENCY_MAX_US, Role::Client),
        m("cli sc/txn", Show::Wide, names::SYSCALLS_PER_TXN, Role::Client),
        m("srv sc/txn", Show::Wide, names::SYSCALLS_PER_TXN, Role::Server),
        m("cli sirq", Show::Wide, names::SOFTIRQ_SHARE, Role::Client),
        m("srv sirq", Show::Wide, names::SOFTIRQ_SHARE, Role::Server),
    ]);
    let mut text = super::output::render_table(&cols, &merged, view);
    text.push_str(
        "latency: client, request sent (open loop: due) until response received; crr: connect() until closed\n",
    );
    text.push_str(&super::output::notes(records, view));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cases(argv: &[&str], kind: RrKind) -> anyhow::Result<Vec<RrCase>> {
        let parsed = crate::cli::values::parse_flags::<RrArgs>(argv)?;
        rr_cases(&parsed, kind)
    }

    #[test]
    fn sizes_cross_and_crr_refuses_what_it_cannot_do() {
        let grid = cases(
            &["--request-size", "64,1K", "--response-size", "64", "--mode", "one-copy"],
            RrKind::Rr,
        )
        .unwrap();
        assert_eq!(grid.len(), 2);
        assert_eq!(cases(&[], RrKind::Crr).unwrap().len(), 2, "crr defaults skip zero-copy");
        for (argv, needle) in [
            (vec!["--inflight", "4"], "--inflight is for net rr"),
            (vec!["--rate", "100"], "--rate is for net rr"),
            (vec!["--mode", "zero-copy"], "crr cannot use zero-copy"),
        ] {
            let err = cases(&argv, RrKind::Crr).unwrap_err();
            assert!(err.downcast_ref::<crate::cli::UsageError>().is_some(), "{err}");
            assert!(err.to_string().contains(needle), "{err}");
        }
        // Every send mode with every receive mode; without --rx-mode, the usual pairing.
        let crossed = cases(
            &["--mode", "two-copy,uring-zc", "--rx-mode", "copy,zerocopy"],
            RrKind::Crr,
        )
        .unwrap();
        let pairs: Vec<_> = crossed.iter().map(|c| c.path()).collect();
        assert_eq!(
            pairs,
            ["two-copy", "two-copy/zerocopy", "uring-zc/copy", "uring-zc/zerocopy"]
        );
        let paired = cases(&["--mode", "two-copy,splice"], RrKind::Rr).unwrap();
        assert_eq!(
            paired.iter().map(|c| c.rx_mode).collect::<Vec<_>>(),
            [crate::case::RxMode::Copy, crate::case::RxMode::Scatter]
        );
        let err = cases(&["--rx-mode", "scatter,trunc", "--verify"], RrKind::Rr).unwrap_err();
        assert!(err.downcast_ref::<crate::cli::UsageError>().is_some(), "{err}");
        assert!(err.to_string().contains("--rx-mode trunc discards"), "{err}");
        let err = cases(&["--inflight", "64", "--request-size", "4K"], RrKind::Rr).unwrap_err();
        assert!(err.to_string().contains("64 KiB"), "{err}");
        assert_eq!(
            cases(
                &["--inflight", "64", "--request-size", "4K", "--rate", "1000"],
                RrKind::Rr
            )
            .unwrap()
            .len(),
            3
        );
    }
}
