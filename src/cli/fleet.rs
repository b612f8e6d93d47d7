//! `iopath fleet run`: a network case (the flags of `net stream`, `net rr` or `net crr`,
//! flattened) measured between pairs of `net serve --agent` agents, in rounds of disjoint
//! pairs, stored as one run through the normal plan → runner → store path (so `runs`,
//! `export`, `compare`, `report` and `--resume` work on it). The schedule is `fleet/`.

use super::error::usage;
use super::output::View;
use super::run::{self, Destination, RunFlags};
use crate::case::{Case, FleetCase, Topology};
use crate::fleet::{self, PairSpec};
use crate::net::auth::Credentials;
use crate::observation::names;
use crate::observation::Role;
use crate::store::Record;
use crate::sweep::Plan;
use clap::{Args, Subcommand};
use std::path::PathBuf;

pub const EXAMPLES: &str = "\
Examples:
  iopath net serve --agent --port 7000 --psk-file /etc/iopath/psk   # on every host
  iopath fleet run rr --hosts hosts.txt --pairs all --psk-file psk --db fleet.db
  iopath fleet run stream --hosts hosts.txt --concurrent-pairs 8 --psk-file psk
  iopath fleet run stream --hosts h --pairs star:10.0.0.1:7000 --concurrent-pairs 8 --psk-file p
  iopath fleet run --resume 3 --db fleet.db --psk-file psk           # what is missing

--hosts: one HOST:PORT per line (# comments). --pairs: all (the circle method: 2(N-1) rounds of
N/2 disjoint pairs for even N, both directions), ring (i -> i+1), star:HOST (HOST <-> every
other), or a file of `SOURCE DESTINATION` lines. --seed N fixes the shuffled order of the rounds
and of the pairs within each. Each cell records its source, destination, round and how many
pairs ran at once. --reps auto (the default) runs the schedule as many times as `report
--matrix` needs to flag a host against the noise (8 hosts over all pairs: 3; the plan's line
says how many and why).";

const STREAM_EXAMPLES: &str = "\
Examples:
  iopath fleet run stream --hosts hosts.txt --psk-file psk --db fleet.db
  iopath fleet run stream --hosts hosts.txt --pairs ring --size 64K,1M --psk-file psk";

const RR_EXAMPLES: &str = "\
Examples:
  iopath fleet run rr --hosts hosts.txt --psk-file psk --db fleet.db
  iopath fleet run rr --hosts hosts.txt --pairs star:10.0.0.1:7000 --psk-file psk";

const CRR_EXAMPLES: &str = "\
Examples:
  iopath fleet run crr --hosts hosts.txt --mode two-copy --psk-file psk --db fleet.db";

