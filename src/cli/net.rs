//! `iopath net stream` and `iopath net serve`.

use super::error::usage;
use super::output::View;
use super::run::RunFlags;
use super::values;
use crate::case::Topology;
use crate::case::{format_bytes, Align, Case, CopyMode, Endpoint, RxMode, RxWake, StreamCase};
use crate::net::auth::Credentials;
use crate::net::workload::stream;
use crate::observation::names;
use crate::observation::{Observation, Role};
use crate::store::Record;
use crate::sweep::Plan;
use clap::{Args, Subcommand};
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub enum NetCommand {
    /// Stream messages from client threads to server threads (one TCP connection each) and
    /// measure what each copy mode costs per byte, per message and per role.
    #[command(after_help = super::examples::NET_STREAM)]
    Stream(Box<StreamArgs>),
    /// An in-memory store answers requests of N records of R bytes, sent copy-out, gather or
    /// zero copy: responses/s, latency, CPU and memory traffic per payload byte.
    #[command(after_help = super::examples::NET_RECORDS)]
    Records(Box<super::records::RecordsArgs>),
    /// Serve sessions for `iopath net stream`, `net rr`, `net crr` and `net udp-stream
    /// --connect` (and `net records --topology remote`) on another host or namespace.
    #[command(after_help = super::examples::NET_SERVE)]
    Serve(ServeArgs),
    /// Request/response on open connections: S-byte requests, R-byte responses, N in flight
    /// (closed loop) or at a rate (open loop); latency percentiles and CPU per transaction.
    #[command(after_help = super::examples::NET_RR)]
    Rr(Box<super::rr::RrArgs>),
    /// Connect, request, response, close per transaction: connect and close timed apart.
    #[command(after_help = super::examples::NET_CRR)]
    Crr(Box<super::rr::CrrArgs>),
    /// UDP request/response: one datagram each way per transaction, N in flight or at a rate;
    /// latency percentiles, transactions lost within a timeout, CPU per transaction.
    #[command(after_help = super::examples::NET_UDP_RR)]
    UdpRr(Box<super::udp_rr::UdpRrArgs>),
    /// Stream numbered datagrams from client threads to server threads (one UDP socket each)
    /// in every way Linux sends and receives them: throughput, loss, reordering, jitter, drops.
    #[command(after_help = super::examples::NET_UDP_STREAM)]
    UdpStream(Box<super::udp_stream::UdpStreamArgs>),
    /// Latency under load: a request/response probe timed on the idle link, then while bulk
    /// TCP flows run up, down or both; inflation, RPM, each flow's share and fairness.
    #[command(after_help = super::examples::NET_LOAD)]
    Load(Box<super::load::LoadArgs>),
}

#[derive(Args, Debug)]
pub struct StreamArgs {
    /// Copy modes, comma-separated: two-copy, one-copy, zero-copy, uring, uring-zc, sendfile
    /// (the message staged in a memfd's page cache, sent with sendfile), splice (the fields
    /// vmspliced into a pipe, spliced into the socket). sendfile and splice have no completion
    /// notification: with --verify, which rewrites every message, they keep a ring larger than
    /// the socket buffers can hold, and the check catches a slot the kernel still held when it
    /// was rewritten (without it one message is sent again and again, as one-copy does).
    #[arg(long, default_value = "two-copy,one-copy,zero-copy", value_delimiter = ',')]
    pub mode: Vec<CopyMode>,
    /// Receive modes, comma-separated; every --mode runs with every one of them:
    /// copy (recv into one buffer), scatter (recvmsg into the fields), trunc (recv with
    /// MSG_TRUNC: the kernel discards the bytes, so the sender's cost is seen alone; not with
    /// --verify), zerocopy (TCP_ZEROCOPY_RECEIVE maps whole received pages instead of copying;
    /// sets TCP_MAXSEG 4108 on loopback and netns; the mapped fraction is reported).
    /// Default: copy for two-copy, scatter for the other modes.
    #[arg(long, value_delimiter = ',', value_name = "RX_MODES")]
    pub rx_mode: Option<Vec<RxMode>>,
    /// Message sizes: 64, 4K, 4KiB, 1M (binary units), lists (1K,64K) and ranges A..B, which
    /// are both ends and every power of two between them (1K..16M; 1K..3K is 1K,2K,3K). Each
    /// size must be at least --fields bytes.
    #[arg(long, default_value = "64K", value_parser = values::parse_size_list)]
    pub size: values::SizeList,
    /// Client threads (each with its own connection and server thread): 1,2,4 or a range 1..8
    /// (both ends and the powers of two between).
    #[arg(long, default_value = "1", value_parser = values::parse_counts_up_to::<{ crate::net::session::MAX_THREADS }>)]
    pub threads: values::CountList,
    /// Separately heap-allocated fields per message (1 to 1024); the size is split evenly
    /// among them, the remainder to the last, so every size must be at least this many bytes.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub fields: u32,
    #[command(flatten)]
    pub window: WindowFlags,
    #[command(flatten)]
    pub align: AlignFlag,
    #[command(flatten)]
    pub rx_wake: RxWakeFlag,
    /// Fill every message with a pattern from its sequence number and check every byte received.
    #[arg(long)]
    pub verify: bool,
    /// Incast: this many client sessions at once (1 to 64), each a whole stream session with
    /// its own control connection and --threads connections, their windows started together,
    /// all to one server. Reports each client's throughput (throughput_gbps_client<i>), their
    /// sum and Jain's fairness index. The in-process server serves them all; with --connect,
    /// run `net serve --sessions N` with N at least this.
    #[arg(long, default_value_t = 1, value_name = "M", value_parser = parse_clients)]
    pub clients: u32,
    /// zero-copy and uring-zc: bytes of messages kept in flight, each buffer reused only after
    /// the kernel's completion for it (default: 8 MiB, at least 4 messages; uring-zc without
    /// CAP_IPC_LOCK: cut to what half of RLIMIT_MEMLOCK holds). Anything up to
    /// one message size means one message: one buffer, each send waiting for the previous
    /// one's completion (--zc-ring 1). A list (64K,8M) runs each ring as its own case.
    #[arg(long, value_name = "BYTES", value_parser = values::parse_size_list)]
    pub zc_ring: Option<values::SizeList>,
    /// uring-zc: put the ring's messages in one registered (fixed) buffer, so the kernel skips
    /// pinning the pages on every send. Only SENDMSG_ZC takes them with an iovec per field
    /// (Linux 6.15 or later; plain SENDMSG refuses them, so not for uring); the fields of a
    /// message are then consecutive pieces of that buffer. At most 1 GiB of ring.
    #[arg(long)]
    pub fixed_buffers: bool,
    /// Count with getrusage only, no perf events (they cost time at every context switch);
    /// perf metrics then read `unavailable: perf counters off (--no-perf)`.
    #[arg(long)]
    pub no_perf: bool,
    /// Before each case's measured run (outside it), prove what the kernel did with the
    /// sender's bytes: on a fresh loopback connection whose receiver is not reading, send a
    /// few messages, overwrite each one's source in place once its send call has returned, then
    /// read it. Old bytes: the kernel copied them (two-copy, one-copy; zero-copy over
    /// loopback). New bytes: it sent the sender's pages by reference (sendfile, splice), so
    /// rewriting a buffer too early corrupts. Adds alias_by_reference_fraction and the `alias`
    /// column; unavailable with --connect (the probe must see the receiver).
    #[arg(long)]
    pub prove_copies: bool,
    #[command(flatten)]
    pub endpoint: EndpointFlags,
    #[command(flatten)]
    pub run: RunFlags,
}

