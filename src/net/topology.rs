//! Where the two ends of a network experiment live: which interface the traffic crosses,
//! where the server listens and the client connects, and where each side's code runs.
//!
//! Only loopback (both ends in this process) and a remote `iopath net serve` peer exist
//! today. Namespaces are next: in a private netns or behind a veth pair, sockets and the
//! threads using them must be created inside the namespace (setns() is per thread), which is
//! why the server side's and the client side's code run through [`Topology::on_server_side`]
//! and [`Topology::on_client_side`] rather than wherever the caller happens to be.

use crate::case::Endpoint;
use anyhow::{anyhow, Context};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::thread::{Scope, ScopedJoinHandle};

/// Where the two ends of a network experiment live.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Topology {
    /// Both ends in this process, over the loopback interface.
    #[default]
    Loopback,
    /// The client here; the server is already running at `addr` (`iopath net serve`), so this
    /// process starts no server.
    Remote { addr: String },
}

/// The address the loopback server listens on and the client connects to.
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

impl From<&Endpoint> for Topology {
    fn from(endpoint: &Endpoint) -> Topology {
        match endpoint {
            Endpoint::Loopback { .. } => Topology::Loopback,
            Endpoint::Remote { addr } => Topology::Remote { addr: addr.clone() },
        }
    }
}

impl Topology {
    /// The interface the traffic crosses on this machine, for the run's environment record.
    pub fn interface(&self) -> &str {
        match self {
            Topology::Loopback => "lo",
            Topology::Remote { .. } => "unknown (remote peer)",
        }
    }

    /// Whether this process starts the server (false: it is a running remote peer).
    pub fn starts_server(&self) -> bool {
        !matches!(self, Topology::Remote { .. })
    }

    /// The address a server started by this process listens on (`port` 0: a free one).
    pub fn listen_addr(&self, port: u16) -> anyhow::Result<SocketAddr> {
        match self {
            Topology::Loopback => Ok(SocketAddr::new(LOOPBACK, port)),
            Topology::Remote { addr } => Err(anyhow!("the server at {addr} is remote: nothing listens here")),
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
        match self {
            Topology::Remote { addr } => addr
                .to_socket_addrs()
                .with_context(|| format!("cannot resolve '{addr}'"))?
                .next()
                .map(Some)
                .ok_or_else(|| anyhow!("'{addr}' resolves to no address")),
            Topology::Loopback => Ok(None),
        }
    }

    /// Run `f` where the server lives; threads it starts live there too (a netns topology
    /// will run it on a thread that entered the namespace). Loopback: right here.
    pub fn on_server_side<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        f()
    }

    /// Run `f` where the client lives (a netns topology puts both ends inside). Today: here.
    pub fn on_client_side<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        f()
    }

    /// Start the in-process peer: a named thread of `scope` that runs `serve` where the server
    /// lives. The caller joins it.
    pub fn spawn_server<'scope, T: Send + 'scope>(
        &self,
        scope: &'scope Scope<'scope, '_>,
        name: &str,
        serve: impl FnOnce() -> T + Send + 'scope,
    ) -> io::Result<ScopedJoinHandle<'scope, T>> {
        let topology = self.clone();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn_scoped(scope, move || topology.on_server_side(serve))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_listens_on_lo_and_remote_starts_nothing() {
        let lo = Topology::from(&Endpoint::Loopback { port: 0 });
        assert_eq!(lo.interface(), "lo");
        assert!(lo.starts_server());
        let listener = lo.bind(0).unwrap();
        assert!(listener.local_addr().unwrap().ip().is_loopback());
        assert_eq!(lo.remote_addr().unwrap(), None);

        let remote = Topology::from(&Endpoint::Remote {
            addr: "127.0.0.1:9".into(),
        });
        assert!(!remote.starts_server());
        assert!(remote.bind(0).is_err());
        assert_eq!(remote.remote_addr().unwrap(), Some("127.0.0.1:9".parse().unwrap()));
    }

    #[test]
    fn a_busy_port_says_so() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let err = Topology::Loopback.bind(port).unwrap_err().to_string();
        assert!(err.contains("busy"), "{err}");
    }

    #[test]
    fn the_server_thread_runs_and_is_joined() {
        let got = std::thread::scope(|s| {
            let h = Topology::Loopback.spawn_server(s, "t", || 7).unwrap();
            h.join().unwrap()
        });
        assert_eq!(got, 7);
    }
}
