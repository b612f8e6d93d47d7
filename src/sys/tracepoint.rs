//! Kernel tracepoints sampled system-wide through perf_event_open (PERF_TYPE_TRACEPOINT):
//! one ring buffer per CPU, every event of every tracepoint on that CPU sampled (period 1)
//! with its thread, time, CPU and raw fields, the other tracepoints' events redirected into
//! the first one's ring (PERF_EVENT_IOC_SET_OUTPUT). The events are opened through
//! perf-event2's builder; what this file adds is the redirection, tracefs, the thread id and
//! the clock the samples are stamped with.

use perf_event::events::Tracepoint;
use perf_event::{Builder, Clock, Counter, SampleFlag, Sampler};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Where tracefs is mounted on current kernels.
pub const TRACEFS: &str = "/sys/kernel/tracing";

const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_SAMPLE: u32 = 9;
/// `_IO('$', 5)`: send this event's samples into another event's ring on the same CPU.
const PERF_EVENT_IOC_SET_OUTPUT: libc::c_ulong = 0x2405;

/// The raw bytes a sample keeps: the probe's tracepoints' records are at most 68 bytes
/// (sched_switch), and a fixed room spares an allocation per event.
pub const RAW_KEPT: usize = 96;

/// One sampled event: who was on the CPU, when (CLOCK_MONOTONIC ns), where, and the raw
/// record (the tracepoint's fields at the offsets its `format` file gives, common ones first;
/// its first [`RAW_KEPT`] bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSample {
    pub tid: u32,
    pub time_ns: u64,
    pub cpu: u32,
    raw: [u8; RAW_KEPT],
    raw_len: usize,
}

impl TraceSample {
    pub fn new(tid: u32, time_ns: u64, cpu: u32, record: &[u8]) -> TraceSample {
        let raw_len = record.len().min(RAW_KEPT);
        let mut raw = [0u8; RAW_KEPT];
        raw[..raw_len].copy_from_slice(&record[..raw_len]);
        TraceSample {
            tid,
            time_ns,
            cpu,
            raw,
            raw_len,
        }
    }

    /// The raw record (a field past [`RAW_KEPT`] is not there to read).
    pub fn raw(&self) -> &[u8] {
        &self.raw[..self.raw_len]
    }
}

/// The events of a set of tracepoints on every listed CPU, disabled until [`TraceRings::enable`].
pub struct TraceRings {
    /// One ring per CPU (owned by its first tracepoint's event) and the events redirected into it.
    rings: Vec<(Sampler, Vec<Counter>)>,
}

fn builder(id: u64, cpu: usize) -> Builder<'static> {
    let mut b = Builder::new(Tracepoint::with_id(id));
    b.any_pid()
        .one_cpu(cpu)
        .include_kernel()
        .enabled(false)
        .sample_period(1)
        .sample(SampleFlag::TID | SampleFlag::TIME | SampleFlag::CPU | SampleFlag::RAW)
        .clockid(Clock::MONOTONIC);
    b
}

