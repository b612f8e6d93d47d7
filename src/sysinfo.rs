//! The machine description recorded with every run and printed by `iopath sysinfo`: CPU,
//! topology, TSC, caches, memory, NUMA, NICs, block devices, kernel and the settings that
//! change I/O results. Fast (well under 200 ms) and never fails: what cannot be read is None
//! or "unavailable: <reason>".

use crate::sys::cache;
use crate::sys::procfs::{parse_cpu_list, read_i64, read_trimmed};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub use crate::machine::{BlockDevice, Interface, Limit, Machine, NumaNode};

/// Describe this machine and its environment.
pub fn describe() -> Machine {
    let cpuinfo = read_trimmed("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| -> Option<String> {
        cpuinfo
            .lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let (cores, sockets) = topology();
    let logical = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let online = read_trimmed("/sys/devices/system/cpu/online");
    let online_count = online.as_deref().and_then(parse_cpu_list).map(|c| c.len());
    let meminfo = read_trimmed("/proc/meminfo").unwrap_or_default();
    let mem_kib = |key: &str| crate::sys::procfs::meminfo_field(&meminfo, key);
    let interfaces = interfaces();
    Machine {
        hostname: read_trimmed("/proc/sys/kernel/hostname"),
        kernel: read_trimmed("/proc/sys/kernel/osrelease"),
        kernel_build: read_trimmed("/proc/sys/kernel/version"),
        cpu_model: field("model name"),
        cpu_vendor: field("vendor_id"),
        virtualized: field("flags").map(|f| f.split_whitespace().any(|x| x == "hypervisor")),
        logical_cpus: online_count.unwrap_or(logical),
        online_cpus: online,
        physical_cores: cores,
        sockets,
        threads_per_core: match (online_count, cores) {
            (Some(l), Some(c)) if c > 0 => Some(l / c),
            _ => None,
        },
        smt_active: read_i64("/sys/devices/system/cpu/smt/active").map(|v| v == 1),
        tsc_hz: crate::measure::clock::tsc_hz(),
        tsc_invariant: crate::sys::tsc::is_invariant(),
        clocksource: read_trimmed("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        caches: cache::cpu0_caches(),
        memory_total_bytes: mem_kib("MemTotal:"),
        memory_available_bytes: mem_kib("MemAvailable:"),
        numa_nodes: numa_nodes(),
        loopback_mtu: interfaces.iter().find(|i| i.name == "lo").and_then(|i| i.mtu),
        interfaces,
        block_devices: block_devices(),
        governor: read_trimmed("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        mitigations: dir_files("/sys/devices/system/cpu/vulnerabilities"),
        perf_events: crate::measure::counters::probe_events()
            .into_iter()
            .map(|(name, r)| {
                (
                    name.to_string(),
                    match r {
                        Ok(()) => "ok".to_string(),
                        Err(reason) => format!("unavailable: {reason}"),
                    },
                )
            })
            .collect(),
        perf_event_paranoid: read_i64("/proc/sys/kernel/perf_event_paranoid"),
        memory_traffic: crate::measure::memtraffic::describe(&crate::measure::memtraffic::discover(Path::new("/"))),
        io_uring: io_uring_status(),
        io_uring_disabled_sysctl: read_i64("/proc/sys/kernel/io_uring_disabled"),
        optmem_max: read_i64("/proc/sys/net/core/optmem_max"),
        tcp_wmem: read_trimmed("/proc/sys/net/ipv4/tcp_wmem")
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" ")),
        tcp_rmem: read_trimmed("/proc/sys/net/ipv4/tcp_rmem")
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" ")),
        rlimit_memlock: nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_MEMLOCK)
            .ok()
            .map(|(soft, hard)| Limit {
                soft: (soft != libc::RLIM_INFINITY).then_some(soft),
                hard: (hard != libc::RLIM_INFINITY).then_some(hard),
            }),
        transparent_hugepage: read_trimmed("/sys/kernel/mm/transparent_hugepage/enabled"),
    }
}

