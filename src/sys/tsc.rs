//! The time-stamp counter: reads, invariance and frequency calibration. On machines without
//! one (not x86_64) every function says so by returning `None`/`false`.

use std::time::{Duration, Instant};

/// Read the TSC after all earlier instructions finished (lfence; rdtsc), for the start of a
/// timed region so earlier work does not leak into it.
#[inline(always)]
pub fn rdtsc_fenced() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: lfence and rdtsc are available on every x86_64 CPU (SSE2 is baseline).
        Some(unsafe {
            core::arch::x86_64::_mm_lfence();
            core::arch::x86_64::_rdtsc()
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// Read the TSC once all earlier instructions retired (rdtscp; lfence), for the end of a timed
/// region.
#[inline(always)]
pub fn rdtscp() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        if !has_rdtscp() {
            return rdtsc_fenced();
        }
        let mut aux = 0u32;
        // SAFETY: rdtscp support was checked with cpuid above; aux is a valid out-pointer.
        let t = unsafe { core::arch::x86_64::__rdtscp(&mut aux) };
        // SAFETY: lfence is baseline on x86_64.
        unsafe { core::arch::x86_64::_mm_lfence() };
        Some(t)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

#[cfg(target_arch = "x86_64")]
fn cpuid(leaf: u32) -> core::arch::x86_64::CpuidResult {
    // cpuid is safe to call on x86_64 (every CPU has it); unknown leaves return zeros.
    core::arch::x86_64::__cpuid(leaf)
}

#[cfg(target_arch = "x86_64")]
fn has_rdtscp() -> bool {
    cpuid(0x8000_0000).eax >= 0x8000_0001 && cpuid(0x8000_0001).edx & (1 << 27) != 0
}

/// Whether the CPU says its TSC runs at a constant rate in every P-, C- and T-state
/// (CPUID 0x80000007 EDX bit 8), which makes it usable as a clock.
pub fn is_invariant() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        cpuid(0x8000_0000).eax >= 0x8000_0007 && cpuid(0x8000_0007).edx & (1 << 8) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Measure the TSC frequency in Hz against CLOCK_MONOTONIC over `window`.
pub fn calibrate_hz(window: Duration) -> Option<f64> {
    calibrate_hz_while(window, || true)
}

/// [`calibrate_hz`], giving up (None) as soon as `keep_going` says false; it is asked
/// between spins while the window runs, so it should be cheap (an atomic load).
pub fn calibrate_hz_while(window: Duration, keep_going: impl Fn() -> bool) -> Option<f64> {
    let t0 = Instant::now();
    let c0 = rdtsc_fenced()?;
    while t0.elapsed() < window {
        if !keep_going() {
            return None;
        }
        std::hint::spin_loop();
    }
    let c1 = rdtscp()?;
    let elapsed = t0.elapsed().as_secs_f64();
    (elapsed > 0.0 && c1 > c0).then(|| (c1 - c0) as f64 / elapsed)
}
