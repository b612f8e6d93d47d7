//! Thread per connection: an acceptor thread starts a new thread for each connection, which
//! serves it with blocking calls. Finished threads are joined as the acceptor goes; the rest
//! when the server stops.

use super::{accept_within, spawn_named};
use crate::servers::conn::{serve_blocking, TICK};
use crate::servers::server::ServerCtx;
use std::net::TcpListener;
use std::sync::Arc;
use std::thread::JoinHandle;

pub fn spawn(ctx: &Arc<ServerCtx>, listener: TcpListener) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let ctx = ctx.clone();
    let t = spawn_named("srv-acceptor", move || {
        ctx.pin_thread();
        // The acceptor's own CPU counts too.
        let mut window = ctx.thread_window();
        let mut workers: Vec<JoinHandle<()>> = Vec::new();
        while !ctx.stop_requested() {
            window.tick();
            match accept_within(&listener, TICK) {
                Ok(Some(stream)) => {
                    let Some((stream, slot)) = ctx.admit(stream) else {
                        continue;
                    };
                    let worker_ctx = ctx.clone();
                    let spawned = std::thread::Builder::new()
                        .name("srv-conn".into())
                        .stack_size(256 << 10)
                        .spawn(move || {
                            worker_ctx.pin_thread();
                            let mut window = worker_ctx.thread_window();
                            let mut scratch = crate::servers::conn::read_buffer();
                            serve_blocking(stream, slot, &worker_ctx, &mut window, &mut scratch, &|| false);
                        });
                    // No thread (out of memory or task limit): the connection is dropped,
                    // which the client sees as a closed connection.
                    if let Ok(handle) = spawned {
                        workers.push(handle);
                    }
                }
                Ok(None) => {}
                Err(_) => std::thread::sleep(TICK),
            }
            if workers.len() > 64 {
                let (done, running): (Vec<_>, Vec<_>) = workers.into_iter().partition(|h| h.is_finished());
                for h in done {
                    let _ = h.join();
                }
                workers = running;
            }
        }
        window.finish();
        drop(listener);
        for h in workers {
            let _ = h.join();
        }
    })?;
    Ok(vec![t])
}
