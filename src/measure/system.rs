//! The kernel's own evidence over a measured window, as [`SystemProbe`]s whose metrics have
//! source `kernel`: TCP counters of the run's network namespace (/proc/net/snmp and
//! /proc/net/netstat), its UDP counters (/proc/net/snmp, `push_udp_probe`), run-queue wait of this process's threads (/proc/<tid>/schedstat),
//! CPU pressure (/proc/pressure/cpu) and system-wide CPU time by kind (/proc/stat, counted
//! in scheduler ticks).

use crate::measure::window::{Probe, SystemProbes};
use crate::observation::{names, Metric, Role, Source};
use crate::sys::netns::NetNs;
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::time::Instant;

/// A thread that waited for a CPU longer than this share of the window makes the result
/// "contended".
pub const CONTENDED_PCT: f64 = 5.0;

/// The standard probes of a network run; `tcp_ns` is the namespace whose TCP counters count
/// the run's connections (None: this process's own, shared with everything else here).
pub fn push_network_probes(system: &mut SystemProbes, tcp_ns: Option<&NetNs>) {
    let tcp = opened_in(tcp_ns, TcpCounters::open_here);
    system.push(Box::new(tcp.unwrap_or_else(TcpCounters::failed)));
    let dev = opened_in(tcp_ns, || {
        File::open("/proc/thread-self/net/dev").map_err(|e| format!("/proc/net/dev: {e}"))
    });
    system.push(Box::new(LinkPackets {
        file: dev,
        before: None,
    }));
    push_cpu_probes(system);
}

/// What `open` opened on a thread inside `ns` (None: right here): a /proc/net file keeps the
/// namespace it was opened in.
fn opened_in<T: Send>(ns: Option<&NetNs>, open: impl FnOnce() -> Result<T, String> + Send) -> Result<T, String> {
    match ns {
        None => open(),
        Some(ns) => ns.run(open).unwrap_or_else(|e| Err(e.to_string())),
    }
}

/// Bytes per packet the devices of one namespace received over the window, from
/// /proc/net/dev opened inside it: a veth or lo counts a GSO packet as one, so above 65,536
/// only when BIG TCP's sizes took effect (`link_rx_bytes_per_packet`).
struct LinkPackets {
    file: Result<File, String>,
    before: Option<HashMap<String, (u64, u64)>>,
}

impl LinkPackets {
    /// Received bytes and packets by device.
    fn read(&mut self) -> Option<HashMap<String, (u64, u64)>> {
        let text = reread(self.file.as_mut().ok()?).ok()?;
        Some(parse_net_dev(&text))
    }
}

/// `/proc/net/dev`'s received bytes and packets (the first two numbers after `NAME:`) by device.
fn parse_net_dev(text: &str) -> HashMap<String, (u64, u64)> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(name, rest)| {
            let mut n = rest.split_whitespace().map(|w| w.parse::<u64>().unwrap_or(0));
            (name.trim().to_string(), (n.next().unwrap_or(0), n.next().unwrap_or(0)))
        })
        .collect()
}

/// Bytes and packets received between two readings, summed over the devices present in both.
/// Devices come and go while a window is open (another run's veth pair, a namespace torn
/// down), and one removed and made again under the same name starts from zero: a device is
/// counted only when neither of its counters went backwards, so the sum never underflows.
fn received_between(before: &HashMap<String, (u64, u64)>, after: &HashMap<String, (u64, u64)>) -> (u64, u64) {
    after
        .iter()
        .filter_map(|(name, &(b1, p1))| {
            let &(b0, p0) = before.get(name)?;
            Some((b1.checked_sub(b0)?, p1.checked_sub(p0)?))
        })
        .fold((0, 0), |(b, p), (db, dp)| (b + db, p + dp))
}

