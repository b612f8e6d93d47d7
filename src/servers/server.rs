//! Starting and stopping a server of any model: its configuration, the state its threads
//! share, connection admission (`--max-conns`), and the handle that stops and joins it.

pub use super::admission::Slot;
use super::admission::{Admission, Entry, FULL_IDLE};
use super::conn::Session;
use super::handler::{Handler, ServerStats};
use super::model::{self, Model};
use super::protocol::{self, ErrorCode, ProtocolError};
use super::window::{ThreadWindow, Window};
use crate::sys::multiplex;
use socket2::{Domain, Socket, Type};
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// With the per-address cap, the iterative model's turn while a client waits in its backlog:
/// short, since every connection queued ahead of a newcomer may take a whole one.
pub const TURN: Duration = Duration::from_millis(100);

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub model: Model,
    pub listen: SocketAddr,
    /// Connections served at once; one more is answered with a server-full error and closed.
    pub max_conns: usize,
    /// A connection that sends nothing for this long is closed.
    pub idle_timeout: Duration,
    /// A frame must arrive whole within this long of its first byte, or the connection is
    /// closed (a client trickling bytes cannot hold a slot).
    pub frame_timeout: Duration,
    /// Worker threads of the pool model.
    pub pool_size: usize,
    /// CPUs the server threads are pinned to.
    pub cpus: Option<Vec<usize>>,
    /// Rank procs requests by CPU used over this interval too (a sampler thread).
    pub procs_interval: Option<Duration>,
    /// Also stop when SIGINT/SIGTERM arrives (the handler must be installed by the caller).
    pub follow_signals: bool,
    /// The per-address cap (admission.rs, rule 3; the iterative model's turn): one address
    /// never keeps every place, or the one turn, from another. `procs serve` has it; the
    /// measured server of `servers`, whose clients are all one address, has it off.
    pub per_address: bool,
}

impl ServerConfig {
    pub fn new(model: Model, listen: SocketAddr) -> ServerConfig {
        ServerConfig {
            model,
            listen,
            max_conns: 10_000,
            idle_timeout: Duration::from_secs(30),
            frame_timeout: Duration::from_secs(5),
            pool_size: 4,
            cpus: None,
            procs_interval: None,
            follow_signals: false,
            per_address: true,
        }
    }
}

/// What every thread of a running server shares.
pub struct ServerCtx {
    pub config: ServerConfig,
    pub handler: Handler,
    pub window: Option<Arc<Window>>,
    stop: AtomicBool,
    /// The places under `--max-conns` and who holds them (admission.rs).
    admission: Arc<Admission>,
}

impl ServerCtx {
    /// Whether a connection must be closed now (the reason is counted): a frame begun more
    /// than the frame timeout ago, or idle past the idle timeout. When `others_waiting` (the
    /// iterative model's backlog, whose clients are not admitted until this one is done; asked
    /// only when it matters) a connection gives its turn up as admission would give its place
    /// up (admission.rs): a frame too slow to arrive within the frame timeout, or quiet for
    /// FULL_IDLE; and, with the per-address cap, quiet between requests after a turn of TURN
    /// (one address cannot keep the one turn from another by asking without pause).
    /// A frame arriving steadily keeps its turn, pauses and all.
    pub fn expired(&self, session: &Session, now: Instant, others_waiting: &dyn Fn() -> bool) -> bool {
        let stats = &self.handler.stats;
        if session
            .frame_started
            .is_some_and(|t| now.saturating_duration_since(t) >= self.config.frame_timeout)
        {
            ServerStats::bump(&stats.slow_closed, 1);
            return true;
        }
        let idle = session.idle_for(now);
        if idle >= self.config.idle_timeout {
            ServerStats::bump(&stats.idle_closed, 1);
            return true;
        }
        let progress = session.standing();
        let quiet = progress.quiet();
        let slow_frame = progress.stalled_for(now, self.config.frame_timeout).is_some();
        let turn_over = self.config.per_address && session.turn_for(now) >= TURN;
        if (quiet && (idle >= FULL_IDLE || turn_over) || slow_frame) && others_waiting() {
            ServerStats::bump(&stats.evicted, 1);
            return true;
        }
        false
    }

    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || (self.config.follow_signals && crate::sys::signal::stop_requested())
    }

    /// Set the stop flag (the server's own, not the signal one).
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    pub fn active(&self) -> usize {
        self.admission.active()
    }

    /// The calling server thread's view of the measured window (if any), which also records
    /// where the thread ran.
    pub fn thread_window(&self) -> ThreadWindow<'_> {
        ThreadWindow::new(self.window.as_deref(), self.config.cpus.as_deref())
    }

    /// Pin the calling server thread where the config says (errors are reported once by start).
    pub fn pin_thread(&self) {
        if let Some(cpus) = &self.config.cpus {
            let _ = crate::sys::affinity::pin_current_thread(cpus);
        }
    }

    /// Admit a new connection or refuse it. Over `--max-conns` the newcomer takes the place
    /// of a peer that gives way (admission.rs: a frame too slow to arrive within the frame
    /// timeout, or, while newcomers are turned away, a quiet peer idle for FULL_IDLE), whose
    /// socket is shut down for its model to close; with none, (or, for select, an fd too high
    /// to watch) the peer gets a server-full error frame and the socket is closed.
    pub fn admit(self: &Arc<Self>, stream: TcpStream) -> Option<(TcpStream, Slot)> {
        let fd = stream.as_raw_fd();
        let too_high_fd = self.config.model.fd_limit().is_some_and(|limit| fd >= limit);
        let entry = if too_high_fd {
            Entry::Full
        } else {
            // The peer's address only where the per-address cap needs it (a measured server
            // makes no extra call per connection).
            let peer = self.config.per_address.then(|| stream.peer_addr().ok()).flatten();
            self.admission.enter(fd, peer.map(|a| a.ip()))
        };
        let slot = match entry {
            Entry::Free(slot) => slot,
            Entry::InPlaceOf(slot) => {
                ServerStats::bump(&self.handler.stats.evicted, 1);
                slot
            }
            Entry::Full => {
                let message = if too_high_fd {
                    format!(
                        "select() cannot watch fd {fd} (FD_SETSIZE is {})",
                        multiplex::FD_SETSIZE
                    )
                } else {
                    format!(
                        "server full: max-conns {} reached; connections idle over {} s, too slow to send a frame within the frame timeout or of an address holding more places than yours give way to newcomers, retry shortly",
                        self.config.max_conns,
                        FULL_IDLE.as_secs()
                    )
                };
                refuse(stream, &message);
                ServerStats::bump(&self.handler.stats.refused, 1);
                return None;
            }
        };
        ServerStats::bump(&self.handler.stats.accepted, 1);
        let _ = stream.set_nodelay(true);
        Some((stream, slot))
    }
}

