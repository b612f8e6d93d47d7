//! The controller's side of agent mode: ask one agent to run a case against another and wait
//! for the answer, within a time limit for the whole call.

use crate::case::Case;
use crate::net::control::{AgentHello, Control, ControlChannel, RunRequest};
use crate::net::session::handshake::{self, ServerProof};
use crate::net::session::{Refusal, ServerRefused};
use crate::observation::{Observation, Unsupported};
use crate::stop::{Interrupted, Stop};
use crate::sysinfo::Machine;
use anyhow::{anyhow, bail, Context};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// What an agent answered a run request with.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRun {
    /// The client's whole observation of the case (the agent ran the client side).
    pub observation: Observation,
    /// `sysinfo` of the agent that ran the client (the source).
    pub source: Machine,
    /// `sysinfo` of the target (the destination), as the target sent it to the source.
    pub destination: Machine,
    /// How many runs went before this one when it was queued (the first position the agent
    /// told; 0: it ran at once).
    pub queued_behind: u32,
}

/// Ask the agent at `agent` to run `case` (`net stream`, `net rr` or `net crr`, or a fleet
/// cell holding one; its endpoint is replaced by the target) as the client against the agent at `target` (`HOST:PORT`), with
/// `key` (the run's `--psk-file`, as `--connect` uses it). `timeout` bounds the
/// whole call, queueing included: connection refused, an agent that stops answering or dies
/// mid-run is an error within it, never a hang. A refusal is a [`ServerRefused`] (match
/// `handshake::refusal_kind`: `Key` on this leg, `TargetKey` on the third-party leg,
/// `NotAllowed`, `Busy`, `Limits`, `SessionTooLong`), a case the kernel refuses an
/// [`Unsupported`], a stop [`Interrupted`].
pub fn run_on_agent(
    agent: SocketAddr,
    target: &str,
    case: &Case,
    key: Option<&[u8]>,
    stop: Stop,
    timeout: Duration,
) -> anyhow::Result<AgentRun> {
    run_on_agent_with(agent, target, case, key, stop, timeout, &mut |_| {})
}

/// [`run_on_agent`] with the key given, and `on_queued` told each position the agent says
/// while the request waits in its queue (how many runs go first), then 0 when it runs.
pub fn run_on_agent_with(
    agent: SocketAddr,
    target: &str,
    case: &Case,
    key: Option<&[u8]>,
    stop: Stop,
    timeout: Duration,
    on_queued: &mut dyn FnMut(u32),
) -> anyhow::Result<AgentRun> {
    let deadline = Instant::now() + timeout;
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|l| !l.is_zero())
            .ok_or_else(|| anyhow!("agent {agent}: no answer within {}", secs(timeout)))
    };
    let stream =
        TcpStream::connect_timeout(&agent, left()?).with_context(|| format!("agent {agent}: could not connect"))?;
    stream.set_nodelay(true).ok();
    let mut control = ControlChannel::new(stream)?;
    handshake::client_with(
        &mut control,
        &AgentHello::default(),
        key,
        ServerProof::Required,
        left()?,
        stop,
    )
    .with_context(|| format!("agent {agent}"))?;
    control.send(&Control::Run(Box::new(RunRequest {
        target: target.to_string(),
        case: case.clone(),
    })))?;
    let mut queued_behind = 0;
    loop {
        let line = control.recv_line(Some(deadline), &|| stop.requested()).map_err(|e| {
            if stop.requested() {
                anyhow::Error::new(Interrupted)
            } else if e.kind() == std::io::ErrorKind::TimedOut {
                anyhow!("agent {agent}: no answer within {} ({e})", secs(timeout))
            } else {
                anyhow::Error::new(e).context(format!("agent {agent}: waiting for the run's result"))
            }
        })?;
        match ControlChannel::parse(&line).with_context(|| format!("agent {agent}"))? {
            Control::Queued { position } => {
                queued_behind = queued_behind.max(position);
                on_queued(position);
            }
            Control::Running => on_queued(0),
            Control::AgentResult(result) => {
                let mut observation = result.observation;
                // An agent's figures pass the one range check of a peer's values.
                let peer = format!("agent {agent}");
                observation.metrics = observation.metrics.iter().map(|m| m.from_peer(&peer)).collect();
                // And how they stand to each other: out of order, no figure of the cell can be
                // trusted, so the cell fails naming the metrics.
                if let Some(why) = observation.out_of_order(case.as_workload().longest_latency()) {
                    bail!("{peer} sent values no measurement gives: {why}");
                }
                return Ok(AgentRun {
                    observation,
                    source: result.source,
                    destination: result.destination,
                    queued_behind,
                });
            }
            Control::Refused { error, kind } => {
                return Err(anyhow::Error::new(ServerRefused(Refusal { kind, error })).context(format!("agent {agent}")))
            }
            Control::Unavailable { what, reason } => return Err(Unsupported::new(what, reason).into()),
            Control::Failed { error } => bail!(crate::format::said_once(&format!(
                "agent {agent}: the run failed: {error}"
            ))),
            other => bail!("agent {agent}: unexpected message {other:?}"),
        }
    }
}

fn secs(d: Duration) -> String {
    crate::format::format_duration_s(d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::CopyMode;
    use crate::net::control::AgentResult;
    use crate::net::session::handshake::{greet, Greeting};
    use crate::observation::{Metric, Observation, Role};
    use std::net::TcpListener;

    /// Issue 31.4's bounds between values, from an agent: a result whose p99.9 is below its
    /// p90 fails the cell, naming the agent and both metrics (the per-value check alone let
    /// both through, each a plausible number).
    #[test]
    fn an_agents_values_out_of_order_fail_the_cell() {
        const KEY: &[u8] = b"an-agent-key-for-the-order-test-0427";
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let agent = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut workload = None;
            let Ok(Greeting::Hello(mut control, _)) = greet(
                stream,
                (&|| false, Some(KEY)),
                &|line| crate::net::session::served::decode_hello(line, &[super::super::SERVED]),
                &|_| {},
                &mut workload,
            ) else {
                panic!("a hello with the key")
            };
            control.send(&Control::Ready { token: 3 }).unwrap();
            control
                .recv_line(Some(Instant::now() + Duration::from_secs(10)), &|| false)
                .expect("the run request");
            let observation = Observation {
                metrics: vec![
                    Metric::tool("latency_p90_us", Role::Client, 263.0, "us"),
                    Metric::tool("latency_p999_us", Role::Client, 241.25, "us"),
                ],
                ..Default::default()
            };
            control
                .send(&Control::AgentResult(Box::new(AgentResult {
                    observation,
                    source: Default::default(),
                    destination: Default::default(),
                })))
                .unwrap();
        });
        let case = crate::report::cells::tests::stream_case(CopyMode::TwoCopy, 4096, 1);
        let got = run_on_agent_with(
            addr,
            "127.0.0.1:9",
            &case,
            Some(KEY),
            Stop::fresh(),
            Duration::from_secs(20),
            &mut |_| {},
        );
        agent.join().unwrap();
        let Err(err) = got else { panic!("the cell fails") };
        let err = format!("{err:#}");
        assert!(
            err.contains(&addr.to_string())
                && err.contains("client.latency_p90_us")
                && err.contains("client.latency_p999_us"),
            "{err}"
        );
    }
}
