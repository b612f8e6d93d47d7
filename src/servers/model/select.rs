//! select(2): fd_sets rebuilt on every wait; fds at or above FD_SETSIZE (1024) cannot be
//! watched, so the select thread gets its own fd table (its fds start low, as in a separate
//! server process) and connections beyond the limit are refused with a reason.

use super::event_loop::{self, Poller, Ready};
use super::spawn_named;
use crate::servers::server::{bind_listener, ServerCtx};
use crate::sys::multiplex::{self, FdSet};
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Default)]
pub struct SelectPoller {
    interest: BTreeMap<RawFd, (bool, bool)>,
}

impl Poller for SelectPoller {
    fn register(&mut self, fd: RawFd, read: bool, write: bool) -> io::Result<()> {
        if fd >= multiplex::FD_SETSIZE {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "fd above FD_SETSIZE"));
        }
        self.interest.insert(fd, (read, write));
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) {
        self.interest.remove(&fd);
    }

    fn wait(&mut self, timeout: Duration, ready: &mut Vec<Ready>) -> io::Result<()> {
        let (mut reads, mut writes) = (FdSet::new(), FdSet::new());
        let mut nfds = 0;
        for (&fd, &(read, write)) in &self.interest {
            if read {
                reads.insert(fd);
            }
            if write {
                writes.insert(fd);
            }
            nfds = nfds.max(fd + 1);
        }
        if multiplex::select(nfds, &mut reads, &mut writes, timeout)? == 0 {
            return Ok(());
        }
        for &fd in self.interest.keys() {
            if reads.contains(fd) || writes.contains(fd) {
                ready.push(Ready { fd });
            }
        }
        Ok(())
    }
}

pub fn spawn(ctx: &Arc<ServerCtx>) -> anyhow::Result<(SocketAddr, Vec<JoinHandle<()>>)> {
    let (tx, rx) = std::sync::mpsc::channel::<Result<SocketAddr, String>>();
    let ctx = ctx.clone();
    let t = spawn_named("srv-select", move || {
        // A private copy of the fd table: fds opened from here on are this thread's own.
        if let Err(e) = multiplex::unshare_fd_table() {
            let _ = tx.send(Err(format!("unshare(CLONE_FILES) failed: {e}")));
            return;
        }
        let listener = match bind_listener(ctx.config.listen) {
            Ok(l) => l,
            Err(e) => {
                let _ = tx.send(Err(format!("cannot listen on {}: {e}", ctx.config.listen)));
                return;
            }
        };
        match listener.local_addr() {
            Ok(addr) => {
                let _ = tx.send(Ok(addr));
            }
            Err(e) => {
                let _ = tx.send(Err(e.to_string()));
                return;
            }
        }
        event_loop::run(&ctx, listener, SelectPoller::default());
    })?;
    match rx.recv() {
        Ok(Ok(addr)) => Ok((addr, vec![t])),
        Ok(Err(msg)) => {
            let _ = t.join();
            anyhow::bail!(msg)
        }
        Err(_) => {
            let _ = t.join();
            anyhow::bail!("the select server thread ended before listening")
        }
    }
}
