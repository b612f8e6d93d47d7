//! The run environment recorded with every sweep: the settings that change what the data path
//! costs (CPU, SMT, caches, governor, counter permissions, socket memory limits, MTU). The wider
//! machine description comes from `crate::sysinfo::describe()` and is stored beside it.

use crate::sys::procfs::{read_i64, read_trimmed};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunEnvironment {
    pub kernel: Option<String>,
    pub cpu_model: Option<String>,
    pub cpus_online: Option<usize>,
    pub smt_active: Option<bool>,
    /// Cache sizes of CPU 0 as the kernel names them, e.g. "L1d 48K, L2 2048K, L3 105M".
    pub caches: Option<String>,
    pub governor: Option<String>,
    pub perf_event_paranoid: Option<i64>,
    pub optmem_max: Option<i64>,
    pub tcp_wmem: Option<String>,
    pub tcp_rmem: Option<String>,
    /// net.ipv4.tcp_congestion_control: what every TCP connection uses unless it says
    /// (`net load --cc`); BBR keeps a queue short that CUBIC fills.
    #[serde(default)]
    pub tcp_congestion_control: Option<String>,
    /// RLIMIT_MEMLOCK soft limit in bytes; None when unlimited or unknown.
    pub rlimit_memlock: Option<String>,
    /// The interface the workloads used and its MTU (loopback for local runs).
    pub interface: String,
    pub mtu: Option<i64>,
    /// /proc/loadavg's 1, 5 and 15 minute averages when the run started: other load on the
    /// machine is the first suspect for noisy cells.
    #[serde(default)]
    pub load_average: Option<String>,
}

impl RunEnvironment {
    /// Read the environment now, for workloads that run over `interface`.
    pub fn capture(interface: &str) -> RunEnvironment {
        RunEnvironment {
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            cpu_model: cpu_model(),
            cpus_online: read_trimmed("/sys/devices/system/cpu/online")
                .and_then(|t| crate::sys::procfs::parse_cpu_list(&t))
                .map(|l| l.len()),
            smt_active: read_i64("/sys/devices/system/cpu/smt/active").map(|v| v == 1),
            caches: caches(),
            governor: read_trimmed("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
            perf_event_paranoid: read_i64("/proc/sys/kernel/perf_event_paranoid"),
            optmem_max: read_i64("/proc/sys/net/core/optmem_max"),
            tcp_wmem: read_trimmed("/proc/sys/net/ipv4/tcp_wmem").map(|t| squeeze(&t)),
            tcp_rmem: read_trimmed("/proc/sys/net/ipv4/tcp_rmem").map(|t| squeeze(&t)),
            tcp_congestion_control: read_trimmed("/proc/sys/net/ipv4/tcp_congestion_control"),
            rlimit_memlock: memlock(),
            interface: interface.to_string(),
            mtu: read_i64(format!("/sys/class/net/{interface}/mtu")),
            load_average: read_trimmed("/proc/loadavg")
                .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" ")),
        }
    }

    /// (name, value) pairs for tables; missing values read "unknown".
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let show = |v: Option<String>| v.unwrap_or_else(|| "unknown".into());
        vec![
            ("kernel", show(self.kernel.clone())),
            ("cpu_model", show(self.cpu_model.clone())),
            ("cpus_online", show(self.cpus_online.map(|v| v.to_string()))),
            ("smt_active", show(self.smt_active.map(|v| v.to_string()))),
            ("caches", show(self.caches.clone())),
            ("governor", show(self.governor.clone())),
            (
                "perf_event_paranoid",
                show(self.perf_event_paranoid.map(|v| v.to_string())),
            ),
            ("optmem_max", show(self.optmem_max.map(|v| v.to_string()))),
            ("tcp_wmem", show(self.tcp_wmem.clone())),
            ("tcp_rmem", show(self.tcp_rmem.clone())),
            ("tcp_congestion_control", show(self.tcp_congestion_control.clone())),
            ("rlimit_memlock", show(self.rlimit_memlock.clone())),
            ("interface", self.interface.clone()),
            ("mtu", show(self.mtu.map(|v| v.to_string()))),
            ("load_average", show(self.load_average.clone())),
        ]
    }
}

fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn cpu_model() -> Option<String> {
    let info = read_trimmed("/proc/cpuinfo")?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

fn caches() -> Option<String> {
    let mut parts = Vec::new();
    for index in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{index}");
        let (Some(level), Some(kind), Some(size)) = (
            read_trimmed(format!("{dir}/level")),
            read_trimmed(format!("{dir}/type")),
            read_trimmed(format!("{dir}/size")),
        ) else {
            continue;
        };
        let suffix = match kind.as_str() {
            "Data" => "d",
            "Instruction" => "i",
            _ => "",
        };
        parts.push(format!("L{level}{suffix} {size}"));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn memlock() -> Option<String> {
    use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};
    let (soft, _hard) = getrlimit(Resource::RLIMIT_MEMLOCK).ok()?;
    Some(if soft == RLIM_INFINITY {
        "unlimited".into()
    } else {
        soft.to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_reads_loopback_and_lists_every_field() {
        let env = RunEnvironment::capture("lo");
        assert_eq!(env.interface, "lo");
        let names: Vec<&str> = env.pairs().iter().map(|(n, _)| *n).collect();
        for wanted in ["kernel", "governor", "optmem_max", "tcp_wmem", "rlimit_memlock", "mtu"] {
            assert!(names.contains(&wanted), "{wanted} missing");
        }
        assert!(RunEnvironment::capture("no-such-if0").mtu.is_none());
    }
}
