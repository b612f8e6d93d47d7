//! Where the two ends of a network experiment live: which interface the traffic crosses,
//! where the server listens and the client connects, and where each side's code runs.
//!
//! [`Topology`] is the plan: plain data of the case layer (`case/endpoint.rs`: a case's
//! field, parsed from `--topology`), re-exported here. [`Topology::check`] asks whether this
//! machine can build it; [`Topology::establish`] builds it and returns a [`Net`], which owns
//! what was built and is where code runs:
//! sockets and the threads using them must be created inside a namespace (setns() is per
//! thread), so the server side's and the client side's code run through
//! [`Net::on_server_side`] and [`Net::on_client_side`].
//!
//! Namespaces are anonymous, held by a file descriptor; a veth pair has one end inside one.
//! When the process ends in any way (also kill -9) the descriptor closes, the kernel
//! destroys the namespace and with it the veth pair (both ends) and its qdiscs: nothing is
//! left behind and nothing needs cleaning at the next start.

use super::settings::{self, Setting};
pub use crate::case::{host_interface, is_run_interface, DeviceSizes, Link, Topology, NO_NETEM, PEER_DROPS_UDP};
use crate::observation::Role;
use crate::sys::netns::{self, NetNs};
use crate::sys::rtnetlink::{self, LinkSize, QdiscReader};
use anyhow::{anyhow, bail, Context};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{Scope, ScopedJoinHandle};

/// The address the loopback server listens on and the client connects to.
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// The same over IPv6 (`netns:ipv6`).
const LOOPBACK_V6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

impl Topology {
    /// Whether this machine and this process can build the topology: netem for delay or
    /// loss, root for namespaces. The error is one line for the user (exit 2).
    pub fn check(&self) -> Result<(), String> {
        let needs_ns = matches!(self, Topology::Netns { .. } | Topology::Veth(_));
        if let Topology::Veth(link) = self {
            if (link.delay_us.is_some() || link.loss_ppm.is_some())
                && netns::kernel_config_has("CONFIG_NET_SCH_NETEM") == Some(false)
            {
                return Err(format!("--topology {self}: {NO_NETEM}"));
            }
            if link.peer_drops_udp {
                if let Some(missing) = PEER_DROP_NEEDS
                    .iter()
                    .find(|option| netns::kernel_config_has(option) == Some(false))
                {
                    return Err(format!(
                        "--topology {self}: unavailable: the kernel lacks {missing}, which dropping at the server's ingress needs"
                    ));
                }
            }
        }
        if needs_ns && !netns::can_build_namespaces() {
            return Err(format!(
                "--topology {self} needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) to create a network namespace: run as root, or use --topology loopback"
            ));
        }
        for setting in self.own_settings() {
            self.check_device_setting(&setting)
                .map_err(|e| format!("--topology {self}: {e}"))?;
        }
        Ok(())
    }

    /// Its size options as the settings `establish` applies: each on both ends' devices.
    fn own_settings(&self) -> Vec<Setting> {
        self.device_sizes()
            .set()
            .into_iter()
            .flat_map(|(limit, bytes)| {
                settings::TOPOLOGY_DEVICES.map(|device| Setting::MaxSize {
                    device: device.into(),
                    limit: limit.name().into(),
                    bytes,
                })
            })
            .collect()
    }

    /// Whether a device setting fits the devices this topology builds (a gso size within their
    /// tso_max_size): the check of its own size options and of an A/B run's variant B. One
    /// line for the user when not.
    pub fn check_device_setting(&self, setting: &Setting) -> Result<(), String> {
        let Setting::MaxSize { limit, bytes, .. } = setting else {
            return Ok(());
        };
        let Some(limit) = LinkSize::named(limit) else {
            return Ok(());
        };
        let (device, tso_max) = built_device_tso_max(matches!(self, Topology::Veth(_)))?;
        settings::check_size_fits(limit, *bytes, tso_max, device)
    }

