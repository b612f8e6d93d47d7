//! Server concurrency models (iterative, thread per connection, pool, select, poll, epoll
//! level/edge, io_uring) serving one framed protocol (`protocol.rs`) through one handler,
//! the top-k process service behind it, and the load generator that measures them.

mod admission;
mod conn;
pub mod handler;
pub mod loadgen;
pub mod model;
pub mod procs;
pub mod protocol;
pub mod query;
pub mod server;
pub mod window;

pub use crate::case::Request;
pub use model::Model;

// An echo request must fit in one protocol frame.
const _: () = assert!(Request::MAX_ECHO_BYTES <= protocol::MAX_PAYLOAD);

use crate::case::ServersCase;
use crate::measure::clock::tsc_hz;
use crate::measure::counters::CounterSample;
use crate::measure::window::SystemProbes;
use crate::observation::names;
use crate::observation::{Metric, Observation, Role, Source, ThreadPlacement, Unsupported, WarningKind};
use crate::stop::Interrupted;
use loadgen::{LoadConfig, LoadResult};
use server::{ServerConfig, ServerSummary};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use window::Window;

fn fd_soft_limit() -> Option<u64> {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .ok()
        .map(|(soft, _)| soft)
}

/// How many client connections fit in the file descriptors still free, leaving each its
/// server side, one epoll per load-generator thread and some slack for the server's own use.
fn connectable_clients(client_threads: usize) -> usize {
    const SLACK: u64 = 16;
    let open = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count()) as u64;
    match fd_soft_limit() {
        Some(limit) => (limit.saturating_sub(open + client_threads as u64 + SLACK) / 2) as usize,
        None => usize::MAX,
    }
}

/// Raise the soft RLIMIT_NOFILE to cover `needed` fds; a warning when the hard limit is lower.
pub fn raise_fd_limit(needed: u64) -> Option<String> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(l) => l,
        Err(e) => return Some(format!("cannot read RLIMIT_NOFILE ({e}); connections may fail")),
    };
    if soft >= needed {
        return None;
    }
    let target = needed.min(hard);
    if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, target, hard) {
        return Some(format!(
            "cannot raise RLIMIT_NOFILE from {soft} ({e}); about {needed} fds are needed"
        ));
    }
    (target < needed).then(|| {
        format!("RLIMIT_NOFILE hard limit is {hard} but about {needed} fds are needed: some connections will fail (raise it with ulimit -Hn)")
    })
}

/// Run one server-model case: start the model where the topology puts the server (loopback,
/// in this process; server threads measured with per-thread counters), drive it with the load
/// generator for the case's duration, and return client-side latency/throughput and
/// server-side counters. A stop request ends it within about 100 ms in any phase, the server
/// stopped and every thread joined, as `Err(Interrupted)`.
pub fn run_case(case: &ServersCase, stop: crate::stop::Stop) -> anyhow::Result<Observation> {
    run_case_until(case, &|| stop.requested())
}

/// `run_case` with an explicit early-stop check. With counters on (the default) the case runs
/// twice: a latency pass with no perf event on any thread, whose figures are the result, then
/// a counting pass whose perf figures are added and whose p50 is `latency_p50_counted_us`
/// (`measure::counters::merge_counting`; docs/methodology.md).
pub fn run_case_until(case: &ServersCase, stop: &(dyn Fn() -> bool + Sync)) -> anyhow::Result<Observation> {
    let pass = |perf: bool| run_pass(&ServersCase { perf, ..case.clone() }, stop);
    crate::measure::counters::latency_then_counting(case.perf, pass, || !stop())
}

