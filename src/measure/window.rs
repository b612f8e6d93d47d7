//! The measured window, implemented once for every workload: a coordinator opens and closes
//! it; each measured thread holds a [`View`] that opens and closes the thread's own
//! [`Probe`] when it notices (one relaxed atomic load per loop iteration, nothing more), and
//! the coordinator opens and closes the system-wide probes ([`SystemProbes`]) itself.

use crate::measure::counters::{CounterSample, KernelPolicy, ThreadCounters, PERF_OFF};
use crate::observation::Metric;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A source of metrics that opens when the measured window opens and closes with it,
/// handing back what it measured (with the source of each number).
pub trait Probe {
    /// What one open..close measured.
    type Sample;
    /// The window begins: start counting.
    fn open(&mut self);
    /// The window ends: stop counting and say what was counted.
    fn close(&mut self) -> Self::Sample;
    /// A system probe that counts per thread is told where the window keeps its threads'
    /// kernel ids (each added as its `View` opens), before the window opens.
    fn threads(&mut self, _tids: Arc<Mutex<Vec<u32>>>) {}
}

/// The per-thread counters (perf groups + getrusage) are the probe every measured thread has.
impl Probe for ThreadCounters {
    type Sample = CounterSample;
    fn open(&mut self) {
        self.start();
    }
    fn close(&mut self) -> CounterSample {
        self.stop()
    }
}

/// The counters a measured thread opens: perf groups and rusage, or rusage only when perf is
/// off for the run (a perf event costs time at every context switch of its thread).
pub fn thread_counters(perf: bool, policy: &KernelPolicy) -> ThreadCounters {
    if perf {
        ThreadCounters::open(policy)
    } else {
        ThreadCounters::rusage_only(PERF_OFF)
    }
}

/// A probe of the whole machine (TCP counters, pressure, uncore memory counters): opened and
/// closed by the coordinator, not by each thread; its sample is finished, sourced metrics.
pub trait SystemProbe: Probe<Sample = Vec<Metric>> + Send {}
impl<P: Probe<Sample = Vec<Metric>> + Send> SystemProbe for P {}

/// The system-wide probes of one window, opened just before the threads' window opens and
/// closed just after it closes, so they cover it.
#[derive(Default)]
pub struct SystemProbes {
    probes: Vec<Box<dyn SystemProbe>>,
}

impl SystemProbes {
    pub fn push(&mut self, probe: Box<dyn SystemProbe>) {
        self.probes.push(probe);
    }

    fn open(&mut self, threads: &Arc<Mutex<Vec<u32>>>) {
        for p in &mut self.probes {
            p.threads(threads.clone());
            p.open();
        }
    }

    fn close(&mut self) -> Vec<Metric> {
        self.probes.iter_mut().flat_map(|p| p.close()).collect()
    }
}

/// Where a window stands. Only ever moves forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Before the window: threads run but count nothing.
    Warmup = 0,
    /// Inside the window.
    Measure = 1,
    /// After the window (also after a stop or a failure).
    Done = 2,
    /// After the window, and the run was cut short (a stop, a server's budget): threads that
    /// would drain their peer leave at once instead.
    Abandoned = 3,
}

/// The window all threads of one end share. The coordinator calls [`Window::open`] and
/// [`Window::close`]; threads watch it through their [`View`].
pub struct Window {
    phase: AtomicU8,
    /// Views whose probe is open right now, so the coordinator can wait for them to close.
    open_views: AtomicUsize,
    /// The kernel ids of the threads whose view opened: the window's own threads, whose
    /// share of a system-wide count a probe reports (`measure/trace.rs`).
    threads: Arc<Mutex<Vec<u32>>>,
}

impl Default for Window {
    fn default() -> Self {
        Window::new()
    }
}

impl Window {
    pub fn new() -> Window {
        Window {
            phase: AtomicU8::new(Phase::Warmup as u8),
            open_views: AtomicUsize::new(0),
            threads: Arc::default(),
        }
    }

    /// Open the window: system probes first, then the threads (they notice on their next tick).
    pub fn open(&self, system: &mut SystemProbes) {
        system.open(&self.threads);
        self.phase.store(Phase::Measure as u8, Ordering::SeqCst);
    }

    /// Close the window: threads first, then the system probes; returns their metrics.
    /// Closing a window that never opened is allowed (a stop or failure in warm-up).
    pub fn close(&self, system: &mut SystemProbes) -> Vec<Metric> {
        let was = self.phase.swap(Phase::Done as u8, Ordering::SeqCst);
        if was == Phase::Measure as u8 {
            system.close()
        } else {
            Vec::new()
        }
    }

