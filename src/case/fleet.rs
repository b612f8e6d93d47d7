//! A cell of a fleet run (`iopath fleet run`): one network case measured between two agents
//! of `net serve --agent`, the source agent running the client side against the destination.

use super::{Case, Headline, Pinning, Workload};
use serde::{Deserialize, Serialize};
use std::any::Any;

/// One directed pair of a fleet run, in one round, with the network case it measured.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FleetCase {
    /// The agent that runs the client side, as `--hosts` names it (`HOST:PORT`).
    pub source: String,
    /// The agent that serves it, as `--hosts` names it.
    pub destination: String,
    /// The round of the schedule (pairs of one round are disjoint).
    pub round: u32,
    /// How many pairs measure at the same time as this one (1: isolated).
    pub concurrent_pairs: u32,
    /// The network case (`net stream`, `net rr` or `net crr`) the pair runs.
    pub case: Box<Case>,
}

impl Workload for FleetCase {
    fn kind(&self) -> &'static str {
        "fleet"
    }

    fn label(&self) -> String {
        format!(
            "{} -> {} r{}: {}",
            self.source,
            self.destination,
            self.round,
            self.case.label()
        )
    }

    /// The pair and the network case: the round is the schedule's, reshuffled every run.
    fn series(&self) -> String {
        format!("{} -> {}: {}", self.source, self.destination, self.case.label())
    }

    fn hosts(&self) -> Option<String> {
        Some(format!("{} -> {}", self.source, self.destination))
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        let mut params = vec![
            ("source", self.source.clone()),
            ("destination", self.destination.clone()),
            ("round", self.round.to_string()),
            ("concurrent_pairs", self.concurrent_pairs.to_string()),
        ];
        params.extend(self.case.params());
        params
    }

    fn passes(&self) -> u32 {
        self.case.passes()
    }

    /// The round is where the seeded schedule put the pair, not what it measured.
    fn schedule_params(&self) -> &'static [&'static str] {
        &["round"]
    }

    fn planned_seconds(&self) -> f64 {
        self.case.planned_seconds()
    }

    fn window_seconds(&self) -> f64 {
        self.case.as_workload().window_seconds()
    }

    fn pinning(&self) -> Pinning<'_> {
        self.case.as_workload().pinning()
    }

    fn headline(&self) -> Headline {
        self.case.as_workload().headline()
    }

    /// Depends on the network case inside.
    fn kind_headline(&self) -> Option<&'static str> {
        None
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fleet_cell_round_trips_and_names_its_pair_first() {
        let inner = r#"{"workload":"net-rr","kind":"rr","mode":"two-copy","rx_mode":"copy","request_size":64,"response_size":64,"fields":1,"inflight":1,"threads":1,"rate":null,"duration_ms":3000,"warmup_ms":1000,"client_cpus":null,"server_cpus":null,"verify":false,"endpoint":{"kind":"remote","addr":"10.9.0.3:7000"},"perf":false}"#;
        let json = format!(
            r#"{{"workload":"fleet","source":"10.9.0.2:7000","destination":"10.9.0.3:7000","round":2,"concurrent_pairs":1,"case":{inner}}}"#
        );
        let case: Case = serde_json::from_str(&json).unwrap();
        assert_eq!(case.key(), json);
        let fleet = case.get::<FleetCase>().expect("a fleet case");
        assert_eq!(fleet.case.workload(), "net-rr");
        assert_eq!(case.workload(), "fleet");
        let params = case.params();
        assert_eq!(params[0], ("source", "10.9.0.2:7000".to_string()));
        assert_eq!(params[2], ("round", "2".to_string()));
        // A history's series is the pair and the case, whatever round the schedule drew.
        assert_eq!(
            case.series(),
            format!("10.9.0.2:7000 -> 10.9.0.3:7000: {}", fleet.case.label())
        );
        assert!(case.label().contains(" r2: "), "{}", case.label());
        assert_eq!(
            case.as_workload().headline().name,
            fleet.case.as_workload().headline().name
        );
    }
}
