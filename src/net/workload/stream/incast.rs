//! An incast (`net stream --clients M`): M stream sessions at once against one server, their
//! observations made into the cell's one. Each client's throughput is its own figure
//! (`throughput_gbps_client<i>`), the headline throughput their sum, beside the slowest and
//! fastest client and Jain's fairness index over them.

use crate::net::session::observe::jain_index;
use crate::observation::{names, Metric, Observation, Role, Source};

/// The figures that add up over client sessions (each session's own bytes, messages, rates,
/// its connections' retransmits and its threads' CPU time); every other figure — the
/// machine's probes, which each session read over the same shared window, and the ratios —
/// is the mean over the sessions that have it.
const ADDITIVE: &[(&str, Role)] = &[
    (names::THROUGHPUT_GBPS, Role::System),
    (names::MESSAGES_PER_S, Role::System),
    (names::BYTES_SENT, Role::Client),
    (names::MESSAGES_SENT, Role::Client),
    (names::BYTES_RECEIVED, Role::Server),
    ("verified_messages", Role::Server),
    (names::CORRUPT_MESSAGES, Role::Server),
    ("tcpi_total_retrans", Role::Client),
    ("tcpi_delivery_rate_gbps", Role::Client),
    (names::CPU_USER_S, Role::Client),
    (names::CPU_SYS_S, Role::Client),
    (names::CPU_USER_S, Role::Server),
    (names::CPU_SYS_S, Role::Server),
];

/// One observation from the client sessions' (in their order): the first session's metrics
/// in their order, each summed or averaged over the sessions, then the per-client figures;
/// every session's warnings once and every thread's placement.
pub(super) fn combine(sessions: Vec<Observation>) -> Observation {
    let mut obs = Observation::default();
    let Some(first) = sessions.first() else {
        return obs;
    };
    for metric in &first.metrics {
        let values: Vec<f64> = sessions
            .iter()
            .filter_map(|o| o.get(&metric.name, metric.role).and_then(|m| m.value))
            .collect();
        let additive = ADDITIVE.contains(&(metric.name.as_str(), metric.role));
        let value = match (values.len(), additive) {
            (0, _) => None,
            (_, true) if values.len() < sessions.len() => None,
            (_, true) => Some(values.iter().sum()),
            (n, false) => Some(values.iter().sum::<f64>() / n as f64),
        };
        obs.push(match value {
            Some(v) => Metric::new(&metric.name, metric.role, v, &metric.unit, metric.source.clone()),
            None if metric.value.is_none() => metric.clone(),
            None => Metric::unavailable(
                &metric.name,
                metric.role,
                &metric.unit,
                "not every client session has this figure, so there is no sum",
            ),
        });
    }
    push_clients(&mut obs, &sessions);
    for session in &sessions {
        for warning in &session.warnings {
            if !obs.warnings.contains(warning) {
                obs.warnings.push(warning.clone());
            }
        }
        obs.placement.extend(session.placement.iter().cloned());
    }
    obs
}

/// Each client's throughput, the slowest and fastest, and Jain's index over them (unavailable
/// when a client has no throughput: its window never measured).
fn push_clients(obs: &mut Observation, sessions: &[Observation]) {
    let gbps: Vec<Option<f64>> = sessions
        .iter()
        .map(|o| o.value(names::THROUGHPUT_GBPS, Role::System))
        .collect();
    for (i, g) in gbps.iter().enumerate() {
        let name = names::per_client(names::THROUGHPUT_GBPS, i);
        obs.push(match g {
            Some(v) => Metric::new(&name, Role::System, *v, "Gbit/s", Source::Tool),
            None => Metric::unavailable(&name, Role::System, "Gbit/s", "this client's window measured nothing"),
        });
    }
    let all: Option<Vec<f64>> = gbps.into_iter().collect();
    let why = "a client's window measured nothing";
    let figure = |name: &str, value: Option<f64>, unit: &str| match value {
        Some(v) => Metric::new(name, Role::System, v, unit, Source::Tool),
        None => Metric::unavailable(name, Role::System, unit, why),
    };
    let all = all.as_deref();
    obs.push(figure(
        names::CLIENT_MIN_GBPS,
        all.map(|g| g.iter().copied().fold(f64::INFINITY, f64::min)),
        "Gbit/s",
    ));
    obs.push(figure(
        names::CLIENT_MAX_GBPS,
        all.map(|g| g.iter().copied().fold(0.0, f64::max)),
        "Gbit/s",
    ));
    obs.push(figure(names::JAIN_INDEX, all.and_then(jain_index), "index"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(gbps: f64, retransmits: f64, busy: f64) -> Observation {
        let mut o = Observation::default();
        o.push(Metric::tool(names::THROUGHPUT_GBPS, Role::System, gbps, "Gbit/s"));
        o.push(Metric::new(
            "tcpi_total_retrans",
            Role::Client,
            retransmits,
            "segments",
            Source::Kernel,
        ));
        o.push(Metric::new(
            "tcp_retransmits",
            Role::System,
            busy,
            "segments",
            Source::Kernel,
        ));
        o
    }

    /// Throughput and the connections' retransmits add up; a machine-wide counter read by
    /// every session over the same window is their mean; each client keeps its own figure.
    #[test]
    fn sessions_add_up_where_they_are_their_own_and_average_where_they_share() {
        let obs = combine(vec![session(0.3, 2.0, 10.0), session(0.6, 1.0, 12.0)]);
        let value = |n: &str, r| obs.value(n, r).unwrap();
        assert!((value(names::THROUGHPUT_GBPS, Role::System) - 0.9).abs() < 1e-9);
        assert_eq!(value("tcpi_total_retrans", Role::Client), 3.0);
        assert_eq!(value("tcp_retransmits", Role::System), 11.0);
        assert_eq!(value("throughput_gbps_client1", Role::System), 0.6);
        assert_eq!(value(names::CLIENT_MIN_GBPS, Role::System), 0.3);
        // (0.9)² / (2 × (0.09 + 0.36)) = 0.9
        assert!((value(names::JAIN_INDEX, Role::System) - 0.9).abs() < 1e-9);
    }
}
