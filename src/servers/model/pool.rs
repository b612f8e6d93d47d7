//! Fixed thread pool: `--pool-size` workers share one epoll instance. Every socket is armed
//! with EPOLLONESHOT, so a ready connection goes to exactly one worker, which serves what it
//! has received and re-arms it. Workers also take turns accepting.

use super::{out_of_fds, spawn_named, ACCEPT_BACKOFF};
use crate::servers::conn::{Conn, Progress, TICK};
use crate::servers::server::ServerCtx;
use crate::sys::multiplex::Epoll;
use std::collections::HashMap;
use std::io;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const LISTENER: u64 = 0;
const ONESHOT: u32 = (libc::EPOLLONESHOT | libc::EPOLLRDHUP) as u32;

struct Pool {
    epoll: Epoll,
    listener: TcpListener,
    conns: Mutex<HashMap<u64, Arc<Mutex<Conn>>>>,
    next_token: AtomicU64,
    /// Out of descriptors: the listener is left disarmed until then (worker 0 re-arms it).
    accept_paused_until: Mutex<Option<Instant>>,
}

fn interest(conn: &Conn) -> u32 {
    let mut ev = ONESHOT;
    if conn.session.wants_read() {
        ev |= libc::EPOLLIN as u32;
    }
    if !conn.session.pending().is_empty() {
        ev |= libc::EPOLLOUT as u32;
    }
    ev
}

impl Pool {
    fn remove(&self, token: u64) -> Option<Arc<Mutex<Conn>>> {
        self.conns.lock().ok()?.remove(&token)
    }

    fn accept(&self, ctx: &Arc<ServerCtx>) {
        for _ in 0..64 {
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
                Err(e) if out_of_fds(&e) => {
                    // Re-arming now would report the still-readable listener at once, and the
                    // workers would spin: leave it disarmed for a moment.
                    if let Ok(mut paused) = self.accept_paused_until.lock() {
                        *paused = Some(Instant::now() + ACCEPT_BACKOFF);
                    }
                    return;
                }
                Err(_) => break,
            };
            let Some((stream, slot)) = ctx.admit(stream) else {
                continue;
            };
            let Ok(conn) = Conn::new(stream, slot) else { continue };
            let fd = conn.stream.as_raw_fd();
            let token = self.next_token.fetch_add(1, Ordering::Relaxed);
            let Ok(mut conns) = self.conns.lock() else { return };
            conns.insert(token, Arc::new(Mutex::new(conn)));
            drop(conns);
            if self.epoll.add(fd, ONESHOT | libc::EPOLLIN as u32, token).is_err() {
                self.remove(token);
            }
        }
        let _ = self
            .epoll
            .modify(self.listener.as_raw_fd(), ONESHOT | libc::EPOLLIN as u32, LISTENER);
    }

    /// Re-arm the listener once an out-of-descriptors pause is over; how long until then.
    fn resume_accepting(&self) -> Option<Duration> {
        let mut paused = self.accept_paused_until.lock().ok()?;
        let until = (*paused)?;
        let now = Instant::now();
        if now < until {
            return Some(until - now);
        }
        *paused = None;
        let _ = self
            .epoll
            .modify(self.listener.as_raw_fd(), ONESHOT | libc::EPOLLIN as u32, LISTENER);
        None
    }

    /// Serve one ready connection and re-arm it, or close it.
    fn serve(&self, ctx: &ServerCtx, token: u64, scratch: &mut [u8], flush_only: bool) {
        let conn = match self.conns.lock() {
            Ok(conns) => conns.get(&token).cloned(),
            Err(_) => None,
        };
        let Some(conn) = conn else { return };
        let Ok(mut c) = conn.lock() else { return };
        if flush_only {
            c.session.closing = true;
        }
        let keep = c.pump(&ctx.handler, scratch, true) == Progress::Open
            && self.epoll.modify(c.stream.as_raw_fd(), interest(&c), token).is_ok();
        if !keep {
            let _ = self.epoll.delete(c.stream.as_raw_fd());
            drop(c);
            self.remove(token);
        }
    }

    /// Close connections idle past the timeout (skipping any a worker holds right now).
    fn sweep_idle(&self, ctx: &ServerCtx) {
        let now = Instant::now();
        let idle: Vec<u64> = match self.conns.lock() {
            Ok(conns) => conns
                .iter()
                .filter(|(_, c)| c.try_lock().is_ok_and(|c| ctx.expired(&c.session, now, &|| false)))
                .map(|(t, _)| *t)
                .collect(),
            Err(_) => return,
        };
        for token in idle {
            if let Some(conn) = self.remove(token) {
                if let Ok(c) = conn.lock() {
                    let _ = self.epoll.delete(c.stream.as_raw_fd());
                }
            }
        }
    }
}

