//! The servers' use of the measured window (measure/window.rs): the load generator opens and
//! closes it; each server thread (started by a model, so it hands back nothing when joined)
//! leaves its counters' sample here when its view closes.

use crate::measure::counters::{kernel_policy, CounterSample, KernelPolicy, ThreadCounters};
use crate::measure::window::{self, SystemProbes, View};
use crate::observation::Metric;
use std::sync::Mutex;
use std::time::Duration;

pub struct Window {
    window: window::Window,
    /// Open perf counters on server threads (false: getrusage only, no per-switch cost).
    perf: bool,
    policy: KernelPolicy,
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
            window: window::Window::new(),
            perf,
            policy: kernel_policy(),
            samples: Mutex::new(Vec::new()),
            client_samples: Mutex::new(Vec::new()),
        }
    }

    /// Open the window (system-wide probes first).
    pub fn begin(&self, system: &mut SystemProbes) {
        self.window.open(system);
    }

    /// Close the window; returns the system-wide probes' metrics.
    pub fn end(&self, system: &mut SystemProbes) -> Vec<Metric> {
        self.window.close(system)
    }

    #[inline]
    pub fn measuring(&self) -> bool {
        self.window.is_open()
    }

    pub fn policy(&self) -> &KernelPolicy {
        &self.policy
    }

    /// After `end()`: wait (bounded) until every server thread has stopped its counters, then
    /// return the samples collected and how many threads were late. Threads notice within one
    /// wait tick (about 100 ms).
    pub fn collect(&self, patience: Duration) -> (Vec<CounterSample>, usize) {
        let late = self.window.wait_views_closed(patience);
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
    /// None: a server started without a window (`procs serve`), which measures nothing.
    view: Option<View<'a, ThreadCounters>>,
}

impl<'a> ThreadWindow<'a> {
    pub fn new(window: Option<&'a Window>) -> ThreadWindow<'a> {
        let view = window.map(|w| {
            let counters = window::thread_counters(w.perf, w.policy());
            View::delivering_to(&w.window, counters, &w.samples)
        });
        let mut tw = ThreadWindow { view };
        tw.tick();
        tw
    }

    /// A load-generator thread's view: getrusage only, samples kept apart from the server's.
    pub fn client(window: &'a Window) -> ThreadWindow<'a> {
        let counters = ThreadCounters::rusage_only(LOAD_GENERATOR_RUSAGE_ONLY);
        let mut tw = ThreadWindow {
            view: Some(View::delivering_to(&window.window, counters, &window.client_samples)),
        };
        tw.tick();
        tw
    }

    #[inline]
    pub fn tick(&mut self) {
        if let Some(view) = self.view.as_mut() {
            view.tick();
        }
    }

    /// Stop the counters if they run and hand the sample to the window.
    pub fn finish(&mut self) {
        if let Some(view) = self.view.as_mut() {
            view.finish();
        }
    }
}

impl Drop for ThreadWindow<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}
