//! The server half of a network session, written once (the client half is `coordinator.rs`):
//! a workload's server is a [`ServedWorkload`], which says only what differs — its hello, its
//! check, how it sets up (refusals, data port, `ready`, data connections), its thread bodies
//! and its report. This file runs them: spawns a thread per part, follows the client's phase
//! messages (`measure`, `done`, `finished`, `sent`) with the system probes of a served window,
//! watches the byte budget (`--max-session-bytes`) and a stop, wakes the threads at the end,
//! and sends the report or the failure (`send_outcome`).

use super::data::{budget_error, over_budget, send_outcome, MovedBytes};
use super::gate::all_ready;
use super::loops::{bulk, Bulk, Moved};
use super::meter::{Ctx, Meter, ServerShared};
use super::server::{wrong_hello, Session};
use crate::case::NetParams;
use crate::measure::trace::RxCopies;
use crate::measure::window::{SystemProbes, Window};
use crate::net::control::{parse_envelope, Control, ControlChannel, HelloError, ServerReport};
use crate::observation::{Metric, Role, Unsupported};
use crate::stop::Interrupted;
use anyhow::anyhow;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::any::Any;
use std::io;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A workload's server side as the session server knows it: the hello kinds it answers (a
/// hello's `workload`), how it decodes such a hello, the check of a hello's case it must pass
/// before anything is allocated, and the function that runs one of its sessions once the hello
/// has been read (and the key checked). A network workload's entry is [`entry`] of its
/// [`ServedWorkload`]; `net serve`'s list is `registry::NET_SERVE`.
#[derive(Clone, Copy)]
pub struct Served {
    pub hellos: &'static [&'static str],
    pub decode: DecodeFn,
    /// The case's limits and the memory this server would hold for it, against the headroom
    /// (`sys::procfs::memory_headroom`: MemAvailable and the memory cgroup). The session
    /// server runs it for every hello before the session function, so no workload serves a
    /// case it has not sized; a refusal is sent as `Limits`.
    pub check: CheckFn,
    pub serve: SessionFn,
    /// Whether its session claims the server's one session as the hello arrives (every
    /// workload; not an agent hello, which claims it through `Session::wait_turn`, if at all).
    pub claims: bool,
}

