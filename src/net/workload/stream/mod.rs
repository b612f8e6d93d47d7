//! The stream workload: client threads send messages of separately allocated fields to server
//! threads over TCP, one connection each, in one copy mode; both ends count CPU time,
//! counters and system calls inside the same measured window.
//!
//! The client drives the session over a control connection (see net/control.rs), so the
//! server can live in this process (loopback) or be a remote `iopath net serve`.

mod incast;
mod server;
pub(crate) mod thread;

pub use server::SERVED;

use crate::case::{CopyMode, Endpoint, NetParams, RxMode, StreamCase};
use crate::net::alias;
use crate::net::auth::Credentials;
use crate::net::control::{encode_data_header, ServerReport, ThreadTally, PROTOCOL_VERSION};
use crate::net::mode::{self, ZeroCopyCounts};
use crate::net::session::connect::connect_with_mss;
use crate::net::session::coordinator::{self as session, fds_of, shut_down_all, Accepted, Coordinator, NetWorkload};
use crate::net::session::interrupted;
use crate::net::session::observe::{copied_fraction, push_completion_counts, warn_unexpected_completions};
use crate::net::session::observe::{
    mean_window, per, place, publish_proof, push_client_counters, push_server_metrics, warn_verify, NO_CLIENT_WINDOW,
    NO_SERVER_WINDOW,
};
use crate::net::session::observe::{unavailable_observation, Headline};
use crate::observation::names;
use crate::observation::{Metric, Observation, Role, Source, Unsupported, WarningKind};
use crate::stop::Stop;
use anyhow::{anyhow, Context};
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use thread::{End, Shared, ThreadOutcome, ThreadPlan};

/// TCP_MAXSEG for zerocopy receive on loopback and in a namespace: 4096 bytes of payload plus
/// the 12 bytes of the timestamp option, so every segment carries exactly one page.
pub const ZEROCOPY_RX_MAXSEG: i32 = 4108;

/// The MSS a case's connections are clamped to, if any: only zerocopy receive on loopback or a
/// namespace's loopback (a veth takes its MTU, mtu=4148; a remote path is what it is).
fn clamped_mss(case: &StreamCase) -> Option<i32> {
    let local = matches!(case.net.endpoint, Endpoint::Loopback { .. } | Endpoint::Netns { .. });
    (case.rx_mode == RxMode::Zerocopy && local).then_some(ZEROCOPY_RX_MAXSEG)
}

/// The longest window or warm-up a case may ask for.
const MAX_PHASE_MS: u64 = 24 * 3600 * 1000;

/// Memory the buffers of a case take on one end (messages, serialisation buffers, the
/// zero-copy ring), for refusing cases the machine cannot hold before allocating anything:
/// every client session's (`--clients`; a server serves them all at once).
pub fn buffer_bytes(case: &StreamCase, role: Role) -> u64 {
    session_bytes(case, role).saturating_mul(u64::from(case.clients.max(1)))
}

/// The buffers of one session on one end.
fn session_bytes(case: &StreamCase, role: Role) -> u64 {
    let per_thread = match role {
        Role::Client => mode::sender_bytes(case.mode, case.size, case.net.verify, &send_options(case)),
        // The fields plus a contiguous wire buffer or a verify copy.
        _ => case.size.saturating_mul(2),
    };
    per_thread.saturating_mul(case.net.threads as u64)
}

/// The case's options for its senders.
fn send_options(case: &StreamCase) -> mode::SendOptions {
    mode::SendOptions {
        zc_ring: case.zc_ring,
        fixed_buffers: case.fixed_buffers,
        unbatched: false,
        align: case.align,
        senders: case.net.threads,
    }
}

/// One sender per client thread; a mode the kernel refuses is `Unsupported`.
fn make_senders(case: &StreamCase) -> anyhow::Result<Vec<Box<dyn mode::Sender>>> {
    let options = send_options(case);
    (0..case.net.threads)
        .map(|_| {
            mode::sender_with(case.mode, case.size as usize, case.fields, case.net.verify, &options)
                .map_err(|e| sender_error(case.mode, e))
        })
        .collect()
}

