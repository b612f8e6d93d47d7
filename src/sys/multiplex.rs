//! Readiness system calls for the event-loop servers: select(2), poll(2) and epoll(7), as
//! thin safe wrappers; plus unshare(CLONE_FILES) so a server thread can own an fd table.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

fn timeout_ms(timeout: Duration) -> i32 {
    timeout.as_millis().min(i32::MAX as u128) as i32
}

fn check(rc: libc::c_int) -> io::Result<usize> {
    if rc < 0 {
        let err = io::Error::last_os_error();
        // A signal (Ctrl-C) interrupting the wait is "nothing ready yet".
        if err.raw_os_error() == Some(libc::EINTR) {
            return Ok(0);
        }
        return Err(err);
    }
    Ok(rc as usize)
}

/// The highest fd number select(2) can watch, plus one.
pub const FD_SETSIZE: RawFd = libc::FD_SETSIZE as RawFd;

/// An fd_set that refuses fds select cannot hold instead of writing out of bounds.
pub struct FdSet(libc::fd_set);

impl FdSet {
    pub fn new() -> FdSet {
        // SAFETY: fd_set is plain data; all zero is the empty set (FD_ZERO).
        FdSet(unsafe { std::mem::zeroed() })
    }

    /// Add `fd`; false when it is negative or >= FD_SETSIZE.
    pub fn insert(&mut self, fd: RawFd) -> bool {
        if !(0..FD_SETSIZE).contains(&fd) {
            return false;
        }
        // SAFETY: fd is within 0..FD_SETSIZE, checked above.
        unsafe { libc::FD_SET(fd, &mut self.0) };
        true
    }

    pub fn contains(&self, fd: RawFd) -> bool {
        // SAFETY: fd is within range, checked first.
        (0..FD_SETSIZE).contains(&fd) && unsafe { libc::FD_ISSET(fd, &self.0) }
    }
}

impl Default for FdSet {
    fn default() -> Self {
        FdSet::new()
    }
}

/// select(2) on read and write sets; `nfds` is the highest fd in either set plus one.
pub fn select(nfds: RawFd, read: &mut FdSet, write: &mut FdSet, timeout: Duration) -> io::Result<usize> {
    let mut tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: both sets are valid fd_sets we own, the exception set is null (allowed), tv is
    // a valid timeval, and nfds <= FD_SETSIZE because every fd was range-checked on insert.
    let rc = unsafe {
        libc::select(
            nfds.min(FD_SETSIZE),
            &mut read.0,
            &mut write.0,
            std::ptr::null_mut(),
            &mut tv,
        )
    };
    check(rc)
}

/// poll(2) over `fds`; returns how many have events.
pub fn poll(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<usize> {
    // SAFETY: the pointer and length describe a valid, writable slice of pollfd.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms(timeout)) };
    check(rc)
}

/// An epoll instance; events carry a u64 token chosen by the caller.
pub struct Epoll {
    fd: OwnedFd,
}

/// One ready event: the caller's token and the epoll flags.
#[derive(Debug, Clone, Copy)]
pub struct EpollEvent {
    pub token: u64,
    pub events: u32,
}

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes only flags and returns a new fd or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a freshly created descriptor that nothing else owns.
        Ok(Epoll {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev is a valid epoll_event (ignored for EPOLL_CTL_DEL); fds are plain ints and
        // the kernel reports bad ones as errors.
        let rc = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) };
        check(rc).map(|_| ())
    }

    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    pub fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Wait up to `timeout` and fill `out` (cleared first) with at most `max` (<= 256) events.
    pub fn wait(&self, out: &mut Vec<EpollEvent>, max: usize, timeout: Duration) -> io::Result<()> {
        out.clear();
        let mut raw = [libc::epoll_event { events: 0, u64: 0 }; 256];
        let max = max.clamp(1, raw.len());
        // SAFETY: raw is a writable array of at least `max` epoll_events.
        let rc = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                raw.as_mut_ptr(),
                max as libc::c_int,
                timeout_ms(timeout),
            )
        };
        let n = check(rc)?;
        for ev in &raw[..n] {
            // Copy out of the (packed on x86_64) struct before use.
            let (events, token) = (ev.events, ev.u64);
            out.push(EpollEvent { token, events });
        }
        Ok(())
    }
}

/// Give the calling thread its own copy of the fd table (unshare(CLONE_FILES)), so the fds it
/// opens get low numbers of their own, as in a separate server process.
pub fn unshare_fd_table() -> io::Result<()> {
    // SAFETY: unshare takes only flags; CLONE_FILES affects only the calling thread's table.
    let rc = unsafe { libc::unshare(libc::CLONE_FILES) };
    check(rc).map(|_| ())
}

/// shutdown(2) both directions: wakes any pending receive on the socket with end-of-file.
pub fn shutdown_both(fd: RawFd) {
    // SAFETY: shutdown takes plain ints; a bad fd is an ignored error.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_set_refuses_out_of_range() {
        let mut s = FdSet::new();
        assert!(s.insert(3));
        assert!(s.contains(3));
        assert!(!s.contains(4));
        assert!(!s.insert(FD_SETSIZE));
        assert!(!s.insert(-1));
        assert!(!s.contains(FD_SETSIZE + 5));
    }

    #[test]
    fn epoll_reports_a_readable_pipe() {
        let (r, w) = nix::unistd::pipe().unwrap();
        let ep = Epoll::new().unwrap();
        ep.add(r.as_raw_fd(), libc::EPOLLIN as u32, 42).unwrap();
        let mut out = Vec::new();
        ep.wait(&mut out, 8, Duration::from_millis(0)).unwrap();
        assert!(out.is_empty());
        nix::unistd::write(&w, b"x").unwrap();
        ep.wait(&mut out, 8, Duration::from_millis(1000)).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].token, 42);
    }
}
