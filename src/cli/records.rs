//! `iopath net records` and `iopath sweep net-records`: an in-memory store answering requests
//! of N records of R bytes, copy-out vs gather vs zero copy.

use super::error::usage;
use super::output::{num, Table};
use super::run::{self, RunFlags};
use super::values;
use crate::case::{format_bytes, Case, Pick, RecordsCase, RecordsMode};
use crate::net::topology::Topology;
use crate::net::workload::records;
use crate::observation::Role;
use crate::store::Record;
use crate::sweep::Plan;
use clap::Args;

#[derive(Args, Debug)]
pub struct RecordsArgs {
    /// How the server sends the N records of a response, comma-separated: copy-out (memcpy
    /// them into one buffer, then send), gather (sendmsg with one iovec per record, in place),
    /// zero-copy (the same with MSG_ZEROCOPY: the kernel pins the table's pages), uring-zc
    /// (io_uring SENDMSG_ZC).
    #[arg(long, default_value = "copy-out,gather,zero-copy,uring-zc", value_parser = parse_modes)]
    pub mode: ModeList,
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
    #[arg(long, default_value = "random", value_parser = parse_picks)]
    pub pick: PickList,
    /// Requests each client keeps in flight on its connection: 1 (one at a time) or more
    /// (pipelined), a list 1,8.
    #[arg(long, default_value = "1", value_parser = values::parse_count_list)]
    pub outstanding: values::CountList,
    /// Client threads, each with its own connection and its own server thread.
    #[arg(long, default_value = "1", value_parser = values::parse_count_list)]
    pub threads: values::CountList,
    #[command(flatten)]
    pub window: super::net::WindowFlags,
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
    /// Port of the in-process server (default: any free port).
    #[arg(long)]
    pub port: Option<u16>,
    /// Where the two ends live: loopback, netns (both in a fresh private network namespace),
    /// veth[:mtu=N][,rate=R] (the server in a fresh namespace behind a veth pair), or remote
    /// HOST:PORT (an `iopath net serve` there holds the table and sends: over a real NIC zero
    /// copy really avoids the copy). Namespaces need root.
    #[arg(long, value_name = "TOPOLOGY", value_parser = super::net::parse_topology)]
    pub topology: Option<Topology>,
    /// The key of a `net serve --psk-file` server (answers its challenge; never stored).
    #[arg(long, value_name = "FILE")]
    pub psk_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub run: RunFlags,
}

/// See values::SizeList for why these are aliases.
type ModeList = Vec<RecordsMode>;
type PickList = Vec<Pick>;

fn parse_modes(text: &str) -> Result<Vec<RecordsMode>, String> {
    values::parse_list(text)
}

fn parse_picks(text: &str) -> Result<Vec<Pick>, String> {
    values::parse_list(text)
}

/// Stage two: the validated grid of cases, the same for `net records` and `sweep net-records`.
pub fn records_cases(args: &RecordsArgs) -> anyhow::Result<Vec<RecordsCase>> {
    // No --connect: a remote server is `--topology remote HOST:PORT`.
    let (topology, endpoint) =
        super::net::endpoint_of(args.topology.as_ref(), None, args.port, args.psk_file.as_deref())?;
    if let Some(bad) = args
        .record_size
        .iter()
        .find(|s| !(8..=records::MAX_RECORD_SIZE).contains(*s))
    {
        return Err(usage(format!(
            "--record-size {}: out of range (accepted: 8 B to 1M)",
            format_bytes(*bad)
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
            format_bytes(args.table)
        )));
    }
    let mut cases = Vec::new();
    for &mode in &args.mode {
        for &record_size in &args.record_size {
            for &n in &args.records {
                for &pick in &args.pick {
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
                                threads,
                                duration_ms: args.window.duration_ms(),
                                warmup_ms: args.window.warmup_ms(),
                                client_cpus: args.window.client_cpus(),
                                server_cpus: args.window.server_cpus(),
                                verify: args.verify,
                                endpoint: endpoint.clone(),
                                align: args.window.align,
                                perf: !args.no_perf,
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
        let interface = args.topology.clone().unwrap_or(Topology::Loopback).interface();
        Ok(args
            .run
            .plan(cases.into_iter().map(Case::NetRecords).collect(), &interface))
    }
}

pub fn run_records(args: RecordsArgs) -> anyhow::Result<()> {
    let plan = Plan::try_from(&args)?;
    let executed = run::execute(&plan, run::direct_destination(&args.run), (&args.run).into())?;
    run::print_records(&args.run, &executed.records, render_records_table)?;
    run::fail_on_corrupt(&executed, "records", |o| {
        o.value("corrupt_records", Role::Client).unwrap_or(0.0)
    })?;
    run::conclude(&executed)
}

/// The human table: one row per case (the median of its repetitions), then notes.
pub fn render_records_table(records: &[Record]) -> String {
    let merged = super::output::median_records(records);
    let repeated = merged.iter().any(|(_, n)| *n > 1);
    type Col = (&'static str, &'static str, Role);
    const COLS: [Col; 12] = [
        ("resp/s", "responses_per_s", Role::System),
        ("Gbit/s", "throughput_gbps", Role::System),
        ("p50_us", "latency_p50_us", Role::Client),
        ("p99_us", "latency_p99_us", Role::Client),
        ("p99.9_us", "latency_p999_us", Role::Client),
        ("cli us/resp", "cpu_us_per_response", Role::Client),
        ("srv us/resp", "cpu_us_per_response", Role::Server),
        ("srv sc/resp", "syscalls_per_response", Role::Server),
        ("srv cs/resp", "context_switches_per_response", Role::Server),
        ("copied B/B", "user_copy_bytes_per_payload_byte", Role::Server),
        ("DRAM B/B", "dram_bytes_per_payload_byte", Role::System),
        ("zc copied", "zerocopy_copied_fraction", Role::System),
    ];
    let mut header = vec!["mode", "record", "N", "pick", "out", "thr"];
    if repeated {
        header.push("reps");
    }
    header.extend(COLS.iter().map(|c| c.0));
    let mut table = Table::new(&header);
    for (r, reps) in &merged {
        let Case::NetRecords(c) = &r.case else { continue };
        let o = &r.observation;
        let mut row = vec![
            c.mode.to_string(),
            format_bytes(c.record_size),
            c.records.to_string(),
            c.pick.to_string(),
            c.outstanding.to_string(),
            c.threads.to_string(),
        ];
        if repeated {
            row.push(reps.to_string());
        }
        row.extend(COLS.iter().map(|(_, name, role)| match o.get(name, *role) {
            Some(m) => num(m.value),
            None => "-".into(),
        }));
        table.row(row);
    }
    let mut text = table.render();
    // Why DRAM B/B reads n/a, once, instead of in every row.
    if let Some(reason) =
        records.iter().find_map(
            |r| match r.observation.get("dram_bytes_per_payload_byte", Role::System) {
                Some(m) if m.value.is_none() => Some(m.source.to_string()),
                _ => None,
            },
        )
    {
        text.push_str(&format!("DRAM B/B: {reason}\n"));
    }
    text.push_str(&super::output::notes(records));
    text
}
