//! A synthetic fleet run written straight into a results database through the store's normal
//! write path (`Store::create_run`, then `Store::record_cell`: one transaction per cell, as
//! `fleet run` commits them): all directed pairs of N hosts, each cell a `FleetCase` around a
//! remote `net stream` case, with an observation holding the 72 metrics of a real stream cell
//! (names, roles, units and sources as `iopath net stream` stores them; values made up, seeded)
//! and both hosts' descriptions (this machine's, named for the host).
//!
//! It is how the 10⁶-cell scale of `report --matrix` is measured (`examples/fleet_synth.rs`,
//! docs/benchmarks.md) and how tests get fleet runs without agents. Nothing here measures.

use crate::case::{Align, Case, CopyMode, Endpoint, FleetCase, NetParams, RxMode, StreamCase};
use crate::measure::stats::SplitMix64;
use crate::observation::{names, Metric, Observation, Role, Source};
use crate::store::{NewRun, RunStatus, Store};
use crate::sweep::{Cell, CellOutcome};

/// What to generate.
#[derive(Debug, Clone)]
pub struct Spec {
    pub hosts: usize,
    pub repetitions: u32,
    /// Hosts (0-based) whose every pair, both ways, runs at `slow_factor` of the throughput.
    pub slow_hosts: Vec<usize>,
    /// Pairs (source, destination, 0-based) at `slow_factor`: slow links.
    pub slow_links: Vec<(usize, usize)>,
    pub slow_factor: f64,
    /// Pairs whose cells fail (stored as failed, with an error).
    pub failed: Vec<(usize, usize)>,
    pub seed: u64,
    /// Stored as the run's command line (default: the generator's arguments for this spec).
    pub command_line: Option<String>,
}

impl Spec {
    pub fn new(hosts: usize) -> Spec {
        Spec {
            hosts,
            repetitions: 1,
            slow_hosts: Vec::new(),
            slow_links: Vec::new(),
            slow_factor: 0.5,
            failed: Vec::new(),
            seed: 1,
            command_line: None,
        }
    }

    /// Cells a run of this spec holds: all directed pairs, each repetition.
    pub fn cells(&self) -> u64 {
        let n = self.hosts as u64;
        n * n.saturating_sub(1) * self.repetitions as u64
    }
}

/// The name of host `i` (0-based): `10.0.X.Y:7000`, 250 to a /24.
pub fn host_name(i: usize) -> String {
    format!("10.{}.{}.{}:7000", i / 62_500, (i / 250) % 250, i % 250 + 1)
}

/// The round in which `source` sends to `destination` in the circle method over `n` hosts
/// (N−1 rounds of disjoint pairs, one direction, then the same rounds the other way).
pub fn round_of(source: usize, destination: usize, n: usize) -> u32 {
    let m = n + n % 2; // an odd count plays against a bye
    let (a, b) = (source.min(destination), source.max(destination));
    let r = if b == m - 1 { a } else { (a + b) * (m / 2) % (m - 1) };
    let r = if source < destination { r } else { r + (m - 1) };
    r as u32
}

fn stream_case(destination: &str) -> Case {
    Case::NetStream(StreamCase {
        mode: CopyMode::OneCopy,
        rx_mode: RxMode::paired_with(CopyMode::OneCopy),
        size: 65536,
        fields: 1,
        net: NetParams {
            threads: 1,
            duration_ms: 3000,
            warmup_ms: 1000,
            client_cpus: None,
            server_cpus: None,
            verify: false,
            endpoint: Endpoint::Remote {
                addr: destination.to_string(),
            },
            perf: true,
        },
        prove_copies: false,
        zc_ring: None,
        fixed_buffers: false,
        align: Align::Page,
        rx_wake: crate::case::RxWake::Message,
        clients: 1,
    })
}