/// A [`Served`] entry's decoding of a hello line naming one of its kinds (the envelope has
/// been checked): the hello, or what is wrong with it.
pub type DecodeFn = fn(&'static str, &[u8]) -> Result<Hello, String>;

/// A [`Served`] entry's check of a hello's case with this server's memory headroom (None:
/// unknown); a hello of a kind the entry does not serve passes (its session refuses it).
pub type CheckFn = fn(&Hello, Option<u64>) -> Result<(), String>;

/// Run one session on its control connection: check the case (refusing with
/// [`refuse`](super::handshake::refuse) before `ready`), answer `ready`, serve, report. A
/// hello of a kind the entry does not serve is refused with [`wrong_hello`].
pub type SessionFn = fn(ControlChannel, Hello, &Session<'_>) -> anyhow::Result<()>;

/// A hello as the entry serving its workload decoded it: the workload it names, the session
/// it asks for (warm-up + window: what `--max-session` limits) and its case.
pub struct Hello {
    workload: &'static str,
    session_ms: u64,
    case: Box<dyn Any + Send>,
}

impl Hello {
    pub fn new<C: Any + Send>(workload: &'static str, session_ms: u64, case: C) -> Hello {
        Hello {
            workload,
            session_ms,
            case: Box::new(case),
        }
    }

    /// The workload the hello names, as `net serve` logs it.
    pub fn workload(&self) -> &'static str {
        self.workload
    }

    /// Warm-up + window (0: none named; an agent checks its run request's).
    pub fn session_ms(&self) -> u64 {
        self.session_ms
    }

    /// The case, when it is a `C`.
    pub fn case<C: Any>(&self) -> Option<&C> {
        self.case.downcast_ref()
    }

    /// The case, when it is a `C`; else the hello back.
    pub fn into_case<C: Any>(self) -> Result<C, Hello> {
        let Hello {
            workload,
            session_ms,
            case,
        } = self;
        case.downcast().map(|c| *c).map_err(|case| Hello {
            workload,
            session_ms,
            case,
        })
    }
}

/// Read a client's first control line as a hello of one of the workloads in `served`: the
/// envelope (type, version) checked first (`control::parse_envelope`), then the entry that
/// serves the workload it names (absent: `stream`) decodes the rest.
pub fn decode_hello(line: &[u8], served: &[Served]) -> Result<Hello, HelloError> {
    let named = parse_envelope(line)?;
    let name = match &named {
        None => Some("stream"),
        Some(value) => value.as_str(),
    };
    let found = served
        .iter()
        .find_map(|entry| entry.hellos.iter().find(|h| Some(**h) == name).map(|h| (entry, *h)));
    let Some((entry, workload)) = found else {
        return Err(HelloError::Malformed(format!(
            "unknown workload {} (this server serves {})",
            named.unwrap_or_else(|| serde_json::Value::from("stream")),
            served_kinds(served)
        )));
    };
    (entry.decode)(workload, line).map_err(HelloError::Malformed)
}

/// The hello kinds `served` serves, as a refusal lists them.
pub fn served_kinds(served: &[Served]) -> String {
    let kinds: Vec<&str> = served.iter().flat_map(|s| s.hellos.iter().copied()).collect();
    kinds.join(", ")
}

/// A hello that is the whole line (the UDP workloads': the case and the client's ports), decoded
/// (`bad <workload> hello: …` when not).
pub(crate) fn whole_hello<H: DeserializeOwned>(workload: &str, line: &[u8]) -> Result<H, String> {
    serde_json::from_slice(line).map_err(|e| format!("bad {workload} hello: {e}"))
}

/// A hello whose case is its `case` field, decoded (`bad <workload> hello: …` when not).
fn case_of<C: DeserializeOwned>(workload: &str, line: &[u8]) -> Result<C, String> {
    #[derive(Deserialize)]
    struct WithCase<C> {
        case: C,
    }
    serde_json::from_slice::<WithCase<C>>(line)
        .map(|hello| hello.case)
        .map_err(|e| format!("bad {workload} hello: {e}"))
}

/// How long a served session may follow its client past warm-up + window.
const FOLLOW_SLACK: Duration = Duration::from_secs(30);

/// Which phase message ends following the client.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// `done` (or `finished`): the window is all the session is.
    Done,
    /// `finished`: the client's threads are done (crr's server threads accept until then).
    Finished,
    /// `sent`: the client's counts of what it sent (a UDP stream's loss is reckoned on them).
    Sent,
}

/// How a session's bytes are counted against the byte budget.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Budget {
    /// The serving threads count what they move ([`ServedThread::count`]).
    Counted,
    /// The kernel's count of the session's TCP connections (TCP_INFO), read between polls.
    Kernel,
}