fn refuse(mut stream: TcpStream, message: &str) {
    let mut frame = Vec::new();
    protocol::encode_error(&ProtocolError::new(ErrorCode::ServerFull, message), &mut frame);
    // A fresh socket's send buffer holds this small frame without blocking.
    let _ = stream.set_nonblocking(true);
    let _ = stream.write(&frame);
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

/// A listening socket with a deep backlog (thousands of clients connect at once), non-blocking.
pub fn bind_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// A started server: where it listens, and how to stop it.
pub struct RunningServer {
    pub addr: SocketAddr,
    ctx: Arc<ServerCtx>,
    threads: Vec<JoinHandle<()>>,
}

/// What the server counted, for reports and warnings.
#[derive(Debug, Clone, Default)]
pub struct ServerSummary {
    pub accepted: u64,
    pub refused: u64,
    pub requests: u64,
    pub protocol_errors: u64,
    pub idle_closed: u64,
    pub slow_closed: u64,
    pub evicted: u64,
    pub io_errors: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub threads_joined: usize,
}

impl RunningServer {
    /// Ask the server to stop: it stops accepting, sends replies to requests it already has,
    /// closes every connection and its threads return.
    pub fn request_stop(&self) {
        self.ctx.stop.store(true, Ordering::SeqCst);
    }

    /// Stop, join every thread, and report.
    pub fn stop(mut self) -> ServerSummary {
        self.request_stop();
        let mut joined = 0;
        for t in self.threads.drain(..) {
            if t.join().is_ok() {
                joined += 1;
            }
        }
        self.ctx.handler.shutdown();
        let s = &self.ctx.handler.stats;
        let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::SeqCst);
        ServerSummary {
            accepted: get(&s.accepted),
            refused: get(&s.refused),
            requests: get(&s.requests),
            protocol_errors: get(&s.protocol_errors),
            idle_closed: get(&s.idle_closed),
            slow_closed: get(&s.slow_closed),
            evicted: get(&s.evicted),
            io_errors: get(&s.io_errors),
            bytes_in: get(&s.bytes_in),
            bytes_out: get(&s.bytes_out),
            threads_joined: joined,
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        // Never leave server threads behind, also on an early return or a panic upstream.
        self.ctx.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Bind and start a server of the configured model. `window`, when given, is the measured
/// window its threads count CPU and perf counters in.
pub fn start(config: ServerConfig, window: Option<Arc<Window>>) -> anyhow::Result<RunningServer> {
    if let Some(cpus) = &config.cpus {
        // Check the CPUs once here so threads can pin without reporting.
        let probe = std::thread::spawn({
            let cpus = cpus.clone();
            move || crate::sys::affinity::pin_current_thread(&cpus)
        });
        match probe.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => anyhow::bail!("cannot pin server threads to CPUs {cpus:?}: {e}"),
            Err(_) => anyhow::bail!("cannot pin server threads to CPUs {cpus:?}"),
        }
    }
    let ctx = Arc::new(ServerCtx {
        handler: Handler::new(config.procs_interval),
        admission: Arc::new(Admission::new(
            config.max_conns,
            config.frame_timeout,
            config.per_address,
        )),
        config,
        window,
        stop: AtomicBool::new(false),
    });
    let (addr, threads) = model::spawn(&ctx).inspect_err(|_| ctx.handler.shutdown())?;
    Ok(RunningServer { addr, ctx, threads })
}
