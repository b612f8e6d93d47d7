//! Agent mode of `iopath net serve --agent` (issue 23): besides serving sessions, an agent runs
//! a network case *as the client* against another agent when an authenticated controller asks
//! (third-party mode), and answers with the client's observation and both hosts' fingerprints.
//!
//! The protocol (docs/architecture.md, "Agent mode"): a controller says the `agent` hello,
//! proves the key and asks the agent to prove it too (`handshake::ServerProof::Required`),
//! hears `ready`, and only then sends its request: `run` (target and case) or `fingerprint`.
//! A run request is checked as the CLI checks the case (limits, this host's memory headroom),
//! against `--allow-peers` and `--max-session`; it then waits in the agent's queue
//! (`Session::wait_turn`, `queued` lines), fetches the target's fingerprint over an agent hello
//! of its own (the target proves the same key there, and again in the measured session, since
//! every client of an agent process requires the proof), runs the case through the normal
//! client path with the target as the remote endpoint, and answers `agent_result`, or a typed
//! `refused`, `unavailable` or `failed`.
//!
//! [`run_on_agent`] (client.rs) is the controller's side.

mod client;

pub use client::{run_on_agent, run_on_agent_with, AgentRun};

use crate::case::{Case, Endpoint, NetParams, RrCase, StreamCase};
use crate::net::auth::Credentials;
use crate::net::control::{AgentHello, Control, ControlChannel, RunRequest};
use crate::net::session::handshake::{self, refuse, ServerProof, HELLO_DEADLINE};
use crate::net::session::server::{peer_gone, wrong_hello};
use crate::net::session::{Hello, RefusalKind, Served, Session};
use crate::net::workload::{rr, stream};
use crate::observation::{Observation, Role, Unsupported};
use crate::stop::{Interrupted, Stop};
use crate::sysinfo::Machine;
use anyhow::{anyhow, bail, Context};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The agent's entry in the list `net serve --agent` serves (beside `registry::NET_SERVE`).
pub const SERVED: Served = Served {
    hellos: &["agent"],
    // Nothing but the envelope: the request is read once the key is proven.
    decode: |workload, _| Ok(Hello::new(workload, 0, ())),
    // A run request's case is checked when it arrives (`Runnable::check`, this host's
    // headroom), before the agent runs anything.
    check: |_, _| Ok(()),
    serve,
    // It claims the server's one session through the queue (`Session::wait_turn`), if at all.
    claims: false,
};

/// How long a controller may take to send its request once `ready` was said.
const REQUEST_DEADLINE: Duration = HELLO_DEADLINE;
/// How long an agent waits for its target's fingerprint (connect, key both ways, answer).
const FINGERPRINT_TIMEOUT: Duration = Duration::from_secs(10);

fn serve(mut control: ControlChannel, hello: Hello, session: &Session<'_>) -> anyhow::Result<()> {
    if hello.workload() != "agent" {
        return Err(wrong_hello(control, hello.workload()));
    }
    // `net serve --agent` refuses to start without a key; this holds it for any other caller:
    // nothing is read from a client that has not proven the key.
    let Some(key) = session.key else {
        let error = "refused: agent mode needs a pre-shared key (start the agent with --psk-file)".to_string();
        return Err(refuse(&mut control, RefusalKind::Key, error));
    };
    // Its own legs (the target's fingerprint, the measured session) prove the same key and
    // require the target to prove it too.
    let credentials = Credentials::with_key(key.to_vec()).requiring_proof();
    control.send(&Control::Ready { token: 0 })?;
    let line = control
        .recv_line(Some(Instant::now() + REQUEST_DEADLINE), session.stopped)
        .map_err(|e| anyhow!("no request after ready: {e}"))?;
    match ControlChannel::parse(&line)? {
        Control::Fingerprint => {
            control.send(&Control::Machine(Box::new(crate::sysinfo::describe())))?;
            Ok(())
        }
        Control::Run(request) => run_request(control, *request, session, &credentials),
        other => {
            let error = format!("expected a run or fingerprint request, got {}", message_type(&other));
            Err(refuse(&mut control, RefusalKind::BadHello, error))
        }
    }
}