/// One pass of the case.
fn run_pass(case: &ServersCase, stop: &(dyn Fn() -> bool + Sync)) -> anyhow::Result<Observation> {
    let topology = case.topology.establish()?;
    let model = case.model;
    let mut obs = Observation::default();
    // Both ends live in this process: two fds per connection plus slack.
    if let Some(w) = raise_fd_limit(2 * case.clients as u64 + 256) {
        obs.warn(WarningKind::FdLimit, w);
    }
    let window = Arc::new(Window::new(case.perf));
    if let Some(note) = &window.policy().note {
        obs.warn(WarningKind::CountersRestricted, note.clone());
    }
    let mut config = ServerConfig::new(model, topology.listen_addr(0)?);
    config.max_conns = usize::MAX;
    // Every client is this process, one address: the turn of the iterative model is the
    // model's to show, not cut short for fairness between addresses.
    config.per_address = false;
    config.idle_timeout = Duration::from_millis(case.duration_ms + case.warmup_ms) + Duration::from_secs(30);
    // A measured run never closes a client for being slow: its latency shows it.
    config.frame_timeout = config.idle_timeout;
    config.pool_size = case.pool_size.max(1);
    config.cpus = case.server_cpus.as_ref().map(|c| c.to_vec());
    let server = match topology.on_server_side(|| server::start(config, Some(window.clone()))) {
        Ok(s) => s,
        Err(e) => match e.downcast_ref::<Unsupported>() {
            // The kernel refuses the model (io_uring disabled): a result, not a failure.
            Some(refused) => {
                let reason = refused.to_string();
                obs.warn(WarningKind::Unsupported, reason.clone());
                for (name, role, unit) in METRIC_UNITS {
                    obs.push(Metric::unavailable(name, *role, unit, reason.clone()));
                }
                return Ok(obs);
            }
            None => return Err(e),
        },
    };
    let load_config = LoadConfig {
        addr: server.addr,
        clients: case.clients,
        threads: case.client_threads.max(1),
        workload: case.request,
        warmup: Duration::from_millis(case.warmup_ms),
        duration: Duration::from_millis(case.duration_ms),
        rate: case.rate.map(|r| r as f64),
        timeout: Duration::from_secs(1),
        cpus: case.client_cpus.as_ref().map(|c| c.to_vec()),
        connectable: connectable_clients(case.client_threads.max(1)),
    };
    if load_config.connectable < case.clients {
        obs.warn(
            WarningKind::FdLimit,
            format!(
                "only {} of {} clients could connect: the file-descriptor limit (RLIMIT_NOFILE {}) leaves room for that many connections with their server side in this process; raise it with `ulimit -n`",
                load_config.connectable,
                case.clients,
                fd_soft_limit().map_or("unknown".into(), |l| l.to_string())
            ),
        );
    }
    // Latencies are Instant::now() differences: state what one read of that clock costs.
    let clock_overhead_ns = crate::measure::clock::Clock::monotonic().overhead_ns;
    let mut system = SystemProbes::default();
    crate::measure::system::push_network_probes(&mut system, topology.server_namespace());
    crate::measure::queue::push_queue_probe(&mut system, topology.queue_readers());
    let load = topology.on_client_side(|| loadgen::run(&load_config, &window, &mut system, stop));
    let Ok(load) = load else {
        // Interrupted: a cut-short window is no data. Stop and join the server first.
        server.stop();
        return Err(anyhow::Error::new(Interrupted));
    };
    let (samples, server_placement, late) = window.collect(Duration::from_secs(2));
    let (client_samples, client_placement) = window.client_samples();
    let summary = server.stop();
    if late > 0 {
        obs.warn(
            WarningKind::Starved,
            format!("{late} server thread(s) did not close their counter window in time"),
        );
    }
    describe(&mut obs, model, case, &load, &samples, &summary);
    describe_client_cpu(&mut obs, &load, &client_samples);
    describe_placement(&mut obs, case, server_placement, client_placement);
    if let Some(w) = crate::measure::system::contended(&load.system) {
        obs.warn(WarningKind::Contended, w);
    }
    obs.metrics.extend(load.system.iter().cloned());
    obs.metrics
        .extend(crate::measure::system::tcp_info_summary(&load.tcp_info, Role::Client));
    obs.push(Metric::new(
        "clock_overhead_ns",
        Role::Client,
        clock_overhead_ns,
        "ns",
        Source::Tool,
    ));
    Ok(obs)
}

