//! The CLI's side of each workload, looked up by the case in this one place: its terminal table
//! renderer and the check a stored case passes again before a resume runs it. Adding a workload
//! adds one arm to `of`, which the compiler asks for.

use super::output::View;
use super::run::Corrupt;
use crate::case::{
    Case, Endpoint, LoadCase, MicroCase, RecordsCase, Request, RrCase, ServersCase, StreamCase, UdpRrCase,
    UdpStreamCase, Workload,
};
use crate::format::format_bytes;
use crate::net::workload::{load, records, rr, stream, udp_rr, udp_stream};
use crate::observation::names;
use crate::observation::Role;
use crate::store::Record;

/// A workload's terminal table of its records (`--wide` in the view).
pub type Table = fn(&[Record], View) -> String;

/// A workload's own check of a case (the limits its flags enforce, and any memory rule of its
/// own), with the memory this process may still use (None: unknown).
pub type Check = fn(&Case, Option<u64>) -> Result<(), String>;

/// The bytes of buffers a case holds in this process: the client's, and the server's when
/// the server runs here too (0 for a workload that holds none to speak of). Every case of
/// every path — the command line, a plan file, a resume — is held to half of the
/// headroom with it ([`check_here`]), so a workload cannot be added without saying it.
pub type Memory = fn(&Case) -> Result<u64, String>;

/// What the CLI does with the cases of one workload kind.
#[derive(Clone, Copy)]
pub struct WorkloadCli {
    pub table: Table,
    pub check: Check,
    pub memory: Memory,
    /// The count of data that arrived corrupted, which fails the command once the records are
    /// printed (None: the workload checks no payload).
    pub corrupt: Option<Corrupt>,
}

/// `what` arrived corrupted when the messages the client or the server found corrupted add
/// up to more than zero.
const CORRUPT_MESSAGES: Corrupt = Corrupt {
    what: "messages",
    count: |o| corrupt_at(o, names::CORRUPT_MESSAGES),
};
const CORRUPT_DATAGRAMS: Corrupt = Corrupt {
    what: "datagrams",
    count: |o| corrupt_at(o, names::CORRUPT_MESSAGES),
};

/// A corruption count over both roles (a role that does not check reports nothing).
fn corrupt_at(o: &crate::observation::Observation, name: &str) -> f64 {
    [Role::Client, Role::Server]
        .into_iter()
        .filter_map(|role| o.value(name, role))
        .sum()
}

/// The CLI's side of a case's workload: one arm a `Case` variant, so a workload added
/// without its arm does not compile.
pub fn of(case: &Case) -> WorkloadCli {
    match case {
        Case::NetStream(_) => WorkloadCli {
            table: super::net::render_stream_table,
            check: |c, _| stream::check_case(typed::<StreamCase>(c)?, Role::Client, None),
            memory: |c| {
                let c = typed::<StreamCase>(c)?;
                Ok(both_ends(&c.net.endpoint, |role| stream::buffer_bytes(c, role)))
            },
            corrupt: Some(CORRUPT_MESSAGES),
        },
        Case::NetRr(_) => WorkloadCli {
            table: super::rr::render_rr_table,
            check: |c, _| rr::check_case(typed::<RrCase>(c)?),
            memory: |c| {
                let c = typed::<RrCase>(c)?;
                Ok(both_ends(&c.net.endpoint, |role| rr::buffer_bytes(c, role)))
            },
            corrupt: Some(CORRUPT_MESSAGES),
        },
        Case::NetRecords(_) => WorkloadCli {
            table: super::records::render_records_table,
            check: |c, _| records::check_case(typed::<RecordsCase>(c)?, None),
            // The table and every connection's buffers live with the server.
            memory: |c| {
                let c = typed::<RecordsCase>(c)?;
                Ok(match c.net.endpoint {
                    Endpoint::Remote { .. } => 0,
                    _ => records::buffer_bytes(c),
                })
            },
            corrupt: Some(Corrupt {
                what: "records",
                count: |o| corrupt_at(o, names::CORRUPT_RECORDS),
            }),
        },
        Case::NetUdpStream(_) => WorkloadCli {
            table: super::udp_stream::render_table,
            check: |c, _| udp_stream::check_case(typed::<UdpStreamCase>(c)?),
            memory: |c| {
                let c = typed::<UdpStreamCase>(c)?;
                Ok(both_ends(&c.net.endpoint, |role| udp_stream::buffer_bytes(c, role)))
            },
            corrupt: Some(CORRUPT_DATAGRAMS),
        },
        Case::NetUdpRr(_) => WorkloadCli {
            table: super::udp_rr::render_udp_rr_table,
            check: |c, _| udp_rr::check_case(typed::<UdpRrCase>(c)?),
            memory: |c| {
                let c = typed::<UdpRrCase>(c)?;
                Ok(both_ends(&c.net.endpoint, |role| udp_rr::buffer_bytes(c, role)))
            },
            corrupt: Some(CORRUPT_DATAGRAMS),
        },
        Case::NetLoad(_) => WorkloadCli {
            table: super::load::render_load_table,
            check: |c, _| load::check_case(typed::<LoadCase>(c)?),
            memory: |c| {
                let c = typed::<LoadCase>(c)?;
                Ok(both_ends(&c.net.endpoint, |role| load::buffer_bytes(c, role)))
            },
            corrupt: Some(CORRUPT_MESSAGES),
        },
        Case::Servers(_) => WorkloadCli {
            table: super::servers::table,
            check: |c, _| super::servers::check_case(typed::<ServersCase>(c)?),
            memory: |c| Ok(servers_bytes(typed::<ServersCase>(c)?)),
            corrupt: None,
        },
        Case::Micro(_) => WorkloadCli {
            table: super::micro::render,
            check: |c, headroom| super::micro::check_case(typed::<MicroCase>(c)?, headroom),
            memory: |c| super::micro::memory_bytes(typed::<MicroCase>(c)?),
            corrupt: None,
        },
        Case::Fake(_) => WorkloadCli {
            table: super::fake::table,
            check: |_, _| Ok(()),
            memory: |_| Ok(0),
            corrupt: None,
        },
        Case::Fleet(_) => WorkloadCli {
            table: super::fleet::render_fleet_table,
            check: check_fleet,
            // Both ends of a fleet cell run on agents (each checks its own memory).
            memory: |_| Ok(0),
            corrupt: None,
        },
    }
}