    /// Close the window, telling the threads the run was cut short: a receiver leaves at its
    /// next message instead of reading until its peer closes.
    pub fn abandon(&self, system: &mut SystemProbes) {
        self.close(system);
        self.phase.store(Phase::Abandoned as u8, Ordering::SeqCst);
    }

    /// The phase now (a relaxed load: cheap enough for every loop iteration).
    #[inline]
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::Warmup,
            1 => Phase::Measure,
            2 => Phase::Done,
            _ => Phase::Abandoned,
        }
    }

    /// Whether the window is open now.
    #[inline]
    pub fn is_open(&self) -> bool {
        self.phase() == Phase::Measure
    }

    /// Whether the window has closed (or was abandoned before or after it opened).
    #[inline]
    pub fn ended(&self) -> bool {
        matches!(self.phase(), Phase::Done | Phase::Abandoned)
    }

    /// After [`Window::close`]: wait (up to `patience`) until every view has closed its probe.
    /// Returns how many had not.
    pub fn wait_views_closed(&self, patience: Duration) -> usize {
        let deadline = Instant::now() + patience;
        while self.open_views.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.open_views.load(Ordering::SeqCst)
    }
}

/// What one view measured between its window's edges.
#[derive(Debug, Clone)]
pub struct Measured<S> {
    /// How long the thread's window was open (from the tick that saw it open to the tick
    /// that saw it close).
    pub elapsed: Duration,
    pub sample: S,
}

/// A window edge a thread has just crossed on a tick, for counts it keeps itself (messages,
/// system calls) and must snapshot at the same moments as its probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    None,
    Opened,
    Closed,
}

enum State<S> {
    Waiting,
    Open(Instant),
    /// Closed; `None` when the thread never saw the window open (it looked only after).
    Closed(Option<Measured<S>>),
}

/// One thread's view of a window, owning that thread's probe. Call [`View::tick`] in the
/// loop; the probe opens on the first tick that sees the window open and closes on the first
/// tick that sees it closed (or at [`View::finish`], when the thread stops early).
pub struct View<'w, P: Probe> {
    window: &'w Window,
    probe: P,
    state: State<P::Sample>,
    /// Where the sample goes when the view closes, for threads nobody joins for a result
    /// (a server model's threads); None keeps it for [`View::take`].
    sink: Option<&'w Mutex<Vec<P::Sample>>>,
}

impl<'w, P: Probe> View<'w, P> {
    pub fn new(window: &'w Window, probe: P) -> View<'w, P> {
        View {
            window,
            probe,
            state: State::Waiting,
            sink: None,
        }
    }

    /// A view that leaves its sample in `sink` when it closes, before the coordinator can
    /// see it closed: after [`Window::wait_views_closed`], every sample is in its sink.
    pub fn delivering_to(window: &'w Window, probe: P, sink: &'w Mutex<Vec<P::Sample>>) -> View<'w, P> {
        View {
            window,
            probe,
            state: State::Waiting,
            sink: Some(sink),
        }
    }

    /// Look at the window once and follow it.
    #[inline]
    pub fn tick(&mut self) -> Edge {
        match (&self.state, self.window.phase()) {
            (State::Waiting, Phase::Measure) => {
                self.window.open_views.fetch_add(1, Ordering::SeqCst);
                if let Ok(mut tids) = self.window.threads.lock() {
                    tids.push(crate::sys::tracepoint::current_tid());
                }
                self.probe.open();
                self.state = State::Open(Instant::now());
                Edge::Opened
            }
            (State::Waiting, Phase::Done | Phase::Abandoned) => {
                self.state = State::Closed(None);
                Edge::None
            }
            (State::Open(_), Phase::Done | Phase::Abandoned) => {
                self.finish();
                Edge::Closed
            }
            _ => Edge::None,
        }
    }

    /// Whether this view has seen the window close (or was finished).
    #[inline]
    pub fn closed(&self) -> bool {
        matches!(self.state, State::Closed(_))
    }

    /// Whether the run was cut short ([`Window::abandon`]).
    pub fn abandoned(&self) -> bool {
        self.window.phase() == Phase::Abandoned
    }

    /// Whether this view's probe is open.
    pub fn is_open(&self) -> bool {
        matches!(self.state, State::Open(_))
    }