#[derive(Subcommand, Debug)]
pub enum FleetCommand {
    /// Measure pairs of `net serve --agent` agents: each source agent runs the case as the
    /// client against its destination agent; rounds of disjoint pairs, stored as one run.
    #[command(after_help = EXAMPLES)]
    Run(FleetRunArgs),
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct FleetRunArgs {
    #[command(subcommand)]
    pub workload: Option<FleetWorkload>,
    /// Finish an interrupted, killed or partly failed fleet run: runs only the cells it is
    /// missing (failed cells included), with the batches of pairs they had.
    #[arg(long, value_name = "RUN_ID", value_parser = super::values::parse_run_id)]
    pub resume: Option<i64>,
    /// The results database of the run to resume.
    #[arg(long, default_value_os_t = crate::store::default_db_path(), value_name = "PATH")]
    pub db: PathBuf,
    /// The agents' key (for --resume; never stored).
    #[arg(long, value_name = "FILE")]
    pub psk_file: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum FleetWorkload {
    /// The flags of `iopath net stream`, each case run between every pair.
    #[command(after_help = STREAM_EXAMPLES)]
    Stream(Box<FleetStream>),
    /// The flags of `iopath net rr`, each case run between every pair.
    #[command(after_help = RR_EXAMPLES)]
    Rr(Box<FleetRr>),
    /// The flags of `iopath net crr`, each case run between every pair.
    #[command(after_help = CRR_EXAMPLES)]
    Crr(Box<FleetCrr>),
}

#[derive(Args, Debug)]
pub struct FleetStream {
    #[command(flatten)]
    pub fleet: FleetFlags,
    #[command(flatten)]
    pub args: super::net::StreamArgs,
}

#[derive(Args, Debug)]
pub struct FleetRr {
    #[command(flatten)]
    pub fleet: FleetFlags,
    #[command(flatten)]
    pub args: super::rr::RrArgs,
}

#[derive(Args, Debug)]
pub struct FleetCrr {
    #[command(flatten)]
    pub fleet: FleetFlags,
    #[command(flatten)]
    pub args: super::rr::CrrArgs,
}

/// What a fleet run adds to the flags of the network command it runs.
#[derive(Args, Debug)]
pub struct FleetFlags {
    /// The agents: a file of one HOST:PORT per line (# comments), each a `net serve --agent`.
    #[arg(long, value_name = "FILE")]
    pub hosts: PathBuf,
    /// Which directed pairs measure: all (every pair both ways, the circle method), ring
    /// (each host to the next in --hosts, the last to the first), star:HOST:PORT (that host
    /// to and from every other), or a file of `SOURCE DESTINATION` lines.
    #[arg(long, default_value = "all", value_name = "all|ring|star:HOST|FILE")]
    pub pairs: PairSpec,
    /// How many pairs of a round measure at the same time (1: each measurement alone; more:
    /// under load, at most the round's pairs). Stored with every cell. With star:HOST:PORT,
    /// an incast: the leaves send to the centre this many at a time (its agent needs
    /// `net serve --agent --sessions K`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=(fleet::MAX_HOSTS as i64 / 2)))]
    pub concurrent_pairs: u32,
}

/// `--seed` of a fleet run needs no `--shuffle`: the schedule is always shuffled (rounds, and
/// pairs within a round), and `--shuffle` says nothing more. Applied to `fleet run <workload>`
/// by `cli::command`.
pub fn scope_options(run: clap::Command) -> clap::Command {
    run.mut_subcommand("run", |run| {
        let mut run = run;
        for workload in ["stream", "rr", "crr"] {
            run = run.mut_subcommand(workload, |w| {
                w.mut_arg("seed", |a| {
                    a.requires(clap::builder::Resettable::<clap::Id>::Reset).help(
                        "Seed of the schedule's order: rounds and the pairs within each are shuffled by it (default: from the clock; stored with the run)",
                    )
                })
                .mut_arg("reps", |a| {
                    a.value_parser(parse_fleet_reps)
                        .default_value("auto")
                        .value_name("auto|N")
                        .help(REPS_HELP)
                })
                .mut_arg("shuffle", |a| a.hide(true))
                .mut_arg("warmup_cell", |a| a.hide(true))
                .mut_arg("port", |a| a.hide(true))
                .mut_arg("topology", |a| a.hide(true))
                .mut_arg("connect", |a| a.hide(true))
            });
        }
        run
    })
}

/// `fleet run --reps`: what the matrix's tests need, by default.
const REPS_HELP: &str = "Repetitions of every pair (1 to 1000, or auto). auto (the default): as many as the matrix's \
tests need to flag a host with one cell in the other direction: 3 for 8 hosts over all pairs, 5 for 4, 1 from 18 hosts up, at most 10 \
(the plan's line says how many and why; docs/methodology.md, \"Fleet matrix: outlier hosts and links\")";

/// The most repetitions `--reps auto` plans for pair sets that give a host few partners.
const AUTO_REPS_MAX: u32 = 10;

/// `--reps` of a fleet run: `auto` (0 in `RunFlags::reps`, resolved by [`fleet_plan`]) or 1 to 1000.
fn parse_fleet_reps(text: &str) -> Result<u32, String> {
    if text.eq_ignore_ascii_case("auto") {
        return Ok(0);
    }
    match text.parse::<u32>() {
        Ok(n) if (1..=1000).contains(&n) => Ok(n),
        _ => Err(format!("'{text}' is not auto or a whole number from 1 to 1000")),
    }
}

/// The repetitions `--reps auto` gives a schedule of `hosts` hosts, and why, for the plan's line.
fn auto_repetitions(rounds: &[Vec<fleet::hosts::Pair>], hosts: usize) -> (u32, String) {
    use crate::report::matrix::flags;
    let partners = fleet::judgeable_partners(rounds, hosts);
    if partners == 0 {
        return (
            1,
            "1 repetition: no host has a partner whose other pairs could be its yardstick, so the matrix judges no host".into(),
        );
    }
    let reps = flags::repetitions_needed(hosts, partners).min(AUTO_REPS_MAX);
    let level = flags::ALPHA / flags::MATRICES_PLANNED as f64 / (2 * hosts) as f64;
    let cells = partners as u32 * reps;
    let why = if flags::needed(cells, level).is_some_and(|k| k < cells) {
        format!(
            "{reps} repetition(s): {partners} partner(s) x {reps} = {cells} cells a host side, enough to flag a host with one cell the other way"
        )
    } else {
        format!(
            "{reps} repetition(s), the most auto plans: {cells} cells a host side may be too few for the matrix to flag a host (it says so); --reps N for more"
        )
    };
    (reps, why)
}

pub fn run(cmd: FleetCommand) -> anyhow::Result<()> {
    match cmd {
        FleetCommand::Run(args) => run_fleet(args),
    }
}

/// The network command's flags a fleet run does not take: where the server is comes from
/// the pairs, and a warm-up cell would run one pair once more.
fn refuse_unused(endpoint: &super::net::EndpointFlags, flags: &RunFlags) -> anyhow::Result<()> {
    let unused = [
        ("--connect", endpoint.connect.connect.is_some()),
        ("--topology", endpoint.topology.is_some()),
        ("--port", endpoint.port.is_some()),
    ];
    if let Some((flag, _)) = unused.iter().find(|(_, given)| *given) {
        return Err(usage(format!(
            "{flag} is not for fleet run: each pair's server is its destination agent (--hosts, --pairs)"
        )));
    }
    if flags.warmup_cell {
        return Err(usage(
            "--warmup-cell is not for fleet run: each cell warms up inside its own window (--warmup)",
        ));
    }
    if endpoint.psk_file.is_none() {
        return Err(usage(
            "fleet run needs --psk-file: the agents (`net serve --agent --psk-file`) run cases only for a controller that proves their key",
        ));
    }
    Ok(())
}

/// The network cases of the command, validated as the command would, each aimed at a
/// placeholder remote server (so only the client's buffers count against this machine's
/// memory, as on an agent); `fleet::cells` aims each at its destination.
fn network_cases(workload: &mut FleetWorkload, first_host: &str) -> anyhow::Result<(Vec<Case>, FleetFlagsRef)> {
    let aim = |endpoint: &mut super::net::EndpointFlags| endpoint.connect.connect = Some(first_host.to_string());
    Ok(match workload {
        FleetWorkload::Stream(w) => {
            refuse_unused(&w.args.endpoint, &w.args.run)?;
            aim(&mut w.args.endpoint);
            let cases = super::net::stream_cases(&w.args)?;
            (
                cases.into_iter().map(Case::NetStream).collect(),
                FleetFlagsRef::of(&w.fleet, &w.args.run, &w.args.endpoint)?,
            )
        }
        FleetWorkload::Rr(w) => {
            refuse_unused(&w.args.endpoint, &w.args.run)?;
            aim(&mut w.args.endpoint);
            let cases = super::rr::rr_cases(&w.args, crate::case::RrKind::Rr)?;
            (
                cases.into_iter().map(Case::NetRr).collect(),
                FleetFlagsRef::of(&w.fleet, &w.args.run, &w.args.endpoint)?,
            )
        }
        FleetWorkload::Crr(w) => {
            refuse_unused(&w.args.args.endpoint, &w.args.args.run)?;
            aim(&mut w.args.args.endpoint);
            let cases = super::rr::rr_cases(&w.args.args, crate::case::RrKind::Crr)?;
            (
                cases.into_iter().map(Case::NetRr).collect(),
                FleetFlagsRef::of(&w.fleet, &w.args.args.run, &w.args.args.endpoint)?,
            )
        }
    })
}

/// The fleet flags and run flags of whichever workload was named.
struct FleetFlagsRef {
    pairs: PairSpec,
    concurrent_pairs: u32,
    run: RunFlags,
    /// The agents' key (`--psk-file`), proven on every leg.
    credentials: Credentials,
}

impl FleetFlagsRef {
    fn of<C: clap::Args + super::net::Connect>(
        fleet: &FleetFlags,
        run: &RunFlags,
        endpoint: &super::net::EndpointFlags<C>,
    ) -> anyhow::Result<FleetFlagsRef> {
        Ok(FleetFlagsRef {
            pairs: fleet.pairs.clone(),
            concurrent_pairs: fleet.concurrent_pairs,
            run: run.clone(),
            credentials: endpoint.credentials()?,
        })
    }
}

fn hosts_file(workload: &FleetWorkload) -> &PathBuf {
    match workload {
        FleetWorkload::Stream(w) => &w.fleet.hosts,
        FleetWorkload::Rr(w) => &w.fleet.hosts,
        FleetWorkload::Crr(w) => &w.fleet.hosts,
    }
}

/// The plan of a fleet run from its flags, and the lines that announce it.
pub fn fleet_plan(workload: &mut FleetWorkload) -> anyhow::Result<(Plan, String)> {
    let hosts = fleet::hosts::read_hosts(hosts_file(workload)).map_err(usage)?;
    let (inner, flags) = network_cases(workload, &hosts[0])?;
    let seed = flags.run.seed.unwrap_or_else(clock_seed);
    let rounds = fleet::rounds(&flags.pairs, &hosts, seed, flags.concurrent_pairs).map_err(usage)?;
    let cases = fleet::cells(&hosts, &rounds, flags.concurrent_pairs, &inner).map_err(usage)?;
    let (repetitions, why) = match flags.run.reps {
        0 => auto_repetitions(&rounds, hosts.len()),
        n => (n, format!("{n} repetition(s), as --reps says")),
    };
    let plan = Plan {
        cases,
        repetitions,
        // The schedule's order is the plan's: batches of a round stay consecutive.
        shuffle: false,
        seed,
        warmup_cell: false,
        name: flags.run.name.clone(),
        interface: Topology::Remote { addr: hosts[0].clone() }.interface(),
        credentials: flags.credentials,
    };
    let widest = rounds.iter().map(Vec::len).max().unwrap_or(0);
    let at_once = (flags.concurrent_pairs as usize).min(widest);
    let t_case = inner.iter().map(Case::planned_seconds).sum::<f64>();
    let seconds =
        fleet::schedule::estimated_seconds(&rounds, flags.concurrent_pairs, t_case) * f64::from(plan.repetitions);
    let announce = format!(
        "fleet: {} hosts, pairs {}, {} rounds of up to {widest} disjoint pairs, {} cells ({} case(s) x {} rep(s)), up to {at_once} pair(s) at once, seed {seed}; estimated {} (a round takes ceil(its pairs / {}) x {} of case time); {why}\n",
        hosts.len(),
        flags.pairs,
        rounds.len(),
        plan.cases.len() * plan.repetitions as usize,
        inner.len(),
        plan.repetitions,
        crate::format::format_duration_s(seconds),
        flags.concurrent_pairs,
        crate::format::format_duration_s(t_case),
    );
    Ok((plan, announce))
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn run_fleet(args: FleetRunArgs) -> anyhow::Result<()> {
    let mut args = args;
    match (args.workload.as_mut(), args.resume) {
        (Some(workload), _) => {
            let (plan, announce) = fleet_plan(workload)?;
            let run = match workload {
                FleetWorkload::Stream(w) => &w.args.run,
                FleetWorkload::Rr(w) => &w.args.run,
                FleetWorkload::Crr(w) => &w.args.args.run,
            };
            crate::tell_part!("{}", super::output::wrap(&announce, 4));
            run::measure(&plan, run, false)
        }
        (None, Some(id)) => {
            let Some(path) = &args.psk_file else {
                return Err(usage(
                    "fleet run --resume needs --psk-file: the agents' key is never stored",
                ));
            };
            let credentials = crate::net::auth::Credentials::from_file(Some(path)).map_err(usage)?;
            let plan = run::resume_plan(&args.db, id)?.with_credentials(credentials);
            if let Some(other) = plan.cases.iter().find(|c| c.get::<FleetCase>().is_none()) {
                return Err(usage(format!(
                    "run {id} is not a fleet run (it holds {} cases): resume it with `iopath run --resume {id}`",
                    other.workload()
                )));
            }
            let outputs = run::Outputs {
                print: run::Print::Summary,
                ..Default::default()
            };
            run::run_workload(&plan, Destination::Resume(&args.db, id), outputs)
        }
        (None, None) => Err(usage(
            "fleet run needs a workload (stream, rr, crr) with --hosts, or --resume RUN_ID",
        )),
    }
}

/// The fleet's table: one row per cell (the median of its repetitions), the pair, its round,
/// how many pairs ran at once, the network case, and the case's headline figures.
pub fn render_fleet_table(records: &[Record], view: View) -> String {
    use super::output::{Column, Show};
    let merged = super::output::median_records(records);
    let fleet = |r: &Record| r.case.get::<FleetCase>().cloned();
    let m = |title, show, name, role| Column::metric(title, show, name, role, records);
    let mut cols = vec![
        Column::key("round", move |r, _| {
            fleet(r).map(|c| c.round.to_string()).unwrap_or_default()
        }),
        Column::key("source", move |r, _| fleet(r).map(|c| c.source).unwrap_or_default()),
        Column::key("destination", move |r, _| {
            fleet(r).map(|c| c.destination).unwrap_or_default()
        }),
        Column::key("at once", move |r, _| {
            fleet(r).map(|c| c.concurrent_pairs.to_string()).unwrap_or_default()
        }),
        Column::key("case", move |r, _| fleet(r).map(|c| c.case.label()).unwrap_or_default()),
    ];
    if merged.iter().any(|(_, n)| *n > 1) {
        cols.push(Column::key("reps", |_, n| n.to_string()));
    }
    let inner = |workload: &str| {
        merged
            .iter()
            .any(|(r, _)| fleet(r).is_some_and(|c| c.case.workload() == workload))
    };
    if inner("net-stream") {
        cols.push(m("Gbit/s", Show::Default, names::THROUGHPUT_GBPS, Role::System));
    }
    if inner("net-rr") || inner("net-crr") {
        cols.extend([
            m("txn/s", Show::Default, names::TRANSACTIONS_PER_S, Role::System),
            m("p50 us", Show::Default, names::LATENCY_P50_US, Role::Client),
            m("p99 us", Show::Default, names::LATENCY_P99_US, Role::Client),
        ]);
    }
    let mut text = super::output::render_table(&cols, &merged, view);
    text.push_str(&super::output::notes(records, view));
    text
}
