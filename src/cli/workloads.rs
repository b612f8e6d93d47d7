//! The CLI's side of each workload, looked up by the case's kind (`Workload::kind`) in this one
//! place: its terminal table renderer and the check a stored case passes again before a resume
//! runs it. Adding a workload adds one arm to `of`.

use super::output::View;
use crate::case::{Case, Endpoint, MicroCase, RecordsCase, RrCase, ServersCase, StreamCase, Workload};
use crate::format::format_bytes;
use crate::net::workload::{records, rr, stream};
use crate::observation::Role;
use crate::store::Record;

/// A workload's terminal table of its records (`--wide` in the view).
pub type Table = fn(&[Record], View) -> String;

/// A workload's own check of a case read back from the database, with the memory this process
/// may still use (None: unknown).
pub type Check = fn(&Case, Option<u64>) -> Result<(), String>;

/// What the CLI does with the cases of one workload kind.
#[derive(Clone, Copy)]
pub struct WorkloadCli {
    pub table: Table,
    pub check: Check,
}

/// The CLI's side of a workload kind (`net-stream`, `net-rr`, …); None for a kind this build
/// does not know.
pub fn of(kind: &str) -> Option<WorkloadCli> {
    let (table, check): (Table, Check) = match kind {
        "net-stream" => (super::net::render_stream_table, check_stream),
        "net-rr" | "net-crr" => (super::rr::render_rr_table, |c, _| rr::check_case(typed::<RrCase>(c)?)),
        "net-records" => (super::records::render_records_table, check_records),
        "net-udp-stream" => (super::udp_stream::render_table, super::udp_stream::check_stored),
        "servers" => (super::servers::table, |c, _| {
            super::servers::check_case(typed::<ServersCase>(c)?)
        }),
        "micro" => (super::micro::render, |c, headroom| {
            super::micro::check_case(typed::<MicroCase>(c)?, headroom)
        }),
        "net-udp-rr" => (super::udp_rr::render_udp_rr_table, super::udp_rr::check_case),
        "fake" => (super::fake::table, |_, _| Ok(())),
        "fleet" => (super::fleet::render_fleet_table, check_fleet),
        _ => return None,
    };
    Some(WorkloadCli { table, check })
}

/// The case as the type its kind promises.
fn typed<T: Workload>(case: &Case) -> Result<&T, String> {
    case.get::<T>()
        .ok_or_else(|| format!("a {} case is not what its kind promises", case.workload()))
}

/// As `net stream` does: both ends live in this process unless the server is remote, and their
/// buffers may take at most half of the memory available.
fn check_stream(case: &Case, headroom: Option<u64>) -> Result<(), String> {
    let c = typed::<StreamCase>(case)?;
    stream::check_case(c, Role::Client, None)?;
    let server = match c.net.endpoint {
        Endpoint::Remote { .. } => 0,
        _ => stream::buffer_bytes(c, Role::Server),
    };
    let need = stream::buffer_bytes(c, Role::Client).saturating_add(server);
    match headroom {
        Some(h) if need > h / 2 => Err(format!(
            "it needs about {} of buffers in this process, more than half of the {} available",
            format_bytes(need),
            format_bytes(h)
        )),
        _ => Ok(()),
    }
}

/// A fleet cell as `fleet run` makes it, and its network case as its own command would check
/// it; the client runs on the source agent, not here, so no memory check.
fn check_fleet(case: &Case, _headroom: Option<u64>) -> Result<(), String> {
    let c = typed::<crate::case::FleetCase>(case)?;
    crate::fleet::check_case(c)?;
    match of(c.case.workload()) {
        Some(cli) => (cli.check)(&c.case, None),
        None => Err(format!(
            "this iopath does not know the workload '{}'",
            c.case.workload()
        )),
    }
}

/// The table lives in this process unless the server is remote.
fn check_records(case: &Case, headroom: Option<u64>) -> Result<(), String> {
    let c = typed::<RecordsCase>(case)?;
    let headroom = headroom.filter(|_| !matches!(c.net.endpoint, Endpoint::Remote { .. }));
    records::check_case(c, headroom)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Bench, FakeBehaviour, FakeCase, Model, Request};

    /// Every kind a case can have has its table and check here: a workload added without its
    /// arm in `of` fails this test, not a user's resume.
    #[test]
    fn every_kind_has_a_table_and_a_check() {
        let cases = [
            Case::Servers(ServersCase::new(Model::Epoll, Request::Echo(64), 1, 100)),
            Case::Micro(MicroCase::new(Bench::Timer, vec![])),
            Case::Fake(FakeCase {
                index: 0,
                behaviour: FakeBehaviour::Ok { value: 1 },
            }),
        ];
        for case in &cases {
            let cli = of(case.workload()).unwrap_or_else(|| panic!("no CLI side for {}", case.workload()));
            assert_eq!((cli.check)(case, None), Ok(()), "{}", case.label());
        }
        for kind in [
            "net-stream",
            "net-rr",
            "net-crr",
            "net-records",
            "net-udp-rr",
            "servers",
            "micro",
            "fake",
            "fleet",
        ] {
            assert!(of(kind).is_some(), "{kind}");
        }
        assert!(of("udp").is_none());
        // A case checked as another kind is refused, never obeyed.
        let stream = of("net-stream").unwrap();
        assert!((stream.check)(&cases[0], None)
            .unwrap_err()
            .contains("not what its kind promises"));
    }
}
