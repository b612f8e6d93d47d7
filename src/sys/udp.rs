//! UDP socket calls the standard library, nix and socket2 do not cover the way the datagram
//! paths need them: sendmmsg/recvmmsg over preallocated `mmsghdr`/`iovec` arrays (nothing is
//! allocated per call once a batch has been as large), recvmsg with a control buffer read for
//! the UDP_GRO segment size and the SO_RXQ_OVFL drop counter, and the socket options UDP_SEGMENT,
//! UDP_GRO, SO_RXQ_OVFL, SO_RCVBUF/SO_SNDBUF (answering what the kernel granted),
//! SO_MAX_PACING_RATE and IP_MTU.

pub use super::net::enable_zerocopy;
use super::net::{check, get_int_opt, set_int_opt, set_opt};
use std::io;
use std::os::fd::RawFd;

/// asm-generic/socket.h (x86-64, arm64 and the other asm-generic architectures); libc does
/// not export it for Linux.
pub const SO_RXQ_OVFL: i32 = 40;
/// asm-generic/socket.h, as above.
pub const SO_MAX_PACING_RATE: i32 = 47;
/// asm-generic/socket.h, as above: getsockopt of the socket's memory counters (Linux 4.12).
pub const SO_MEMINFO: i32 = 55;
/// The index of the drop count among SO_MEMINFO's u32s (SK_MEMINFO_DROPS,
/// include/uapi/linux/sock_diag.h).
const SK_MEMINFO_DROPS: usize = 8;
/// The most datagrams one UDP_SEGMENT send may carry (UDP_MAX_SEGMENTS, include/linux/udp.h).
pub const UDP_MAX_SEGMENTS: usize = 64;
/// The most messages one sendmmsg/recvmmsg takes (UIO_MAXIOV; the kernel caps vlen there).
pub const MAX_BATCH: usize = 1024;
/// Bytes of control room per message: one SO_RXQ_OVFL u32 and one UDP_GRO int, each
/// CMSG_SPACE(4) = 16 on 64-bit, with room to spare.
const CONTROL_WORDS: usize = 8;

/// UDP_SEGMENT: every later send on the socket is cut by the kernel into datagrams of
/// `size` bytes (0 turns it off).
pub fn set_udp_segment(fd: RawFd, size: u16) -> io::Result<()> {
    set_int_opt(fd, libc::SOL_UDP, libc::UDP_SEGMENT, i32::from(size))
}

/// UDP_GRO: the kernel may hand several datagrams of one flow to one receive, saying their
/// size in a UDP_GRO control message.
pub fn set_udp_gro(fd: RawFd, on: bool) -> io::Result<()> {
    set_int_opt(fd, libc::SOL_UDP, libc::UDP_GRO, on as i32)
}

/// SO_RXQ_OVFL: every received datagram carries the socket's count of dropped datagrams.
pub fn enable_rxq_ovfl(fd: RawFd) -> io::Result<()> {
    set_int_opt(fd, libc::SOL_SOCKET, SO_RXQ_OVFL, 1)
}

/// SO_RCVBUF: ask for `bytes`; returns what the kernel granted (it doubles the request for
/// its bookkeeping and clamps it to net.core.rmem_max, with a floor).
pub fn set_rcvbuf(fd: RawFd, bytes: usize) -> io::Result<usize> {
    set_int_opt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_RCVBUF,
        bytes.min(i32::MAX as usize) as i32,
    )?;
    get_int_opt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF).map(|v| v.max(0) as usize)
}

/// SO_SNDBUF, as `set_rcvbuf` (clamped to net.core.wmem_max).
pub fn set_sndbuf(fd: RawFd, bytes: usize) -> io::Result<usize> {
    set_int_opt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_SNDBUF,
        bytes.min(i32::MAX as usize) as i32,
    )?;
    get_int_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF).map(|v| v.max(0) as usize)
}

