//! The measured window shared by the load generator and the server threads: the generator
//! opens and closes it; each server thread turns its own counters on and off as it notices.

use crate::measure::counters::{kernel_policy, CounterSample, KernelPolicy, ThreadCounters, PERF_OFF};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const WARMUP: u8 = 0;
const MEASURING: u8 = 1;
const DONE: u8 = 2;

pub struct Window {
    phase: AtomicU8,
    /// Open perf counters on server threads (false: getrusage only, no per-switch cost).
    perf: bool,
    policy: KernelPolicy,
    /// Server threads whose counters are running.
    running: AtomicUsize,
    samples: Mutex<Vec<CounterSample>>,
    /// Load-generator threads (getrusage only, so the client's latency is not disturbed).
    client_samples: Mutex<Vec<CounterSample>>,
}

/// Why the load generator's perf metrics are missing: it is measured with getrusage only.
pub const LOAD_GENERATOR_RUSAGE_ONLY: &str = "load generator measured with getrusage only (keeps its latency clean)";

impl Window {
    /// A window whose server threads open perf counters when `perf` is set; without, they
    /// measure getrusage only (a perf event on a thread costs time at every context switch).
    pub fn new(perf: bool) -> Window {
        Window {
            perf,
            phase: AtomicU8::new(WARMUP),
            policy: kernel_policy(),
            running: AtomicUsize::new(0),
            samples: Mutex::new(Vec::new()),
            client_samples: Mutex::new(Vec::new()),
        }
    }

    pub fn begin(&self) {
        self.phase.store(MEASURING, Ordering::SeqCst);
    }

    pub fn end(&self) {
        self.phase.store(DONE, Ordering::SeqCst);
    }

    pub fn measuring(&self) -> bool {
        self.phase.load(Ordering::Relaxed) == MEASURING
    }

    pub fn policy(&self) -> &KernelPolicy {
        &self.policy
    }

    /// After `end()`: wait (bounded) until every server thread has stopped its counters, then
    /// return the samples collected. Threads notice within one wait tick (about 100 ms).
    pub fn collect(&self, patience: Duration) -> (Vec<CounterSample>, usize) {
        let deadline = Instant::now() + patience;
        while self.running.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let late = self.running.load(Ordering::SeqCst);
        let samples = self.samples.lock().map(|s| s.clone()).unwrap_or_default();
        (samples, late)
    }

    /// The load-generator threads' samples (all joined before this is called).
    pub fn client_samples(&self) -> Vec<CounterSample> {
        self.client_samples.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Default for Window {
    fn default() -> Self {
        Window::new(true)
    }
}

/// One server thread's view of the window: call `tick()` in its loop (between requests and
/// on every wait timeout) and `finish()` before it exits.
pub struct ThreadWindow<'a> {
    window: Option<&'a Window>,
    counters: Option<ThreadCounters>,
    running: bool,
    done: bool,
    client: bool,
}

impl<'a> ThreadWindow<'a> {
    pub fn new(window: Option<&'a Window>) -> ThreadWindow<'a> {
        let counters = window.map(|w| {
            if w.perf {
                ThreadCounters::open(w.policy())
            } else {
                ThreadCounters::rusage_only(PERF_OFF)
            }
        });
        let mut tw = ThreadWindow {
            window,
            counters,
            running: false,
            done: false,
            client: false,
        };
        tw.tick();
        tw
    }

    /// A load-generator thread's view: getrusage only, samples kept apart from the server's.
    pub fn client(window: &'a Window) -> ThreadWindow<'a> {
        let mut tw = ThreadWindow {
            window: Some(window),
            counters: Some(ThreadCounters::rusage_only(LOAD_GENERATOR_RUSAGE_ONLY)),
            running: false,
            done: false,
            client: true,
        };
        tw.tick();
        tw
    }

    #[inline]
    pub fn tick(&mut self) {
        let Some(window) = self.window else { return };
        if self.done {
            return;
        }
        match window.phase.load(Ordering::Relaxed) {
            MEASURING if !self.running => {
                window.running.fetch_add(1, Ordering::SeqCst);
                if let Some(c) = self.counters.as_mut() {
                    c.start();
                }
                self.running = true;
            }
            DONE => self.finish(),
            _ => {}
        }
    }

    /// Stop the counters if they run and hand the sample to the window.
    pub fn finish(&mut self) {
        let Some(window) = self.window else { return };
        if self.done {
            return;
        }
        self.done = true;
        if self.running {
            if let Some(c) = self.counters.as_mut() {
                let sample = c.stop();
                let list = if self.client {
                    &window.client_samples
                } else {
                    &window.samples
                };
                if let Ok(mut s) = list.lock() {
                    s.push(sample);
                }
            }
            window.running.fetch_sub(1, Ordering::SeqCst);
            self.running = false;
        }
    }
}

impl Drop for ThreadWindow<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}