/// A case's check and its memory in this process against half of `headroom` (None skips the
/// memory): what every case passes before any of its run starts or resumes.
pub fn check_here(case: &Case, headroom: Option<u64>) -> Result<(), String> {
    let cli = of(case);
    (cli.check)(case, headroom)?;
    let need = (cli.memory)(case)?;
    match headroom {
        Some(h) if need > h / 2 => Err(format!(
            "it needs about {} of buffers in this process, more than half of the {} available (MemAvailable and the memory cgroup's limit)",
            format_bytes(need),
            format_bytes(h)
        )),
        _ => Ok(()),
    }
}

/// The client's buffers and, unless the server is remote, the server's: both live in this
/// process.
fn both_ends(endpoint: &Endpoint, bytes: impl Fn(Role) -> u64) -> u64 {
    let server = match endpoint {
        Endpoint::Remote { .. } => 0,
        _ => bytes(Role::Server),
    };
    bytes(Role::Client).saturating_add(server)
}

/// The servers workload: both ends in this process, and for an echo a request and a reply in
/// flight on each connection's two ends (the procs request's frames are small).
fn servers_bytes(c: &ServersCase) -> u64 {
    let frame = match c.request {
        Request::Echo(bytes) => bytes as u64,
        _ => 0,
    };
    frame.saturating_mul(4).saturating_mul(c.clients as u64)
}

/// The case as the type its kind promises.
fn typed<T: Workload>(case: &Case) -> Result<&T, String> {
    case.get::<T>()
        .ok_or_else(|| format!("a {} case is not what its kind promises", case.workload()))
}

/// A fleet cell as `fleet run` makes it, and its network case as its own command would check
/// it; the client runs on the source agent, not here, so no memory check.
fn check_fleet(case: &Case, _headroom: Option<u64>) -> Result<(), String> {
    let c = typed::<crate::case::FleetCase>(case)?;
    crate::fleet::check_case(c)?;
    (of(&c.case).check)(&c.case, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Bench, FakeBehaviour, FakeCase, Model, Request};

    /// A case passes its own workload's check, and a case checked as another workload is
    /// refused, never obeyed. (Every `Case` variant has its arm in `of`: the compiler asks.)
    #[test]
    fn a_case_is_checked_by_its_own_workload_only() {
        let cases = [
            Case::Servers(ServersCase::new(Model::Epoll, Request::Echo(64), 1, 100)),
            Case::Micro(MicroCase::new(Bench::Timer, vec![])),
            Case::Fake(FakeCase {
                index: 0,
                behaviour: FakeBehaviour::Ok { value: 1 },
            }),
        ];
        for case in &cases {
            assert_eq!((of(case).check)(case, None), Ok(()), "{}", case.label());
        }
        let stream = of(&Case::NetStream(StreamCase::for_test(
            crate::case::CopyMode::TwoCopy,
            4096,
        )));
        assert!((stream.check)(&cases[0], None)
            .unwrap_err()
            .contains("not what its kind promises"));
    }
}
