//! Parameters of the server concurrency-model benchmark (`iopath servers`).

use super::{cpus, CpuList, Model, Request, Topology};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ServersCase {
    pub model: Model,
    /// What each client asks for, `echo:<bytes>` or `procs:<k>` (the `--workload` flag). Not
    /// named `workload`: that is the Case enum's serde tag and the CSV's workload column.
    pub request: Request,
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
    /// CPU lists for the server and client threads, stored in kernel syntax (e.g. "0" or "0-1").
    #[serde(with = "cpus::as_text")]
    pub server_cpus: Option<CpuList>,
    #[serde(with = "cpus::as_text")]
    pub client_cpus: Option<CpuList>,
    /// Open perf counters on the server threads (they cost time at every context switch).
    pub perf: bool,
    /// Where the server and the load generator live (`--topology`; absent: loopback).
    #[serde(default, skip_serializing_if = "Topology::is_loopback")]
    pub topology: Topology,
}

impl ServersCase {
    /// A closed-loop, unpinned case with perf counters on, 1 s warm-up, one load-generator
    /// thread and a pool of 4: what a sweep grid fills in before overriding fields.
    pub fn new(model: Model, request: Request, clients: usize, duration_ms: u64) -> ServersCase {
        ServersCase {
            model,
            request,
            clients,
            duration_ms,
            warmup_ms: 1000,
            rate: None,
            client_threads: 1,
            pool_size: 4,
            server_cpus: None,
            client_cpus: None,
            perf: true,
            topology: Default::default(),
        }
    }

    pub fn label(&self) -> String {
        // The echo payload reads as a size (echo:4KiB), still a valid --request value; the
        // stored form stays Request's Display (echo:4096).
        let request = match self.request {
            Request::Echo(bytes) => format!("echo:{}", crate::format::format_bytes(bytes as u64)),
            other => other.to_string(),
        };
        format!("{} {request} c{}", self.model, self.clients)
    }

    pub fn params(&self) -> Vec<(&'static str, String)> {
        vec![
            ("model", self.model.to_string()),
            ("request", self.request.to_string()),
            ("clients", self.clients.to_string()),
            ("duration_ms", self.duration_ms.to_string()),
            ("warmup_ms", self.warmup_ms.to_string()),
            ("rate", self.rate.map_or("closed".into(), |r| r.to_string())),
            ("client_threads", self.client_threads.to_string()),
            ("pool_size", self.pool_size.to_string()),
            (
                "server_cpus",
                self.server_cpus.as_ref().map_or("any".into(), |c| c.to_string()),
            ),
            (
                "client_cpus",
                self.client_cpus.as_ref().map_or("any".into(), |c| c.to_string()),
            ),
            ("perf", if self.perf { "on".into() } else { "off".into() }),
        ]
    }
}

impl super::Workload for ServersCase {
    fn kind(&self) -> &'static str {
        "servers"
    }

    fn label(&self) -> String {
        ServersCase::label(self)
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        ServersCase::params(self)
    }

    fn passes(&self) -> u32 {
        if self.perf {
            2
        } else {
            1
        }
    }

    fn planned_seconds(&self) -> f64 {
        super::Workload::passes(self) as f64 * ((self.warmup_ms + self.duration_ms) as f64 / 1e3 + 0.1)
    }

    fn window_seconds(&self) -> f64 {
        super::Workload::passes(self) as f64 * (self.duration_ms + self.warmup_ms) as f64 / 1e3
    }

    fn pinning(&self) -> super::Pinning<'_> {
        super::Pinning {
            client: self.client_cpus.as_ref(),
            server: self.server_cpus.as_ref(),
        }
    }

    fn headline(&self) -> super::Headline {
        super::Headline::system(crate::observation::names::REQUESTS_PER_S, "req/s", true)
    }

    fn contest(&self) -> Option<super::Contest> {
        Some(super::Contest {
            group: format!("servers, {}", self.request),
            contender: self.model.to_string(),
            x: self.clients as u64,
            x_text: super::workload::count(self.clients, "client"),
            contenders_are: "model",
            axis: "load",
            everywhere: "every load",
            best_word: "best",
        })
    }

    fn charts_judge_minority(&self) -> bool {
        true
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Case;

    #[test]
    fn serde_round_trip_keeps_the_workload_tag_apart() {
        let case = Case::Servers(ServersCase::new(Model::Epoll, Request::Echo(64), 100, 5000));
        let json = serde_json::to_string(&case).unwrap();
        assert!(json.contains("\"workload\":\"servers\""), "{json}");
        assert!(json.contains("\"request\":\"echo:64\""), "{json}");
        assert_eq!(serde_json::from_str::<Case>(&json).unwrap(), case);
        assert_eq!(case.label(), "epoll echo:64B c100");
        let big = ServersCase::new(Model::Epoll, Request::Echo(4096), 1, 5000);
        assert_eq!(big.label(), "epoll echo:4KiB c1");
        assert_eq!("echo:4KiB".parse::<Request>(), Ok(Request::Echo(4096)));
        let names: Vec<_> = case.params().into_iter().map(|(n, _)| n).collect();
        assert!(names.contains(&"model") && names.contains(&"clients") && !names.contains(&"workload"));
    }

    /// Cases stored by earlier versions (model, request and CPU lists as text) load into the
    /// typed case and serialise back byte for byte (a stream case gains only its `rx_mode`), so
    /// old result databases keep working.
    #[test]
    fn stored_json_loads_typed_and_serialises_unchanged() {
        let stored = [
            r#"{"workload":"servers","model":"epoll-et","request":"echo:64","clients":100,"duration_ms":5000,"warmup_ms":1000,"rate":null,"client_threads":1,"pool_size":4,"server_cpus":"0-1","client_cpus":"2","perf":true}"#,
            r#"{"workload":"servers","model":"uring","request":"procs:2","clients":10,"duration_ms":3000,"warmup_ms":500,"rate":2000,"client_threads":2,"pool_size":8,"server_cpus":null,"client_cpus":"0,2","perf":false}"#,
            r#"{"workload":"net-stream","mode":"zero-copy","size":65536,"fields":8,"threads":2,"duration_ms":5000,"warmup_ms":1000,"client_cpus":[0,1],"server_cpus":null,"verify":false,"endpoint":{"kind":"loopback","port":0},"perf":true}"#,
        ];
        for json in stored {
            let case: Case = serde_json::from_str(json).unwrap();
            // A stream case stored before receive modes existed is written back naming the
            // receive mode it was run with (the pairing of its send mode), nothing else changed.
            let expected = json.replace(r#""mode":"zero-copy","#, r#""mode":"zero-copy","rx_mode":"scatter","#);
            assert_eq!(serde_json::to_string(&case).unwrap(), expected);
        }
        let Case::Servers(s) = serde_json::from_str(stored[0]).unwrap() else {
            panic!("not a servers case")
        };
        assert_eq!((s.model, s.request), (Model::EpollEt, Request::Echo(64)));
        assert_eq!(s.server_cpus.as_deref(), Some(&[0, 1][..]));
        assert!(serde_json::from_str::<Case>(&stored[0].replace("epoll-et", "forking")).is_err());
    }
}