/// Address space one worker takes: Rust's default 2 MiB stack plus its guard page.
const WORKER_ADDRESS_SPACE: u64 = (2 << 20) + 4096;
/// What the rest of the process and glibc's per-thread malloc arenas (64 MiB each, at most 8 per
/// CPU) may still need once the workers run.
const ADDRESS_SPACE_MARGIN: u64 = 256 << 20;

/// Refuse a pool whose stacks cannot fit under RLIMIT_AS (`ulimit -v`) before starting any of
/// it: spawning until the address space runs out leaves no room for anything else, and the
/// next allocation anywhere aborts the process.
fn check_address_space(workers: usize) -> anyhow::Result<()> {
    use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};
    let Ok((limit, _)) = getrlimit(Resource::RLIMIT_AS) else {
        return Ok(());
    };
    if limit == RLIM_INFINITY {
        return Ok(());
    }
    let used = crate::sys::procfs::read_trimmed("/proc/self/status")
        .and_then(|t| crate::sys::procfs::meminfo_field(&t, "VmSize:"))
        .unwrap_or(0);
    let arenas =
        (workers as u64).min(8 * std::thread::available_parallelism().map_or(1, |n| n.get()) as u64) * (64 << 20);
    let need = workers as u64 * WORKER_ADDRESS_SPACE + arenas + ADDRESS_SPACE_MARGIN;
    if used.saturating_add(need) > limit {
        anyhow::bail!(
            "the pool's {workers} workers need about {} of address space (thread stacks and malloc arenas) but RLIMIT_AS (ulimit -v) is {} with {} in use: use a smaller --pool-size or raise ulimit -v",
            crate::format::format_bytes(need),
            crate::format::format_bytes(limit),
            crate::format::format_bytes(used)
        );
    }
    Ok(())
}

pub fn spawn(ctx: &Arc<ServerCtx>, listener: TcpListener) -> anyhow::Result<Vec<JoinHandle<()>>> {
    check_address_space(ctx.config.pool_size.max(1))?;
    let epoll = Epoll::new()?;
    epoll.add(listener.as_raw_fd(), ONESHOT | libc::EPOLLIN as u32, LISTENER)?;
    let pool = Arc::new(Pool {
        epoll,
        listener,
        conns: Mutex::new(HashMap::new()),
        next_token: AtomicU64::new(LISTENER + 1),
        accept_paused_until: Mutex::new(None),
    });
    let mut threads = Vec::new();
    for index in 0..ctx.config.pool_size.max(1) {
        let (worker_ctx, worker_pool) = (ctx.clone(), pool.clone());
        let spawned = spawn_named(&format!("srv-pool-{index}"), move || {
            worker(&worker_ctx, &worker_pool, index)
        });
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                // Stop the workers already started before reporting.
                ctx.request_stop();
                for t in threads {
                    let _ = t.join();
                }
                return Err(e);
            }
        }
    }
    Ok(threads)
}

fn worker(ctx: &Arc<ServerCtx>, pool: &Pool, index: usize) {
    ctx.pin_thread();
    let mut window = ctx.thread_window();
    let mut scratch = crate::servers::conn::read_buffer();
    let mut events = Vec::with_capacity(1);
    let mut last_sweep = Instant::now();
    while !ctx.stop_requested() {
        window.tick();
        let mut wait = TICK;
        if index == 0 {
            if let Some(left) = pool.resume_accepting() {
                wait = wait.min(left);
            }
        }
        if pool.epoll.wait(&mut events, 1, wait).is_err() {
            continue;
        }
        for ev in events.drain(..) {
            if ev.token == LISTENER {
                pool.accept(ctx);
            } else {
                pool.serve(ctx, ev.token, &mut scratch, false);
            }
        }
        if index == 0 && last_sweep.elapsed() >= TICK {
            last_sweep = Instant::now();
            pool.sweep_idle(ctx);
        }
    }
    // Stopping: worker 0 flushes replies still owed, then every connection is closed.
    if index == 0 {
        let _ = pool.epoll.delete(pool.listener.as_raw_fd());
        let tokens: Vec<u64> = pool
            .conns
            .lock()
            .map(|c| c.keys().copied().collect())
            .unwrap_or_default();
        for token in tokens {
            pool.serve(ctx, token, &mut scratch, true);
        }
        if let Ok(mut conns) = pool.conns.lock() {
            conns.clear();
        }
    }
    window.finish();
}