/// A sender's set-up error as the run reports it: a refusal the sender already typed (its
/// own reason), one the errno says, or a plain failure.
fn sender_error(mode: CopyMode, e: std::io::Error) -> anyhow::Error {
    use crate::observation::Unsupported;
    if let Some(unsupported) = e.get_ref().and_then(|inner| inner.downcast_ref::<Unsupported>()) {
        return anyhow::Error::new(unsupported.clone());
    }
    let what = format!("the {mode} send mode");
    match Unsupported::refused(&what, &e) {
        Some(unsupported) => anyhow::Error::new(unsupported),
        None => anyhow!("{what} could not be set up: {e}"),
    }
}

/// Whether a case can run: limits on every parameter, and buffers that fit in half of the
/// memory available (`sys::procfs::memory_headroom`: MemAvailable lowered by the memory
/// cgroup's room; None skips that check). Used by the
/// CLI before running and by a server before accepting a client's case.
pub fn check_case(case: &StreamCase, role: Role, mem_available: Option<u64>) -> Result<(), String> {
    if case.size == 0 || case.fields == 0 || case.net.threads == 0 {
        return Err("size, fields and threads must be at least 1".into());
    }
    if case.size > 1 << 30 {
        return Err("messages larger than 1 GiB are not accepted".into());
    }
    if case.net.threads > crate::net::session::MAX_THREADS || case.fields > 1024 {
        return Err("at most 1024 threads and 1024 fields".into());
    }
    if case.clients == 0 || case.clients as usize > crate::net::session::server::MAX_SESSIONS {
        return Err(format!(
            "{} client sessions: accepted 1 to {}",
            case.clients,
            crate::net::session::server::MAX_SESSIONS
        ));
    }
    if case.zc_ring == Some(0) {
        return Err("--zc-ring must be at least 1 byte (up to one message means one message)".into());
    }
    if case.fixed_buffers {
        if case.mode != CopyMode::UringZc {
            return Err("registered (fixed) buffers are for uring-zc only".into());
        }
        let ring = session_bytes(case, Role::Client) / case.net.threads as u64;
        if ring > crate::sys::uring_send::MAX_FIXED_BUFFER as u64 {
            return Err(format!(
                "{} with --fixed-buffers: its ring of {} is more than the 1 GiB one registered buffer may hold (use a smaller --zc-ring)",
                case.label(),
                crate::format::format_bytes(ring)
            ));
        }
    }
    if case.net.duration_ms == 0 || case.net.duration_ms > MAX_PHASE_MS || case.net.warmup_ms > MAX_PHASE_MS {
        return Err("duration must be between 1 ms and 24 h, warm-up at most 24 h".into());
    }
    if case.net.verify && case.rx_mode == RxMode::Trunc {
        return Err(
            "--verify with --rx-mode trunc: the kernel discards the bytes, so there is nothing to check".into(),
        );
    }
    let need = buffer_bytes(case, role);
    if let Some(available) = mem_available {
        if need > available / 2 {
            return Err(format!(
                "{} needs about {} of buffers on the {role} side, more than half of the {} available (MemAvailable and the memory cgroup's limit)",
                case.label(),
                crate::format::format_bytes(need),
                crate::format::format_bytes(available)
            ));
        }
    }
    Ok(())
}

/// Run one stream case and return its observation. A stop request ends it within about
/// 100 ms in any phase, with every thread joined and the in-process server released, as
/// `Err(Interrupted)`. With `prove_copies`, the alias probe runs first, outside the window.
pub fn run(case: &StreamCase, stop: Stop, credentials: &Credentials) -> anyhow::Result<Observation> {
    let proof = case.prove_copies.then(|| prove_copies(case));
    if stop.requested() {
        return Err(interrupted());
    }
    let mut obs = match run_measured(case, stop, credentials) {
        Ok(obs) => obs,
        // The kernel refuses what the case needs (a send mode, TCP receive zero-copy): a
        // result, not a failure, whose figures say why they are missing.
        Err(e) => match e.downcast_ref::<Unsupported>() {
            Some(refusal) => unavailable_observation(refusal, &headline(case)),
            None => return Err(e),
        },
    };
    if let Some(proof) = proof {
        publish_proof(&mut obs, case.mode, proof);
    }
    Ok(obs)
}

/// The alias probe's tally for the case's send mode (net/alias.rs), or why there is none.
fn prove_copies(case: &StreamCase) -> Result<alias::ByteTally, String> {
    if matches!(case.net.endpoint, crate::case::Endpoint::Remote { .. }) {
        return Err(
            "the alias probe needs to see the receiver, and over --connect it is remote (run without --connect)".into(),
        );
    }
    alias::probe(case.mode, case.size, case.fields).map_err(|e| format!("the alias probe failed: {e}"))
}