/// The shape of a request/response transaction — `--request-size`, `--response-size`,
/// `--inflight`, `--threads`, `--rate` — declared once for `net rr`, `net crr` and `net
/// udp-rr` (and the fleet's rr and crr), so their names, forms and limits cannot drift; each
/// workload's own limits (a datagram's size, crr's one transaction) are checked with its cases.
#[derive(Args, Debug)]
pub struct TransactionFlags {
    /// Request sizes (client to server): 64, 1K, lists 64,1K and ranges 64..4K (both ends and
    /// every power of two between), crossed with --response-size. udp-rr: a datagram, its
    /// 16-byte header included, 16 to 65507 bytes.
    #[arg(long, default_value = "64", value_parser = values::parse_size_list)]
    pub request_size: values::SizeList,
    /// Response sizes (server to client), the same forms as --request-size.
    #[arg(long, default_value = "64", value_parser = values::parse_size_list)]
    pub response_size: values::SizeList,
    /// Transactions in flight per connection (udp-rr: per socket, 1 to 64), closed loop: 1
    /// is ping-pong (send, wait for the answer, send again); N sends N requests first and then
    /// one per response (udp-rr: or loss). Lists and ranges as --threads. Not crr.
    #[arg(long, default_value = "1", value_parser = values::parse_count_list)]
    pub inflight: values::CountList,
    /// Connections (udp-rr: client sockets), each with its own client thread and server
    /// thread (crr: each client thread connects again for every transaction): 1,2,4 or a
    /// range 1..8.
    #[arg(long, default_value = "1", value_parser = values::parse_counts_up_to::<{ crate::net::session::MAX_THREADS }>)]
    pub threads: values::CountList,
    /// Open loop: this many transactions per second in total, spread evenly over the
    /// connections, whatever the responses do; latency counts from when each request was
    /// due, so a server that falls behind shows it (coordinated omission; udp-rr sheds, and
    /// counts, a request due while --inflight are outstanding). Without it, closed loop. Not
    /// crr.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub rate: Option<u64>,
}

/// One point of the transaction grid: a request size, a response size, the transactions in
/// flight and the threads.
#[derive(Debug, Clone, Copy)]
pub struct TransactionShape {
    pub request_size: u64,
    pub response_size: u64,
    pub inflight: usize,
    pub threads: usize,
}

impl TransactionFlags {
    /// Every request size × response size × in flight × threads, in that nesting order (the
    /// order the cases are planned and labelled in).
    pub fn shapes(&self) -> Vec<TransactionShape> {
        let mut shapes = Vec::new();
        for &request_size in &self.request_size {
            for &response_size in &self.response_size {
                for &inflight in &self.inflight {
                    for &threads in &self.threads {
                        shapes.push(TransactionShape {
                            request_size,
                            response_size,
                            inflight,
                            threads,
                        });
                    }
                }
            }
        }
        shapes
    }
}