/// SO_MAX_PACING_RATE in bytes per second (the fq qdisc, or TCP's internal pacing, enforces
/// it; for UDP only a pacing qdisc does).
pub fn set_max_pacing_rate(fd: RawFd, bytes_per_sec: u64) -> io::Result<()> {
    set_opt(fd, libc::SOL_SOCKET, SO_MAX_PACING_RATE, bytes_per_sec)
}

/// The path MTU of a connected IPv4 socket (IP_MTU), or of an IPv6 one (IPV6_MTU).
pub fn path_mtu(fd: RawFd) -> io::Result<usize> {
    get_int_opt(fd, libc::IPPROTO_IP, libc::IP_MTU)
        .or_else(|_| get_int_opt(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU))
        .map(|v| v.max(0) as usize)
}

/// The socket's dropped datagrams now (SO_MEMINFO's SK_MEMINFO_DROPS, the counter SO_RXQ_OVFL
/// reports): unlike SO_RXQ_OVFL it needs no datagram to arrive after the drops.
pub fn socket_drops(fd: RawFd) -> io::Result<u64> {
    let mut info = [0u32; 16];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: info and len are live and writable; len says info's size, and the kernel writes
    // at most that many bytes.
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, SO_MEMINFO, info.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if (len as usize) < (SK_MEMINFO_DROPS + 1) * 4 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "SO_MEMINFO returned no drop count (a kernel before 4.12)",
        ));
    }
    Ok(u64::from(info[SK_MEMINFO_DROPS]))
}

/// What one received message was, from its length, flags and control messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes placed in the buffer.
    pub len: usize,
    /// The datagram was longer than the buffer (MSG_TRUNC): the rest is lost.
    pub truncated: bool,
    /// UDP_GRO: the buffer holds datagrams of this size (the last may be shorter).
    pub segment: Option<usize>,
    /// SO_RXQ_OVFL: the socket's dropped datagrams when this one was queued; the kernel sends
    /// it only once that count is not zero (None then means none, where the option is on).
    pub drops: Option<u32>,
}

/// Control room for one message's control data, 8-byte aligned as cmsghdr needs.
type Control = [u64; CONTROL_WORDS];

/// The meaning of one filled msghdr.
fn meta_of(msg: &libc::msghdr, len: usize) -> RecvMeta {
    let mut meta = RecvMeta {
        len,
        truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
        ..Default::default()
    };
    if msg.msg_control.is_null() || msg.msg_controllen == 0 {
        return meta;
    }
    // SAFETY: msg was filled by the kernel; msg_control points at a live control buffer of
    // msg_controllen bytes (the kernel shrinks it to what it wrote), which CMSG_FIRSTHDR and
    // CMSG_NXTHDR never step outside.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !cmsg.is_null() {
        // SAFETY: non-null and inside the control buffer, as above.
        let hdr = unsafe { &*cmsg };
        // SAFETY: the data of both control messages read is one 4-byte int the kernel wrote
        // after the header; read_unaligned, for the buffer promises no alignment for it.
        let int = || unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<u32>()) };
        if hdr.cmsg_level == libc::SOL_SOCKET && hdr.cmsg_type == SO_RXQ_OVFL {
            meta.drops = Some(int());
        } else if hdr.cmsg_level == libc::SOL_UDP && hdr.cmsg_type == libc::UDP_GRO {
            meta.segment = Some(int() as usize);
        }
        // SAFETY: as CMSG_FIRSTHDR above.
        cmsg = unsafe { libc::CMSG_NXTHDR(msg, cmsg) };
    }
    meta
}

/// Room for one recvmsg's control data, reused call after call.
pub struct RecvRoom {
    control: Control,
}

impl Default for RecvRoom {
    fn default() -> Self {
        RecvRoom {
            control: [0; CONTROL_WORDS],
        }
    }
}

impl RecvRoom {
    /// recvmsg(2) of one datagram into `buf`, reading its control messages (UDP_GRO segment
    /// size, SO_RXQ_OVFL drops) into the room.
    pub fn recvmsg(&mut self, fd: RawFd, buf: &mut [u8], flags: i32) -> io::Result<RecvMeta> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; zeroed means no name.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = self.control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of::<Control>() as _;
        // SAFETY: iov points at buf, borrowed mutably for this call; the control room is this
        // struct's, borrowed mutably; both outlive the call.
        let len = check(unsafe { libc::recvmsg(fd, &mut msg, flags) })?;
        Ok(meta_of(&msg, len))
    }
}