/// The `type` of a control message, for an error that names it.
fn message_type(message: &Control) -> String {
    serde_json::to_value(message)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
        .unwrap_or_else(|| "an unknown message".into())
}

/// A run request: check it, resolve and allow the target, take the target's fingerprint, wait
/// for our turn, run the case as its client, answer.
fn run_request(
    mut control: ControlChannel,
    request: RunRequest,
    session: &Session<'_>,
    credentials: &Credentials,
) -> anyhow::Result<()> {
    let target = request.target.trim().to_string();
    let addr = match resolve(&target) {
        Ok(addr) => addr,
        Err(error) => return Err(refuse(&mut control, RefusalKind::SetUp, error)),
    };
    if control.stream().local_addr().is_ok_and(|ours| ours == addr) {
        let error = format!("the target {target} is this agent itself: a run needs two agents");
        return Err(refuse(&mut control, RefusalKind::SetUp, error));
    }
    if session.allow_peers.is_some_and(|allow| !allow.allows(addr.ip())) {
        let error = format!(
            "the target {target} ({}) is outside this agent's --allow-peers",
            addr.ip()
        );
        return Err(refuse(&mut control, RefusalKind::NotAllowed, error));
    }
    let case = match Runnable::aimed_at(&request.case, addr) {
        Ok(case) => case,
        Err(error) => return Err(refuse(&mut control, RefusalKind::BadHello, error)),
    };
    let asked = Duration::from_millis(case.net().session_ms());
    if let Some(max) = session.max_session.filter(|max| asked > *max) {
        let error = format!(
            "the case asks for a {:.1} s session (warm-up + window); this agent allows at most {:.1} s (--max-session)",
            asked.as_secs_f64(),
            max.as_secs_f64()
        );
        return Err(refuse(&mut control, RefusalKind::SessionTooLong, error));
    }
    if let Err(error) = case.check(crate::sys::procfs::memory_headroom()) {
        return Err(refuse(&mut control, RefusalKind::Limits, error));
    }
    // The target proves the key (and that it is an agent) before anything waits or runs.
    let destination = match watched(&control, session, |stop| fingerprint(addr, credentials.key(), stop)) {
        Ok(machine) => machine,
        Err(e) if handshake::key_failure(&e) => {
            let error = format!("the target {target} does not hold this agent's key: {e:#}");
            return Err(refuse(&mut control, RefusalKind::TargetKey, error));
        }
        Err(e) => {
            let error = format!("the target {target} is not an agent that answers: {e:#}");
            return Err(refuse(&mut control, RefusalKind::SetUp, error));
        }
    };
    session.wait_turn(&mut control)?;
    control.send(&Control::Running)?;
    let source = crate::sysinfo::describe();
    let outcome = watched(&control, session, |stop| case.run(stop, credentials));
    if peer_gone(&control) {
        bail!("the controller closed its connection during the run");
    }
    match outcome {
        Ok(observation) => {
            let result = crate::net::control::AgentResult {
                observation,
                source,
                destination,
            };
            control.send(&Control::AgentResult(Box::new(result)))?;
            Ok(())
        }
        Err(e) => Err(answer_failure(&mut control, &target, e)),
    }
}

