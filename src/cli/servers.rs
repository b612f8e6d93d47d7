//! `iopath servers` (compare server models under load) and `iopath procs serve|query` (the
//! top-k CPU process service on its own).

use super::error::usage;
use super::output::{num, Table, View};
use super::run::RunFlags;
use super::values::{self, parse_count_list, parse_cpu_list, parse_duration, parse_duration_or_zero};
use crate::case::{Case, ServersCase, Topology};
use crate::observation::names;
use crate::observation::Role;
use crate::servers::protocol::Rank;
use crate::servers::server::{self, ServerConfig};
use crate::servers::{self as srv, Model, Request};
use crate::store::Record;
use crate::sweep::Plan;
use clap::{Args, Subcommand};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ServersArgs {
    /// Server models, comma-separated, or all of them.
    #[arg(long, default_value = "all", value_parser = crate::case::AllOrListParser::<Model>::default())]
    pub model: ModelList,
    /// What every client asks for, comma-separated: echo:<bytes> (e.g. echo:64) or procs:<k>
    /// (the top-k CPU processes, e.g. procs:2).
    #[arg(long, default_value = "echo:64", value_parser = parse_requests)]
    pub request: RequestList,
    /// Concurrent client connections: a list 1,10,100,1000 or a range A..B (both ends and every
    /// power of two between: 3..10 is 3,4,8,10).
    #[arg(long, default_value = "1,10,100", value_parser = parse_count_list)]
    pub clients: values::CountList,
    /// Measured window per case.
    #[arg(long, default_value = "3s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub duration: Duration,
    /// Load before the window opens (not measured), 0 for none.
    #[arg(long, default_value = "500ms", value_parser = parse_duration_or_zero, allow_hyphen_values = true)]
    pub warmup: Duration,
    /// Open loop at this many requests/s in total (default: closed loop).
    #[arg(long)]
    pub rate: Option<u64>,
    /// Load-generator threads the connections are spread over.
    #[arg(long, default_value_t = 1)]
    pub client_threads: usize,
    /// Worker threads of the pool model.
    #[arg(long, default_value_t = 4)]
    pub pool_size: usize,
    /// Pin the server threads to these CPUs (e.g. 1 or 0-1).
    #[arg(long, value_parser = parse_cpu_list)]
    pub server_cpus: Option<values::CpuList>,
    /// Pin the load-generator threads to these CPUs.
    #[arg(long, value_parser = parse_cpu_list)]
    pub client_cpus: Option<values::CpuList>,
    /// Measure server threads with getrusage only: no perf events, whose per-context-switch
    /// cost (about 2 us per round trip on a VM) shows in latency.
    #[arg(long)]
    pub no_perf: bool,
    /// Where the server and the load generator live: loopback, netns (both in a fresh private
    /// network namespace) or veth[:mtu=N][,rate=R] (the server in a fresh namespace behind a
    /// veth pair). Namespaces need root.
    #[arg(long, value_name = "TOPOLOGY", value_parser = parse_topology)]
    pub topology: Option<Box<Topology>>,
    #[command(flatten)]
    pub run: RunFlags,
}

