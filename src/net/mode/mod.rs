//! The copy modes: how a message of separate fields is handed to the kernel (`Sender`, one
//! file per send mode) and taken back (`Receiver`, one `rx_*` file per receive mode).

mod one_copy;
mod rx_copy;
mod rx_scatter;
mod rx_trunc;
mod rx_zerocopy;
mod sendfile;
mod splice;
mod two_copy;
mod uring;
mod zero_copy;

use crate::case::{Align, CopyMode, RxMode, RxWake};
use crate::net::completions::CompletionCounts;
use crate::observation::Unsupported;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

pub use one_copy::OneCopySender;
pub use rx_copy::CopyReceiver;
pub use rx_scatter::ScatterReceiver;
pub use rx_trunc::TruncReceiver;
pub use rx_zerocopy::ZeroCopyReceiver;
pub use sendfile::SendfileSender;
pub use splice::SpliceSender;
pub use two_copy::TwoCopySender;
pub use uring::{ring_slots as uring_ring_slots, UringSender};
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
    /// The io_uring modes' submissions and completions.
    pub uring: Option<UringCounts>,
}

/// What an io_uring sender's ring counted (whole connection, warm-up included).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UringCounts {
    /// io_uring_enter calls: submissions and waits.
    pub enters: u64,
    /// Send SQEs handed to the kernel.
    pub sqes: u64,
    /// CQEs of those sends: results and notifications.
    pub cqes: u64,
    /// Messages whose result CQE arrived.
    pub messages: u64,
    /// uring-zc: notification CQEs (IORING_CQE_F_NOTIF).
    pub notifications: u64,
    /// Of the notifications of successful sends, those with IORING_NOTIF_USAGE_ZC_COPIED...
    pub copied: u64,
    /// ...and those without it (the pages went out by reference).
    pub zero_copied: u64,
    /// Results that were an error.
    pub failed: u64,
    /// CQEs that matched no op in flight (should stay 0).
    pub unexpected: u64,
}

/// Options beyond mode, size, fields and verify that some senders take (from the case).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendOptions {
    /// Bytes of messages the zero-copy modes keep in flight; None: 8 MiB and at least 4
    /// messages. Smaller than a message means one message.
    pub zc_ring: Option<u64>,
    /// uring-zc: the ring's memory in one registered (fixed) buffer.
    pub fixed_buffers: bool,
    /// uring, uring-zc: hand every message to the kernel as it is sent (one io_uring_enter
    /// that also waits for its result) instead of batching several; request/response needs
    /// it, since a request must leave before its response can come.
    pub unbatched: bool,
    /// Where the buffers the kernel reads from start (`--align`; page by default).
    pub align: Align,
    /// Senders of this process sending at once (uring-zc: they share the user's
    /// RLIMIT_MEMLOCK, which its default ring fits into); 0 counts as 1.
    pub senders: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZeroCopyCounts {
    pub completions: CompletionCounts,
    /// Sends refused with ENOBUFS (optmem_max or RLIMIT_MEMLOCK exhausted), then retried.
    pub enobufs: u64,
    /// Times a ring slot was still in flight and the sender had to wait for its completion.
    pub slot_waits: u64,
}

/// What a receiver counted so far (monotonic; windows are differences of two snapshots).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecvCounts {
    pub syscalls: u64,
    pub verified_messages: u64,
    pub corrupt_messages: u64,
    /// Bytes the kernel copied into our buffers (recv/recvmsg).
    pub bytes_copied: u64,
    /// Bytes the kernel mapped into our address space instead (TCP_ZEROCOPY_RECEIVE).
    pub bytes_mapped: u64,
    /// Bytes the kernel dropped without copying (MSG_TRUNC).
    pub bytes_discarded: u64,
}

