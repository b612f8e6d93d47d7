//! Parameters of the request/response benchmarks (`iopath net rr` and `iopath net crr`).

use super::{format_bytes, CopyMode, CpuList, Endpoint};
use serde::{Deserialize, Serialize};

/// Request/response on long-lived connections, or a fresh connection per transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum RrKind {
    /// Each connection carries transaction after transaction (netperf TCP_RR, neper tcp_rr).
    Rr,
    /// Every transaction is connect, request, response, close (netperf TCP_CRR, neper tcp_crr).
    Crr,
}

impl RrKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RrKind::Rr => "rr",
            RrKind::Crr => "crr",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RrCase {
    pub kind: RrKind,
    /// How requests and responses are handed to the kernel.
    pub mode: CopyMode,
    /// Bytes per request (client to server).
    pub request_size: u64,
    /// Bytes per response (server to client).
    pub response_size: u64,
    /// Separately allocated fields per message.
    pub fields: usize,
    /// Transactions in flight per connection (closed loop; always 1 for crr).
    pub inflight: usize,
    /// Client threads, each with its own connection (crr: its own series of connections) and
    /// its own server thread.
    pub threads: usize,
    /// Open loop at this many transactions per second in total; None is closed loop.
    pub rate: Option<u64>,
    pub duration_ms: u64,
    pub warmup_ms: u64,
    pub client_cpus: Option<CpuList>,
    pub server_cpus: Option<CpuList>,
    /// Fill every message with a pattern from its sequence number and check every byte.
    pub verify: bool,
    pub endpoint: Endpoint,
    /// Open perf counters on every thread (false: getrusage only).
    pub perf: bool,
}

impl RrCase {
    /// `rr one-copy 64B/1KiB n4 t2 @10000/s`.
    pub fn label(&self) -> String {
        let mut label = format!(
            "{} {} {}/{}",
            self.kind.as_str(),
            self.mode,
            format_bytes(self.request_size),
            format_bytes(self.response_size)
        );
        if self.kind == RrKind::Rr {
            label.push_str(&format!(" n{}", self.inflight));
        }
        label.push_str(&format!(" t{}", self.threads));
        if let Some(rate) = self.rate {
            label.push_str(&format!(" @{rate}/s"));
        }
        label
    }

    pub fn params(&self) -> Vec<(&'static str, String)> {
        let cpus = |c: &Option<CpuList>| match c {
            Some(list) => list.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" "),
            None => "any".to_string(),
        };
        vec![
            ("kind", self.kind.as_str().to_string()),
            ("mode", self.mode.to_string()),
            ("request_bytes", self.request_size.to_string()),
            ("response_bytes", self.response_size.to_string()),
            ("fields", self.fields.to_string()),
            ("inflight", self.inflight.to_string()),
            ("threads", self.threads.to_string()),
            ("rate", self.rate.map_or("closed".to_string(), |r| r.to_string())),
            ("duration_ms", self.duration_ms.to_string()),
            ("warmup_ms", self.warmup_ms.to_string()),
            ("client_cpus", cpus(&self.client_cpus)),
            ("server_cpus", cpus(&self.server_cpus)),
            ("verify", self.verify.to_string()),
            ("perf", self.perf.to_string()),
        ]
    }

    /// The longest session (warm-up + window) this case asks of a server.
    pub fn session_ms(&self) -> u64 {
        self.duration_ms.saturating_add(self.warmup_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_what_differs_and_cases_round_trip() {
        let case = RrCase {
            kind: RrKind::Rr,
            mode: CopyMode::OneCopy,
            request_size: 64,
            response_size: 1024,
            fields: 1,
            inflight: 4,
            threads: 2,
            rate: Some(10_000),
            duration_ms: 1000,
            warmup_ms: 100,
            client_cpus: None,
            server_cpus: None,
            verify: false,
            endpoint: Endpoint::Loopback { port: 0 },
            perf: true,
        };
        assert_eq!(case.label(), "rr one-copy 64B/1KiB n4 t2 @10000/s");
        let crr = RrCase {
            kind: RrKind::Crr,
            inflight: 1,
            rate: None,
            ..case.clone()
        };
        assert_eq!(crr.label(), "crr one-copy 64B/1KiB t2");
        let text = serde_json::to_string(&crr).unwrap();
        assert_eq!(serde_json::from_str::<RrCase>(&text).unwrap(), crr);
    }
}
