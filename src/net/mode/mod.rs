//! The copy modes: how a message of separate fields is handed to the kernel and taken back.
//! One file per mode behind a Sender/Receiver pair.

mod one_copy;
mod sendfile;
mod splice;
mod two_copy;
mod zero_copy;

use crate::case::CopyMode;
use crate::net::completions::CompletionCounts;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

pub use one_copy::{OneCopyReceiver, OneCopySender};
pub use sendfile::SendfileSender;
pub use splice::SpliceSender;
pub use two_copy::{TwoCopyReceiver, TwoCopySender};
pub use zero_copy::{ring_slots as zero_copy_ring_slots, ZeroCopySender};

/// The least bytes a ring without completion notifications (sendfile, splice) holds: the
/// zero-copy ring's 8 MiB.
const UNNOTIFIED_RING_MIN: u64 = 8 << 20;

/// How many messages of `size` bytes the ring of a mode without completion notifications
/// (sendfile, splice) holds: one without `verify`, when nothing ever rewrites a message's
/// bytes (the same message is sent again and again, as one-copy does, so no reuse can corrupt
/// and the footprint stays that of one message, like `iperf3 -Z`'s one file buffer). With
/// `verify` every message is rewritten before it is sent. With nothing to say when the kernel lets a message's pages go, a
/// slot is safe to rewrite only once more bytes than the kernel can hold have been sent after
/// it: the sender's largest send buffer plus, over loopback or veth, where the receiving
/// socket's queue holds the very same pages until they are read, the receiver's largest
/// receive buffer (net.ipv4.tcp_wmem/tcp_rmem maxima, or net.core.wmem_max/rmem_max if
/// larger). At least 8 MiB, like the zero-copy ring.
pub fn unnotified_ring_slots(size: usize, verify: bool) -> usize {
    if !verify {
        return 1;
    }
    let ring = UNNOTIFIED_RING_MIN.max(kernel_held_bytes().unwrap_or(0));
    (ring.div_ceil(size.max(1) as u64) as usize).max(4)
}

/// The most payload bytes one TCP connection's two sockets can hold on this machine.
fn kernel_held_bytes() -> Option<u64> {
    use crate::sys::procfs::{read_i64, read_trimmed};
    let triple_max = |path: &str| -> Option<u64> { read_trimmed(path)?.split_whitespace().nth(2)?.parse().ok() };
    let single = |path: &str| read_i64(path).and_then(|v| u64::try_from(v).ok()).unwrap_or(0);
    let send = triple_max("/proc/sys/net/ipv4/tcp_wmem")?.max(single("/proc/sys/net/core/wmem_max"));
    let recv = triple_max("/proc/sys/net/ipv4/tcp_rmem")?.max(single("/proc/sys/net/core/rmem_max"));
    Some(send + recv)
}

/// What a sender counted so far (monotonic; windows are differences of two snapshots).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendCounts {
    /// System calls made: send/sendmsg, error-queue reads, polls.
    pub syscalls: u64,
    pub zerocopy: Option<ZeroCopyCounts>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZeroCopyCounts {
    pub completions: CompletionCounts,
    /// Sends refused with ENOBUFS (optmem_max or RLIMIT_MEMLOCK exhausted), then retried.
    pub enobufs: u64,
    /// Times a ring slot was still in flight and the sender had to wait for its completion.
    pub slot_waits: u64,
}

/// What a receiver counted so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecvCounts {
    pub syscalls: u64,
    pub verified_messages: u64,
    pub corrupt_messages: u64,
}

pub trait Sender: Send {
    /// Send message number `seq` completely (partial sends are continued).
    fn send(&mut self, fd: RawFd, seq: u64) -> io::Result<()>;
    /// Wait (up to `timeout`) until the kernel no longer holds any of our buffers.
    fn drain(&mut self, fd: RawFd, timeout: Duration) -> io::Result<()>;
    fn counts(&self) -> SendCounts;
    /// Overwrite, in place, the source bytes handed to the kernel for message `seq` (the slot,
    /// buffer or file pages its send read from) with message `seq + 1`'s pattern, making no
    /// new buffer. The alias probe calls it after `send` returns and before the receiver reads:
    /// a receiver that then sees the new bytes got them by reference, the old ones by copy.
    fn rewrite(&mut self, seq: u64) -> io::Result<()>;
}

