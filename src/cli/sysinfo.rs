//! `iopath sysinfo`: print the machine description (the same one stored with every run).

use crate::case::format_bytes;
use crate::sysinfo::{describe, Machine};
use clap::Args;

#[derive(Args, Debug)]
pub struct SysinfoArgs {
    /// Print the description as JSON (the form stored with every run).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: SysinfoArgs) -> anyhow::Result<()> {
    let machine = describe();
    if args.json {
        crate::say!("{}", serde_json::to_string_pretty(&machine)?)?;
    } else {
        super::output::out(render(&machine))?;
    }
    Ok(())
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("unavailable".to_string(), |v| v.to_string())
}

fn bytes(v: Option<u64>) -> String {
    v.map_or("unavailable".to_string(), format_bytes)
}

/// The description as aligned `key: value` lines.
pub fn render(m: &Machine) -> String {
    let mut lines = processor_lines(m);
    lines.extend(memory_and_device_lines(m));
    lines.extend(kernel_setting_lines(m));
    let width = lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    lines.iter().map(|(k, v)| format!("{k:<width$}  {v}\n")).collect()
}

/// The host, kernel, CPUs, TSC, clock source and caches, as (key, value) lines.
fn processor_lines(m: &Machine) -> Vec<(String, String)> {
    let mut lines: Vec<(String, String)> = Vec::new();
    let mut add = |k: &str, v: String| lines.push((k.to_string(), v));
    add("host", opt(&m.hostname));
    add("kernel", format!("{} ({})", opt(&m.kernel), opt(&m.kernel_build)));
    add("cpu", format!("{} [{}]", opt(&m.cpu_model), opt(&m.cpu_vendor)));
    add(
        "virtualized",
        m.virtualized.map_or("unknown".into(), |v| {
            if v {
                "yes (hypervisor flag)".into()
            } else {
                "no".into()
            }
        }),
    );
    add(
        "cpus",
        format!(
            "{} logical (online {}), {} cores, {} socket(s), {} thread(s) per core, SMT {}",
            m.logical_cpus,
            opt(&m.online_cpus),
            opt(&m.physical_cores),
            opt(&m.sockets),
            opt(&m.threads_per_core),
            m.smt_active.map_or("unknown", |a| if a { "on" } else { "off" })
        ),
    );
    add(
        "tsc",
        format!(
            "{} ({})",
            m.tsc_hz
                .map_or("unavailable".into(), |hz| format!("{:.3} GHz", hz / 1e9)),
            if m.tsc_invariant { "invariant" } else { "not invariant" }
        ),
    );
    add("clocksource", opt(&m.clocksource));
    for c in &m.caches {
        add(
            &format!("cache L{} {}", c.level, c.kind.to_lowercase()),
            format!(
                "{} line {} ways {} shared by cpus {}",
                format_bytes(c.size_bytes),
                c.line_bytes.map_or("?".into(), |l| l.to_string()),
                c.ways.map_or("?".into(), |l| l.to_string()),
                opt(&c.shared_cpus)
            ),
        );
    }
    lines
}

/// Memory, NUMA nodes, network interfaces and block devices, as (key, value) lines.
fn memory_and_device_lines(m: &Machine) -> Vec<(String, String)> {
    let mut lines: Vec<(String, String)> = Vec::new();
    let mut add = |k: &str, v: String| lines.push((k.to_string(), v));
    add(
        "memory",
        format!(
            "{} total, {} available",
            bytes(m.memory_total_bytes),
            bytes(m.memory_available_bytes)
        ),
    );
    for n in &m.numa_nodes {
        add(
            &format!("numa node{}", n.id),
            format!("cpus {} memory {}", opt(&n.cpus), bytes(n.memory_bytes)),
        );
    }
    for i in &m.interfaces {
        add(
            &format!("net {}", i.name),
            format!(
                "mtu {} speed {} state {}",
                opt(&i.mtu),
                i.speed_mbps.map_or("unknown".into(), |s| format!("{s} Mbit/s")),
                opt(&i.state)
            ),
        );
    }
    for b in &m.block_devices {
        add(
            &format!("block {}", b.name),
            format!(
                "{} {} model {} scheduler {}",
                bytes(b.size_bytes),
                b.rotational
                    .map_or("?", |r| if r { "rotational" } else { "non-rotational" }),
                opt(&b.model),
                opt(&b.scheduler)
            ),
        );
    }
    lines
}

/// The kernel's settings that bear on measuring: governor, hugepages, mitigations, perf,
/// io_uring, socket memory and locked-memory limits.
fn kernel_setting_lines(m: &Machine) -> Vec<(String, String)> {
    let mut lines: Vec<(String, String)> = Vec::new();
    let mut add = |k: &str, v: String| lines.push((k.to_string(), v));
    add("governor", opt(&m.governor));
    add("transparent hugepages", opt(&m.transparent_hugepage));
    for (k, v) in &m.mitigations {
        add(&format!("vulnerability {k}"), v.clone());
    }
    for (k, v) in &m.perf_events {
        add(&format!("perf {k}"), v.clone());
    }
    add("perf_event_paranoid", opt(&m.perf_event_paranoid));
    for line in &m.memory_traffic {
        add("memory traffic", line.clone());
    }
    add(
        "io_uring",
        format!(
            "{} (kernel.io_uring_disabled={})",
            m.io_uring,
            opt(&m.io_uring_disabled_sysctl)
        ),
    );
    add("optmem_max", opt(&m.optmem_max));
    add("tcp_wmem", opt(&m.tcp_wmem));
    add("tcp_rmem", opt(&m.tcp_rmem));
    add(
        "RLIMIT_MEMLOCK",
        m.rlimit_memlock.as_ref().map_or("unavailable".into(), |l| {
            let f = |v: Option<u64>| v.map_or("unlimited".to_string(), format_bytes);
            format!("soft {} hard {}", f(l.soft), f(l.hard))
        }),
    );
    add("loopback mtu", opt(&m.loopback_mtu));
    lines
}