/// Tell the controller why the run did not give an observation, typed where it can be.
fn answer_failure(control: &mut ControlChannel, target: &str, e: anyhow::Error) -> anyhow::Error {
    if handshake::key_failure(&e) {
        let error = format!("the target {target} does not hold this agent's key: {e:#}");
        return refuse(control, RefusalKind::TargetKey, error);
    }
    if let Some(kind) = handshake::refusal_kind(&e) {
        return refuse(control, kind, format!("the target {target}: {e:#}"));
    }
    if let Some(unsupported) = e.downcast_ref::<Unsupported>() {
        control
            .send(&Control::Unavailable {
                what: unsupported.what.clone(),
                reason: unsupported.reason.clone(),
            })
            .ok();
        return e;
    }
    let error = if e.is::<Interrupted>() {
        "the agent was stopped during the run".to_string()
    } else {
        crate::format::error_text(&e)
    };
    control.send(&Control::Failed { error: error.clone() }).ok();
    anyhow!(error)
}

/// Run `f` on a thread of its own with a stop of its own, raised when the server is stopped or
/// the controller closes its connection (looked at every 20 ms).
fn watched<T: Send>(
    control: &ControlChannel,
    session: &Session<'_>,
    f: impl FnOnce(Stop) -> anyhow::Result<T> + Send,
) -> anyhow::Result<T> {
    // One flag per call (it is 'static: a bool leaked per request).
    let stop = Stop::fresh();
    std::thread::scope(|scope| {
        let work = std::thread::Builder::new()
            .name("iopath-agent-run".into())
            .spawn_scoped(scope, move || f(stop))
            .context("could not start the run's thread")?;
        while !work.is_finished() {
            if !stop.requested() && ((session.stopped)() || peer_gone(control)) {
                stop.request();
            }
            std::thread::sleep(Stop::POLL);
        }
        work.join().unwrap_or_else(|_| Err(anyhow!("the run panicked")))
    })
}

/// `HOST:PORT` as one address (the first it resolves to): the address the allowlist checks
/// is the one the run connects to.
fn resolve(target: &str) -> Result<SocketAddr, String> {
    let accepted = "accepted: HOST:PORT, e.g. 10.0.0.7:7000";
    target
        .to_socket_addrs()
        .map_err(|e| format!("the target '{target}' is not an address that resolves ({accepted}): {e}"))?
        .next()
        .ok_or_else(|| format!("the target '{target}' resolves to no address ({accepted})"))
}

/// A case an agent runs, aimed at its target: the one place that names the network case
/// types an agent runs (a network workload added for fleets adds a variant and its arms here).
#[derive(Debug, Clone)]
enum Runnable {
    Stream(StreamCase),
    Rr(RrCase),
}

impl Runnable {
    /// The case with its endpoint replaced by the target; only `net stream`, `net rr`,
    /// `net crr` (a fleet cell stands for the network case it holds).
    fn aimed_at(case: &Case, target: SocketAddr) -> Result<Runnable, String> {
        if let Some(fleet) = case.get::<crate::case::FleetCase>() {
            return Runnable::aimed_at(&fleet.case, target);
        }
        let endpoint = Endpoint::Remote {
            addr: target.to_string(),
        };
        let mut runnable = if let Some(c) = case.get::<StreamCase>() {
            Runnable::Stream(c.clone())
        } else if let Some(c) = case.get::<RrCase>() {
            Runnable::Rr(c.clone())
        } else {
            return Err(format!(
                "an agent runs net stream, net rr and net crr cases, not {} ({})",
                case.workload(),
                case.label()
            ));
        };
        runnable.net_mut().endpoint = endpoint;
        Ok(runnable)
    }

    fn net_mut(&mut self) -> &mut NetParams {
        match self {
            Runnable::Stream(c) => &mut c.net,
            Runnable::Rr(c) => &mut c.net,
        }
    }

    fn net(&self) -> &NetParams {
        match self {
            Runnable::Stream(c) => &c.net,
            Runnable::Rr(c) => &c.net,
        }
    }

    /// The checks the CLI makes before running the case here as the client: the workload's
    /// limits and the client side's buffers against `headroom` (the same function the server
    /// side checks a hello with).
    fn check(&self, headroom: Option<u64>) -> Result<(), String> {
        match self {
            Runnable::Stream(c) => stream::check_case(c, Role::Client, headroom),
            Runnable::Rr(c) => rr::check_case(c).and_then(|()| rr::check_memory(c, Role::Client, headroom)),
        }
    }

