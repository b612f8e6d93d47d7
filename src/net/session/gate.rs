//! Where a side's threads meet before the measured run starts.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long threads may take to become ready (pin, open counters) before the run is abandoned.
pub(crate) const START_PATIENCE: Duration = Duration::from_secs(30);

/// Where a side's threads wait until all of them are ready (pinned, counters open). Unlike a
/// Barrier it can be abandoned: if a thread fails to start, the others are released with
/// an error instead of waiting forever.
#[derive(Default)]
pub struct StartGate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    arrived: usize,
    open: Option<bool>,
}

impl StartGate {
    /// A thread is ready; wait for the decision. False when the start was abandoned.
    pub fn arrive_and_wait(&self) -> bool {
        let Ok(mut state) = self.state.lock() else { return false };
        state.arrived += 1;
        self.changed.notify_all();
        loop {
            if let Some(go) = state.open {
                return go;
            }
            state = match self.changed.wait(state) {
                Ok(s) => s,
                Err(_) => return false,
            };
        }
    }

    /// Wait (up to `patience`) for `expected` threads, then let them go; if they do not all
    /// arrive, abandon the start. Returns whether they went.
    pub fn open_when(&self, expected: usize, patience: Duration) -> bool {
        let deadline = Instant::now() + patience;
        let Ok(mut state) = self.state.lock() else { return false };
        while state.arrived < expected && Instant::now() < deadline {
            state = match self
                .changed
                .wait_timeout(state, deadline.saturating_duration_since(Instant::now()))
            {
                Ok((s, _)) => s,
                Err(_) => return false,
            };
        }
        let go = state.arrived >= expected;
        state.open = Some(go);
        self.changed.notify_all();
        go
    }

    /// Release every waiting thread with "abandoned".
    pub fn abandon(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.open = Some(false);
            self.changed.notify_all();
        }
    }
}
