//! io_uring: one thread keeps an accept, and per connection a recv, in flight, and sends
//! replies as completions; no readiness step at all.

use super::{spawn_named, ACCEPT_BACKOFF};
use crate::observation::Unsupported;
use crate::servers::conn::{Session, TICK};
use crate::servers::handler::ServerStats;
use crate::servers::server::{bind_listener, ServerCtx, Slot};
use crate::sys::multiplex;
use crate::sys::uring::{adopt_accepted, Completion, Ring};
use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const ACCEPT: u64 = 0;
const RECV: u64 = 1;
const SEND: u64 = 2;
const RECV_BUFFER: usize = 16 << 10;
const STOP_GRACE: Duration = Duration::from_secs(2);

struct UConn {
    // The place under --max-conns, given back when the connection is shut (before the
    // shutdown that the peer sees as the close), not when the kernel has finished with the
    // socket: a pending recv completes only after the shutdown, and a client that reconnects
    // the moment it reads the close was told "server full".
    slot: Option<Slot>,
    stream: TcpStream,
    session: Session,
    shut: bool,
}

fn token(id: u64, op: u64) -> u64 {
    (id << 2) | op
}

pub fn spawn(ctx: &Arc<ServerCtx>) -> anyhow::Result<(SocketAddr, Vec<JoinHandle<()>>)> {
    let ring = Ring::new(4096).map_err(|e| match Unsupported::refused("io_uring", &e) {
        Some(refused) => anyhow::Error::new(refused),
        None => anyhow::anyhow!("cannot set up an io_uring: {e}"),
    })?;
    let listener =
        bind_listener(ctx.config.listen).map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", ctx.config.listen))?;
    // io_uring answers EAGAIN instead of waiting on an O_NONBLOCK socket.
    listener.set_nonblocking(false)?;
    let addr = listener.local_addr()?;
    let ctx = ctx.clone();
    let t = spawn_named("srv-uring", move || run(&ctx, listener, ring))?;
    Ok((addr, vec![t]))
}

struct Loop<'a> {
    ctx: &'a Arc<ServerCtx>,
    ring: Ring,
    conns: HashMap<u64, UConn>,
    next_id: u64,
    /// Out of descriptors: the next accept is submitted only then (an accept submitted at once
    /// would fail at once, and the loop would spin).
    accept_paused_until: Option<Instant>,
}

impl Loop<'_> {
    /// Keep a recv and, when output is owed, a send in flight; shut a finished connection
    /// (which completes its recv) and free it once the kernel holds nothing of it.
    fn drive(&mut self, id: u64, spare: Option<Vec<u8>>) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        let fd = c.stream.as_raw_fd();
        let (recv_t, send_t) = (token(id, RECV), token(id, SEND));
        if !self.ring.is_pending(send_t) && !c.session.pending().is_empty() && !c.shut {
            let out = c.session.take_output();
            if self.ring.send(fd, out, 0, send_t).is_err() {
                c.shut = true;
            }
        }
        if !c.shut && !self.ring.is_pending(recv_t) && c.session.wants_read() {
            let buf = spare.unwrap_or_else(|| vec![0u8; RECV_BUFFER]);
            if self.ring.recv(fd, buf, recv_t).is_err() {
                c.shut = true;
            }
        }
        if !c.shut && c.session.finished() && !self.ring.is_pending(send_t) {
            c.shut = true;
        }
        if c.shut {
            drop(c.slot.take());
            multiplex::shutdown_both(fd);
            if !self.ring.is_pending(recv_t) && !self.ring.is_pending(send_t) {
                self.conns.remove(&id);
            }
        }
    }

    fn complete(&mut self, done: Completion, accepting: bool, listen_fd: i32) {
        let (id, op) = (done.token >> 2, done.token & 3);
        if done.token == ACCEPT {
            if done.result >= 0 {
                if let Some(stream) = adopt_accepted(done.result) {
                    if let Some((stream, slot)) = self.ctx.admit(stream) {
                        let id = self.next_id;
                        self.next_id += 1;
                        self.conns.insert(
                            id,
                            UConn {
                                stream,
                                session: Session::for_slot(&slot),
                                shut: false,
                                slot: Some(slot),
                            },
                        );
                        self.drive(id, None);
                    }
                }
            } else if -done.result == libc::EMFILE || -done.result == libc::ENFILE {
                self.accept_paused_until = Some(Instant::now() + ACCEPT_BACKOFF);
                return;
            }
            if accepting {
                let _ = self.ring.accept(listen_fd, ACCEPT);
            }
            return;
        }
        let ctx = self.ctx.clone();
        let Some(c) = self.conns.get_mut(&id) else { return };
        let mut spare = None;
        match op {
            RECV => {
                let buf = done.buffer.unwrap_or_default();
                match done.result {
                    n if n > 0 => {
                        let n = (n as usize).min(buf.len());
                        ServerStats::bump(&ctx.handler.stats.bytes_in, n as u64);
                        c.session.feed(&buf[..n], &ctx.handler);
                    }
                    0 => c.session.peer_closed = true,
                    _ => {
                        if !c.shut {
                            ServerStats::bump(&ctx.handler.stats.io_errors, 1);
                        }
                        c.shut = true;
                    }
                }
                spare = Some(buf);
            }
            SEND => {
                let buf = done.buffer.unwrap_or_default();
                if done.result < 0 {
                    if !c.shut {
                        ServerStats::bump(&ctx.handler.stats.io_errors, 1);
                    }
                    c.shut = true;
                } else {
                    let sent = (done.result as usize).min(buf.len());
                    ServerStats::bump(&ctx.handler.stats.bytes_out, sent as u64);
                    c.session.sent(buf[sent..].to_vec());
                }
            }
            _ => {}
        }
        self.drive(id, spare);
    }
}