impl RecvCounts {
    /// What was counted since `earlier` (a snapshot of the same receiver).
    pub fn since(&self, earlier: &RecvCounts) -> RecvCounts {
        RecvCounts {
            syscalls: self.syscalls - earlier.syscalls,
            verified_messages: self.verified_messages - earlier.verified_messages,
            corrupt_messages: self.corrupt_messages - earlier.corrupt_messages,
            bytes_copied: self.bytes_copied - earlier.bytes_copied,
            bytes_mapped: self.bytes_mapped - earlier.bytes_mapped,
            bytes_discarded: self.bytes_discarded - earlier.bytes_discarded,
        }
    }

    /// The sum of several receivers' counts.
    pub fn add(&mut self, other: &RecvCounts) {
        self.syscalls += other.syscalls;
        self.verified_messages += other.verified_messages;
        self.corrupt_messages += other.corrupt_messages;
        self.bytes_copied += other.bytes_copied;
        self.bytes_mapped += other.bytes_mapped;
        self.bytes_discarded += other.bytes_discarded;
    }
}

pub trait Sender: Send {
    /// Send message number `seq` completely (partial sends are continued).
    fn send(&mut self, fd: RawFd, seq: u64) -> io::Result<()>;
    /// Wait (up to `timeout`) until the kernel no longer holds any of our buffers. By default
    /// nothing to wait for: the copying modes, sendfile and splice have no completion
    /// notification.
    fn drain(&mut self, _fd: RawFd, _timeout: Duration) -> io::Result<()> {
        Ok(())
    }
    fn counts(&self) -> SendCounts;
    /// Overwrite, in place, the source bytes handed to the kernel for message `seq` (the slot,
    /// buffer or file pages its send read from) with message `seq + 1`'s pattern, making no
    /// new buffer. The alias probe calls it after `send` returns and before the receiver reads:
    /// a receiver that then sees the new bytes got them by reference, the old ones by copy.
    fn rewrite(&mut self, seq: u64) -> io::Result<()>;
    /// (address, length) of every non-empty buffer of user memory the kernel copies from or
    /// takes references to (none for sendfile, whose bytes are file pages): tests hold that
    /// they are placed as `--align` asks.
    fn buffers(&self) -> Vec<(usize, usize)>;
}

pub trait Receiver: Send {
    /// Get ready to receive on `fd` before the first message (zerocopy maps the socket here,
    /// so a kernel that refuses is found before any data moves). `recv` attaches by itself
    /// when this was not called.
    fn attach(&mut self, _fd: RawFd) -> io::Result<()> {
        Ok(())
    }
    /// The connection `attach` (or `recv`) set up for is over: let go of what was kept for it
    /// (zerocopy's mapping, which keeps the socket alive), so that a new socket given the same
    /// fd number starts afresh. crr calls it before closing each connection.
    fn detach(&mut self) {}
    /// Receive message number `seq` completely. Ok(false): the peer closed cleanly before it.
    fn recv(&mut self, fd: RawFd, seq: u64) -> io::Result<bool>;
    fn counts(&self) -> RecvCounts;
    /// (address, length) of every non-empty buffer the kernel copies into (none for trunc):
    /// tests hold that they are placed as `--align` asks.
    fn buffers(&self) -> Vec<(usize, usize)>;
}

/// (address, length) of the non-empty buffers among `bufs`.
pub(crate) fn spans<'a>(bufs: impl IntoIterator<Item = &'a crate::sys::aligned::AlignedBuf>) -> Vec<(usize, usize)> {
    bufs.into_iter()
        .filter(|b| !b.is_empty())
        .map(|b| (b.addr(), b.len()))
        .collect()
}

/// The sender for a mode. `verify` refills the message for every sequence number (costs a
/// write of every byte; otherwise the contents are written once). Fallible: some modes set up
/// kernel resources (a ring, a file, a pipe) the kernel may refuse.
pub fn sender(mode: CopyMode, size: usize, fields: usize, verify: bool) -> io::Result<Box<dyn Sender>> {
    sender_with(mode, size, fields, verify, &SendOptions::default())
}

