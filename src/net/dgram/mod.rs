//! Datagrams: the format every UDP workload sends (`header`: sequence number, send time and a
//! verifiable pattern), the send paths behind `DgramSender` (one per `case::UdpSendMode`), the
//! receive paths behind `DgramReceiver` (one per `case::UdpRecvMode`), and `SeqTracker`, what
//! arrived of a flow. `net udp-stream` and `net udp-rr` build on these; the sockets, the
//! session and the window are theirs.
//!
//! Every path allocates nothing per call once built: buffers, gather lists and mmsghdr arrays
//! are made by the constructor and reused (tests/udp_modes.rs counts allocations).

mod header;
mod rx;
pub mod session;
mod tracker;
mod tx;

pub use header::{check, monotonic_ns, write_fields, write_part, Header, HEADER};
pub use rx::{GroReceiver, RecvReceiver, RecvmmsgReceiver};
pub use tracker::{Arrival, SeqCounts, SeqTracker, ARRIVALS, WINDOW};
pub use tx::{GsoSender, SendSender, SendmmsgSender, SendmsgSender, UringSender, ZerocopySender};

pub use crate::net::mode::unsupported_in;
/// The zero-copy completion counts of a `DgramSender`: the TCP zero-copy mode's, read the
/// same way (completions, of them copied by the kernel, ENOBUFS retries, slot waits).
pub use crate::net::mode::ZeroCopyCounts as ZcCounts;

use crate::case::{UdpRecvMode, UdpSendMode};
use std::io;
use std::os::fd::RawFd;

/// The fields of the `sendmsg` and `sendmmsg` modes' gather lists (as `net stream`'s default).
pub const GATHER_FIELDS: usize = 8;
/// The largest UDP payload over IPv4: 65535 − 20 (IP header) − 8 (UDP header).
pub const MAX_DATAGRAM: usize = 65_507;
/// IP and UDP headers, what a datagram adds to its payload on the wire (IPv4).
pub const IP_UDP_HEADERS: usize = 28;

/// Hands numbered datagrams to the kernel. One sender serves one socket: the options it sets
/// (UDP_SEGMENT, SO_ZEROCOPY) and the zero-copy completion ids are that socket's.
pub trait DgramSender: Send {
    /// Hand up to `count` datagrams, numbered `first_seq` on, to the kernel, in system calls
    /// of up to `batch()` datagrams; returns how many went. A full socket buffer ends the call
    /// early: with some sent, their count; with none, the error, which `is_full` tells from a
    /// failure (never a spin).
    fn send(&mut self, fd: RawFd, first_seq: u64, count: usize) -> io::Result<usize>;
    /// System calls made so far (sends, error-queue reads and polls, io_uring_enter).
    fn syscalls(&self) -> u64;
    /// Wait until the kernel holds none of our buffers (zero copy: every completion read);
    /// nothing to wait for in a mode whose buffers are free when the call returns.
    fn finish(&mut self, _fd: RawFd) -> io::Result<()> {
        Ok(())
    }
    /// The zero-copy mode's completion counts; None for the others.
    fn zerocopy(&self) -> Option<ZcCounts> {
        None
    }
    /// Datagrams one system call carries at most: one, unless the mode batches.
    fn batch(&self) -> usize {
        1
    }
}

/// Takes datagrams back from the kernel. One receiver serves one socket (SO_RXQ_OVFL and
/// UDP_GRO are set on it at the first call; the drop count is that socket's).
pub trait DgramReceiver: Send {
    /// Take what one system call returns (blocking as long as the socket's receive timeout
    /// lets it; a timeout or `WouldBlock` is `Ok(0)`), split GRO buffers into their datagrams,
    /// feed each to `seen` (with verify, checking every byte); returns the datagrams taken.
    fn recv(&mut self, fd: RawFd, seen: &mut SeqTracker) -> io::Result<usize>;
    /// System calls made so far.
    fn syscalls(&self) -> u64;
    /// The socket's dropped datagrams (SO_RXQ_OVFL) as the last datagram received said (the
    /// kernel says it only once it is not zero: 0 until then); None before the first call or
    /// where the kernel refused the option.
    fn kernel_drops(&self) -> Option<u64>;
}

/// The sender of datagrams of `size` bytes for `mode`; `batch` datagrams per call for the
/// batching modes (sendmmsg, gso, uring); `verify` writes the pattern of every datagram
/// (otherwise once per buffer, and only the header per datagram). A mode the kernel refuses
/// is an io::Error holding an `observation::Unsupported` (`unsupported_in`).
pub fn sender(mode: UdpSendMode, size: usize, batch: usize, verify: bool) -> io::Result<Box<dyn DgramSender>> {
    check_size(size)?;
    let batch = batch.clamp(1, crate::sys::udp::MAX_BATCH);
    Ok(match mode {
        UdpSendMode::Send => Box::new(SendSender::new(size, verify)),
        UdpSendMode::Sendmsg => Box::new(SendmsgSender::new(size, verify)),
        UdpSendMode::Sendmmsg => Box::new(SendmmsgSender::new(size, batch, verify)),
        UdpSendMode::Gso => Box::new(GsoSender::new(size, batch, verify)?),
        UdpSendMode::Zerocopy => Box::new(ZerocopySender::new(size, verify)?),
        UdpSendMode::Uring => Box::new(UringSender::new(size, batch, verify, false)?),
        UdpSendMode::UringZc => Box::new(UringSender::new(size, batch, verify, true)?),
    })
}

