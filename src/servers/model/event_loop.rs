//! The single-threaded readiness event loop behind the select, poll and epoll models: the
//! same loop, with the readiness system call behind the `Poller` trait.

use super::{out_of_fds, spawn_named, ACCEPT_BACKOFF};
use crate::servers::conn::{Conn, Progress, TICK};
use crate::servers::server::ServerCtx;
use std::collections::HashMap;
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// After a stop request, connections get this long to receive the replies already owed.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// Connections accepted per level-triggered wake-up, so a connect storm cannot starve the
/// established ones (the listener is reported again while more wait).
const ACCEPT_BATCH: usize = 64;

/// One readiness report: the fd is readable, writable or failed; the connection's pump finds
/// out which by trying (a try that would block costs one system call and changes nothing).
#[derive(Debug, Clone, Copy)]
pub struct Ready {
    pub fd: RawFd,
}

/// A readiness system call: watch fds for reading and/or writing, report which are ready.
pub trait Poller: Send + 'static {
    /// Watch `fd` with this interest (add, or change what is watched).
    fn register(&mut self, fd: RawFd, read: bool, write: bool) -> io::Result<()>;
    fn deregister(&mut self, fd: RawFd);
    fn wait(&mut self, timeout: Duration, ready: &mut Vec<Ready>) -> io::Result<()>;
    /// Edge-triggered: every report must be drained until the socket would block.
    fn edge_triggered(&self) -> bool {
        false
    }
}

pub fn spawn<P: Poller>(ctx: &Arc<ServerCtx>, listener: TcpListener, poller: P) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let ctx = ctx.clone();
    let name = format!("srv-{}", ctx.config.model);
    Ok(vec![spawn_named(&name, move || run(&ctx, listener, poller))?])
}

/// Run the loop on the calling thread until the server is asked to stop.
pub fn run<P: Poller>(ctx: &Arc<ServerCtx>, listener: TcpListener, mut poller: P) {
    ctx.pin_thread();
    let mut window = ctx.thread_window();
    let mut scratch = crate::servers::conn::read_buffer();
    let drain = poller.edge_triggered();
    let listen_fd = listener.as_raw_fd();
    let mut listener = Some(listener);
    if poller.register(listen_fd, true, false).is_err() {
        return;
    }
    let mut conns: HashMap<RawFd, Conn> = HashMap::new();
    let mut ready = Vec::with_capacity(1024);
    let mut stopping_since: Option<Instant> = None;
    let mut last_sweep = Instant::now();
    // Out of descriptors: the listener is out of the watched set until then.
    let mut accept_paused_until: Option<Instant> = None;
    loop {
        window.tick();
        if stopping_since.is_none() && ctx.stop_requested() {
            // Stop accepting; let each connection flush what it owes, then close.
            poller.deregister(listen_fd);
            listener = None;
            stopping_since = Some(Instant::now());
            let fds: Vec<RawFd> = conns.keys().copied().collect();
            for fd in fds {
                if let Some(conn) = conns.get_mut(&fd) {
                    conn.session.closing = true;
                }
                update(&mut poller, &mut conns, fd, drain, ctx, &mut scratch, false);
            }
        }
        if let Some(since) = stopping_since {
            if conns.is_empty() || since.elapsed() > STOP_GRACE {
                break;
            }
        }
        let mut wait = TICK;
        if let (Some(until), Some(l)) = (accept_paused_until, &listener) {
            let now = Instant::now();
            if now >= until {
                // Watch it again, and accept at once: edge-triggered, no new report would
                // come for the connections that waited in the backlog meanwhile.
                accept_paused_until = None;
                if poller.register(listen_fd, true, false).is_ok()
                    && accept_batch(l, ctx, &mut poller, &mut conns, drain) == Accepted::OutOfFds
                {
                    poller.deregister(listen_fd);
                    accept_paused_until = Some(Instant::now() + ACCEPT_BACKOFF);
                }
            } else {
                wait = wait.min(until - now);
            }
        }
        if poller.wait(wait, &mut ready).is_err() {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        for r in ready.drain(..) {
            if r.fd == listen_fd {
                if let (Some(l), None) = (&listener, accept_paused_until) {
                    if accept_batch(l, ctx, &mut poller, &mut conns, drain) == Accepted::OutOfFds {
                        // The listener stays readable: watching it would spin this thread.
                        poller.deregister(listen_fd);
                        accept_paused_until = Some(Instant::now() + ACCEPT_BACKOFF);
                    }
                }
            } else if conns.contains_key(&r.fd) {
                update(&mut poller, &mut conns, r.fd, drain, ctx, &mut scratch, true);
            }
        }
        let now = Instant::now();
        if now.duration_since(last_sweep) >= TICK {
            last_sweep = now;
            let expired: Vec<RawFd> = conns
                .iter()
                .filter(|(_, c)| ctx.expired(&c.session, now, &|| false))
                .map(|(fd, _)| *fd)
                .collect();
            for fd in expired {
                poller.deregister(fd);
                conns.remove(&fd);
            }
        }
    }
    for fd in conns.keys() {
        poller.deregister(*fd);
    }
    conns.clear();
    window.finish();
}

#[derive(Debug, PartialEq, Eq)]
enum Accepted {
    /// The backlog is empty, or a batch was taken (level-triggered reports the rest).
    Done,
    /// accept() failed for want of file descriptors: pause accepting (ACCEPT_BACKOFF).
    OutOfFds,
}

/// Accept waiting connections. Edge-triggered, the backlog must be drained: no new report
/// comes for connections already waiting (regression: 36 of 100 clients never accepted).
fn accept_batch<P: Poller>(
    listener: &TcpListener,
    ctx: &Arc<ServerCtx>,
    poller: &mut P,
    conns: &mut HashMap<RawFd, Conn>,
    drain: bool,
) -> Accepted {
    let limit = if drain { usize::MAX } else { ACCEPT_BATCH };
    for _ in 0..limit {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
            Err(e) if out_of_fds(&e) => return Accepted::OutOfFds,
            Err(_) => return Accepted::Done, // WouldBlock: the backlog is empty
        };
        let Some((stream, slot)) = ctx.admit(stream) else {
            continue;
        };
        let Ok(conn) = Conn::new(stream, slot) else { continue };
        let fd = conn.stream.as_raw_fd();
        if poller.register(fd, true, false).is_ok() {
            conns.insert(fd, conn);
        }
    }
    Accepted::Done
}

/// Pump one connection (when `io` is set) and re-register its interest, or close it.
fn update<P: Poller>(
    poller: &mut P,
    conns: &mut HashMap<RawFd, Conn>,
    fd: RawFd,
    drain: bool,
    ctx: &ServerCtx,
    scratch: &mut [u8],
    io: bool,
) {
    let Some(conn) = conns.get_mut(&fd) else { return };
    let progress = conn.pump(&ctx.handler, scratch, drain || !io);
    let close = progress == Progress::Close
        || (!drain
            && poller
                .register(fd, conn.session.wants_read(), !conn.session.pending().is_empty())
                .is_err());
    if close {
        poller.deregister(fd);
        conns.remove(&fd);
    }
}
