//! The receive paths, one per `case::UdpRecvMode`. Each reads into buffers it made once;
//! recvmmsg and GRO with control room for SO_RXQ_OVFL (the socket's drop counter, enabled on
//! the first call on a socket) and, for GRO, the segment size; recv reads the bytes alone. The arrival time of every datagram a call
//! returns is the moment the call returned.

use super::header::monotonic_ns;
use super::{refusal, DgramReceiver, SeqTracker};
use crate::case::Align;
use crate::net::message;
use crate::sys::aligned::AlignedBuf;
use crate::sys::udp::{self, MmsgRoom, RecvMeta, RecvRoom};
use std::io;
use std::os::fd::RawFd;

/// The GRO receive buffer: room for the largest coalesced packet (64 KiB by default, the
/// device's gro_max_size) with room to spare; a longer one is truncated and counted.
pub(super) const GRO_BUFFER: usize = 1 << 17;

/// A receive that found nothing within the socket's timeout, or was interrupted: Ok(0).
fn nothing(err: io::Error) -> io::Result<usize> {
    match err.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted => Ok(0),
        _ => Err(err),
    }
}

/// What every receiver keeps: the datagram size, verify, counts, the socket it set up.
struct Common {
    size: usize,
    verify: bool,
    syscalls: u64,
    drops: Option<u64>,
    set_up: Option<RawFd>,
}

impl Common {
    fn new(size: usize, verify: bool) -> Common {
        Common {
            size,
            verify,
            syscalls: 0,
            drops: None,
            set_up: None,
        }
    }

    /// SO_RXQ_OVFL on a new socket; the kernel says the count only once it is not zero, so
    /// it is 0 until a datagram says otherwise (a kernel that refuses the option leaves it
    /// unknown).
    fn attach(&mut self, fd: RawFd) -> bool {
        if self.set_up == Some(fd) {
            return false;
        }
        if udp::enable_rxq_ovfl(fd).is_ok() && self.drops.is_none() {
            self.drops = Some(0);
        }
        self.set_up = Some(fd);
        true
    }

    /// Feed one message's datagrams to the tracker: a GRO buffer split by its segment size.
    fn take(&mut self, data: &[u8], meta: &RecvMeta, arrival: u64, seen: &mut SeqTracker) -> usize {
        if let Some(d) = meta.drops {
            self.drops = Some(u64::from(d));
        }
        let check = self.verify.then_some(self.size);
        match meta.segment.filter(|s| *s > 0) {
            None => {
                seen.datagram(data, meta.truncated, arrival, check);
                1
            }
            Some(segment) => {
                let n = data.len().div_ceil(segment);
                for (i, d) in data.chunks(segment).enumerate() {
                    seen.datagram(d, meta.truncated && i + 1 == n, arrival, check);
                }
                n
            }
        }
    }
}

/// `recv`: one datagram per call, recv(2) into one buffer with no control messages (what
/// iperf3 does): the socket's drop count is read apart, with SO_MEMINFO
/// (`sys::udp::socket_drops`), not from SO_RXQ_OVFL on every datagram.
pub struct RecvReceiver {
    buf: AlignedBuf,
    common: Common,
}

impl RecvReceiver {
    pub fn new(size: usize, verify: bool) -> RecvReceiver {
        RecvReceiver {
            buf: message::buffer(size, Align::Page),
            common: Common::new(size, verify),
        }
    }
}

impl DgramReceiver for RecvReceiver {
    fn recv(&mut self, fd: RawFd, seen: &mut SeqTracker) -> io::Result<usize> {
        self.common.syscalls += 1;
        // MSG_TRUNC: the datagram's own length, so a longer one is known to be cut.
        let len = match crate::sys::net::recv(fd, &mut self.buf, libc::MSG_TRUNC) {
            Ok(len) => len,
            Err(e) => return nothing(e),
        };
        let arrival = monotonic_ns();
        let meta = RecvMeta {
            len: len.min(self.buf.len()),
            truncated: len > self.buf.len(),
            segment: None,
            drops: None,
        };
        Ok(self.common.take(&self.buf[..meta.len], &meta, arrival, seen))
    }
    fn syscalls(&self) -> u64 {
        self.common.syscalls
    }
    /// None: plain recv(2) reads no control message (the workloads read SO_MEMINFO's count).
    fn kernel_drops(&self) -> Option<u64> {
        None
    }
}

/// `recvmmsg`: recvmmsg(2) of up to `batch` datagrams, waiting only for the first
/// (MSG_WAITFORONE).
pub struct RecvmmsgReceiver {
    bufs: Vec<AlignedBuf>,
    room: MmsgRoom,
    common: Common,
}

impl RecvmmsgReceiver {
    pub fn new(size: usize, batch: usize, verify: bool) -> RecvmmsgReceiver {
        let bufs: Vec<AlignedBuf> = (0..batch.max(1)).map(|_| message::buffer(size, Align::Page)).collect();
        RecvmmsgReceiver {
            room: MmsgRoom::new(bufs.len(), 1),
            bufs,
            common: Common::new(size, verify),
        }
    }
}

impl DgramReceiver for RecvmmsgReceiver {
    fn recv(&mut self, fd: RawFd, seen: &mut SeqTracker) -> io::Result<usize> {
        self.common.attach(fd);
        self.common.syscalls += 1;
        let n = match self
            .room
            .recvmmsg(fd, self.bufs.iter_mut().map(|b| &mut b[..]), libc::MSG_WAITFORONE)
        {
            Ok(n) => n,
            Err(e) => return nothing(e),
        };
        let arrival = monotonic_ns();
        let mut datagrams = 0;
        for (i, buf) in self.bufs.iter().enumerate().take(n) {
            if let Some(meta) = self.room.meta(i) {
                datagrams += self.common.take(&buf[..meta.len], &meta, arrival, seen);
            }
        }
        Ok(datagrams)
    }
    fn syscalls(&self) -> u64 {
        self.common.syscalls
    }
    fn kernel_drops(&self) -> Option<u64> {
        self.common.drops
    }
}

/// `gro`: UDP_GRO on the socket and recvmsg(2) into one large buffer, which holds one
/// datagram or, when the kernel coalesced several of one flow, many of the size its UDP_GRO
/// control message gives.
pub struct GroReceiver {
    buf: AlignedBuf,
    room: RecvRoom,
    common: Common,
}

impl GroReceiver {
    pub fn new(size: usize, verify: bool) -> io::Result<GroReceiver> {
        super::probe_option("UDP GRO (UDP_GRO)", |fd| udp::set_udp_gro(fd, true))?;
        Ok(GroReceiver {
            buf: message::buffer(GRO_BUFFER.max(size), Align::Page),
            room: RecvRoom::default(),
            common: Common::new(size, verify),
        })
    }
}

impl DgramReceiver for GroReceiver {
    fn recv(&mut self, fd: RawFd, seen: &mut SeqTracker) -> io::Result<usize> {
        if self.common.attach(fd) {
            if let Err(e) = udp::set_udp_gro(fd, true) {
                self.common.set_up = None;
                return Err(refusal("UDP GRO (UDP_GRO)", e));
            }
        }
        self.common.syscalls += 1;
        let meta = match self.room.recvmsg(fd, &mut self.buf, 0) {
            Ok(meta) => meta,
            Err(e) => return nothing(e),
        };
        let arrival = monotonic_ns();
        Ok(self.common.take(&self.buf[..meta.len], &meta, arrival, seen))
    }
    fn syscalls(&self) -> u64 {
        self.common.syscalls
    }
    fn kernel_drops(&self) -> Option<u64> {
        self.common.drops
    }
}