impl Probe for LinkPackets {
    type Sample = Vec<Metric>;
    fn open(&mut self) {
        self.before = self.read();
    }
    fn close(&mut self) -> Vec<Metric> {
        let after = self.read();
        let value = match (&self.file, &self.before, &after) {
            (Err(reason), _, _) => Err(format!("cannot read {reason}")),
            (_, Some(before), Some(after)) => match received_between(before, after) {
                (bytes, packets) if packets > 0 => Ok(bytes as f64 / packets as f64),
                _ => Err("no packet received in the window".into()),
            },
            _ => Err("cannot read /proc/net/dev".into()),
        };
        vec![Metric::from_result(
            names::LINK_RX_BYTES_PER_PACKET,
            Role::System,
            "B/packet",
            Source::Kernel,
            value,
        )]
    }
}

/// The CPU probes every run can have: run-queue wait, CPU pressure, CPU time by kind.
pub fn push_cpu_probes(system: &mut SystemProbes) {
    system.push(Box::new(RunQueue::default()));
    system.push(Box::new(CpuPressure::default()));
    system.push(Box::new(CpuByKind::default()));
}

/// The warning text when a thread waited for a CPU more than [`CONTENDED_PCT`] of the window.
pub fn contended(metrics: &[Metric]) -> Option<String> {
    let pct = metrics
        .iter()
        .find(|m| m.name == "runqueue_wait_max_pct")
        .and_then(|m| m.value)?;
    (pct > CONTENDED_PCT).then(|| {
        format!(
            "a measured thread waited {pct:.1}% of the window for a CPU (run-queue wait from /proc/<tid>/schedstat): the machine was busy"
        )
    })
}

fn reread(file: &mut File) -> std::io::Result<String> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0))?;
    file.read_to_string(&mut text)?;
    Ok(text)
}

/// `Prefix: Name Name..` / `Prefix: 1 2..` line pairs into `Prefix.Name` -> value.
pub fn parse_snmp(text: &str, into: &mut HashMap<String, i64>) {
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((prefix, names)), Some((_, values))) = (names.split_once(':'), values.split_once(':')) else {
            continue;
        };
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = v.parse() {
                into.insert(format!("{prefix}.{n}"), v);
            }
        }
    }
}

/// TCP counters of one network namespace, from files opened inside it (a /proc/net file
/// keeps the namespace it was opened in).
pub struct TcpCounters {
    files: Result<(File, File), String>,
    before: Option<HashMap<String, i64>>,
}

/// (metric, counters summed, unit)
const TCP_METRICS: &[(&str, &[&str], &str)] = &[
    ("tcp_segments_out", &["Tcp.OutSegs"], "segments"),
    ("tcp_segments_in", &["Tcp.InSegs"], "segments"),
    ("tcp_retransmits", &["Tcp.RetransSegs"], "segments"),
    ("tcp_dsacks", &["TcpExt.TCPDSACKRecv"], "events"),
    (
        "tcp_reordering",
        &["TcpExt.TCPSACKReorder", "TcpExt.TCPTSReorder", "TcpExt.TCPRenoReorder"],
        "events",
    ),
    // What a server turned away before reading: SYNs or connections its listen queue had
    // no room for, and segments its busy sockets' backlog could not hold.
    (names::TCP_LISTEN_DROPS, &["TcpExt.ListenDrops"], "connections"),
    (names::TCP_BACKLOG_DROPS, &["TcpExt.TCPBacklogDrop"], "segments"),
];

impl TcpCounters {
    /// Open the calling thread's namespace's counters.
    pub fn open_here() -> Result<TcpCounters, String> {
        let open = |name: &str| File::open(format!("/proc/thread-self/net/{name}")).map_err(|e| format!("{name}: {e}"));
        Ok(TcpCounters {
            files: Ok((open("snmp")?, open("netstat")?)),
            before: None,
        })
    }

    fn failed(reason: String) -> TcpCounters {
        TcpCounters {
            files: Err(reason),
            before: None,
        }
    }

    fn read(&mut self) -> Option<HashMap<String, i64>> {
        let (snmp, netstat) = self.files.as_mut().ok()?;
        let mut map = HashMap::new();
        parse_snmp(&reread(snmp).ok()?, &mut map);
        parse_snmp(&reread(netstat).ok()?, &mut map);
        Some(map)
    }
}

