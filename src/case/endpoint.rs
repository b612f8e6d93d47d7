//! Where the two ends of a network experiment live, as plain data: a case's field
//! (`ServersCase.topology`, the `topology` option of a `micro tcp` case; a stream, rr or
//! records case holds the same as its `Endpoint`), parsed from `--topology`, printed back,
//! stored as JSON. What builds it (namespaces, veth pairs, qdiscs) and checks this machine can
//! is `net::topology`, which works on these types.

use super::Endpoint;
use crate::sys::rtnetlink::LinkSize;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Where the two ends of a network experiment live.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Topology {
    /// Both ends in this process, over the loopback interface.
    #[default]
    Loopback,
    /// Both ends in this process, on the loopback of a fresh private network namespace (its
    /// `lo` given the size limits), over ::1 with `ipv6`.
    Netns {
        #[serde(flatten)]
        sizes: DeviceSizes,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        ipv6: bool,
    },
    /// The client here; the server in a fresh namespace behind a veth pair.
    Veth(Link),
    /// The client here; the server is already running at `addr` (`iopath net serve`), so this
    /// process starts no server.
    Remote { addr: String },
}

/// The veth link's settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Link {
    /// MTU of both ends (None: the kernel's default, 1500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Rate limit in bits per second, both directions (tbf).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bps: Option<u64>,
    /// `queue=`: how long a packet may wait in the shaper's queue, in microseconds (tbf's
    /// `latency`; with netem, a packet limit that holds as long at the rate). None: 50 ms.
    /// Needs a rate: an unshaped veth has no queue of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_us: Option<u64>,
    /// One-way delay in microseconds (netem).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_us: Option<u64>,
    /// Loss in parts per million (netem).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_ppm: Option<u32>,
    /// `peer=drop`: the server's end drops every UDP datagram at its ingress (a tc filter),
    /// so no datagram reaches a socket there: the transmit path with no local delivery, where
    /// the kernel need not copy a zero-copy send. TCP (the control channel) passes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub peer_drops_udp: bool,
    /// `ipv6`: both ends get IPv6 addresses (a ULA /64 of the pair's own, without duplicate
    /// address detection, so usable at once) and the client connects over IPv6 (BIG TCP then
    /// reads gso_max_size/gro_max_size, not the IPv4 variants).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ipv6: bool,
    /// Size limits of both ends (BIG TCP).
    #[serde(flatten)]
    pub sizes: DeviceSizes,
}

/// What `veth:peer=drop` means, for refusals and the run's environment record.
pub const PEER_DROPS_UDP: &str = "the server's end drops every UDP datagram at its ingress";

/// The packet-size limits a namespace topology sets on the devices it builds, both ends alike
/// (`veth:gso_max_size=185000,gro_max_size=185000`: BIG TCP): None leaves the kernel's default.
/// Set over rtnetlink when the topology is built (`net::settings`, `Setting::MaxSize`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct DeviceSizes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gso_max_size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gro_max_size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gso_ipv4_max_size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gro_ipv4_max_size: Option<u64>,
}

impl DeviceSizes {
    /// The limits set, in the order `ip -d link` shows them.
    pub fn set(&self) -> Vec<(LinkSize, u64)> {
        [
            (LinkSize::GsoMax, self.gso_max_size),
            (LinkSize::GroMax, self.gro_max_size),
            (LinkSize::GsoIpv4Max, self.gso_ipv4_max_size),
            (LinkSize::GroIpv4Max, self.gro_ipv4_max_size),
        ]
        .into_iter()
        .filter_map(|(l, v)| v.map(|v| (l, v)))
        .collect()
    }

    /// The value of one limit (None: the kernel's default).
    pub fn get(&self, limit: LinkSize) -> Option<u64> {
        self.set().into_iter().find(|(l, _)| *l == limit).map(|(_, v)| v)
    }

    /// Take `key=value` if `key` is a size limit (None: it is not one).
    fn take(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        let (limit, bytes) = match size_limit_of(key, value)? {
            Ok(size) => size,
            Err(e) => return Some(Err(e)),
        };
        *match limit {
            LinkSize::GsoMax => &mut self.gso_max_size,
            LinkSize::GroMax => &mut self.gro_max_size,
            LinkSize::GsoIpv4Max => &mut self.gso_ipv4_max_size,
            _ => &mut self.gro_ipv4_max_size,
        } = Some(bytes);
        Some(Ok(()))
    }

