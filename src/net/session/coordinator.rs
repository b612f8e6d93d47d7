//! The client side of a network session, written once for every workload that runs on it
//! (`net stream`, `net rr`/`net crr`, `net records`): establish the topology (and the in-process server when
//! the far end is not remote), connect the control channel, handshake, open the data
//! connections, start the client threads behind one gate, drive warm-up / Measure / Done, shut
//! the connections down when something failed, join, take the server's report and merge it
//! with what the threads and the system probes saw. A workload (`NetWorkload`) gives what
//! differs: its hello, its data connections, its client thread bodies and its own metrics.

use super::connect::connect;
use super::gate::{all_ready, join_all};
use super::served::Served;
use super::{interrupted, StartGate};
use crate::case::NetParams;
use crate::measure::clock;
use crate::measure::counters::{kernel_policy, KernelPolicy};
use crate::measure::window::{SystemProbes, Window};
use crate::net::auth::Credentials;
use crate::net::control::{Control, ControlChannel, ServerReport};
use crate::net::topology::{Net, Topology};
use crate::observation::{Metric, Observation, Role, Unsupported, WarningKind};
use crate::stop::Stop;
use anyhow::{anyhow, bail, Context};
use serde::Serialize;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Scope;
use std::time::{Duration, Instant};

/// How long the client waits for the server to accept the case.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the client waits for the server's report after the window closed.
const REPORT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a failed run waits for the server's own account of the failure.
const ACCOUNT_TIMEOUT: Duration = Duration::from_secs(2);

/// What every client thread of a session shares: the window, the start gate, the kernel's
/// counter policy, and the flag a failing thread raises (the driver stops waiting on it).
pub(crate) struct Shared<'a> {
    pub window: &'a Window,
    pub ready: &'a StartGate,
    pub policy: &'a KernelPolicy,
    pub failed: &'a AtomicBool,
}

/// The client threads a workload started (a thread that could not start is an error).
pub(crate) use super::gate::Handles;

/// The server's acceptance of the case: its session token (stream's data connections carry
/// it) and the session's own data port (rr, crr; None from a stream server).
pub(crate) type Accepted = super::handshake::Ready;

/// A network workload as the coordinator runs it: what differs between workloads.
pub(crate) trait NetWorkload: Sync {
    /// The hello that names the workload and carries its case.
    type Hello: Serialize;
    /// What is made before talking to the server (a mode the kernel refuses ends the case
    /// there), then handed to the client threads.
    type Ends: Send;
    /// The data connections (and whatever the threads share about them).
    type Data: Sync;
    /// What one client thread hands back.
    type Outcome: Send;
    /// Joined as the error of a client thread that panicked.
    const PANICKED: &'static str;
    /// The server side of its sessions, as `net serve` runs them (the in-process server of a
    /// local run serves this one only).
    const SERVED: Served;

