//! epoll(7), level- or edge-triggered. Level-triggered changes the watched events only when
//! a connection's interest changes; edge-triggered registers read and write once and relies on
//! the loop draining each socket until it would block.

use super::event_loop::{Poller, Ready};
use crate::sys::multiplex::{Epoll, EpollEvent};
use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

pub struct EpollPoller {
    epoll: Epoll,
    edge: bool,
    /// The events each fd is registered with, to skip needless epoll_ctl calls.
    registered: HashMap<RawFd, u32>,
    events: Vec<EpollEvent>,
}

impl EpollPoller {
    pub fn new(edge: bool) -> io::Result<EpollPoller> {
        Ok(EpollPoller {
            epoll: Epoll::new()?,
            edge,
            registered: HashMap::new(),
            events: Vec::new(),
        })
    }
}

impl Poller for EpollPoller {
    fn register(&mut self, fd: RawFd, read: bool, write: bool) -> io::Result<()> {
        let mut events = libc::EPOLLRDHUP as u32;
        if self.edge {
            events |= (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLET) as u32;
        } else {
            if read {
                events |= libc::EPOLLIN as u32;
            }
            if write {
                events |= libc::EPOLLOUT as u32;
            }
        }
        match self.registered.get(&fd) {
            Some(&current) if current == events => Ok(()),
            Some(_) => {
                self.epoll.modify(fd, events, fd as u64)?;
                self.registered.insert(fd, events);
                Ok(())
            }
            None => {
                self.epoll.add(fd, events, fd as u64)?;
                self.registered.insert(fd, events);
                Ok(())
            }
        }
    }

    fn deregister(&mut self, fd: RawFd) {
        if self.registered.remove(&fd).is_some() {
            let _ = self.epoll.delete(fd);
        }
    }

    fn wait(&mut self, timeout: Duration, ready: &mut Vec<Ready>) -> io::Result<()> {
        self.epoll.wait(&mut self.events, 256, timeout)?;
        for ev in &self.events {
            ready.push(Ready { fd: ev.token as RawFd });
        }
        Ok(())
    }

    fn edge_triggered(&self) -> bool {
        self.edge
    }
}
