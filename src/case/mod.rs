//! A Case is one fully specified experiment point: which workload and all its parameters.
//! Cases are plain data: serialisable, hashable, and printable as a short label.

mod bench;
pub mod cpus;
mod micro;
mod model;
mod request;
mod servers;
mod stream;

pub use bench::Bench;
pub use cpus::CpuList;
pub use micro::MicroCase;
pub use model::Model;
pub use request::Request;
pub use servers::ServersCase;
pub use stream::{CopyMode, Endpoint, StreamCase};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "workload", rename_all = "kebab-case")]
pub enum Case {
    NetStream(StreamCase),
    Servers(ServersCase),
    Micro(MicroCase),
}

impl Case {
    /// The workload's name as the CLI spells it (`net-stream`, `servers`, `micro`).
    pub fn workload(&self) -> &'static str {
        match self {
            Case::NetStream(_) => "net-stream",
            Case::Servers(_) => "servers",
            Case::Micro(_) => "micro",
        }
    }

    /// A short human label, unique within a sweep grid (e.g. `one-copy 64KiB t2`).
    pub fn label(&self) -> String {
        match self {
            Case::NetStream(c) => c.label(),
            Case::Servers(c) => c.label(),
            Case::Micro(c) => c.label(),
        }
    }

    /// A stable text key (canonical JSON) used to match cells across runs and on resume.
    pub fn key(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| self.label())
    }

    /// The case's parameters as flat (name, value) pairs, for table and CSV columns.
    pub fn params(&self) -> Vec<(&'static str, String)> {
        match self {
            Case::NetStream(c) => c.params(),
            Case::Servers(c) => c.params(),
            Case::Micro(c) => c.params(),
        }
    }
}

pub use crate::format::format_bytes;
