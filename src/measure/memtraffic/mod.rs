//! Memory traffic of the whole machine over the measured window: bytes the memory
//! controllers read from and wrote to DRAM, from uncore PMUs (Intel IMC, AMD UMC or data
//! fabric) summed over every instance, or from resctrl MBM; and bytes PCIe devices sent into
//! the CPU (Intel IIO) where the uncore has them. A [`SystemProbe`]: the counters are created
//! when the probe is pushed, enabled at window open, disabled and read once at window close,
//! never inside the loop. Where the machine has no such counters every figure is
//! `unavailable` with the reason (docs/methodology.md, "Memory traffic").
//!
//! [`SystemProbe`]: crate::measure::window::SystemProbe

pub mod discover;
pub mod format;

use crate::measure::window::{Probe, SystemProbes};
use crate::observation::{Metric, Role, Source};
use crate::sys::procfs;
use crate::sys::uncore::{Reading, UncoreAttr, UncoreCounter};
use discover::{Backend, Counts, Discovery, ResolvedEvent};
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use discover::{discover, VM_REASON};

/// The names the memory-traffic probe and the per-payload ratio use (other workloads derive
/// the same ratio under the same name).
pub const DRAM_READ_BYTES: &str = "dram_read_bytes";
pub const DRAM_WRITE_BYTES: &str = "dram_write_bytes";
pub const DRAM_BYTES: &str = "dram_bytes";
pub const DRAM_BYTES_PER_PAYLOAD_BYTE: &str = "dram_bytes_per_payload_byte";
pub const PCIE_IN_BYTES: &str = "pcie_in_bytes";
pub const LLC_IO_MISS_BYTES: &str = "llc_io_miss_bytes";
pub const PROBE_READ_NS: &str = "memtraffic_probe_read_ns";

/// Every metric this module produces, for the report's note.
pub const METRIC_NAMES: &[&str] = &[
    DRAM_READ_BYTES,
    DRAM_WRITE_BYTES,
    DRAM_BYTES,
    DRAM_BYTES_PER_PAYLOAD_BYTE,
    PCIE_IN_BYTES,
    LLC_IO_MISS_BYTES,
    PROBE_READ_NS,
];

/// Why LLC misses caused by I/O are not counted even where the uncore exists.
const NO_DDIO_EVENTS: &str = "LLC misses caused by I/O (DDIO) need CHA TOR-insert events with model-specific opcode filters, which the kernel does not publish in sysfs; iopath does not count them";

/// What the report says once when a run's memory-traffic figures are all unavailable.
pub fn unavailable_note(reason: &str) -> String {
    format!(
        "Memory traffic not measured here ({reason}): {}. They would show the bytes the memory \
         controllers read from and wrote to DRAM during the measured window (the whole machine, \
         summed over every controller) and the DRAM bytes per payload byte moved: what each copy \
         costs in memory bandwidth, and bytes PCIe devices sent into the CPU. To get them run on \
         bare metal (a virtual machine exposes no uncore PMU), as root or with CAP_PERFMON, or \
         with kernel.perf_event_paranoid <= 0.",
        METRIC_NAMES.join(", ")
    )
}

/// Add the memory-traffic probe of this machine to a window's system probes.
pub fn push_memory_traffic_probe(system: &mut SystemProbes) {
    system.push(Box::new(MemoryTraffic::new(&discover(Path::new("/")))));
}

/// DRAM bytes per payload byte moved in the window: `dram_bytes` (system) of `metrics` over
/// `payload_bytes`; unavailable with dram_bytes' reason when it is.
pub fn per_payload_byte(metrics: &[Metric], payload_bytes: Result<f64, String>) -> Metric {
    let dram = metrics.iter().find(|m| m.name == DRAM_BYTES && m.role == Role::System);
    let unit = "B/B";
    match (dram, payload_bytes) {
        (None, _) => Metric::unavailable(
            DRAM_BYTES_PER_PAYLOAD_BYTE,
            Role::System,
            unit,
            "no memory-traffic probe in this run",
        ),
        (
            Some(Metric {
                value: None, source, ..
            }),
            _,
        ) => Metric {
            name: DRAM_BYTES_PER_PAYLOAD_BYTE.into(),
            role: Role::System,
            value: None,
            unit: unit.into(),
            source: source.clone(),
        },
        (Some(_), Err(why)) => Metric::unavailable(DRAM_BYTES_PER_PAYLOAD_BYTE, Role::System, unit, why),
        (
            Some(Metric {
                value: Some(d), source, ..
            }),
            Ok(p),
        ) => Metric::new(DRAM_BYTES_PER_PAYLOAD_BYTE, Role::System, d / p, unit, source.clone()),
    }
}

