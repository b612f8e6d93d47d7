//! What a UDP workload's session does alike at both ends (`net udp-stream`, `net udp-rr`),
//! over the TCP control connection of every network session:
//!
//! - the client binds one UDP socket per thread before its hello and names their ports in it
//!   (`UdpHello`); the server opens its UDP data port (`open_udp_port`): one socket per client
//!   thread on one port (SO_REUSEPORT), each connected to its client socket, so the kernel
//!   hands every flow to its own server socket (a connected socket matches its 4-tuple before
//!   any other), and answers `ready` with that port;
//! - the phases the server follows (`net::session::served`, `Until::Sent`): `measure`,
//!   `done`, then the client's `sent` line, which carries the datagrams each client thread sent in the whole session, said
//!   once every client thread has stopped;
//! - the drain (`drain`): after `sent`, a server thread keeps receiving until its socket has
//!   been quiet for `DRAIN_QUIET` (at most `DRAIN_MAX`), so the datagrams still in flight when
//!   the client stopped are counted as arrived, not lost.

use crate::case::{NetParams, Topology};
use crate::net::control::{ControlChannel, PROTOCOL_VERSION};
use crate::net::session::handshake::{refused, ReadyLine, RefusalKind};
use anyhow::{anyhow, bail};
use serde::{Deserialize, Serialize};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::{Duration, Instant};

/// How long a blocking receive waits before its thread looks at the session's flags again.
pub const RECV_POLL: Duration = Duration::from_millis(20);
/// How long a blocking send of a full socket buffer waits before its thread looks at the window.
pub const SEND_POLL: Duration = Duration::from_millis(100);
/// A draining socket quiet this long has nothing more in flight.
pub const DRAIN_QUIET: Duration = Duration::from_millis(100);
/// The longest drain.
pub const DRAIN_MAX: Duration = Duration::from_secs(2);
/// The most UDP sockets (threads) a session may ask for.
pub const MAX_FLOWS: usize = crate::net::session::MAX_THREADS;
/// The smallest and largest receive buffer (SO_RCVBUF) a UDP workload may ask for, on either
/// end: one range and one message for udp-stream and udp-rr, on the command line, in a
/// stored case and in a hello alike.
pub const RCVBUF_RANGE: std::ops::RangeInclusive<u64> = 256..=(1 << 30);

/// The client's count of flows is this server's.
pub fn same_flows(client: usize, server: usize) -> anyhow::Result<()> {
    if client == server {
        Ok(())
    } else {
        Err(anyhow!("the client counted {client} flows, this server {server}"))
    }
}

/// Whether a hello names one client port per thread.
pub fn check_ports(ports: &[u16], threads: usize) -> Result<(), String> {
    if ports.len() == threads {
        Ok(())
    } else {
        Err(format!(
            "the hello names {} client ports for {threads} threads",
            ports.len()
        ))
    }
}

/// Whether `--rcvbuf` lies in [`RCVBUF_RANGE`].
pub fn check_rcvbuf(rcvbuf: Option<u64>) -> Result<(), String> {
    match rcvbuf {
        Some(bytes) if !RCVBUF_RANGE.contains(&bytes) => Err(format!(
            "--rcvbuf {bytes}: accepted 256 B to 1 GiB (the kernel clamps it to net.core.rmem_max and doubles it)"
        )),
        _ => Ok(()),
    }
}

/// The hello of a UDP workload: `{"type":"hello","version":4,"workload":"udp-stream",
/// "case":{...},"ports":[40001]}`; `ports` are the client's UDP source ports, one per thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UdpHello<C> {
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u32,
    pub workload: String,
    pub case: C,
    pub ports: Vec<u16>,
}

impl<C> UdpHello<C> {
    pub fn new(workload: &str, case: C, ports: Vec<u16>) -> UdpHello<C> {
        UdpHello {
            kind: "hello".into(),
            version: PROTOCOL_VERSION,
            workload: workload.into(),
            case,
            ports,
        }
    }
}

/// The phase messages a UDP server follows after `ready`: `measure` and `done` (as every
/// network session's client sends them), then `sent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum UdpPhase {
    Measure,
    Done,
    /// Every client thread has stopped; `datagrams[i]`: what thread i sent in the whole
    /// session (warm-up and window), the count its flow's loss is reckoned against.
    Sent {
        datagrams: Vec<u64>,
    },
}

