//! The servers' use of the measured window (measure/window.rs): the load generator opens and
//! closes it; each server thread (started by a model, so it hands back nothing when joined)
//! leaves its counters' sample here when its view closes, with where it ran.

use crate::measure::counters::{kernel_policy, CounterSample, KernelPolicy, ThreadCounters};
use crate::measure::window::{self, Probe, SystemProbes, View};
use crate::observation::{Metric, Role, ThreadPlacement};
use crate::sys::affinity;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// What one thread leaves when its view closes: its counters and where it ran.
type Placed = (CounterSample, ThreadPlacement);

pub struct Window {
    window: window::Window,
    /// Open perf counters on server threads (false: getrusage only, no per-switch cost).
    perf: bool,
    policy: KernelPolicy,
    samples: Mutex<Vec<Placed>>,
    /// Load-generator threads (getrusage only, so the client's latency is not disturbed).
    client_samples: Mutex<Vec<Placed>>,
    /// Index of the next thread of each side to open its view.
    next_server: AtomicUsize,
    next_client: AtomicUsize,
}

/// CPU migrations of the calling thread so far (scheduler statistics), when the kernel has them.
fn thread_migrations() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
    let line = text.lines().find(|l| l.starts_with("se.nr_migrations"))?;
    line.rsplit(':').next()?.trim().parse().ok()
}

/// The thread counters plus where the thread ran at the window's edges: sched_getcpu (and, when
/// perf has no migration count, /proc/thread-self/sched) read at the two edges only, never in
/// the hot path.
struct PlacedCounters<'a> {
    counters: ThreadCounters,
    role: Role,
    next_index: &'a AtomicUsize,
    pinned: Option<Vec<usize>>,
    start: Option<(usize, Option<usize>, Option<u64>)>,
}

impl Probe for PlacedCounters<'_> {
    type Sample = Placed;
    fn open(&mut self) {
        let index = self.next_index.fetch_add(1, Ordering::Relaxed);
        self.start = Some((index, affinity::current_cpu(), thread_migrations()));
        self.counters.start();
    }
    fn close(&mut self) -> Placed {
        let sample = self.counters.stop();
        let cpu_at_end = affinity::current_cpu();
        let (index, cpu_at_start, migrations_before) = self.start.take().unwrap_or((0, None, None));
        let migrations = match &sample.cpu_migrations {
            Ok(n) => Some(*n),
            Err(_) => migrations_before.and_then(|before| Some(thread_migrations()?.saturating_sub(before))),
        };
        let placement = ThreadPlacement {
            role: self.role,
            index,
            pinned: self.pinned.clone(),
            cpu_at_start,
            cpu_at_end,
            migrations,
        };
        (sample, placement)
    }
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
            next_server: AtomicUsize::new(0),
            next_client: AtomicUsize::new(0),
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
    /// return the samples collected, where those threads ran, and how many threads were late.
    /// Threads notice within one wait tick (about 100 ms).
    pub fn collect(&self, patience: Duration) -> (Vec<CounterSample>, Vec<ThreadPlacement>, usize) {
        let late = self.window.wait_views_closed(patience);
        let (samples, placement) = split(&self.samples);
        (samples, placement, late)
    }

    /// The load-generator threads' samples and placement (all joined before this is called).
    pub fn client_samples(&self) -> (Vec<CounterSample>, Vec<ThreadPlacement>) {
        split(&self.client_samples)
    }
}

fn split(list: &Mutex<Vec<Placed>>) -> (Vec<CounterSample>, Vec<ThreadPlacement>) {
    let mut list = list.lock().map(|s| s.clone()).unwrap_or_default();
    list.sort_by_key(|(_, p)| p.index);
    list.into_iter().unzip()
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
    view: Option<View<'a, PlacedCounters<'a>>>,
}

impl<'a> ThreadWindow<'a> {
    /// A server thread's view; `pinned` is the CPU list it was pinned to, if any.
    pub fn new(window: Option<&'a Window>, pinned: Option<&[usize]>) -> ThreadWindow<'a> {
        let view = window.map(|w| {
            let probe = PlacedCounters {
                counters: window::thread_counters(w.perf, w.policy()),
                role: Role::Server,
                next_index: &w.next_server,
                pinned: pinned.map(<[usize]>::to_vec),
                start: None,
            };
            View::delivering_to(&w.window, probe, &w.samples)
        });
        let mut tw = ThreadWindow { view };
        tw.tick();
        tw
    }

    /// A load-generator thread's view: getrusage only, samples kept apart from the server's.
    pub fn client(window: &'a Window, pinned: Option<&[usize]>) -> ThreadWindow<'a> {
        let probe = PlacedCounters {
            counters: ThreadCounters::rusage_only(LOAD_GENERATOR_RUSAGE_ONLY),
            role: Role::Client,
            next_index: &window.next_client,
            pinned: pinned.map(<[usize]>::to_vec),
            start: None,
        };
        let mut tw = ThreadWindow {
            view: Some(View::delivering_to(&window.window, probe, &window.client_samples)),
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