pub trait Receiver: Send {
    /// Receive message number `seq` completely. Ok(false): the peer closed cleanly before it.
    fn recv(&mut self, fd: RawFd, seq: u64) -> io::Result<bool>;
    fn counts(&self) -> RecvCounts;
}

/// The sender for a mode. `verify` refills the message for every sequence number (costs a
/// write of every byte; otherwise the contents are written once). Fallible: some modes set up
/// kernel resources (a ring, a file, a pipe) the kernel may refuse.
pub fn sender(mode: CopyMode, size: usize, fields: usize, verify: bool) -> io::Result<Box<dyn Sender>> {
    Ok(match mode {
        CopyMode::TwoCopy => Box::new(TwoCopySender::new(size, fields, verify)),
        CopyMode::OneCopy => Box::new(OneCopySender::new(size, fields, verify)),
        CopyMode::ZeroCopy => Box::new(ZeroCopySender::new(size, fields, verify)),
        CopyMode::Sendfile => Box::new(SendfileSender::new(size, verify)?),
        CopyMode::Splice => Box::new(SpliceSender::new(size, fields, verify)?),
        CopyMode::Uring | CopyMode::UringZc => {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("the {mode} send mode is not in this build"),
            ))
        }
    })
}

/// The receiver for a mode: two-copy receives into one contiguous buffer; the others scatter
/// straight into per-field buffers with recvmsg.
pub fn receiver(mode: CopyMode, size: usize, fields: usize, verify: bool) -> Box<dyn Receiver> {
    match mode {
        CopyMode::TwoCopy => Box::new(TwoCopyReceiver::new(size, fields, verify)),
        _ => Box::new(OneCopyReceiver::new(size, fields, verify)),
    }
}

/// Retry a system call on EINTR; count every attempt.
fn retry<T>(syscalls: &mut u64, mut call: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        *syscalls += 1;
        match call() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Receive one whole message of `total` bytes by repeating `call` (one system call each,
/// given the bytes received so far, returning the bytes it added). Ok(false) when the peer
/// closed cleanly before the message; an error when it closed in the middle of one.
fn recv_whole(
    total: usize,
    syscalls: &mut u64,
    what: &str,
    mut call: impl FnMut(usize) -> io::Result<usize>,
) -> io::Result<bool> {
    let mut got = 0;
    while got < total {
        let n = retry(syscalls, || call(got)).map_err(|e| peer_error(e, what))?;
        if n == 0 {
            return if got == 0 {
                Ok(false)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection mid-message",
                ))
            };
        }
        got += n;
    }
    Ok(true)
}

/// Count a verified message as intact or corrupt.
fn tally_check(counts: &mut RecvCounts, check: Result<(), usize>) {
    match check {
        Ok(()) => counts.verified_messages += 1,
        Err(_) => counts.corrupt_messages += 1,
    }
}

/// A peer that closed or reset mid-message, or a send/receive that timed out, as a clear error.
fn peer_error(err: io::Error, what: &str) -> io::Error {
    let text = match err.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!("{what} timed out: the peer stopped responding"),
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => {
            format!("{what} failed: the peer closed the connection ({err})")
        }
        _ => format!("{what} failed: {err}"),
    };
    io::Error::new(err.kind(), text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without verify nothing is rewritten: one message. With it, at least 8 MiB and at least
    /// what this machine's socket buffers can hold, with no cap on the count of messages.
    #[test]
    fn the_unnotified_ring_covers_what_the_kernel_can_hold_only_when_messages_are_rewritten() {
        assert_eq!(unnotified_ring_slots(1024, false), 1);
        let slots = unnotified_ring_slots(1024, true) as u64;
        assert!(slots * 1024 >= UNNOTIFIED_RING_MIN, "{slots}");
        assert!(slots * 1024 >= kernel_held_bytes().unwrap_or(0), "{slots}");
        assert!(slots > 1024, "no zero-copy-like cap: {slots}");
        assert_eq!(unnotified_ring_slots(1 << 30, true), 4);
    }
}