impl TraceRings {
    /// Open `ids` on each of `cpus` with a ring of `ring_bytes` (rounded to a power of two)
    /// per CPU. A CPU-wide event needs CAP_PERFMON (or CAP_SYS_ADMIN) or
    /// perf_event_paranoid <= -1 for raw tracepoint data.
    pub fn open(ids: &[u64], cpus: &[usize], ring_bytes: usize) -> io::Result<TraceRings> {
        let (&first, rest) = ids
            .split_first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no tracepoint to open"))?;
        let mut rings = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            let sampler = builder(first, cpu).build()?.sampled(ring_bytes)?;
            let mut redirected = Vec::with_capacity(rest.len());
            for &id in rest {
                let counter = builder(id, cpu).build()?;
                // SAFETY: both descriptors are open perf events owned by this function's
                // values for the duration of the call; the ioctl reads no memory of ours.
                let rc = unsafe {
                    libc::ioctl(
                        counter.as_raw_fd(),
                        PERF_EVENT_IOC_SET_OUTPUT as _,
                        sampler.as_counter().as_raw_fd(),
                    )
                };
                if rc < 0 {
                    return Err(io::Error::last_os_error());
                }
                redirected.push(counter);
            }
            rings.push((sampler, redirected));
        }
        Ok(TraceRings { rings })
    }

    /// Start sampling on every CPU.
    pub fn enable(&mut self) -> io::Result<()> {
        for (sampler, others) in &mut self.rings {
            sampler.as_counter_mut().enable()?;
            for c in others {
                c.enable()?;
            }
        }
        Ok(())
    }

    /// Stop sampling on every CPU (what is in the rings stays there for [`TraceRings::drain`]).
    pub fn disable(&mut self) {
        for (sampler, others) in &mut self.rings {
            sampler.as_counter_mut().disable().ok();
            for c in others {
                c.disable().ok();
            }
        }
    }

    /// Each tracepoint's count of events over all CPUs, in the order of the ids opened (a
    /// sampling event counts every event, also one whose sample the kernel did not write).
    pub fn counts(&mut self) -> io::Result<Vec<u64>> {
        let mut sums = Vec::new();
        for (sampler, others) in &mut self.rings {
            let mut counts = vec![sampler.as_counter_mut().read()?];
            for c in others.iter_mut() {
                counts.push(c.read()?);
            }
            sums.resize(counts.len(), 0);
            for (sum, n) in sums.iter_mut().zip(counts) {
                *sum += n;
            }
        }
        Ok(sums)
    }

    /// Move every sample in the rings into `into`; returns how many events the kernel lost
    /// because a ring was full.
    pub fn drain(&mut self, into: &mut Vec<TraceSample>) -> u64 {
        let mut lost = 0;
        for (sampler, _) in &mut self.rings {
            while let Some(record) = sampler.next_record() {
                let bytes = record.to_contiguous();
                match record.ty() {
                    PERF_RECORD_SAMPLE => into.extend(parse_sample(&bytes)),
                    // id (u64), lost (u64)
                    PERF_RECORD_LOST => lost += read_u64(&bytes, 8).unwrap_or(1),
                    _ => {}
                }
            }
        }
        lost
    }
}

fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn read_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// A PERF_RECORD_SAMPLE's body for TID | TIME | CPU | RAW, in the kernel's order: pid, tid,
/// time, cpu, reserved, raw size, raw bytes.
fn parse_sample(body: &[u8]) -> Option<TraceSample> {
    let tid = read_u32(body, 4)?;
    let time_ns = read_u64(body, 8)?;
    let cpu = read_u32(body, 16)?;
    let size = read_u32(body, 24)? as usize;
    Some(TraceSample::new(tid, time_ns, cpu, body.get(28..28 + size)?))
}

/// Mount tracefs where it belongs when it is not there (as root; otherwise the error says why).
pub fn ensure_tracefs() -> io::Result<()> {
    if Path::new(TRACEFS).join("events").is_dir() {
        return Ok(());
    }
    let path = std::ffi::CString::new(TRACEFS).expect("no NUL in a constant");
    let fstype = c"tracefs";
    let source = c"nodev";
    // SAFETY: every pointer is a NUL-terminated string alive for the call; data is null.
    let rc = unsafe { libc::mount(source.as_ptr(), path.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's kernel id (what a sample's `tid` names).
pub fn current_tid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// CLOCK_MONOTONIC now in nanoseconds, the clock the samples are stamped with.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec the call writes; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_body_parses_in_the_kernels_order() {
        let mut body = Vec::new();
        body.extend(7u32.to_ne_bytes()); // pid
        body.extend(9u32.to_ne_bytes()); // tid
        body.extend(123u64.to_ne_bytes()); // time
        body.extend(1u32.to_ne_bytes()); // cpu
        body.extend(0u32.to_ne_bytes()); // reserved
        body.extend(3u32.to_ne_bytes()); // raw size
        body.extend([1u8, 2, 3, 0]); // raw + padding
        let s = parse_sample(&body).unwrap();
        assert_eq!((s.tid, s.time_ns, s.cpu, s.raw()), (9, 123, 1, &[1u8, 2, 3][..]));
        assert!(parse_sample(&body[..20]).is_none());
    }
}
