//! Parameters of the server concurrency-model benchmark (`iopath servers`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ServersCase {
    /// iterative, threads, pool, select, poll, epoll, epoll-et, uring.
    pub model: String,
    /// What each client asks for, `echo:<bytes>` or `procs:<k>` (the `--workload` flag). Not
    /// named `workload`: that is the Case enum's serde tag and the CSV's workload column.
    pub request: String,
    /// Concurrent client connections.
    pub clients: usize,
    pub duration_ms: u64,
    pub warmup_ms: u64,
    /// Open-loop total request rate per second; None for closed loop.
    pub rate: Option<u64>,
    /// Load-generator threads the clients are spread over.
    pub client_threads: usize,
    /// Workers of the pool model.
    pub pool_size: usize,
    /// CPU lists (kernel syntax, e.g. "0" or "0-1") for the server and client threads.
    pub server_cpus: Option<String>,
    pub client_cpus: Option<String>,
    /// Open perf counters on the server threads (they cost time at every context switch).
    pub perf: bool,
}

impl ServersCase {
    /// A closed-loop, unpinned case with perf counters on, 1 s warm-up, one load-generator
    /// thread and a pool of 4: what a sweep grid fills in before overriding fields.
    pub fn new(model: &str, request: &str, clients: usize, duration_ms: u64) -> ServersCase {
        ServersCase {
            model: model.into(),
            request: request.into(),
            clients,
            duration_ms,
            warmup_ms: 1000,
            rate: None,
            client_threads: 1,
            pool_size: 4,
            server_cpus: None,
            client_cpus: None,
            perf: true,
        }
    }

    pub fn label(&self) -> String {
        format!("{} {} c{}", self.model, self.request, self.clients)
    }

    pub fn params(&self) -> Vec<(&'static str, String)> {
        vec![
            ("model", self.model.clone()),
            ("request", self.request.clone()),
            ("clients", self.clients.to_string()),
            ("duration_ms", self.duration_ms.to_string()),
            ("warmup_ms", self.warmup_ms.to_string()),
            ("rate", self.rate.map_or("closed".into(), |r| r.to_string())),
            ("client_threads", self.client_threads.to_string()),
            ("pool_size", self.pool_size.to_string()),
            ("server_cpus", self.server_cpus.clone().unwrap_or_else(|| "any".into())),
            ("client_cpus", self.client_cpus.clone().unwrap_or_else(|| "any".into())),
            ("perf", if self.perf { "on".into() } else { "off".into() }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Case;

    #[test]
    fn serde_round_trip_keeps_the_workload_tag_apart() {
        let case = Case::Servers(ServersCase::new("epoll", "echo:64", 100, 5000));
        let json = serde_json::to_string(&case).unwrap();
        assert!(json.contains("\"workload\":\"servers\""), "{json}");
        assert!(json.contains("\"request\":\"echo:64\""), "{json}");
        assert_eq!(serde_json::from_str::<Case>(&json).unwrap(), case);
        assert_eq!(case.label(), "epoll echo:64 c100");
        let names: Vec<_> = case.params().into_iter().map(|(n, _)| n).collect();
        assert!(names.contains(&"model") && names.contains(&"clients") && !names.contains(&"workload"));
    }
}
