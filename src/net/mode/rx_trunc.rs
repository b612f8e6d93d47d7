//! The `trunc` receive mode: recv(MSG_TRUNC) drops each message's bytes in the kernel without
//! copying them anywhere, so what remains is the sender's cost and the kernel's own receive
//! path (iperf3's --skip-rx-copy). The bytes are never seen: `--verify` is refused with it.

use super::{recv_whole, Receiver, RecvCounts};
use crate::sys::rx_zerocopy::recv_discard;
use std::io;
use std::os::fd::RawFd;

pub struct TruncReceiver {
    size: usize,
    counts: RecvCounts,
}

impl TruncReceiver {
    pub fn new(size: usize) -> Self {
        TruncReceiver {
            size,
            counts: RecvCounts::default(),
        }
    }
}

impl Receiver for TruncReceiver {
    fn recv(&mut self, fd: RawFd, _seq: u64) -> io::Result<bool> {
        let size = self.size;
        let whole = recv_whole(size, &mut self.counts.syscalls, "recv(MSG_TRUNC)", |got| {
            recv_discard(fd, size - got)
        })?;
        if whole {
            self.counts.bytes_discarded += size as u64;
        }
        Ok(whole)
    }

    fn counts(&self) -> RecvCounts {
        self.counts.clone()
    }

    /// None: the kernel copies nothing into user memory.
    fn buffers(&self) -> Vec<(usize, usize)> {
        Vec::new()
    }
}