    fn words(&self) -> Vec<String> {
        self.set()
            .into_iter()
            .map(|(l, v)| format!("{}={v}", l.name()))
            .collect()
    }
}

/// A size limit's value from its words: `gso_max_size` and `185000` or `64K` (None: `name` is
/// not a limit a topology or `--set` sets; tso_max_size is the device's own). Sizes up to
/// 16 MiB parse, so that one above what the device takes is refused by the check that reads
/// the device (`net::settings::check_size_fits`).
pub fn size_limit_of(name: &str, value: &str) -> Option<Result<(LinkSize, u64), String>> {
    let limit = LinkSize::named(name).filter(|l| *l != LinkSize::TsoMax)?;
    Some(match crate::format::parse_size(value) {
        Ok(b) if (1..=16 << 20).contains(&b) => Ok((limit, b)),
        _ => Err(format!(
            "{name} takes a size in bytes, e.g. 185000 or 64K, not '{value}'"
        )),
    })
}

/// The option of `netns` and `veth` that gives the namespaces' ends IPv6 addresses.
const IPV6: &str = "ipv6";

/// The size limits a topology takes, for its refusals.
const SIZE_OPTIONS: &str = "gso_max_size, gro_max_size, gso_ipv4_max_size, gro_ipv4_max_size";

/// Why a delay or loss cannot be had on a kernel without netem.
pub const NO_NETEM: &str = "unavailable: the kernel has no netem qdisc (CONFIG_NET_SCH_NETEM)";

impl From<&Endpoint> for Topology {
    fn from(endpoint: &Endpoint) -> Topology {
        match endpoint {
            Endpoint::Loopback { .. } => Topology::Loopback,
            Endpoint::Netns { sizes, ipv6, .. } => Topology::Netns {
                sizes: sizes.clone(),
                ipv6: *ipv6,
            },
            Endpoint::Veth { link, .. } => Topology::Veth(link.clone()),
            Endpoint::Remote { addr } => Topology::Remote { addr: addr.clone() },
        }
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Topology::Loopback => f.write_str("loopback"),
            Topology::Netns { sizes, ipv6 } => {
                f.write_str("netns")?;
                let mut opts = Vec::new();
                if *ipv6 {
                    opts.push(IPV6.to_string());
                }
                opts.extend(sizes.words());
                match opts {
                    w if w.is_empty() => Ok(()),
                    w => write!(f, ":{}", w.join(",")),
                }
            }
            Topology::Veth(link) => {
                f.write_str("veth")?;
                let mut opts = Vec::new();
                if let Some(m) = link.mtu {
                    opts.push(format!("mtu={m}"));
                }
                if let Some(r) = link.rate_bps {
                    opts.push(format!("rate={}", format_rate(r)));
                }
                if let Some(q) = link.queue_us {
                    opts.push(format!("queue={}", format_us(q)));
                }
                if let Some(d) = link.delay_us {
                    opts.push(format!("delay={}", format_us(d)));
                }
                if let Some(l) = link.loss_ppm {
                    opts.push(format!("loss={}%", l as f64 / 10_000.0));
                }
                if link.peer_drops_udp {
                    opts.push("peer=drop".into());
                }
                if link.ipv6 {
                    opts.push(IPV6.into());
                }
                opts.extend(link.sizes.words());
                if !opts.is_empty() {
                    write!(f, ":{}", opts.join(","))?;
                }
                Ok(())
            }
            Topology::Remote { addr } => write!(f, "remote {addr}"),
        }
    }
}

/// Microseconds as `delay=` and `queue=` take them: whole milliseconds as ms.
fn format_us(us: u64) -> String {
    match us % 1000 {
        0 => format!("{}ms", us / 1000),
        _ => format!("{us}us"),
    }
}

fn format_rate(bps: u64) -> String {
    for (unit, div) in [("gbit", 1_000_000_000), ("mbit", 1_000_000), ("kbit", 1_000)] {
        if bps >= div && bps % div == 0 {
            return format!("{}{unit}", bps / div);
        }
    }
    format!("{bps}bit")
}

