//! io_uring for the completion-based server: accept, recv and send operations whose buffers
//! the ring owns while the kernel may touch them, so the API above is safe.

use io_uring::{opcode, squeue, types, IoUring};
use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// One finished operation: the caller's token, the kernel's result (bytes, fd, or -errno) and
/// the buffer handed in with it.
#[derive(Debug)]
pub struct Completion {
    pub token: u64,
    pub result: i32,
    pub buffer: Option<Vec<u8>>,
}

/// A ring plus the buffers of operations in flight, keyed by token (one op per token).
pub struct Ring {
    ring: IoUring,
    /// Buffers the kernel may still read or write; never freed while their op is in flight.
    in_flight: HashMap<u64, Option<Vec<u8>>>,
}

impl Ring {
    /// Set up a ring; Err (e.g. EPERM when io_uring is disabled) says why not.
    pub fn new(entries: u32) -> io::Result<Ring> {
        Ok(Ring {
            ring: IoUring::new(entries)?,
            in_flight: HashMap::new(),
        })
    }

    pub fn is_pending(&self, token: u64) -> bool {
        self.in_flight.contains_key(&token)
    }

    fn push(&mut self, entry: squeue::Entry, token: u64, buffer: Option<Vec<u8>>) -> io::Result<()> {
        if self.in_flight.contains_key(&token) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "token already in flight"));
        }
        if self.ring.submission().is_full() {
            self.ring.submit()?;
        }
        // SAFETY: the buffer an entry points into is stored in `in_flight` below and stays
        // there (its heap allocation does not move) until the completion for `token` is reaped.
        let pushed = unsafe { self.ring.submission().push(&entry.user_data(token)) };
        if pushed.is_err() {
            return Err(io::Error::new(io::ErrorKind::WouldBlock, "submission queue full"));
        }
        self.in_flight.insert(token, buffer);
        Ok(())
    }

    /// Accept one connection on `listen_fd`; the completion's result is the new fd.
    pub fn accept(&mut self, listen_fd: RawFd, token: u64) -> io::Result<()> {
        let entry = opcode::Accept::new(types::Fd(listen_fd), std::ptr::null_mut(), std::ptr::null_mut())
            .flags(libc::SOCK_CLOEXEC)
            .build();
        self.push(entry, token, None)
    }

    /// Receive into `buffer` (its full length); the completion returns it.
    pub fn recv(&mut self, fd: RawFd, mut buffer: Vec<u8>, token: u64) -> io::Result<()> {
        let len = buffer.len().min(u32::MAX as usize) as u32;
        let entry = opcode::Recv::new(types::Fd(fd), buffer.as_mut_ptr(), len).build();
        self.push(entry, token, Some(buffer))
    }

    /// Send `buffer[offset..]` (MSG_NOSIGNAL); the completion returns the buffer.
    pub fn send(&mut self, fd: RawFd, buffer: Vec<u8>, offset: usize, token: u64) -> io::Result<()> {
        let offset = offset.min(buffer.len());
        let len = (buffer.len() - offset).min(u32::MAX as usize) as u32;
        // The pointer is into the heap allocation, which moving the Vec does not move.
        let ptr = buffer[offset..].as_ptr();
        let entry = opcode::Send::new(types::Fd(fd), ptr, len)
            .flags(libc::MSG_NOSIGNAL)
            .build();
        self.push(entry, token, Some(buffer))
    }

    /// Ask the kernel to cancel the op with this token (its completion still arrives).
    pub fn cancel(&mut self, token: u64, cancel_token: u64) -> io::Result<()> {
        let entry = opcode::AsyncCancel::new(token).build();
        self.push(entry, cancel_token, None)
    }

    /// Submit what is queued, wait up to `timeout` for at least one completion, and collect all
    /// that are ready into `out`.
    pub fn submit_and_wait(&mut self, timeout: Duration, out: &mut Vec<Completion>) -> io::Result<()> {
        let ts = types::Timespec::new()
            .sec(timeout.as_secs())
            .nsec(timeout.subsec_nanos());
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                ) => {}
            Err(e) => return Err(e),
        }
        for cqe in self.ring.completion() {
            let token = cqe.user_data();
            let buffer = self.in_flight.remove(&token).flatten();
            out.push(Completion {
                token,
                result: cqe.result(),
                buffer,
            });
        }
        Ok(())
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // Cancel what is still in flight and wait (bounded) for the kernel to let go of the
        // buffers; any it still holds after that are leaked rather than freed under it.
        let pending: Vec<u64> = self.in_flight.keys().copied().collect();
        for (i, token) in pending.into_iter().enumerate() {
            let _ = self.cancel(token, u64::MAX - i as u64);
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut sink = Vec::new();
        while !self.in_flight.is_empty() && Instant::now() < deadline {
            if self.submit_and_wait(Duration::from_millis(50), &mut sink).is_err() {
                break;
            }
            sink.clear();
        }
        for (_, buffer) in self.in_flight.drain() {
            std::mem::forget(buffer);
        }
    }
}

/// Take ownership of the socket fd an accept completion returned.
pub fn adopt_accepted(fd: i32) -> Option<std::net::TcpStream> {
    use std::os::fd::FromRawFd;
    if fd < 0 {
        return None;
    }
    // SAFETY: a successful accept completion hands us a new fd that nothing else owns.
    Some(unsafe { std::net::TcpStream::from_raw_fd(fd) })
}
