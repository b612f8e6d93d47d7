//! sendfile: the message's bytes are staged in a file in the page cache (a memfd), one slot
//! per message of a ring, and sent with sendfile(), which hands the socket references to the
//! file's pages instead of copying user memory. The fields are written into the slot once,
//! in order, as an application staging its message would; without `--verify` nothing rewrites
//! it again, so one slot is sent again and again. With `--verify` every message's slot is
//! rewritten with its pattern before it is sent, which is the verify cost.
//!
//! No completion notification exists: the socket may still reference a slot's pages after
//! sendfile returns (over loopback until the receiver has read them), so with `--verify` the
//! ring holds more than the kernel can (`unnotified_ring_slots`) and a slot is rewritten only
//! after the whole ring went by; if the kernel still held it, `--verify` finds the message corrupted.

use super::{peer_error, retry, SendCounts, Sender};
use crate::net::message;
use crate::sys::splice::{self as sp, SharedFileMap};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

pub struct SendfileSender {
    /// Declared before `file` so the mapping goes first; either order is sound.
    map: SharedFileMap,
    file: OwnedFd,
    size: usize,
    slots: usize,
    verify: bool,
    syscalls: u64,
}

impl SendfileSender {
    /// A memfd holding `unnotified_ring_slots(size, verify)` messages, each written with its
    /// slot's pattern.
    pub fn new(size: usize, verify: bool) -> io::Result<Self> {
        let slots = super::unnotified_ring_slots(size, verify);
        let file = sp::memfd(c"iopath-sendfile")?;
        let mut map = SharedFileMap::new(&file, size.max(1) * slots)?;
        for (slot, bytes) in map.as_mut_slice().chunks_mut(size.max(1)).enumerate() {
            message::fill(bytes, slot as u64, 0);
        }
        Ok(SendfileSender {
            map,
            file,
            size,
            slots,
            verify,
            syscalls: 0,
        })
    }

    fn slot_bytes(&mut self, seq: u64) -> &mut [u8] {
        let slot = (seq % self.slots as u64) as usize;
        &mut self.map.as_mut_slice()[slot * self.size..(slot + 1) * self.size]
    }
}

impl Sender for SendfileSender {
    fn send(&mut self, fd: RawFd, seq: u64) -> io::Result<()> {
        if self.verify {
            message::fill(self.slot_bytes(seq), seq, 0);
        }
        let slot = (seq % self.slots as u64) as usize;
        let mut offset = (slot * self.size) as i64;
        let end = offset + self.size as i64;
        let file = self.file.as_raw_fd();
        while offset < end {
            let left = (end - offset) as usize;
            let n = retry(&mut self.syscalls, || sp::sendfile(fd, file, &mut offset, left))
                .map_err(|e| peer_error(e, "sendfile"))?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "sendfile sent nothing: the staging file is shorter than the message",
                ));
            }
        }
        Ok(())
    }

    fn counts(&self) -> SendCounts {
        SendCounts {
            syscalls: self.syscalls,
            ..SendCounts::default()
        }
    }

    /// Writes message `seq + 1`'s pattern into the file pages message `seq` was sent from,
    /// through the shared mapping (the same page-cache pages).
    /// None: the bytes are the memfd's page-cache pages, which the kernel places.
    fn buffers(&self) -> Vec<(usize, usize)> {
        Vec::new()
    }

    fn rewrite(&mut self, seq: u64) -> io::Result<()> {
        message::fill(self.slot_bytes(seq), seq + 1, 0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whole messages arrive intact, including one larger than a socket buffer.
    #[test]
    fn messages_arrive_intact() {
        for size in [1000, 3 << 20] {
            let mut sender = SendfileSender::new(size, true).unwrap();
            assert_eq!(
                super::super::splice::tests::send_and_verify(&mut sender, size, 4, 4),
                4,
                "{size}"
            );
            assert!(sender.counts().syscalls >= 4);
        }
    }
}
