//! The machines at both ends of a fleet cell: the source agent's and the destination agent's
//! `sysinfo` description, which every agent run returns (`Observation::pair_machines`). A
//! description is some 5 KB of JSON and a fleet run of 1000 hosts has 999,000 cells, so each
//! distinct description is stored once (`machines`, unique by its SHA-256) and each
//! observation links its two ends to theirs (`observation_machines`, migration 3). A host whose
//! kernel or CPU count changed in the middle of a run has two descriptions, and its cells say
//! which one each measured with.
//!
//! What is stored is the description without its two readings of the moment, which would make
//! descriptions of one unchanged machine distinct: `memory_available_bytes` (different at every
//! call) and `tsc_hz` (calibrated over 20 ms once per process: an agent restarted in the middle
//! of a run reads it a few hundred kHz apart). The CPU model says what the TSC would.

use super::db::Store;
use super::fleet::RunObservations;
use crate::observation::PairMachines;
use crate::sysinfo::Machine;
use rusqlite::{params, Connection};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};

/// The schema version from which a database holds machines (migration 3).
pub const MACHINES_VERSION: i64 = 3;

/// The two ends of a pair, as `observation_machines.pair_end` spells them: the keys of a fleet
/// case's JSON that name its hosts.
pub const ENDS: [&str; 2] = ["source", "destination"];

/// A machine description as stored: its JSON (without `memory_available_bytes` and `tsc_hz`,
/// readings of the moment) and the hex SHA-256 of that text.
pub fn stored_form(machine: &Machine) -> anyhow::Result<(String, String)> {
    let json = serde_json::to_string(&Machine {
        memory_available_bytes: None,
        tsc_hz: None,
        ..machine.clone()
    })?;
    let digest = digest_of(&json);
    Ok((json, digest))
}

/// The hex SHA-256 of a stored description's text.
fn digest_of(json: &str) -> String {
    Sha256::digest(json.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The id of the stored description with this digest, inserted when new.
fn machine_id(conn: &Connection, digest: &str, json: &str) -> rusqlite::Result<i64> {
    conn.prepare_cached("INSERT INTO machines (digest, machine_json) VALUES (?1, ?2) ON CONFLICT (digest) DO NOTHING")?
        .execute(params![digest, json])?;
    conn.prepare_cached("SELECT id FROM machines WHERE digest = ?1")?
        .query_row([digest], |r| r.get(0))
}

/// Link observation `observation_id` to `machine_id` at `end`.
fn link(conn: &Connection, observation_id: i64, end: &str, machine_id: i64) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT INTO observation_machines (observation_id, pair_end, machine_id) VALUES (?1, ?2, ?3)")?
        .execute(params![observation_id, end, machine_id])?;
    Ok(())
}

/// Store both ends' descriptions of the observation just inserted (inside the caller's
/// transaction: `record_cell`).
pub(super) fn record(conn: &Connection, observation_id: i64, machines: &PairMachines) -> anyhow::Result<()> {
    for (end, machine) in ENDS.into_iter().zip([&machines.source, &machines.destination]) {
        let (json, digest) = stored_form(machine)?;
        let id = machine_id(conn, &digest, &json)?;
        link(conn, observation_id, end, id)?;
    }
    Ok(())
}

/// Copy the machine links of run `run` of `input` into `out` (inside the caller's transaction:
/// `merge`), `observation_ids` mapping the input's observations to the copies. Each
/// description is stored under the digest of its own text (recomputed, not taken from the
/// input) and once however many observations name it. An input older than migration 3 has
/// none: nothing to copy.
pub(super) fn copy_run(
    input: &Store,
    out: &Connection,
    run: i64,
    observation_ids: &HashMap<i64, i64>,
) -> anyhow::Result<()> {
    if input.schema_version()? < MACHINES_VERSION {
        return Ok(());
    }
    let mut read = input.conn.prepare(
        "SELECT om.observation_id, om.pair_end, om.machine_id, m.machine_json FROM observation_machines om
         JOIN machines m ON m.id = om.machine_id JOIN observations o ON o.id = om.observation_id
         JOIN cases c ON c.id = o.case_id WHERE c.run_id = ?1",
    )?;
    let mut ids: HashMap<i64, i64> = HashMap::new();
    let mut rows = read.query([run])?;
    while let Some(r) = rows.next()? {
        let Some(&observation) = observation_ids.get(&r.get::<_, i64>(0)?) else {
            continue;
        };
        let end: String = r.get(1)?;
        if !ENDS.contains(&end.as_str()) {
            return Err(corrupt(input, format!("a machine link has the end '{end}'")));
        }
        let input_id: i64 = r.get(2)?;
        let id = match ids.get(&input_id) {
            Some(&id) => id,
            None => {
                let json: String = r.get(3)?;
                let id = machine_id(out, &digest_of(&json), &json)?;
                ids.insert(input_id, id);
                id
            }
        };
        link(out, observation, &end, id)?;
    }
    Ok(())
}

fn corrupt(store: &Store, detail: String) -> anyhow::Error {
    super::StoreError::Corrupt {
        path: store.path.clone(),
        detail,
    }
    .into()
}

/// One description a host had in a run's fleet cells.
#[derive(Debug, Clone, PartialEq)]
pub struct SeenMachine {
    pub machine: Machine,
    /// How many of the host's cells (as source or as destination) measured with it.
    pub cells: u64,
}

/// The machines of a run's fleet cells, per host (`HOST:PORT` as the fleet names it): the
/// distinct descriptions seen, in the order they were first seen. A host with no stored
/// description (a run measured before migration 3, or a host whose cells all failed) is absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetMachines {
    pub hosts: BTreeMap<String, Vec<SeenMachine>>,
}

