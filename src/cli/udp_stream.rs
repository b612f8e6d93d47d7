//! `iopath net udp-stream`.

use super::error::usage;
use super::output::View;
use super::run::RunFlags;
use super::values;
use crate::case::{format_bytes, Case, UdpRate, UdpRecvMode, UdpSendMode, UdpStreamCase};
use crate::net::workload::udp_stream;
use crate::observation::names;
use crate::observation::Role;
use crate::store::Record;
use crate::sweep::Plan;
use clap::Args;

#[derive(Args, Debug)]
pub struct UdpStreamArgs {
    /// Send modes, comma-separated: send (one send() per datagram), sendmsg (one sendmsg() of
    /// an 8-field gather list per datagram), sendmmsg (--batch datagrams per call), gso
    /// (UDP_SEGMENT: one call of up to 64 datagrams that the kernel cuts; each must fit the
    /// MTU), zerocopy (sendmsg with MSG_ZEROCOPY, buffers reused after their completion;
    /// the copied fraction is reported), uring (io_uring SENDMSG, --batch per submission).
    #[arg(long, default_value = "send", value_delimiter = ',')]
    pub mode: Vec<UdpSendMode>,
    /// Receive modes, comma-separated; every --mode runs with every one: recv (one datagram
    /// per call), recvmmsg (--batch per call), gro (UDP_GRO: the kernel coalesces datagrams
    /// of the flow into one buffer, split again by the segment size it reports).
    #[arg(long, default_value = "recv", value_delimiter = ',', value_name = "RX_MODES")]
    pub rx_mode: Vec<UdpRecvMode>,
    /// Datagram sizes (UDP payload), 16 (the sequence number and send time) to 65507 bytes:
    /// 1K, lists 64,1K,8K and ranges 64..8K (both ends and every power of two between).
    #[arg(long, default_value = "1K", value_parser = values::parse_size_list)]
    pub size: values::SizeList,
    /// Datagrams per system call for sendmmsg, gso, uring and recvmmsg (1 to 1024; gso at
    /// most 64).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub batch: u32,
    /// Flows, each a client thread with its own socket and a server thread with its own:
    /// 1,2,4 or a range 1..8.
    #[arg(long, default_value = "1", value_parser = values::parse_counts_up_to::<{ crate::net::session::MAX_THREADS }>)]
    pub threads: values::CountList,
    /// Pace the senders at this rate in total, shared evenly by the threads: datagrams per
    /// second (100000, 100k, 2M) or payload bits per second with a `bit` suffix (500Mbit,
    /// 2Gbit; decimal prefixes). Paced by a user-space gap between send calls (a call of
    /// --batch datagrams for the batching modes). Without it, unpaced: as fast as the sender
    /// goes, and what the receiver cannot take is lost.
    #[arg(long, value_parser = clap::value_parser!(UdpRate))]
    pub rate: Option<UdpRate>,
    /// The receiving sockets' SO_RCVBUF in bytes (4K, 1M; 256 B to 1 GiB): small to make loss
    /// happen on purpose. The kernel clamps it to net.core.rmem_max and doubles it for its
    /// bookkeeping; what it granted is reported as rcvbuf_bytes.
    #[arg(long, value_parser = values::parse_size)]
    pub rcvbuf: Option<u64>,
    #[command(flatten)]
    pub window: super::net::WindowFlags,
    /// Write a pattern from each datagram's sequence number into it and check every byte
    /// received (size, header and pattern); failures are counted.
    #[arg(long)]
    pub verify: bool,
    /// Count with getrusage only, no perf events (they cost time at every context switch).
    #[arg(long)]
    pub no_perf: bool,
    #[command(flatten)]
    pub endpoint: super::net::EndpointFlags,
    #[command(flatten)]
    pub run: RunFlags,
}

/// The validated grid of cases, the same for the command line, a plan file and `ab`.
pub fn udp_stream_cases(args: &UdpStreamArgs) -> anyhow::Result<Vec<UdpStreamCase>> {
    let (topology, endpoint) = super::net::endpoint_of(&args.endpoint, true)?;
    let mut cases = Vec::new();
    for mode in values::distinct(&args.mode) {
        for &rx_mode in &values::distinct(&args.rx_mode) {
            for &size in &args.size {
                for &threads in &args.threads {
                    cases.push(UdpStreamCase {
                        mode,
                        rx_mode,
                        size,
                        batch: args.batch as usize,
                        rate: args.rate,
                        rcvbuf: args.rcvbuf,
                        net: args.window.net_params(threads, args.verify, &endpoint, !args.no_perf),
                    });
                }
            }
        }
    }
    // One case runs at a time: both ends' buffers in this process (a remote server checks
    // its own) must fit in half of what the machine and the memory cgroup still allow.
    let headroom = crate::sys::procfs::memory_headroom();
    for case in &cases {
        check_case(case, headroom.filter(|_| topology.starts_server()), headroom).map_err(usage)?;
    }
    Ok(cases)
}

/// A case's limits and its memory: the client's buffers against `client_headroom`, the
/// server's against `server_headroom` when the server runs in this process (None: skipped).
pub fn check_case(
    case: &UdpStreamCase,
    server_headroom: Option<u64>,
    client_headroom: Option<u64>,
) -> Result<(), String> {
    udp_stream::check_case(case)?;
    udp_stream::check_memory(case, Role::Client, client_headroom)?;
    udp_stream::check_memory(case, Role::Server, server_headroom)
}

