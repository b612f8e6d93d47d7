//! The client's connections: within a time limit, giving up as soon as a stop is requested.

use crate::stop::{Interrupted, Stop};
use socket2::{Domain, Socket, Type};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) fn interrupted() -> anyhow::Error {
    anyhow::Error::new(Interrupted)
}

/// Connect to `addr` within CONNECT_TIMEOUT, giving up as soon as a stop is requested.
pub(crate) fn connect(addr: SocketAddr, stop: Stop) -> anyhow::Result<TcpStream> {
    connect_with_mss(addr, stop, None)
}

/// A client's data connection of a workload with a data port of the session's own (rr, load):
/// [`connect`]ed, without Nagle's delay, with [`super::DATA_IDLE_TIMEOUT`] on reads and writes
/// (the server's end is `accept_data`'s).
pub(crate) fn data_connection(addr: SocketAddr, stop: Stop) -> anyhow::Result<TcpStream> {
    let s = connect(addr, stop)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(super::DATA_IDLE_TIMEOUT))?;
    s.set_write_timeout(Some(super::DATA_IDLE_TIMEOUT))?;
    Ok(s)
}

/// [`connect`], with TCP_MAXSEG `mss` set before connecting so it clamps the MSS both ends use.
pub(crate) fn connect_with_mss(addr: SocketAddr, stop: Stop, mss: Option<i32>) -> anyhow::Result<TcpStream> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let failed = |e: std::io::Error| anyhow::Error::new(e).context(format!("could not connect to {addr}"));
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).map_err(failed)?;
    if let Some(mss) = mss {
        crate::sys::net::set_maxseg(socket.as_raw_fd(), mss).map_err(failed)?;
    }
    socket.set_nonblocking(true).map_err(failed)?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) || e.kind() == std::io::ErrorKind::WouldBlock => {
            let deadline = Instant::now() + CONNECT_TIMEOUT;
            loop {
                if stop.requested() {
                    return Err(interrupted());
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(failed(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "connection timed out",
                    )));
                }
                let wait = PollTimeout::from(left.min(Stop::POLL).as_millis() as u16);
                let mut fds = [PollFd::new(socket.as_fd(), PollFlags::POLLOUT)];
                match poll(&mut fds, wait) {
                    Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
                    Ok(_) => break,
                    Err(e) => return Err(failed(e.into())),
                }
            }
            if let Some(e) = socket.take_error().map_err(failed)? {
                return Err(failed(e));
            }
        }
        Err(e) => return Err(failed(e)),
    }
    socket.set_nonblocking(false).map_err(failed)?;
    Ok(socket.into())
}
