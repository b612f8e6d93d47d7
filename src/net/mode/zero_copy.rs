//! zero-copy: SO_ZEROCOPY + sendmsg(MSG_ZEROCOPY) over the fields. The kernel pins the pages
//! instead of copying them and reports on the socket's error queue when it is done with them,
//! so the sender keeps a ring of messages and reuses one only after every send call that
//! referenced it has completed. Over loopback and veth the kernel copies anyway at delivery;
//! the completions say so and iopath reports the fraction.

use super::one_copy::{sendmsg_all, SendEvent};
use super::{SendCounts, Sender, ZeroCopyCounts};
use crate::net::completions::ZcSlots;
use crate::net::message::Message;
use crate::sys::net as sock;
use crate::sys::net::IovecStore;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Keep about this many bytes in flight across the ring (beyond a typical socket buffer).
const RING_BYTES: usize = 8 << 20;
const RING_MIN: usize = 4;
const RING_MAX: usize = 1024;
/// How long to wait for a completion before deciding the peer is stuck.
const COMPLETION_TIMEOUT: Duration = Duration::from_secs(10);

pub struct ZeroCopySender {
    ring: Vec<Message>,
    /// Room for the iovecs of a send.
    iov: IovecStore,
    /// The completions, and which send call last referenced each ring slot.
    slots: ZcSlots,
    verify: bool,
    enabled_on: Option<RawFd>,
    send_syscalls: u64,
    enobufs: u64,
}

/// How many messages of `size` bytes a zero-copy ring holds (zero-copy and uring-zc): by
/// default about RING_BYTES and at least RING_MIN; with `--zc-ring BYTES`, that many bytes of
/// messages and at least one (one buffer, reused after its completion).
pub fn ring_slots(size: usize, ring_bytes: Option<u64>) -> usize {
    match ring_bytes {
        None => (RING_BYTES / size.max(1)).clamp(RING_MIN, RING_MAX),
        Some(bytes) => (bytes / size.max(1) as u64).clamp(1, RING_MAX as u64) as usize,
    }
}

impl ZeroCopySender {
    /// `ring_bytes`: `--zc-ring` (None: the default ring).
    pub fn new(size: usize, fields: usize, verify: bool, ring_bytes: Option<u64>, align: crate::case::Align) -> Self {
        let slots = ring_slots(size, ring_bytes);
        ZeroCopySender {
            ring: (0..slots)
                .map(|i| Message::placed(size, fields, i as u64, align))
                .collect(),
            iov: IovecStore::with_capacity(fields),
            slots: ZcSlots::new(slots),
            verify,
            enabled_on: None,
            send_syscalls: 0,
            enobufs: 0,
        }
    }

    /// Block until every send call up to the slot's last one has completed.
    fn wait_for_slot(&mut self, fd: RawFd, slot: usize) -> io::Result<()> {
        self.slots.wait_for_slot(
            fd,
            slot,
            COMPLETION_TIMEOUT,
            "zero-copy completion did not arrive within 10 s: the peer stopped reading",
        )
    }
}

impl Sender for ZeroCopySender {
    fn send(&mut self, fd: RawFd, seq: u64) -> io::Result<()> {
        if self.enabled_on != Some(fd) {
            sock::enable_zerocopy(fd)
                .map_err(|e| io::Error::new(e.kind(), format!("setsockopt(SO_ZEROCOPY) failed: {e}")))?;
            self.enabled_on = Some(fd);
        }
        let slot = (seq % self.ring.len() as u64) as usize;
        // Never touch a buffer the kernel may still be reading.
        self.wait_for_slot(fd, slot)?;
        if self.verify {
            self.ring[slot].fill(seq);
        }
        let (slots, enobufs) = (&mut self.slots, &mut self.enobufs);
        let mut last_id = None;
        let mut consecutive_enobufs = 0u32;
        sendmsg_all(
            fd,
            &self.ring[slot],
            &mut self.iov,
            sock::MSG_ZEROCOPY | sock::MSG_NOSIGNAL,
            &mut self.send_syscalls,
            |event| {
                match event {
                    SendEvent::Sent => {
                        last_id = Some(slots.tracker.record_send());
                        consecutive_enobufs = 0;
                    }
                    SendEvent::NoBuffers => {
                        // optmem_max or RLIMIT_MEMLOCK exhausted: reaping completions frees it.
                        *enobufs += 1;
                        consecutive_enobufs += 1;
                        if consecutive_enobufs > 1000 {
                            return Err(io::Error::other(
                            "MSG_ZEROCOPY kept failing with ENOBUFS for 10 s; raise net.core.optmem_max or RLIMIT_MEMLOCK",
                        ));
                        }
                        slots.reap(fd, Some(Duration::from_millis(10)))?;
                    }
                }
                Ok(())
            },
        )?;
        if let Some(id) = last_id {
            self.slots.sent_from(slot, id);
        }
        Ok(())
    }

    fn drain(&mut self, fd: RawFd, timeout: Duration) -> io::Result<()> {
        self.slots.drain(fd, timeout, |missing| {
            format!("{missing} zero-copy completions still missing after {timeout:?}")
        })
    }

    fn counts(&self) -> SendCounts {
        SendCounts {
            syscalls: self.send_syscalls + self.slots.reap_syscalls,
            zerocopy: Some(ZeroCopyCounts {
                completions: self.slots.tracker.counts.clone(),
                enobufs: self.enobufs,
                slot_waits: self.slots.slot_waits,
            }),
            uring: None,
        }
    }

    /// Rewrites the ring slot message `seq` was sent from, deliberately without waiting for
    /// its completion: the alias probe asks what the kernel holds at that moment.
    fn buffers(&self) -> Vec<(usize, usize)> {
        super::spans(self.ring.iter().flat_map(|m| &m.fields))
    }

    fn rewrite(&mut self, seq: u64) -> io::Result<()> {
        let slot = (seq % self.ring.len() as u64) as usize;
        self.ring[slot].fill(seq + 1);
        Ok(())
    }
}