/// `sender` with the case's further options (ring size, registered buffers).
pub fn sender_with(
    mode: CopyMode,
    size: usize,
    fields: usize,
    verify: bool,
    options: &SendOptions,
) -> io::Result<Box<dyn Sender>> {
    Ok(match mode {
        CopyMode::TwoCopy => Box::new(TwoCopySender::new(size, fields, verify, options.align)),
        CopyMode::OneCopy => Box::new(OneCopySender::new(size, fields, verify, options.align)),
        CopyMode::ZeroCopy => Box::new(ZeroCopySender::new(
            size,
            fields,
            verify,
            options.zc_ring,
            options.align,
        )),
        CopyMode::Uring => Box::new(UringSender::new(size, fields, verify, false, options)?),
        CopyMode::UringZc => Box::new(UringSender::new(size, fields, verify, true, options)?),
        CopyMode::Sendfile => Box::new(SendfileSender::new(size, verify)?),
        CopyMode::Splice => Box::new(SpliceSender::new(size, fields, verify, options.align)?),
    })
}

/// The receiver for a receive mode. `verify` checks every byte received against the
/// sender's pattern (`trunc` sees no byte: its callers refuse verify with it). `align`: where
/// the buffers the kernel copies into start (`--align`). `wake`: when the kernel wakes it for
/// the rest of a message (`--rx-wake`); zerocopy always waits for a page or the message
/// (`ZeroCopyReceiver::attach`).
pub fn receiver(
    rx: RxMode,
    wake: RxWake,
    size: usize,
    fields: usize,
    verify: bool,
    align: Align,
) -> io::Result<Box<dyn Receiver>> {
    let receiver: Box<dyn Receiver> = match rx {
        RxMode::Copy => Box::new(CopyReceiver::new(size, fields, verify, align)),
        RxMode::Scatter => Box::new(ScatterReceiver::new(size, fields, verify, align)),
        RxMode::Trunc => Box::new(TruncReceiver::new(size)),
        RxMode::Zerocopy => return Ok(Box::new(ZeroCopyReceiver::new(size, verify, align))),
    };
    Ok(match wake {
        RxWake::Data => receiver,
        RxWake::Message => Box::new(WokenForWholeMessages {
            receiver,
            size,
            set_on: None,
            syscalls: 0,
        }),
    })
}

/// A receiver whose socket wakes it only when a whole message is queued (SO_RCVLOWAT of the
/// message size, set once per connection): every message then arrives in one recv, and the
/// sender's softirq wakes the reader once a message instead of once a packet train. The
/// kernel still wakes it at the end of the stream, and a message larger than half of
/// tcp_rmem's maximum is waited for in pieces of that (the kernel's clamp).
struct WokenForWholeMessages {
    receiver: Box<dyn Receiver>,
    size: usize,
    /// The socket SO_RCVLOWAT was set on (`detach` forgets it: crr reuses fd numbers).
    set_on: Option<RawFd>,
    /// The setsockopt calls, counted with the receiver's.
    syscalls: u64,
}

impl WokenForWholeMessages {
    fn set_on(&mut self, fd: RawFd) -> io::Result<()> {
        if self.set_on != Some(fd) {
            self.syscalls += 1;
            let bytes = i32::try_from(self.size).unwrap_or(i32::MAX).max(1);
            crate::sys::net::set_rcvlowat(fd, bytes)
                .map_err(|e| io::Error::new(e.kind(), format!("SO_RCVLOWAT: {e}")))?;
            self.set_on = Some(fd);
        }
        Ok(())
    }
}

impl Receiver for WokenForWholeMessages {
    fn attach(&mut self, fd: RawFd) -> io::Result<()> {
        self.set_on(fd)?;
        self.receiver.attach(fd)
    }

    fn detach(&mut self) {
        self.set_on = None;
        self.receiver.detach();
    }

    fn recv(&mut self, fd: RawFd, seq: u64) -> io::Result<bool> {
        self.set_on(fd)?;
        self.receiver.recv(fd, seq)
    }

    fn counts(&self) -> RecvCounts {
        let mut counts = self.receiver.counts();
        counts.syscalls += self.syscalls;
        counts
    }

    fn buffers(&self) -> Vec<(usize, usize)> {
        self.receiver.buffers()
    }
}

