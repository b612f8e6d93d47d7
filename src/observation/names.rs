//! Metric names shared by the code that produces a metric and the code that reads it.
//!
//! A metric is looked up by its name (`Observation::get`, `CellSummary::metric`): a misspelt
//! bare string finds nothing and prints `n/a` or `-` without a word. Every name used in more
//! than one file is a constant here, so a typo is a compile error. docs/output.md says what
//! each one means; its unit is in its name (`_gbps`, `_us`, `_per_s`, `_fraction`).
//!
//! `ALL` lists every constant (tests/metric_names.rs checks they are unique and that what the
//! fake and micro workloads produce under these names is spelt by them).

pub const ALIAS_BY_REFERENCE_FRACTION: &str = "alias_by_reference_fraction";
pub const BANDWIDTH_GBPS: &str = "bandwidth_gbps";
pub const BANDWIDTH_GIB_S: &str = "bandwidth_gib_s";
pub const BANDWIDTH_MIB_S: &str = "bandwidth_mib_s";
pub const BANDWIDTH_TOTAL_MIB_S: &str = "bandwidth_total_mib_s";
pub const BYTES_RECEIVED: &str = "bytes_received";
pub const BYTES_SENT: &str = "bytes_sent";
pub const CACHE_MISSES_PER_KIB: &str = "cache_misses_per_kib";
pub const CLIENTS_FAILED: &str = "clients_failed";
pub const CLIENTS_SERVED: &str = "clients_served";
pub const CLOCK_TSC_HZ: &str = "clock_tsc_hz";
pub const CLOSE_P50_US: &str = "close_p50_us";
pub const CONNECT_P50_US: &str = "connect_p50_us";
pub const CONNECT_TIME_US: &str = "connect_time_us";
pub const CONTEXT_SWITCHES: &str = "context_switches";
pub const CONTEXT_SWITCHES_PER_MSG: &str = "context_switches_per_msg";
pub const CORRUPT_MESSAGES: &str = "corrupt_messages";
pub const CORRUPT_RECORDS: &str = "corrupt_records";
pub const CPU_PRESSURE_SOME_S: &str = "cpu_pressure_some_s";
pub const CPU_SYS_S: &str = "cpu_sys_s";
pub const CPU_US_PER_REQ: &str = "cpu_us_per_req";
pub const CPU_US_PER_RESPONSE: &str = "cpu_us_per_response";
pub const CPU_US_PER_TXN: &str = "cpu_us_per_txn";
pub const CPU_USER_S: &str = "cpu_user_s";
pub const CYCLES_PER_BYTE: &str = "cycles_per_byte";
pub const DRAM_BYTES: &str = "dram_bytes";
pub const DRAM_BYTES_PER_PAYLOAD_BYTE: &str = "dram_bytes_per_payload_byte";
pub const ERRORS: &str = "errors";
pub const EXCHANGE_P50_US: &str = "exchange_p50_us";
pub const FS_TYPE_MAGIC: &str = "fs_type_magic";
pub const LATENCY_MAX_US: &str = "latency_max_us";
pub const LATENCY_MEAN_US: &str = "latency_mean_us";
pub const LATENCY_NS: &str = "latency_ns";
pub const LATENCY_NS_MEAN: &str = "latency_ns_mean";
pub const LATENCY_NS_STDDEV: &str = "latency_ns_stddev";
pub const LATENCY_P50_US: &str = "latency_p50_us";
pub const LATENCY_P90_US: &str = "latency_p90_us";
pub const LATENCY_P999_US: &str = "latency_p999_us";
pub const LATENCY_P99_US: &str = "latency_p99_us";
pub const LOCAL_TIME_PER_READ_US: &str = "local_time_per_read_us";
pub const LOOP_OVERHEAD_NS: &str = "loop_overhead_ns";
pub const MESSAGES_PER_S: &str = "messages_per_s";
pub const MESSAGES_SENT: &str = "messages_sent";
pub const PAGE_FAULTS: &str = "page_faults";
pub const READ_TIME_PER_MIB_US: &str = "read_time_per_mib_us";
pub const PENALTY_PER_READ_US: &str = "penalty_per_read_us";
pub const REMOTE_TIME_PER_READ_US: &str = "remote_time_per_read_us";
pub const REPLIES_DUPLICATE: &str = "replies_duplicate";
pub const REPLIES_LATE: &str = "replies_late";
pub const REQUESTS_PER_S: &str = "requests_per_s";
pub const REQUESTS_SENT: &str = "requests_sent";
pub const RESIDENT_FRACTION: &str = "resident_fraction";
pub const RESPONSES_PER_S: &str = "responses_per_s";
pub const ROUND_TRIP_US: &str = "round_trip_us";
pub const RUNQUEUE_WAIT_MAX_PCT: &str = "runqueue_wait_max_pct";
pub const RX_MAPPED_FRACTION: &str = "rx_mapped_fraction";
pub const SERVED_FRACTION: &str = "served_fraction";
pub const SYSCALLS_PER_MSG: &str = "syscalls_per_msg";
pub const SYSCALLS_PER_RESPONSE: &str = "syscalls_per_response";
pub const SYSCALLS_PER_TXN: &str = "syscalls_per_txn";
pub const TEARDOWN_TIME_US: &str = "teardown_time_us";
pub const THREAD_START_LATENCY_US: &str = "thread_start_latency_us";
pub const THROUGHPUT_GBPS: &str = "throughput_gbps";
pub const TIME_PER_CALL_NS: &str = "time_per_call_ns";
pub const TIME_PER_FAULT_NS: &str = "time_per_fault_ns";
pub const TIME_PER_FAULT_US: &str = "time_per_fault_us";
pub const TIME_PER_MSG_US: &str = "time_per_msg_us";
pub const TIME_PER_PROCESS_US: &str = "time_per_process_us";
pub const TIME_PER_READ_US: &str = "time_per_read_us";
pub const TIME_PER_SWITCH_NS: &str = "time_per_switch_ns";
pub const TIME_PER_THREAD_US: &str = "time_per_thread_us";
pub const TIMEOUTS: &str = "timeouts";
pub const TIMER_OVERHEAD_NS: &str = "timer_overhead_ns";
pub const TIMER_READ_NS: &str = "timer_read_ns";
pub const TOTAL_CACHE_MISSES_PER_KIB: &str = "total_cache_misses_per_kib";
pub const TOTAL_CONTEXT_SWITCHES_PER_MSG: &str = "total_context_switches_per_msg";
pub const TOTAL_CYCLES_PER_BYTE: &str = "total_cycles_per_byte";
pub const TRANSACTIONS: &str = "transactions";
pub const TRANSACTIONS_PER_S: &str = "transactions_per_s";
pub const TRANSACTIONS_SERVED: &str = "transactions_served";
pub const TXN_LOST: &str = "txn_lost";
pub const TXN_LOST_FRACTION: &str = "txn_lost_fraction";
pub const UDP_IN_DATAGRAMS: &str = "udp_in_datagrams";
pub const UDP_IN_ERRORS: &str = "udp_in_errors";
pub const UDP_NO_PORTS: &str = "udp_no_ports";
pub const UDP_RCVBUF_ERRORS: &str = "udp_rcvbuf_errors";
pub const UDP_SNDBUF_ERRORS: &str = "udp_sndbuf_errors";
pub const UNANSWERED_AT_END: &str = "unanswered_at_end";
pub const URING_COMPLETIONS_PER_MSG: &str = "uring_completions_per_msg";
pub const URING_SUBMISSIONS_PER_MSG: &str = "uring_submissions_per_msg";
pub const USER_COPY_BYTES_PER_PAYLOAD_BYTE: &str = "user_copy_bytes_per_payload_byte";
pub const VOLUNTARY_SWITCHES: &str = "voluntary_switches";
pub const WINDOW_S: &str = "window_s";
pub const ZEROCOPY_COMPLETIONS: &str = "zerocopy_completions";
pub const ZEROCOPY_COPIED_FRACTION: &str = "zerocopy_copied_fraction";
pub const ZEROCOPY_ENOBUFS: &str = "zerocopy_enobufs";
pub const ZEROCOPY_NOT_COPIED_FRACTION: &str = "zerocopy_not_copied_fraction";
/// UDP (`net udp-stream`): datagrams, loss, order, jitter and drops (docs/output.md).
pub const CPU_US_PER_DATAGRAM: &str = "cpu_us_per_datagram";
pub const DATAGRAMS_DUPLICATE: &str = "datagrams_duplicate";
/// Datagrams too short to carry a header: dropped, counted apart.
pub const DATAGRAMS_SHORT: &str = "datagrams_short";
/// Datagrams whose sequence number the sender never sent: dropped, counted apart.
pub const DATAGRAMS_FORGED: &str = "datagrams_forged";
pub const DATAGRAMS_LOST: &str = "datagrams_lost";
pub const DATAGRAMS_PER_S: &str = "datagrams_per_s";
pub const DATAGRAMS_RECEIVED: &str = "datagrams_received";
pub const DATAGRAMS_REORDERED: &str = "datagrams_reordered";
pub const DATAGRAMS_SENT: &str = "datagrams_sent";
pub const JITTER_US: &str = "jitter_us";
/// udp-stream's client: payload bytes sent per second of its CPU time (user + system).
pub const BYTES_PER_CPU_S: &str = "bytes_per_cpu_s";
/// udp-stream's client: send-path system calls per second of its window.
pub const CALLS_PER_S: &str = "calls_per_s";
/// udp-stream's client: payload bytes per counted CPU cycle (a PMU's, never an estimate).
pub const BYTES_PER_CYCLE: &str = "bytes_per_cycle";
/// Bytes per packet the devices of the server's namespace received over the window.
pub const LINK_RX_BYTES_PER_PACKET: &str = "link_rx_bytes_per_packet";
/// A shaped link's queue (`measure/queue.rs`): its root qdisc's backlog as the window opened
/// and as it closed, and the packets it dropped in the window; role: whose end sends into it.
pub const QDISC_BACKLOG_OPEN_BYTES: &str = "qdisc_backlog_open_bytes";
pub const QDISC_BACKLOG_CLOSE_BYTES: &str = "qdisc_backlog_close_bytes";
pub const QDISC_BACKLOG_CLOSE_PACKETS: &str = "qdisc_backlog_close_packets";
pub const QDISC_DROPS: &str = "qdisc_drops";
pub const LOSS_FRACTION: &str = "loss_fraction";
pub const OFFERED_DATAGRAMS_PER_S: &str = "offered_datagrams_per_s";
pub const PACING_GAP_US: &str = "pacing_gap_us";
pub const RCVBUF_BYTES: &str = "rcvbuf_bytes";
pub const SESSION_DATAGRAMS_RECEIVED: &str = "session_datagrams_received";
pub const SESSION_DATAGRAMS_SENT: &str = "session_datagrams_sent";
pub const SOCKET_DROPS: &str = "socket_drops";
pub const SYSCALLS_PER_DATAGRAM: &str = "syscalls_per_datagram";
/// The trace probe's figures (`measure/trace.rs`, source `trace`).
pub const KERNEL_RX_COPY_CALLS: &str = "kernel_rx_copy_calls";
pub const KERNEL_RX_COPY_BYTES: &str = "kernel_rx_copy_bytes";
pub const KERNEL_TX_SENDMSG_CALLS: &str = "kernel_tx_sendmsg_calls";
pub const KERNEL_TX_BYTES: &str = "kernel_tx_bytes";
pub const KERNEL_COPY_BYTES_PER_BYTE: &str = "kernel_copy_bytes_per_byte";
pub const SOFTIRQ_NET_RX_S: &str = "softirq_net_rx_s";
pub const SOFTIRQ_NET_TX_S: &str = "softirq_net_tx_s";
/// A role's NET_RX + NET_TX softirq time over its threads' time on CPU (both from the probe).
pub const SOFTIRQ_SHARE: &str = "softirq_share";

