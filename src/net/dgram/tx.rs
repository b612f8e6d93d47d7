//! The send paths, one per `case::UdpSendMode`. Every datagram is written in place (header,
//! and with verify the pattern) into a buffer the sender made once; the batching modes stamp
//! one send time per system call (what all its datagrams share: the moment they were handed
//! over), the others one per datagram.

use super::header::{write_fields, write_part, Header};
use super::{partial, refusal, retry, DgramSender, ZcCounts, GATHER_FIELDS, IP_UDP_HEADERS, MAX_DATAGRAM};
use crate::case::Align;
use crate::net::completions::ZcSlots;
use crate::net::message::{self, Message};
use crate::observation::Unsupported;
use crate::sys::aligned::AlignedBuf;
use crate::sys::net::{self as sock, IovecStore};
use crate::sys::udp::{self, MmsgRoom, UDP_MAX_SEGMENTS};
use crate::sys::uring_send::{SendRing, SendRingConfig, SetupError};
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::header::monotonic_ns;

/// How long a zero-copy completion or an io_uring send may take before the peer or the
/// kernel is taken to be stuck.
const STUCK: Duration = Duration::from_secs(10);

fn stamp(seq: u64) -> Header {
    Header {
        seq,
        sent_ns: monotonic_ns(),
    }
}

/// `send`: send(2) of one contiguous buffer per datagram.
pub struct SendSender {
    buf: AlignedBuf,
    verify: bool,
    syscalls: u64,
}

impl SendSender {
    pub fn new(size: usize, verify: bool) -> SendSender {
        let mut buf = message::buffer(size, Align::Page);
        write_part(&mut buf, 0, &Header { seq: 0, sent_ns: 0 }, true);
        SendSender {
            buf,
            verify,
            syscalls: 0,
        }
    }
}

impl DgramSender for SendSender {
    fn send(&mut self, fd: RawFd, first_seq: u64, count: usize) -> io::Result<usize> {
        for i in 0..count {
            write_part(&mut self.buf, 0, &stamp(first_seq + i as u64), self.verify);
            let buf = &self.buf;
            if let Err(e) = retry(&mut self.syscalls, || sock::send(fd, buf, 0)) {
                return partial(i, e);
            }
        }
        Ok(count)
    }
    fn syscalls(&self) -> u64 {
        self.syscalls
    }
}

/// `sendmsg`: sendmsg(2) per datagram of a gather list of `GATHER_FIELDS` separate buffers.
pub struct SendmsgSender {
    message: Message,
    iov: IovecStore,
    verify: bool,
    syscalls: u64,
}

impl SendmsgSender {
    pub fn new(size: usize, verify: bool) -> SendmsgSender {
        let mut message = Message::placed(size, GATHER_FIELDS, 0, Align::Page);
        write_fields(
            message.fields.iter_mut().map(|f| &mut f[..]),
            &Header { seq: 0, sent_ns: 0 },
            true,
        );
        SendmsgSender {
            message,
            iov: IovecStore::with_capacity(GATHER_FIELDS),
            verify,
            syscalls: 0,
        }
    }
}

impl DgramSender for SendmsgSender {
    fn send(&mut self, fd: RawFd, first_seq: u64, count: usize) -> io::Result<usize> {
        for i in 0..count {
            let header = stamp(first_seq + i as u64);
            write_fields(self.message.fields.iter_mut().map(|f| &mut f[..]), &header, self.verify);
            let list = self.iov.gather(self.message.fields.iter().map(|f| &f[..]));
            if let Err(e) = retry(&mut self.syscalls, || sock::sendmsg(fd, list, 0)) {
                return partial(i, e);
            }
        }
        Ok(count)
    }
    fn syscalls(&self) -> u64 {
        self.syscalls
    }
}

/// `sendmmsg`: sendmmsg(2) of up to `batch` datagrams, each a gather list of
/// `GATHER_FIELDS` buffers.
pub struct SendmmsgSender {
    messages: Vec<Message>,
    room: MmsgRoom,
    verify: bool,
    syscalls: u64,
}