/// Whether this kernel can receive in mode `rx`, asked of a fresh, unconnected TCP socket
/// (TCP_ZEROCOPY_RECEIVE answers on one): the refusal, if any, before a session starts.
pub fn check_receiver(rx: RxMode) -> Result<(), Unsupported> {
    if rx != RxMode::Zerocopy {
        return Ok(());
    }
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .map_err(|e| Unsupported::new("a TCP socket", e.to_string()))?;
    let mut probe = ZeroCopyReceiver::new(page_size_bytes(), false, Align::Page);
    match probe.attach(std::os::fd::AsRawFd::as_raw_fd(&socket)) {
        Ok(()) => Ok(()),
        Err(e) => Err(unsupported_in(&e).unwrap_or_else(|| Unsupported::new("TCP receive zero-copy", e.to_string()))),
    }
}

fn page_size_bytes() -> usize {
    crate::sys::mem::page_size()
}

/// An I/O error that carries the kernel's refusal of a feature (see `unsupported_in`).
pub(crate) fn unavailable(refusal: Unsupported) -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, refusal)
}

/// The kernel's refusal inside an error from a `Sender` or `Receiver`, when that is what it is.
pub fn unsupported_in(err: &io::Error) -> Option<Unsupported> {
    err.get_ref()?.downcast_ref::<Unsupported>().cloned()
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

/// Memory one sender of `size`-byte messages in `mode` holds (shared with rr's estimate).
pub(crate) fn sender_bytes(mode: CopyMode, size: u64, verify: bool, options: &SendOptions) -> u64 {
    let slots = match mode {
        CopyMode::ZeroCopy => zero_copy_ring_slots(size as usize, options.zc_ring) as u64,
        // The ring of message slots (uring-zc: the zero-copy ring).
        CopyMode::Uring | CopyMode::UringZc => {
            uring_ring_slots(size as usize, mode == CopyMode::UringZc, options) as u64
        }
        // A ring with no completion notification (one message without --verify): in user
        // memory (splice) or in a memfd's page cache (sendfile).
        CopyMode::Splice | CopyMode::Sendfile => unnotified_ring_slots(size as usize, verify) as u64,
        // The fields plus a contiguous wire buffer (two-copy) or a verify copy.
        _ => 2,
    };
    size.saturating_mul(slots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

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

    /// A socket the kernel cannot map for receive zero-copy (UDP) is refused as Unsupported,
    /// found by the caller in the I/O error; this kernel's TCP sockets are accepted.
    #[test]
    fn zerocopy_rx_on_a_socket_that_cannot_be_mapped_is_unsupported() {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut rx = receiver(RxMode::Zerocopy, RxWake::Data, 65536, 1, false, Align::Page).unwrap();
        let err = rx.attach(udp.as_raw_fd()).unwrap_err();
        let refusal = unsupported_in(&err).unwrap_or_else(|| panic!("not a refusal: {err}"));
        assert!(refusal.to_string().contains("cannot be mapped"), "{refusal}");
        assert!(unsupported_in(&io::Error::other("plain")).is_none());
        assert_eq!(check_receiver(RxMode::Scatter), Ok(()));
    }

    /// Messages that are not a whole number of pages: a mapped page holding one message's tail
    /// and the next one's head is read (and verified) by both receives, so pages are mapped
    /// across message boundaries and every message still checks out.
    #[test]
    fn zerocopy_rx_maps_pages_across_message_boundaries_and_verifies_them() {
        use socket2::{Domain, Socket, Type};
        const SIZE: usize = 10_000;
        const MESSAGES: u64 = 200;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        crate::sys::net::set_maxseg(listener.as_raw_fd(), 4108).unwrap();
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        crate::sys::net::set_maxseg(socket.as_raw_fd(), 4108).unwrap();
        socket.connect(&listener.local_addr().unwrap().into()).unwrap();
        let peer: TcpStream = socket.into();
        let (conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let writer = std::thread::spawn(move || {
            let mut tx = sender(CopyMode::ZeroCopy, SIZE, 3, true).unwrap();
            for seq in 0..MESSAGES {
                tx.send(peer.as_raw_fd(), seq).unwrap();
            }
            tx.drain(peer.as_raw_fd(), std::time::Duration::from_secs(10)).unwrap();
            peer.shutdown(std::net::Shutdown::Write).unwrap();
        });
        let mut rx = receiver(RxMode::Zerocopy, RxWake::Data, SIZE, 3, true, Align::Page).unwrap();
        for seq in 0..MESSAGES {
            assert!(rx.recv(conn.as_raw_fd(), seq).unwrap(), "message {seq}");
        }
        assert!(!rx.recv(conn.as_raw_fd(), MESSAGES).unwrap(), "the peer closed");
        writer.join().unwrap();
        let counts = rx.counts();
        assert_eq!(counts.verified_messages, MESSAGES);
        assert_eq!(counts.corrupt_messages, 0);
        assert_eq!(counts.bytes_mapped + counts.bytes_copied, SIZE as u64 * MESSAGES);
        assert!(counts.bytes_mapped > 0, "{counts:?}");
    }

    /// trunc takes whole messages without a buffer, counts them as discarded, and sees the
    /// clean end after the last one.
    #[test]
    fn trunc_discards_whole_messages_then_sees_the_end() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (conn, _) = listener.accept().unwrap();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            peer.write_all(&vec![7u8; 3 * 10_000]).unwrap();
        });
        let mut rx = receiver(RxMode::Trunc, RxWake::Message, 10_000, 4, false, Align::Page).unwrap();
        for seq in 0..3 {
            assert!(rx.recv(conn.as_raw_fd(), seq).unwrap(), "message {seq}");
        }
        writer.join().unwrap();
        assert!(!rx.recv(conn.as_raw_fd(), 3).unwrap(), "the peer closed");
        let counts = rx.counts();
        assert_eq!(counts.bytes_discarded, 30_000);
        assert_eq!(counts.bytes_copied, 0);
    }

    /// With `--rx-wake message` every receive mode but zerocopy takes each message in one
    /// recv, however the sender trickles it (four pieces here, 20 ms apart: a reader woken on
    /// any data would return after the first piece), plus one SO_RCVLOWAT per connection; the
    /// end of the stream still wakes it with a short message outstanding. A new connection
    /// (after `detach`, on a reused fd number) gets its own SO_RCVLOWAT.
    #[test]
    fn woken_for_whole_messages_each_message_is_one_recv() {
        use std::io::Write;
        const SIZE: usize = 256 << 10;
        for rx_mode in [RxMode::Copy, RxMode::Scatter, RxMode::Trunc] {
            let mut rx = receiver(rx_mode, RxWake::Message, SIZE, 4, false, Align::Page).unwrap();
            for connection in 0..2u64 {
                let listener = TcpListener::bind("127.0.0.1:0").unwrap();
                let mut peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
                let (conn, _) = listener.accept().unwrap();
                conn.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
                let writer = std::thread::spawn(move || {
                    for _ in 0..2 {
                        for _ in 0..4 {
                            peer.write_all(&vec![7u8; SIZE / 4]).unwrap();
                            std::thread::sleep(std::time::Duration::from_millis(20));
                        }
                    }
                    // Half a message, then the end.
                    peer.write_all(&vec![7u8; SIZE / 2]).unwrap();
                });
                let before = rx.counts().syscalls;
                for seq in 0..2 {
                    assert!(rx.recv(conn.as_raw_fd(), seq).unwrap(), "{rx_mode} message {seq}");
                }
                assert_eq!(
                    rx.counts().syscalls - before,
                    3,
                    "{rx_mode} connection {connection}: SO_RCVLOWAT and one recv a message"
                );
                writer.join().unwrap();
                let err = rx.recv(conn.as_raw_fd(), 2).unwrap_err();
                assert!(err.to_string().contains("mid-message"), "{rx_mode}: {err}");
                rx.detach();
            }
        }
    }
}
