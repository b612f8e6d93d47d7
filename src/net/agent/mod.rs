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
use crate::net::control::{AgentHello, Control, ControlChannel, HelloCase, RunRequest};
use crate::net::session::handshake::{self, refuse, ServerProof, HELLO_DEADLINE};
use crate::net::session::server::{peer_gone, wrong_hello};
use crate::net::session::{RefusalKind, Served, Session};
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
    serve,
};

/// How long a controller may take to send its request once `ready` was said.
const REQUEST_DEADLINE: Duration = HELLO_DEADLINE;
/// How long an agent waits for its target's fingerprint (connect, key both ways, answer).
const FINGERPRINT_TIMEOUT: Duration = Duration::from_secs(10);

fn serve(mut control: ControlChannel, hello: HelloCase, session: &Session<'_>) -> anyhow::Result<()> {
    if !matches!(hello, HelloCase::Agent) {
        return Err(wrong_hello(control, &hello));
    }
    // `net serve --agent` refuses to start without a key; this holds it for any other caller:
    // nothing is read from a client that has not proven the key.
    if !session.authenticated {
        let error = "refused: agent mode needs a pre-shared key (start the agent with --psk-file)".to_string();
        return Err(refuse(&mut control, RefusalKind::Key, error));
    }
    control.send(&Control::Ready { token: 0 })?;
    let line = control
        .recv_line(Some(Instant::now() + REQUEST_DEADLINE), session.stopped)
        .map_err(|e| anyhow!("no request after ready: {e}"))?;
    match ControlChannel::parse(&line)? {
        Control::Fingerprint => {
            control.send(&Control::Machine(Box::new(crate::sysinfo::describe())))?;
            Ok(())
        }
        Control::Run(request) => run_request(control, *request, session),
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
fn run_request(mut control: ControlChannel, request: RunRequest, session: &Session<'_>) -> anyhow::Result<()> {
    let target = request.target.trim().to_string();
    let addr = match resolve(&target) {
        Ok(addr) => addr,
        Err(error) => return Err(refuse(&mut control, RefusalKind::SetUp, error)),
    };
    if session.allow_peers.is_some_and(|allow| !allow.allows(addr.ip())) {
        let error = format!(
            "the target {target} ({}) is outside this agent's --allow-peers",
            addr.ip()
        );
        return Err(refuse(&mut control, RefusalKind::NotAllowed, error));
    }
    let case = match aimed_at(&request.case, addr) {
        Ok(case) => case,
        Err(error) => return Err(refuse(&mut control, RefusalKind::BadHello, error)),
    };
    let asked = Duration::from_millis(net_of(&case).map_or(0, NetParams::session_ms));
    if let Some(max) = session.max_session.filter(|max| asked > *max) {
        let error = format!(
            "the case asks for a {:.1} s session (warm-up + window); this agent allows at most {:.1} s (--max-session)",
            asked.as_secs_f64(),
            max.as_secs_f64()
        );
        return Err(refuse(&mut control, RefusalKind::SessionTooLong, error));
    }
    if let Err(error) = check_case(&case, crate::sys::procfs::memory_headroom()) {
        return Err(refuse(&mut control, RefusalKind::Limits, error));
    }
    // The target proves the key (and that it is an agent) before anything waits or runs.
    let destination = match fingerprint(addr, Stop::never()) {
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
    let outcome = run_watched(&case, &control, session);
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
        format!("{e:#}")
    };
    control.send(&Control::Failed { error: error.clone() }).ok();
    anyhow!(error)
}

/// Run the case as its client; a stop of the server or the controller closing its connection
/// stops it (checked every 20 ms on a watcher thread).
fn run_watched(case: &Case, control: &ControlChannel, session: &Session<'_>) -> anyhow::Result<Observation> {
    // One flag per run (it is 'static: a bool leaked per run request).
    let stop = Stop::fresh();
    std::thread::scope(|scope| {
        let run = std::thread::Builder::new()
            .name("iopath-agent-run".into())
            .spawn_scoped(scope, move || {
                if let Some(c) = case.get::<StreamCase>() {
                    stream::run(c, stop)
                } else if let Some(c) = case.get::<RrCase>() {
                    rr::run(c, stop)
                } else {
                    Err(anyhow!("an agent runs net stream, net rr and net crr cases"))
                }
            })
            .context("could not start the run's thread")?;
        while !run.is_finished() {
            if !stop.requested() && ((session.stopped)() || peer_gone(control)) {
                stop.request();
            }
            std::thread::sleep(Stop::POLL);
        }
        run.join().unwrap_or_else(|_| Err(anyhow!("the run panicked")))
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

/// The network parameters of a case an agent runs.
fn net_of(case: &Case) -> Option<&NetParams> {
    case.get::<StreamCase>()
        .map(|c| &c.net)
        .or_else(|| case.get::<RrCase>().map(|c| &c.net))
}

/// The case with its endpoint replaced by the target; only `net stream`, `net rr`, `net crr`.
fn aimed_at(case: &Case, target: SocketAddr) -> Result<Case, String> {
    let endpoint = Endpoint::Remote {
        addr: target.to_string(),
    };
    if let Some(c) = case.get::<StreamCase>() {
        let mut c = c.clone();
        c.net.endpoint = endpoint;
        Ok(Case::NetStream(c))
    } else if let Some(c) = case.get::<RrCase>() {
        let mut c = c.clone();
        c.net.endpoint = endpoint;
        Ok(Case::NetRr(c))
    } else {
        Err(format!(
            "an agent runs net stream, net rr and net crr cases, not {} ({})",
            case.workload(),
            case.label()
        ))
    }
}

/// The checks the CLI makes before running the case here as the client: the workload's
/// limits and the client side's buffers against `headroom` (the same function the server side
/// checks a hello with).
pub fn check_case(case: &Case, headroom: Option<u64>) -> Result<(), String> {
    if let Some(c) = case.get::<StreamCase>() {
        stream::check_case(c, Role::Client, headroom)
    } else if let Some(c) = case.get::<RrCase>() {
        rr::check_case(c).and_then(|()| rr::check_memory(c, Role::Client, headroom))
    } else {
        Err(format!("an agent runs net stream, net rr and net crr cases, not {}", case.workload()))
    }
}

/// Ask the agent at `addr` for its fingerprint: an `agent` hello, the key proven both ways
/// (this process's key, `net::auth::client_key`), `fingerprint`, its `machine`.
pub fn fingerprint(addr: SocketAddr, stop: Stop) -> anyhow::Result<Machine> {
    let deadline = Instant::now() + FINGERPRINT_TIMEOUT;
    let stream = std::net::TcpStream::connect_timeout(&addr, FINGERPRINT_TIMEOUT)
        .with_context(|| format!("could not connect to {addr}"))?;
    stream.set_nodelay(true).ok();
    let mut control = ControlChannel::new(stream)?;
    let key = crate::net::auth::client_key();
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
        Control::Refused { error, kind } => Err(crate::net::session::ServerRefused(
            crate::net::session::Refusal { kind, error },
        )
        .into()),
        other => bail!("expected the target's fingerprint, got {}", message_type(&other)),
    }
}