impl Probe for TcpCounters {
    type Sample = Vec<Metric>;
    fn open(&mut self) {
        self.before = self.read();
    }
    fn close(&mut self) -> Vec<Metric> {
        let after = self.read();
        TCP_METRICS
            .iter()
            .map(|(name, keys, unit)| match (&self.before, &after, &self.files) {
                (Some(b), Some(a), _) => {
                    let sum = |m: &HashMap<String, i64>| keys.iter().filter_map(|k| m.get(*k)).sum::<i64>();
                    Metric::new(name, Role::System, (sum(a) - sum(b)) as f64, unit, Source::Kernel)
                }
                (_, _, Err(reason)) => Metric::unavailable(
                    name,
                    Role::System,
                    unit,
                    format!("cannot read /proc/net/snmp: {reason}"),
                ),
                _ => Metric::unavailable(name, Role::System, unit, "cannot read /proc/net/snmp"),
            })
            .collect()
    }
}

/// The UDP counters of the namespace `ns` (None: this process's own) over the window, for a
/// UDP workload's `SystemProbes`: datagrams delivered to sockets, dropped for a full receive
/// buffer, all receive errors, send-buffer errors, datagrams to a port nobody listened on.
pub fn push_udp_probe(system: &mut SystemProbes, ns: Option<&NetNs>) {
    system.push(Box::new(udp_counters(ns)));
}

/// The UDP counters of the namespace `ns` (None: this process's own), opened there.
pub fn udp_counters(ns: Option<&NetNs>) -> UdpCounters {
    opened_in(ns, UdpCounters::open_here).unwrap_or_else(|reason| UdpCounters {
        file: Err(reason),
        before: None,
    })
}

/// (metric, counter, unit) of the Udp line of /proc/net/snmp (all of them datagrams).
pub const UDP_METRICS: &[(&str, &str, &str)] = &[
    (names::UDP_IN_DATAGRAMS, "Udp.InDatagrams", "datagrams"),
    (names::UDP_RCVBUF_ERRORS, "Udp.RcvbufErrors", "datagrams"),
    (names::UDP_IN_ERRORS, "Udp.InErrors", "datagrams"),
    (names::UDP_SNDBUF_ERRORS, "Udp.SndbufErrors", "datagrams"),
    (names::UDP_NO_PORTS, "Udp.NoPorts", "datagrams"),
];

/// The UDP counters of one network namespace (every socket of it, not only the run's), from
/// /proc/net/snmp opened inside it.
pub struct UdpCounters {
    file: Result<File, String>,
    before: Option<HashMap<String, i64>>,
}

impl UdpCounters {
    /// Open the calling thread's namespace's counters.
    pub fn open_here() -> Result<UdpCounters, String> {
        let file = File::open("/proc/thread-self/net/snmp").map_err(|e| format!("snmp: {e}"))?;
        Ok(UdpCounters {
            file: Ok(file),
            before: None,
        })
    }

    /// The counters now (`Udp.Name` -> value), None when the file cannot be read.
    pub fn read(&mut self) -> Option<HashMap<String, i64>> {
        let file = self.file.as_mut().ok()?;
        let mut map = HashMap::new();
        parse_snmp(&reread(file).ok()?, &mut map);
        Some(map)
    }
}

impl Probe for UdpCounters {
    type Sample = Vec<Metric>;
    fn open(&mut self) {
        self.before = self.read();
    }
    fn close(&mut self) -> Vec<Metric> {
        let after = self.read();
        UDP_METRICS
            .iter()
            .map(|(name, key, unit)| {
                let delta = match (&self.before, &after) {
                    (Some(b), Some(a)) => match (b.get(*key), a.get(*key)) {
                        (Some(b), Some(a)) => Ok((a - b) as f64),
                        _ => Err(format!("/proc/net/snmp has no {key} counter")),
                    },
                    _ => Err(match &self.file {
                        Err(reason) => format!("cannot read /proc/net/snmp: {reason}"),
                        Ok(_) => "cannot read /proc/net/snmp".to_string(),
                    }),
                };
                Metric::from_result(name, Role::System, unit, Source::Kernel, delta)
            })
            .collect()
    }
}

