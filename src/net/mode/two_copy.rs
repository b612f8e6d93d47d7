//! two-copy: the application serialises its fields into one contiguous buffer (copy one),
//! then send() copies that into the kernel (copy two).

use super::{peer_error, retry, SendCounts, Sender};
use crate::case::Align;
use crate::net::message::{self, Message};
use crate::sys::aligned::AlignedBuf;
use crate::sys::net as sock;
use std::io;
use std::os::fd::RawFd;

pub struct TwoCopySender {
    message: Message,
    wire: AlignedBuf,
    verify: bool,
    syscalls: u64,
}

impl TwoCopySender {
    pub fn new(size: usize, fields: usize, verify: bool, align: Align) -> Self {
        TwoCopySender {
            message: Message::placed(size, fields, 0, align),
            wire: message::buffer(size, align),
            verify,
            syscalls: 0,
        }
    }
}

impl Sender for TwoCopySender {
    fn send(&mut self, fd: RawFd, seq: u64) -> io::Result<()> {
        if self.verify {
            self.message.fill(seq);
        }
        // The user-space serialisation this mode is named for.
        let mut at = 0;
        for field in &self.message.fields {
            self.wire[at..at + field.len()].copy_from_slice(field);
            at += field.len();
        }
        let mut sent = 0;
        while sent < self.wire.len() {
            let n = retry(&mut self.syscalls, || {
                sock::send(fd, &self.wire[sent..], sock::MSG_NOSIGNAL)
            })
            .map_err(|e| peer_error(e, "send"))?;
            sent += n;
        }
        Ok(())
    }

    fn counts(&self) -> SendCounts {
        SendCounts {
            syscalls: self.syscalls,
            ..SendCounts::default()
        }
    }

    /// The kernel read the wire buffer, so that is what is rewritten.
    fn rewrite(&mut self, seq: u64) -> io::Result<()> {
        crate::net::message::fill(&mut self.wire, seq + 1, 0);
        Ok(())
    }

    /// Only the wire buffer: the fields are copied in user space, never by the kernel.
    fn buffers(&self) -> Vec<(usize, usize)> {
        super::spans([&self.wire])
    }
}
