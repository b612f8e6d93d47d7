//! poll(2): the watched set is rebuilt into a pollfd array on every wait.

use super::event_loop::{Poller, Ready};
use crate::sys::multiplex;
use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

#[derive(Default)]
pub struct PollPoller {
    interest: BTreeMap<RawFd, (bool, bool)>,
    fds: Vec<libc::pollfd>,
}

impl Poller for PollPoller {
    fn register(&mut self, fd: RawFd, read: bool, write: bool) -> io::Result<()> {
        self.interest.insert(fd, (read, write));
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) {
        self.interest.remove(&fd);
    }

    fn wait(&mut self, timeout: Duration, ready: &mut Vec<Ready>) -> io::Result<()> {
        self.fds.clear();
        for (&fd, &(read, write)) in &self.interest {
            let mut events = 0;
            if read {
                events |= libc::POLLIN;
            }
            if write {
                events |= libc::POLLOUT;
            }
            self.fds.push(libc::pollfd { fd, events, revents: 0 });
        }
        if multiplex::poll(&mut self.fds, timeout)? == 0 {
            return Ok(());
        }
        for p in &self.fds {
            if p.revents != 0 {
                ready.push(Ready { fd: p.fd });
            }
        }
        Ok(())
    }
}