/// Run-queue wait (time runnable but not running) of every thread of this process, from
/// the second field of /proc/self/task/<tid>/schedstat (nanoseconds).
#[derive(Default)]
pub struct RunQueue {
    before: HashMap<u32, u64>,
    opened: Option<Instant>,
}

fn run_delays() -> HashMap<u32, u64> {
    let mut out = HashMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        if let Some(wait) = std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        {
            out.insert(tid, wait);
        }
    }
    out
}

impl Probe for RunQueue {
    type Sample = Vec<Metric>;
    fn open(&mut self) {
        self.before = run_delays();
        self.opened = Some(Instant::now());
    }
    fn close(&mut self) -> Vec<Metric> {
        let after = run_delays();
        let window_ns = self.opened.map_or(0.0, |t| t.elapsed().as_nanos() as f64);
        if self.before.is_empty() || window_ns <= 0.0 {
            let why = "cannot read /proc/self/task/<tid>/schedstat";
            return vec![
                Metric::unavailable("runqueue_wait_s", Role::System, "s", why),
                Metric::unavailable("runqueue_wait_max_pct", Role::System, "%", why),
            ];
        }
        // Threads alive at both edges: the measured threads all are.
        let waits: Vec<u64> = after
            .iter()
            .filter_map(|(tid, a)| Some(a.saturating_sub(*self.before.get(tid)?)))
            .collect();
        let total = waits.iter().sum::<u64>() as f64 / 1e9;
        let max = waits.iter().copied().max().unwrap_or(0) as f64 / window_ns * 100.0;
        vec![
            Metric::new("runqueue_wait_s", Role::System, total, "s", Source::Kernel),
            Metric::new("runqueue_wait_max_pct", Role::System, max, "%", Source::Kernel),
        ]
    }
}

/// Time some task waited for a CPU, system-wide: the `some` line's total (microseconds) of
/// /proc/pressure/cpu. Unavailable when the kernel runs with PSI off.
#[derive(Default)]
pub struct CpuPressure {
    before: Option<Result<u64, String>>,
}

fn cpu_pressure_us() -> Result<u64, String> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").map_err(|e| match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) => "PSI is off in this kernel (boot with psi=1)".to_string(),
        _ => format!("cannot read /proc/pressure/cpu: {e}"),
    })?;
    text.lines()
        .find(|l| l.starts_with("some"))
        .and_then(|l| l.split_whitespace().find_map(|f| f.strip_prefix("total=")))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| "no 'some total=' in /proc/pressure/cpu".to_string())
}

impl Probe for CpuPressure {
    type Sample = Vec<Metric>;
    fn open(&mut self) {
        self.before = Some(cpu_pressure_us());
    }
    fn close(&mut self) -> Vec<Metric> {
        let name = "cpu_pressure_some_s";
        match (self.before.take(), cpu_pressure_us()) {
            (Some(Ok(b)), Ok(a)) => vec![Metric::new(
                name,
                Role::System,
                a.saturating_sub(b) as f64 / 1e6,
                "s",
                Source::Kernel,
            )],
            (Some(Err(e)), _) | (_, Err(e)) => vec![Metric::unavailable(name, Role::System, "s", e)],
            (None, _) => vec![],
        }
    }
}

/// CPU time of all CPUs by kind from /proc/stat (user+nice, system, irq, softirq), in
/// scheduler ticks (USER_HZ, 10 ms here): a resolution of one tick per CPU.
#[derive(Default)]
pub struct CpuByKind {
    before: Option<Vec<[u64; 4]>>,
}