/// Preallocated `mmsghdr`, `iovec` and control arrays for sendmmsg/recvmmsg: each call builds
/// its headers in this room from slices borrowed for exactly that call, so it allocates
/// nothing once the room has held a batch as large.
pub struct MmsgRoom {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    /// Where each message's iovecs start in `iovs` (while building).
    starts: Vec<usize>,
    control: Vec<Control>,
    /// Messages the last recvmmsg filled (their headers are read by `meta`).
    filled: usize,
}

// SAFETY: between calls the room holds only stale addresses that nothing dereferences: every
// header is rebuilt from slices borrowed for one call, on the thread making it; `meta` reads
// only lengths, flags and the room's own control buffers.
unsafe impl Send for MmsgRoom {}

impl MmsgRoom {
    /// Room for `messages` messages of up to `iovs_per_message` slices each.
    pub fn new(messages: usize, iovs_per_message: usize) -> MmsgRoom {
        let messages = messages.clamp(1, MAX_BATCH);
        MmsgRoom {
            hdrs: Vec::with_capacity(messages),
            iovs: Vec::with_capacity(messages * iovs_per_message.max(1)),
            starts: Vec::with_capacity(messages + 1),
            control: vec![[0; CONTROL_WORDS]; messages],
            filled: 0,
        }
    }

    /// Point every header at its iovecs (after every iovec is in place, so no later push can
    /// move them) and, with `control`, at its control room.
    fn link(&mut self, control: bool) {
        self.hdrs.clear();
        if self.control.len() < self.starts.len().saturating_sub(1) {
            self.control.resize(self.starts.len() - 1, [0; CONTROL_WORDS]);
        }
        for (i, w) in self.starts.windows(2).enumerate() {
            // SAFETY: mmsghdr is plain data; zeroed means no name and no control.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = self.iovs[w[0]..].as_mut_ptr();
            h.msg_hdr.msg_iovlen = (w[1] - w[0]) as _;
            if control {
                h.msg_hdr.msg_control = self.control[i].as_mut_ptr().cast();
                h.msg_hdr.msg_controllen = std::mem::size_of::<Control>() as _;
            }
            self.hdrs.push(h);
        }
    }

    /// sendmmsg(2) of one message per item, each a gather list of slices. Returns how many
    /// messages the kernel took (fewer than given when the socket buffer filled on a
    /// non-blocking socket or a send timed out after the first).
    pub fn sendmmsg<'a, M, S>(&mut self, fd: RawFd, messages: M, flags: i32) -> io::Result<usize>
    where
        M: IntoIterator<Item = S>,
        S: IntoIterator<Item = &'a [u8]>,
    {
        self.iovs.clear();
        self.starts.clear();
        for message in messages.into_iter().take(MAX_BATCH) {
            self.starts.push(self.iovs.len());
            self.iovs
                .extend(message.into_iter().filter(|s| !s.is_empty()).map(|s| libc::iovec {
                    iov_base: s.as_ptr() as *mut libc::c_void,
                    iov_len: s.len(),
                }));
        }
        self.starts.push(self.iovs.len());
        self.link(false);
        if self.hdrs.is_empty() {
            return Ok(0);
        }
        // SAFETY: every header points at iovecs in this room, each made from a slice borrowed
        // for 'a, which outlives this call; the kernel only reads them and writes msg_len.
        let rc = unsafe { libc::sendmmsg(fd, self.hdrs.as_mut_ptr(), self.hdrs.len() as u32, flags) };
        check(rc as isize)
    }