impl SendmmsgSender {
    pub fn new(size: usize, batch: usize, verify: bool) -> SendmmsgSender {
        let messages = (0..batch.max(1))
            .map(|i| {
                let mut m = Message::placed(size, GATHER_FIELDS, i as u64, Align::Page);
                let header = Header {
                    seq: i as u64,
                    sent_ns: 0,
                };
                write_fields(m.fields.iter_mut().map(|f| &mut f[..]), &header, true);
                m
            })
            .collect::<Vec<_>>();
        SendmmsgSender {
            room: MmsgRoom::new(messages.len(), GATHER_FIELDS),
            messages,
            verify,
            syscalls: 0,
        }
    }
}

impl DgramSender for SendmmsgSender {
    fn send(&mut self, fd: RawFd, first_seq: u64, count: usize) -> io::Result<usize> {
        let mut sent = 0;
        while sent < count {
            let k = (count - sent).min(self.messages.len());
            let now = monotonic_ns();
            for (j, m) in self.messages[..k].iter_mut().enumerate() {
                let header = Header {
                    seq: first_seq + (sent + j) as u64,
                    sent_ns: now,
                };
                write_fields(m.fields.iter_mut().map(|f| &mut f[..]), &header, self.verify);
            }
            let (room, messages) = (&mut self.room, &self.messages[..k]);
            let n = match retry(&mut self.syscalls, || {
                room.sendmmsg(fd, messages.iter().map(|m| m.fields.iter().map(|f| &f[..])), 0)
            }) {
                Ok(n) => n,
                Err(e) => return partial(sent, e),
            };
            sent += n;
            if n < k {
                break;
            }
        }
        Ok(sent)
    }
    fn syscalls(&self) -> u64 {
        self.syscalls
    }
    fn batch(&self) -> usize {
        self.messages.len()
    }
}

/// `gso`: UDP_SEGMENT on the socket and one send(2) of up to `batch` datagrams (at most 64
/// and 65,507 bytes per call) laid end to end, which the kernel cuts into datagrams of `size`.
pub struct GsoSender {
    buf: AlignedBuf,
    size: usize,
    per_call: usize,
    verify: bool,
    syscalls: u64,
    set_on: Option<RawFd>,
}

impl GsoSender {
    pub fn new(size: usize, batch: usize, verify: bool) -> io::Result<GsoSender> {
        super::probe_option("UDP GSO (UDP_SEGMENT)", |fd| udp::set_udp_segment(fd, 0))?;
        let per_call = batch.min(UDP_MAX_SEGMENTS).min(MAX_DATAGRAM / size).max(1);
        let mut buf = message::buffer(per_call * size, Align::Page);
        for (i, d) in buf.chunks_mut(size).enumerate() {
            write_part(
                d,
                0,
                &Header {
                    seq: i as u64,
                    sent_ns: 0,
                },
                true,
            );
        }
        Ok(GsoSender {
            buf,
            size,
            per_call,
            verify,
            syscalls: 0,
            set_on: None,
        })
    }

    /// UDP_SEGMENT on a new socket, after checking that a datagram fits the path's MTU.
    fn set_up(&mut self, fd: RawFd) -> io::Result<()> {
        if let Ok(mtu) = udp::path_mtu(fd) {
            if self.size + IP_UDP_HEADERS > mtu {
                return Err(crate::net::mode::unavailable(Unsupported::new(
                    "UDP GSO",
                    format!(
                        "it needs the datagram size ≤ MTU − {IP_UDP_HEADERS} = {} bytes on this path (MTU {mtu}), and {} bytes were asked",
                        mtu.saturating_sub(IP_UDP_HEADERS),
                        self.size
                    ),
                )));
            }
        }
        udp::set_udp_segment(fd, self.size as u16).map_err(|e| refusal("UDP GSO (UDP_SEGMENT)", e))?;
        self.set_on = Some(fd);
        Ok(())
    }
}

