//! `iopath fleet run`: a network case measured between pairs of `net serve --agent` agents,
//! in rounds of disjoint pairs. A floor of its own beside `sweep/` (below it: the runner's
//! executor calls [`Batches`]), above the workloads: it plans the cells ([`cells`]: one
//! `Case::Fleet` per directed pair, round and network case, run by the normal plan → runner
//! → store path) and measures each pair by asking its source agent to run the case against
//! its destination ([`run_pair`], through `net::agent::run_on_agent`).

pub mod batch;
pub mod hosts;
pub mod schedule;

pub use batch::Batches;
pub use hosts::{PairSpec, MAX_HOSTS};

use crate::case::{Case, FleetCase};
use crate::net::auth::Credentials;
use crate::observation::{Metric, Observation, Role};
use crate::stop::Stop;
use std::net::ToSocketAddrs;
use std::time::Duration;

/// The network workloads a fleet cell runs (the client side on the source agent).
pub const FLEET_WORKLOADS: [&str; 3] = ["net-stream", "net-rr", "net-crr"];

/// The rounds of directed pairs `spec` makes over `hosts`, in the order `seed` fixes; a star
/// with more than one pair at once is an incast (`schedule::pack_incast`).
pub fn rounds(
    spec: &PairSpec,
    hosts: &[String],
    seed: u64,
    concurrent_pairs: u32,
) -> Result<Vec<Vec<hosts::Pair>>, String> {
    let mut rounds = match spec {
        PairSpec::All => schedule::circle(hosts.len()),
        PairSpec::Star(_) if concurrent_pairs > 1 => schedule::pack_incast(&hosts::pairs_of(spec, hosts)?),
        other => schedule::pack(&hosts::pairs_of(other, hosts)?),
    };
    schedule::shuffle(&mut rounds, seed);
    Ok(rounds)
}

/// The fewest partners any host side of `rounds` over `n` hosts has that the matrix can judge
/// it against: a pair `s → d` counts for `s` as a source when `d` has another source too,
/// and for `d` as a destination when `s` has another destination (what the other hosts get
/// from the same partner is the yardstick). 0 when no host side has one (a ring, two hosts).
pub fn judgeable_partners(rounds: &[Vec<hosts::Pair>], n: usize) -> usize {
    let (mut sources_of, mut destinations_of) = (vec![0usize; n], vec![0usize; n]);
    for &(s, d) in rounds.iter().flatten() {
        destinations_of[s] += 1;
        sources_of[d] += 1;
    }
    let (mut as_source, mut as_destination) = (vec![0usize; n], vec![0usize; n]);
    for &(s, d) in rounds.iter().flatten() {
        if sources_of[d] >= 2 {
            as_source[s] += 1;
        }
        if destinations_of[s] >= 2 {
            as_destination[d] += 1;
        }
    }
    as_source
        .into_iter()
        .chain(as_destination)
        .filter(|p| *p > 0)
        .min()
        .unwrap_or(0)
}

/// Every cell of a fleet run: for each network case of `inner` (in order), every slot of the
/// schedule (rounds in order, each cut into batches of at most `k` pairs), the network case
/// aimed at the slot's destination.
pub fn cells(hosts: &[String], rounds: &[Vec<hosts::Pair>], k: u32, inner: &[Case]) -> Result<Vec<Case>, String> {
    let slots = schedule::slots(rounds, k);
    let mut out = Vec::with_capacity(slots.len() * inner.len());
    for case in inner {
        // Aimed once per destination, not once per cell (N·(N−1) cells, N destinations).
        let aimed: Vec<Case> = hosts.iter().map(|h| aimed_at(case, h)).collect::<Result<_, _>>()?;
        for slot in &slots {
            let (source, destination) = (&hosts[slot.pair.0], &hosts[slot.pair.1]);
            out.push(Case::Fleet(FleetCase {
                source: source.clone(),
                destination: destination.clone(),
                round: slot.round,
                concurrent_pairs: slot.concurrent_pairs,
                case: Box::new(aimed[slot.pair.1].clone()),
            }));
        }
    }
    Ok(out)
}

