//! A Case is one fully specified experiment point: which workload and all its parameters.
//! Cases are plain data: serialisable, hashable, and printable as a short label.

pub(crate) use crate::choice::{choice_parser, named_choices};
pub use crate::choice::{ChoiceParser, NamedChoice};

/// clap's parser of a comma-separated list of a named choice, or `all` for every member:
/// each member once, in the order first given. Its possible values (`--help`, completions, man
/// pages) are `all` and the members' names; a refusal is the member's own ("unknown model 'x'
/// (accepted: ...)") with `all` added to what is accepted.
#[derive(Clone, Copy, Debug)]
pub struct AllOrListParser<T>(std::marker::PhantomData<T>);

impl<T> Default for AllOrListParser<T> {
    fn default() -> Self {
        AllOrListParser(std::marker::PhantomData)
    }
}

impl<T: NamedChoice + PartialEq> AllOrListParser<T> {
    fn parse(text: &str) -> Result<Vec<T>, String> {
        if text.trim() == "all" {
            return Ok(T::all().to_vec());
        }
        let mut members: Vec<T> = Vec::new();
        for part in text.split(',') {
            let member = part.trim().parse::<T>().map_err(|e| match e.strip_suffix(')') {
                Some(head) => format!("{head}, all)"),
                None => e,
            })?;
            if !members.contains(&member) {
                members.push(member);
            }
        }
        Ok(members)
    }
}

impl<T: NamedChoice + PartialEq> clap::builder::TypedValueParser for AllOrListParser<T> {
    type Value = Vec<T>;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Vec<T>, clap::Error> {
        let parse: fn(&str) -> Result<Vec<T>, String> = Self::parse;
        parse.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let names = std::iter::once("all").chain(T::all().iter().map(|c| c.name()));
        Some(Box::new(names.map(clap::builder::PossibleValue::new)))
    }
}

mod align;
mod bench;
pub mod cpus;
mod endpoint;
mod fake;
mod fleet;
mod load;
mod micro;
mod model;
mod net;
mod records;
mod request;
mod rr;
mod servers;
mod stream;
mod udp;
mod udp_rr;
mod udp_stream;
mod workload;

pub use align::{Align, MISALIGNED_OFFSET};
pub use bench::Bench;
pub use cpus::CpuList;
pub use endpoint::{
    host_interface, is_host_port, is_run_interface, size_limit_of, DeviceSizes, Link, Topology, NO_NETEM,
    PEER_DROPS_UDP,
};
pub use fake::{FakeBehaviour, FakeCase};
pub use fleet::FleetCase;
pub use load::{Direction, LoadCase, MAX_FLOWS};
pub use micro::MicroCase;
pub use model::Model;
pub use net::NetParams;
pub use records::{Pick, RecordsCase, RecordsMode, HOT_SET_BYTES};
pub use request::Request;
pub use rr::{RrCase, RrKind};
pub use servers::ServersCase;
pub use stream::{CopyMode, Endpoint, RxMode, RxWake, StreamCase};
pub use udp::{UdpRecvMode, UdpSendMode};
pub use udp_rr::UdpRrCase;
pub use udp_stream::{UdpRate, UdpStreamCase};
pub use workload::{latency_bound, Alarm, Contest, Headline, Pinning, Workload};

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
    /// One directed pair of a fleet run (`iopath fleet run`).
    Fleet(FleetCase),
    NetUdpRr(UdpRrCase),
    /// `net udp-stream`.
    NetUdpStream(UdpStreamCase),
    /// `net load`.
    NetLoad(LoadCase),
}

impl Case {
    /// The case as its workload: the one match on `Case` (everything else asks the trait).
    pub fn as_workload(&self) -> &dyn Workload {
        match self {
            Case::NetStream(c) => c,
            Case::NetRecords(c) => c,
            Case::Servers(c) => c,
            Case::Micro(c) => c,
            Case::NetRr(c) => c,
            Case::Fake(c) => c,
            Case::Fleet(c) => c,
            Case::NetUdpRr(c) => c,
            Case::NetUdpStream(c) => c,
            Case::NetLoad(c) => c,
        }
    }

    /// The case of one workload type, when it is one (`case.get::<StreamCase>()`): for what
    /// only that workload has, such as its own charts.
    pub fn get<T: Workload>(&self) -> Option<&T> {
        self.as_workload().as_any().downcast_ref::<T>()
    }

    /// The workload's name as the CLI spells it (`net-stream`, `servers`, `micro`).
    pub fn workload(&self) -> &'static str {
        self.as_workload().kind()
    }

    /// A short human label, unique within a sweep grid (e.g. `one-copy 64KiB t2`).
    pub fn label(&self) -> String {
        self.as_workload().label()
    }

    /// The name of the case's series in a history tool (`Workload::series`).
    pub fn series(&self) -> String {
        self.as_workload().series()
    }

    /// A stable text key (canonical JSON) used to match cells across runs and on resume.
    pub fn key(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| self.label())
    }

    /// How many windows one cell runs: rr, crr and servers with counters on run a latency pass
    /// without per-thread perf events and then a counting pass with them (docs/methodology.md).
    pub fn passes(&self) -> u32 {
        self.as_workload().passes()
    }

    /// Roughly how long one cell of this case takes, in seconds, for the progress ETA.
    pub fn planned_seconds(&self) -> f64 {
        self.as_workload().planned_seconds()
    }

    /// The case's parameters as flat (name, value) pairs, for table and CSV columns.
    pub fn params(&self) -> Vec<(&'static str, String)> {
        self.as_workload().params()
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
