//! System-wide perf counters for uncore PMUs (memory controllers, data fabric, I/O): one
//! event on one CPU, any process (pid -1), its type and config words taken from sysfs by
//! the caller. The system call goes through perf-event2's builder (no new `unsafe` here);
//! what this adds is the uncore-specific setup the builder does not default to.

use perf_event::events::Raw;
use perf_event::{Builder, Counter};
use std::io;
use std::time::Duration;

/// What perf_event_open needs for one uncore event: the PMU's dynamic `type` and the event
/// encoded into its config words (see `measure::memtraffic::format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UncoreAttr {
    pub pmu_type: u32,
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
}

/// One count read with the times the multiplexing scale needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub count: u64,
    pub enabled: Duration,
    pub running: Duration,
}

/// A disabled system-wide counter of one uncore event on one CPU.
pub struct UncoreCounter {
    counter: Counter,
}

impl UncoreCounter {
    /// perf_event_open(attr, pid -1, cpu, group -1), disabled, reading time enabled and
    /// running. Uncore PMUs count everything on their box and refuse the exclude_* bits
    /// (EINVAL), so kernel and hypervisor are included; the kernel then asks for
    /// CAP_PERFMON (or CAP_SYS_ADMIN) or perf_event_paranoid <= 0, as for any CPU-wide event.
    pub fn open(attr: UncoreAttr, cpu: usize) -> io::Result<UncoreCounter> {
        let mut builder = Builder::new(Raw::new(attr.config).config1(attr.config1).config2(attr.config2));
        // Raw set PERF_TYPE_RAW; the PMU's dynamic type replaces it.
        builder.attrs_mut().type_ = attr.pmu_type;
        builder.any_pid().one_cpu(cpu).exclude_kernel(false).exclude_hv(false).enabled(false);
        Ok(UncoreCounter {
            counter: builder.build()?,
        })
    }

    /// Zero the count and start counting.
    pub fn start(&mut self) -> io::Result<()> {
        self.counter.reset()?;
        self.counter.enable()
    }

    /// Stop counting.
    pub fn stop(&mut self) -> io::Result<()> {
        self.counter.disable()
    }

    /// The count since `start` with the time the event was enabled and actually counting.
    pub fn read(&mut self) -> io::Result<Reading> {
        let r = self.counter.read_count_and_time()?;
        Ok(Reading {
            count: r.count,
            enabled: Duration::from_nanos(r.time_enabled),
            running: Duration::from_nanos(r.time_running),
        })
    }
}
