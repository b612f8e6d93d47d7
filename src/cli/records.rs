//! `iopath net records`: an in-memory store answering requests
//! of N records of R bytes, copy-out vs gather vs zero copy.

use super::error::usage;
use super::output::View;
use super::run::RunFlags;
use super::values;
use crate::case::Topology;
use crate::case::{format_bytes, Case, Pick, RecordsCase, RecordsMode};
use crate::net::workload::records;
use crate::observation::names;
use crate::observation::Role;
use crate::store::Record;
use crate::sweep::Plan;
use clap::Args;

#[derive(Args, Debug)]
#[command(mut_arg("topology", |a| a.help(TOPOLOGY_HELP)))]
pub struct RecordsArgs {
    /// How the server sends the N records of a response, comma-separated: copy-out (memcpy
    /// them into one buffer, then send), gather (sendmsg with one iovec per record, in place),
    /// zero-copy (the same with MSG_ZEROCOPY: the kernel pins the table's pages), uring-zc
    /// (io_uring SENDMSG_ZC).
    #[arg(long, default_value = "copy-out,gather,zero-copy,uring-zc", value_delimiter = ',')]
    pub mode: Vec<RecordsMode>,
    /// Bytes per record (R): 128, 1K, lists 128,1K (8 B to 1 MiB).
    #[arg(long, default_value = "128,1K", value_parser = values::parse_size_list)]
    pub record_size: values::SizeList,
    /// Records per response (N): a list 1,8,16 or a range 1..32 (both ends and every power of
    /// two between); every count from 1 to 32 is `$(seq -s, 1 32)`.
    #[arg(long, default_value = "1..32", value_parser = values::parse_count_list)]
    pub records: values::CountList,
    /// Size of the server's table, filled once per case before the window. Keep it several
    /// times the last-level cache so random records come from DRAM, as a real store's would.
    #[arg(long, default_value = "256M", value_parser = values::parse_size)]
    pub table: u64,
    /// Which records a request names: random (uniform over the whole table, defeating the
    /// cache) or hot (uniform over its first 256 KiB, a set that stays cached); a list runs both.
    #[arg(long, default_value = "random", value_delimiter = ',')]
    pub pick: Vec<Pick>,
    /// Requests each client keeps in flight on its connection: 1 (one at a time) or more
    /// (pipelined), a list 1,8.
    #[arg(long, default_value = "1", value_parser = values::parse_count_list)]
    pub outstanding: values::CountList,
    /// Client threads, each with its own connection and its own server thread.
    #[arg(long, default_value = "1", value_parser = values::parse_counts_up_to::<{ records::MAX_THREADS }>)]
    pub threads: values::CountList,
    #[command(flatten)]
    pub window: super::net::WindowFlags,
    #[command(flatten)]
    pub align: super::net::AlignFlag,
    /// The client checks every byte of every record against the pattern of the id it asked
    /// for (costs client CPU; the run fails if any record arrives corrupted).
    #[arg(long)]
    pub verify: bool,
    /// Count with getrusage only, no perf events (they cost time at every context switch).
    #[arg(long)]
    pub no_perf: bool,
    /// Before each case's window, prove what the kernel did with the server's bytes: send one
    /// response to a receiver that is not reading, overwrite what the send call was handed
    /// (copy-out's transmit buffer, or the records) and see which bytes arrive. Adds
    /// alias_by_reference_fraction (0 copied, 1 by reference); uring-zc's notifications say it.
    #[arg(long)]
    pub prove_copies: bool,
    // No --connect: a remote server is `--topology remote:HOST:PORT`.
    #[command(flatten)]
    pub endpoint: super::net::EndpointFlags<super::net::NoConnect>,
    #[command(flatten)]
    pub run: RunFlags,
}

/// `--topology` of net records, which has no `--connect`: what a remote server does here.
const TOPOLOGY_HELP: &str = "Where the two ends live: loopback, netns (both in a fresh private network namespace), veth[:mtu=N][,rate=R] (the server in a fresh namespace behind a veth pair), or remote HOST:PORT (an `iopath net serve` there holds the table and sends: over a real NIC zero copy really avoids the copy). Namespaces need root";

/// Stage two: the validated grid of cases, the same for the command line and a plan file.
pub fn records_cases(args: &RecordsArgs) -> anyhow::Result<Vec<RecordsCase>> {
    let (topology, endpoint) = super::net::endpoint_of(&args.endpoint, false)?;
    if let Some(bad) = args
        .record_size
        .iter()
        .find(|s| !(8..=records::MAX_RECORD_SIZE).contains(*s))
    {
        return Err(usage(format!(
            "--record-size {}: out of range (accepted: 8 B to 1M)",
            crate::format::format_bytes_exact(*bad)
        )));
    }
    let in_range = |flag: &str, list: &[usize], max: usize| -> anyhow::Result<()> {
        match list.iter().find(|n| **n == 0 || **n > max) {
            Some(bad) => Err(usage(format!("{flag} {bad}: out of range (accepted: 1 to {max})"))),
            None => Ok(()),
        }
    };
    in_range("--records", &args.records, records::MAX_RECORDS)?;
    in_range("--outstanding", &args.outstanding, records::MAX_OUTSTANDING)?;
    in_range("--threads", &args.threads, records::MAX_THREADS)?;
    if args.table > records::MAX_TABLE_BYTES {
        return Err(usage(format!(
            "--table {}: too large (accepted: up to 64G)",
            crate::format::format_bytes_exact(args.table)
        )));
    }
    let mut cases = Vec::new();
    for mode in values::distinct(&args.mode) {
        for &record_size in &args.record_size {
            for &n in &args.records {
                for &pick in &values::distinct(&args.pick) {
                    for &outstanding in &args.outstanding {
                        for &threads in &args.threads {
                            cases.push(RecordsCase {
                                mode,
                                record_size,
                                records: n,
                                // A whole number of records.
                                table_bytes: args.table / record_size * record_size,
                                pick,
                                outstanding,
                                net: args.window.net_params(threads, args.verify, &endpoint, !args.no_perf),
                                align: args.align.align,
                                prove_copies: args.prove_copies,
                            });
                        }
                    }
                }
            }
        }
    }
    // One case runs at a time: each must fit, with its table, in half of what the machine and
    // the memory cgroup still allow (a remote server checks its own memory).
    let headroom = crate::sys::procfs::memory_headroom().filter(|_| topology.starts_server());
    for case in &cases {
        records::check_case(case, headroom).map_err(usage)?;
    }
    Ok(cases)
}