    fn net(&self) -> &NetParams;
    /// The hello, which may name what `prepare` made (udp-stream: its client sockets' ports).
    fn hello(&self, ends: &Self::Ends) -> Self::Hello;
    /// How long the server may take to answer the hello (records fills its table first).
    fn hello_wait(&self) -> Duration {
        HELLO_TIMEOUT
    }
    /// Whether the server's report carries its machine's memory traffic (records: the
    /// sender's DRAM is the figure), so the client's window does not count its own.
    /// Whether the trace probe sees this transport's receive copies (TCP's; UDP's not).
    const RX_COPIES: crate::measure::trace::RxCopies = crate::measure::trace::RxCopies::Traced;
    fn server_counts_memory_traffic(&self) -> bool {
        false
    }
    /// Set up the in-process server's listener before it accepts anything.
    fn listen(&self, _listener: &TcpListener) -> anyhow::Result<()> {
        Ok(())
    }
    fn prepare(&self) -> anyhow::Result<Self::Ends>;
    /// Open the data connections to `addr` once the server accepted the case.
    fn open_data(
        &self,
        addr: SocketAddr,
        accepted: &Accepted,
        ends: &mut Self::Ends,
        stop: Stop,
    ) -> anyhow::Result<Self::Data>;
    /// Whether `Measure` goes to the server before the client's window opens (rr) or after.
    fn measure_before_open(&self) -> bool {
        false
    }
    /// Spawn the client thread bodies; each raises `shared.failed` when it fails.
    fn spawn_clients<'scope, 'env>(
        &'env self,
        scope: &'scope Scope<'scope, 'env>,
        shared: &'env Shared<'env>,
        data: &'env Self::Data,
        ends: Self::Ends,
    ) -> Handles<'scope, Self::Outcome>;
    /// Wake every thread blocked on a peer that is gone (the run failed).
    fn wake(&self, data: &Self::Data);
    /// Every client thread is joined (rr tells a crr server to stop accepting).
    fn threads_done(&self, _control: &mut ControlChannel) {}
    /// A client thread's error that is the kernel refusing the case: a result, not a failure.
    fn thread_refusal(&self, _error: &io::Error) -> Option<Unsupported> {
        None
    }
    /// The connections whose TCP_INFO the client reports as the window closed (None: none).
    fn data_fds(&self, data: &Self::Data) -> Option<Vec<RawFd>>;
    /// The workload's observation from its threads' outcomes and the server's report.
    fn observe(
        &self,
        clients: &[Self::Outcome],
        server: &ServerReport,
        window_s: f64,
        tsc_hz: Option<f64>,
    ) -> Observation;
    /// The payload bytes DRAM traffic is counted per.
    fn payload(&self, obs: &Observation, server: &ServerReport) -> Result<f64, String>;
}

/// `wake` of a workload whose threads block on TCP data connections: every connection shut
/// down both ways, so a blocked send or receive returns.
pub(crate) fn shut_down_all(streams: &[TcpStream]) {
    for s in streams {
        s.shutdown(Shutdown::Both).ok();
    }
}

/// `data_fds` of a workload whose data goes over TCP connections: their descriptors.
pub(crate) fn fds_of(streams: &[TcpStream]) -> Option<Vec<RawFd>> {
    Some(streams.iter().map(|s| s.as_raw_fd()).collect())
}

/// The one list of a client window's system probes: the machine's (`SystemProbes`), the TCP
/// counters of the namespace the connections live in (`tcp_ns`, None: ours), the client
/// threads' tracepoint evidence when the run counts (`perf`; `NetWorkload::RX_COPIES`), and
/// the memory traffic unless
/// the server's report carries it (`NetWorkload::server_counts_memory_traffic`).
fn window_probes<W: NetWorkload>(w: &W, local: Option<&Net>) -> SystemProbes {
    let mut system = SystemProbes::default();
    crate::measure::system::push_network_probes(&mut system, local.and_then(Net::server_namespace));
    if let Some(net) = local {
        crate::measure::queue::push_queue_probe(&mut system, net.queue_readers());
    }
    crate::measure::trace::push_trace_probe(&mut system, Role::Client, w.net().perf, W::RX_COPIES);
    let memory_traffic = !w.server_counts_memory_traffic();
    if memory_traffic {
        crate::measure::memtraffic::push_memory_traffic_probe(&mut system);
    }
    system
}

/// Runs one case of a workload from the client's side.
pub(crate) struct Coordinator<'w, W: NetWorkload> {
    workload: &'w W,
    stop: Stop,
    /// The key the run's command took and the proof it asks of the server.
    credentials: &'w Credentials,
}

impl<'w, W: NetWorkload> Coordinator<'w, W> {
    pub fn new(workload: &'w W, stop: Stop, credentials: &'w Credentials) -> Self {
        Coordinator {
            workload,
            stop,
            credentials,
        }
    }