impl FleetMachines {
    /// The descriptions `host` had (empty when none is stored).
    pub fn of(&self, host: &str) -> &[SeenMachine] {
        self.hosts.get(host).map_or(&[], Vec::as_slice)
    }

    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
}

impl Store {
    /// The machines of a run's fleet cells, per host (see [`FleetMachines`]), from the links
    /// of its successful `observations` (only those have machines). `host_of(position, end)`
    /// names the host at `end` (an index into [`ENDS`]) of the case at `position`, None when it
    /// is not a fleet case: the caller has the pairs already, so a 10^6-cell run's two million
    /// links are read in key order over the run's id range, without a case parsed or a lookup
    /// per cell.
    pub fn fleet_machines<'h>(
        &self,
        observations: &RunObservations,
        host_of: impl Fn(usize, usize) -> Option<&'h str>,
    ) -> anyhow::Result<FleetMachines> {
        let mut out = FleetMachines::default();
        let Some((first, last)) = observations.id_range() else {
            return Ok(out);
        };
        if self.schema_version()? < MACHINES_VERSION {
            return Ok(out);
        }
        // (host, machine) -> (cells, the first observation that had it).
        let mut seen: HashMap<(&'h str, i64), (u64, i64)> = HashMap::new();
        let mut stmt = self.conn.prepare(
            "SELECT observation_id, pair_end, machine_id FROM observation_machines
             WHERE observation_id BETWEEN ?1 AND ?2",
        )?;
        let mut rows = stmt.query([first, last])?;
        while let Some(row) = rows.next()? {
            let observation: i64 = row.get(0)?;
            // Another run's observation inside the range.
            let Some(position) = observations.position(observation) else {
                continue;
            };
            let end = match row.get_ref(1)?.as_str()? {
                "source" => 0,
                "destination" => 1,
                other => return Err(corrupt(self, format!("a machine link has the end '{other}'"))),
            };
            let Some(host) = host_of(position, end) else {
                continue;
            };
            let entry = seen.entry((host, row.get(2)?)).or_insert((0, observation));
            entry.0 += 1;
            entry.1 = entry.1.min(observation);
        }
        // (host, machine id, cells, first observation), each host's machines first seen first.
        let mut found: Vec<(&str, i64, u64, i64)> = seen
            .into_iter()
            .map(|((host, id), (cells, first))| (host, id, cells, first))
            .collect();
        found.sort_unstable_by_key(|(host, _, _, first)| (*host, *first));
        let mut parsed: HashMap<i64, Machine> = HashMap::new();
        let mut read = self.conn.prepare("SELECT machine_json FROM machines WHERE id = ?1")?;
        for (host, id, cells, _) in found {
            let machine = match parsed.entry(id) {
                std::collections::hash_map::Entry::Occupied(known) => known.get().clone(),
                std::collections::hash_map::Entry::Vacant(new) => {
                    let json: String = read.query_row([id], |r| r.get(0))?;
                    let machine: Machine = serde_json::from_str(&json)
                        .map_err(|e| corrupt(self, format!("stored machine {id} does not parse ({e})")))?;
                    new.insert(machine).clone()
                }
            };
            out.hosts
                .entry(host.to_string())
                .or_default()
                .push(SeenMachine { machine, cells });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Case, FakeBehaviour, FakeCase, FleetCase};
    use crate::observation::{Metric, Observation, Role};
    use crate::store::NewRun;
    use crate::sweep::{Cell, CellOutcome};

    /// The machines of run `id` per host, its pairs named by its stored cases.
    fn per_host(store: &Store, id: i64) -> FleetMachines {
        let cases = store.load_run(id).unwrap().cases;
        store
            .fleet_machines(&store.ok_observations(id).unwrap(), |position, end| {
                let f = cases.get(position)?.get::<FleetCase>()?;
                Some([f.source.as_str(), f.destination.as_str()][end])
            })
            .unwrap()
    }

    fn fleet_case(source: &str, destination: &str) -> Case {
        Case::Fleet(FleetCase {
            source: source.into(),
            destination: destination.into(),
            round: 1,
            concurrent_pairs: 1,
            case: Box::new(Case::Fake(FakeCase {
                index: 0,
                behaviour: FakeBehaviour::Ok { value: 1 },
            })),
        })
    }

    fn machine(kernel: &str, cpus: usize) -> Machine {
        Machine {
            hostname: Some("node".into()),
            kernel: Some(kernel.into()),
            cpu_model: Some("Test CPU".into()),
            logical_cpus: cpus,
            memory_available_bytes: Some(cpus as u64 * 1000 + kernel.len() as u64),
            tsc_hz: Some(2.5e9),
            io_uring: "available".into(),
            ..Default::default()
        }
    }

    fn outcome(machines: Option<(Machine, Machine)>) -> CellOutcome {
        let mut obs = Observation::default();
        obs.push(Metric::tool("x", Role::System, 1.0, "u"));
        obs.pair_machines = machines.map(|(source, destination)| Box::new(PairMachines { source, destination }));
        CellOutcome {
            result: Ok(obs),
            elapsed_s: 0.1,
        }
    }

    fn run(store: &mut Store, cases: Vec<Case>) -> i64 {
        store
            .create_run(&NewRun {
                name: None,
                command_line: "iopath fleet run".into(),
                repetitions: 1,
                shuffle: false,
                seed: 1,
                warmup_cell: false,
                machine_json: r#"{"hostname":"controller"}"#.into(),
                environment_json: "{}".into(),
                cases,
            })
            .unwrap()
    }

    fn cell(position: usize) -> Cell {
        Cell {
            position,
            repetition: 0,
        }
    }

    fn count(store: &Store, table: &str) -> i64 {
        store
            .conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    }

    fn without_readings(m: &Machine) -> Machine {
        Machine {
            memory_available_bytes: None,
            tsc_hz: None,
            ..m.clone()
        }
    }

    /// Two cells between the same two hosts store each host's description once; the reader
    /// gives each host its description and how many cells saw it; a cell without machines
    /// (any other cell) stores nothing.
    #[test]
    fn machines_round_trip_once_per_distinct_description() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::create_or_open(&dir.path().join("m.db")).unwrap();
        let id = run(&mut store, vec![fleet_case("a:1", "b:1"), fleet_case("b:1", "a:1")]);
        let (a, b) = (machine("6.1.0", 4), machine("6.8.0", 8));
        store
            .record_cell(id, cell(0), &outcome(Some((a.clone(), b.clone()))))
            .unwrap();
        // The second reading of the host's free memory and TSC frequency (its agent restarted)
        // differ: still the same description.
        let mut a2 = a.clone();
        a2.memory_available_bytes = Some(1);
        a2.tsc_hz = Some(2.5003e9);
        store.record_cell(id, cell(1), &outcome(Some((b.clone(), a2)))).unwrap();
        assert_eq!(count(&store, "machines"), 2, "two hosts, two distinct descriptions");
        assert_eq!(count(&store, "observation_machines"), 4);
        let seen = per_host(&store, id);
        assert_eq!(seen.hosts.len(), 2);
        assert_eq!(
            seen.of("a:1"),
            [SeenMachine {
                machine: without_readings(&a),
                cells: 2
            }]
        );
        assert_eq!(seen.of("b:1")[0].machine.kernel.as_deref(), Some("6.8.0"));
        assert_eq!(seen.of("b:1")[0].cells, 2);

        // A run of ordinary cells: no machine stored, nothing read.
        let other = run(&mut store, vec![fleet_case("c:1", "d:1")]);
        store.record_cell(other, cell(0), &outcome(None)).unwrap();
        assert_eq!(count(&store, "observation_machines"), 4);
        assert!(per_host(&store, other).is_empty());
    }

    /// One machine at both ends of two cells (the same description everywhere): one row.
    #[test]
    fn one_machine_everywhere_is_one_row() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::create_or_open(&dir.path().join("m.db")).unwrap();
        let id = run(&mut store, vec![fleet_case("a:1", "b:1"), fleet_case("b:1", "a:1")]);
        let m = machine("6.1.0", 4);
        for p in 0..2 {
            store
                .record_cell(id, cell(p), &outcome(Some((m.clone(), m.clone()))))
                .unwrap();
        }
        assert_eq!(count(&store, "machines"), 1);
        assert_eq!(count(&store, "observation_machines"), 4);
    }

    /// A failed cell has no machines; the cell measured again replaces it with its own; a cell
    /// recorded again (a host's kernel changed in between) keeps only the new links, and the
    /// host then shows the description of each of its cells.
    #[test]
    fn a_replaced_cell_keeps_only_its_new_machines() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::create_or_open(&dir.path().join("m.db")).unwrap();
        let id = run(&mut store, vec![fleet_case("a:1", "b:1"), fleet_case("b:1", "a:1")]);
        let failed = CellOutcome {
            result: Err("agent a:1: could not connect".into()),
            elapsed_s: 0.1,
        };
        store.record_cell(id, cell(0), &failed).unwrap();
        assert_eq!(count(&store, "observation_machines"), 0);
        let (old, new, b) = (machine("6.1.0", 4), machine("6.9.0", 4), machine("6.8.0", 8));
        store
            .record_cell(id, cell(0), &outcome(Some((old.clone(), b.clone()))))
            .unwrap();
        store
            .record_cell(id, cell(0), &outcome(Some((new.clone(), b.clone()))))
            .unwrap();
        assert_eq!(
            count(&store, "observation_machines"),
            2,
            "the replaced observation's links are gone"
        );
        let seen = per_host(&store, id);
        assert_eq!(seen.of("a:1").len(), 1);
        assert_eq!(seen.of("a:1")[0].machine.kernel.as_deref(), Some("6.9.0"));
        // Its other cell measured before the upgrade: the host shows both, first seen first.
        store
            .record_cell(id, cell(1), &outcome(Some((b.clone(), old.clone()))))
            .unwrap();
        let kernels: Vec<_> = per_host(&store, id)
            .of("a:1")
            .iter()
            .map(|s| s.machine.kernel.clone().unwrap())
            .collect();
        assert_eq!(kernels, ["6.9.0", "6.1.0"]);
    }

    /// `merge` copies each run's machines with its observations, once per description.
    #[test]
    fn merge_copies_the_machines() {
        let dir = tempfile::tempdir().unwrap();
        let input_path = dir.path().join("in.db");
        let mut input = Store::create_or_open(&input_path).unwrap();
        let id = run(&mut input, vec![fleet_case("a:1", "b:1"), fleet_case("b:1", "a:1")]);
        let (a, b) = (machine("6.1.0", 4), machine("6.8.0", 8));
        input
            .record_cell(id, cell(0), &outcome(Some((a.clone(), b.clone()))))
            .unwrap();
        input
            .record_cell(id, cell(1), &outcome(Some((b.clone(), a.clone()))))
            .unwrap();
        input.set_run_status(id, crate::store::RunStatus::Complete).unwrap();
        let expected = per_host(&input, id);
        drop(input);
        let mut out = Store::create_or_open(&dir.path().join("out.db")).unwrap();
        // One run of the output's own first, so the copies get other ids.
        let own = run(&mut out, vec![fleet_case("x:1", "y:1")]);
        out.record_cell(own, cell(0), &outcome(Some((a.clone(), a.clone()))))
            .unwrap();
        let mut input = Store::open_merge_input(&input_path).unwrap();
        let mut known = out.run_identities().unwrap();
        let merged = out.merge_from(&mut input, &mut known).unwrap();
        let copy = match merged[..] {
            [crate::store::merge::Merged::Copied { run, .. }] => run,
            _ => panic!("{merged:?}"),
        };
        assert_ne!(copy, id);
        assert_eq!(per_host(&out, copy), expected);
        assert_eq!(count(&out, "machines"), 2, "a's description was already there");
        assert_eq!(count(&out, "observation_machines"), 6);
    }
}