/// `case` with its server at `destination` (its endpoint `remote:DESTINATION`): the network
/// cases flatten `NetParams`, whose `endpoint` is a key of the case's JSON.
pub fn aimed_at(case: &Case, destination: &str) -> Result<Case, String> {
    if !FLEET_WORKLOADS.contains(&case.workload()) {
        return Err(format!(
            "a fleet runs net stream, net rr or net crr, not {}",
            case.workload()
        ));
    }
    let mut json = serde_json::to_value(case).map_err(|e| e.to_string())?;
    let Some(endpoint) = json.get_mut("endpoint") else {
        return Err(format!("a {} case has no endpoint to aim", case.workload()));
    };
    *endpoint = serde_json::json!({ "kind": "remote", "addr": destination });
    serde_json::from_value(json).map_err(|e| format!("cannot aim the case at {destination}: {e}"))
}

/// Whether two fleet cells run the same network case, each aimed at its own destination (the
/// pairs of one batch): `b`'s case aimed at `a`'s destination is `a`'s.
pub fn same_network_case(a: &FleetCase, b: &FleetCase) -> bool {
    match aimed_at(&b.case, &a.destination) {
        Ok(aimed) => aimed == *a.case,
        // A case without an endpoint (a test's stand-in): equal as it is.
        Err(_) => a.case == b.case,
    }
}

/// How many runs the source agent said went before this cell's while it waited in its queue
/// (0: it ran at once; pairs of a round are disjoint, so a fleet's own cells never queue).
pub const QUEUED_BEHIND_METRIC: &str = "agent_queued_behind";

/// The longest a pair's call to its source agent may take: twice the case's warm-up and window
/// plus 30 s for connecting, the handshakes of both legs and the reports. An agent that dies
/// or stops answering fails the cell within it.
pub fn pair_timeout(c: &FleetCase) -> Duration {
    Duration::from_secs_f64(2.0 * c.case.planned_seconds() + 30.0)
}

/// Measure one pair: ask the source agent (`net serve --agent`) to run the network case as
/// the client against the destination agent, with the run's key (`--psk-file`), and
/// return the client's observation with both hosts' machine descriptions
/// (`Observation::pair_machines`, stored per cell). Every failure names the pair; the round
/// goes on.
pub fn run_pair(c: &FleetCase, stop: Stop, credentials: &Credentials) -> anyhow::Result<Observation> {
    let agent = c
        .source
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| anyhow::anyhow!("agent {}: cannot resolve its address", c.source))?;
    // Its errors name the agent; the cell's label names the pair.
    let run =
        crate::net::agent::run_on_agent(agent, &c.destination, &c.case, credentials.key(), stop, pair_timeout(c))?;
    let mut observation = run.observation;
    observation.pair_machines = Some(Box::new(crate::observation::PairMachines {
        source: run.source,
        destination: run.destination,
    }));
    observation.push(Metric::tool(
        QUEUED_BEHIND_METRIC,
        Role::Client,
        f64::from(run.queued_behind),
        "runs",
    ));
    Ok(observation)
}

