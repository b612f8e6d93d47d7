//! What the network workloads do alike: a session server's own data port (records, rr/crr),
//! the client driving the warm-up and measured window with a remote server (records). The
//! observation helpers they share (zero-copy counts, verify counts, placement warnings) live in
//! net/session/observe.rs.

use crate::measure::window::{SystemProbes, Window};
use crate::net::control::{Control, ControlChannel, ServerReport};
use crate::net::session::interrupted;
use crate::observation::Metric;
use crate::stop::{Interrupted, Stop};
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// A session server's `ready` with the session's own data port. `port` is None from a server
/// older than the workload (a stream server's `ready` has no port).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ReadyLine {
    #[serde(rename = "type")]
    pub kind: String,
    pub token: u64,
    pub port: Option<u16>,
}

/// Open the session's own data port on the address the client reached this server at and
/// answer `ready` with it; returns the listener and the client's address, the only one that
/// may join. A port that cannot be opened refuses the session.
pub(crate) fn open_data_port(control: &mut ControlChannel) -> anyhow::Result<(TcpListener, IpAddr)> {
    let local = control.stream().local_addr()?;
    let peer = control.stream().peer_addr()?.ip();
    let listener = match TcpListener::bind(SocketAddr::new(local.ip(), 0)) {
        Ok(l) => l,
        Err(e) => {
            let error = format!("could not open a data port on {}: {e}", local.ip());
            control.send(&Control::Refused { error: error.clone() }).ok();
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

/// End a served session: the report to the client, or what failed (nothing on a stop, which
/// the client asked for or sees as the closed connection); the session's own result.
pub(crate) fn send_outcome(control: &mut ControlChannel, outcome: anyhow::Result<ServerReport>) -> anyhow::Result<()> {
    match outcome {
        Ok(report) => control
            .send(&Control::Report(Box::new(report)))
            .context("sending the report to the client"),
        Err(e) => {
            if !e.is::<Interrupted>() {
                control
                    .send(&Control::Failed {
                        error: format!("{e:#}"),
                    })
                    .ok();
            }
            Err(e)
        }
    }
}

/// Warm up, open the window here and on the server (`Measure`), hold it for `duration`, close
/// it on both ends (`Done`); returns the system-wide probes' metrics. Returns early when a
/// client thread failed, and with `Interrupted` when a stop was requested (the window is
/// closed on both ends either way).
pub(crate) fn drive_phases(
    warmup: Duration,
    duration: Duration,
    window: &Window,
    system: &mut SystemProbes,
    failed: &AtomicBool,
    stop: Stop,
    control: &mut ControlChannel,
) -> anyhow::Result<Vec<Metric>> {
    let mut result = Ok(());
    if stop.sleep_watching(warmup, failed) {
        window.open(system);
        result = control
            .send(&Control::Measure)
            .context("the server closed the control connection");
        if result.is_ok() {
            stop.sleep_watching(duration, failed);
        }
    }
    let metrics = window.close(system);
    let done = control
        .send(&Control::Done)
        .context("the server closed the control connection");
    if stop.requested() {
        return Err(interrupted());
    }
    result.and(done).map(|()| metrics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::session::observe::warn_placement;
    use crate::observation::{Observation, Role, ThreadPlacement, WarningKind};

    fn placement(migrations: Option<u64>) -> ThreadPlacement {
        ThreadPlacement {
            role: Role::Client,
            index: 0,
            pinned: None,
            cpu_at_start: None,
            cpu_at_end: None,
            migrations,
        }
    }

    #[test]
    fn pinning_both_sides_leaves_no_placement_warning_and_migrations_are_counted() {
        let mut obs = Observation::default();
        warn_placement(&mut obs, true, true);
        assert!(obs.warnings.is_empty());
        obs.placement = vec![
            placement(Some(2)),
            placement(Some(0)),
            placement(None),
            placement(Some(1)),
        ];
        warn_placement(&mut obs, true, false);
        assert!(obs.has_warning(WarningKind::Unpinned));
        let migrated: Vec<_> = obs
            .warnings
            .iter()
            .filter(|w| w.kind == WarningKind::Migrated)
            .collect();
        assert_eq!(migrated.len(), 1);
        assert!(
            migrated[0].text.starts_with("2 threads migrated"),
            "{}",
            migrated[0].text
        );
    }

    #[test]
    fn a_failed_thread_ends_the_wait_early() {
        let stop = Stop::never();
        let failed = AtomicBool::new(true);
        let start = std::time::Instant::now();
        assert!(!stop.sleep_watching(Duration::from_secs(5), &failed));
        // Well under the 5 s it would sleep, with room for a loaded machine's wake-up delay.
        assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
        assert!(stop.sleep_watching(Duration::from_millis(1), &AtomicBool::new(false)));
    }

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
