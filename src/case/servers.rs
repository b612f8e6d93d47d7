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