/// Per CPU: [user+nice, system, irq, softirq] ticks.
fn per_cpu_ticks() -> Option<Vec<[u64; 4]>> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let cpus = text
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .filter_map(|l| {
            let f: Vec<u64> = l.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
            (f.len() >= 7).then(|| [f[0] + f[1], f[2], f[5], f[6]])
        })
        .collect::<Vec<_>>();
    (!cpus.is_empty()).then_some(cpus)
}

impl Probe for CpuByKind {
    type Sample = Vec<Metric>;
    fn open(&mut self) {
        self.before = per_cpu_ticks();
    }
    fn close(&mut self) -> Vec<Metric> {
        const NAMES: [&str; 4] = [
            "system_cpu_user_s",
            "system_cpu_system_s",
            "system_cpu_irq_s",
            "system_cpu_softirq_s",
        ];
        let tick = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .filter(|t| *t > 0)
            .map_or(0.01, |t| 1.0 / t as f64);
        let (Some(before), Some(after)) = (self.before.take(), per_cpu_ticks()) else {
            return NAMES
                .iter()
                .map(|n| Metric::unavailable(n, Role::System, "s", "cannot read /proc/stat"))
                .collect();
        };
        let mut out: Vec<Metric> = (0..4)
            .map(|k| {
                let ticks: u64 = after.iter().zip(&before).map(|(a, b)| a[k].saturating_sub(b[k])).sum();
                Metric::new(NAMES[k], Role::System, ticks as f64 * tick, "s", Source::Kernel)
            })
            .collect();
        let busiest_softirq = after
            .iter()
            .zip(&before)
            .map(|(a, b)| a[3].saturating_sub(b[3]))
            .max()
            .unwrap_or(0);
        out.push(Metric::new(
            "softirq_busiest_cpu_s",
            Role::System,
            busiest_softirq as f64 * tick,
            "s",
            Source::Kernel,
        ));
        out.push(Metric::new("proc_stat_tick_s", Role::System, tick, "s", Source::Kernel));
        out
    }
}

/// TCP_INFO of the run's connections at window end, from `role`'s sockets: smoothed RTT and
/// its variation (mean over connections), delivery rate (sum), retransmits (sum) and the
/// time the connections were busy, limited by the peer's receive window and by the send
/// buffer (summed; these count from the connection's start, warm-up included).
pub fn tcp_info_metrics(fds: &[std::os::fd::RawFd], role: Role) -> Vec<Metric> {
    let infos: Vec<_> = fds
        .iter()
        .filter_map(|fd| crate::sys::tcpinfo::tcp_info(*fd).ok())
        .collect();
    tcp_info_summary(&infos, role)
}

