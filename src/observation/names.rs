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
pub const REMOTE_TIME_PER_READ_US: &str = "remote_time_per_read_us";
pub const REQUESTS_PER_S: &str = "requests_per_s";
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
/// The fake workload's only metric (`fake.rs`, the headline of a fake case).
pub const FAKE_VALUE: &str = "value";

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
    REQUESTS_PER_S,
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
    FAKE_VALUE,
];