/// The receiver of datagrams of `size` bytes for `mode`; `batch` datagrams per recvmmsg;
/// `verify` checks every byte of every datagram.
pub fn receiver(mode: UdpRecvMode, size: usize, batch: usize, verify: bool) -> io::Result<Box<dyn DgramReceiver>> {
    check_size(size)?;
    let batch = batch.clamp(1, crate::sys::udp::MAX_BATCH);
    Ok(match mode {
        UdpRecvMode::Recv => Box::new(RecvReceiver::new(size, verify)),
        UdpRecvMode::Recvmmsg => Box::new(RecvmmsgReceiver::new(size, batch, verify)),
        UdpRecvMode::Gro => Box::new(GroReceiver::new(size, verify)?),
    })
}

/// Bytes of datagram buffers [`sender`] allocates for `mode`, `size` and `batch` (each buffer
/// rounded up to whole pages, as `AlignedBuf` places it): what the memory checks of udp-stream
/// and udp-rr charge for one sending socket, so they cannot drift from the allocation.
pub fn sender_bytes(mode: UdpSendMode, size: u64, batch: usize) -> u64 {
    let batch = batch.clamp(1, crate::sys::udp::MAX_BATCH) as u64;
    let buffers = match mode {
        UdpSendMode::Send | UdpSendMode::Sendmsg => 1,
        UdpSendMode::Sendmmsg | UdpSendMode::Uring | UdpSendMode::UringZc => batch,
        UdpSendMode::Gso => return pages(size.saturating_mul(batch.min(crate::sys::udp::UDP_MAX_SEGMENTS as u64))),
        UdpSendMode::Zerocopy => crate::net::mode::zero_copy_ring_slots(size as usize, None) as u64,
    };
    pages(size).saturating_mul(buffers)
}

/// Bytes of datagram buffers [`receiver`] allocates for `mode`, `size` and `batch`.
pub fn receiver_bytes(mode: UdpRecvMode, size: u64, batch: usize) -> u64 {
    let batch = batch.clamp(1, crate::sys::udp::MAX_BATCH) as u64;
    match mode {
        UdpRecvMode::Recv => pages(size),
        UdpRecvMode::Recvmmsg => pages(size).saturating_mul(batch),
        UdpRecvMode::Gro => pages(size.max(rx::GRO_BUFFER as u64)),
    }
}

/// `bytes` rounded up to whole pages, plus the page a placed buffer may start into.
fn pages(bytes: u64) -> u64 {
    let page = crate::sys::mem::page_size() as u64;
    bytes.div_ceil(page).saturating_add(1).saturating_mul(page)
}

fn check_size(size: usize) -> io::Result<()> {
    if (HEADER..=MAX_DATAGRAM).contains(&size) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a datagram of {size} bytes: accepted {HEADER} to {MAX_DATAGRAM} bytes (the header, the largest IPv4 UDP payload)"),
        ))
    }
}

/// Whether a fresh UDP socket takes the option `set` sets: the kernel's refusal, if any, as
/// the io::Error the constructors return.
fn probe_option(what: &str, set: impl FnOnce(RawFd) -> io::Result<()>) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let socket = std::net::UdpSocket::bind("127.0.0.1:0")?;
    set(socket.as_raw_fd()).map_err(|e| refusal(what, e))
}

/// An error from setting up `what`: the kernel's refusal as an `Unsupported`, anything else
/// as it is.
fn refusal(what: &str, err: io::Error) -> io::Error {
    match crate::observation::Unsupported::refused(what, &err) {
        Some(u) => crate::net::mode::unavailable(u),
        None => io::Error::new(err.kind(), format!("{what}: {err}")),
    }
}

/// Retry on EINTR, counting every attempt.
fn retry<T>(syscalls: &mut u64, mut call: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        *syscalls += 1;
        match call() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// A send that stopped after `sent` datagrams with `err`: their count when some went and the
/// socket was full, else the error.
fn partial(sent: usize, err: io::Error) -> io::Result<usize> {
    if sent > 0 && is_full(&err) {
        Ok(sent)
    } else {
        Err(err)
    }
}

/// Whether a send error means "no room now" rather than a failure: a full socket buffer
/// (non-blocking, or a blocking send's timeout) or a full device queue (ENOBUFS, with
/// IP_RECVERR on; without it the kernel counts those in `udp_sndbuf_errors` and says nothing).
/// What `DgramSender::send` returns when it could send nothing for want of room.
pub fn is_full(err: &io::Error) -> bool {
    matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
        || err.raw_os_error() == Some(libc::ENOBUFS)
}