/// A network workload's server side: what differs from one served session to another.
/// `prepare` runs on the session's control connection once the hello was read and checked;
/// `serve_thread` runs once per part it returned, on a thread of its own; `report` gets what
/// they counted once the client's window has been followed.
pub(crate) trait ServedWorkload: 'static {
    /// The case a hello brings.
    type Hello: DeserializeOwned + Send + Sync + 'static;
    /// What the session sets up before its threads run and they share (sockets, a table).
    type State: Sync;
    /// What one thread owns (its sender, its receiver), handed to it as it starts.
    type Part: Send;
    /// What one thread counted.
    type Outcome: Send;
    /// The hello kinds (`workload`) it serves.
    const HELLOS: &'static [&'static str];
    /// Its threads' names, before `-<index>`.
    const THREAD: &'static str;
    /// The phase message that ends following the client.
    const UNTIL: Until = Until::Done;
    const BUDGET: Budget = Budget::Counted;
    /// Whether the transport's receive copies pass the trace probe's tracepoint.
    const RX_COPIES: RxCopies = RxCopies::Traced;

    /// The hello of a line naming `workload`, one of `HELLOS` (its envelope checked): by
    /// default the line's `case` field.
    fn decode(workload: &'static str, line: &[u8]) -> Result<Self::Hello, String> {
        case_of(workload, line)
    }
    fn net(hello: &Self::Hello) -> &NetParams;
    /// The case's limits and the memory this server would hold for it, against `headroom`.
    fn check(hello: &Self::Hello, headroom: Option<u64>) -> Result<(), String>;
    /// Refuse what this server cannot run (before `ready`), say `ready`, take the data
    /// connections: the session's state and one part per thread.
    fn prepare(hello: &Self::Hello, control: &mut ControlChannel, session: &Session<'_>) -> Prepared<Self>;
    /// The session's TCP data connections: shut down when the session ends early, and
    /// counted by the kernel under [`Budget::Kernel`].
    fn streams(_state: &Self::State) -> &[TcpStream] {
        &[]
    }
    /// System probes of its own, beside those of every served window.
    fn push_probes(_system: &mut SystemProbes) {}
    fn serve_thread(
        hello: &Self::Hello,
        state: &Self::State,
        part: Self::Part,
        thread: &ServedThread<'_>,
    ) -> anyhow::Result<Self::Outcome>;
    /// Wake threads blocked where the end flags do not reach (crr's accept).
    fn wake(_state: &Self::State) {}
    fn report(
        hello: &Self::Hello,
        state: Self::State,
        threads: Vec<Self::Outcome>,
        followed: Followed,
    ) -> anyhow::Result<ServerReport>;
}

/// What [`ServedWorkload::prepare`] makes: the session's state and one part per thread.
pub(crate) type Prepared<W> = anyhow::Result<(<W as ServedWorkload>::State, Vec<<W as ServedWorkload>::Part>)>;

/// The [`Served`] entry of a workload's server, for `net serve`'s list and the in-process
/// server.
pub(crate) const fn entry<W: ServedWorkload>() -> Served {
    Served {
        hellos: W::HELLOS,
        decode: decode::<W>,
        check: check::<W>,
        serve: serve::<W>,
        claims: true,
    }
}

fn decode<W: ServedWorkload>(workload: &'static str, line: &[u8]) -> Result<Hello, String> {
    let hello = W::decode(workload, line)?;
    Ok(Hello::new(workload, W::net(&hello).session_ms(), hello))
}

fn check<W: ServedWorkload>(hello: &Hello, headroom: Option<u64>) -> Result<(), String> {
    hello.case::<W::Hello>().map_or(Ok(()), |h| W::check(h, headroom))
}

fn serve<W: ServedWorkload>(mut control: ControlChannel, hello: Hello, session: &Session<'_>) -> anyhow::Result<()> {
    let hello = match hello.into_case::<W::Hello>() {
        Ok(hello) => hello,
        Err(other) => return Err(wrong_hello(control, other.workload())),
    };
    // Limits and memory: checked by the session server before this runs (`check`).
    let (state, parts) = W::prepare(&hello, &mut control, session)?;
    let outcome = run::<W>(&hello, state, parts, &mut control, session);
    send_outcome(&mut control, outcome)
}

/// What a serving thread is given besides its part: its index, what the session's threads
/// share (window, start gate, counter policy) and the session's end flags and byte count.
pub(crate) struct ServedThread<'a> {
    pub index: usize,
    pub shared: &'a ServerShared,
    net: &'a NetParams,
    ends: &'a Ends,
}