    /// Run it through the normal client path (the session `Coordinator`).
    fn run(&self, stop: Stop, credentials: &Credentials) -> anyhow::Result<Observation> {
        match self {
            Runnable::Stream(c) => stream::run(c, stop, credentials),
            Runnable::Rr(c) => rr::run(c, stop, credentials),
        }
    }
}

/// Ask the agent at `addr` for its fingerprint: an `agent` hello, `key` proven both ways,
/// `fingerprint`, its `machine`.
pub fn fingerprint(addr: SocketAddr, key: Option<&[u8]>, stop: Stop) -> anyhow::Result<Machine> {
    let deadline = Instant::now() + FINGERPRINT_TIMEOUT;
    let stream = crate::net::session::connect(addr, stop)?;
    stream.set_nodelay(true).ok();
    let mut control = ControlChannel::new(stream)?;
    handshake::client_with(
        &mut control,
        &AgentHello::default(),
        key,
        ServerProof::Required,
        FINGERPRINT_TIMEOUT,
        stop,
    )?;
    control.send(&Control::Fingerprint)?;
    let line = control.recv_line(Some(deadline), &|| stop.requested())?;
    match ControlChannel::parse(&line)? {
        Control::Machine(machine) => Ok(*machine),
        Control::Refused { error, kind } => {
            Err(crate::net::session::ServerRefused(crate::net::session::Refusal { kind, error }).into())
        }
        other => bail!("expected the target's fingerprint, got {}", message_type(&other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{CopyMode, FakeBehaviour, FakeCase, FleetCase};

    fn stream(size: u64) -> StreamCase {
        StreamCase::for_test(CopyMode::OneCopy, size)
    }

    /// The case an agent runs points at the target whatever endpoint it came with; a fleet
    /// cell stands for its network case; another workload is refused by name.
    #[test]
    fn a_run_request_is_aimed_at_its_target_and_only_network_cases_run() {
        let target: SocketAddr = "10.1.2.3:7000".parse().unwrap();
        let remote = Endpoint::Remote {
            addr: "10.1.2.3:7000".into(),
        };
        let aimed = Runnable::aimed_at(&Case::NetStream(stream(4096)), target).unwrap();
        assert!(matches!(aimed, Runnable::Stream(_)));
        assert_eq!(aimed.net().endpoint, remote);
        let fleet = Case::Fleet(FleetCase {
            source: "a:7000".into(),
            destination: "b:7000".into(),
            round: 0,
            concurrent_pairs: 1,
            case: Box::new(Case::NetStream(stream(4096))),
        });
        let aimed = Runnable::aimed_at(&fleet, target).unwrap();
        assert!(matches!(aimed, Runnable::Stream(_)));
        assert_eq!(aimed.net().endpoint, remote);
        let fake = Case::Fake(FakeCase {
            index: 0,
            behaviour: FakeBehaviour::Ok { value: 1 },
        });
        let e = Runnable::aimed_at(&fake, target).unwrap_err();
        assert!(e.contains("net stream, net rr and net crr cases, not fake"), "{e}");
    }

    /// The client side's limits and memory, as the CLI checks them: a case whose buffers are
    /// more than half the headroom is refused, naming both.
    #[test]
    fn a_run_request_is_checked_as_the_cli_checks_it() {
        let runnable = |size| Runnable::Stream(stream(size));
        assert_eq!(runnable(1 << 20).check(Some(1 << 30)), Ok(()));
        let e = runnable(1 << 20).check(Some(1 << 20)).unwrap_err();
        assert!(e.contains("more than half of the"), "{e}");
        let e = runnable(2 << 30).check(None).unwrap_err();
        assert!(e.contains("larger than 1 GiB"), "{e}");
    }
}