/// Where the two ends live: `--port`, `--connect`, `--topology` and `--psk-file`, declared once
/// for every network command (net stream, net rr, net crr, net records) and
/// read by [`endpoint_of`], so their names, help and rules cannot drift. `C` is `--connect`
/// ([`ConnectFlag`]) or its absence ([`NoConnect`]: net records names a remote server with
/// `--topology remote:HOST:PORT` only).
#[derive(Args, Debug)]
pub struct EndpointFlags<C: Args + Connect = ConnectFlag> {
    /// Loopback port for the in-process server (default: any free port).
    #[arg(long)]
    pub port: Option<u16>,
    #[command(flatten)]
    pub connect: C,
    /// Where the two ends live: loopback, netns (both in a fresh private network namespace),
    /// veth[:mtu=N][,rate=R][,queue=T][,peer=drop] (the server in a fresh namespace behind a
    /// veth pair; rate via tbf, e.g. 1gbit; queue=200ms: a router between the ends whose two
    /// egress queues hold up to that long, a bottleneck a flow can fill, as on a real path,
    /// with the queues' backlog and drops in every result; peer=drop, udp-stream only: the server's end drops every UDP
    /// datagram at ingress, so zero copy is not copied), or remote:HOST:PORT (same as
    /// --connect). netns and veth also take ipv6 (the ends' addresses IPv6: ::1, or a ULA /64
    /// on the pair) and gso_max_size=, gro_max_size=, gso_ipv4_max_size=, gro_ipv4_max_size=
    /// (bytes, both ends' devices: BIG TCP above 65536). Namespaces need root.
    #[arg(long, value_name = "TOPOLOGY", value_parser = parse_topology)]
    pub topology: Option<Topology>,
    /// The key of a `net serve --psk-file` server (answers its challenge; never stored).
    #[arg(long, value_name = "FILE")]
    pub psk_file: Option<std::path::PathBuf>,
}

/// `--connect` of [`EndpointFlags`].
#[derive(Args, Debug)]
pub struct ConnectFlag {
    /// Run only the client, against `iopath net serve` at HOST:PORT.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "port")]
    pub connect: Option<String>,
}

/// No `--connect` (net records).
#[derive(Args, Debug)]
pub struct NoConnect {}

/// The `--connect` address an [`EndpointFlags`] holds, if it has the flag.
pub trait Connect {
    fn connect(&self) -> Option<&String>;
}

impl Connect for ConnectFlag {
    fn connect(&self) -> Option<&String> {
        self.connect.as_ref()
    }
}

impl Connect for NoConnect {
    fn connect(&self) -> Option<&String> {
        None
    }
}

/// The measured window and where the threads run: the same flags, help and defaults for every
/// network command (net stream, net records, net rr, net crr).
#[derive(Args, Debug)]
pub struct WindowFlags {
    /// Length of the measured window of each case (5s, 500ms, 1.5s).
    #[arg(long, default_value = "3s", value_parser = values::parse_duration, allow_hyphen_values = true)]
    pub duration: Duration,
    /// Warm-up before the window opens; nothing is counted during it (0 for none).
    #[arg(long, default_value = "500ms", value_parser = values::parse_duration_or_zero, allow_hyphen_values = true)]
    pub warmup: Duration,
    /// Pin client thread i to the i-th CPU of this list (wrapping): 0, 0,1, 0-3.
    #[arg(long, value_parser = values::parse_cpu_list)]
    pub client_cpus: Option<values::CpuList>,
    /// Pin server thread i to the i-th CPU of this list (wrapping).
    #[arg(long, value_parser = values::parse_cpu_list)]
    pub server_cpus: Option<values::CpuList>,
}

/// `--align`, flattened by the TCP workloads (net stream, net rr, net crr, net records); the UDP workloads' datagram buffers are their own, so they have no such flag.
#[derive(Args, Debug)]
pub struct AlignFlag {
    /// Where every buffer the kernel copies into or out of starts: page (a page boundary),
    /// misaligned (16 bytes past one, where malloc puts large blocks: the kernel's copy can be
    /// many times slower), malloc (wherever the allocator puts it).
    #[arg(long, default_value = "page")]
    pub align: Align,
}

/// `--rx-wake`, flattened by the workloads whose receivers take whole messages off a TCP
/// stream (net stream, net rr, net crr); each picks its own default.
#[derive(Args, Debug)]
pub struct RxWakeFlag {
    /// When the kernel wakes a receiver waiting for the rest of a message: message (once the
    /// whole message is queued: SO_RCVLOWAT of its size), data (on any bytes, to take what is
    /// there and wait again, as iperf3's receiver does). Each wake-up is paid by the sending
    /// CPU, so a stream moves more with message (the default of net stream); a request woken
    /// early is copied while the rest arrives, so a transaction of large messages can end
    /// sooner with data (the default of net rr and net crr). zerocopy receives always wait
    /// for a page or the whole message.
    #[arg(long)]
    rx_wake: Option<RxWake>,
}

impl RxWakeFlag {
    /// The flag's value, or the command's own default.
    pub fn or(&self, default: RxWake) -> RxWake {
        self.rx_wake.unwrap_or(default)
    }
}

impl WindowFlags {
    pub fn duration_ms(&self) -> u64 {
        self.duration.as_millis() as u64
    }

    pub fn warmup_ms(&self) -> u64 {
        self.warmup.as_millis() as u64
    }

    pub fn client_cpus(&self) -> Option<crate::case::CpuList> {
        self.client_cpus.clone().map(Into::into)
    }

    pub fn server_cpus(&self) -> Option<crate::case::CpuList> {
        self.server_cpus.clone().map(Into::into)
    }

    /// The parameters every network case shares: this window and these CPUs, with the
    /// case's `threads`, `--verify`, endpoint and `!--no-perf`.
    pub fn net_params(&self, threads: usize, verify: bool, endpoint: &Endpoint, perf: bool) -> crate::case::NetParams {
        crate::case::NetParams {
            threads,
            duration_ms: self.duration_ms(),
            warmup_ms: self.warmup_ms(),
            client_cpus: self.client_cpus(),
            server_cpus: self.server_cpus(),
            verify,
            endpoint: endpoint.clone(),
            perf,
        }
    }
}