    /// Build the topology: namespaces, links, addresses, qdiscs. What is built lives as long
    /// as the returned [`Net`] (and at most as long as this process).
    pub fn establish(&self) -> anyhow::Result<Net> {
        self.check().map_err(|e| anyhow!(e))?;
        match self {
            Topology::Loopback | Topology::Remote { .. } => Ok(Net {
                topology: self.clone(),
                ns: None,
                server_ip: LOOPBACK,
                host_if: None,
                router: None,
            }),
            Topology::Netns { ipv6, .. } => {
                let ns = NetNs::new().context("could not create a network namespace")?;
                let net = Net {
                    topology: self.clone(),
                    ns: Some(Arc::new(ns)),
                    // The kernel gives a namespace's lo ::1 when it comes up (IPv6 enabled).
                    server_ip: if *ipv6 { LOOPBACK_V6 } else { LOOPBACK },
                    host_if: None,
                    router: None,
                };
                net.apply_scoped()?;
                Ok(net)
            }
            Topology::Veth(link) => {
                let net = build_veth(self, link)?;
                net.apply_scoped()?;
                Ok(net)
            }
        }
    }
}

/// The kind of device a namespace topology builds (a veth end, else a fresh namespace's lo)
/// and its tso_max_size, the bound of its gso sizes: read once per process from a throwaway
/// namespace (the devices of a run do not exist yet when its plan is checked, and this host's
/// own are never touched).
fn built_device_tso_max(veth: bool) -> Result<(&'static str, u32), String> {
    static READ: [OnceLock<Result<u32, String>>; 2] = [OnceLock::new(), OnceLock::new()];
    let device = if veth { "a veth device" } else { "a namespace's lo" };
    let read = READ[veth as usize].get_or_init(|| {
        let ns = NetNs::new().map_err(|e| format!("cannot create a namespace to read tso_max_size: {e}"))?;
        ns.run(|| -> Result<u32, String> {
            let name = if veth {
                iproute("ip", &words("link add iopprobe0 type veth peer name iopprobe1")).map_err(|e| e.to_string())?;
                "iopprobe0"
            } else {
                "lo"
            };
            rtnetlink::link_size(name, LinkSize::TsoMax)
                .map_err(|e| format!("cannot read the tso_max_size of {device}: {e}"))
        })
        .map_err(|e| e.to_string())?
    });
    read.clone().map(|v| (device, v))
}

/// Veth pairs made by this process so far (part of the host end's name and its subnet).
static VETH_COUNT: AtomicU32 = AtomicU32::new(0);

/// The name of the server's end inside its namespace.
const INNER_IF: &str = "iopath0";

/// Run `ip` or `tc` in the calling thread's namespace; its failure is an error that says
/// which command failed and what it printed.
pub(crate) fn iproute(program: &str, args: &[String]) -> anyhow::Result<()> {
    iproute_output(program, args).map(drop)
}