#[derive(Subcommand, Debug)]
pub enum ProcsCommand {
    /// Serve the top-k CPU process list until Ctrl-C (SIGINT) or SIGTERM.
    #[command(after_help = super::examples::PROCS_SERVE)]
    Serve(ServeArgs),
    /// Ask a running service for its top-k CPU consumers.
    #[command(after_help = super::examples::PROCS_QUERY)]
    Query(QueryArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Concurrency model.
    #[arg(long, default_value = "epoll")]
    pub model: Model,
    /// Address to listen on (port 0 picks a free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:7070", value_parser = parse_address)]
    pub listen: SocketAddr,
    /// Connections served at once; more are refused with a server-full error.
    #[arg(long, default_value_t = 1024)]
    pub max_conns: usize,
    /// Close a connection that sends nothing for this long (1 s while the server is full and
    /// turning newcomers away).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// Close a connection whose frame has not arrived whole this long after its first byte.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub frame_timeout: Duration,
    /// Also rank by CPU used during each interval of this length (e.g. 1s).
    #[arg(long, value_parser = parse_interval)]
    pub interval: Option<Duration>,
    /// Worker threads of the pool model.
    #[arg(long, default_value_t = 4)]
    pub pool_size: usize,
    /// Pin the server threads to these CPUs.
    #[arg(long, value_parser = parse_cpu_list)]
    pub cpus: Option<values::CpuList>,
}

#[derive(Args, Debug)]
pub struct QueryArgs {
    /// The server, e.g. 127.0.0.1:7070.
    #[arg(value_parser = parse_address)]
    pub addr: SocketAddr,
    /// How many processes to list.
    #[arg(short = 'k', long = "top", default_value_t = 2)]
    pub k: u16,
    /// Concurrent clients asking at once (each prints nothing; the first reply is shown).
    #[arg(long, default_value_t = 1)]
    pub clients: usize,
    /// Rank by CPU used during the server's last interval (server started with --interval).
    #[arg(long)]
    pub interval: bool,
    /// Give up on a step (connect, send, the whole reply) after this long: a deadline per
    /// step, however slowly the bytes come.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Print the replies as JSON.
    #[arg(long)]
    pub json: bool,
}

/// See values::SizeList for why these are aliases.
type ModelList = Vec<Model>;
type RequestList = Vec<Request>;

/// `--request`: requests separated by commas (or `|`).
fn parse_requests(text: &str) -> Result<Vec<Request>, String> {
    let mut out = Vec::new();
    for part in text.split([',', '|']) {
        let w: Request = part.parse()?;
        if !out.contains(&w) {
            out.push(w);
        }
    }
    Ok(out)
}

/// `--topology`: where the server and the load generator live; servers starts its own server,
/// so never remote. Whether this machine can build it is checked with the other flags.
/// Boxed: the flag keeps `servers`' arguments small.
#[allow(clippy::unnecessary_box_returns)]
fn parse_topology(text: &str) -> Result<Box<Topology>, String> {
    let topology: Topology = text.parse()?;
    if !topology.starts_server() {
        return Err(format!(
            "'{text}' names a remote server, and servers starts its own (accepted: loopback, netns, veth[:mtu=N][,rate=R])"
        ));
    }
    Ok(Box::new(topology))
}

/// An address to listen on or to ask (`--listen`, `procs query ADDR`), resolved.
fn parse_address(text: &str) -> Result<SocketAddr, String> {
    text.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("'{text}' is not an address (accepted: host:port, e.g. 127.0.0.1:7070)"))
}

/// `procs serve --interval`: below a few scheduler ticks every process shows 0 or 1 tick, so
/// there is nothing to rank.
fn parse_interval(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < MIN_INTERVAL {
        return Err(format!(
            "{text} is too short to rank anything (accepted: at least 100ms; /proc counts CPU in 10 ms ticks)"
        ));
    }
    Ok(d)
}

/// `--topology` (absent: loopback), checked against this machine: netem, root for namespaces.
fn topology_of(args: &ServersArgs) -> anyhow::Result<Topology> {
    let topology = args.topology.as_deref().cloned().unwrap_or_default();
    topology.check().map_err(usage)?;
    topology.check_answers().map_err(usage)?;
    Ok(topology)
}

/// Whether a stored servers case (a resumed run) keeps the limits these flags enforce.
pub fn check_case(c: &crate::case::ServersCase) -> Result<(), String> {
    const MAX_PHASE_MS: u64 = 86_400_000;
    if c.clients == 0 || c.clients > MAX_CLIENTS {
        return Err(format!("{} clients (accepted: 1 to {MAX_CLIENTS})", c.clients));
    }
    if c.rate.is_some_and(|r| !(1..=MAX_RATE).contains(&r)) {
        return Err(format!("rate {:?} (accepted: 1 to {MAX_RATE} requests/s)", c.rate));
    }
    if c.client_threads == 0 || c.client_threads > 64 {
        return Err(format!("{} client threads (accepted: 1 to 64)", c.client_threads));
    }
    if c.pool_size == 0 || c.pool_size > 1024 {
        return Err(format!("a pool of {} (accepted: 1 to 1024)", c.pool_size));
    }
    if c.duration_ms == 0 || c.duration_ms > MAX_PHASE_MS || c.warmup_ms > MAX_PHASE_MS {
        return Err("duration must be between 1 ms and 24 h, warm-up at most 24 h".into());
    }
    Ok(())
}