    /// The measured run: topology, the in-process server unless remote, the client, merge.
    pub fn run(&self) -> anyhow::Result<Observation> {
        let mut one = self.run_sessions(1)?;
        one.pop().ok_or_else(|| anyhow!("no client session ran"))
    }

    /// [`Coordinator::run`] with `clients` client sessions at once against one server (an
    /// incast): each its own control connection, handshake and threads, their warm-ups and
    /// windows started together; the in-process server serves them all. One observation per
    /// client session, in order; the first failure of any (others' failures that only
    /// followed from it aside) fails the whole, after every session is joined.
    pub fn run_sessions(&self, clients: usize) -> anyhow::Result<Vec<Observation>> {
        // Calibrate before any window opens so it never disturbs one.
        let tsc_hz = clock::tsc_hz();
        let endpoint = &self.workload.net().endpoint;
        let topology = Topology::from(endpoint).establish()?;
        if let Some(addr) = topology.remote_addr()? {
            return topology.on_client_side(|| self.clients(addr, tsc_hz, None, clients));
        }
        let listener = topology.bind(endpoint.port())?;
        self.workload.listen(&listener)?;
        let addr = listener.local_addr()?;
        let server_stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let server = topology
                .spawn_server(scope, "iopath-server", || {
                    serve_local(&listener, &server_stop, &[W::SERVED], clients)
                })
                .context("could not start the server thread")?;
            let result = topology.on_client_side(|| self.clients(addr, tsc_hz, Some(&topology), clients));
            // If the client never connected, the server is still waiting: release it.
            server_stop.store(true, Ordering::SeqCst);
            let server_result = server
                .join()
                .unwrap_or_else(|_| Err(anyhow!("the server thread panicked")));
            match (result, server_result) {
                (Ok(obs), Ok(())) => Ok(obs),
                (Err(client), _) => Err(client),
                (Ok(_), Err(server)) => Err(server.context("server")),
            }
        })
    }

    /// `clients` client sessions on threads of their own (one: right here), set up one after
    /// another and meeting before their warm-ups; every one joined.
    fn clients(
        &self,
        addr: SocketAddr,
        tsc_hz: Option<f64>,
        local: Option<&Net>,
        clients: usize,
    ) -> anyhow::Result<Vec<Observation>> {
        if clients <= 1 {
            return Ok(vec![self.client(addr, tsc_hz, local)?]);
        }
        let meeting = Meeting::default();
        let results: Vec<anyhow::Result<Observation>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..clients)
                .map(|i| {
                    let meeting = &meeting;
                    std::thread::Builder::new()
                        .name(format!("iopath-session-{i}"))
                        .spawn_scoped(scope, move || {
                            let result = self.client_meeting(addr, tsc_hz, local, Some(meeting));
                            if result.is_err() {
                                // Nobody waits for a session that will not come.
                                meeting.gate.abandon();
                            }
                            result
                        })
                })
                .collect();
            let started = handles.iter().filter(|h| h.is_ok()).count();
            let stop = self.stop;
            // Each session's own set-up is bounded (connect, hello, its threads' start); this
            // bounds the wait for all of them, one after another.
            let patience = super::gate::START_PATIENCE + HELLO_TIMEOUT * clients as u32;
            if started < clients || !meeting.gate.open_watching(clients, patience, &|| stop.requested()) {
                meeting.gate.abandon();
            }
            handles
                .into_iter()
                .map(|h| match h {
                    Ok(h) => h
                        .join()
                        .unwrap_or_else(|_| Err(anyhow!("a client session's thread panicked"))),
                    Err(e) => Err(anyhow!("could not start a client session's thread: {e}")),
                })
                .collect()
        });
        if self.stop.requested() {
            return Err(interrupted());
        }
        let cause = |e: &anyhow::Error| !e.is::<OtherSessionFailed>();
        let first = results.iter().position(|r| r.as_ref().is_err_and(cause));
        let first = first.or_else(|| results.iter().position(|r| r.is_err()));
        let mut results = results;
        if let Some(Err(e)) = first.map(|i| results.swap_remove(i)) {
            let i = first.unwrap_or_default();
            if super::handshake::refusal_kind(&e) == Some(super::RefusalKind::Busy) {
                return Err(e.context(format!(
                    "client session {i} of {clients}: --clients {clients} needs a server that serves {clients} sessions at once (net serve --sessions {clients})"
                )));
            }
            return Err(e.context(format!("client session {i} of {clients}")));
        }
        results.into_iter().collect()
    }

    /// The client side: set up the session, run the client threads through warm-up and the
    /// window, collect the server's report, build the observation. `local`: the topology this
    /// process built (None: a remote server's), whose namespace's TCP counters count this
    /// run's connections and whose shaped link's queues the window reads.
    fn client(&self, addr: SocketAddr, tsc_hz: Option<f64>, local: Option<&Net>) -> anyhow::Result<Observation> {
        self.client_meeting(addr, tsc_hz, local, None)
    }

    /// [`Coordinator::client`], one of several sessions when `meeting` is given: set up while
    /// holding its turn, and its warm-up started only when every session's threads are ready.
    fn client_meeting(
        &self,
        addr: SocketAddr,
        tsc_hz: Option<f64>,
        local: Option<&Net>,
        meeting: Option<&Meeting>,
    ) -> anyhow::Result<Observation> {
        let (w, stop) = (self.workload, self.stop);
        let mut ends = w.prepare()?;
        let (mut control, data) = {
            // One session says hello at a time: the server's greeting table caps the
            // connections one address may have in greeting at once.
            let _turn = meeting.map(|m| m.setup.lock());
            let mut control = ControlChannel::new(connect(addr, stop)?)?;
            control.stream().set_nodelay(true).ok();
            let accepted = self.handshake(&mut control, &ends)?;
            let data = w.open_data(addr, &accepted, &mut ends, stop)?;
            (control, data)
        };

        let policy = kernel_policy();
        let window = Window::new();
        let mut system = window_probes(w, local);
        let failed = AtomicBool::new(false);
        let ready = StartGate::default();
        let shared = Shared {
            window: &window,
            ready: &ready,
            policy: &policy,
            failed: &failed,
        };
        let (outcomes, phases) = std::thread::scope(|scope| {
            let handles = w.spawn_clients(scope, &shared, &data, ends);
            let started = all_ready(&ready, &handles);
            let met = started && meeting.is_none_or(|m| m.gate.arrive_and_wait());
            let phases = if met {
                self.drive(&window, &mut system, &failed, &mut control)
            } else {
                window.close(&mut system);
                control.send(&Control::Done).ok();
                if started {
                    Err(anyhow::Error::new(OtherSessionFailed))
                } else {
                    Err(anyhow!("could not start all {} client threads", handles.len()))
                }
            };
            if phases.is_err() || failed.load(Ordering::SeqCst) {
                w.wake(&data);
            }
            (join_all(handles, W::PANICKED), phases)
        });
        w.threads_done(&mut control);
        let mut threads = Vec::with_capacity(outcomes.len());
        let mut first_error = None;
        for outcome in outcomes {
            match outcome {
                Ok(t) => threads.push(t),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if phases.as_ref().is_err_and(|e| e.is::<OtherSessionFailed>()) {
            // Its threads' errors only follow from the session it gave up.
            return Err(anyhow::Error::new(OtherSessionFailed));
        }
        self.account_for_failure(&mut control, first_error.as_ref(), &phases)?;
        let (mut system_metrics, window_s) = phases?;
        if let Some(fds) = w.data_fds(&data) {
            // The client's view of each connection as the window closed.
            system_metrics.extend(crate::measure::system::tcp_info_metrics(&fds, Role::Client));
        }
        if stop.requested() {
            return Err(interrupted());
        }
        if let Some(e) = first_error {
            bail!("the run failed: {e}");
        }
        let report = self.report(&mut control)?;
        let mut obs = w.observe(&threads, &report, window_s, tsc_hz);
        if let Some(warning) = crate::measure::system::contended(&system_metrics) {
            obs.warn(WarningKind::Contended, warning);
        }
        obs.metrics.extend(system_metrics);
        // DRAM traffic per payload byte.
        let payload = w.payload(&obs, &report);
        let ratio = crate::measure::memtraffic::per_payload_byte(&obs.metrics, payload.clone());
        obs.push(ratio);
        // The kernel's receive copies per payload byte, each side's and both.
        for ratio in crate::measure::trace::copies_per_payload_byte(&obs.metrics, &payload) {
            obs.push(ratio);
        }
        Ok(obs)
    }

    /// Say hello, answer a key challenge, and return the server's acceptance
    /// (net/session/handshake.rs): a refusal is a `ServerRefused` matched by its kind, the
    /// kernel refusing the case on the server `Unsupported`.
    fn handshake(&self, control: &mut ControlChannel, ends: &W::Ends) -> anyhow::Result<Accepted> {
        let wait = self.workload.hello_wait();
        control.set_read_timeout(Some(wait))?;
        super::handshake::client(control, &self.workload.hello(ends), self.credentials, wait, self.stop)
    }

    /// The next line on the control connection within `wait`; a stop ends the wait.
    fn recv_line(&self, control: &mut ControlChannel, wait: Duration, doing: &str) -> anyhow::Result<Vec<u8>> {
        let stop = self.stop;
        control
            .recv_line(Some(Instant::now() + wait), &|| stop.requested())
            .map_err(|e| {
                if e.kind() == io::ErrorKind::Interrupted && stop.requested() {
                    interrupted()
                } else {
                    anyhow::Error::new(e).context(doing.to_string())
                }
            })
    }

    /// Warm up, open the window here and on the server (`Measure`), hold it, close it on both
    /// ends (`Done`). Returns the system probes' metrics and the window's length; early when a
    /// client thread failed, `Interrupted` on a stop (the window is closed either way).
    fn drive(
        &self,
        window: &Window,
        system: &mut SystemProbes,
        failed: &AtomicBool,
        control: &mut ControlChannel,
    ) -> anyhow::Result<(Vec<Metric>, f64)> {
        let (net, stop) = (self.workload.net(), self.stop);
        let mut measure = || {
            control
                .send(&Control::Measure)
                .context("the server closed the control connection")
        };
        let mut result = Ok(());
        let mut opened = None;
        if stop.sleep_watching(Duration::from_millis(net.warmup_ms), failed) {
            if self.workload.measure_before_open() {
                result = measure();
                window.open(system);
            } else {
                window.open(system);
                result = measure();
            }
            opened = Some(Instant::now());
            if result.is_ok() {
                stop.sleep_watching(Duration::from_millis(net.duration_ms), failed);
            }
        }
        let metrics = window.close(system);
        let window_s = opened.map_or(0.0, |t| t.elapsed().as_secs_f64());
        let done = control
            .send(&Control::Done)
            .context("the server closed the control connection");
        if stop.requested() {
            return Err(interrupted());
        }
        result.and(done).map(|()| (metrics, window_s))
    }

    /// When the run failed (and was not stopped): a client thread's refusal by the kernel is
    /// the result; otherwise the server's account, if it sends one, says more (it failed
    /// first, or the kernel refused its receive mode once the connections existed).
    fn account_for_failure(
        &self,
        control: &mut ControlChannel,
        first_error: Option<&io::Error>,
        phases: &anyhow::Result<(Vec<Metric>, f64)>,
    ) -> anyhow::Result<()> {
        if self.stop.requested() || (phases.is_ok() && first_error.is_none()) {
            return Ok(());
        }
        if let Some(refusal) = first_error.and_then(|e| self.workload.thread_refusal(e)) {
            return Err(refusal.into());
        }
        control.set_read_timeout(Some(ACCOUNT_TIMEOUT)).ok();
        match control.recv() {
            Ok(Control::Unavailable { what, reason }) => Err(Unsupported::new(what, reason).into()),
            Ok(Control::Failed { error }) => {
                let ours = match (first_error, phases) {
                    (Some(e), _) => e.to_string(),
                    (None, Err(e)) => format!("{e:#}"),
                    (None, Ok(_)) => String::new(),
                };
                bail!("the run failed: {ours}; the server said: {error}")
            }
            _ => Ok(()),
        }
    }

    /// The server's report, or why there is none.
    fn report(&self, control: &mut ControlChannel) -> anyhow::Result<ServerReport> {
        let line = self.recv_line(control, REPORT_TIMEOUT, "waiting for the server's report")?;
        match ControlChannel::parse(&line)? {
            Control::Report(mut report) => {
                // Checked as it arrives, so every reader of the report (the workloads' loss,
                // payload and warnings as much as the metrics pushed) sees only values in range.
                report.metrics = report.metrics.iter().map(super::observe::checked).collect();
                // And how they stand to each other: out of order, the cell fails naming them.
                if let Some(why) =
                    crate::observation::out_of_order(&report.metrics, self.workload.net().longest_latency())
                {
                    bail!("the server sent values no measurement gives: {why}");
                }
                Ok(*report)
            }
            Control::Failed { error } => bail!("the server failed: {error}"),
            Control::Unavailable { what, reason } => Err(Unsupported::new(what, reason).into()),
            other => bail!("unexpected message from the server: {other:?}"),
        }
    }
}

/// Where the client sessions of an incast meet: set up one at a time (`setup`), then wait at
/// `gate` until every session's threads are ready, so their warm-ups and windows coincide.
#[derive(Default)]
struct Meeting {
    setup: std::sync::Mutex<()>,
    gate: StartGate,
}

/// A client session that stopped because another one failed before the windows opened.
#[derive(Debug)]
struct OtherSessionFailed;

impl std::fmt::Display for OtherSessionFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("another client session failed before the windows opened")
    }
}