fn run(ctx: &Arc<ServerCtx>, listener: TcpListener, ring: Ring) {
    ctx.pin_thread();
    let mut window = ctx.thread_window();
    let listen_fd = listener.as_raw_fd();
    let mut lp = Loop {
        ctx,
        ring,
        conns: HashMap::new(),
        next_id: 1,
        accept_paused_until: None,
    };
    if lp.ring.accept(listen_fd, ACCEPT).is_err() {
        return;
    }
    let mut completions = Vec::with_capacity(1024);
    let mut stopping_since: Option<Instant> = None;
    let mut last_sweep = Instant::now();
    loop {
        window.tick();
        if stopping_since.is_none() && ctx.stop_requested() {
            stopping_since = Some(Instant::now());
            // Wake the pending accept; the listener closes when this function returns.
            multiplex::shutdown_both(listen_fd);
            let ids: Vec<u64> = lp.conns.keys().copied().collect();
            for id in ids {
                if let Some(c) = lp.conns.get_mut(&id) {
                    c.session.closing = true;
                }
                lp.drive(id, None);
            }
        }
        if let Some(since) = stopping_since {
            let accept_done = !lp.ring.is_pending(ACCEPT);
            if (lp.conns.is_empty() && accept_done) || since.elapsed() > STOP_GRACE {
                break;
            }
        }
        let mut wait = TICK;
        if let Some(until) = lp.accept_paused_until {
            let now = Instant::now();
            if stopping_since.is_some() {
                lp.accept_paused_until = None;
            } else if now >= until {
                lp.accept_paused_until = None;
                let _ = lp.ring.accept(listen_fd, ACCEPT);
            } else {
                wait = wait.min(until - now);
            }
        }
        if lp.ring.submit_and_wait(wait, &mut completions).is_err() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let accepting = stopping_since.is_none();
        for done in completions.drain(..) {
            lp.complete(done, accepting, listen_fd);
        }
        if last_sweep.elapsed() >= TICK {
            let now = Instant::now();
            last_sweep = now;
            let idle: Vec<u64> = lp
                .conns
                .iter()
                .filter(|(_, c)| !c.shut && ctx.expired(&c.session, now, &|| false))
                .map(|(id, _)| *id)
                .collect();
            for id in idle {
                if let Some(c) = lp.conns.get_mut(&id) {
                    c.shut = true;
                }
                lp.drive(id, None);
            }
        }
    }
    // Ring's drop cancels and waits for anything still in flight before buffers are freed.
    drop(lp);
    drop(listener);
    window.finish();
}
