//! The `zerocopy` receive mode: getsockopt(TCP_ZEROCOPY_RECEIVE) maps whole pages of the
//! receive queue into a mmap of the socket instead of copying them; what the kernel cannot map
//! (`recv_skip_hint`: data not held as whole, page-aligned pages) is read with recv(). The
//! mapped bytes are read (verified) in place and given back with MADV_DONTNEED. Pages are asked
//! for rounded up past the message's end: the rest of the last page is the next message's head,
//! kept mapped and read by the next call.
//!
//! The kernel maps a page only when every fragment is one 4 KiB page at offset 0, which needs
//! a payload per segment that is a multiple of 4096 (the stream sets TCP_MAXSEG 4108 on
//! loopback and in a namespace) and, on loopback, a MSG_ZEROCOPY sender: local delivery of its
//! pinned pages copies into fresh whole pages, while plain send() leaves data the kernel
//! cannot map. The counts say which happened: `bytes_mapped` against `bytes_copied`.

use super::{peer_error, retry, unavailable, Receiver, RecvCounts};
use crate::net::message;
use crate::observation::Unsupported;
use crate::sys::mem::page_size;
use crate::sys::net as sock;
use crate::sys::rx_zerocopy::{self as zc, SocketMapping};
use std::io;
use std::os::fd::RawFd;

/// The largest mapping per socket (a message is mapped in pieces of at most this).
const MAX_MAP: usize = 8 << 20;
/// The buffer the unmappable bytes are read into.
const MAX_SCRATCH: usize = 256 << 10;
/// How long to wait for data before declaring the peer gone (as the other receivers' timeout).
const WAIT_MS: i32 = 10_000;

const WHAT: &str = "TCP receive zero-copy (TCP_ZEROCOPY_RECEIVE)";

pub struct ZeroCopyReceiver {
    size: usize,
    verify: bool,
    mapping: Option<(RawFd, SocketMapping)>,
    /// Mapped bytes not yet read: the head of the next message (indexes into the mapping).
    carry: std::ops::Range<usize>,
    scratch: crate::sys::aligned::AlignedBuf,
    /// The socket's SO_RCVLOWAT as last set: what a wait for data waits for.
    lowat: usize,
    counts: RecvCounts,
}

impl ZeroCopyReceiver {
    pub fn new(size: usize, verify: bool, align: crate::case::Align) -> Self {
        ZeroCopyReceiver {
            size,
            verify,
            mapping: None,
            carry: 0..0,
            scratch: message::buffer(size.clamp(1, MAX_SCRATCH), align),
            lowat: 0,
            counts: RecvCounts::default(),
        }
    }

    /// Read up to `len` bytes the kernel would not map with recv(), checking them at message
    /// offset `at`. 0: the peer closed.
    fn copy(&mut self, fd: RawFd, len: usize, seq: u64, at: usize, intact: &mut bool) -> io::Result<usize> {
        let len = len.min(self.scratch.len());
        let buf = &mut self.scratch[..len];
        let n = retry(&mut self.counts.syscalls, || sock::recv(fd, buf, 0)).map_err(|e| peer_error(e, "recv"))?;
        if self.verify && n > 0 {
            *intact &= message::check(&self.scratch[..n], seq, at as u64).is_ok();
        }
        self.counts.bytes_copied += n as u64;
        Ok(n)
    }
}

/// The end of a message that was `got` bytes in when the peer closed.
fn closed(got: usize) -> io::Result<bool> {
    if got == 0 {
        Ok(false)
    } else {
        Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the peer closed the connection mid-message",
        ))
    }
}