/// (physical cores, sockets) from the CPUs' topology files.
fn topology() -> (Option<usize>, Option<usize>) {
    let Ok(entries) = std::fs::read_dir("/sys/devices/system/cpu") else {
        return (None, None);
    };
    let mut cores = BTreeSet::new();
    let mut sockets = BTreeSet::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name
            .strip_prefix("cpu")
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        {
            continue;
        }
        let t = e.path().join("topology");
        let (Some(pkg), Some(core)) = (read_i64(t.join("physical_package_id")), read_i64(t.join("core_id"))) else {
            continue;
        };
        cores.insert((pkg, core));
        sockets.insert(pkg);
    }
    if cores.is_empty() {
        (None, None)
    } else {
        (Some(cores.len()), Some(sockets.len()))
    }
}

fn numa_nodes() -> Vec<NumaNode> {
    let Ok(entries) = std::fs::read_dir("/sys/devices/system/node") else {
        return Vec::new();
    };
    let mut nodes: Vec<NumaNode> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let id: u32 = name.strip_prefix("node")?.parse().ok()?;
            let memory_bytes = read_trimmed(e.path().join("meminfo")).and_then(|m| {
                m.lines()
                    .find(|l| l.contains("MemTotal:"))
                    .and_then(|l| l.split_whitespace().rev().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
                    .map(|kib| kib * 1024)
            });
            Some(NumaNode {
                id,
                cpus: read_trimmed(e.path().join("cpulist")),
                memory_bytes,
            })
        })
        .collect();
    nodes.sort_by_key(|n| n.id);
    nodes
}

fn interfaces() -> Vec<Interface> {
    let Ok(entries) = std::fs::read_dir("/sys/class/net") else {
        return Vec::new();
    };
    let mut out: Vec<Interface> = entries
        .flatten()
        .filter(|e| !crate::case::is_run_interface(&e.file_name().to_string_lossy()))
        .map(|e| {
            let p = e.path();
            Interface {
                name: e.file_name().to_string_lossy().to_string(),
                mtu: read_trimmed(p.join("mtu")).and_then(|s| s.parse().ok()),
                // Reading speed fails (EINVAL) on links without one; -1 means unknown.
                speed_mbps: read_i64(p.join("speed")).filter(|s| *s > 0),
                state: read_trimmed(p.join("operstate")),
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn block_devices() -> Vec<BlockDevice> {
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut out: Vec<BlockDevice> = entries
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            !(n.starts_with("loop") || n.starts_with("ram"))
        })
        .map(|e| {
            let p = e.path();
            BlockDevice {
                name: e.file_name().to_string_lossy().to_string(),
                // `size` is in 512-byte sectors whatever the device's block size.
                size_bytes: read_trimmed(p.join("size"))
                    .and_then(|s| s.parse::<u64>().ok())
                    .map(|s| s * 512),
                rotational: read_i64(p.join("queue/rotational")).map(|r| r == 1),
                model: read_trimmed(p.join("device/model")).filter(|m| !m.is_empty()),
                scheduler: read_trimmed(p.join("queue/scheduler")),
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn dir_files(dir: impl AsRef<Path>) -> BTreeMap<String, String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .filter_map(|e| Some((e.file_name().to_string_lossy().to_string(), read_trimmed(e.path())?)))
        .collect()
}

fn io_uring_status() -> String {
    match io_uring::IoUring::new(2) {
        Ok(_) => "available".to_string(),
        Err(e) => match e.raw_os_error() {
            Some(libc::ENOSYS) => "unavailable: not in this kernel (ENOSYS)".into(),
            Some(libc::EPERM) => format!(
                "unavailable: not permitted (EPERM; kernel.io_uring_disabled={})",
                read_i64("/proc/sys/kernel/io_uring_disabled").map_or("?".into(), |v| v.to_string())
            ),
            _ => format!("unavailable: {e}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_is_complete_enough_and_serialises() {
        let m = describe();
        assert!(m.logical_cpus >= 1);
        assert!(!m.io_uring.is_empty());
        assert!(!m.perf_events.is_empty());
        let json = serde_json::to_string(&m).unwrap();
        let back: Machine = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m);
    }
}
