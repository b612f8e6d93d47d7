//! What a served session does with its data connections on the server side: a data port of
//! the session's own (records, rr/crr) and accepting the client's connections on it (`accept_data`), the
//! byte budget of `net serve --max-session-bytes`, and the session's last word (the report or
//! the failure).

use super::handshake::{refused, ReadyLine, RefusalKind};
use crate::net::control::{Control, ControlChannel, ServerReport};
use crate::stop::{Interrupted, Stop};
use anyhow::{anyhow, bail, Context};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// How long a data connection may stay silent before the peer is declared gone (both ends,
/// every network workload).
pub const DATA_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Open the session's own data port on the address the client reached this server at and
/// answer `ready` with it; returns the listener and the client's address, the only one that
/// may join. A port that cannot be opened refuses the session.
pub(crate) fn open_data_port(control: &mut ControlChannel) -> anyhow::Result<(TcpListener, IpAddr)> {
    let local = control.stream().local_addr()?;
    let peer = control.stream().peer_addr()?.ip();
    let listener = match TcpListener::bind(SocketAddr::new(local.ip(), 0)) {
        Ok(l) => l,
        Err(e) => {
            // Refused on the wire; the server's log counts it as a failed session.
            let error = format!("could not open a data port on {}: {e}", local.ip());
            control.send(&refused(RefusalKind::SetUp, &error)).ok();
            bail!(error);
        }
    };
    control.send_json(&ReadyLine {
        kind: "ready".into(),
        token: 0,
        port: Some(listener.local_addr()?.port()),
    })?;
    Ok((listener, peer))
}

/// A session's data connections as the TCP workloads with a port of their own take them: the
/// port said in `ready`, `count` connections from the client's address within `setup`, each
/// without Nagle's delay and with [`DATA_IDLE_TIMEOUT`] on reads and writes.
pub(crate) fn accept_data(
    control: &mut ControlChannel,
    count: usize,
    setup: Duration,
    stopped: &dyn Fn() -> bool,
) -> anyhow::Result<Vec<TcpStream>> {
    let (listener, peer) = open_data_port(control)?;
    let data = accept_from(&listener, count, peer, setup, stopped)?;
    for stream in &data {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(DATA_IDLE_TIMEOUT))?;
        stream.set_write_timeout(Some(DATA_IDLE_TIMEOUT))?;
    }
    Ok(data)
}

/// `count` data connections to `listener` from `peer` (any other address is turned away),
/// within `setup`; they and the listener are left blocking.
pub(crate) fn accept_from(
    listener: &TcpListener,
    count: usize,
    peer: IpAddr,
    setup: Duration,
    stopped: &dyn Fn() -> bool,
) -> anyhow::Result<Vec<TcpStream>> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + setup;
    let mut data = Vec::with_capacity(count);
    while data.len() < count {
        if stopped() {
            return Err(anyhow::Error::new(Interrupted));
        }
        if Instant::now() > deadline {
            bail!(
                "the client opened {} of {count} data connections: timed out after {} s",
                data.len(),
                setup.as_secs()
            );
        }
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(Stop::POLL.as_millis() as u16)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => {}
            Err(e) => bail!("poll failed: {e}"),
        }
        match listener.accept() {
            // Only the client's own address may join its session.
            Ok((stream, from)) if from.ip() == peer => {
                stream.set_nonblocking(false)?;
                data.push(stream);
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
            Err(e) => bail!("accept failed: {e}"),
        }
    }
    listener.set_nonblocking(false)?;
    Ok(data)
}

/// End a served session: the report to the client, or what failed ([`send_failure`]); the
/// session's own result.
pub(crate) fn send_outcome(control: &mut ControlChannel, outcome: anyhow::Result<ServerReport>) -> anyhow::Result<()> {
    match outcome {
        Ok(report) => control
            .send(&Control::Report(Box::new(report)))
            .context("sending the report to the client"),
        Err(e) => Err(send_failure(control, e)),
    }
}