/// `100mbit`, `1gbit`, `500kbit`, `64000bit` or a bare number of bits per second.
fn parse_rate(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let (num, mult) = [
        ("gbit", 1_000_000_000u64),
        ("mbit", 1_000_000),
        ("kbit", 1_000),
        ("bit", 1),
    ]
    .into_iter()
    .find_map(|(u, m)| t.strip_suffix(u).map(|n| (n.to_string(), m)))
    .unwrap_or((t.clone(), 1));
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("rate '{text}' is not a rate (e.g. 100mbit, 1gbit)"))?;
    let bps = (v * mult as f64) as u64;
    if !(8_000..=400_000_000_000).contains(&bps) {
        return Err(format!("rate '{text}' is out of range (8kbit to 400gbit)"));
    }
    Ok(bps)
}

/// A veth option's duration (`delay=1ms`, `queue=200ms`) in microseconds, within `range`
/// (its words say it: `range_words`).
fn parse_option_us(
    option: &str,
    text: &str,
    range: std::ops::RangeInclusive<f64>,
    range_words: &str,
) -> Result<u64, String> {
    let t = text.trim();
    let (num, mult) = [("ms", 1000.0), ("us", 1.0), ("s", 1_000_000.0)]
        .into_iter()
        .find_map(|(u, m)| t.strip_suffix(u).map(|n| (n, m)))
        .ok_or_else(|| format!("{option} '{text}' needs a unit (e.g. 1ms, 500us)"))?;
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{option} '{text}' is not a duration"))?;
    let us = v * mult;
    if !us.is_finite() || !range.contains(&us) {
        return Err(format!("{option} '{text}' is out of range {range_words}"));
    }
    Ok(us as u64)
}

/// netem takes up to a few seconds sensibly; a delay longer than a minute is a typo.
fn parse_delay_us(text: &str) -> Result<u64, String> {
    parse_option_us("delay", text, 0.0..=60_000_000.0, "0..60s")
}

/// A queue shorter than a frame's time on the slowest link, or longer than ten seconds,
/// measures nothing a real link has.
fn parse_queue_us(text: &str) -> Result<u64, String> {
    parse_option_us("queue", text, 100.0..=10_000_000.0, "100us..10s")
}

fn parse_loss_ppm(text: &str) -> Result<u32, String> {
    let v: f64 = text
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("loss '{text}' is not a percentage (e.g. 0.1%)"))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(format!("loss '{text}' is not between 0% and 100%"));
    }
    Ok((v * 10_000.0) as u32)
}

/// Whether `addr` is HOST:PORT with a host and a port from 1 to 65535.
pub fn is_host_port(addr: &str) -> bool {
    addr.rsplit_once(':')
        .filter(|(host, _)| !host.is_empty())
        .and_then(|(_, port)| port.parse::<u16>().ok())
        .is_some_and(|port| port > 0)
}