    /// Close the probe now if it is open (the thread is leaving: its peer closed, or it
    /// failed); afterwards the view ignores the window.
    pub fn finish(&mut self) {
        self.state = match std::mem::replace(&mut self.state, State::Closed(None)) {
            State::Open(started) => {
                let sample = self.probe.close();
                let elapsed = started.elapsed();
                let kept = match self.sink {
                    Some(sink) => {
                        if let Ok(mut list) = sink.lock() {
                            list.push(sample);
                        }
                        None
                    }
                    None => Some(Measured { elapsed, sample }),
                };
                self.window.open_views.fetch_sub(1, Ordering::SeqCst);
                State::Closed(kept)
            }
            State::Waiting => State::Closed(None),
            closed @ State::Closed(_) => closed,
        };
    }

    /// What was measured (finishing first); None when the thread never saw the window open
    /// or the sample went to a sink.
    pub fn take(&mut self) -> Option<Measured<P::Sample>> {
        self.finish();
        match std::mem::replace(&mut self.state, State::Closed(None)) {
            State::Closed(m) => m,
            _ => None,
        }
    }
}

impl<P: Probe> Drop for View<'_, P> {
    fn drop(&mut self) {
        // Never leave the coordinator waiting for a view that is gone.
        if let State::Open(_) = self.state {
            self.window.open_views.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts opens and closes; its sample is the number of the close.
    #[derive(Default)]
    struct Tally {
        opened: u32,
        closed: u32,
    }

    impl Probe for Tally {
        type Sample = u32;
        fn open(&mut self) {
            self.opened += 1;
        }
        fn close(&mut self) -> u32 {
            self.closed += 1;
            self.closed
        }
    }

    struct Machine(Vec<Metric>);
    impl Probe for Machine {
        type Sample = Vec<Metric>;
        fn open(&mut self) {}
        fn close(&mut self) -> Vec<Metric> {
            std::mem::take(&mut self.0)
        }
    }

    #[test]
    fn a_view_opens_and_closes_its_probe_once_with_the_window() {
        let window = Window::new();
        let mut system = SystemProbes::default();
        let mut view = View::new(&window, Tally::default());
        assert_eq!(view.tick(), Edge::None);
        window.open(&mut system);
        assert_eq!(view.tick(), Edge::Opened);
        assert_eq!(view.tick(), Edge::None);
        assert_eq!(window.wait_views_closed(Duration::ZERO), 1);
        assert!(window.close(&mut system).is_empty());
        assert_eq!(view.tick(), Edge::Closed);
        assert!(view.closed());
        assert_eq!(view.tick(), Edge::None);
        assert_eq!(window.wait_views_closed(Duration::ZERO), 0);
        let m = view.take().expect("the view saw the window");
        assert_eq!(m.sample, 1);
        assert_eq!((view.probe.opened, view.probe.closed), (1, 1));
    }

    #[test]
    fn a_view_that_looks_only_after_the_window_measured_nothing() {
        let window = Window::new();
        let mut system = SystemProbes::default();
        let mut view = View::new(&window, Tally::default());
        window.open(&mut system);
        window.close(&mut system);
        assert_eq!(view.tick(), Edge::None);
        assert!(view.closed());
        assert!(view.take().is_none());
        assert_eq!(view.probe.opened, 0);
    }

    #[test]
    fn system_probes_report_only_for_a_window_that_opened() {
        let window = Window::new();
        let mut system = SystemProbes::default();
        system.push(Box::new(Machine(vec![Metric::tool(
            "x",
            crate::observation::Role::System,
            1.0,
            "u",
        )])));
        assert_eq!(window.close(&mut system).len(), 0, "closed in warm-up");
        let window = Window::new();
        window.open(&mut system);
        assert_eq!(window.close(&mut system).len(), 1);
    }

    #[test]
    fn a_delivering_view_leaves_its_sample_before_it_counts_as_closed() {
        let window = Window::new();
        let sink = Mutex::new(Vec::new());
        let mut view = View::delivering_to(&window, Tally::default(), &sink);
        window.open(&mut SystemProbes::default());
        view.tick();
        window.close(&mut SystemProbes::default());
        assert_eq!(view.tick(), Edge::Closed);
        assert_eq!(window.wait_views_closed(Duration::ZERO), 0);
        assert_eq!(*sink.lock().unwrap(), vec![1]);
        assert!(view.take().is_none());
    }

    #[test]
    fn dropping_an_open_view_releases_the_coordinator() {
        let window = Window::new();
        window.open(&mut SystemProbes::default());
        {
            let mut view = View::new(&window, Tally::default());
            view.tick();
        }
        assert_eq!(window.wait_views_closed(Duration::ZERO), 0);
    }
}