    /// recvmmsg(2) into one buffer per item, each message with control room for the UDP_GRO
    /// and SO_RXQ_OVFL control messages; `meta(i)` then says what message i was. With
    /// MSG_WAITFORONE it blocks (as the socket's timeout allows) only for the first.
    pub fn recvmmsg<'a>(
        &mut self,
        fd: RawFd,
        bufs: impl IntoIterator<Item = &'a mut [u8]>,
        flags: i32,
    ) -> io::Result<usize> {
        self.iovs.clear();
        self.starts.clear();
        self.filled = 0;
        for buf in bufs.into_iter().take(MAX_BATCH) {
            self.starts.push(self.iovs.len());
            self.iovs.push(libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            });
        }
        self.starts.push(self.iovs.len());
        self.link(true);
        if self.hdrs.is_empty() {
            return Ok(0);
        }
        // SAFETY: every header points at one iovec made from a buffer borrowed mutably for
        // 'a (outliving the call) and at its own control room in self; no timeout pointer.
        let rc = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as u32,
                flags,
                std::ptr::null_mut(),
            )
        };
        let n = check(rc as isize)?;
        self.filled = n;
        Ok(n)
    }

    /// What message `i` of the last recvmmsg was (None past the messages it filled).
    pub fn meta(&self, i: usize) -> Option<RecvMeta> {
        let h = self.hdrs.get(i).filter(|_| i < self.filled)?;
        Some(meta_of(&h.msg_hdr, h.msg_len as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    fn pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        b.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        (a, b)
    }

    #[test]
    fn sendmmsg_gathers_and_recvmmsg_scatters_with_drop_counts() {
        let (a, b) = pair();
        enable_rxq_ovfl(b.as_raw_fd()).unwrap();
        let mut tx = MmsgRoom::new(4, 2);
        let parts: [[&[u8]; 2]; 3] = [[b"ab", b"c"], [b"de", b""], [b"f", b"ghij"]];
        assert_eq!(tx.sendmmsg(a.as_raw_fd(), parts, 0).unwrap(), 3);
        let mut bufs = [[0u8; 8]; 4];
        let mut rx = MmsgRoom::new(4, 1);
        let n = rx
            .recvmmsg(b.as_raw_fd(), bufs.iter_mut().map(|b| &mut b[..]), libc::MSG_WAITFORONE)
            .unwrap();
        assert!(n >= 1);
        let mut got = Vec::new();
        for (i, buf) in bufs.iter().enumerate().take(n) {
            let meta = rx.meta(i).unwrap();
            assert_eq!(
                meta.drops, None,
                "the kernel says nothing while nothing was dropped: {meta:?}"
            );
            got.push(buf[..meta.len].to_vec());
        }
        let mut room = RecvRoom::default();
        while got.len() < 3 {
            let mut buf = [0u8; 8];
            let meta = room.recvmsg(b.as_raw_fd(), &mut buf, 0).unwrap();
            got.push(buf[..meta.len].to_vec());
        }
        assert_eq!(got, vec![b"abc".to_vec(), b"de".to_vec(), b"fghij".to_vec()]);
        assert!(rx.meta(n).is_none());
    }

    #[test]
    fn a_datagram_longer_than_the_buffer_is_truncated() {
        let (a, b) = pair();
        a.send(&[1u8; 100]).unwrap();
        let mut buf = [0u8; 10];
        let meta = RecvRoom::default().recvmsg(b.as_raw_fd(), &mut buf, 0).unwrap();
        assert_eq!((meta.len, meta.truncated, meta.drops), (10, true, None));
    }

    #[test]
    fn the_kernel_grants_at_least_the_requested_receive_buffer() {
        let (_, b) = pair();
        let granted = set_rcvbuf(b.as_raw_fd(), 4096).unwrap();
        assert!(granted >= 4096, "{granted}");
        assert!(set_sndbuf(b.as_raw_fd(), 8192).unwrap() >= 8192);
        assert!(path_mtu(b.as_raw_fd()).unwrap() >= 576);
        set_max_pacing_rate(b.as_raw_fd(), 1_000_000).unwrap();
        assert_eq!(socket_drops(b.as_raw_fd()).unwrap(), 0);
        set_udp_segment(b.as_raw_fd(), 1000).unwrap();
        set_udp_gro(b.as_raw_fd(), true).unwrap();
    }
}