/// The figures a stream case the kernel cannot run says are unavailable.
fn headline(case: &StreamCase) -> Vec<Headline> {
    let mut figures = vec![
        (names::THROUGHPUT_GBPS, Role::System, "Gbit/s"),
        (names::MESSAGES_PER_S, Role::System, "msg/s"),
        (names::TIME_PER_MSG_US, Role::System, "us"),
    ];
    if case.rx_mode == RxMode::Zerocopy {
        figures.push((names::RX_MAPPED_FRACTION, Role::Server, "fraction"));
    }
    figures
}

/// The measured run: the session coordinator with the stream's threads; an incast's
/// (`--clients`) sessions made into one observation.
fn run_measured(case: &StreamCase, stop: Stop, credentials: &Credentials) -> anyhow::Result<Observation> {
    let client = StreamClient { case };
    let coordinator = Coordinator::new(&client, stop, credentials);
    if case.clients <= 1 {
        return coordinator.run();
    }
    Ok(incast::combine(coordinator.run_sessions(case.clients as usize)?))
}

/// The stream as the session coordinator runs it: one sender per client thread, each on its
/// own data connection, the server receiving.
struct StreamClient<'a> {
    case: &'a StreamCase,
}

/// The stream's hello, the protocol's first: `{"type":"hello","version":5,"case":{...}}`
/// (no `workload`: a server reads a hello without one as a stream's).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StreamHello {
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u32,
    pub case: StreamCase,
}

impl StreamHello {
    pub fn new(case: StreamCase) -> StreamHello {
        StreamHello {
            kind: "hello".into(),
            version: PROTOCOL_VERSION,
            case,
        }
    }
}

impl NetWorkload for StreamClient<'_> {
    type Hello = StreamHello;
    type Ends = std::vec::IntoIter<Box<dyn mode::Sender>>;
    type Data = Vec<TcpStream>;
    type Outcome = ThreadOutcome;
    const PANICKED: &'static str = "a stream thread panicked";
    const SERVED: crate::net::session::Served = SERVED;

    fn net(&self) -> &NetParams {
        &self.case.net
    }

    fn hello(&self, _: &Self::Ends) -> StreamHello {
        StreamHello::new(self.case.clone())
    }

    fn listen(&self, listener: &TcpListener) -> anyhow::Result<()> {
        if let Some(mss) = clamped_mss(self.case) {
            // The listener's MSS clamp is what its SYN-ACK advertises to each new connection.
            crate::sys::net::set_maxseg(listener.as_raw_fd(), mss).context("setting TCP_MAXSEG on the listener")?;
        }
        Ok(())
    }

    /// Before talking to the server: a mode the kernel refuses ends the case here.
    fn prepare(&self) -> anyhow::Result<Self::Ends> {
        Ok(make_senders(self.case)?.into_iter())
    }

    fn open_data(
        &self,
        addr: SocketAddr,
        accepted: &Accepted,
        _ends: &mut Self::Ends,
        stop: Stop,
    ) -> anyhow::Result<Vec<TcpStream>> {
        let token = accepted.token;
        let mut data = Vec::with_capacity(self.case.net.threads);
        for i in 0..self.case.net.threads {
            let mut s = connect_with_mss(addr, stop, clamped_mss(self.case))?;
            s.write_all(&encode_data_header(token, i as u32))?;
            s.set_write_timeout(Some(crate::net::session::DATA_IDLE_TIMEOUT))?;
            data.push(s);
        }
        Ok(data)
    }

    fn spawn_clients<'scope, 'env>(
        &'env self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        shared: &'env session::Shared<'env>,
        data: &'env Vec<TcpStream>,
        mut senders: Self::Ends,
    ) -> session::Handles<'scope, ThreadOutcome> {
        let plans = Shared {
            window: shared.window,
            ready: shared.ready,
            policy: shared.policy,
        };
        data.iter()
            .enumerate()
            .map(|(i, stream)| {
                let plan = ThreadPlan::new(self.case, Role::Client, i, stream.as_raw_fd(), &plans);
                let end = End::Send(senders.next().expect("one sender per thread"));
                let failed = shared.failed;
                std::thread::Builder::new()
                    .name(format!("iopath-client-{i}"))
                    .spawn_scoped(scope, move || {
                        let result = thread::run(plan, end);
                        if result.is_err() {
                            failed.store(true, Ordering::SeqCst);
                        }
                        // Tell the server this connection is finished (EOF after the last message).
                        stream.shutdown(Shutdown::Write).ok();
                        result
                    })
            })
            .collect()
    }

    fn wake(&self, data: &Vec<TcpStream>) {
        shut_down_all(data);
    }

    /// The senders' view of each connection as the window closed.
    fn data_fds(&self, data: &Vec<TcpStream>) -> Option<Vec<RawFd>> {
        fds_of(data)
    }

    fn observe(
        &self,
        clients: &[ThreadOutcome],
        server: &ServerReport,
        _window_s: f64,
        tsc_hz: Option<f64>,
    ) -> Observation {
        build_observation(self.case, clients, server, tsc_hz)
    }

    /// What the receivers got inside their windows (the bytes throughput counts).
    fn payload(&self, _obs: &Observation, server: &ServerReport) -> Result<f64, String> {
        mean_window(&server.threads)
            .map(|_| server.threads.iter().map(|t| t.bytes).sum::<u64>() as f64)
            .ok_or_else(|| NO_SERVER_WINDOW.to_string())
    }
}

