//! Iterative: one thread accepts a connection and serves it to the end before accepting the
//! next. Other clients wait in the listen backlog.

use super::{accept_within, listener_ready, spawn_named};
use crate::servers::conn::{serve_blocking, TICK};
use crate::servers::server::ServerCtx;
use std::net::TcpListener;
use std::sync::Arc;
use std::thread::JoinHandle;

pub fn spawn(ctx: &Arc<ServerCtx>, listener: TcpListener) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let ctx = ctx.clone();
    let t = spawn_named("srv-iterative", move || {
        ctx.pin_thread();
        let mut window = ctx.thread_window();
        let mut scratch = crate::servers::conn::read_buffer();
        while !ctx.stop_requested() {
            window.tick();
            match accept_within(&listener, TICK) {
                Ok(Some(stream)) => {
                    if let Some((stream, slot)) = ctx.admit(stream) {
                        // Clients queued behind this one: it may not idle away their turn.
                        let waiting = || matches!(listener_ready(&listener), Ok(true));
                        serve_blocking(stream, slot, &ctx, &mut window, &mut scratch, &waiting);
                    }
                }
                Ok(None) => {}
                Err(_) => std::thread::sleep(TICK),
            }
        }
        window.finish();
    })?;
    Ok(vec![t])
}