const MAX_CLIENTS: usize = 20_000;
/// The open loop sends one request every 1/rate s; above this the gap is below 100 ns.
const MAX_RATE: u64 = 10_000_000;
const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// Stage two: validate the flags into the grid of cases, the same for `servers` and
/// a plan file.
pub fn servers_cases(args: &ServersArgs) -> anyhow::Result<Vec<ServersCase>> {
    if let Some(&too_many) = args.clients.iter().find(|&&c| c > MAX_CLIENTS) {
        return Err(usage(format!(
            "--clients: {too_many} is above the limit of {MAX_CLIENTS} connections"
        )));
    }
    if let Some(rate) = args.rate.filter(|r| !(1..=MAX_RATE).contains(r)) {
        return Err(usage(format!(
            "--rate {rate} is out of range (accepted: 1 to {MAX_RATE} requests/s; omit it for closed loop)"
        )));
    }
    if args.client_threads == 0 || args.client_threads > 64 {
        return Err(usage(format!(
            "--client-threads: {} is out of range (accepted: 1 to 64)",
            args.client_threads
        )));
    }
    if args.pool_size == 0 || args.pool_size > 1024 {
        return Err(usage(format!(
            "--pool-size: {} is out of range (accepted: 1 to 1024)",
            args.pool_size
        )));
    }
    let topology = topology_of(args)?;
    let server_cpus: Option<crate::case::CpuList> = args.server_cpus.clone().map(Into::into);
    let client_cpus: Option<crate::case::CpuList> = args.client_cpus.clone().map(Into::into);
    let mut cases = Vec::new();
    for &w in &args.request {
        for &m in &args.model {
            for &c in &args.clients {
                cases.push(ServersCase {
                    model: m,
                    request: w,
                    clients: c,
                    duration_ms: (args.duration.as_millis() as u64).max(1),
                    warmup_ms: args.warmup.as_millis() as u64,
                    rate: args.rate,
                    client_threads: args.client_threads,
                    pool_size: args.pool_size,
                    server_cpus: server_cpus.clone(),
                    client_cpus: client_cpus.clone(),
                    perf: !args.no_perf,
                    topology: topology.clone(),
                });
            }
        }
    }
    Ok(cases)
}

impl TryFrom<&ServersArgs> for Plan {
    type Error = anyhow::Error;
    fn try_from(args: &ServersArgs) -> anyhow::Result<Plan> {
        let cases = servers_cases(args)?.into_iter().map(Case::Servers).collect();
        Ok(args.run.plan(cases, &topology_of(args)?.interface()))
    }
}

/// The human table: one row per case (the median of its repetitions, with a `reps` column
/// when there are several). By default the case, requests/s, p50 and p99 latency, errors, the
/// fraction of clients served and the server's CPU per request, in at most 100 characters; `--wide` adds every other column.
/// Then the `sources:` line and the notes grouped by kind.
pub fn table(records: &[Record], view: View) -> String {
    use super::output::{Column, Show};
    let merged = super::output::median_records(records);
    let repeated = merged.iter().any(|(_, n)| *n > 1);
    let key = super::output::case_key::<ServersCase>;
    let m = |title, show, name, role| Column::metric(title, show, name, role, records);
    let mut cols = vec![
        key("model", |c| c.model.to_string()),
        key("request", |c| c.request.to_string()),
        key("clients", |c| c.clients.to_string()),
    ];
    if repeated {
        cols.push(Column::key("reps", |_, n| n.to_string()));
    }
    cols.extend([
        m("req/s", Show::Default, names::REQUESTS_PER_S, Role::System),
        m("p50 us", Show::Default, names::LATENCY_P50_US, Role::Client),
        m("p99 us", Show::Default, names::LATENCY_P99_US, Role::Client),
        m("errors", Show::Default, names::ERRORS, Role::Client),
        // Requests/s and latency from a few served clients are not the model's: say how many.
        m("served", Show::Default, names::SERVED_FRACTION, Role::System),
        m("srv us/req", Show::Default, names::CPU_US_PER_REQ, Role::Server),
        m("srv cs/req", Show::Spare, "context_switches_per_req", Role::Server),
        m("p90 us", Show::Wide, names::LATENCY_P90_US, Role::Client),
        m("p99.9 us", Show::Wide, names::LATENCY_P999_US, Role::Client),
        m("max us", Show::Wide, names::LATENCY_MAX_US, Role::Client),
    ]);
    let mut text = super::output::render_table(&cols, &merged, view);
    text.push_str(&super::output::notes(records, view));
    text
}