/// A figure of one CPU: `softirq_net_rx_s_cpu3` is `softirq_net_rx_s` on CPU 3.
pub fn per_cpu(name: &str, cpu: u32) -> String {
    format!("{name}_cpu{cpu}")
}
pub const SCHED_SWITCHES_VOLUNTARY: &str = "sched_switches_voluntary";
pub const SCHED_SWITCHES_INVOLUNTARY: &str = "sched_switches_involuntary";
pub const SCHED_WAKEUPS: &str = "sched_wakeups";
pub const OFF_CPU_S: &str = "off_cpu_s";
/// The fake workload's only metric (`fake.rs`, the headline of a fake case).
pub const FAKE_VALUE: &str = "value";

/// `net load`: the probe's round trip on the idle link and while the bulk flows run.
pub const LATENCY_IDLE_P50_US: &str = "latency_idle_p50_us";
pub const LATENCY_IDLE_P90_US: &str = "latency_idle_p90_us";
pub const LATENCY_IDLE_P99_US: &str = "latency_idle_p99_us";
pub const LATENCY_IDLE_P999_US: &str = "latency_idle_p999_us";
pub const LATENCY_LOADED_P50_US: &str = "latency_loaded_p50_us";
pub const LATENCY_LOADED_P90_US: &str = "latency_loaded_p90_us";
pub const LATENCY_LOADED_P99_US: &str = "latency_loaded_p99_us";
pub const LATENCY_LOADED_P999_US: &str = "latency_loaded_p999_us";
/// The stems of the probe's CDF quantiles (`latency_idle_p1_us` … `latency_idle_p9999_us`,
/// the same loaded: `net::session::observe::cdf_quantiles_named`).
pub const LATENCY_IDLE: &str = "latency_idle";
pub const LATENCY_LOADED: &str = "latency_loaded";
/// Loaded over idle, at the median and at p99.
pub const LATENCY_INFLATION_P50: &str = "latency_inflation_p50";
pub const LATENCY_INFLATION_P99: &str = "latency_inflation_p99";
/// Round trips per minute under load (the IETF responsiveness draft's RPM).
pub const RPM: &str = "rpm";
/// The bulk flows: their sum, the slowest and fastest flow, and Jain's fairness index.
pub const LOAD_GBPS: &str = "load_gbps";
pub const FLOW_MIN_GBPS: &str = "flow_min_gbps";
pub const FLOW_MAX_GBPS: &str = "flow_max_gbps";
pub const JAIN_INDEX: &str = "jain_index";
/// An incast's (`net stream --clients`) slowest and fastest client session; Jain's index over
/// them is `JAIN_INDEX`.
pub const CLIENT_MIN_GBPS: &str = "client_min_gbps";
pub const CLIENT_MAX_GBPS: &str = "client_max_gbps";
/// The server's namespace's listen queue overflows and its sockets' backlog drops.
pub const TCP_LISTEN_DROPS: &str = "tcp_listen_drops";
pub const TCP_BACKLOG_DROPS: &str = "tcp_backlog_drops";