impl TryFrom<&RecordsArgs> for Plan {
    type Error = anyhow::Error;
    fn try_from(args: &RecordsArgs) -> anyhow::Result<Plan> {
        let cases = records_cases(args)?;
        let interface = args.endpoint.topology.clone().unwrap_or(Topology::Loopback).interface();
        let plan = args
            .run
            .plan(cases.into_iter().map(Case::NetRecords).collect(), &interface);
        Ok(plan.with_credentials(args.endpoint.credentials()?))
    }
}

/// `kernel_copied_fraction`, derived for the table: the share of payload bytes the kernel
/// copied into socket buffers. copy-out and gather send with plain send/sendmsg, which copies
/// every byte (1, source `tool`: the call iopath made); zero-copy and uring-zc take the
/// kernel's own word, `zerocopy_copied_fraction` (1 over loopback and veth).
pub fn with_kernel_copied_fraction(records: &[Record]) -> Vec<Record> {
    use crate::observation::Metric;
    records
        .iter()
        .map(|r| {
            let mut r = r.clone();
            let Some(c) = r.case.get::<RecordsCase>() else { return r };
            let metric = match c.mode {
                RecordsMode::CopyOut | RecordsMode::Gather => {
                    Metric::tool(KERNEL_COPIED_FRACTION, Role::System, 1.0, "fraction")
                }
                _ => match r.observation.get(names::ZEROCOPY_COPIED_FRACTION, Role::System) {
                    Some(m) => Metric {
                        name: KERNEL_COPIED_FRACTION.into(),
                        ..m.clone()
                    },
                    None => return r,
                },
            };
            r.observation.push(metric);
            r
        })
        .collect()
}

/// The table's kernel copied fraction (see [`with_kernel_copied_fraction`]).
pub const KERNEL_COPIED_FRACTION: &str = "kernel_copied_fraction";

/// The human table: one row per case (the median of its repetitions). By default the case,
/// responses/s, Gbit/s, latency, the bytes user space copied per payload byte (`user copies
/// B/B`: iopath's memcpy, 0 for gather and zero copy) beside the share the kernel copied
/// (`kernel copied`), in at most 100 characters; `--wide` adds every other column. Then the
/// `sources:` line and the notes grouped by kind.
pub fn render_records_table(records: &[Record], view: View) -> String {
    use super::output::{Column, Show};
    let records = &with_kernel_copied_fraction(records);
    let merged = super::output::median_records(records);
    let repeated = merged.iter().any(|(_, n)| *n > 1);
    let key = super::output::case_key::<RecordsCase>;
    let m = |title, show, name, role| Column::metric(title, show, name, role, records);
    let mut cols = vec![
        key("mode", |c| c.mode.to_string()),
        key("R", |c| format_bytes(c.record_size)),
        key("N", |c| c.records.to_string()),
        key("pick", |c| c.pick.to_string()),
        key("out", |c| c.outstanding.to_string()),
        key("thr", |c| c.net.threads.to_string()),
    ];
    if repeated {
        cols.push(Column::key("reps", |_, n| n.to_string()));
    }
    cols.extend([
        m("resp/s", Show::Default, names::RESPONSES_PER_S, Role::System),
        m("Gbit/s", Show::Default, names::THROUGHPUT_GBPS, Role::System),
        m("p50 us", Show::Spare, names::LATENCY_P50_US, Role::Client),
        m("p99 us", Show::Default, names::LATENCY_P99_US, Role::Client),
        m("srv us/resp", Show::Spare, names::CPU_US_PER_RESPONSE, Role::Server),
        m(
            "user copies B/B",
            Show::Default,
            names::USER_COPY_BYTES_PER_PAYLOAD_BYTE,
            Role::Server,
        ),
        m("kernel copied", Show::Default, KERNEL_COPIED_FRACTION, Role::System),
        m(
            "DRAM B/B",
            Show::Spare,
            names::DRAM_BYTES_PER_PAYLOAD_BYTE,
            Role::System,
        ),
        m("p99.9 us", Show::Wide, names::LATENCY_P999_US, Role::Client),
        m("cli us/resp", Show::Wide, names::CPU_US_PER_RESPONSE, Role::Client),
        m("srv sc/resp", Show::Wide, names::SYSCALLS_PER_RESPONSE, Role::Server),
        m("srv cs/resp", Show::Wide, "context_switches_per_response", Role::Server),
        m("zc copied", Show::Wide, names::ZEROCOPY_COPIED_FRACTION, Role::System),
    ]);
    let mut text = super::output::render_table(&cols, &merged, view);
    text.push_str(&super::output::notes(records, view));
    text
}