impl DgramSender for GsoSender {
    fn send(&mut self, fd: RawFd, first_seq: u64, count: usize) -> io::Result<usize> {
        if self.set_on != Some(fd) {
            self.set_up(fd)?;
        }
        let mut sent = 0;
        while sent < count {
            let k = (count - sent).min(self.per_call);
            let now = monotonic_ns();
            for (j, d) in self.buf.chunks_mut(self.size).take(k).enumerate() {
                let header = Header {
                    seq: first_seq + (sent + j) as u64,
                    sent_ns: now,
                };
                write_part(d, 0, &header, self.verify);
            }
            let bytes = &self.buf[..k * self.size];
            if let Err(e) = retry(&mut self.syscalls, || sock::send(fd, bytes, 0)) {
                return partial(sent, e);
            }
            sent += k;
        }
        Ok(sent)
    }
    fn syscalls(&self) -> u64 {
        self.syscalls
    }
    fn batch(&self) -> usize {
        self.per_call
    }
}

/// `zerocopy`: SO_ZEROCOPY and send(2) with MSG_ZEROCOPY per datagram from a ring of
/// buffers; a buffer is rewritten only after the completion of the send that used it (read
/// from the error queue, `net::completions::CompletionTracker`), so what the kernel may still
/// send from never changes.
pub struct ZerocopySender {
    ring: Vec<AlignedBuf>,
    /// The completions, and which send last used each buffer.
    slots: ZcSlots,
    verify: bool,
    enabled_on: Option<RawFd>,
    send_syscalls: u64,
    enobufs: u64,
}

impl ZerocopySender {
    pub fn new(size: usize, verify: bool) -> io::Result<ZerocopySender> {
        super::probe_option("UDP MSG_ZEROCOPY (SO_ZEROCOPY)", udp::enable_zerocopy)?;
        let slots = crate::net::mode::zero_copy_ring_slots(size, None);
        let ring = (0..slots)
            .map(|i| {
                let mut b = message::buffer(size, Align::Page);
                let header = Header {
                    seq: i as u64,
                    sent_ns: 0,
                };
                write_part(&mut b, 0, &header, true);
                b
            })
            .collect();
        Ok(ZerocopySender {
            ring,
            slots: ZcSlots::new(slots),
            verify,
            enabled_on: None,
            send_syscalls: 0,
            enobufs: 0,
        })
    }

    /// Wait until the send that last used `slot` has completed.
    fn wait_for_slot(&mut self, fd: RawFd, slot: usize) -> io::Result<()> {
        self.slots
            .wait_for_slot(fd, slot, STUCK, "a UDP zero-copy completion did not arrive within 10 s")
    }