pub(crate) fn parse_topology(text: &str) -> Result<Topology, String> {
    text.parse()
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on. Loopback by default, so a server left running is reachable from
    /// this machine only; give an interface address (or 0.0.0.0:5201) to serve other hosts.
    /// With --agent the default is 0.0.0.0:5201 (an agent serves other hosts; it needs a key).
    #[arg(
        long,
        default_value = "127.0.0.1:5201",
        default_value_if("agent", clap::builder::ArgPredicate::IsPresent, "0.0.0.0:5201")
    )]
    pub listen: String,
    /// The port to listen on (replaces the port of --listen).
    #[arg(long)]
    pub port: Option<u16>,
    /// Agent mode (for `iopath fleet run`): besides serving sessions, run a network case as
    /// the client against another agent when a controller holding the key asks; run requests
    /// wait in a queue of 16 while a session runs. Needs --psk-file; the target must prove
    /// the same key.
    #[arg(long)]
    pub agent: bool,
    /// Serve sessions only to these peers and (agent mode) run cases only against these
    /// targets: addresses or networks, comma-separated (10.0.0.0/8,192.168.1.7,fd00::/8).
    /// Controllers are not held to it (they prove the key). Default: any peer.
    #[arg(long, value_name = "ADDRS", value_parser = parse_allow_peers)]
    pub allow_peers: Option<crate::net::session::AllowList>,
    /// Serve one session, then exit.
    #[arg(long)]
    pub once: bool,
    /// Accept only clients that prove they hold this key (HMAC-SHA256 challenge-response; the
    /// key never crosses the wire). A file of at least 16 bytes, e.g.
    /// `head -c 32 /dev/urandom | base64 > key`.
    #[arg(long, value_name = "FILE")]
    pub psk_file: Option<std::path::PathBuf>,
    /// Sessions served at once, 1 to 64: each client's session is isolated (its own token, data
    /// connections and limits); a client beyond them is told "server busy" (agent mode: its
    /// run request waits in the queue). `net stream --clients 8 --connect ...` needs 8.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = parse_sessions)]
    pub sessions: usize,
    /// The longest session (warm-up + measured window) a client may ask for; longer cases are
    /// refused with the limit named.
    #[arg(long, default_value = "5m", value_parser = values::parse_duration)]
    pub max_session: Duration,
    /// The most bytes one session may move through this server, either way (e.g. 10G); a
    /// session that reaches it is ended and its client told the limit. Unlimited by default (`--max-session` bounds
    /// every session's time).
    #[arg(long, value_name = "BYTES", value_parser = values::parse_size)]
    pub max_session_bytes: Option<u64>,
}

fn parse_clients(text: &str) -> Result<u32, String> {
    let max = crate::net::session::server::MAX_SESSIONS;
    match text.parse::<u32>() {
        Ok(n) if (1..=max as u32).contains(&n) => Ok(n),
        _ => Err(format!(
            "'{text}' is not a number of client sessions (accepted: 1 to {max})"
        )),
    }
}

fn parse_sessions(text: &str) -> Result<usize, String> {
    let max = crate::net::session::server::MAX_SESSIONS;
    match text.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("'{text}' is not a number of sessions (accepted: 1 to {max})")),
    }
}

fn parse_allow_peers(text: &str) -> Result<crate::net::session::AllowList, String> {
    text.parse()
}

/// `--rx-mode` against `--verify`: trunc never sees the bytes, so there is nothing to check.
pub(super) fn check_rx_modes(rx_modes: &[RxMode], verify: bool) -> anyhow::Result<()> {
    if verify && rx_modes.contains(&RxMode::Trunc) {
        return Err(usage(
            "--rx-mode trunc discards the bytes in the kernel, so --verify has nothing to check: drop --verify or use --rx-mode copy, scatter or zerocopy",
        ));
    }
    Ok(())
}

/// The receive modes a send mode runs with: every `--rx-mode` given, or without one the
/// receiver that send mode was always paired with (named in the case).
pub(super) fn rx_modes_for(mode: CopyMode, rx_modes: &[RxMode]) -> Vec<RxMode> {
    if rx_modes.is_empty() {
        vec![RxMode::paired_with(mode)]
    } else {
        values::distinct(rx_modes)
    }
}

/// The plan of a measuring `net` command and its run flags (None: `net serve`).
pub fn measuring(cmd: &NetCommand) -> Option<anyhow::Result<(Plan, &RunFlags)>> {
    fn planned<'a, A>(args: &'a A, flags: &'a RunFlags) -> Option<anyhow::Result<(Plan, &'a RunFlags)>>
    where
        for<'b> Plan: TryFrom<&'b A, Error = anyhow::Error>,
    {
        Some(Plan::try_from(args).map(|plan| (plan, flags)))
    }
    match cmd {
        NetCommand::Stream(args) => planned(args.as_ref(), &args.run),
        NetCommand::Records(args) => planned(args.as_ref(), &args.run),
        NetCommand::Rr(args) => planned(args.as_ref(), &args.run),
        NetCommand::Crr(args) => planned(args.as_ref(), &args.args.run),
        NetCommand::UdpRr(args) => planned(args.as_ref(), &args.run),
        NetCommand::UdpStream(args) => planned(args.as_ref(), &args.run),
        NetCommand::Load(args) => planned(args.as_ref(), &args.run),
        NetCommand::Serve(_) => None,
    }
}

/// The `net` command that measures nothing itself: `net serve`.
pub fn run(cmd: NetCommand) -> anyhow::Result<()> {
    match cmd {
        NetCommand::Serve(args) => run_serve(args),
        _ => unreachable!("measuring commands run through cli::measuring"),
    }
}