impl std::error::Error for OtherSessionFailed {}

/// The in-process server of a local run: the session server of `net serve`
/// (net/session/server.rs), serving this workload's sessions only, `sessions` at a time.
fn serve_local(listener: &TcpListener, stop: &AtomicBool, served: &[Served], sessions: usize) -> anyhow::Result<()> {
    super::server::serve_session(listener, Some(stop), served, sessions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::session::RefusalKind;
    use std::io::{BufRead, BufReader, Write};

    /// A workload with no data connection and no thread: what is left is the coordinator's own
    /// conversation with the server.
    struct Bare {
        net: NetParams,
    }

    impl NetWorkload for Bare {
        type Hello = serde_json::Value;
        type Ends = ();
        type Data = ();
        type Outcome = ();
        const PANICKED: &'static str = "a bare thread panicked";
        // The tests answer from a scripted server: nothing serves a bare session in-process.
        const SERVED: Served = Served {
            hellos: &["bare"],
            decode: |_, _| Err("no bare server".into()),
            check: |_, _| Ok(()),
            serve: |_, _, _| anyhow::bail!("no bare server"),
            claims: true,
        };

        fn net(&self) -> &NetParams {
            &self.net
        }
        fn hello(&self, _: &()) -> serde_json::Value {
            serde_json::json!({"type": "hello", "workload": "bare"})
        }
        fn prepare(&self) -> anyhow::Result<()> {
            Ok(())
        }
        fn open_data(&self, _: SocketAddr, accepted: &Accepted, _: &mut (), _: Stop) -> anyhow::Result<()> {
            assert_eq!(
                accepted,
                &Accepted {
                    token: 7,
                    port: Some(9)
                }
            );
            Ok(())
        }
        fn spawn_clients<'scope, 'env>(
            &'env self,
            _: &'scope Scope<'scope, 'env>,
            _: &'env Shared<'env>,
            _: &'env (),
            _: (),
        ) -> Handles<'scope, ()> {
            Vec::new()
        }
        fn wake(&self, _: &()) {}
        fn data_fds(&self, _: &()) -> Option<Vec<RawFd>> {
            None
        }
        fn observe(&self, _: &[()], server: &ServerReport, _: f64, _: Option<f64>) -> Observation {
            let mut obs = Observation::default();
            obs.metrics.extend(server.metrics.iter().cloned());
            obs
        }
        fn payload(&self, _: &Observation, _: &ServerReport) -> Result<f64, String> {
            Err("a bare session moves no payload".into())
        }
    }

    fn bare() -> Bare {
        Bare {
            net: NetParams {
                duration_ms: 0,
                ..NetParams::for_test()
            },
        }
    }

    /// A server on loopback that answers the hello with `answers[0]` and every later line with
    /// the next answer (None: read and answer nothing); returns the lines it read.
    fn server(answers: Vec<Option<String>>) -> (SocketAddr, std::thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut writer = stream.try_clone().unwrap();
            let mut reader = BufReader::new(stream);
            let mut seen = Vec::new();
            for answer in answers {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                seen.push(line.trim().to_string());
                if let Some(answer) = answer {
                    writer.write_all(format!("{answer}\n").as_bytes()).unwrap();
                }
            }
            seen
        });
        (addr, handle)
    }

    fn line(message: &Control) -> Option<String> {
        Some(serde_json::to_string(message).unwrap())
    }

    #[test]
    fn a_refusal_is_an_error_and_an_unavailable_case_is_unsupported() {
        let workload = bare();
        let none = Credentials::default();
        let coordinator = Coordinator::new(&workload, Stop::fresh(), &none);
        let (addr, server_thread) = server(vec![line(&Control::Refused {
            error: "no room".into(),
            kind: RefusalKind::Other,
        })]);
        let err = coordinator.client(addr, None, None).unwrap_err();
        assert_eq!(err.to_string(), "the server refused the case: no room");
        assert_eq!(
            server_thread.join().unwrap(),
            vec![r#"{"type":"hello","workload":"bare"}"#]
        );

        // A key refusal is told by its kind, whatever its words.
        let (addr, server_thread) = server(vec![line(&Control::Refused {
            error: "refused: the key does not match".into(),
            kind: RefusalKind::Key,
        })]);
        let err = coordinator.client(addr, None, None).unwrap_err();
        assert_eq!(
            crate::net::session::handshake::refusal_kind(&err),
            Some(RefusalKind::Key)
        );
        assert_eq!(err.to_string(), "the server refused: the key does not match");
        server_thread.join().unwrap();

        let (addr, server_thread) = server(vec![line(&Control::Unavailable {
            what: "zerocopy receive".into(),
            reason: "not here".into(),
        })]);
        let err = coordinator.client(addr, None, None).unwrap_err();
        let refusal = err.downcast_ref::<Unsupported>().expect("a typed refusal");
        assert_eq!(refusal, &Unsupported::new("zerocopy receive", "not here"));
        server_thread.join().unwrap();
    }

    /// A whole session against a scripted server that is ready, then reports `metrics`: the
    /// client's observation and the lines the server read.
    fn session_reporting(metrics: Vec<Metric>) -> (crate::observation::Observation, Vec<String>) {
        let workload = bare();
        let none = Credentials::default();
        let coordinator = Coordinator::new(&workload, Stop::fresh(), &none);
        let report = ServerReport {
            metrics,
            ..Default::default()
        };
        let (addr, server_thread) = server(vec![
            Some(r#"{"type":"ready","token":7,"port":9}"#.to_string()),
            None,
            line(&Control::Report(Box::new(report))),
        ]);
        let obs = coordinator.client(addr, None, None).unwrap();
        (obs, server_thread.join().unwrap())
    }

    /// After `ready`: `measure` and `done` on the control connection, then the server's report
    /// merged into the workload's observation, with the system probes' metrics after it.
    #[test]
    fn a_session_says_measure_then_done_and_merges_the_report() {
        let (obs, seen) = session_reporting(vec![Metric::tool("bare_bytes", Role::Server, 3.0, "B")]);
        assert_eq!(&seen[1..], [r#"{"type":"measure"}"#, r#"{"type":"done"}"#]);
        assert_eq!(obs.metrics[0].name, "bare_bytes");
        assert_eq!(obs.value("bare_bytes", Role::Server), Some(3.0));
        // The ratios derived from the probes come after the report; without a PMU or a
        // payload here, none has a value.
        for name in ["dram_bytes_per_payload_byte", "kernel_copy_bytes_per_byte"] {
            let at = obs.metrics.iter().position(|m| m.name == name).expect(name);
            assert!(at > 0, "{name} after the report's metrics");
            assert_eq!(obs.metrics[at].value, None, "{name}");
        }
    }

    /// Issue 31, item 4: a server's report with values no measurement gives (negative, beyond
    /// 2^53, a fraction above 1) reaches the observation as unavailable, saying so.
    #[test]
    fn a_reports_impossible_values_are_unavailable() {
        let with = |name: &str, v: f64| Metric {
            value: Some(v),
            ..Metric::tool(name, Role::Server, 0.0, "u")
        };
        let (obs, _) = session_reporting(vec![
            with("bare_bytes", -3.0),
            with("bare_rate", 7e301),
            with("bare_fraction", 2.0),
            with("bare_good", 5.0),
        ]);
        for name in ["bare_bytes", "bare_rate", "bare_fraction"] {
            let m = obs.get(name, Role::Server).expect(name);
            assert_eq!(m.value, None, "{name}");
            assert!(
                matches!(&m.source, crate::observation::Source::Unavailable(why) if why.contains("impossible")),
                "{m:?}"
            );
        }
        assert_eq!(obs.value("bare_good", Role::Server), Some(5.0));
    }

    /// Issue 31.4's bounds between values: a server's report whose p90 is above its p99.9
    /// fails the cell, naming both metrics; so does a latency longer than the session's
    /// window and warm-up (1.5 s here: at most 4 s recorded) allow.
    #[test]
    fn a_reports_values_out_of_order_fail_the_cell() {
        let mut workload = bare();
        (workload.net.duration_ms, workload.net.warmup_ms) = (1200, 300);
        let none = Credentials::default();
        let coordinator = Coordinator::new(&workload, Stop::fresh(), &none);
        let reports = [
            (
                vec![("bare_p90_us", 417.0), ("bare_p999_us", 388.5)],
                ["server.bare_p90_us", "server.bare_p999_us"],
            ),
            (
                vec![("bare_p50_us", 80.0), ("bare_p99_us", 4.5e6)],
                ["server.bare_p99_us", "case's windows"],
            ),
        ];
        for (values, named) in reports {
            let report = ServerReport {
                metrics: values
                    .iter()
                    .map(|(name, v)| Metric::tool(name, Role::Server, *v, "us"))
                    .collect(),
                ..Default::default()
            };
            let (addr, server_thread) = server(vec![
                Some(r#"{"type":"ready","token":7,"port":9}"#.to_string()),
                None,
                line(&Control::Report(Box::new(report))),
            ]);
            let err = format!("{:#}", coordinator.client(addr, None, None).unwrap_err());
            server_thread.join().unwrap();
            assert!(named.iter().all(|n| err.contains(n)), "{err}");
        }
    }
}
