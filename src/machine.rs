//! A machine's description as data: what `sysinfo::describe` reads here and an agent reports
//! of itself, recorded with every run and with both ends of a fleet cell. Plain data below
//! `observation`, which carries a fleet cell's two machines.

use crate::sys::cache::CacheInfo;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    pub kernel_build: Option<String>,
    pub cpu_model: Option<String>,
    pub cpu_vendor: Option<String>,
    /// Running under a hypervisor (the CPU's `hypervisor` flag).
    pub virtualized: Option<bool>,
    pub logical_cpus: usize,
    pub online_cpus: Option<String>,
    pub physical_cores: Option<usize>,
    pub sockets: Option<usize>,
    pub threads_per_core: Option<usize>,
    /// SMT switched on (/sys/devices/system/cpu/smt/active), when the kernel says.
    pub smt_active: Option<bool>,
    pub tsc_hz: Option<f64>,
    pub tsc_invariant: bool,
    pub clocksource: Option<String>,
    pub caches: Vec<CacheInfo>,
    pub memory_total_bytes: Option<u64>,
    pub memory_available_bytes: Option<u64>,
    pub numa_nodes: Vec<NumaNode>,
    pub interfaces: Vec<Interface>,
    pub loopback_mtu: Option<u64>,
    pub block_devices: Vec<BlockDevice>,
    pub governor: Option<String>,
    /// /sys/devices/system/cpu/vulnerabilities: name -> the kernel's status line.
    pub mitigations: BTreeMap<String, String>,
    /// Each perf event and whether it opens: "ok" or "unavailable: <reason>".
    pub perf_events: BTreeMap<String, String>,
    pub perf_event_paranoid: Option<i64>,
    /// The memory-traffic counters found (uncore PMUs, resctrl MBM) or why there are none,
    /// one line each (`measure::memtraffic::describe`).
    #[serde(default)]
    pub memory_traffic: Vec<String>,
    /// "available" or "unavailable: <reason>".
    pub io_uring: String,
    pub io_uring_disabled_sysctl: Option<i64>,
    pub optmem_max: Option<i64>,
    pub tcp_wmem: Option<String>,
    pub tcp_rmem: Option<String>,
    /// RLIMIT_MEMLOCK soft and hard limits in bytes (None = unlimited).
    pub rlimit_memlock: Option<Limit>,
    pub transparent_hugepage: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: Option<String>,
    pub memory_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interface {
    pub name: String,
    pub mtu: Option<u64>,
    /// Link speed in Mbit/s; None where the driver does not report one (loopback, virtio).
    pub speed_mbps: Option<i64>,
    pub state: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockDevice {
    pub name: String,
    pub size_bytes: Option<u64>,
    pub rotational: Option<bool>,
    pub model: Option<String>,
    pub scheduler: Option<String>,
}