/// Why perf_event_open refused an uncore event, in words a user can act on.
fn open_error(event: &ResolvedEvent, cpu: usize, err: &std::io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "system-wide uncore counters are not permitted here: they need root, CAP_PERFMON or kernel.perf_event_paranoid <= 0 (it is {})",
            procfs::read_i64("/proc/sys/kernel/perf_event_paranoid").map_or("unknown".into(), |p| p.to_string())
        ),
        Some(libc::EBUSY) => format!("{}/{}/ on cpu {cpu}: the counter is in use by another tool", event.pmu, event.event),
        _ => format!("{}/{}/ on cpu {cpu} refused by the kernel: {err}", event.pmu, event.event),
    }
}

/// One opened counter: one event of one PMU instance on one CPU of its cpumask.
struct Opened {
    counts: Counts,
    bytes_per_count: f64,
    label: String,
    counter: UncoreCounter,
}

/// Open every (event, cpu) of `events` disabled; all or none (a partial sum is wrong).
fn open_all(events: &[ResolvedEvent]) -> Result<Vec<Opened>, String> {
    let mut out = Vec::new();
    for e in events {
        let attr = UncoreAttr {
            pmu_type: e.pmu_type,
            config: e.encoded.config,
            config1: e.encoded.config1,
            config2: e.encoded.config2,
        };
        for &cpu in &e.cpus {
            let counter = UncoreCounter::open(attr, cpu).map_err(|err| open_error(e, cpu, &err))?;
            out.push(Opened {
                counts: e.counts,
                bytes_per_count: e.bytes_per_count,
                label: format!("{}/{}/ cpu {cpu}", e.pmu, e.event),
                counter,
            });
        }
    }
    Ok(out)
}

/// Bytes from one reading, scaled for multiplexing (time enabled / time running); a counter
/// that never ran in the window counted nothing and has no value.
pub fn scaled_bytes(reading: &Reading, bytes_per_count: f64) -> Result<f64, String> {
    if reading.running.is_zero() {
        return Err("an uncore counter never ran in the window (multiplexed out or not enabled)".into());
    }
    let scale = reading.enabled.as_secs_f64() / reading.running.as_secs_f64();
    Ok(reading.count as f64 * scale * bytes_per_count)
}

/// DRAM read, write and total bytes from per-counter byte counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Totals {
    pub read: Result<f64, String>,
    pub write: Result<f64, String>,
    pub total: Result<f64, String>,
}

fn sum_of(parts: &[(Counts, Result<f64, String>)], kind: Counts) -> Option<Result<f64, String>> {
    let mine: Vec<&Result<f64, String>> = parts.iter().filter(|(k, _)| *k == kind).map(|(_, v)| v).collect();
    if mine.is_empty() {
        return None;
    }
    Some(
        mine.into_iter()
            .try_fold(0.0, |acc, v| v.as_ref().map(|v| acc + v).map_err(Clone::clone)),
    )
}

/// Sum the counters by what they count. Counters of reads and writes together (AMD's data
/// fabric, resctrl) give the total only.
pub fn totals(parts: &[(Counts, Result<f64, String>)], together: &str) -> Totals {
    let split = |kind| sum_of(parts, kind).unwrap_or_else(|| Err(together.to_string()));
    let (read, write) = (split(Counts::Read), split(Counts::Write));
    let total = match sum_of(parts, Counts::ReadWrite) {
        Some(t) => t,
        None => match (&read, &write) {
            (Ok(r), Ok(w)) => Ok(r + w),
            (Err(e), _) | (_, Err(e)) => Err(e.clone()),
        },
    };
    Totals { read, write, total }
}

/// How memory traffic is counted in one window.
enum Counting {
    Perf(Vec<Opened>),
    Resctrl {
        files: Vec<PathBuf>,
        before: Option<Result<u64, String>>,
    },
}

/// The memory-traffic probe (see the module comment).
pub struct MemoryTraffic {
    memory: Result<Counting, String>,
    io: Result<Vec<Opened>, String>,
    /// An enable that failed at window open: the window's counts are not whole.
    open_failed: Option<String>,
}