/// Where each side's threads ran (CPU at the window's edges, migrations inside it), and a
/// warning when client and server threads met on one CPU while left to the scheduler: whether
/// they share a CPU changes the figures several-fold, and it changes between repetitions.
fn describe_placement(
    obs: &mut Observation,
    case: &ServersCase,
    server: Vec<ThreadPlacement>,
    client: Vec<ThreadPlacement>,
) {
    let cpus = |threads: &[ThreadPlacement]| -> BTreeSet<usize> {
        threads
            .iter()
            .flat_map(|p| [p.cpu_at_start, p.cpu_at_end])
            .flatten()
            .collect()
    };
    let shared: Vec<String> = cpus(&server)
        .intersection(&cpus(&client))
        .map(|c| c.to_string())
        .collect();
    let left_to_scheduler = case.server_cpus.is_none() || case.client_cpus.is_none();
    if !shared.is_empty() && left_to_scheduler {
        obs.warn(
            WarningKind::Unpinned,
            format!(
                "client and server threads ran on the same CPU ({}) at a window edge: left to the scheduler, the two sides share a CPU in some repetitions and not in others, which changes the figures several-fold; pin them apart with --server-cpus and --client-cpus",
                shared.join(", ")
            ),
        );
    }
    let moved: Vec<&ThreadPlacement> = server
        .iter()
        .chain(&client)
        .filter(|p| p.migrations.is_some_and(|m| m > 0))
        .collect();
    if !moved.is_empty() {
        let total: u64 = moved.iter().filter_map(|p| p.migrations).sum();
        obs.warn(
            WarningKind::Migrated,
            format!(
                "{} of {} threads migrated between CPUs during the window ({total} migrations)",
                moved.len(),
                server.len() + client.len()
            ),
        );
    }
    obs.placement = server.into_iter().chain(client).collect();
}

/// The load generator's own CPU in the window (getrusage per client thread, summed).
fn describe_client_cpu(obs: &mut Observation, load: &LoadResult, samples: &[CounterSample]) {
    let usage = CounterSample::sum(samples)
        .map(|s| s.usage)
        .unwrap_or_else(|| Err("no client thread ran inside the window".into()));
    let m = |name: &str, unit: &str, v: Result<f64, String>| {
        Metric::from_result(name, Role::Client, unit, Source::Rusage, v)
    };
    obs.push(m(names::CPU_USER_S, "s", usage.clone().map(|u| u.user.as_secs_f64())));
    obs.push(m(names::CPU_SYS_S, "s", usage.clone().map(|u| u.system.as_secs_f64())));
    obs.push(m(
        names::CPU_US_PER_REQ,
        "us/req",
        usage.clone().and_then(|u| {
            if load.completed == 0 {
                Err("no request completed inside the window".into())
            } else {
                Ok((u.user + u.system).as_secs_f64() * 1e6 / load.completed as f64)
            }
        }),
    ));
    obs.push(m(
        names::VOLUNTARY_SWITCHES,
        "switches",
        usage.clone().map(|u| u.voluntary_switches as f64),
    ));
    obs.push(m(
        "involuntary_switches",
        "switches",
        usage.map(|u| u.involuntary_switches as f64),
    ));
}

