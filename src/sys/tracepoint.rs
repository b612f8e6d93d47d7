//! Kernel tracepoints through perf_event_open (PERF_TYPE_TRACEPOINT): tracefs, where their
//! ids and formats are, mounted when missing; a tracepoint counted on one CPU; the thread id
//! and the clock (CLOCK_MONOTONIC, what bpf_ktime_get_ns reads). The probe's programs are
//! attached through `sys/bpf.rs`.

use perf_event::events::Tracepoint;
use perf_event::{Builder, Counter};
use std::io;
use std::path::Path;

/// Where tracefs is mounted on current kernels.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Count every event of tracepoint `id` on `cpu` (any task), disabled until enabled.
pub fn count_on(id: u64, cpu: usize) -> io::Result<Counter> {
    Builder::new(Tracepoint::with_id(id))
        .any_pid()
        .one_cpu(cpu)
        .include_kernel()
        .enabled(false)
        .build()
}

/// Mount tracefs where it belongs when it is not there (as root; otherwise the error says why).
pub fn ensure_tracefs() -> io::Result<()> {
    // One mount at a time in this process: a local run's two probes open together, and the
    // loser of two concurrent mounts is refused (EBUSY) though tracefs is then there.
    static MOUNTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = MOUNTING.lock().unwrap_or_else(|e| e.into_inner());
    let mounted = || Path::new(TRACEFS).join("events").is_dir();
    if mounted() {
        return Ok(());
    }
    let path = std::ffi::CString::new(TRACEFS).expect("no NUL in a constant");
    let fstype = c"tracefs";
    let source = c"nodev";
    // SAFETY: every pointer is a NUL-terminated string alive for the call; data is null.
    let rc = unsafe { libc::mount(source.as_ptr(), path.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if rc < 0 {
        let refused = io::Error::last_os_error();
        // Another process may have mounted it meanwhile.
        if !mounted() {
            return Err(refused);
        }
    }
    Ok(())
}

/// The calling thread's kernel id (the key of the probe's per-thread sums).
pub fn current_tid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// CLOCK_MONOTONIC now in nanoseconds, the clock bpf_ktime_get_ns reads.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec the call writes; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