fn sum_resctrl(files: &[PathBuf]) -> Result<u64, String> {
    let mut sum: u64 = 0;
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("cannot read {}: {e}", f.display()))?;
        let v: u64 = text
            .trim()
            .parse()
            .map_err(|_| format!("{} reads '{}' (no count for this window)", f.display(), text.trim()))?;
        sum = sum.saturating_add(v);
    }
    Ok(sum)
}

impl MemoryTraffic {
    /// Create (disabled) the counters discovery found; what cannot be opened keeps its reason.
    pub fn new(found: &Discovery) -> MemoryTraffic {
        let memory = match &found.memory {
            Ok(Backend::Perf { events, .. }) => open_all(events).map(Counting::Perf),
            Ok(Backend::Resctrl { files }) => Ok(Counting::Resctrl {
                files: files.clone(),
                before: None,
            }),
            Err(why) => Err(why.clone()),
        };
        let io = match &found.io {
            Ok(events) => open_all(events),
            Err(why) => Err(why.clone()),
        };
        MemoryTraffic {
            memory,
            io,
            open_failed: None,
        }
    }

    fn counters(&mut self) -> impl Iterator<Item = &mut Opened> {
        let memory = match &mut self.memory {
            Ok(Counting::Perf(list)) => list.as_mut_slice(),
            _ => &mut [],
        };
        let io = match &mut self.io {
            Ok(list) => list.as_mut_slice(),
            Err(_) => &mut [],
        };
        memory.iter_mut().chain(io.iter_mut())
    }
}

impl Probe for MemoryTraffic {
    type Sample = Vec<Metric>;

    fn open(&mut self) {
        self.open_failed = None;
        let mut failed = None;
        for c in self.counters() {
            if let Err(e) = c.counter.start() {
                failed.get_or_insert(format!("enabling {} failed: {e}", c.label));
            }
        }
        if let Ok(Counting::Resctrl { files, before }) = &mut self.memory {
            *before = Some(sum_resctrl(files));
        }
        self.open_failed = failed;
    }

    fn close(&mut self) -> Vec<Metric> {
        let started = Instant::now();
        let mut readings: Vec<(Counts, f64, Result<Reading, String>)> = Vec::new();
        for c in self.counters() {
            let stopped = c.counter.stop();
            let read = stopped
                .and_then(|_| c.counter.read())
                .map_err(|e| format!("reading {} failed: {e}", c.label));
            readings.push((c.counts, c.bytes_per_count, read));
        }
        let resctrl_after = match &self.memory {
            Ok(Counting::Resctrl { files, .. }) => Some(sum_resctrl(files)),
            _ => None,
        };
        let read_cost_ns = started.elapsed().as_nanos() as f64;

        let parts: Vec<(Counts, Result<f64, String>)> = readings
            .iter()
            .map(|(kind, per, r)| {
                let bytes = match (&self.open_failed, r) {
                    (Some(why), _) => Err(why.clone()),
                    (None, Ok(r)) => scaled_bytes(r, *per),
                    (None, Err(e)) => Err(e.clone()),
                };
                (*kind, bytes)
            })
            .collect();
        let memory_parts: Vec<_> = parts.iter().filter(|(k, _)| *k != Counts::PcieIn).cloned().collect();
        let io_parts: Vec<_> = parts.iter().filter(|(k, _)| *k == Counts::PcieIn).cloned().collect();

        let mut out = Vec::new();
        let bytes = |name: &str, source: &Source, v: Result<f64, String>| {
            Metric::from_result(name, Role::System, "B", source.clone(), v)
        };
        match &mut self.memory {
            Ok(Counting::Perf(_)) => {
                let t = totals(
                    &memory_parts,
                    "this machine's DRAM counters (AMD data fabric) count reads and writes together",
                );
                out.push(bytes(DRAM_READ_BYTES, &Source::Pmu, t.read));
                out.push(bytes(DRAM_WRITE_BYTES, &Source::Pmu, t.write));
                out.push(bytes(DRAM_BYTES, &Source::Pmu, t.total));
            }
            Ok(Counting::Resctrl { before, .. }) => {
                let together = "resctrl MBM counts reads and writes together";
                let total = match (before.take(), resctrl_after) {
                    (Some(Ok(b)), Some(Ok(a))) => a.checked_sub(b).map(|d| d as f64).ok_or_else(|| {
                        "mbm_total_bytes went backwards in the window (a group was removed?)".to_string()
                    }),
                    (Some(Err(e)), _) | (_, Some(Err(e))) => Err(e),
                    _ => Err("resctrl was not read at window open".to_string()),
                };
                out.push(Metric::unavailable(DRAM_READ_BYTES, Role::System, "B", together));
                out.push(Metric::unavailable(DRAM_WRITE_BYTES, Role::System, "B", together));
                out.push(bytes(DRAM_BYTES, &Source::Kernel, total));
            }
            Err(why) => {
                for name in [DRAM_READ_BYTES, DRAM_WRITE_BYTES, DRAM_BYTES] {
                    out.push(Metric::unavailable(name, Role::System, "B", why.clone()));
                }
            }
        }
        match &self.io {
            Ok(_) => {
                let sum = sum_of(&io_parts, Counts::PcieIn).unwrap_or_else(|| Err("no I/O counter".into()));
                out.push(bytes(PCIE_IN_BYTES, &Source::Pmu, sum));
            }
            Err(why) => out.push(Metric::unavailable(PCIE_IN_BYTES, Role::System, "B", why.clone())),
        }
        let ddio_why = match (&self.memory, &self.io) {
            (Err(why), Err(_)) => why.clone(),
            _ => NO_DDIO_EVENTS.to_string(),
        };
        out.push(Metric::unavailable(LLC_IO_MISS_BYTES, Role::System, "B", ddio_why));
        let nothing_read = match (&self.memory, &self.io) {
            (Err(why), Err(_)) => Some(why.clone()),
            _ => None,
        };
        out.push(match nothing_read {
            Some(why) => Metric::unavailable(PROBE_READ_NS, Role::System, "ns", format!("nothing to read: {why}")),
            None => Metric::tool(PROBE_READ_NS, Role::System, read_cost_ns, "ns"),
        });
        out
    }
}

