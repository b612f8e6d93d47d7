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
    /// running. An uncore PMU counts its whole box; one marked PERF_PMU_CAP_NO_EXCLUDE (AMD's)
    /// refuses any exclude_* bit with EINVAL (kernel/events/core.c), so kernel and hypervisor
    /// are included. A CPU-wide event needs CAP_PERFMON (or CAP_SYS_ADMIN) or
    /// perf_event_paranoid <= 0.
    pub fn open(attr: UncoreAttr, cpu: usize) -> io::Result<UncoreCounter> {
        let mut builder = Builder::new(Raw::new(attr.config).config1(attr.config1).config2(attr.config2));
        // Raw set PERF_TYPE_RAW; the PMU's dynamic type replaces it.
        builder.attrs_mut().type_ = attr.pmu_type;
        builder
            .any_pid()
            .one_cpu(cpu)
            .exclude_kernel(false)
            .exclude_hv(false)
            .enabled(false);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The software PMU's cpu-clock stands in for an uncore event (this machine has none):
    /// the same system-wide open on one CPU, enable, disable and read with times. Its type
    /// is read from sysfs like any PMU's.
    #[test]
    fn a_system_wide_counter_counts_between_start_and_stop() {
        let Some(pmu_type) = crate::sys::procfs::read_i64("/sys/bus/event_source/devices/software/type") else {
            eprintln!("no software PMU in sysfs here");
            return;
        };
        let attr = UncoreAttr {
            pmu_type: pmu_type as u32,
            config: 0, // PERF_COUNT_SW_CPU_CLOCK
            config1: 0,
            config2: 0,
        };
        let mut c = match UncoreCounter::open(attr, 0) {
            Ok(c) => c,
            Err(e) => {
                // Not root, no CAP_PERFMON, perf_event_paranoid > 0: refused, as documented.
                assert!(
                    matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)),
                    "{e}"
                );
                return;
            }
        };
        assert_eq!(c.read().unwrap().count, 0, "disabled until started");
        c.start().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        c.stop().unwrap();
        let r = c.read().unwrap();
        assert!(r.count > 0 && r.enabled >= Duration::from_millis(15), "{r:?}");
        assert!(r.running <= r.enabled);
        let again = c.read().unwrap();
        assert_eq!(again.count, r.count, "stopped means stopped");
    }
}
