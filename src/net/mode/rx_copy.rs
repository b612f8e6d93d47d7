//! The `copy` receive mode: recv() into one contiguous buffer, as an application that parses
//! its fields out of a wire buffer does. With --verify the fields are copied out of it and
//! checked (that copy is verification work, not part of the mode).

use super::{recv_whole, tally_check, Receiver, RecvCounts};
use crate::case::Align;
use crate::net::message::{self, Message};
use crate::sys::aligned::AlignedBuf;
use crate::sys::net as sock;
use std::io;
use std::os::fd::RawFd;

pub struct CopyReceiver {
    wire: AlignedBuf,
    /// Only used when verifying: the fields the wire bytes are scattered back into.
    message: Option<Message>,
    counts: RecvCounts,
}

impl CopyReceiver {
    pub fn new(size: usize, fields: usize, verify: bool, align: Align) -> Self {
        CopyReceiver {
            wire: message::buffer(size, align),
            message: verify.then(|| Message::placed(size, fields, 0, align)),
            counts: RecvCounts::default(),
        }
    }
}

impl Receiver for CopyReceiver {
    fn recv(&mut self, fd: RawFd, seq: u64) -> io::Result<bool> {
        let wire = &mut self.wire;
        if !recv_whole(wire.len(), &mut self.counts.syscalls, "recv", |got| {
            sock::recv(fd, &mut wire[got..], 0)
        })? {
            return Ok(false);
        }
        self.counts.bytes_copied += self.wire.len() as u64;
        if let Some(message) = &mut self.message {
            let mut at = 0;
            for field in &mut message.fields {
                let len = field.len();
                field.copy_from_slice(&self.wire[at..at + len]);
                at += len;
            }
            tally_check(&mut self.counts, message.check(seq));
        }
        Ok(true)
    }

    fn counts(&self) -> RecvCounts {
        self.counts.clone()
    }

    /// Only the wire buffer: verification's fields are filled in user space.
    fn buffers(&self) -> Vec<(usize, usize)> {
        super::spans([&self.wire])
    }
}