impl TryFrom<&UdpStreamArgs> for Plan {
    type Error = anyhow::Error;
    fn try_from(args: &UdpStreamArgs) -> anyhow::Result<Plan> {
        let cases = udp_stream_cases(args)?;
        let endpoint = cases.first().map(|c| c.net.endpoint.clone());
        let cases = cases.into_iter().map(Case::NetUdpStream).collect();
        args.endpoint.plan(&args.run, endpoint.as_ref(), cases)
    }
}

/// The human table: one row per case (the median of its repetitions). By default the case,
/// what arrived (Gbit/s, datagrams/s), what was lost (count and share), the jitter and the
/// CPU per datagram of each side, in at most 100 characters; `--wide` adds every other
/// column. Then the `sources:` line and the notes grouped by kind.
pub fn render_table(records: &[Record], view: View) -> String {
    use super::output::{Column, Show};
    let merged = super::output::median_records(records);
    let repeated = merged.iter().any(|(_, n)| *n > 1);
    let key = super::output::case_key::<UdpStreamCase>;
    let m = |title, show, name, role| Column::metric(title, show, name, role, records);
    let mut cols = vec![
        key("mode", |c| format!("{}/{}", c.mode, c.rx_mode)),
        key("size", |c| format_bytes(c.size)),
        key("thr", |c| c.net.threads.to_string()),
        key("rate", |c| c.rate.map_or("unpaced".to_string(), |r| r.to_string())),
    ];
    if repeated {
        cols.push(Column::key("reps", |_, n| n.to_string()));
    }
    // Across `veth:peer=drop` nothing arrives by design: what the senders handed over is the
    // measurement, so it shows by default.
    let peer_drops = records
        .iter()
        .any(|r| r.case.get::<UdpStreamCase>().is_some_and(UdpStreamCase::peer_drops));
    let sent_show = if peer_drops { Show::Default } else { Show::Wide };
    cols.extend([
        m("sent Gbit/s", sent_show, names::THROUGHPUT_GBPS, Role::Client),
        m("Gbit/s", Show::Default, names::THROUGHPUT_GBPS, Role::System),
        m("dgram/s", Show::Default, names::DATAGRAMS_PER_S, Role::System),
        m("lost", Show::Default, names::DATAGRAMS_LOST, Role::System),
        m("loss", Show::Default, names::LOSS_FRACTION, Role::System),
        m("jitter us", Show::Spare, names::JITTER_US, Role::Server),
        m("cli us/dg", Show::Default, names::CPU_US_PER_DATAGRAM, Role::Client),
        m("srv us/dg", Show::Default, names::CPU_US_PER_DATAGRAM, Role::Server),
        m("cli B/cpu-s", Show::Wide, names::BYTES_PER_CPU_S, Role::Client),
        m("calls/s", Show::Wide, names::CALLS_PER_S, Role::Client),
        m("cli B/cycle", Show::Wide, names::BYTES_PER_CYCLE, Role::Client),
        m("sent", Show::Wide, names::DATAGRAMS_SENT, Role::Client),
        m("received", Show::Wide, names::DATAGRAMS_RECEIVED, Role::Server),
        m("reordered", Show::Wide, names::DATAGRAMS_REORDERED, Role::Server),
        m("dup", Show::Wide, names::DATAGRAMS_DUPLICATE, Role::Server),
        m("sock drops", Show::Wide, names::SOCKET_DROPS, Role::Server),
        m("rcvbuf", Show::Wide, names::RCVBUF_BYTES, Role::Server),
        m("cli sc/dg", Show::Wide, names::SYSCALLS_PER_DATAGRAM, Role::Client),
        m("srv sc/dg", Show::Wide, names::SYSCALLS_PER_DATAGRAM, Role::Server),
        m("zc copied", Show::Wide, names::ZEROCOPY_COPIED_FRACTION, Role::System),
    ]);
    let mut text = super::output::render_table(&cols, &merged, view);
    text.push_str("received: server, inside its window; lost: sent in the whole session less arrived, after a drain\n");
    text.push_str(&super::output::notes(records, view));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cases(argv: &[&str]) -> anyhow::Result<Vec<UdpStreamCase>> {
        let parsed = crate::cli::values::parse_flags::<UdpStreamArgs>(argv)?;
        udp_stream_cases(&parsed)
    }

    #[test]
    fn modes_and_sizes_cross_and_limits_refuse_in_one_line() {
        let grid = cases(&["--mode", "send,gso", "--rx-mode", "recv,gro", "--size", "64,1K"]).unwrap();
        assert_eq!(grid.len(), 8);
        assert_eq!(grid[0].label(), "udp send/recv 64B t1");
        for (argv, needle) in [
            (vec!["--size", "8"], "--size 8: a datagram is 16 B"),
            (vec!["--size", "70000"], "to 65507 B"),
            (vec!["--mode", "gso", "--batch", "65"], "at most 64 datagrams"),
            (vec!["--rcvbuf", "16"], "--rcvbuf 16: accepted 256 B to 1 GiB"),
            (vec!["--rate", "1", "--threads", "2"], "from one per second per thread"),
        ] {
            let err = cases(&argv).unwrap_err();
            assert!(
                err.downcast_ref::<crate::cli::UsageError>().is_some(),
                "{argv:?}: {err}"
            );
            assert!(err.to_string().contains(needle), "{argv:?}: {err}");
            assert!(!err.to_string().contains('\n'), "{err}");
        }
        // The datagram buffers are the workload's own: no --align to refuse (nor in --help).
        assert!(crate::cli::values::parse_flags::<UdpStreamArgs>(&["--align", "page"]).is_err());
    }
}
