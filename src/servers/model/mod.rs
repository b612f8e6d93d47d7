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
use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Model {
    /// One connection at a time, blocking calls.
    Iterative,
    /// A new thread per connection, blocking calls.
    Threads,
    /// A fixed pool of threads sharing one epoll instance (EPOLLONESHOT hands each ready
    /// connection to exactly one worker).
    Pool,
    /// One thread, select(2).
    Select,
    /// One thread, poll(2).
    Poll,
    /// One thread, epoll level-triggered.
    Epoll,
    /// One thread, epoll edge-triggered (reads and writes until EAGAIN).
    EpollEt,
    /// One thread, io_uring accept/recv/send completions.
    Uring,
}

impl Model {
    pub const ALL: [Model; 8] = [
        Model::Iterative,
        Model::Threads,
        Model::Pool,
        Model::Select,
        Model::Poll,
        Model::Epoll,
        Model::EpollEt,
        Model::Uring,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Model::Iterative => "iterative",
            Model::Threads => "threads",
            Model::Pool => "pool",
            Model::Select => "select",
            Model::Poll => "poll",
            Model::Epoll => "epoll",
            Model::EpollEt => "epoll-et",
            Model::Uring => "uring",
        }
    }

    /// The highest fd the model can watch, if it has such a limit (select's FD_SETSIZE).
    pub fn fd_limit(self) -> Option<i32> {
        (self == Model::Select).then_some(multiplex::FD_SETSIZE)
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Model {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let alias = match s {
            "epoll-lt" => "epoll",
            "io_uring" | "io-uring" => "uring",
            "thread" | "thread-per-conn" => "threads",
            other => other,
        };
        Model::ALL.into_iter().find(|m| m.as_str() == alias).ok_or_else(|| {
            format!(
                "unknown model '{s}' (accepted: iterative, threads, pool, select, poll, epoll, epoll-et, uring, all)"
            )
        })
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
        // The peer gave up before we accepted (ECONNABORTED) or fds ran out (EMFILE): the
        // listener itself is fine; back off briefly so EMFILE does not spin.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ECONNABORTED) | Some(libc::EMFILE) | Some(libc::ENFILE)
            ) =>
        {
            std::thread::sleep(Duration::from_millis(5));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

fn spawn_named(name: &str, f: impl FnOnce() + Send + 'static) -> anyhow::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| anyhow::anyhow!("cannot start server thread: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_round_trip() {
        for m in Model::ALL {
            assert_eq!(m.as_str().parse::<Model>(), Ok(m));
        }
        assert_eq!("io_uring".parse::<Model>(), Ok(Model::Uring));
        assert!("forking".parse::<Model>().unwrap_err().contains("accepted"));
    }
}