/// Tell the client why the session failed: `unavailable` when the kernel refused what the
/// case needs, else `failed`; nothing on a stop, which the client asked for or sees as the
/// closed connection. The error, to return.
pub(crate) fn send_failure(control: &mut ControlChannel, e: anyhow::Error) -> anyhow::Error {
    if let Some(refusal) = e.downcast_ref::<crate::observation::Unsupported>() {
        control
            .send(&Control::Unavailable {
                what: refusal.what.clone(),
                reason: refusal.reason.clone(),
            })
            .ok();
    } else if !e.is::<Interrupted>() {
        control
            .send(&Control::Failed {
                error: crate::format::error_text(&e),
            })
            .ok();
    }
    e
}

/// Whether a session's data connections have moved more than `max` bytes through this
/// server (received plus sent and acknowledged), by the kernel's count (TCP_INFO
/// bytes_received + bytes_acked): read by the coordinator between its polls of the control
/// connection, so the serving threads' loops pay nothing for the budget.
pub(crate) fn over_budget(data: &[TcpStream], max: Option<u64>) -> bool {
    let Some(max) = max else { return false };
    let moved: u64 = data
        .iter()
        .filter_map(|s| crate::sys::tcpinfo::tcp_info(s.as_raw_fd()).ok())
        .map(|(info, _)| info.bytes_received + info.bytes_acked)
        .sum();
    moved > max
}

/// A session's byte budget (`--max-session-bytes`) as serving threads that count what they
/// move see it: the bytes moved, added only when a budget is set, checked between the polls of
/// the control connection.
pub(crate) struct MovedBytes {
    moved: std::sync::atomic::AtomicU64,
    max: Option<u64>,
}

impl MovedBytes {
    pub(crate) fn new(max: Option<u64>) -> MovedBytes {
        MovedBytes {
            moved: std::sync::atomic::AtomicU64::new(0),
            max,
        }
    }

    /// Add `bytes` moved (one relaxed add; nothing without a budget).
    #[inline]
    pub(crate) fn add(&self, bytes: u64) {
        if self.max.is_some() {
            self.moved.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Whether the session has moved more than its budget.
    pub(crate) fn over(&self) -> bool {
        self.max
            .is_some_and(|max| self.moved.load(std::sync::atomic::Ordering::Relaxed) > max)
    }
}

/// The error a session over its byte budget ends with (the client is told the same).
pub(crate) fn budget_error(max: Option<u64>) -> anyhow::Error {
    anyhow!(
        "the session reached this server's byte budget of {} (--max-session-bytes) and was ended",
        crate::case::format_bytes(max.unwrap_or(0))
    )
}

/// Whether `need` bytes of buffers on `role`'s side fit in half of `headroom`
/// (`sys::procfs::memory_headroom`; None skips the check); `advice` says what to shrink.
pub(crate) fn check_buffers(
    label: &str,
    need: u64,
    role: crate::observation::Role,
    headroom: Option<u64>,
    advice: &str,
) -> Result<(), String> {
    match headroom {
        Some(headroom) if need > headroom / 2 => Err(format!(
            "{label} needs about {} of buffers on the {role} side, more than half of the {} available (MemAvailable and the memory cgroup's limit): {advice}",
            crate::format::format_bytes(need),
            crate::format::format_bytes(headroom)
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client's connections are accepted and left blocking; too few within the setup time
    /// is one error that says how many came.
    #[test]
    fn accepts_the_peers_connections_within_the_setup_time() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = TcpStream::connect(addr).unwrap();
        let peer: IpAddr = "127.0.0.1".parse().unwrap();
        let data = accept_from(&listener, 1, peer, Duration::from_secs(5), &|| false).unwrap();
        assert_eq!(data.len(), 1);
        let e = accept_from(&listener, 1, peer, Duration::from_millis(50), &|| false).unwrap_err();
        assert!(
            e.to_string().starts_with("the client opened 0 of 1 data connections"),
            "{e}"
        );
        let stopped = accept_from(&listener, 1, peer, Duration::from_secs(5), &|| true).unwrap_err();
        assert!(stopped.is::<Interrupted>());
    }
}