/// Stage two: the validated grid of cases, the same for the command line, a plan file and `ab`.
pub fn stream_cases(args: &StreamArgs) -> anyhow::Result<Vec<StreamCase>> {
    let (topology, endpoint) = endpoint_of(&args.endpoint, false)?;
    if let Some(big) = args.size.iter().find(|s| **s > 1 << 30) {
        return Err(usage(format!(
            "--size {} is too large (accepted: up to 1G)",
            crate::format::format_bytes_exact(*big)
        )));
    }
    // A field is at least one byte: fewer bytes than fields would send empty iovecs and
    // measure fewer fields than the label claims.
    let fields = u64::from(args.fields);
    if let Some(small) = args.size.iter().find(|s| **s < fields) {
        return Err(usage(format!(
            "--size {} with --fields {fields}: a message of {} cannot have {fields} fields of at least 1 byte each (use --fields {small} or fewer, or sizes of at least {})",
            format_bytes(*small),
            format_bytes(*small),
            format_bytes(fields)
        )));
    }
    if let Some(many) = args.threads.iter().find(|t| **t > 1024) {
        return Err(usage(format!("--threads {many} is too many (accepted: 1 to 1024)")));
    }
    if args.zc_ring.is_some() && !args.mode.iter().any(|m| m.is_zero_copy()) {
        return Err(usage(
            "--zc-ring sizes the ring of the zero-copy modes: add zero-copy or uring-zc to --mode",
        ));
    }
    if args.fixed_buffers && !args.mode.contains(&CopyMode::UringZc) {
        return Err(usage(
            "--fixed-buffers is for uring-zc (only SENDMSG_ZC takes registered buffers): add uring-zc to --mode",
        ));
    }
    // The ring sizes of a zero-copy mode's cases (None: the default ring); other modes have none.
    let rings = |mode: CopyMode| -> Vec<Option<u64>> {
        match &args.zc_ring {
            Some(list) if mode.is_zero_copy() => list.iter().map(|r| Some(*r)).collect(),
            _ => vec![None],
        }
    };
    let rx_modes = args.rx_mode.as_deref().unwrap_or_default();
    check_rx_modes(rx_modes, args.verify)?;
    let mut cases: Vec<StreamCase> = Vec::new();
    for mode in values::distinct(&args.mode) {
        for rx_mode in rx_modes_for(mode, rx_modes) {
            for &size in &args.size {
                for zc_ring in rings(mode) {
                    for &threads in &args.threads {
                        cases.push(StreamCase {
                            mode,
                            rx_mode,
                            size,
                            fields: args.fields as usize,
                            net: args.window.net_params(threads, args.verify, &endpoint, !args.no_perf),
                            zc_ring,
                            fixed_buffers: args.fixed_buffers && mode == CopyMode::UringZc,
                            prove_copies: args.prove_copies,
                            align: args.align.align,
                            rx_wake: args.rx_wake.or(RxWake::Message),
                            clients: args.clients,
                        });
                    }
                }
            }
        }
    }
    // Both ends live in this process unless --connect: their buffers add up, and together must
    // fit in half of what the machine and the memory cgroup still allow.
    for case in &cases {
        stream::check_case(case, Role::Client, None).map_err(usage)?;
    }
    if let Some(headroom) = crate::sys::procfs::memory_headroom() {
        let process_bytes = |case: &StreamCase| {
            let server = if topology.starts_server() {
                stream::buffer_bytes(case, Role::Server)
            } else {
                0
            };
            stream::buffer_bytes(case, Role::Client).saturating_add(server)
        };
        if let Some(case) = cases.iter().find(|c| process_bytes(c) > headroom / 2) {
            return Err(usage(format!(
                "{} needs about {} of buffers in this process, more than half of the {} available (MemAvailable and the memory cgroup's limit): use a smaller --size or fewer --threads",
                case.label(),
                format_bytes(process_bytes(case)),
                format_bytes(headroom)
            )));
        }
    }
    Ok(cases)
}

impl<C: Args + Connect> EndpointFlags<C> {
    /// The key of `--psk-file`, which the run's sessions prove themselves with (a file that
    /// cannot be a key: exit 2).
    pub(crate) fn credentials(&self) -> anyhow::Result<Credentials> {
        Credentials::from_file(self.psk_file.as_deref()).map_err(usage)
    }

    /// The plan of a network command's cases: `run`'s settings, the interface of `endpoint`
    /// (the first case's: every case of one command shares it; loopback without one) and the
    /// key of `--psk-file`.
    pub(crate) fn plan(&self, run: &RunFlags, endpoint: Option<&Endpoint>, cases: Vec<Case>) -> anyhow::Result<Plan> {
        let topology = endpoint.map_or(Topology::Loopback, Topology::from);
        Ok(run
            .plan(cases, &topology.interface())
            .with_credentials(self.credentials()?))
    }
}

/// Where the two ends live, from --topology, --connect and --port: shared by
/// every network command (net stream, net rr, net crr, net records: no --connect) so their
/// rules cannot drift.
/// `one_way_udp`: the workload sends datagrams that need no answer (udp-stream), the only
/// one `veth:peer=drop` lets through.
pub(crate) fn endpoint_of<C: Args + Connect>(
    flags: &EndpointFlags<C>,
    one_way_udp: bool,
) -> anyhow::Result<(Topology, Endpoint)> {
    let port = flags.port;
    let topology = match (flags.topology.as_ref(), flags.connect.connect()) {
        (Some(_), Some(_)) => {
            return Err(usage(
                "--topology and --connect both say where the server is: give one (--topology remote:HOST:PORT is --connect)",
            ))
        }
        (Some(t), None) => t.clone(),
        (None, Some(addr)) => Topology::Remote { addr: addr.clone() },
        (None, None) => Topology::Loopback,
    };
    if port.is_some() && !topology.starts_server() {
        return Err(usage(
            "--port is for the in-process server: a remote topology starts none",
        ));
    }
    topology.check().map_err(usage)?;
    if !one_way_udp {
        topology.check_answers().map_err(usage)?;
    }
    let port = port.unwrap_or(0);
    let endpoint = match &topology {
        Topology::Loopback => Endpoint::Loopback { port },
        Topology::Netns { sizes, ipv6 } => Endpoint::Netns {
            port,
            sizes: sizes.clone(),
            ipv6: *ipv6,
        },
        Topology::Veth(link) => Endpoint::Veth {
            port,
            link: link.clone(),
        },
        Topology::Remote { addr } => {
            if !crate::case::is_host_port(addr) {
                return Err(usage(format!(
                    "--connect '{addr}' is not HOST:PORT with a port from 1 to 65535 (e.g. 10.0.0.2:5201)"
                )));
            }
            Endpoint::Remote { addr: addr.clone() }
        }
    };
    Ok((topology, endpoint))
}