/// A figure of one client session of an incast: `throughput_gbps_client3` is client 3's
/// `throughput_gbps`.
pub fn per_client(name: &str, client: usize) -> String {
    format!("{name}_client{client}")
}

/// Every constant above, in the order they are declared.
pub const ALL: &[&str] = &[
    ALIAS_BY_REFERENCE_FRACTION,
    BANDWIDTH_GBPS,
    BANDWIDTH_GIB_S,
    BANDWIDTH_MIB_S,
    BANDWIDTH_TOTAL_MIB_S,
    BYTES_RECEIVED,
    BYTES_SENT,
    CACHE_MISSES_PER_KIB,
    CLIENTS_FAILED,
    CLIENTS_SERVED,
    CLOCK_TSC_HZ,
    CLOSE_P50_US,
    CONNECT_P50_US,
    CONNECT_TIME_US,
    CONTEXT_SWITCHES,
    CONTEXT_SWITCHES_PER_MSG,
    CORRUPT_MESSAGES,
    CORRUPT_RECORDS,
    CPU_PRESSURE_SOME_S,
    CPU_SYS_S,
    CPU_US_PER_REQ,
    CPU_US_PER_RESPONSE,
    CPU_US_PER_TXN,
    CPU_USER_S,
    CYCLES_PER_BYTE,
    DRAM_BYTES,
    DRAM_BYTES_PER_PAYLOAD_BYTE,
    ERRORS,
    EXCHANGE_P50_US,
    FS_TYPE_MAGIC,
    LATENCY_MAX_US,
    LATENCY_MEAN_US,
    LATENCY_NS,
    LATENCY_NS_MEAN,
    LATENCY_NS_STDDEV,
    LATENCY_P50_US,
    LATENCY_P90_US,
    LATENCY_P999_US,
    LATENCY_P99_US,
    LOCAL_TIME_PER_READ_US,
    LOOP_OVERHEAD_NS,
    MESSAGES_PER_S,
    MESSAGES_SENT,
    PAGE_FAULTS,
    READ_TIME_PER_MIB_US,
    REMOTE_TIME_PER_READ_US,
    REPLIES_DUPLICATE,
    REPLIES_LATE,
    REQUESTS_PER_S,
    REQUESTS_SENT,
    RESIDENT_FRACTION,
    RESPONSES_PER_S,
    ROUND_TRIP_US,
    RUNQUEUE_WAIT_MAX_PCT,
    RX_MAPPED_FRACTION,
    SERVED_FRACTION,
    SYSCALLS_PER_MSG,
    SYSCALLS_PER_RESPONSE,
    SYSCALLS_PER_TXN,
    TEARDOWN_TIME_US,
    THREAD_START_LATENCY_US,
    THROUGHPUT_GBPS,
    TIME_PER_CALL_NS,
    TIME_PER_FAULT_NS,
    TIME_PER_FAULT_US,
    TIME_PER_MSG_US,
    TIME_PER_PROCESS_US,
    TIME_PER_READ_US,
    TIME_PER_SWITCH_NS,
    TIME_PER_THREAD_US,
    TIMEOUTS,
    TIMER_OVERHEAD_NS,
    TIMER_READ_NS,
    TOTAL_CACHE_MISSES_PER_KIB,
    TOTAL_CONTEXT_SWITCHES_PER_MSG,
    TOTAL_CYCLES_PER_BYTE,
    TRANSACTIONS,
    TRANSACTIONS_PER_S,
    TRANSACTIONS_SERVED,
    TXN_LOST,
    TXN_LOST_FRACTION,
    UDP_IN_DATAGRAMS,
    UDP_IN_ERRORS,
    UDP_NO_PORTS,
    UDP_RCVBUF_ERRORS,
    UDP_SNDBUF_ERRORS,
    UNANSWERED_AT_END,
    URING_COMPLETIONS_PER_MSG,
    URING_SUBMISSIONS_PER_MSG,
    USER_COPY_BYTES_PER_PAYLOAD_BYTE,
    VOLUNTARY_SWITCHES,
    WINDOW_S,
    ZEROCOPY_COMPLETIONS,
    ZEROCOPY_COPIED_FRACTION,
    ZEROCOPY_ENOBUFS,
    ZEROCOPY_NOT_COPIED_FRACTION,
    CPU_US_PER_DATAGRAM,
    DATAGRAMS_DUPLICATE,
    DATAGRAMS_SHORT,
    DATAGRAMS_FORGED,
    DATAGRAMS_LOST,
    DATAGRAMS_PER_S,
    DATAGRAMS_RECEIVED,
    DATAGRAMS_REORDERED,
    DATAGRAMS_SENT,
    JITTER_US,
    BYTES_PER_CPU_S,
    CALLS_PER_S,
    BYTES_PER_CYCLE,
    LINK_RX_BYTES_PER_PACKET,
    QDISC_BACKLOG_OPEN_BYTES,
    QDISC_BACKLOG_CLOSE_BYTES,
    QDISC_BACKLOG_CLOSE_PACKETS,
    QDISC_DROPS,
    LOSS_FRACTION,
    OFFERED_DATAGRAMS_PER_S,
    PACING_GAP_US,
    RCVBUF_BYTES,
    SESSION_DATAGRAMS_RECEIVED,
    SESSION_DATAGRAMS_SENT,
    SOCKET_DROPS,
    SYSCALLS_PER_DATAGRAM,
    KERNEL_RX_COPY_CALLS,
    KERNEL_RX_COPY_BYTES,
    KERNEL_TX_SENDMSG_CALLS,
    KERNEL_TX_BYTES,
    KERNEL_COPY_BYTES_PER_BYTE,
    SOFTIRQ_NET_RX_S,
    SOFTIRQ_NET_TX_S,
    SOFTIRQ_SHARE,
    SCHED_SWITCHES_VOLUNTARY,
    SCHED_SWITCHES_INVOLUNTARY,
    SCHED_WAKEUPS,
    OFF_CPU_S,
    FAKE_VALUE,
    LATENCY_IDLE_P50_US,
    LATENCY_IDLE_P90_US,
    LATENCY_IDLE_P99_US,
    LATENCY_IDLE_P999_US,
    LATENCY_LOADED_P50_US,
    LATENCY_LOADED_P90_US,
    LATENCY_LOADED_P99_US,
    LATENCY_LOADED_P999_US,
    LATENCY_INFLATION_P50,
    LATENCY_INFLATION_P99,
    RPM,
    LOAD_GBPS,
    FLOW_MIN_GBPS,
    FLOW_MAX_GBPS,
    JAIN_INDEX,
    CLIENT_MIN_GBPS,
    CLIENT_MAX_GBPS,
    TCP_LISTEN_DROPS,
    TCP_BACKLOG_DROPS,
];