/// The metrics of a stream cell as `iopath net stream` stored them on a virtual machine
/// without a PMU: (role, name, unit, source; `u` = unavailable).
const TEMPLATE: &[(Role, &str, &str, &str)] = &[
    (Role::System, names::THROUGHPUT_GBPS, "Gbit/s", "tool"),
    (Role::System, names::MESSAGES_PER_S, "msg/s", "tool"),
    (Role::System, names::TIME_PER_MSG_US, "us", "tool"),
    (Role::System, names::WINDOW_S, "s", "tool"),
    (Role::Client, names::CPU_USER_S, "s", "rusage"),
    (Role::Client, names::CPU_SYS_S, "s", "rusage"),
    (Role::Client, "cycles", "cycles", "estimate"),
    (Role::Client, names::CYCLES_PER_BYTE, "cycles/B", "estimate"),
    (Role::Client, "instructions", "instructions", "u"),
    (Role::Client, "cache_references", "references", "u"),
    (Role::Client, "cache_misses", "misses", "u"),
    (Role::Client, names::CACHE_MISSES_PER_KIB, "misses/KiB", "u"),
    (Role::Client, "branch_misses", "misses", "u"),
    (Role::Client, "task_clock_s", "s", "software"),
    (Role::Client, names::CONTEXT_SWITCHES, "switches", "software"),
    (
        Role::Client,
        names::CONTEXT_SWITCHES_PER_MSG,
        "switches/msg",
        "software",
    ),
    (Role::Client, "cpu_migrations", "migrations", "software"),
    (Role::Client, names::PAGE_FAULTS, "faults", "software"),
    (Role::Client, names::VOLUNTARY_SWITCHES, "switches", "rusage"),
    (Role::Client, "involuntary_switches", "switches", "rusage"),
    (Role::Client, "major_faults", "faults", "rusage"),
    (Role::Client, names::BYTES_SENT, "B", "tool"),
    (Role::Client, names::MESSAGES_SENT, "messages", "tool"),
    (Role::Client, names::SYSCALLS_PER_MSG, "syscalls/msg", "tool"),
    (Role::Server, names::CPU_USER_S, "s", "rusage"),
    (Role::Server, names::CPU_SYS_S, "s", "rusage"),
    (Role::Server, "cycles", "cycles", "estimate"),
    (Role::Server, names::CYCLES_PER_BYTE, "cycles/B", "estimate"),
    (Role::Server, "instructions", "instructions", "u"),
    (Role::Server, "cache_references", "references", "u"),
    (Role::Server, "cache_misses", "misses", "u"),
    (Role::Server, names::CACHE_MISSES_PER_KIB, "misses/KiB", "u"),
    (Role::Server, "branch_misses", "misses", "u"),
    (Role::Server, "task_clock_s", "s", "software"),
    (Role::Server, names::CONTEXT_SWITCHES, "switches", "software"),
    (
        Role::Server,
        names::CONTEXT_SWITCHES_PER_MSG,
        "switches/msg",
        "software",
    ),
    (Role::Server, "cpu_migrations", "migrations", "software"),
    (Role::Server, names::PAGE_FAULTS, "faults", "software"),
    (Role::Server, names::VOLUNTARY_SWITCHES, "switches", "rusage"),
    (Role::Server, "involuntary_switches", "switches", "rusage"),
    (Role::Server, "major_faults", "faults", "rusage"),
    (Role::Server, names::BYTES_RECEIVED, "B", "tool"),
    (Role::Server, "messages_received", "messages", "tool"),
    (Role::Server, names::SYSCALLS_PER_MSG, "syscalls/msg", "tool"),
    (Role::System, "tcp_segments_out", "segments", "kernel"),
    (Role::System, "tcp_segments_in", "segments", "kernel"),
    (Role::System, "tcp_retransmits", "segments", "kernel"),
    (Role::System, "tcp_dsacks", "events", "kernel"),
    (Role::System, "tcp_reordering", "events", "kernel"),
    (Role::System, "runqueue_wait_s", "s", "kernel"),
    (Role::System, names::RUNQUEUE_WAIT_MAX_PCT, "%", "kernel"),
    (Role::System, names::CPU_PRESSURE_SOME_S, "s", "kernel"),
    (Role::System, "system_cpu_user_s", "s", "kernel"),
    (Role::System, "system_cpu_system_s", "s", "kernel"),
    (Role::System, "system_cpu_irq_s", "s", "kernel"),
    (Role::System, "system_cpu_softirq_s", "s", "kernel"),
    (Role::System, "softirq_busiest_cpu_s", "s", "kernel"),
    (Role::System, "proc_stat_tick_s", "s", "kernel"),
    (Role::System, "dram_read_bytes", "B", "u"),
    (Role::System, "dram_write_bytes", "B", "u"),
    (Role::System, names::DRAM_BYTES, "B", "u"),
    (Role::System, "pcie_in_bytes", "B", "u"),
    (Role::System, "llc_io_miss_bytes", "B", "u"),
    (Role::System, "memtraffic_probe_read_ns", "ns", "u"),
    (Role::Client, "tcpi_rtt_us", "us", "kernel"),
    (Role::Client, "tcpi_rttvar_us", "us", "kernel"),
    (Role::Client, "tcpi_delivery_rate_gbps", "Gbit/s", "kernel"),
    (Role::Client, "tcpi_total_retrans", "segments", "kernel"),
    (Role::Client, "tcpi_busy_s", "s", "kernel"),
    (Role::Client, "tcpi_rwnd_limited_s", "s", "kernel"),
    (Role::Client, "tcpi_sndbuf_limited_s", "s", "kernel"),
    (Role::System, names::DRAM_BYTES_PER_PAYLOAD_BYTE, "B/B", "u"),
];