impl TryFrom<&StreamArgs> for Plan {
    type Error = anyhow::Error;
    fn try_from(args: &StreamArgs) -> anyhow::Result<Plan> {
        let cases = stream_cases(args)?;
        let endpoint = cases.first().map(|c| c.net.endpoint.clone());
        let cases = cases.into_iter().map(Case::NetStream).collect();
        args.endpoint.plan(&args.run, endpoint.as_ref(), cases)
    }
}

/// `cpu_ns_per_byte` of `role`, derived for the table: (user + system CPU of the role's
/// threads in the window) × 10⁹ / the role's bytes in it (client: sent, server: received); its
/// source is the CPU time's (`rusage`), unavailable with the reason when either is.
pub fn with_cpu_ns_per_byte(records: &[Record]) -> Vec<Record> {
    use crate::observation::Metric;
    records
        .iter()
        .map(|r| {
            let mut r = r.clone();
            for (role, bytes) in [(Role::Client, names::BYTES_SENT), (Role::Server, names::BYTES_RECEIVED)] {
                let o = &r.observation;
                let parts = [
                    o.get(names::CPU_USER_S, role),
                    o.get(names::CPU_SYS_S, role),
                    o.get(bytes, role),
                ];
                let metric = match parts {
                    [Some(usr), Some(sys), Some(b)] => match (usr.value, sys.value, b.value) {
                        (Some(u), Some(s), Some(b)) if b > 0.0 => {
                            Metric::new(CPU_NS_PER_BYTE, role, (u + s) * 1e9 / b, "ns/B", usr.source.clone())
                        }
                        (Some(_), Some(_), Some(_)) => {
                            Metric::unavailable(CPU_NS_PER_BYTE, role, "ns/B", "no byte moved in the window")
                        }
                        _ => {
                            let missing = [usr, sys, b]
                                .into_iter()
                                .find(|m| m.value.is_none())
                                .map(|m| m.source.to_string());
                            let reason = missing.unwrap_or_default();
                            let reason = reason.strip_prefix("unavailable: ").unwrap_or(&reason).to_string();
                            Metric::unavailable(CPU_NS_PER_BYTE, role, "ns/B", reason)
                        }
                    },
                    _ => continue,
                };
                r.observation.push(metric);
            }
            r
        })
        .collect()
}

/// The table's CPU per byte (see [`with_cpu_ns_per_byte`]).
pub const CPU_NS_PER_BYTE: &str = "cpu_ns_per_byte";