/// Names that are not constants but differ from one by a character or two on purpose (the
/// other percentiles, the other unit): the typo check below lets them through.
#[cfg(test)]
const NEIGHBOURS: &[&str] = &[
    "close_p99_us",
    "connect_p99_us",
    "exchange_p99_us",
    "involuntary_switches",
    "latency_",
    "latency_p1_us",
    "latency_p10_us",
    "latency_p25_us",
    "latency_p75_us",
    "latency_p95_us",
    "latency_p9999_us",
    "round_trip_ns",
    // The tracepoint sched:sched_wakeup (measure/trace.rs), beside the metric sched_wakeups.
    "sched_wakeup",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Bench, FakeBehaviour, FakeCase, MicroCase, Workload};
    use crate::stop::Stop;
    use std::path::Path;

    /// Edits (insert, delete, substitute) from `a` to `b`, stopping early past 2.
    fn edits(a: &str, b: &str) -> usize {
        if a.len().abs_diff(b.len()) > 2 {
            return 3;
        }
        let b: Vec<char> = b.chars().collect();
        let mut prev: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut cur = vec![i + 1];
            for (j, cb) in b.iter().enumerate() {
                cur.push((prev[j + 1] + 1).min(cur[j] + 1).min(prev[j] + usize::from(ca != *cb)));
            }
            prev = cur;
        }
        prev[b.len()]
    }

    #[test]
    fn constants_are_unique_snake_case_names() {
        let mut seen = std::collections::BTreeSet::new();
        for name in ALL {
            assert!(seen.insert(*name), "{name} is declared twice");
            assert!(
                name.starts_with(|c: char| c.is_ascii_lowercase())
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{name} is not snake_case"
            );
        }
        // Built, not written: a literal typo here would be what the next test refuses.
        assert_eq!(edits(THROUGHPUT_GBPS, &["througput", "_gbps"].concat()), 1);
        assert_eq!(edits("latency_p50_us", "latency_p50_us"), 0);
    }

    /// Every string literal of src/ and tests/ that reads like a metric name and is one or two
    /// characters away from a constant is that constant misspelt (a look-up that finds nothing
    /// and prints n/a), unless it is a known neighbour.
    #[test]
    fn no_literal_is_a_misspelt_metric_name() {
        fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    files(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path);
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut paths = Vec::new();
        files(&root.join("src"), &mut paths);
        files(&root.join("tests"), &mut paths);
        assert!(paths.len() > 100, "found only {} source files", paths.len());
        let mut typos = Vec::new();
        for path in &paths {
            let text = std::fs::read_to_string(path).unwrap();
            for (line_no, line) in text.lines().enumerate() {
                // The text between pairs of quotes: every literal of the line (and, harmlessly,
                // what lies between two literals, which holds no quote-delimited name).
                for literal in line.split('"').skip(1).step_by(2) {
                    let name_like = literal.contains('_')
                        && literal.starts_with(|c: char| c.is_ascii_lowercase())
                        && literal
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                    // A repeated figure's companions: `time_per_call_ns_n`, `latency_ns_mean`.
                    let companion = crate::micro::harness::SUMMARY_SUFFIXES
                        .iter()
                        .any(|s| literal.strip_suffix(s).is_some_and(|base| ALL.contains(&base)));
                    if !name_like || ALL.contains(&literal) || NEIGHBOURS.contains(&literal) || companion {
                        continue;
                    }
                    if let Some(near) = ALL.iter().find(|n| edits(literal, n) <= 2) {
                        typos.push(format!(
                            "{}:{}: \"{literal}\" (did you mean names::{}?)",
                            path.strip_prefix(root).unwrap_or(path).display(),
                            line_no + 1,
                            near.to_uppercase()
                        ));
                    }
                }
            }
        }
        assert!(
            typos.is_empty(),
            "literals one or two characters from a metric name:\n{}",
            typos.join("\n")
        );
    }

    /// The headline a case declares is a metric its workload produces, with a value: the fake
    /// workload and the quick microbenchmarks that need no privileges, a network or a file
    /// system (their producers and `MicroCase::headline` both spell the constants).
    #[test]
    fn workloads_produce_the_headline_their_cases_declare() {
        let fake = FakeCase {
            index: 0,
            behaviour: FakeBehaviour::Ok { value: 7 },
        };
        let obs = crate::fake::run(&fake, Stop::fresh()).unwrap();
        let headline = fake.headline();
        assert_eq!(obs.value(headline.name, headline.role), Some(7.0));
        for bench in [Bench::Timer, Bench::Call, Bench::Syscall] {
            let case = MicroCase::new(bench, vec![("quick", "1".into())]);
            let headline = Workload::headline(&case);
            assert!(ALL.contains(&headline.name), "{}", headline.name);
            let obs = crate::micro::run_case(&case, Stop::fresh()).unwrap();
            let metric = obs
                .get(headline.name, headline.role)
                .unwrap_or_else(|| panic!("{}: no {}", case.label(), headline.name));
            assert_eq!(metric.unit, headline.unit, "{}", case.label());
        }
    }
}