fn source(text: &str) -> Source {
    match text {
        "rusage" => Source::Rusage,
        "estimate" => Source::Estimate,
        "software" => Source::Software,
        "kernel" => Source::Kernel,
        "tool" => Source::Tool,
        _ => Source::Unavailable("synthetic: no hardware counter".into()),
    }
}

/// One cell's observation: throughput `gbps`, CPU per byte of each side, the rest filler.
fn observation(gbps: f64, client_cpb: f64, server_cpb: f64, rng: &mut SplitMix64) -> Observation {
    let mut obs = Observation::default();
    for (role, name, unit, src) in TEMPLATE {
        let value = match (*role, *name) {
            (Role::System, names::THROUGHPUT_GBPS) => gbps,
            (Role::Client, names::CYCLES_PER_BYTE) => client_cpb,
            (Role::Server, names::CYCLES_PER_BYTE) => server_cpb,
            (_, names::WINDOW_S) => 3.0,
            _ => 1.0 + rng.unit(),
        };
        let metric = match source(src) {
            Source::Unavailable(reason) => Metric::unavailable(name, *role, unit, reason),
            s => Metric::new(name, *role, value, unit, s),
        };
        obs.push(metric);
    }
    obs
}

/// Write the run; `progress(done, total)` after each cell. Returns the run id.
pub fn generate(store: &mut Store, spec: &Spec, mut progress: impl FnMut(u64, u64)) -> anyhow::Result<i64> {
    let n = spec.hosts;
    anyhow::ensure!(n >= 2, "a fleet needs at least 2 hosts");
    anyhow::ensure!(spec.repetitions >= 1, "at least 1 repetition");
    let names: Vec<String> = (0..n).map(host_name).collect();
    // Each host's description as its agent would send it: this machine's, under the host's name.
    let this_machine = crate::sysinfo::describe();
    let machines: Vec<crate::sysinfo::Machine> = names
        .iter()
        .map(|name| crate::sysinfo::Machine {
            hostname: Some(name.clone()),
            ..this_machine.clone()
        })
        .collect();
    let mut pairs: Vec<(usize, usize)> = Vec::with_capacity(n * (n - 1));
    let mut cases: Vec<Case> = Vec::with_capacity(n * (n - 1));
    for s in 0..n {
        for d in (0..n).filter(|d| *d != s) {
            pairs.push((s, d));
            cases.push(Case::Fleet(FleetCase {
                source: names[s].clone(),
                destination: names[d].clone(),
                round: round_of(s, d, n),
                concurrent_pairs: (n / 2) as u32,
                case: Box::new(stream_case(&names[d])),
            }));
        }
    }
    let run_id = store.create_run(&NewRun {
        name: Some(format!("synthetic fleet of {n} hosts")),
        command_line: spec.command_line.clone().unwrap_or_else(|| {
            let slow: Vec<String> = spec.slow_hosts.iter().map(|h| h.to_string()).collect();
            format!(
                "synthetic: fleet_synth --hosts {n} --reps {} --seed {}{}{}",
                spec.repetitions,
                spec.seed,
                if slow.is_empty() { "" } else { " --slow " },
                slow.join(","),
            )
        }),
        repetitions: spec.repetitions,
        shuffle: true,
        seed: spec.seed,
        warmup_cell: false,
        machine_json: "{}".into(),
        environment_json: "{}".into(),
        cases,
    })?;
    // Committed in a shuffled order, as a fleet run's rounds commit them.
    let mut rng = SplitMix64::new(spec.seed);
    let total = spec.cells();
    let mut order: Vec<u32> = (0..pairs.len() as u32).collect();
    let mut done = 0;
    for repetition in 0..spec.repetitions {
        for i in (1..order.len()).rev() {
            order.swap(i, ((rng.next_u64() as u128 * (i as u128 + 1)) >> 64) as usize);
        }
        for position in &order {
            let (s, d) = pairs[*position as usize];
            let result = if spec.failed.contains(&(s, d)) {
                Err(format!("agent {} stopped answering (synthetic)", names[d]))
            } else {
                let slow =
                    spec.slow_hosts.contains(&s) || spec.slow_hosts.contains(&d) || spec.slow_links.contains(&(s, d));
                let factor = if slow { spec.slow_factor } else { 1.0 };
                let noise = 1.0 + 0.01 * (rng.unit() - 0.5);
                let mut obs = observation(
                    9.4 * factor * noise,
                    1.1 * noise / factor.sqrt(),
                    1.4 * noise / factor.sqrt(),
                    &mut rng,
                );
                obs.pair_machines = Some(Box::new(crate::observation::PairMachines {
                    source: machines[s].clone(),
                    destination: machines[d].clone(),
                }));
                Ok(obs)
            };
            let outcome = CellOutcome { result, elapsed_s: 4.0 };
            store.record_cell(
                run_id,
                Cell {
                    position: *position as usize,
                    repetition,
                },
                &outcome,
            )?;
            done += 1;
            progress(done, total);
        }
    }
    store.set_run_status(run_id, RunStatus::Complete)?;
    Ok(run_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_fleet_has_every_directed_pair_once_per_repetition() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::create_or_open(&dir.path().join("f.db")).unwrap();
        let mut spec = Spec::new(5);
        spec.repetitions = 2;
        spec.failed = vec![(0, 1)];
        let mut last = 0;
        let id = generate(&mut store, &spec, |done, _| last = done).unwrap();
        assert_eq!((spec.cells(), last), (40, 40));
        let run = store.run(id).unwrap();
        assert_eq!((run.cases, run.cells_ok, run.cells_failed), (20, 38, 2));
        assert_eq!(run.status, RunStatus::Complete);
        let data = store.load_run(id).unwrap();
        assert_eq!(data.cells[5].observation.metrics.len(), TEMPLATE.len());
        let f = data.cases[0].get::<FleetCase>().unwrap();
        assert_eq!(
            (f.source.as_str(), f.destination.as_str()),
            ("10.0.0.1:7000", "10.0.0.2:7000")
        );
    }

    /// The circle method: in every round each host is in at most one pair, and every directed
    /// pair has exactly one round.
    #[test]
    fn rounds_hold_disjoint_pairs() {
        for n in [4, 5, 8] {
            let m = n + n % 2;
            let mut rounds: Vec<Vec<usize>> = vec![Vec::new(); 2 * (m - 1)];
            for s in 0..n {
                for d in (0..n).filter(|d| *d != s) {
                    let r = round_of(s, d, n) as usize;
                    assert!(!rounds[r].contains(&s) && !rounds[r].contains(&d), "n {n} round {r}");
                    rounds[r].extend([s, d]);
                }
            }
        }
    }
}