pub fn run_procs(cmd: ProcsCommand) -> anyhow::Result<()> {
    match cmd {
        ProcsCommand::Serve(args) => serve(args),
        ProcsCommand::Query(args) => query(args),
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    if args.max_conns == 0 {
        return Err(usage("--max-conns: must be at least 1"));
    }
    if args.pool_size == 0 || args.pool_size > 1024 {
        return Err(usage("--pool-size: accepted 1..1024"));
    }
    let stop = crate::sys::signal::install_stop_handler();
    if let Some(w) = srv::raise_fd_limit(args.max_conns as u64 + 64) {
        crate::tell!("note: {w}");
    }
    let mut config = ServerConfig::new(args.model, args.listen);
    config.max_conns = args.max_conns;
    config.idle_timeout = args.idle_timeout;
    config.frame_timeout = args.frame_timeout;
    config.pool_size = args.pool_size;
    config.cpus = args.cpus;
    config.procs_interval = args.interval;
    config.follow_signals = true;
    let running = server::start(config, None)?;
    crate::say!(
        "listening on {} (model {}, max-conns {}, idle-timeout {:?}, frame-timeout {:?}); Ctrl-C stops",
        running.addr,
        args.model,
        args.max_conns,
        args.idle_timeout,
        args.frame_timeout
    )?;
    while !stop.requested() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = running.stop();
    crate::tell!(
        "stopped: {} connections accepted, {} refused, {} requests, {} bad frames, {} idle closed, {} too slow, {} evicted for newcomers; {} thread(s) joined",
        s.accepted,
        s.refused,
        s.requests,
        s.protocol_errors,
        s.idle_closed,
        s.slow_closed,
        s.evicted,
        s.threads_joined
    );
    Ok(())
}

fn query(args: QueryArgs) -> anyhow::Result<()> {
    let addr = args.addr;
    if args.k == 0 || args.k > 1000 {
        return Err(usage("-k: accepted 1..1000"));
    }
    if args.clients == 0 || args.clients > 1000 {
        return Err(usage("--clients: accepted 1..1000"));
    }
    let timeout = args.timeout;
    let rank = if args.interval { Rank::Interval } else { Rank::Total };
    let results: Vec<Result<srv::query::QueryResult, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..args.clients)
            .map(|_| s.spawn(move || srv::query::query(addr, args.k, rank, timeout)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("client thread panicked".into())))
            .collect()
    });
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    let ok: Vec<&srv::query::QueryResult> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    let Some(first) = ok.first() else {
        anyhow::bail!("{}", failures.first().map_or("no reply".to_string(), |f| f.to_string()));
    };
    if args.json {
        let replies: Vec<serde_json::Value> = ok
            .iter()
            .map(|q| {
                serde_json::json!({
                    "elapsed_us": q.elapsed.as_secs_f64() * 1e6,
                    "rank": if q.reply.rank == Rank::Total { "total" } else { "interval" },
                    "interval_ms": q.reply.interval_ms,
                    "ticks_per_s": q.reply.ticks_per_s,
                    "processes": q.reply.entries.iter().map(|e| serde_json::json!({
                        "pid": e.pid, "command": e.name, "user_ticks": e.user_ticks,
                        "system_ticks": e.system_ticks, "ranked_ticks": e.ranked_ticks,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        crate::say!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "replies": replies, "failures": failures }))?
        )?;
    } else {
        let hz = first.reply.ticks_per_s.max(1) as f64;
        let mut t = Table::new(&["rank", "pid", "command", "user_ticks", "system_ticks", "cpu_s"]);
        for (i, e) in first.reply.entries.iter().enumerate() {
            t.row(vec![
                (i + 1).to_string(),
                e.pid.to_string(),
                e.name.clone(),
                e.user_ticks.to_string(),
                e.system_ticks.to_string(),
                num(Some(e.ranked_ticks as f64 / hz)),
            ]);
        }
        super::output::out(t.render())?;
        let mut ms: Vec<f64> = ok.iter().map(|q| q.elapsed.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        crate::say!(
            "{} of {} client(s) answered; reply time min {} ms, max {} ms ({}, {} ticks/s)",
            ok.len(),
            args.clients,
            num(ms.first().copied()),
            num(ms.last().copied()),
            if rank == Rank::Total {
                "ranked by utime+stime since start".to_string()
            } else {
                format!("ranked by CPU in the last {} ms", first.reply.interval_ms)
            },
            first.reply.ticks_per_s
        )?;
    }
    if !failures.is_empty() {
        anyhow::bail!(
            "{} of {} client(s) failed: {}",
            failures.len(),
            args.clients,
            failures[0]
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Servers {
        #[command(flatten)]
        args: ServersArgs,
    }

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }

    fn parse(argv: &[&str]) -> Result<ServersArgs, clap::Error> {
        Servers::try_parse_from(std::iter::once("servers").chain(argv.iter().copied())).map(|p| p.args)
    }

    #[test]
    fn lists_expand_and_bad_values_are_refused_by_the_parser() {
        assert_eq!(parse(&[]).unwrap().model, Model::ALL, "the default is all");
        assert_eq!(parse(&["--model", "all"]).unwrap().model, Model::ALL);
        assert_eq!(
            parse(&["--model", "epoll,poll,epoll,io_uring"]).unwrap().model,
            vec![Model::Epoll, Model::Poll, Model::Uring]
        );
        let refusal = parse(&["--model", "epoll,fork"]).unwrap_err().to_string();
        assert!(
            refusal.contains(
                "unknown model 'fork' (accepted: iterative, threads, pool, select, poll, epoll, epoll-et, uring, all)"
            ),
            "{refusal}"
        );
        assert_eq!(
            parse_requests("echo:64|procs:2").unwrap(),
            vec![Request::Echo(64), Request::Procs(2)]
        );
        for bad in [
            &["--model", "fork"][..],
            &["--request", "ftp:3"],
            &["--clients", "0"],
            &["--duration", "-1s"],
            &["--warmup", "0y"],
            &["--server-cpus", "x"],
            &["--topology", "vethx"],
            &["--topology", "remote:10.0.0.2:5201"],
        ] {
            let err = parse(bad).err().unwrap_or_else(|| panic!("{bad:?} was taken"));
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{bad:?}: {err}");
        }
    }

    /// The flags arrive as the values the cases hold, and a sweep list is still a list.
    #[test]
    fn flags_arrive_typed() {
        let args = parse(&[
            "--model",
            "epoll,uring",
            "--request",
            "echo:4K",
            "--clients",
            "1..4",
            "--duration",
            "1.5s",
            "--warmup",
            "0",
            "--client-cpus",
            "0",
            "--topology",
            "veth:mtu=9000",
        ])
        .unwrap();
        assert_eq!(args.model, vec![Model::Epoll, Model::Uring]);
        assert_eq!(args.request, vec![Request::Echo(4096)]);
        assert_eq!(args.clients, vec![1, 2, 4]);
        assert_eq!(
            (args.duration, args.warmup),
            (Duration::from_millis(1500), Duration::ZERO)
        );
        assert_eq!(args.client_cpus, Some(vec![0]));
        let link = crate::case::Link {
            mtu: Some(9000),
            ..Default::default()
        };
        assert_eq!(args.topology.as_deref(), Some(&Topology::Veth(link)));
        let cases =
            servers_cases(&parse(&["--model", "poll", "--clients", "1,10", "--duration", "200ms"]).unwrap()).unwrap();
        let got: Vec<(Model, usize, u64, u64)> = cases
            .iter()
            .map(|c| (c.model, c.clients, c.duration_ms, c.warmup_ms))
            .collect();
        assert_eq!(got, vec![(Model::Poll, 1, 200, 500), (Model::Poll, 10, 200, 500)]);
        assert!(cases.iter().all(|c| c.topology == Topology::Loopback));
    }

    #[test]
    fn procs_serve_flags_arrive_typed() {
        let serve =
            |argv: &[&str]| Serve::try_parse_from(std::iter::once("serve").chain(argv.iter().copied())).map(|p| p.args);
        let args = serve(&[
            "--model",
            "poll",
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "1s",
            "--cpus",
            "0",
        ])
        .unwrap();
        assert_eq!((args.model, args.listen), (Model::Poll, "127.0.0.1:0".parse().unwrap()));
        assert_eq!(
            (args.idle_timeout, args.frame_timeout),
            (Duration::from_secs(30), Duration::from_secs(5))
        );
        assert_eq!(
            (args.interval, args.cpus),
            (Some(Duration::from_secs(1)), Some(vec![0]))
        );
        for bad in [
            &["--interval", "1ms"][..],
            &["--listen", "not-an-address"],
            &["--idle-timeout", "0"],
        ] {
            let err = serve(bad).err().unwrap_or_else(|| panic!("{bad:?} was taken"));
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{bad:?}: {err}");
        }
    }
}