impl<'a> ServedThread<'a> {
    /// The metered thread's context (`meter::Meter::start`): pinned to the server CPUs.
    pub fn ctx(&self) -> Ctx<'a> {
        self.shared.ctx(self.net)
    }

    /// The session is over: end now.
    #[inline]
    pub fn quit(&self) -> bool {
        self.ends.quit.load(Ordering::Relaxed)
    }

    /// The client said what it sent (`sent`): drain, then end.
    #[inline]
    pub fn draining(&self) -> bool {
        self.ends.drain.load(Ordering::Relaxed)
    }

    /// Count `bytes` moved against the byte budget (one relaxed add, only under a budget).
    #[inline]
    pub fn count(&self, bytes: u64) {
        self.ends.moved.add(bytes);
    }

    /// This thread as one end of a bulk flow on `stream` (`loops::bulk`): metered, sending
    /// until the session ends or receiving until the client closes, every message counted
    /// against the byte budget. `after_gate` runs once every thread has passed the start gate
    /// (a flow that waits for its client's word to start waits there).
    pub fn bulk(
        &self,
        stream: &TcpStream,
        end: Bulk,
        size: u64,
        after_gate: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<Moved> {
        let meter = Meter::start(&self.ctx(), Role::Server, self.index)?;
        after_gate()?;
        bulk(meter, stream, end, size, &|| self.quit(), &|b| self.count(b))
    }
}

/// What ends a session's threads, and the bytes they counted.
struct Ends {
    quit: AtomicBool,
    drain: AtomicBool,
    moved: MovedBytes,
}

/// How following the client ended.
#[derive(Debug, Default)]
pub(crate) struct Followed {
    /// Every thread started and the client was followed.
    pub started: bool,
    /// The system probes' metrics of the window `done` closed.
    pub system_metrics: Vec<Metric>,
    /// From `measure` to `done` as this end saw it (0 when the window never opened).
    pub window_s: f64,
    /// The window was closed by `done`.
    pub done: bool,
    /// The client's `sent` counts (None: the session ended before them).
    pub sent: Option<Vec<u64>>,
    /// A stop (or the byte budget) ended it.
    pub interrupted: bool,
    /// Why following ended early, when it did.
    pub error: Option<String>,
    /// The TSC's frequency, as calibrated before the session (cycle estimates).
    pub tsc_hz: Option<f64>,
}

/// What a client says after `ready`, every workload's phases in one type: `measure`, `done`,
/// `finished` (rr, crr, udp-rr), `sent` (udp-stream).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Phase {
    Measure,
    Done,
    Finished,
    Sent { datagrams: Vec<u64> },
}

/// Run the serving threads while following the client's phase messages; the report.
fn run<W: ServedWorkload>(
    hello: &W::Hello,
    state: W::State,
    parts: Vec<W::Part>,
    control: &mut ControlChannel,
    session: &Session<'_>,
) -> anyhow::Result<ServerReport> {
    let net = W::net(hello);
    let tsc_hz = crate::measure::clock::tsc_hz();
    let shared = ServerShared::new();
    let ends = Ends {
        quit: AtomicBool::new(false),
        drain: AtomicBool::new(false),
        moved: MovedBytes::new(session.max_bytes),
    };
    let (stopped, max_bytes) = (session.stopped, session.max_bytes);
    let exceeded = std::cell::Cell::new(false);
    let stopped_or_over = || {
        if stopped() {
            return true;
        }
        exceeded.set(match W::BUDGET {
            Budget::Counted => ends.moved.over(),
            Budget::Kernel => over_budget(W::streams(&state), max_bytes),
        });
        exceeded.get()
    };
    let count = parts.len();
    let (outcomes, followed) = std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .into_iter()
            .enumerate()
            .map(|(index, part)| {
                let thread = ServedThread {
                    index,
                    shared: &shared,
                    net,
                    ends: &ends,
                };
                let state = &state;
                std::thread::Builder::new()
                    .name(format!("{}-{index}", W::THREAD))
                    .spawn_scoped(scope, move || W::serve_thread(hello, state, part, &thread))
            })
            .collect();
        let followed = if all_ready(&shared.ready, &handles) {
            let watch = (stopped, &stopped_or_over as &dyn Fn() -> bool);
            follow::<W>(net, &shared.window, W::streams(&state), control, watch)
        } else {
            shared.window.abandon(&mut SystemProbes::default());
            shut(W::streams(&state));
            Followed::default()
        };
        let end = if followed.sent.is_some() {
            &ends.drain
        } else {
            &ends.quit
        };
        end.store(true, Ordering::SeqCst);
        W::wake(&state);
        (join(handles), followed)
    });
    if exceeded.get() {
        return Err(budget_error(max_bytes));
    }
    if followed.interrupted {
        return Err(anyhow::Error::new(Interrupted));
    }
    if !followed.started {
        return Err(anyhow!("could not start all {count} server threads"));
    }
    let threads = outcomes.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    W::report(hello, state, threads, Followed { tsc_hz, ..followed })
}