/// The counters found, for `iopath sysinfo`: one line each, or why there are none. Opens
/// (and closes) one counter to tell whether this user may count.
pub fn describe(found: &Discovery) -> Vec<String> {
    let mut lines = Vec::new();
    let permitted = |events: &[ResolvedEvent]| -> String {
        let Some(e) = events.first() else {
            return String::new();
        };
        let attr = UncoreAttr {
            pmu_type: e.pmu_type,
            config: e.encoded.config,
            config1: e.encoded.config1,
            config2: e.encoded.config2,
        };
        match UncoreCounter::open(attr, e.cpus[0]) {
            Ok(_) => "opens".to_string(),
            Err(err) => format!("unavailable: {}", open_error(e, e.cpus[0], &err)),
        }
    };
    let summarize = |what: &str, events: &[ResolvedEvent]| -> Vec<String> {
        let mut names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let mut pmus: Vec<&str> = events.iter().map(|e| e.pmu.as_str()).collect();
        pmus.sort_unstable();
        pmus.dedup();
        names
            .iter()
            .map(|name| {
                let e = events.iter().find(|e| e.event == *name).expect("a name from the list");
                format!(
                    "{what}: {name} on {} ({} B per count, cpus {})",
                    pmus.join(" "),
                    e.bytes_per_count,
                    e.cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
                )
            })
            .collect()
    };
    match &found.memory {
        Ok(Backend::Perf { family, events }) => {
            lines.extend(summarize(&format!("DRAM ({family})"), events));
            lines.push(format!("DRAM counters: {}", permitted(events)));
        }
        Ok(Backend::Resctrl { files }) => lines.push(format!(
            "DRAM (resctrl MBM): mbm_total_bytes in {} files (reads and writes together)",
            files.len()
        )),
        Err(why) => lines.push(format!("DRAM: unavailable: {why}")),
    }
    match &found.io {
        Ok(events) => {
            lines.push(format!("PCIe in: {} bw_in_port events on {} PMU(s)", events.len(), {
                let mut p: Vec<&str> = events.iter().map(|e| e.pmu.as_str()).collect();
                p.sort_unstable();
                p.dedup();
                p.len()
            }));
        }
        Err(why) => lines.push(format!("PCIe in: unavailable: {why}")),
    }
    // PMUs passed over because an event did not resolve (already in the reason when nothing
    // else was found).
    if found.memory.is_ok() {
        lines.extend(found.problems.iter().map(|p| format!("skipped: {p}")));
    }
    lines
}

#[cfg(test)]
mod tests;