/// Turn both sides' counts into the observation: throughput from what the receivers got
/// inside their windows, per-role CPU and counters, and the zero-copy truth.
fn build_observation(
    case: &StreamCase,
    clients: &[ThreadOutcome],
    server: &ServerReport,
    tsc_hz: Option<f64>,
) -> Observation {
    let mut obs = Observation::default();
    // Rates over the receivers that measured: what they received inside their windows over
    // the mean length of those windows (docs/methodology.md).
    let server_window = mean_window(&server.threads).ok_or_else(|| NO_SERVER_WINDOW.to_string());
    let received: u64 = server.threads.iter().map(|t| t.bytes).sum();
    let received_msgs: u64 = server.threads.iter().map(|t| t.messages).sum();
    let busy_clients: Vec<(f64, u64)> = clients
        .iter()
        .filter_map(|c| c.tally.window_s.map(|w| (w, c.tally.messages)))
        .filter(|(_, m)| *m > 0)
        .collect();
    let time_per_msg = if busy_clients.is_empty() {
        Err("no client thread sent a message inside its window".to_string())
    } else {
        Ok(busy_clients.iter().map(|(w, m)| w / *m as f64).sum::<f64>() / busy_clients.len() as f64)
    };
    let window = mean_window(clients.iter().map(|c| &c.tally)).ok_or_else(|| NO_CLIENT_WINDOW.to_string());
    let idle = |role: &str, tallies: Vec<&ThreadTally>| -> Option<String> {
        let n = tallies.iter().filter(|t| t.messages == 0).count();
        (n > 0).then(|| {
            format!(
                "{n} {role} threads moved no message inside the window (starved of CPU or blocked on the other end): more threads than CPUs?"
            )
        })
    };
    if let Some(w) = idle("client", clients.iter().map(|c| &c.tally).collect()) {
        obs.warn(WarningKind::Starved, w);
    }
    if let Some(w) = idle("server", server.threads.iter().collect()) {
        obs.warn(WarningKind::Starved, w);
    }
    let tool = |name: &str, unit: &str, value: Result<f64, String>| {
        Metric::from_result(name, Role::System, unit, Source::Tool, value)
    };
    obs.push(tool(
        names::THROUGHPUT_GBPS,
        "Gbit/s",
        server_window.clone().map(|w| received as f64 * 8.0 / 1e9 / w),
    ));
    obs.push(tool(
        names::MESSAGES_PER_S,
        "msg/s",
        server_window.map(|w| received_msgs as f64 / w),
    ));
    obs.push(tool(names::TIME_PER_MSG_US, "us", time_per_msg.map(|t| t * 1e6)));
    obs.push(tool(names::WINDOW_S, "s", window));

    let bytes_sent: u64 = clients.iter().map(|c| c.tally.bytes).sum();
    let msgs_sent: u64 = clients.iter().map(|c| c.tally.messages).sum();
    let syscalls: u64 = clients.iter().map(|c| c.tally.syscalls).sum();
    push_client_counters(
        &mut obs,
        clients.iter().map(|c| &c.counters),
        case.net.perf,
        "cycles_per_byte is",
        (bytes_sent, msgs_sent, "msg"),
        tsc_hz,
    );
    obs.push(Metric::tool(names::BYTES_SENT, Role::Client, bytes_sent as f64, "B"));
    obs.push(Metric::tool(
        names::MESSAGES_SENT,
        Role::Client,
        msgs_sent as f64,
        "messages",
    ));
    obs.push(Metric::new(
        names::SYSCALLS_PER_MSG,
        Role::Client,
        per(syscalls as f64, msgs_sent as f64),
        "syscalls/msg",
        Source::Tool,
    ));
    push_server_metrics(&mut obs, server);

    if case.mode.is_zero_copy() {
        let zc = clients
            .iter()
            .filter_map(|c| c.send_counts.as_ref().and_then(|s| s.zerocopy.clone()))
            .fold(ZeroCopyCounts::default(), |mut acc, z| {
                acc.completions.add(&z.completions);
                acc.enobufs += z.enobufs;
                acc.slot_waits += z.slot_waits;
                acc
            });
        push_zero_copy_metrics(&mut obs, case.mode, &zc);
    }
    if let Some(u) = uring_counts(clients) {
        push_uring_metrics(&mut obs, case.mode, &u);
    }
    if case.net.verify {
        crate::net::session::observe::push_verify_counts(
            &mut obs,
            Role::Server,
            server.verified_messages,
            server.corrupt_messages,
        );
        let corrupted =
            (server.corrupt_messages > 0).then(|| format!("{} messages arrived corrupted", server.corrupt_messages));
        warn_verify(&mut obs, "throughput and CPU", corrupted);
    }

    place(&mut obs, clients.iter().map(|c| c.placement.clone()), server, &case.net);
    obs
}

