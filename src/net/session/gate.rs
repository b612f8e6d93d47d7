//! Where a side's threads meet before the measured run starts.

use std::io;
use std::sync::{Condvar, Mutex};
use std::thread::ScopedJoinHandle;
use std::time::{Duration, Instant};

/// How long threads may take to become ready (pin, open counters) before the run is abandoned.
pub(crate) const START_PATIENCE: Duration = Duration::from_secs(30);

/// A side's threads as they were spawned: each the handle of a thread that started, or why it
/// could not.
pub(crate) type Handles<'scope, T> = Vec<io::Result<ScopedJoinHandle<'scope, io::Result<T>>>>;

/// Whether every one of a side's threads started and became ready within `START_PATIENCE`
/// (the gate opens); if not, the start is abandoned and whoever did start is released.
pub(crate) fn all_ready<T>(ready: &StartGate, handles: &[io::Result<T>]) -> bool {
    let started = handles.iter().filter(|h| h.is_ok()).count();
    if started == handles.len() && ready.open_when(started, START_PATIENCE) {
        true
    } else {
        ready.abandon();
        false
    }
}

/// Join every thread of a side; one that could not start or panicked (`panicked` says so) is
/// an error.
pub(crate) fn join_all<T>(handles: Handles<'_, T>, panicked: &str) -> Vec<io::Result<T>> {
    handles
        .into_iter()
        .map(|h| match h {
            Ok(h) => h.join().unwrap_or_else(|_| Err(io::Error::other(panicked.to_string()))),
            Err(e) => Err(e),
        })
        .collect()
}

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

    /// [`StartGate::open_when`] that gives up at once when the start is abandoned meanwhile
    /// or `quit` says so (looked at every 20 ms).
    pub fn open_watching(&self, expected: usize, patience: Duration, quit: &dyn Fn() -> bool) -> bool {
        let deadline = Instant::now() + patience;
        let Ok(mut state) = self.state.lock() else { return false };
        while state.arrived < expected && state.open.is_none() && !quit() && Instant::now() < deadline {
            let slice = deadline
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(20));
            state = match self.changed.wait_timeout(state, slice) {
                Ok((s, _)) => s,
                Err(_) => return false,
            };
        }
        let go = state.arrived >= expected && state.open.is_none();
        if state.open.is_none() {
            state.open = Some(go);
        }
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