    fn send_one(&mut self, fd: RawFd, seq: u64) -> io::Result<()> {
        let slot = (seq % self.ring.len() as u64) as usize;
        // Never touch a buffer the kernel may still send from.
        self.wait_for_slot(fd, slot)?;
        write_part(&mut self.ring[slot], 0, &stamp(seq), self.verify);
        let mut refusals = 0u32;
        loop {
            let buf = &self.ring[slot];
            match retry(&mut self.send_syscalls, || sock::send(fd, buf, sock::MSG_ZEROCOPY)) {
                Ok(_) => {
                    let id = self.slots.tracker.record_send();
                    self.slots.sent_from(slot, id);
                    return Ok(());
                }
                // optmem_max or RLIMIT_MEMLOCK exhausted: reaping completions frees it.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    self.enobufs += 1;
                    refusals += 1;
                    if refusals > 1000 {
                        return Err(io::Error::other(
                            "MSG_ZEROCOPY kept failing with ENOBUFS for 10 s; raise net.core.optmem_max or RLIMIT_MEMLOCK",
                        ));
                    }
                    self.slots.reap(fd, Some(Duration::from_millis(10)))?;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl DgramSender for ZerocopySender {
    fn send(&mut self, fd: RawFd, first_seq: u64, count: usize) -> io::Result<usize> {
        if self.enabled_on != Some(fd) {
            udp::enable_zerocopy(fd).map_err(|e| refusal("UDP MSG_ZEROCOPY (SO_ZEROCOPY)", e))?;
            self.enabled_on = Some(fd);
        }
        for i in 0..count {
            if let Err(e) = self.send_one(fd, first_seq + i as u64) {
                return partial(i, e);
            }
        }
        Ok(count)
    }
    fn syscalls(&self) -> u64 {
        self.send_syscalls + self.slots.reap_syscalls
    }
    fn finish(&mut self, fd: RawFd) -> io::Result<()> {
        self.slots.drain(fd, STUCK, |missing| {
            format!("{missing} UDP zero-copy completions still missing after 10 s")
        })
    }
    fn zerocopy(&self) -> Option<ZcCounts> {
        Some(ZcCounts {
            completions: self.slots.tracker.counts.clone(),
            enobufs: self.enobufs,
            slot_waits: self.slots.slot_waits,
        })
    }
}

/// `uring`: io_uring SENDMSG of each datagram from a ring of `batch` slots, the batch
/// submitted as one linked chain with one io_uring_enter that also waits for the results
/// (`sys::uring_send::SendRing`). `uring-zc`: the same with SENDMSG_ZC; a slot is written
/// again only after its notification (the ring's `wait_free`).
pub struct UringSender {
    ring: SendRing,
    /// `uring-zc`: SENDMSG_ZC, whose notifications say whether the kernel copied.
    zero_copy: bool,
    /// Times a slot's notification had not come when the slot was next wanted.
    slot_waits: u64,
    /// Whether each slot holds the pattern of some datagram yet (without verify it is
    /// written once).
    filled: Vec<bool>,
    verify: bool,
}

impl UringSender {
    pub fn new(size: usize, batch: usize, verify: bool, zero_copy: bool) -> io::Result<UringSender> {
        let (align, offset) = message::placement(Align::Page);
        let config = SendRingConfig {
            slots: batch.max(1),
            field_sizes: vec![size],
            batch: batch.max(1),
            zero_copy,
            fixed_buffers: false,
            align,
            offset,
        };
        let ring = SendRing::new(&config).map_err(|e| match e {
            SetupError::Refused(reason) => crate::net::mode::unavailable(Unsupported::new("io_uring", reason)),
            SetupError::Failed(e) => e,
        })?;
        Ok(UringSender {
            filled: vec![false; ring.slots()],
            ring,
            zero_copy,
            slot_waits: 0,
            verify,
        })
    }
}

impl DgramSender for UringSender {
    fn send(&mut self, fd: RawFd, first_seq: u64, count: usize) -> io::Result<usize> {
        let mut sent = 0;
        while sent < count {
            let k = (count - sent).min(self.ring.slots());
            let now = monotonic_ns();
            for slot in 0..k {
                // After a submit every SENDMSG slot is free (its result came); a SENDMSG_ZC
                // slot only once its notification came too: wait if not.
                if !self.ring.is_free(slot) && self.ring.wait_free(slot, STUCK)? {
                    self.slot_waits += 1;
                }
                let header = Header {
                    seq: first_seq + (sent + slot) as u64,
                    sent_ns: now,
                };
                let pattern = self.verify || !self.filled[slot];
                let mut offset = 0;
                self.ring.write_fields(slot, |field| {
                    write_part(field, offset, &header, pattern);
                    offset += field.len();
                });
                self.filled[slot] = true;
                self.ring.queue(slot, fd, STUCK)?;
            }
            // io_uring waits for room in a full socket buffer itself; an error here is a
            // failure (the ring refuses every later call with it).
            self.ring.submit(STUCK)?;
            sent += k;
        }
        Ok(sent)
    }
    fn syscalls(&self) -> u64 {
        self.ring.counts().enters
    }
    fn finish(&mut self, _fd: RawFd) -> io::Result<()> {
        self.ring.wait_idle(STUCK)
    }
    fn zerocopy(&self) -> Option<ZcCounts> {
        self.zero_copy.then(|| ZcCounts {
            completions: crate::net::completions::CompletionCounts::of_ring(&self.ring.counts().cqe),
            enobufs: 0,
            slot_waits: self.slot_waits,
        })
    }
    fn batch(&self) -> usize {
        self.ring.slots()
    }
}