/// [`iproute`], returning what the command printed on stdout.
pub(crate) fn iproute_output(program: &str, args: &[String]) -> anyhow::Result<String> {
    let out = Command::new(program).args(args).output().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            anyhow!(
                "`{program}` (iproute2) is needed to build the topology and is not installed: apt-get install iproute2"
            )
        } else {
            anyhow!("could not run {program}: {e}")
        }
    })?;
    if !out.status.success() {
        bail!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// The qdisc arguments that shape one end of the link (None: leave the kernel's default).
fn shaping(link: &Link, dev: &str) -> Option<Vec<String>> {
    let mut args = words(&format!("qdisc add dev {dev} root"));
    if link.delay_us.is_some() || link.loss_ppm.is_some() {
        args.push("netem".into());
        if let Some(d) = link.delay_us {
            args.extend(words(&format!("delay {d}us")));
        }
        if let Some(l) = link.loss_ppm {
            args.extend(words(&format!("loss {}%", l as f64 / 10_000.0)));
        }
        if let Some(r) = link.rate_bps {
            args.extend(words(&format!("rate {r}bit")));
            if let Some(q) = link.queue_us {
                // netem's queue is counted in packets: as many full frames as the rate sends
                // in the queue's time.
                let frames = (r as u128 * q as u128 / 8_000_000 / frame_bytes(link) as u128).max(1);
                args.extend(words(&format!("limit {frames}")));
            }
        }
        return Some(args);
    }
    let rate = link.rate_bps?;
    // A bucket of 4 ms at the rate (one tick at HZ=250), at least two full frames.
    let burst = (rate / 8 / 250).max(2 * frame_bytes(link)).max(3000);
    let queue_us = link.queue_us.unwrap_or(DEFAULT_QUEUE_US);
    args.extend(words(&format!("tbf rate {rate}bit burst {burst} latency {queue_us}us")));
    Some(args)
}

/// How long a packet may wait in a shaped veth's queue when `queue=` does not say.
pub const DEFAULT_QUEUE_US: u64 = 50_000;

/// A full frame on the link: its MTU and the Ethernet header.
fn frame_bytes(link: &Link) -> u64 {
    link.mtu.unwrap_or(1500) as u64 + 14
}

/// What `peer=drop`'s filter needs of the kernel: an ingress qdisc, and the bpf classifier
/// whose program returns the verdict itself (direct action), which needs no act_gact.
const PEER_DROP_NEEDS: [&str; 3] = ["CONFIG_NET_SCH_INGRESS", "CONFIG_NET_CLS_BPF", "CONFIG_NET_CLS_ACT"];

/// The classic BPF program of `peer=drop`, in tc's `bytecode` notation: a frame whose IPv4
/// protocol or IPv6 next header is UDP gets TC_ACT_SHOT (2), anything else TC_ACT_OK (0).
/// cls_bpf runs it with the Ethernet header in front at ingress too, so the EtherType is at
/// 12, the IPv4 protocol at 14 + 9 and the IPv6 next header at 14 + 6 (iopath's datagrams
/// carry no extension header). The drop happens in `sch_handle_ingress`, before
/// `__netif_receive_skb_core` delivers to a protocol (where `skb_orphan_frags_rx` copies the
/// pages of a zero-copy send): every datagram crosses the pair, nothing copies it.
///
/// ```text
/// 0 ldh [12]          4 ja 6            8 ret 0
/// 1 jeq 0x800 5 2     5 ldb [23]
/// 2 jeq 0x86dd 3 8    6 jeq 17 7 8
/// 3 ldb [20]          7 ret 2
/// ```
const DROP_UDP_CBPF: &str =
    "9,40 0 0 12,21 3 0 2048,21 0 5 34525,48 0 0 20,5 0 0 1,48 0 0 23,21 0 1 17,6 0 0 2,6 0 0 0";

/// The tc commands that make `dev` drop every UDP datagram it receives.
fn drop_udp_at_ingress(dev: &str) -> [Vec<String>; 2] {
    let mut filter = words(&format!("filter add dev {dev} ingress bpf da bytecode"));
    filter.push(DROP_UDP_CBPF.to_string());
    [words(&format!("qdisc add dev {dev} ingress")), filter]
}

fn build_veth(topology: &Topology, link: &Link) -> anyhow::Result<Net> {
    let ns = NetNs::new().context("could not create a network namespace")?;
    let n = VETH_COUNT.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    let host_if = host_interface(pid, n);
    // A /30 of 198.18.0.0/15 (reserved for benchmarking, RFC 2544) per pair.
    let index = (pid as u64 * 64 + n as u64) % (1 << 15);
    let base = u32::from(Ipv4Addr::new(198, 18, 0, 0)) + (index as u32) * 4;
    let (host_ip, server_ip) = if link.ipv6 {
        // A /64 of the ULA prefix fd69:6f70:6174::/48 ("iopath") per pair, the same index.
        let prefix = [0xfd69, 0x6f70, 0x6174, index as u16];
        let at = |last: u16| IpAddr::V6(Ipv6Addr::new(prefix[0], prefix[1], prefix[2], prefix[3], 0, 0, 0, last));
        (at(1), at(2))
    } else {
        (
            IpAddr::V4(Ipv4Addr::from(base + 1)),
            IpAddr::V4(Ipv4Addr::from(base + 2)),
        )
    };
    // IPv6 without duplicate address detection: the address is usable at once (a fresh pair
    // has no one else on it).
    let (prefix_len, nodad) = if link.ipv6 { (64, " nodad") } else { (30, "") };
    let mtu = link.mtu.map(|m| format!(" mtu {m}")).unwrap_or_default();
    if link.queue_us.is_some() {
        return build_routed(topology, link, ns, (&host_if, &mtu), index);
    }
    // The peer is created directly inside the namespace: if this process dies at any point
    // from here on, the namespace goes and takes both ends with it.
    iproute(
        "ip",
        &words(&format!(
            "link add {host_if}{mtu} type veth peer name {INNER_IF}{mtu} netns {}",
            ns.path()
        )),
    )?;
    iproute(
        "ip",
        &words(&format!("addr add {host_ip}/{prefix_len} dev {host_if}{nodad}")),
    )?;
    iproute("ip", &words(&format!("link set {host_if} up")))?;
    if let Some(args) = shaping(link, &host_if) {
        iproute("tc", &args)?;
    }
    ns.run(|| -> anyhow::Result<()> {
        iproute(
            "ip",
            &words(&format!("addr add {server_ip}/{prefix_len} dev {INNER_IF}{nodad}")),
        )?;
        iproute("ip", &words(&format!("link set {INNER_IF} up")))?;
        if let Some(args) = shaping(link, INNER_IF) {
            iproute("tc", &args)?;
        }
        set_up_peer_drop(link)
    })??;
    Ok(Net {
        topology: topology.clone(),
        ns: Some(Arc::new(ns)),
        server_ip,
        host_if: Some(host_if),
        router: None,
    })
}

/// `queue=`: the client's end, a router, the server's end, as two pairs (`ROUTER_CLIENT_IF`).
/// `(host_if, mtu)`: the client's end and the ` mtu N` its caller gives every device.
fn build_routed(
    topology: &Topology,
    link: &Link,
    ns: NetNs,
    (host_if, mtu): (&str, &str),
    index: u64,
) -> anyhow::Result<Net> {
    // Between the ends, a router: a /29 of the same range per pair, the server's /30 and
    // the client's.
    let router = NetNs::new().context("could not create the router's network namespace")?;
    let block = u32::from(Ipv4Addr::new(198, 18, 0, 0)) + ((index as u32) % (1 << 14)) * 8;
    let [router_server_ip, server_ip, client_ip, router_client_ip] =
        [1, 2, 5, 6].map(|last| Ipv4Addr::from(block + last));
    iproute(
        "ip",
        &words(&format!(
            "link add {host_if}{mtu} type veth peer name {ROUTER_CLIENT_IF}{mtu} netns {}",
            router.path()
        )),
    )?;
    iproute("ip", &words(&format!("addr add {client_ip}/30 dev {host_if}")))?;
    iproute("ip", &words(&format!("link set {host_if} up")))?;
    iproute(
        "ip",
        &words(&format!(
            "route add {server_ip}/32 via {router_client_ip} dev {host_if}"
        )),
    )?;
    router.run(|| -> anyhow::Result<()> {
        std::fs::write("/proc/sys/net/ipv4/ip_forward", "1").context("cannot turn on forwarding in the router")?;
        iproute(
            "ip",
            &words(&format!(
                "link add {ROUTER_SERVER_IF}{mtu} type veth peer name {INNER_IF}{mtu} netns {}",
                ns.path()
            )),
        )?;
        iproute(
            "ip",
            &words(&format!("addr add {router_client_ip}/30 dev {ROUTER_CLIENT_IF}")),
        )?;
        iproute(
            "ip",
            &words(&format!("addr add {router_server_ip}/30 dev {ROUTER_SERVER_IF}")),
        )?;
        for dev in [ROUTER_CLIENT_IF, ROUTER_SERVER_IF] {
            iproute("ip", &words(&format!("link set {dev} up")))?;
            if let Some(args) = shaping(link, dev) {
                iproute("tc", &args)?;
            }
        }
        Ok(())
    })??;
    ns.run(|| -> anyhow::Result<()> {
        iproute("ip", &words(&format!("addr add {server_ip}/30 dev {INNER_IF}")))?;
        iproute("ip", &words(&format!("link set {INNER_IF} up")))?;
        iproute(
            "ip",
            &words(&format!("route add default via {router_server_ip} dev {INNER_IF}")),
        )?;
        set_up_peer_drop(link)
    })??;
    Ok(Net {
        topology: topology.clone(),
        ns: Some(Arc::new(ns)),
        server_ip: IpAddr::V4(server_ip),
        host_if: Some(host_if.to_string()),
        router: Some(router),
    })
}

/// `peer=drop`: the server's end (in the calling thread's namespace) drops UDP at ingress.
fn set_up_peer_drop(link: &Link) -> anyhow::Result<()> {
    if link.peer_drops_udp {
        for args in drop_udp_at_ingress(INNER_IF) {
            iproute("tc", &args)?;
        }
    }
    Ok(())
}

/// `queue=`'s router: its end facing the client, and the one facing the server. A queue's
/// depth only means something where a queue can fill: at the sender's own device, TCP small
/// queues hold each flow to about two packets in the qdisc whatever its depth, so with a
/// queue asked for, the shapers are the egress queues of a router one hop away, where
/// forwarded packets are nobody's to hold back — as on a real path.
const ROUTER_CLIENT_IF: &str = "iopathr0";
const ROUTER_SERVER_IF: &str = "iopathr1";

/// A built topology: where the server listens, and where each side's code runs. Dropping it
/// (or the process ending) destroys its namespace and links.
#[derive(Debug)]
pub struct Net {
    topology: Topology,
    /// The namespace the server lives in (netns: both ends).
    ns: Option<Arc<NetNs>>,
    server_ip: IpAddr,
    /// The host end of a veth pair.
    host_if: Option<String>,
    /// `queue=`: the router between the ends, whose egress queues shape the link.
    router: Option<NetNs>,
}

impl Net {
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Apply the topology's own size limits (both ends) and an A/B run's variant-B settings
    /// (`net::settings::scoped`, empty otherwise) to what was just built: a sysctl inside the
    /// server's namespace, a device setting on the server's end (`server`: the veth end
    /// inside, or netns's lo) or the client's (`client`: the veth end outside, or netns's lo).
    /// They go with the namespace and the pair.
    fn apply_scoped(&self) -> anyhow::Result<()> {
        for setting in self.topology.own_settings().into_iter().chain(settings::scoped()) {
            let (server_side, device) = match setting.device() {
                None => (true, None),
                Some("server") => (true, Some(self.host_if.as_ref().map_or("lo", |_| INNER_IF))),
                Some("client") => (false, Some(self.host_if.as_deref().unwrap_or("lo"))),
                Some(other) => bail!("{setting}: a topology's device is `server` or `client`, not {other}"),
            };
            let real = device.map_or_else(|| setting.clone(), |d| setting.on_device(d));
            let applied = if server_side {
                self.on_server_side(|| real.apply())
            } else {
                self.on_client_side(|| real.apply())
            };
            applied.with_context(|| format!("variant B's {setting} in the topology"))?;
        }
        Ok(())
    }

    /// The readers of a shaped link's queues (`measure::queue`): the one the client's sends
    /// wait in, then the server's, each opened in its namespace (the router's, with
    /// `queue=`). None for a link without a shaper of iopath's own.
    pub fn queue_readers(&self) -> Vec<(Role, Result<QdiscReader, String>)> {
        let (Topology::Veth(link), Some(host_if)) = (&self.topology, &self.host_if) else {
            return Vec::new();
        };
        // The same test as whether the link gets a qdisc at all.
        if shaping(link, host_if).is_none() {
            return Vec::new();
        }
        let open = |device: &str| QdiscReader::open(device).map_err(|e| format!("cannot read {device}'s qdisc: {e}"));
        match &self.router {
            Some(router) => {
                let in_router = |device| router.run(|| open(device)).unwrap_or_else(|e| Err(e.to_string()));
                vec![
                    (Role::Client, in_router(ROUTER_SERVER_IF)),
                    (Role::Server, in_router(ROUTER_CLIENT_IF)),
                ]
            }
            None => vec![
                (Role::Client, self.on_client_side(|| open(host_if))),
                (Role::Server, self.on_server_side(|| open(INNER_IF))),
            ],
        }
    }

    /// The host end of the veth pair, if any.
    pub fn host_interface(&self) -> Option<&str> {
        self.host_if.as_deref()
    }

    /// The namespace the server side lives in (None: this process's own).
    pub fn server_namespace(&self) -> Option<&NetNs> {
        self.ns.as_deref()
    }

    /// The namespace the client side lives in (None: this process's own).
    pub fn client_namespace(&self) -> Option<&NetNs> {
        match self.topology {
            Topology::Netns { .. } => self.ns.as_deref(),
            _ => None,
        }
    }

    /// The address a server started by this process listens on (`port` 0: a free one).
    pub fn listen_addr(&self, port: u16) -> anyhow::Result<SocketAddr> {
        match &self.topology {
            Topology::Remote { addr } => Err(anyhow!("the server at {addr} is remote: nothing listens here")),
            _ => Ok(SocketAddr::new(self.server_ip, port)),
        }
    }

    /// Listen where the server lives; a taken port is a clear error.
    pub fn bind(&self, port: u16) -> anyhow::Result<TcpListener> {
        let addr = self.listen_addr(port)?;
        self.on_server_side(|| TcpListener::bind(addr)).map_err(|e| {
            if e.kind() == io::ErrorKind::AddrInUse {
                anyhow!("port {port} on {} is busy (address in use): choose another with --port, or leave --port out to use a free one", addr.ip())
            } else {
                anyhow!("could not listen on {addr}: {e}")
            }
        })
    }

    /// The address of a remote peer, resolved (None when this process starts the server; the
    /// client then connects to the address its listener got).
    pub fn remote_addr(&self) -> anyhow::Result<Option<SocketAddr>> {
        match &self.topology {
            Topology::Remote { addr } => addr
                .to_socket_addrs()
                .with_context(|| format!("cannot resolve '{addr}'"))?
                .next()
                .map(Some)
                .ok_or_else(|| anyhow!("'{addr}' resolves to no address")),
            _ => Ok(None),
        }
    }

    /// Run `f` where the server lives; threads it starts live there too (in a namespace: on
    /// a thread that entered it). Loopback: right here.
    pub fn on_server_side<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        run_in(self.ns.as_deref(), f)
    }

    /// Run `f` where the client lives (netns: inside with the server; veth and loopback: here).
    pub fn on_client_side<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        run_in(self.client_namespace(), f)
    }

    /// Start the in-process peer: a named thread of `scope` that runs `serve` where the server
    /// lives. The caller joins it.
    pub fn spawn_server<'scope, T: Send + 'scope>(
        &self,
        scope: &'scope Scope<'scope, '_>,
        name: &str,
        serve: impl FnOnce() -> T + Send + 'scope,
    ) -> io::Result<ScopedJoinHandle<'scope, T>> {
        let ns = self.ns.clone();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn_scoped(scope, move || {
                if let Some(ns) = ns {
                    // Entering a namespace this process holds open does not fail short of a
                    // kernel bug; a server outside it would measure the wrong path.
                    ns.enter().expect("could not enter the server's network namespace");
                }
                serve()
            })
    }
}

