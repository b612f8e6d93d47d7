//! A request to stop, shared by whoever decides (the signal handler, a test) and the workload
//! that must notice it. Workloads check it at least every [`Stop::POLL`] so that a run stops
//! within about 100 ms of Ctrl-C, also in the middle of a measured window.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A cheap, copyable handle on a stop flag.
#[derive(Clone, Copy)]
pub struct Stop {
    flag: &'static AtomicBool,
}

static NEVER: AtomicBool = AtomicBool::new(false);

impl Stop {
    /// How often a waiting workload looks at the flag.
    pub const POLL: Duration = Duration::from_millis(20);

    pub fn new(flag: &'static AtomicBool) -> Stop {
        Stop { flag }
    }

    /// A handle nobody can set: for code run outside a runner (servers started by hand).
    pub fn never() -> Stop {
        Stop { flag: &NEVER }
    }

    /// A fresh flag of its own (tests; each one leaks one bool).
    pub fn fresh() -> Stop {
        Stop {
            flag: Box::leak(Box::new(AtomicBool::new(false))),
        }
    }

    pub fn requested(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// The flag itself, for code that takes `&AtomicBool`.
    pub fn flag(&self) -> &'static AtomicBool {
        self.flag
    }

    pub fn request(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Sleep for `d` in steps of at most [`Stop::POLL`]. True when the whole time passed,
    /// false as soon as a stop was requested.
    pub fn sleep(&self, d: Duration) -> bool {
        self.sleep_watching(d, &AtomicBool::new(false))
    }

    /// [`Stop::sleep`] that also gives up (false) as soon as `failed` is set: how a workload's
    /// driver waits out its warm-up and window while its threads may fail.
    pub fn sleep_watching(&self, d: Duration, failed: &AtomicBool) -> bool {
        let until = Instant::now() + d;
        loop {
            if failed.load(Ordering::SeqCst) || self.requested() {
                return false;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(Self::POLL));
        }
    }
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stop({})", self.requested())
    }
}

/// The error a workload returns when it was stopped before its result was complete. The
/// runner discards such a cell: it is never printed, exported or stored as data.
#[derive(Debug, thiserror::Error)]
#[error("stopped before the cell finished")]
pub struct Interrupted;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_returns_early_once_stopped() {
        let stop = Stop::fresh();
        assert!(stop.sleep(Duration::from_millis(5)));
        stop.request();
        let t = Instant::now();
        assert!(!stop.sleep(Duration::from_secs(30)));
        // Returns at once; the bound is generous for a loaded machine, far under the 30 s.
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(!Stop::never().requested());
    }

    /// (Moved from net/workload/common.rs, which the records coordinator no longer needs.)
    #[test]
    fn a_failed_thread_ends_the_wait_early() {
        let stop = Stop::never();
        let failed = AtomicBool::new(true);
        let start = Instant::now();
        assert!(!stop.sleep_watching(Duration::from_secs(5), &failed));
        // Well under the 5 s it would sleep, with room for a loaded machine's wake-up delay.
        assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
        assert!(stop.sleep_watching(Duration::from_millis(1), &AtomicBool::new(false)));
    }
}