/// Whose figures these are: the clients that got a reply inside the window
/// (`clients_served`), those that failed (`clients_failed`), their share of the clients asked
/// for (`served_fraction`, system), and a `minority-served` warning when fewer than half were
/// served, so no table, chart or finding reads the rate of the few as the model's.
pub fn served_metrics(obs: &mut Observation, clients: usize, load: &LoadResult) {
    let tool = |name: &str, role: Role, unit: &str, v: f64| Metric::tool(name, role, v, unit);
    obs.push(tool(names::CLIENTS_SERVED, Role::Client, "clients", load.served as f64));
    obs.push(tool(names::CLIENTS_FAILED, Role::Client, "clients", load.failed as f64));
    let fraction = if clients == 0 {
        1.0
    } else {
        load.served as f64 / clients as f64
    };
    obs.push(tool(names::SERVED_FRACTION, Role::System, "fraction", fraction));
    if minority(load.served, clients) {
        let e = &load.errors;
        obs.warn(
            WarningKind::MinorityServed,
            format!(
                "only {} of {clients} clients got a reply inside the window ({} failed: {} timed-out and {} other failed requests, {} connect errors): requests/s and the percentiles are those of the {} served, not the model's under {clients} clients",
                load.served,
                load.failed,
                e.timeouts,
                e.total() - e.timeouts - e.connect,
                e.connect,
                load.served,
            ),
        );
    }
}

/// Fewer than half of `of` were served.
pub fn minority(served: usize, of: usize) -> bool {
    served * 2 < of
}

/// Every metric run_case reports, for the all-unavailable observation.
const METRIC_UNITS: &[(&str, Role, &str)] = &[
    (names::REQUESTS_PER_S, Role::System, "req/s"),
    (names::LATENCY_P50_US, Role::Client, "us"),
    (names::LATENCY_P90_US, Role::Client, "us"),
    (names::LATENCY_P99_US, Role::Client, "us"),
    (names::LATENCY_P999_US, Role::Client, "us"),
    (names::LATENCY_MAX_US, Role::Client, "us"),
    (names::ERRORS, Role::Client, "errors"),
];

fn describe(
    obs: &mut Observation,
    model: Model,
    case: &ServersCase,
    load: &LoadResult,
    samples: &[CounterSample],
    summary: &ServerSummary,
) {
    client_metrics(obs, case, load);
    server_metrics(obs, load, samples, summary);
    load_warnings(obs, model, case, load);
}

/// What the load generator saw: the request rate, latency quantiles, errors by kind, the
/// requests left waiting, and how many clients were served.
fn client_metrics(obs: &mut Observation, case: &ServersCase, load: &LoadResult) {
    let secs = load.window.as_secs_f64();
    let tool = |name: &str, role: Role, unit: &str, v: f64| Metric::tool(name, role, v, unit);
    if secs > 0.0 {
        obs.push(tool(
            names::REQUESTS_PER_S,
            Role::System,
            "req/s",
            load.completed as f64 / secs,
        ));
    } else {
        obs.push(Metric::unavailable(
            names::REQUESTS_PER_S,
            Role::System,
            "req/s",
            "the window did not open (stopped early)",
        ));
    }
    let none = NONE_COMPLETED;
    for (name, q) in [
        (names::LATENCY_P50_US, 0.5),
        (names::LATENCY_P90_US, 0.9),
        (names::LATENCY_P99_US, 0.99),
        (names::LATENCY_P999_US, 0.999),
    ] {
        obs.push(match load.latency.quantile_us(q) {
            Some(v) => tool(name, Role::Client, "us", v),
            None => Metric::unavailable(name, Role::Client, "us", none),
        });
    }
    obs.push(match load.latency.max_us() {
        Some(v) => tool(names::LATENCY_MAX_US, Role::Client, "us", v),
        None => Metric::unavailable(names::LATENCY_MAX_US, Role::Client, "us", none),
    });
    obs.push(match load.latency.mean_us() {
        Some(v) => tool(names::LATENCY_MEAN_US, Role::Client, "us", v),
        None => Metric::unavailable(names::LATENCY_MEAN_US, Role::Client, "us", none),
    });
    let e = &load.errors;
    obs.push(tool(names::ERRORS, Role::Client, "errors", e.total() as f64));
    obs.push(tool("connect_errors", Role::Client, "errors", e.connect as f64));
    obs.push(tool("refused", Role::Client, "errors", e.refused as f64));
    obs.push(tool(names::TIMEOUTS, Role::Client, "requests", e.timeouts as f64));
    obs.push(tool("protocol_errors", Role::Client, "errors", e.protocol as f64));
    obs.push(tool("io_errors", Role::Client, "errors", e.io as f64));
    if load.starved > 0 {
        obs.warn(WarningKind::Starved, format!(
            "{} requests had waited over {} ms unanswered when the window closed: their ages so far are in the latency percentiles (as lower bounds), so p99 shows the clients this model left waiting",
            load.starved,
            loadgen::STARVED.as_millis()
        ));
    }
    obs.push(tool(
        names::UNANSWERED_AT_END,
        Role::Client,
        "requests",
        load.unanswered as f64,
    ));
    obs.push(tool(
        "clients_connected",
        Role::Client,
        "connections",
        load.connected as f64,
    ));
    obs.push(tool("requests", Role::Client, "requests", load.completed as f64));
    obs.push(tool(names::WINDOW_S, Role::System, "s", secs));
    served_metrics(obs, case.clients, load);
}

