//! A Case is one fully specified experiment point: which workload and all its parameters.
//! Cases are plain data: serialisable, hashable, and printable as a short label.

/// `Display` (its `as_str`) and `FromStr` (one of its `ALL`, or "unknown NOUN 'x' (accepted:
/// a, b, c)") for an enum of named choices such as a mode.
macro_rules! named_choices {
    ($ty:ty, $noun:literal) => {
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                <$ty>::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| {
                    let accepted: Vec<&str> = <$ty>::ALL.iter().map(|m| m.as_str()).collect();
                    format!(
                        concat!("unknown ", $noun, " '{}' (accepted: {})"),
                        s,
                        accepted.join(", ")
                    )
                })
            }
        }
    };
}

mod align;
mod bench;
pub mod cpus;
mod fake;
mod micro;
mod model;
mod net;
mod records;
mod request;
mod rr;
mod servers;
mod stream;

pub use align::{Align, MISALIGNED_OFFSET};
pub use bench::Bench;
pub use cpus::CpuList;
pub use fake::{FakeBehaviour, FakeCase};
pub use micro::MicroCase;
pub use model::Model;
pub use net::NetParams;
pub use records::{Pick, RecordsCase, RecordsMode, HOT_SET_BYTES};
pub use request::Request;
pub use rr::{RrCase, RrKind};
pub use servers::ServersCase;
pub use stream::{CopyMode, Endpoint, RxMode, StreamCase};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "workload", rename_all = "kebab-case")]
pub enum Case {
    NetStream(StreamCase),
    NetRecords(RecordsCase),
    Servers(ServersCase),
    Micro(MicroCase),
    /// `net rr` and `net crr` (one case type; its `kind` says which).
    NetRr(RrCase),
    /// Hidden test workload (see case/fake.rs).
    Fake(FakeCase),
}

impl Case {
    /// The workload's name as the CLI spells it (`net-stream`, `servers`, `micro`).
    pub fn workload(&self) -> &'static str {
        match self {
            Case::NetStream(_) => "net-stream",
            Case::NetRecords(_) => "net-records",
            Case::Servers(_) => "servers",
            Case::Micro(_) => "micro",
            Case::NetRr(c) => match c.kind {
                RrKind::Rr => "net-rr",
                RrKind::Crr => "net-crr",
            },
            Case::Fake(_) => "fake",
        }
    }

    /// A short human label, unique within a sweep grid (e.g. `one-copy 64KiB t2`).
    pub fn label(&self) -> String {
        match self {
            Case::NetStream(c) => c.label(),
            Case::NetRecords(c) => c.label(),
            Case::Servers(c) => c.label(),
            Case::Micro(c) => c.label(),
            Case::NetRr(c) => c.label(),
            Case::Fake(c) => c.label(),
        }
    }

    /// A stable text key (canonical JSON) used to match cells across runs and on resume.
    pub fn key(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| self.label())
    }

    /// How many windows one cell runs: rr, crr and servers with counters on run a latency pass
    /// without per-thread perf events and then a counting pass with them (docs/methodology.md).
    pub fn passes(&self) -> u32 {
        match self {
            Case::NetRr(c) if c.net.perf => 2,
            Case::Servers(c) if c.perf => 2,
            _ => 1,
        }
    }

    /// Roughly how long one cell of this case takes, in seconds, for the progress ETA.
    pub fn planned_seconds(&self) -> f64 {
        match self {
            Case::NetStream(c) => (c.net.warmup_ms + c.net.duration_ms) as f64 / 1e3 + 0.05,
            // Filling the table takes about a second per GiB.
            Case::NetRecords(c) => {
                (c.net.warmup_ms + c.net.duration_ms) as f64 / 1e3 + 0.05 + c.table_bytes as f64 / 1e9
            }
            Case::Servers(c) => self.passes() as f64 * ((c.warmup_ms + c.duration_ms) as f64 / 1e3 + 0.1),
            Case::Micro(_) => 1.0,
            Case::NetRr(c) => self.passes() as f64 * (c.session_ms() as f64 / 1e3 + 0.1),
            Case::Fake(c) => match c.behaviour {
                FakeBehaviour::Sleep { ms } | FakeBehaviour::Stubborn { ms } => ms as f64 / 1e3,
                _ => 0.0,
            },
        }
    }

    /// The case's parameters as flat (name, value) pairs, for table and CSV columns.
    pub fn params(&self) -> Vec<(&'static str, String)> {
        match self {
            Case::NetStream(c) => c.params(),
            Case::NetRecords(c) => c.params(),
            Case::Servers(c) => c.params(),
            Case::Micro(c) => c.params(),
            Case::NetRr(c) => c.params(),
            Case::Fake(c) => c.params(),
        }
    }
}

pub use crate::format::format_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every named choice reads back from its text, and a wrong one names what is accepted.
    #[test]
    fn named_choices_round_trip_and_name_what_is_accepted() {
        for m in CopyMode::ALL {
            assert_eq!(m.to_string().parse::<CopyMode>(), Ok(m));
        }
        for p in Pick::ALL {
            assert_eq!(p.to_string().parse::<Pick>(), Ok(p));
        }
        assert_eq!(
            "x".parse::<RxMode>().unwrap_err(),
            "unknown receive mode 'x' (accepted: copy, scatter, trunc, zerocopy)"
        );
        assert_eq!(
            "x".parse::<RecordsMode>().unwrap_err(),
            "unknown mode 'x' (accepted: copy-out, gather, zero-copy, uring-zc)"
        );
        assert_eq!(
            "x".parse::<Pick>().unwrap_err(),
            "unknown pick 'x' (accepted: random, hot)"
        );
        assert_eq!(cpus::param_text(&Some(CpuList::new(vec![2, 0]))), "2 0");
        assert_eq!(cpus::param_text(&None), "any");
    }
}