/// The TCP_INFO metrics of connections whose TCP_INFO was already read (each with the length
/// the kernel returned): means of rtt and rttvar, sums of the rest.
pub fn tcp_info_summary(infos: &[(crate::sys::tcpinfo::TcpInfo, usize)], role: Role) -> Vec<Metric> {
    use crate::sys::tcpinfo::WITH_LIMITED_TIMES;
    let names: [(&str, &str); 7] = [
        ("tcpi_rtt_us", "us"),
        ("tcpi_rttvar_us", "us"),
        ("tcpi_delivery_rate_gbps", "Gbit/s"),
        ("tcpi_total_retrans", "segments"),
        ("tcpi_busy_s", "s"),
        ("tcpi_rwnd_limited_s", "s"),
        ("tcpi_sndbuf_limited_s", "s"),
    ];
    if infos.is_empty() || infos.iter().any(|(_, len)| *len < WITH_LIMITED_TIMES) {
        let why = if infos.is_empty() {
            "TCP_INFO failed on every connection"
        } else {
            "this kernel's TCP_INFO lacks the delivery-rate and limited-time fields (Linux 4.10+)"
        };
        return names
            .iter()
            .map(|(n, u)| Metric::unavailable(n, role, u, why))
            .collect();
    }
    let n = infos.len() as f64;
    let sum = |f: &dyn Fn(&crate::sys::tcpinfo::TcpInfo) -> f64| infos.iter().map(|(i, _)| f(i)).sum::<f64>();
    let values = [
        sum(&|i| i.rtt as f64) / n,
        sum(&|i| i.rttvar as f64) / n,
        sum(&|i| i.delivery_rate as f64 * 8.0 / 1e9),
        sum(&|i| i.total_retrans as f64),
        sum(&|i| i.busy_time as f64 / 1e6),
        sum(&|i| i.rwnd_limited as f64 / 1e6),
        sum(&|i| i.sndbuf_limited as f64 / 1e6),
    ];
    names
        .iter()
        .zip(values)
        .map(|((name, unit), v)| Metric::new(name, role, v, unit, Source::Kernel))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn net_dev_sums_received_bytes_and_packets_of_devices_in_both_readings() {
        let header = "Inter-|   Receive  |  Transmit\n face |bytes packets errs\n";
        let before = parse_net_dev(&format!(
            "{header}    lo: 1000 4 0 0 0 0 0 0 9 9\nveth0: 370000 2 0 0 0 0 0 0 1 1\n gone: 900000 90 0 0 0 0 0 0 1 1\n"
        ));
        // `gone` was removed, `veth0` removed and made again (counters from zero), `new` appeared.
        let after = parse_net_dev(&format!(
            "{header}    lo: 3000 8 0 0 0 0 0 0 9 9\nveth0: 100 1 0 0 0 0 0 0 1 1\n  new: 5000 5 0 0 0 0 0 0 1 1\n"
        ));
        assert_eq!(before["veth0"], (370000, 2));
        assert_eq!(received_between(&before, &after), (2000, 4));
    }

    use super::*;

    #[test]
    fn snmp_pairs_parse() {
        let mut m = HashMap::new();
        parse_snmp(
            "Tcp: RtoAlgorithm OutSegs\nTcp: 1 42\nUdp: InDatagrams\nUdp: 3\n",
            &mut m,
        );
        assert_eq!(m["Tcp.OutSegs"], 42);
        assert_eq!(m["Udp.InDatagrams"], 3);
    }

    /// A datagram delivered and one to a port nobody listens on move their counters (they
    /// only grow, so other traffic cannot make this fail); every metric is the kernel's.
    #[test]
    fn the_udp_probe_counts_delivered_datagrams_and_closed_ports() {
        let mut probe = udp_counters(None);
        probe.open();
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let closed_addr = closed.local_addr().unwrap();
        drop(closed);
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        tx.send_to(b"y", closed_addr).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        rx.recv(&mut [0u8; 4]).unwrap();
        let metrics = probe.close();
        assert_eq!(metrics.len(), UDP_METRICS.len());
        let value = |name: &str| metrics.iter().find(|m| m.name == name).and_then(|m| m.value);
        assert!(value(names::UDP_IN_DATAGRAMS).unwrap() >= 1.0, "{metrics:?}");
        assert!(value(names::UDP_NO_PORTS).unwrap() >= 1.0, "{metrics:?}");
        assert!(metrics.iter().all(|m| m.source == Source::Kernel && m.value.is_some()));
    }

    #[test]
    fn probes_count_loopback_traffic_with_sources() {
        use crate::measure::window::Window;
        let mut system = SystemProbes::default();
        push_network_probes(&mut system, None);
        let window = Window::new();
        window.open(&mut system);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        std::io::Write::write_all(&mut c, &[1; 10000]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let metrics = window.close(&mut system);
        let get = |n: &str| metrics.iter().find(|m| m.name == n).unwrap();
        assert!(get("tcp_segments_out").value.unwrap() >= 2.0);
        for n in [
            "tcp_retransmits",
            "runqueue_wait_max_pct",
            "system_cpu_softirq_s",
            "proc_stat_tick_s",
        ] {
            assert_eq!(get(n).source, Source::Kernel, "{n}");
        }
        assert!(metrics.iter().any(|m| m.name == "cpu_pressure_some_s"));
    }
}