/// Whether a stored fleet cell could have come from `fleet run` (before a resume runs it):
/// two different `HOST:PORT` agents, a round and a concurrency in range, a network case aimed
/// at the destination. The network case's own check is the caller's (`cli/workloads.rs`).
pub fn check_case(c: &FleetCase) -> Result<(), String> {
    for (what, host) in [("source", &c.source), ("destination", &c.destination)] {
        if !crate::case::is_host_port(host) {
            return Err(format!("its {what} '{host}' is not HOST:PORT"));
        }
    }
    if c.source.eq_ignore_ascii_case(&c.destination) {
        return Err(format!("its source and destination are both {}", c.source));
    }
    let most_rounds = 2 * MAX_HOSTS as u32;
    if c.round == 0 || c.round > most_rounds {
        return Err(format!("round {} (accepted: 1 to {most_rounds})", c.round));
    }
    let most_pairs = (MAX_HOSTS / 2) as u32;
    if c.concurrent_pairs == 0 || c.concurrent_pairs > most_pairs {
        return Err(format!(
            "{} concurrent pairs (accepted: 1 to {most_pairs})",
            c.concurrent_pairs
        ));
    }
    let aimed = aimed_at(&c.case, &c.destination)?;
    if aimed != *c.case {
        return Err(format!(
            "its network case is not aimed at its destination {}",
            c.destination
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{RrCase, Workload};

    /// A `net rr` case as the CLI makes it (for the batch tests too).
    pub(super) fn rr_case() -> Case {
        let json = r#"{"workload":"net-rr","kind":"rr","mode":"two-copy","rx_mode":"copy","request_size":64,"response_size":64,"fields":1,"inflight":1,"threads":1,"rate":null,"duration_ms":1000,"warmup_ms":0,"client_cpus":null,"server_cpus":null,"verify":false,"endpoint":{"kind":"loopback","port":0},"perf":false}"#;
        serde_json::from_str(json).unwrap()
    }

    /// N = 4, all pairs: 12 directed cells in 6 rounds, each aimed at its destination, every
    /// stored cell passing the check a resume makes.
    #[test]
    fn four_hosts_all_pairs_make_twelve_cells_aimed_at_their_destinations() {
        let hosts: Vec<String> = (1..=4).map(|i| format!("10.9.0.{i}:7000")).collect();
        let rounds = rounds(&PairSpec::All, &hosts, 42, 1).unwrap();
        assert_eq!(rounds.len(), 6);
        let cases = cells(&hosts, &rounds, 2, &[rr_case()]).unwrap();
        assert_eq!(cases.len(), 12);
        for case in &cases {
            let c = case.get::<FleetCase>().unwrap();
            check_case(c).unwrap();
            let rr = c.case.get::<RrCase>().unwrap();
            assert_eq!(
                rr.net.endpoint,
                crate::case::Endpoint::Remote {
                    addr: c.destination.clone()
                }
            );
            assert_eq!(c.concurrent_pairs, 2);
            assert!((1..=6).contains(&c.round));
            assert_eq!(c.kind(), "fleet");
        }
        // Rounds run in order: the cells' rounds never go down.
        assert!(cases.windows(2).all(|w| {
            let r = |c: &Case| c.get::<FleetCase>().unwrap().round;
            r(&w[0]) <= r(&w[1])
        }));
    }

    /// All pairs: every host side has its N − 1 partners; a ring none (each destination has
    /// one source); a star's leaves one (the centre), the centre N − 1.
    #[test]
    fn judgeable_partners_count_the_partners_with_a_yardstick() {
        let hosts: Vec<String> = (1..=8).map(|i| format!("10.9.0.{i}:7000")).collect();
        let all = rounds(&PairSpec::All, &hosts, 1, 1).unwrap();
        assert_eq!(judgeable_partners(&all, 8), 7);
        let ring = schedule::pack(&(0..8).map(|i| (i, (i + 1) % 8)).collect::<Vec<_>>());
        assert_eq!(judgeable_partners(&ring, 8), 0);
        let star: Vec<hosts::Pair> = (1..8).flat_map(|i| [(0, i), (i, 0)]).collect();
        assert_eq!(judgeable_partners(&schedule::pack(&star), 8), 1);
    }

    #[test]
    fn a_stored_cell_that_could_not_come_from_fleet_run_is_refused() {
        let hosts: Vec<String> = vec!["a:1".into(), "b:1".into()];
        let rounds = rounds(&PairSpec::All, &hosts, 1, 1).unwrap();
        let good = cells(&hosts, &rounds, 1, &[rr_case()]).unwrap()[0]
            .get::<FleetCase>()
            .unwrap()
            .clone();
        check_case(&good).unwrap();
        let mut bad = good.clone();
        bad.destination = bad.source.clone();
        assert!(check_case(&bad).unwrap_err().contains("both"));
        let mut bad = good.clone();
        *bad.case = rr_case();
        assert!(check_case(&bad).unwrap_err().contains("not aimed"));
        let mut bad = good.clone();
        bad.round = 0;
        assert!(check_case(&bad).unwrap_err().contains("round 0"));
        let mut bad = good;
        *bad.case = Case::Fake(crate::case::FakeCase {
            index: 0,
            behaviour: crate::case::FakeBehaviour::Ok { value: 1 },
        });
        assert!(check_case(&bad).unwrap_err().contains("not fake"));
    }
}