impl std::str::FromStr for Topology {
    type Err = String;
    /// `loopback`, `netns`, `veth[:mtu=N][,rate=R][,queue=T][,delay=D][,loss=P][,peer=drop]`,
    /// `remote:HOST:PORT`.
    fn from_str(text: &str) -> Result<Topology, String> {
        let t = text.trim();
        if let Some(addr) = t
            .strip_prefix("remote")
            .map(|r| r.trim_start_matches([' ', ':', '=']).trim())
        {
            if !is_host_port(addr) {
                return Err(format!(
                    "remote '{addr}' is not HOST:PORT with a port from 1 to 65535 (e.g. remote:10.0.0.2:5201)"
                ));
            }
            return Ok(Topology::Remote { addr: addr.to_string() });
        }
        match t {
            "loopback" | "lo" => return Ok(Topology::Loopback),
            "netns" => {
                return Ok(Topology::Netns {
                    sizes: DeviceSizes::default(),
                    ipv6: false,
                })
            }
            _ => {}
        }
        if let Some((_, opts)) = t.split_once(':').filter(|(kind, _)| ["loopback", "lo"].contains(kind)) {
            return Err(format!(
                "loopback takes no options ('{opts}'): its lo is this host's, which iopath never changes; these options need a namespace of iopath's own: --topology netns:{opts} or veth:{opts}"
            ));
        }
        if let Some(opts) = t.strip_prefix("netns:") {
            let mut sizes = DeviceSizes::default();
            let mut ipv6 = false;
            for opt in opts.split(',').filter(|o| !o.is_empty()) {
                if opt == IPV6 {
                    ipv6 = true;
                    continue;
                }
                let (key, value) = opt
                    .split_once('=')
                    .ok_or_else(|| format!("netns option '{opt}' is not KEY=VALUE or ipv6"))?;
                sizes
                    .take(key, value)
                    .unwrap_or_else(|| Err(format!("unknown netns option '{key}' (accepted: ipv6, {SIZE_OPTIONS})")))?;
            }
            return Ok(Topology::Netns { sizes, ipv6 });
        }
        let Some(rest) = t.strip_prefix("veth") else {
            return Err(format!(
                "unknown topology '{t}' (accepted: loopback, netns, veth[:mtu=N][,rate=R][,queue=T][,peer=drop], remote:HOST:PORT)"
            ));
        };
        let mut link = Link::default();
        let opts = match rest {
            "" => "",
            r => r
                .strip_prefix(':')
                .ok_or_else(|| format!("unknown topology '{t}' (veth options follow a colon: veth:mtu=9000)"))?,
        };
        for opt in opts.split(',').filter(|o| !o.is_empty()) {
            if opt == IPV6 {
                link.ipv6 = true;
                continue;
            }
            let (key, value) = opt
                .split_once('=')
                .ok_or_else(|| format!("veth option '{opt}' is not KEY=VALUE or ipv6"))?;
            match key {
                "mtu" => {
                    link.mtu = Some(crate::format::whole_in("mtu", value, 68, 65535)? as u32);
                }
                "rate" => link.rate_bps = Some(parse_rate(value)?),
                "queue" => link.queue_us = Some(parse_queue_us(value)?),
                "delay" => link.delay_us = Some(parse_delay_us(value)?),
                "loss" => link.loss_ppm = Some(parse_loss_ppm(value)?),
                "peer" => {
                    if value != "drop" {
                        return Err(format!(
                            "veth option peer={value}: accepted peer=drop (the server's end drops every UDP datagram)"
                        ));
                    }
                    link.peer_drops_udp = true;
                }
                _ => link.sizes.take(key, value).unwrap_or_else(|| {
                    Err(format!(
                        "unknown veth option '{key}' (accepted: mtu, rate, queue, delay, loss, peer, ipv6, {SIZE_OPTIONS})"
                    ))
                })?,
            }
        }
        if link.queue_us.is_some() && link.rate_bps.is_none() {
            return Err(format!(
                "'{t}': queue= is the depth of the rate shaper's queue and needs a rate (e.g. veth:rate=100mbit,queue=200ms)"
            ));
        }
        if link.queue_us.is_some() && link.ipv6 {
            return Err(format!("'{t}': queue= (a router between the ends) is IPv4 only"));
        }
        Ok(Topology::Veth(link))
    }
}

impl Topology {
    pub fn is_loopback(&self) -> bool {
        *self == Topology::Loopback
    }

    /// The interface the traffic crosses on this machine, for the run's environment record.
    pub fn interface(&self) -> String {
        match self {
            Topology::Loopback => "lo".into(),
            Topology::Netns { ipv6: false, .. } => "lo (private network namespace)".into(),
            Topology::Netns { ipv6: true, .. } => "lo (private network namespace; IPv6, ::1)".into(),
            Topology::Veth(link) => {
                let mut notes = vec![format!("mtu {}", link.mtu.unwrap_or(1500))];
                if link.ipv6 {
                    notes.push("IPv6".into());
                }
                if link.peer_drops_udp {
                    notes.push(PEER_DROPS_UDP.into());
                }
                if link.queue_us.is_some() {
                    notes.push("through a router whose egress queues shape it".into());
                }
                format!("veth ({})", notes.join("; "))
            }
            Topology::Remote { .. } => "unknown (remote peer)".into(),
        }
    }

    /// Whether the ends talk over IPv6 (`netns:ipv6`, `veth:ipv6`).
    pub fn ipv6(&self) -> bool {
        matches!(
            self,
            Topology::Netns { ipv6: true, .. } | Topology::Veth(Link { ipv6: true, .. })
        )
    }

    /// Whether the server's end drops every UDP datagram (`veth:peer=drop`).
    pub fn peer_drops_udp(&self) -> bool {
        matches!(self, Topology::Veth(link) if link.peer_drops_udp)
    }