/// Why a per-request figure is unavailable when no request completed.
const NONE_COMPLETED: &str = "no request completed inside the window";

/// The server threads' counters summed over threads (each counted only inside the window),
/// the CPU per request, and the connections the server accepted and refused.
fn server_metrics(obs: &mut Observation, load: &LoadResult, samples: &[CounterSample], summary: &ServerSummary) {
    let tool = |name: &str, role: Role, unit: &str, v: f64| Metric::tool(name, role, v, unit);
    match CounterSample::sum(samples) {
        Some(sum) => {
            obs.metrics
                .extend(sum.metrics(Role::Server, load.bytes, load.completed, "req", tsc_hz()));
            let per_req = match (sum.cpu_seconds(), load.completed) {
                (Some(cpu), n) if n > 0 => Ok(cpu * 1e6 / n as f64),
                (Some(_), _) => Err(NONE_COMPLETED.to_string()),
                (None, _) => Err(sum.usage.clone().err().unwrap_or_default()),
            };
            obs.push(Metric::from_result(
                names::CPU_US_PER_REQ,
                Role::Server,
                "us/req",
                Source::Rusage,
                per_req,
            ));
        }
        None => obs.push(Metric::unavailable(
            names::CPU_USER_S,
            Role::Server,
            "s",
            "no server thread was running inside the window",
        )),
    }
    obs.push(tool(
        "server_threads_measured",
        Role::Server,
        "threads",
        samples.len() as f64,
    ));
    obs.push(tool("accepted", Role::Server, "connections", summary.accepted as f64));
    obs.push(tool(
        "server_refused",
        Role::Server,
        "connections",
        summary.refused as f64,
    ));
}

/// The warnings of a servers case: request errors by kind, and the limits of the model.
fn load_warnings(obs: &mut Observation, model: Model, case: &ServersCase, load: &LoadResult) {
    let e = &load.errors;
    if e.total() > 0 {
        obs.warn(
            WarningKind::RequestErrors,
            format!(
                "{} error(s): {} connect, {} refused, {} timeouts, {} protocol, {} io, {} shed (open loop: over {} waiting on a connection){}",
                e.total(),
                e.connect,
                e.refused,
                e.timeouts,
                e.protocol,
                e.io,
                e.shed,
                loadgen::MAX_BACKLOG,
                if load.samples.is_empty() {
                    String::new()
                } else {
                    format!("; e.g. {}", load.samples.join("; "))
                }
            ),
        );
    }
    if model == Model::Iterative && case.clients > 1 {
        obs.warn(WarningKind::ModelLimit, "iterative serves one connection at a time: with persistent connections the other clients wait (and time out) until it closes");
    }
    if model == Model::Pool && case.clients > case.pool_size {
        obs.warn(
            WarningKind::ModelLimit,
            format!(
                "pool: {} workers share {} connections through one epoll instance",
                case.pool_size, case.clients
            ),
        );
    }
}