/// The io_uring senders' counts summed over the client threads (None: no uring sender).
fn uring_counts(clients: &[ThreadOutcome]) -> Option<mode::UringCounts> {
    clients
        .iter()
        .filter_map(|c| c.send_counts.as_ref().and_then(|s| s.uring.clone()))
        .reduce(|mut acc, u| {
            acc.enters += u.enters;
            acc.sqes += u.sqes;
            acc.cqes += u.cqes;
            acc.messages += u.messages;
            acc.notifications += u.notifications;
            acc.copied += u.copied;
            acc.zero_copied += u.zero_copied;
            acc.failed += u.failed;
            acc.unexpected += u.unexpected;
            acc
        })
}

/// The zero-copy truth of zero-copy (MSG_ZEROCOPY error-queue completions) and uring-zc
/// (SENDMSG_ZC notifications): how many sends completed and how many the kernel copied.
fn push_zero_copy_metrics(obs: &mut Observation, mode: CopyMode, zc: &ZeroCopyCounts) {
    let c = &zc.completions;
    push_completion_counts(obs, c);
    obs.push(Metric::from_result(
        names::ZEROCOPY_NOT_COPIED_FRACTION,
        Role::System,
        "fraction",
        Source::Tool,
        c.not_copied_fraction()
            .ok_or_else(|| "no completion arrived".to_string()),
    ));
    obs.push(copied_fraction(c));
    if mode == CopyMode::ZeroCopy {
        obs.push(Metric::tool(
            names::ZEROCOPY_ENOBUFS,
            Role::System,
            zc.enobufs as f64,
            "errors",
        ));
    }
    obs.push(Metric::tool(
        "zerocopy_slot_waits",
        Role::System,
        zc.slot_waits as f64,
        "waits",
    ));
    warn_unexpected_completions(obs, c);
    if c.completed > 0 && c.copied > 0 {
        let evidence = match mode {
            CopyMode::UringZc => "its io_uring notifications carry IORING_NOTIF_USAGE_ZC_COPIED",
            _ => "its completions carry SO_EE_CODE_ZEROCOPY_COPIED",
        };
        obs.warn(WarningKind::ZeroCopyCopied, format!(
            "{mode}: the kernel copied {:.0}% of sends ({evidence}): local delivery (loopback, veth) copies the pages, so zero copy saves no copy here",
            100.0 * c.copied as f64 / c.completed as f64
        ));
    }
}

