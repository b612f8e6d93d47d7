//! one-copy: sendmsg() with one iovec per field, so the only copy is the kernel's.

use super::{peer_error, retry, SendCounts, Sender};
use crate::case::Align;
use crate::net::message::Message;
use crate::sys::net::{self as sock, IovecStore};
use std::io::{self, IoSlice};
use std::os::fd::RawFd;

/// What happened on one sendmsg call, for callers that track calls (zero-copy).
pub(super) enum SendEvent {
    /// A call queued data.
    Sent,
    /// A call failed with ENOBUFS; the callback may free space and return Ok to retry.
    NoBuffers,
}

/// Send all of `message` with sendmsg(flags), continuing after partial sends. The iovecs are
/// built in `iov`, the sender's own room: nothing is allocated per message.
pub(super) fn sendmsg_all(
    fd: RawFd,
    message: &Message,
    iov: &mut IovecStore,
    flags: i32,
    syscalls: &mut u64,
    mut on_event: impl FnMut(SendEvent) -> io::Result<()>,
) -> io::Result<()> {
    let mut rest: &mut [IoSlice<'_>] = iov.gather(non_empty(message));
    while !rest.is_empty() {
        match retry(syscalls, || sock::sendmsg(fd, rest, flags)) {
            Ok(n) => {
                on_event(SendEvent::Sent)?;
                IoSlice::advance_slices(&mut rest, n);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => on_event(SendEvent::NoBuffers)?,
            Err(e) => return Err(peer_error(e, "sendmsg")),
        }
    }
    Ok(())
}

/// The message's fields that hold bytes (an iovec of none would only lengthen the list).
pub(super) fn non_empty(message: &Message) -> impl Iterator<Item = &[u8]> {
    message.fields.iter().filter(|f| !f.is_empty()).map(|f| f.as_slice())
}

pub struct OneCopySender {
    message: Message,
    iov: IovecStore,
    verify: bool,
    syscalls: u64,
}

impl OneCopySender {
    pub fn new(size: usize, fields: usize, verify: bool, align: Align) -> Self {
        OneCopySender {
            message: Message::placed(size, fields, 0, align),
            iov: IovecStore::with_capacity(fields),
            verify,
            syscalls: 0,
        }
    }
}

impl Sender for OneCopySender {
    fn send(&mut self, fd: RawFd, seq: u64) -> io::Result<()> {
        if self.verify {
            self.message.fill(seq);
        }
        sendmsg_all(
            fd,
            &self.message,
            &mut self.iov,
            sock::MSG_NOSIGNAL,
            &mut self.syscalls,
            |event| match event {
                SendEvent::Sent => Ok(()),
                SendEvent::NoBuffers => Err(io::Error::new(
                    io::ErrorKind::OutOfMemory,
                    "sendmsg: no buffer space (ENOBUFS)",
                )),
            },
        )
    }

    fn counts(&self) -> SendCounts {
        SendCounts {
            syscalls: self.syscalls,
            ..SendCounts::default()
        }
    }

    fn rewrite(&mut self, seq: u64) -> io::Result<()> {
        self.message.fill(seq + 1);
        Ok(())
    }

    fn buffers(&self) -> Vec<(usize, usize)> {
        super::spans(&self.message.fields)
    }
}
