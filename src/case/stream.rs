//! Parameters of the network stream benchmark (`iopath net stream`).

use super::{format_bytes, CpuList};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How a message of separately allocated fields is handed to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum CopyMode {
    /// Serialise the fields into one buffer in user space, then send() it.
    TwoCopy,
    /// sendmsg() with one iovec per field: the only copy is the kernel's.
    OneCopy,
    /// sendmsg(MSG_ZEROCOPY) with one iovec per field: the kernel pins the pages.
    ZeroCopy,
    /// io_uring SENDMSG with one iovec per field: one-copy's copies, io_uring's syscall model.
    Uring,
    /// io_uring SENDMSG_ZC with one iovec per field; a slot is reused after its notification.
    UringZc,
    /// The message's bytes staged in a file (page cache), sent with sendfile().
    Sendfile,
    /// vmsplice() the fields into a pipe, splice() the pipe into the socket.
    Splice,
}

impl CopyMode {
    pub const ALL: [CopyMode; 7] = [
        CopyMode::TwoCopy,
        CopyMode::OneCopy,
        CopyMode::ZeroCopy,
        CopyMode::Uring,
        CopyMode::UringZc,
        CopyMode::Sendfile,
        CopyMode::Splice,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CopyMode::TwoCopy => "two-copy",
            CopyMode::OneCopy => "one-copy",
            CopyMode::ZeroCopy => "zero-copy",
            CopyMode::Uring => "uring",
            CopyMode::UringZc => "uring-zc",
            CopyMode::Sendfile => "sendfile",
            CopyMode::Splice => "splice",
        }
    }
}

impl fmt::Display for CopyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for CopyMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        CopyMode::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| {
            let accepted: Vec<&str> = CopyMode::ALL.iter().map(|m| m.as_str()).collect();
            format!("unknown mode '{s}' (accepted: {})", accepted.join(", "))
        })
    }
}

/// Where the two ends of the stream live.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Endpoint {
    /// Both ends in this process over 127.0.0.1; port 0 picks a free one.
    Loopback { port: u16 },
    /// The client here, the server an `iopath net serve` at this address.
    Remote { addr: String },
    /// Both ends in this process on the loopback of a fresh private network namespace.
    Netns { port: u16 },
    /// The client here, the server in a fresh namespace behind a veth pair.
    Veth {
        port: u16,
        #[serde(flatten)]
        link: crate::net::topology::Link,
    },
}

impl Endpoint {
    /// The port the in-process server listens on (0: any free one; remote: none).
    pub fn port(&self) -> u16 {
        match self {
            Endpoint::Loopback { port } | Endpoint::Netns { port } | Endpoint::Veth { port, .. } => *port,
            Endpoint::Remote { .. } => 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StreamCase {
    pub mode: CopyMode,
    /// Bytes per message (sum of all fields).
    pub size: u64,
    /// Separately allocated fields per message.
    pub fields: usize,
    /// Client threads, each with its own connection and its own server thread.
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
    #[serde(default = "perf_default")]
    pub perf: bool,
    /// Before the measured run, probe what the kernel does with the sender's bytes (copied or
    /// by reference) on a loopback pair: net/alias.rs. Left out of the JSON when false, so the
    /// keys of cases stored before it existed are unchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prove_copies: bool,
}

fn perf_default() -> bool {
    true
}

impl StreamCase {
    pub fn label(&self) -> String {
        format!("{} {} t{}", self.mode, format_bytes(self.size), self.threads)
    }

    pub fn params(&self) -> Vec<(&'static str, String)> {
        let cpus = |c: &Option<CpuList>| match c {
            Some(list) => list.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" "),
            None => "any".to_string(),
        };
        vec![
            ("mode", self.mode.to_string()),
            ("size_bytes", self.size.to_string()),
            ("fields", self.fields.to_string()),
            ("threads", self.threads.to_string()),
            ("duration_ms", self.duration_ms.to_string()),
            ("warmup_ms", self.warmup_ms.to_string()),
            ("client_cpus", cpus(&self.client_cpus)),
            ("server_cpus", cpus(&self.server_cpus)),
            ("verify", self.verify.to_string()),
            ("perf", self.perf.to_string()),
            ("prove_copies", self.prove_copies.to_string()),
        ]
    }
}

#[cfg(test)]
mod endpoint_tests {
    use super::*;

    /// prove_copies is left out when false, so the key (the JSON) of a case stored before the
    /// field existed is unchanged and it reads back as false; when true it round-trips.
    #[test]
    fn prove_copies_keeps_old_keys_and_round_trips() {
        let mut case = StreamCase {
            mode: CopyMode::Sendfile,
            size: 1024,
            fields: 1,
            threads: 1,
            duration_ms: 100,
            warmup_ms: 0,
            client_cpus: None,
            server_cpus: None,
            verify: false,
            endpoint: Endpoint::Loopback { port: 0 },
            perf: true,
            prove_copies: false,
        };
        let text = serde_json::to_string(&case).unwrap();
        assert!(!text.contains("prove_copies"), "{text}");
        assert_eq!(serde_json::from_str::<StreamCase>(&text).unwrap(), case);
        case.prove_copies = true;
        let text = serde_json::to_string(&case).unwrap();
        assert!(text.contains("\"prove_copies\":true"), "{text}");
        assert_eq!(serde_json::from_str::<StreamCase>(&text).unwrap(), case);
        assert!(case.params().contains(&("prove_copies", "true".to_string())));
    }

    #[test]
    fn namespace_endpoints_round_trip_through_json() {
        let veth = Endpoint::Veth {
            port: 0,
            link: crate::net::topology::Link {
                mtu: Some(4148),
                rate_bps: Some(100_000_000),
                ..Default::default()
            },
        };
        for e in [Endpoint::Netns { port: 7 }, veth, Endpoint::Loopback { port: 0 }] {
            let text = serde_json::to_string(&e).unwrap();
            assert_eq!(serde_json::from_str::<Endpoint>(&text).unwrap(), e, "{text}");
        }
    }
}
