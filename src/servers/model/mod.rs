//! The server concurrency models. Each one serves the same protocol through the same handler
//! (`conn.rs`); they differ only in how connections get a thread's attention.

mod epoll;
mod event_loop;
mod iterative;
mod poll;
mod pool;
mod select;
mod threads;
mod uring;

use super::server::{bind_listener, ServerCtx};
use crate::sys::multiplex;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub use crate::case::Model;

/// The servers' side of a model (its name and parsing live with the case).
impl Model {
    /// The highest fd the model can watch, if it has such a limit (select's FD_SETSIZE).
    pub fn fd_limit(self) -> Option<i32> {
        (self == Model::Select).then_some(multiplex::FD_SETSIZE)
    }
}

/// Start the model's threads on a new listener; returns the bound address and the threads.
pub fn spawn(ctx: &Arc<ServerCtx>) -> anyhow::Result<(SocketAddr, Vec<JoinHandle<()>>)> {
    match ctx.config.model {
        // select gets its own fd table so its fds stay below FD_SETSIZE, as they would in a
        // separate server process; it therefore binds its listener itself.
        Model::Select => select::spawn(ctx),
        Model::Uring => uring::spawn(ctx),
        model => {
            let listener = bind_listener(ctx.config.listen)
                .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", ctx.config.listen))?;
            let addr = listener.local_addr()?;
            let threads = match model {
                Model::Iterative => iterative::spawn(ctx, listener)?,
                Model::Threads => threads::spawn(ctx, listener)?,
                Model::Pool => pool::spawn(ctx, listener)?,
                Model::Poll => event_loop::spawn(ctx, listener, poll::PollPoller::default())?,
                Model::Epoll => event_loop::spawn(ctx, listener, epoll::EpollPoller::new(false)?)?,
                Model::EpollEt => event_loop::spawn(ctx, listener, epoll::EpollPoller::new(true)?)?,
                Model::Select | Model::Uring => unreachable!("handled above"),
            };
            Ok((addr, threads))
        }
    }
}

/// Whether a connection waits in the listener's backlog (without accepting it).
fn listener_ready(listener: &TcpListener) -> io::Result<bool> {
    let mut fds = [libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    Ok(multiplex::poll(&mut fds, Duration::ZERO)? > 0)
}

/// Wait up to `timeout` for a connection on a non-blocking listener.
fn accept_within(listener: &TcpListener, timeout: Duration) -> io::Result<Option<TcpStream>> {
    let mut fds = [libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    if multiplex::poll(&mut fds, timeout)? == 0 {
        return Ok(None);
    }
    accept_now(listener)
}

/// Accept one pending connection, if any, as a blocking socket.
fn accept_now(listener: &TcpListener) -> io::Result<Option<TcpStream>> {
    match listener.accept() {
        Ok((stream, _)) => {
            stream.set_nonblocking(false)?;
            Ok(Some(stream))
        }
        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => Ok(None),
        // The peer gave up before we accepted: the listener itself is fine.
        Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => Ok(None),
        // Descriptors ran out: the listener stays readable, so back off instead of spinning.
        Err(e) if out_of_fds(&e) => {
            std::thread::sleep(ACCEPT_BACKOFF);
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// How long a model stops accepting after accept() failed for want of file descriptors
/// (EMFILE/ENFILE). The connection stays in the backlog; polling the still-readable listener
/// meanwhile would spin a CPU. Short enough that a freed descriptor is used promptly.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);

/// accept() failed because this process (EMFILE) or the system (ENFILE) has no descriptor left.
pub fn out_of_fds(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

fn spawn_named(name: &str, f: impl FnOnce() + Send + 'static) -> anyhow::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| anyhow::anyhow!("cannot start server thread: {e}"))
}
