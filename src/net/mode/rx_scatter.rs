//! The `scatter` receive mode: recvmsg() with one iovec per field, so the kernel copies
//! straight into the separately allocated fields.

use super::{recv_whole, tally_check, Receiver, RecvCounts};
use crate::case::Align;
use crate::net::message::Message;
use crate::sys::net::{self as sock, IovecStore};
use std::io::{self, IoSliceMut};
use std::os::fd::RawFd;

pub struct ScatterReceiver {
    message: Message,
    /// Room for the iovecs of a receive: nothing is allocated per message.
    iov: IovecStore,
    verify: bool,
    counts: RecvCounts,
}

impl ScatterReceiver {
    pub fn new(size: usize, fields: usize, verify: bool, align: Align) -> Self {
        ScatterReceiver {
            message: Message::placed(size, fields, 0, align),
            iov: IovecStore::with_capacity(fields),
            verify,
            counts: RecvCounts::default(),
        }
    }
}

impl Receiver for ScatterReceiver {
    fn recv(&mut self, fd: RawFd, seq: u64) -> io::Result<bool> {
        let total = self.message.len();
        let fields = self
            .message
            .fields
            .iter_mut()
            .filter(|f| !f.is_empty())
            .map(|f| f.as_mut_slice());
        let mut rest: &mut [IoSliceMut<'_>] = self.iov.scatter(fields);
        let whole = recv_whole(total, &mut self.counts.syscalls, "recvmsg", |_| {
            let n = sock::recvmsg(fd, rest, 0)?;
            IoSliceMut::advance_slices(&mut rest, n);
            Ok(n)
        })?;
        if whole {
            self.counts.bytes_copied += total as u64;
        }
        if whole && self.verify {
            tally_check(&mut self.counts, self.message.check(seq));
        }
        Ok(whole)
    }

    fn counts(&self) -> RecvCounts {
        self.counts.clone()
    }

    fn buffers(&self) -> Vec<(usize, usize)> {
        super::spans(&self.message.fields)
    }
}