    /// Refuse `peer=drop` to a workload whose data needs an answer or is not UDP: only
    /// datagrams sent one way (`net udp-stream`) measure anything across it. One line, exit 2.
    pub fn check_answers(&self) -> Result<(), String> {
        if self.peer_drops_udp() {
            return Err(format!(
                "--topology {self}: {PEER_DROPS_UDP}, so only net udp-stream (datagrams sent one way) measures across it"
            ));
        }
        Ok(())
    }

    /// The size limits it sets on the devices it builds (none: loopback, remote).
    pub fn device_sizes(&self) -> DeviceSizes {
        match self {
            Topology::Netns { sizes, .. } => sizes.clone(),
            Topology::Veth(link) => link.sizes.clone(),
            Topology::Loopback | Topology::Remote { .. } => DeviceSizes::default(),
        }
    }

    /// Whether this process starts the server (false: it is a running remote peer).
    pub fn starts_server(&self) -> bool {
        !matches!(self, Topology::Remote { .. })
    }
}

/// The host end of the `n`th veth pair process `pid` builds.
pub fn host_interface(pid: u32, n: u32) -> String {
    format!("iop{pid}c{}", n % 1000)
}

/// Whether `name` is the host end of a veth pair some iopath run built (`iop<pid>c<n>`): it
/// lives only while that run does, so a machine's description leaves it out (a fleet host's
/// description would otherwise change whenever any iopath on it ran a veth topology).
pub fn is_run_interface(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("iop") else {
        return false;
    };
    let Some((pid, n)) = rest.split_once('c') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(pid) && digits(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topologies_parse_and_print_back() {
        for text in [
            "loopback",
            "netns",
            "veth",
            "veth:mtu=4148",
            "veth:mtu=9000,rate=100mbit",
            "veth:rate=100mbit,queue=200ms",
            "veth:rate=1gbit,queue=500us",
            "veth:delay=1ms",
            "veth:peer=drop",
            "veth:mtu=9000,peer=drop",
            "veth:ipv6",
            "veth:peer=drop,ipv6,gso_max_size=185000",
            "netns:ipv6",
            "netns:ipv6,gso_max_size=185000",
            "veth:mtu=9000,gso_max_size=185000,gro_ipv4_max_size=185000",
            "netns:gso_max_size=185000,gro_max_size=65536",
            "remote 10.0.0.2:5201",
        ] {
            let t: Topology = text.parse().unwrap();
            assert_eq!(t.to_string(), text);
        }
        assert_eq!(
            "remote:h:1".parse::<Topology>().unwrap(),
            Topology::Remote { addr: "h:1".into() }
        );
        let t: Topology = "veth:delay=1ms,loss=0.5%".parse().unwrap();
        assert_eq!(
            t,
            Topology::Veth(Link {
                delay_us: Some(1000),
                loss_ppm: Some(5000),
                ..Link::default()
            })
        );
        for bad in [
            "vet",
            "veth:mtu=10",
            "veth:mtu",
            "veth:color=red",
            "veth:rate=fast",
            "veth:peer=down",
            "remote nowhere",
            "vethx",
            "loopback:gso_max_size=185000",
            "loopback:ipv6",
            "lo:ipv6",
            "netns:ipv6=1",
            "veth:ipv4",
            "netns:mtu=9000",
            "netns:gso_max_size=big",
            "veth:tso_max_size=185000",
            "veth:queue=200ms",
            "veth:rate=100mbit,queue=10",
            "veth:rate=100mbit,queue=20s",
            "veth:rate=100mbit,queue=50us",
            "veth:rate=100mbit,queue=5ms,ipv6",
        ] {
            assert!(bad.parse::<Topology>().is_err(), "{bad}");
        }
    }

    /// The case layer is below `net/` (docs/architecture.md, "Floors"): none of its files
    /// imports from it, so the network code can build on the cases and never the other way.
    #[test]
    fn the_case_layer_imports_nothing_from_net() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/case");
        // Spelled in two pieces so this file does not hold what it looks for.
        let import = concat!("crate", "::net");
        let mut read = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                assert!(!text.contains(import), "{} imports from net/", path.display());
                read += 1;
            }
        }
        assert!(read > 5, "read only {read} files of {}", dir.display());
    }
}