/// How the io_uring modes drove the kernel: submissions (io_uring_enter), SQEs and CQEs per
/// message, counted by the sender over its whole connection.
fn push_uring_metrics(obs: &mut Observation, mode: CopyMode, u: &mode::UringCounts) {
    let messages = u.messages as f64;
    let per_msg = |name: &str, unit: &str, count: u64| {
        Metric::from_result(
            name,
            Role::Client,
            unit,
            Source::Tool,
            (u.messages > 0)
                .then(|| count as f64 / messages)
                .ok_or_else(|| "no io_uring send completed".to_string()),
        )
    };
    obs.push(per_msg(names::URING_SUBMISSIONS_PER_MSG, "enters/msg", u.enters));
    obs.push(per_msg("uring_sqes_per_msg", "sqes/msg", u.sqes));
    obs.push(per_msg(names::URING_COMPLETIONS_PER_MSG, "cqes/msg", u.cqes));
    if mode == CopyMode::UringZc {
        obs.push(Metric::tool(
            "uring_notifications",
            Role::Client,
            u.notifications as f64,
            "notifications",
        ));
    }
    if u.unexpected > 0 {
        obs.warn(
            WarningKind::Anomaly,
            format!("{} io_uring CQEs matched no send in flight", u.unexpected),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::counters::kernel_policy;
    use crate::measure::counters::CounterSample;
    use crate::measure::window::{SystemProbes, Window};
    use crate::net::control::ThreadTally;
    use crate::net::session::observe::measured_counters;
    use crate::net::session::StartGate;
    use crate::observation::ThreadPlacement;
    use std::net::TcpListener;
    use std::time::Duration;

    fn outcome(role: Role, index: usize, bytes: u64, messages: u64, window_s: f64) -> ThreadOutcome {
        let zero = || Ok(0u64);
        ThreadOutcome {
            tally: ThreadTally {
                bytes,
                messages,
                window_s: Some(window_s),
                syscalls: messages,
            },
            counters: Some(CounterSample {
                cycles: Err("no hardware PMU".into()),
                instructions: Err("no hardware PMU".into()),
                cache_references: Err("no hardware PMU".into()),
                cache_misses: Err("no hardware PMU".into()),
                branch_misses: Err("no hardware PMU".into()),
                task_clock_ns: zero(),
                context_switches: zero(),
                cpu_migrations: zero(),
                page_faults: zero(),
                usage: Ok(Default::default()),
                kernel_included: true,
            }),
            placement: ThreadPlacement {
                role,
                index,
                pinned: None,
                cpu_at_start: None,
                cpu_at_end: None,
                migrations: None,
            },
            send_counts: None,
            recv_counts: None,
            recv_window: None,
        }
    }

    fn case() -> StreamCase {
        StreamCase::for_test(CopyMode::TwoCopy, 1000)
            .with_rx(crate::case::RxMode::Copy)
            .with_threads(2)
            .with_window_ms(1000, 0)
            .with_perf()
    }

    /// Run the real thread loop (`thread::run`) for one `role` thread whose first look at the
    /// window finds it closed: a receiver blocked in recv() for the whole window, or a sender
    /// that starts too late. Its peer sends nothing and closes.
    fn thread_that_missed_the_window(role: Role) -> ThreadOutcome {
        let window = Window::new();
        let mut system = SystemProbes::default();
        window.open(&mut system);
        window.close(&mut system);
        let ready = StartGate::default();
        let policy = kernel_policy();
        let shared = Shared {
            window: &window,
            ready: &ready,
            policy: &policy,
        };
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (conn, _) = listener.accept().unwrap();
        let c = case();
        let plan = ThreadPlan::new(&c, role, 1, conn.as_raw_fd(), &shared);
        let end = match role {
            Role::Client => End::Send(mode::sender(c.mode, c.size as usize, c.fields, false).unwrap()),
            _ => End::Recv(mode::receiver(c.rx_mode, c.rx_wake, c.size as usize, c.fields, false, c.align).unwrap()),
        };
        std::thread::scope(|s| {
            let h = s.spawn(|| thread::run(plan, end));
            assert!(ready.open_when(1, Duration::from_secs(10)));
            peer.shutdown(Shutdown::Write).unwrap();
            h.join().unwrap().expect("a missed window is not an error")
        })
    }

    /// Seen in `iopath quick` on a loaded 2-CPU machine: a server thread blocked in recv()
    /// for the whole window because its client was starved. It used to report a ~1e-7 s
    /// window of its own, which halved the mean window and doubled the throughput. Its
    /// outcome has no window now, and the rates are over the threads that measured.
    #[test]
    fn a_thread_that_missed_the_window_has_none_and_does_not_inflate_the_rates() {
        let idle_server = thread_that_missed_the_window(Role::Server);
        assert_eq!(idle_server.tally.window_s, None, "{:?}", idle_server.tally);
        assert_eq!(idle_server.tally.messages, 0);
        assert!(idle_server.counters.is_none());
        let idle_client = thread_that_missed_the_window(Role::Client);
        assert_eq!(idle_client.tally.window_s, None, "{:?}", idle_client.tally);
        assert!(idle_client.counters.is_none());

        let clients = vec![outcome(Role::Client, 0, 2_000_000, 2000, 1.0), idle_client];
        let server = ServerReport {
            threads: vec![
                outcome(Role::Server, 0, 2_000_000, 2000, 1.0).tally,
                idle_server.tally.clone(),
            ],
            ..Default::default()
        };
        let obs = build_observation(&case(), &clients, &server, Some(1e9));
        assert_eq!(obs.value("throughput_gbps", Role::System), Some(0.016));
        assert_eq!(obs.value("messages_per_s", Role::System), Some(2000.0));
        assert_eq!(obs.value("time_per_msg_us", Role::System), Some(500.0));
        assert_eq!(obs.value("window_s", Role::System), Some(1.0));
        // The idle client's counters are not summed in as zeros, nor do they hide the busy one's.
        assert_eq!(
            obs.get("context_switches", Role::Client).unwrap().source,
            Source::Software
        );
        assert!(obs
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::Starved && w.text.starts_with("1 server threads moved no message")));
        assert!(obs
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::Starved && w.text.starts_with("1 client threads moved no message")));
    }

    /// A sender's refusal reaches the user as `... unavailable: <reason>`: the typed
    /// Unsupported a ring puts inside its io::Error keeps its own reason, and a bare EPERM
    /// from a constructor becomes one too; other errors stay failures.
    #[test]
    fn a_refused_sender_is_unavailable_with_its_reason() {
        use crate::observation::Unsupported;
        let typed = std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            Unsupported::new(
                "the uring-zc send mode",
                "io_uring is switched off for every process (kernel.io_uring_disabled = 2)",
            ),
        );
        let err = sender_error(CopyMode::UringZc, typed);
        let refused = err.downcast_ref::<Unsupported>().expect("typed");
        assert_eq!(
            refused.to_string(),
            "the uring-zc send mode unavailable: io_uring is switched off for every process (kernel.io_uring_disabled = 2)"
        );
        let eperm = sender_error(CopyMode::Uring, std::io::Error::from_raw_os_error(libc::EPERM));
        assert!(
            eperm
                .to_string()
                .starts_with("the uring send mode unavailable: not permitted"),
            "{eperm}"
        );
        let other = sender_error(CopyMode::Uring, std::io::Error::from_raw_os_error(libc::EMFILE));
        assert!(other.downcast_ref::<Unsupported>().is_none());
        assert!(other.to_string().contains("could not be set up"), "{other}");
    }

    /// When no receiver measured there is no rate: unavailable with the reason, not 0 or NaN.
    #[test]
    fn no_receiver_window_means_no_rate_and_no_counters() {
        let clients = vec![outcome(Role::Client, 0, 2_000_000, 2000, 1.0)];
        let server = ServerReport {
            threads: vec![ThreadTally::default()],
            metrics: vec![Metric {
                name: "cpu_user_s".into(),
                role: Role::Server,
                value: None,
                unit: "s".into(),
                source: Source::Rusage,
            }],
            ..Default::default()
        };
        let obs = build_observation(&case(), &clients, &server, Some(1e9));
        for name in ["throughput_gbps", "messages_per_s"] {
            let m = obs.get(name, Role::System).unwrap();
            assert_eq!(m.value, None);
            assert_eq!(m.source, Source::Unavailable(NO_SERVER_WINDOW.into()), "{name}");
        }
        // A peer's metric without a value reads unavailable, never `null` beside a source.
        let m = obs.get("cpu_user_s", Role::Server).unwrap();
        assert_eq!(m.source, Source::Unavailable("the server sent no value".into()));
        let counters = measured_counters(&[None], NO_SERVER_WINDOW);
        for m in counters.metrics(Role::Server, 0, 0, "msg", Some(1e9)) {
            assert_eq!(m.value, None, "{m:?}");
            assert_eq!(m.source, Source::Unavailable(NO_SERVER_WINDOW.into()), "{m:?}");
        }
    }
}
