//! The parameters every network workload has (`net stream`, `net rr`/`net crr`,
//! `net records`): one struct, flattened into each case so the stored JSON keeps its flat keys.

use super::{CpuList, Endpoint};
use serde::{Deserialize, Serialize};

/// Threads, the window, where the threads run, verification, where the ends live and whether
/// perf counters are open. `#[serde(flatten)]` into `StreamCase`, `RrCase` and `RecordsCase`:
/// its fields are keys of the case's own JSON object, in this order, as they were before the
/// struct existed (a case's JSON is its key in the store).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NetParams {
    /// Client threads, each with its own connection (crr: its own series of connections) and
    /// its own server thread.
    pub threads: usize,
    pub duration_ms: u64,
    pub warmup_ms: u64,
    pub client_cpus: Option<CpuList>,
    pub server_cpus: Option<CpuList>,
    /// Check every received byte against the sender's pattern.
    pub verify: bool,
    pub endpoint: Endpoint,
    /// Open perf counters on every thread (false: getrusage only; a perf event costs time at
    /// every context switch of the thread it watches).
    pub perf: bool,
}

impl NetParams {
    /// For tests: one thread on loopback, a 100 ms window without warm-up, unpinned, no
    /// verification, no perf counters; a test sets what it cares about with
    /// `NetParams { threads: 2, ..NetParams::for_test() }`.
    #[doc(hidden)]
    pub fn for_test() -> NetParams {
        NetParams {
            threads: 1,
            duration_ms: 100,
            warmup_ms: 0,
            client_cpus: None,
            server_cpus: None,
            verify: false,
            endpoint: Endpoint::Loopback { port: 0 },
            perf: false,
        }
    }

    /// Warm-up plus measured window, in milliseconds: one pass of the session.
    pub fn session_ms(&self) -> u64 {
        self.duration_ms.saturating_add(self.warmup_ms)
    }

    /// The same with perf events on or off (the latency and counting passes of rr and udp-rr).
    pub fn with_perf(&self, perf: bool) -> NetParams {
        NetParams { perf, ..self.clone() }
    }

    /// [`NetParams::session_ms`] in seconds.
    pub fn session_seconds(&self) -> f64 {
        self.session_ms() as f64 / 1e3
    }

    /// The longest latency one pass of the session can record (`case::latency_bound`).
    pub fn longest_latency(&self) -> Option<std::time::Duration> {
        super::latency_bound(self.session_seconds())
    }

    /// The window, CPUs, verify and perf as a case's params (the names and texts every
    /// network case's `params` lists, in this order, after its own).
    pub fn window_params(&self) -> [(&'static str, String); 6] {
        [
            ("duration_ms", self.duration_ms.to_string()),
            ("warmup_ms", self.warmup_ms.to_string()),
            ("client_cpus", super::cpus::param_text(&self.client_cpus)),
            ("server_cpus", super::cpus::param_text(&self.server_cpus)),
            ("verify", self.verify.to_string()),
            ("perf", self.perf.to_string()),
        ]
    }

    /// The CPUs the client and the server threads are pinned to.
    pub fn pinning(&self) -> super::Pinning<'_> {
        super::Pinning {
            client: self.client_cpus.as_ref(),
            server: self.server_cpus.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::case::{Case, CopyMode, Endpoint, RecordsCase, RrCase, StreamCase};

    /// Cases as the store held them before `NetParams` existed (each in the key order its
    /// flat struct wrote): each loads, and writes back byte for byte, so its key is the same.
    const OLD: [&str; 3] = [
        r#"{"workload":"net-stream","mode":"one-copy","rx_mode":"scatter","size":65536,"fields":8,"threads":2,"duration_ms":1000,"warmup_ms":200,"client_cpus":[0,1],"server_cpus":[2,3],"verify":true,"endpoint":{"kind":"veth","port":0,"mtu":4148},"perf":false,"prove_copies":true,"zc_ring":1048576,"align":"misaligned"}"#,
        r#"{"workload":"net-rr","kind":"crr","mode":"two-copy","rx_mode":"copy","request_size":64,"response_size":1024,"fields":1,"inflight":1,"threads":3,"rate":5000,"duration_ms":300,"warmup_ms":0,"client_cpus":null,"server_cpus":[1],"verify":false,"endpoint":{"kind":"remote","addr":"10.0.0.2:7000"},"perf":true}"#,
        r#"{"workload":"net-records","mode":"zero-copy","record_size":128,"records":16,"table_bytes":1048576,"pick":"hot","outstanding":8,"threads":1,"duration_ms":1000,"warmup_ms":100,"client_cpus":[0],"server_cpus":null,"verify":true,"endpoint":{"kind":"netns","port":0},"perf":false}"#,
    ];

    #[test]
    fn a_case_stored_before_net_params_loads_and_keeps_its_key() {
        for old in OLD {
            let case: Case = serde_json::from_str(old).unwrap_or_else(|e| panic!("{e}: {old}"));
            assert_eq!(case.key(), old);
            assert_eq!(serde_json::from_str::<Case>(&case.key()).unwrap(), case);
        }
        let Case::NetStream(stream) = serde_json::from_str::<Case>(OLD[0]).unwrap() else {
            panic!("not a stream case")
        };
        assert_eq!(
            (stream.mode, stream.net.threads, stream.net.perf),
            (CopyMode::OneCopy, 2, false)
        );
        assert_eq!(stream.net.client_cpus.map(|c| c.to_string()).as_deref(), Some("0-1"));
        let Case::NetRr(rr) = serde_json::from_str::<Case>(OLD[1]).unwrap() else {
            panic!("not an rr case")
        };
        assert_eq!((rr.rate, rr.net.threads, rr.net.duration_ms), (Some(5000), 3, 300));
        assert_eq!(
            rr.net.endpoint,
            Endpoint::Remote {
                addr: "10.0.0.2:7000".into()
            }
        );
        let Case::NetRecords(records) = serde_json::from_str::<Case>(OLD[2]).unwrap() else {
            panic!("not a records case")
        };
        assert_eq!((records.net.warmup_ms, records.net.verify), (100, true));
    }

    /// What each case refused or defaulted before, it still does: records and rr need
    /// `perf`, a stream case without it reads as perf on; a missing common field is an error.
    #[test]
    fn missing_common_fields_behave_as_before() {
        let drop = |text: &str, key: &str| {
            let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
            v.as_object_mut().unwrap().remove(key);
            v.as_object_mut().unwrap().remove("workload");
            v.to_string()
        };
        let stream: StreamCase = serde_json::from_str(&drop(OLD[0], "perf")).unwrap();
        assert!(stream.net.perf);
        assert!(serde_json::from_str::<RrCase>(&drop(OLD[1], "perf")).is_err());
        assert!(serde_json::from_str::<RecordsCase>(&drop(OLD[2], "perf")).is_err());
        assert!(serde_json::from_str::<RecordsCase>(&drop(OLD[2], "threads")).is_err());
        assert!(serde_json::from_str::<RrCase>(&drop(OLD[1], "duration_ms")).is_err());
        assert!(serde_json::from_str::<StreamCase>(&drop(OLD[0], "endpoint")).is_err());
    }
}