/// Run `f` in `ns` (on a thread that entered it) or right here.
fn run_in<T: Send>(ns: Option<&NetNs>, f: impl FnOnce() -> T + Send) -> T {
    match ns {
        None => f(),
        Some(ns) => ns
            .run(f)
            .unwrap_or_else(|e| panic!("could not run inside the network namespace: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Endpoint;

    #[test]
    fn a_run_interface_is_told_by_its_name_only() {
        assert!(is_run_interface(&host_interface(27695, 1022)));
        assert!(is_run_interface("iop1c0"));
        for other in [
            "iopath0",
            "iopprobe0",
            "iop",
            "iopc1",
            "iop12c",
            "iop12x3",
            "eth0",
            "lo",
        ] {
            assert!(!is_run_interface(other), "{other}");
        }
    }

    #[test]
    fn loopback_listens_on_lo_and_remote_starts_nothing() {
        let lo = Topology::from(&Endpoint::Loopback { port: 0 }).establish().unwrap();
        assert_eq!(lo.topology().interface(), "lo");
        assert!(lo.topology().starts_server());
        let listener = lo.bind(0).unwrap();
        assert!(listener.local_addr().unwrap().ip().is_loopback());
        assert_eq!(lo.remote_addr().unwrap(), None);

        let remote = Topology::from(&Endpoint::Remote {
            addr: "127.0.0.1:9".into(),
        })
        .establish()
        .unwrap();
        assert!(!remote.topology().starts_server());
        assert!(remote.bind(0).is_err());
        assert_eq!(remote.remote_addr().unwrap(), Some("127.0.0.1:9".parse().unwrap()));
    }

    #[test]
    fn a_busy_port_says_so() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let err = Topology::Loopback
            .establish()
            .unwrap()
            .bind(port)
            .unwrap_err()
            .to_string();
        assert!(err.contains("busy"), "{err}");
    }

    #[test]
    fn the_server_thread_runs_and_is_joined() {
        let net = Topology::Loopback.establish().unwrap();
        let got = std::thread::scope(|s| {
            let h = net.spawn_server(s, "t", || 7).unwrap();
            h.join().unwrap()
        });
        assert_eq!(got, 7);
    }

    #[test]
    fn netem_is_refused_on_a_kernel_without_it() {
        if netns::kernel_config_has("CONFIG_NET_SCH_NETEM") != Some(false) {
            return;
        }
        let t: Topology = "veth:delay=1ms".parse().unwrap();
        assert!(t.check().unwrap_err().contains(NO_NETEM));
        assert!(t.establish().is_err());
    }

    #[test]
    fn a_veth_server_is_reached_across_the_pair() {
        if !netns::can_build_namespaces() {
            return;
        }
        let net = "veth:mtu=4148".parse::<Topology>().unwrap().establish().unwrap();
        let host_if = net.host_interface().unwrap().to_string();
        let mtu = std::fs::read_to_string(format!("/sys/class/net/{host_if}/mtu")).unwrap();
        assert_eq!(mtu.trim(), "4148");
        let listener = net.bind(0).unwrap();
        let addr = listener.local_addr().unwrap();
        assert!(matches!(addr.ip(), IpAddr::V4(ip) if ip.octets()[..2] == [198, 18] || ip.octets()[..2] == [198, 19]));
        std::thread::scope(|s| {
            let server = net
                .spawn_server(s, "t", || {
                    use std::io::Read;
                    let (mut c, _) = listener.accept().unwrap();
                    let mut got = String::new();
                    c.read_to_string(&mut got).unwrap();
                    got
                })
                .unwrap();
            net.on_client_side(|| {
                use std::io::Write;
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                c.write_all(b"across").unwrap();
            });
            assert_eq!(server.join().unwrap(), "across");
        });
        drop(listener);
        drop(net);
        // The namespace goes with its last reference and takes the pair with it.
        let gone = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            !std::path::Path::new(&format!("/sys/class/net/{host_if}")).exists()
        });
        assert!(gone, "{host_if} is still there");
    }

    /// `ipv6`: the server listens on an IPv6 address (a ULA of the pair's own, or the
    /// namespace's ::1) and a client reaches it across at once (no duplicate address detection
    /// to wait for).
    #[test]
    fn an_ipv6_server_is_reached_across_the_pair_and_in_a_namespace() {
        if !netns::can_build_namespaces() {
            return;
        }
        for text in ["veth:ipv6", "netns:ipv6"] {
            let net = text.parse::<Topology>().unwrap().establish().unwrap();
            let listener = net.bind(0).unwrap();
            let addr = listener.local_addr().unwrap();
            match addr.ip() {
                IpAddr::V6(ip) if text.starts_with("veth") => assert_eq!(ip.segments()[..3], [0xfd69, 0x6f70, 0x6174]),
                IpAddr::V6(ip) => assert!(ip.is_loopback(), "{text}: {ip}"),
                ip => panic!("{text}: listens on {ip}"),
            }
            std::thread::scope(|s| {
                let server = net
                    .spawn_server(s, "t", || {
                        use std::io::Read;
                        let (mut c, peer) = listener.accept().unwrap();
                        let mut got = String::new();
                        c.read_to_string(&mut got).unwrap();
                        (got, peer.is_ipv6())
                    })
                    .unwrap();
                net.on_client_side(|| {
                    use std::io::Write;
                    let mut c = std::net::TcpStream::connect(addr).unwrap();
                    c.write_all(b"across").unwrap();
                });
                assert_eq!(server.join().unwrap(), ("across".to_string(), true), "{text}");
            });
        }
    }

    /// The size limits of `veth:`/`netns:` reach both ends' devices: read back over rtnetlink
    /// inside the namespace (the server's end) and outside it (the client's).
    #[test]
    fn size_limits_reach_both_ends() {
        if !netns::can_build_namespaces() {
            return;
        }
        let all = "gso_max_size=185000,gro_max_size=185000,gso_ipv4_max_size=185000,gro_ipv4_max_size=185000";
        for text in [format!("veth:{all}"), format!("netns:{all}")] {
            let topology: Topology = text.parse().unwrap();
            topology.check().unwrap();
            let net = topology.establish().unwrap();
            let server_dev = if net.host_interface().is_some() { INNER_IF } else { "lo" };
            let client_dev = net.host_interface().unwrap_or("lo").to_string();
            let server = net.on_server_side(|| rtnetlink::link_sizes(server_dev)).unwrap();
            let client = net.on_client_side(|| rtnetlink::link_sizes(&client_dev)).unwrap();
            for limit in settings::SIZE_LIMITS {
                for (end, read) in [("server", &server), ("client", &client)] {
                    let got = read.iter().find(|(l, _)| *l == limit).map(|(_, v)| *v);
                    assert_eq!(got, Some(185000), "{text}: {} of the {end}'s end", limit.name());
                }
            }
        }
    }

    /// `queue=` builds a router between the ends whose egress queues are tbf with that
    /// latency; both are read over rtnetlink from its namespace, and the ends reach each other
    /// through it. An unshaped pair has no queue of iopath's to read.
    #[test]
    fn a_queue_is_a_routers_and_read_at_both_of_its_ends() {
        if !netns::can_build_namespaces() {
            return;
        }
        let net = "veth:rate=100mbit,queue=200ms"
            .parse::<Topology>()
            .unwrap()
            .establish()
            .unwrap();
        let router = net.router.as_ref().unwrap();
        let shown = router
            .run(|| iproute_output("tc", &words(&format!("qdisc show dev {ROUTER_SERVER_IF}"))))
            .unwrap()
            .unwrap();
        assert!(shown.contains("tbf") && shown.contains("lat 200ms"), "{shown}");
        let readers = net.queue_readers();
        let roles: Vec<Role> = readers.iter().map(|(role, _)| *role).collect();
        assert_eq!(roles, [Role::Client, Role::Server]);
        for (role, reader) in readers {
            assert_eq!(reader.unwrap().read().unwrap().kind, "tbf", "{role:?}");
        }
        let listener = net.bind(0).unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::scope(|scope| {
            let server = net
                .spawn_server(scope, "accept", || listener.accept().map(drop))
                .unwrap();
            net.on_client_side(|| std::net::TcpStream::connect(addr)).unwrap();
            server.join().unwrap().unwrap();
        });
        let unshaped = "veth".parse::<Topology>().unwrap().establish().unwrap();
        assert!(unshaped.queue_readers().is_empty());
    }

    #[test]
    fn a_gso_size_above_the_devices_tso_max_size_is_one_line() {
        if !netns::can_build_namespaces() {
            return;
        }
        let (_, tso_max) = built_device_tso_max(true).unwrap();
        let t: Topology = format!("veth:gso_max_size={}", tso_max as u64 + 1).parse().unwrap();
        let e = t.check().unwrap_err();
        assert!(e.contains("above the tso_max_size") && !e.contains('\n'), "{e}");
        let e = "loopback:gso_max_size=185000".parse::<Topology>().unwrap_err();
        assert!(
            e.contains("needs a namespace") || e.contains("netns:gso_max_size=185000"),
            "{e}"
        );
    }

    #[test]
    fn a_setup_that_fails_halfway_leaves_nothing() {
        if !netns::can_build_namespaces() || netns::kernel_config_has("CONFIG_NET_SCH_NETEM") != Some(false) {
            return;
        }
        // Past the check on purpose: the pair and its addresses exist when `tc ... netem` fails.
        let link = Link {
            delay_us: Some(1000),
            ..Link::default()
        };
        let n = VETH_COUNT.load(Ordering::Relaxed);
        let err = build_veth(&Topology::Veth(link.clone()), &link)
            .unwrap_err()
            .to_string();
        assert!(err.contains("tc"), "{err}");
        // Any pair this test process built since (tests run in parallel) must go too.
        let mine: Vec<String> = (n..VETH_COUNT.load(Ordering::Relaxed))
            .map(|i| host_interface(std::process::id(), i))
            .collect();
        let gone = (0..300).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            !std::path::Path::new(&format!("/sys/class/net/{}", mine[0])).exists()
        });
        assert!(gone, "{} is still there after the failed setup", mine[0]);
    }
}