type Handle<'scope, T> = io::Result<std::thread::ScopedJoinHandle<'scope, anyhow::Result<T>>>;

/// Every serving thread's outcome; one that could not start or panicked is an error.
fn join<T>(handles: Vec<Handle<'_, T>>) -> Vec<anyhow::Result<T>> {
    handles
        .into_iter()
        .map(|h| match h {
            Ok(h) => h
                .join()
                .unwrap_or_else(|_| Err(anyhow!("server: a server thread panicked"))),
            Err(e) => Err(anyhow!("server: could not start a thread: {e}")),
        })
        .collect()
}

fn shut(streams: &[TcpStream]) {
    for s in streams {
        s.shutdown(Shutdown::Both).ok();
    }
}

/// Follow the client: `measure` opens the window, `done` closes it, the workload's last phase
/// ends the session. Anything else (EOF, a timeout, a message out of place, a stop or the
/// budget: `watch` is the stop and the stop-or-budget check) abandons the window and shuts the
/// data connections, so no thread waits.
fn follow<W: ServedWorkload>(
    net: &NetParams,
    window: &Window,
    streams: &[TcpStream],
    control: &mut ControlChannel,
    (stopped, stopped_or_over): (&dyn Fn() -> bool, &dyn Fn() -> bool),
) -> Followed {
    let mut system = super::served_probes(net.perf, W::RX_COPIES);
    W::push_probes(&mut system);
    let deadline = Instant::now() + Duration::from_millis(net.session_ms()) + FOLLOW_SLACK;
    let mut followed = Followed {
        started: true,
        ..Followed::default()
    };
    let mut opened = None;
    loop {
        let line = control.recv_line(Some(deadline), stopped_or_over);
        match line.map(|l| serde_json::from_slice::<Phase>(&l)) {
            Ok(Ok(Phase::Measure)) => {
                window.open(&mut system);
                opened = Some(Instant::now());
            }
            Ok(Ok(Phase::Done)) => {
                followed.system_metrics = window.close(&mut system);
                followed.window_s = opened.map_or(0.0, |t| t.elapsed().as_secs_f64());
                followed.done = true;
                if W::UNTIL == Until::Done {
                    break;
                }
            }
            Ok(Ok(Phase::Finished)) => break,
            Ok(Ok(Phase::Sent { datagrams })) => {
                followed.sent = Some(datagrams);
                break;
            }
            Ok(Err(e)) => {
                followed.error = Some(format!("a message the session does not expect: {e}"));
                break;
            }
            Err(e) => {
                followed.interrupted = stopped() || e.kind() == io::ErrorKind::Interrupted;
                followed.error = Some(format!("the control connection: {e}"));
                break;
            }
        }
    }
    if followed.error.is_some() {
        window.abandon(&mut system);
        shut(streams);
    } else {
        window.close(&mut system);
    }
    followed
}

/// Answer that the kernel refuses what the case needs (`unavailable`: the client reports the
/// case so rather than failed); the refusal as the session's error.
pub(crate) fn unavailable(control: &mut ControlChannel, refusal: Unsupported) -> anyhow::Error {
    control
        .send(&Control::Unavailable {
            what: refusal.what.clone(),
            reason: refusal.reason.clone(),
        })
        .ok();
    refusal.into()
}