impl Receiver for ZeroCopyReceiver {
    /// Map the socket and ask the kernel once with nothing to map: a kernel without the
    /// feature refuses here, before any data, as `Unsupported`.
    fn attach(&mut self, fd: RawFd) -> io::Result<()> {
        if matches!(&self.mapping, Some((on, _)) if *on == fd) {
            return Ok(());
        }
        self.detach();
        // mmap, the getsockopt and SO_RCVLOWAT: per connection in crr, so counted.
        self.counts.syscalls += 3;
        let len = self.size.div_ceil(page_size()).clamp(1, MAX_MAP / page_size()) * page_size();
        let mut mapping = SocketMapping::new(fd, len).map_err(|e| {
            unavailable(Unsupported::new(
                WHAT,
                format!("this socket cannot be mapped (mmap: {e})"),
            ))
        })?;
        // EINTR is retried (see `recv`): io_uring task work interrupts a socket call.
        let first = loop {
            match mapping.receive(fd, 0) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match first {
            Ok(_) => {}
            // Already at the end: not a refusal; the first recv reports it.
            Err(e) if e.raw_os_error() == Some(libc::EIO) => {}
            Err(e) => {
                return Err(match Unsupported::refused(WHAT, &e) {
                    Some(u) => unavailable(u),
                    None => io::Error::new(e.kind(), format!("getsockopt(TCP_ZEROCOPY_RECEIVE) failed: {e}")),
                })
            }
        }
        // Blocking reads and polls wait for a whole page (or the end), so a page is not
        // copied piecemeal while it is still arriving; a message smaller than a page, for
        // the whole message (request/response: nothing more comes until it is answered).
        self.lowat = page_size().min(self.size.max(1));
        crate::sys::net::set_rcvlowat(fd, self.lowat as i32)?;
        self.mapping = Some((fd, mapping));
        Ok(())
    }

    fn detach(&mut self) {
        if self.mapping.take().is_some() {
            // The munmap.
            self.counts.syscalls += 1;
        }
        self.carry = 0..0;
    }

    fn recv(&mut self, fd: RawFd, seq: u64) -> io::Result<bool> {
        self.attach(fd)?;
        let page = page_size();
        let size = self.size;
        let mut got = 0;
        let mut intact = true;
        let mut waited = false;
        while got < size {
            let Some((_, mapping)) = self.mapping.as_mut() else {
                return Err(io::Error::other("the socket is not mapped"));
            };
            // Pages mapped by an earlier call that run past that message's end hold the start
            // of this one: read them in place first.
            if self.carry.start < self.carry.end {
                let take = (self.carry.end - self.carry.start).min(size - got);
                let bytes = &mapping.mapped()[self.carry.start..self.carry.start + take];
                if self.verify {
                    intact &= message::check(bytes, seq, got as u64).is_ok();
                }
                self.carry.start += take;
                self.counts.bytes_mapped += take as u64;
                got += take;
                if self.carry.start == self.carry.end {
                    self.counts.syscalls += 1;
                    mapping.release()?;
                    self.carry = 0..0;
                }
                waited = false;
                continue;
            }
            let want = size - got;
            // Whole pages, rounded up: the page holding this message's tail and the next
            // message's head is mapped once and read by both calls.
            self.counts.syscalls += 1;
            let read = match mapping.receive(fd, want.div_ceil(page) * page) {
                Ok(r) => r,
                Err(e) if e.raw_os_error() == Some(libc::EIO) => return closed(got),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(peer_error(e, "getsockopt(TCP_ZEROCOPY_RECEIVE)")),
            };
            if read.mapped > 0 {
                self.carry = 0..read.mapped;
                continue;
            }
            // Nothing mapped: the head of the queue is not a whole page (or less than a page is
            // queued); the kernel says how much of it recv() must take.
            let hinted = read.skip_hint.min(want);
            if hinted > 0 {
                let n = self.copy(fd, hinted, seq, got, &mut intact)?;
                if n == 0 {
                    return closed(got);
                }
                got += n;
                waited = false;
            } else if !waited {
                // Nothing queued yet: wait for a page (SO_RCVLOWAT) or the end; for no more
                // than the message still needs, which is all a request/response peer sends.
                let needed = want.min(page);
                if needed != self.lowat {
                    self.counts.syscalls += 1;
                    crate::sys::net::set_rcvlowat(fd, needed as i32)?;
                    self.lowat = needed;
                }
                self.counts.syscalls += 1;
                if !zc::wait_readable(fd, WAIT_MS)? {
                    return Err(peer_error(io::ErrorKind::TimedOut.into(), "recv"));
                }
                waited = true;
            } else {
                // Readable, yet nothing to map and no hint: the end of the stream (or less than
                // a page before it). recv() takes it; 0 is the end.
                let n = self.copy(fd, want.min(page), seq, got, &mut intact)?;
                if n == 0 {
                    return closed(got);
                }
                got += n;
                waited = false;
            }
        }
        if self.verify {
            if intact {
                self.counts.verified_messages += 1;
            } else {
                self.counts.corrupt_messages += 1;
            }
        }
        Ok(true)
    }

    fn counts(&self) -> RecvCounts {
        self.counts.clone()
    }

    /// The scratch buffer that recv() fills with what the kernel would not map (the mapping
    /// itself is the kernel's, page-aligned by mmap).
    fn buffers(&self) -> Vec<(usize, usize)> {
        super::spans([&self.scratch])
    }
}