/// The human table: one row per case (the median of its repetitions, with a `reps` column
/// when there are several). By default the columns a reader compares — mode, size, threads,
/// Gbit/s, us/msg, CPU ns per byte of each side, the share of zero-copy sends not copied — in
/// at most 100 characters; `--wide` adds every other column. Then the `sources:` line, the
/// notes grouped by kind, and where the first case's threads ran.
pub fn render_stream_table(records: &[Record], view: View) -> String {
    use super::output::{Column, Show};
    let records = &with_cpu_ns_per_byte(records);
    let merged = super::output::median_records(records);
    let repeated = merged.iter().any(|(_, n)| *n > 1);
    let stream = |r: &Record| r.case.get::<StreamCase>().cloned();
    let m = |title, show, name, role| Column::metric(title, show, name, role, records);
    let mut cols = vec![
        Column::key("mode", move |r, _| stream(r).map(|c| c.path(false)).unwrap_or_default()),
        Column::key("size", move |r, _| {
            stream(r).map(|c| format_bytes(c.size)).unwrap_or_default()
        }),
        Column::key("thr", move |r, _| {
            stream(r).map(|c| c.net.threads.to_string()).unwrap_or_default()
        }),
    ];
    // An incast's clients, and (after the headline) its fairness and the server's drops.
    let incast = merged
        .iter()
        .any(|(r, _)| r.case.get::<StreamCase>().is_some_and(|c| c.clients > 1));
    if incast {
        cols.push(Column::key("clients", move |r, _| {
            stream(r).map(|c| c.clients.to_string()).unwrap_or_default()
        }));
    }
    if repeated {
        cols.push(Column::key("reps", |_, n| n.to_string()));
    }
    cols.push(m("Gbit/s", Show::Default, names::THROUGHPUT_GBPS, Role::System));
    if incast {
        cols.extend([
            m("min cli Gbit/s", Show::Default, names::CLIENT_MIN_GBPS, Role::System),
            m("max cli Gbit/s", Show::Wide, names::CLIENT_MAX_GBPS, Role::System),
            m("jain", Show::Default, names::JAIN_INDEX, Role::System),
            m("retrans", Show::Default, "tcp_retransmits", Role::System),
            m("listen drops", Show::Wide, names::TCP_LISTEN_DROPS, Role::System),
            m("backlog drops", Show::Wide, names::TCP_BACKLOG_DROPS, Role::System),
        ]);
    }
    cols.extend([
        m("us/msg", Show::Default, names::TIME_PER_MSG_US, Role::System),
        m("cli ns/B", Show::Default, CPU_NS_PER_BYTE, Role::Client),
        m("srv ns/B", Show::Default, CPU_NS_PER_BYTE, Role::Server),
        m(
            "zc not copied",
            Show::Default,
            names::ZEROCOPY_NOT_COPIED_FRACTION,
            Role::System,
        ),
    ]);
    // The receive side's zero-copy column only when a zerocopy receiver ran.
    let zerocopy_rx = merged.iter().any(|(r, _)| {
        r.case
            .get::<StreamCase>()
            .is_some_and(|c| c.rx_mode == RxMode::Zerocopy)
    });
    if zerocopy_rx {
        cols.push(m("rx mapped", Show::Default, names::RX_MAPPED_FRACTION, Role::Server));
    }
    // The alias probe's verdict, when any case ran it (--prove-copies).
    let probed = |o: &Observation| o.get(names::ALIAS_BY_REFERENCE_FRACTION, Role::System).map(|m| m.value);
    if merged.iter().any(|(r, _)| probed(&r.observation).is_some()) {
        cols.push(Column {
            title: "alias",
            show: Show::Default,
            cell: Box::new(move |r, _| match probed(&r.observation) {
                Some(Some(f)) => crate::net::alias::Verdict::from_fraction(f).to_string(),
                Some(None) => "n/a".into(),
                None => "-".into(),
            }),
            source: super::output::metric_source(records, names::ALIAS_BY_REFERENCE_FRACTION, Role::System),
        });
    }
    cols.extend([
        m("msg/s", Show::Wide, names::MESSAGES_PER_S, Role::System),
        m("cli usr s", Show::Wide, names::CPU_USER_S, Role::Client),
        m("cli sys s", Show::Wide, names::CPU_SYS_S, Role::Client),
        m("srv usr s", Show::Wide, names::CPU_USER_S, Role::Server),
        m("srv sys s", Show::Wide, names::CPU_SYS_S, Role::Server),
        m("cli cyc/B", Show::Wide, names::CYCLES_PER_BYTE, Role::Client),
        m("srv cyc/B", Show::Wide, names::CYCLES_PER_BYTE, Role::Server),
        m("cli miss/KiB", Show::Wide, names::CACHE_MISSES_PER_KIB, Role::Client),
        m("cli cs/msg", Show::Wide, names::CONTEXT_SWITCHES_PER_MSG, Role::Client),
        m("srv cs/msg", Show::Wide, names::CONTEXT_SWITCHES_PER_MSG, Role::Server),
        m("cli sirq", Show::Wide, names::SOFTIRQ_SHARE, Role::Client),
        m("srv sirq", Show::Wide, names::SOFTIRQ_SHARE, Role::Server),
        m("cli sc/msg", Show::Wide, names::SYSCALLS_PER_MSG, Role::Client),
        m("srv sc/msg", Show::Wide, names::SYSCALLS_PER_MSG, Role::Server),
        m("cli faults", Show::Wide, names::PAGE_FAULTS, Role::Client),
        m("srv faults", Show::Wide, names::PAGE_FAULTS, Role::Server),
        m("zc compl", Show::Wide, names::ZEROCOPY_COMPLETIONS, Role::System),
        m("ur sub/msg", Show::Wide, names::URING_SUBMISSIONS_PER_MSG, Role::Client),
        m("ur cqe/msg", Show::Wide, names::URING_COMPLETIONS_PER_MSG, Role::Client),
    ]);
    let mut text = super::output::render_table(&cols, &merged, view);
    text.push_str(&super::output::notes(records, view));
    text.push_str(&placement_summary(records));
    text
}

fn placement_summary(records: &[Record]) -> String {
    let Some(first) = records.first() else {
        return String::new();
    };
    let describe = |o: &Observation, role: Role| -> String {
        let cpus: Vec<String> = o
            .placement
            .iter()
            .filter(|p| p.role == role)
            .map(|p| {
                let at = |c: Option<usize>| c.map_or("?".to_string(), |c| c.to_string());
                match &p.pinned {
                    Some(pin) => format!("pinned {:?} ran {}->{}", pin, at(p.cpu_at_start), at(p.cpu_at_end)),
                    None => format!("unpinned ran {}->{}", at(p.cpu_at_start), at(p.cpu_at_end)),
                }
            })
            .collect();
        cpus.join(", ")
    };
    super::output::wrap(
        &format!(
            "placement (first case): client {}; server {}",
            describe(&first.observation, Role::Client),
            describe(&first.observation, Role::Server)
        ),
        2,
    )
}

fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    if args.agent && args.psk_file.is_none() {
        return Err(usage(
            "--agent needs --psk-file: an agent runs cases for whoever proves the key, and never for anyone without one",
        ));
    }
    let key = match &args.psk_file {
        Some(path) => Some(crate::net::auth::read_key(path).map_err(usage)?),
        None => None,
    };
    let options = crate::net::session::ServeOptions {
        sessions: args.sessions,
        key,
        max_session: Some(args.max_session),
        max_session_bytes: args.max_session_bytes,
        log: true,
        allow_peers: args.allow_peers.clone(),
    };
    let listen = &args.listen;
    let mut addr: std::net::SocketAddr = listen.parse().map_err(|_| {
        usage(format!(
            "--listen '{listen}' is not an address (accepted: IP:PORT, e.g. 0.0.0.0:5201)"
        ))
    })?;
    if let Some(port) = args.port {
        addr.set_port(port);
    }
    let listener = std::net::TcpListener::bind(addr).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            anyhow::anyhow!("{addr} is busy (address in use): choose another with --listen or --port")
        } else {
            anyhow::anyhow!("could not listen on {addr}: {e}")
        }
    })?;
    let mut served = crate::net::session::registry::NET_SERVE.to_vec();
    if args.agent {
        served.push(crate::net::agent::SERVED);
    }
    let stop = crate::sys::signal::install_stop_handler();
    crate::tell!(
        "iopath net serve: listening on {}{} ({}Ctrl-C to stop)",
        listener.local_addr()?,
        if args.agent { " as an agent" } else { "" },
        match args.sessions {
            1 => String::new(),
            n => format!("{n} sessions at a time; "),
        }
    );
    loop {
        // Every session (peer, workload, outcome) and every refused connection is logged as it
        // ends; an error here is accepting's own.
        match crate::net::session::serve_session_with(&listener, Some(stop.flag()), &options, &served) {
            Ok(()) => {}
            Err(_) if stop.requested() => break,
            Err(e) => crate::tell!("net serve: {e:#}"),
        }
        if args.once || stop.requested() {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cases(argv: &[&str]) -> anyhow::Result<Vec<StreamCase>> {
        let parsed = crate::cli::values::parse_flags::<StreamArgs>(argv)?;
        stream_cases(&parsed)
    }

    /// A message of 4 bytes cannot have 8 fields of at least one byte: refused as bad input
    /// with a message that names both numbers and what would do.
    #[test]
    fn sizes_smaller_than_the_field_count_are_refused() {
        let err = cases(&["--size", "4", "--fields", "8"]).unwrap_err();
        assert!(err.downcast_ref::<crate::cli::UsageError>().is_some(), "{err}");
        let text = err.to_string();
        assert!(text.contains("--size 4B with --fields 8"), "{text}");
        assert!(text.contains("--fields 4 or fewer"), "{text}");
        let err = cases(&["--size", "4,64K"]).unwrap_err().to_string();
        assert!(err.contains("--size 4B"), "the default of 8 fields: {err}");
        assert_eq!(cases(&["--size", "8", "--fields", "8"]).unwrap().len(), 3);
        assert_eq!(
            cases(&["--size", "4", "--fields", "1", "--mode", "one-copy"])
                .unwrap()
                .len(),
            1
        );
    }

    /// A stream's receivers are woken per message unless --rx-wake says data; an rr's and a
    /// crr's on any data unless it says message (`cli::rr`); a bad value is refused.
    #[test]
    fn each_command_has_its_own_rx_wake_default() {
        use crate::case::{RrCase, RrKind};
        let rr = |argv: &[&str], kind| -> Vec<RrCase> {
            crate::cli::rr::rr_cases(
                &crate::cli::values::parse_flags::<crate::cli::rr::RrArgs>(argv).unwrap(),
                kind,
            )
            .unwrap()
        };
        let wake_of = |cases: Vec<StreamCase>| cases.iter().map(|c| c.rx_wake).collect::<Vec<_>>();
        assert_eq!(wake_of(cases(&["--mode", "one-copy"]).unwrap()), [RxWake::Message]);
        assert_eq!(
            wake_of(cases(&["--mode", "one-copy", "--rx-wake", "data"]).unwrap()),
            [RxWake::Data]
        );
        for kind in [RrKind::Rr, RrKind::Crr] {
            assert!(rr(&[], kind).iter().all(|c| c.rx_wake == RxWake::Data), "{kind:?}");
            let woken = rr(&["--rx-wake", "message"], kind);
            assert!(woken.iter().all(|c| c.rx_wake == RxWake::Message), "{kind:?}");
            assert!(woken[0].label().ends_with(" wake=message"), "{}", woken[0].label());
        }
        let err = crate::cli::values::parse_flags::<StreamArgs>(&["--rx-wake", "soon"]).unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown receive wake-up 'soon' (accepted: message, data)"),
            "{err}"
        );
    }

    /// --port, --connect, --topology and --psk-file are one declaration: every network command
    /// shows the same help for each; net records has no --connect and its own
    /// words for --topology (a remote server holds the table).
    #[test]
    fn the_endpoint_flags_are_declared_once() {
        let root = crate::cli::command();
        let find = |path: &[&str]| -> clap::Command {
            path.iter().fold(root.clone(), |cmd, name| {
                cmd.find_subcommand(name)
                    .unwrap_or_else(|| panic!("no {path:?}"))
                    .clone()
            })
        };
        let help = |cmd: &clap::Command, id: &str| -> Option<String> {
            cmd.get_arguments()
                .find(|a| a.get_id() == id)
                .map(|a| a.get_help().map(|h| h.to_string()).unwrap_or_default())
        };
        let stream = find(&["net", "stream"]);
        let ids = ["port", "connect", "topology", "psk_file"];
        for id in ids {
            assert!(help(&stream, id).is_some_and(|h| !h.is_empty()), "net stream --{id}");
        }
        for path in [
            &["net", "rr"][..],
            &["net", "crr"],
            &["fleet", "run", "stream"],
            &["fleet", "run", "rr"],
        ] {
            let cmd = find(path);
            for id in ids {
                assert_eq!(help(&cmd, id), help(&stream, id), "{path:?} --{id}");
            }
        }
        let records = find(&["net", "records"]);
        assert_eq!(help(&records, "connect"), None, "net records has --connect");
        assert_eq!(help(&records, "port"), help(&stream, "port"));
        assert_eq!(help(&records, "psk_file"), help(&stream, "psk_file"));
        let topology = help(&records, "topology").unwrap();
        assert!(
            topology.contains("holds the table") && !topology.contains("--connect"),
            "{topology}"
        );
    }
}