/// Say what each client thread sent (the client, once every thread is joined).
pub fn send_sent(control: &mut ControlChannel, datagrams: Vec<u64>) -> io::Result<()> {
    control.send_json(&UdpPhase::Sent { datagrams })
}

/// The address family the client's sockets need: the server's (a remote name resolved; ::1
/// standing for a namespace topology's IPv6 addresses, `netns:ipv6` or `veth:ipv6`).
pub fn server_ip(net: &NetParams) -> anyhow::Result<IpAddr> {
    match Topology::from(&net.endpoint) {
        t if t.ipv6() => Ok(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        Topology::Remote { addr } => addr
            .to_socket_addrs()
            .map_err(|e| anyhow!("cannot resolve {addr}: {e}"))?
            .next()
            .map(|a| a.ip())
            .ok_or_else(|| anyhow!("{addr} resolves to no address")),
        _ => Ok(IpAddr::from([127, 0, 0, 1])),
    }
}

/// The client's UDP sockets, one per thread, bound to port 0 of the unspecified address of
/// `server`'s family; sends wait at most `SEND_POLL`.
pub fn client_sockets(count: usize, server: IpAddr) -> io::Result<Vec<UdpSocket>> {
    let any: IpAddr = match server {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    (0..count)
        .map(|_| {
            let socket = UdpSocket::bind(SocketAddr::new(any, 0))?;
            socket.set_write_timeout(Some(SEND_POLL))?;
            socket.set_read_timeout(Some(RECV_POLL))?;
            Ok(socket)
        })
        .collect()
}

/// The local ports of `sockets`, in order.
pub fn ports(sockets: &[UdpSocket]) -> io::Result<Vec<u16>> {
    sockets.iter().map(|s| Ok(s.local_addr()?.port())).collect()
}

/// Connect every client socket to the server's UDP data port.
pub fn connect_all(sockets: &[UdpSocket], server: SocketAddr) -> io::Result<()> {
    sockets.iter().try_for_each(|s| s.connect(server))
}

/// A server's UDP socket of one flow, and the receive buffer the kernel granted it.
pub struct ServerSocket {
    pub socket: UdpSocket,
    /// SO_RCVBUF as read back (the kernel doubles what is asked for and clamps it).
    pub rcvbuf: usize,
}

/// Open the session's UDP data port on the address the client reached this server at: one
/// socket per entry of `ports` (SO_REUSEPORT, one port), each connected to the client's
/// socket of that port at the control connection's peer address, with `rcvbuf` asked for
/// (None: the kernel's default) and a `RECV_POLL` receive timeout; then answer `ready` with
/// the port. A socket that cannot be set up refuses the session (`set_up`).
pub fn open_udp_port(
    control: &mut ControlChannel,
    ports: &[u16],
    rcvbuf: Option<u64>,
) -> anyhow::Result<Vec<ServerSocket>> {
    let local = control.stream().local_addr()?.ip();
    let peer = control.stream().peer_addr()?.ip();
    match bind_flows(local, peer, ports, rcvbuf) {
        Ok(sockets) => {
            let port = sockets
                .first()
                .map(|s| s.socket.local_addr())
                .transpose()?
                .map(|a| a.port());
            control.send_json(&ReadyLine {
                kind: "ready".into(),
                token: 0,
                port,
            })?;
            Ok(sockets)
        }
        Err(e) => {
            let error = format!("could not open a UDP data port on {local}: {e}");
            control.send(&refused(RefusalKind::SetUp, &error)).ok();
            bail!(error)
        }
    }
}

fn bind_flows(local: IpAddr, peer: IpAddr, ports: &[u16], rcvbuf: Option<u64>) -> io::Result<Vec<ServerSocket>> {
    use socket2::{Domain, Protocol, Socket, Type};
    let mut port = 0;
    let mut sockets = Vec::with_capacity(ports.len());
    for &client_port in ports {
        let socket = Socket::new(
            Domain::for_address(SocketAddr::new(local, 0)),
            Type::DGRAM,
            Some(Protocol::UDP),
        )?;
        socket.set_reuse_port(true)?;
        if let Some(bytes) = rcvbuf {
            socket.set_recv_buffer_size(usize::try_from(bytes).unwrap_or(usize::MAX))?;
        }
        socket.bind(&SocketAddr::new(local, port).into())?;
        socket.connect(&SocketAddr::new(peer, client_port).into())?;
        socket.set_read_timeout(Some(RECV_POLL))?;
        port = socket.local_addr()?.as_socket().map_or(0, |a| a.port());
        let rcvbuf = socket.recv_buffer_size()?;
        sockets.push(ServerSocket {
            socket: socket.into(),
            rcvbuf,
        });
    }
    Ok(sockets)
}

/// Keep receiving until nothing arrived for `DRAIN_QUIET` (or `DRAIN_MAX` passed): `receive`
/// takes what one call returns (0 after the socket's `RECV_POLL` timeout). Returns the
/// datagrams taken.
pub fn drain(mut receive: impl FnMut() -> io::Result<usize>) -> io::Result<u64> {
    let start = Instant::now();
    let mut last = Instant::now();
    let mut taken = 0u64;
    while start.elapsed() < DRAIN_MAX && last.elapsed() < DRAIN_QUIET {
        let n = receive()?;
        if n > 0 {
            taken += n as u64;
            last = Instant::now();
        }
    }
    Ok(taken)
}

/// The datagrams a flow lost: what its client thread sent less the distinct ones that arrived
/// (never negative); an error when the client's counts do not match the flows.
pub fn lost_per_flow(sent: &[u64], distinct: &[u64]) -> anyhow::Result<Vec<u64>> {
    same_flows(sent.len(), distinct.len())?;
    Ok(sent.iter().zip(distinct).map(|(s, d)| s.saturating_sub(*d)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Two client sockets, one server port: each flow reaches the server socket connected to it.
    #[test]
    fn each_flow_arrives_at_its_own_server_socket() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let control_client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server_end, _) = listener.accept().unwrap();
        let mut control = ControlChannel::new(server_end).unwrap();
        let clients = client_sockets(2, "127.0.0.1".parse().unwrap()).unwrap();
        let flows = open_udp_port(&mut control, &ports(&clients).unwrap(), Some(8192)).unwrap();
        let mut reader = ControlChannel::new(control_client).unwrap();
        let ready: serde_json::Value = serde_json::from_slice(&reader.recv_line(None, &|| false).unwrap()).unwrap();
        let port = ready["port"].as_u64().unwrap() as u16;
        assert_eq!(port, flows[1].socket.local_addr().unwrap().port());
        assert!(flows[0].rcvbuf >= 8192, "{}", flows[0].rcvbuf);
        connect_all(&clients, SocketAddr::new("127.0.0.1".parse().unwrap(), port)).unwrap();
        for _ in 0..3 {
            clients[0].send(b"zero").unwrap();
            clients[1].send(b"one").unwrap();
        }
        let mut buf = [0u8; 16];
        for _ in 0..3 {
            let n = flows[0].socket.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"zero");
            let n = flows[1].socket.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"one");
        }
    }

    #[test]
    fn the_phases_read_back_and_loss_is_per_flow() {
        let sent = serde_json::to_string(&UdpPhase::Sent { datagrams: vec![3, 4] }).unwrap();
        assert_eq!(sent, r#"{"type":"sent","datagrams":[3,4]}"#);
        assert_eq!(
            serde_json::from_str::<UdpPhase>(r#"{"type":"measure"}"#).unwrap(),
            UdpPhase::Measure
        );
        assert_eq!(lost_per_flow(&[10, 5], &[7, 5]).unwrap(), vec![3, 0]);
        assert_eq!(lost_per_flow(&[1], &[2]).unwrap(), vec![0]);
        assert!(lost_per_flow(&[1], &[1, 1]).is_err());
    }

    #[test]
    fn a_drain_ends_when_the_socket_is_quiet() {
        let mut left = 5;
        let taken = drain(|| {
            if left > 0 {
                left -= 1;
                Ok(2)
            } else {
                std::thread::sleep(RECV_POLL);
                Ok(0)
            }
        })
        .unwrap();
        assert_eq!(taken, 10);
    }
}
