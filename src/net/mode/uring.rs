//! uring and uring-zc: the message's fields as one iovec each, sent by io_uring — SENDMSG
//! (one-copy's copies, io_uring's syscall model) or SENDMSG_ZC with
//! IORING_SEND_ZC_REPORT_USAGE (the pages pinned, a notification per message saying whether
//! the kernel copied them after all).
//!
//! A ring of message slots; `send` fills the next slot and queues it, and every `batch`
//! messages go to the kernel as one linked chain in one io_uring_enter that also waits for
//! their results. MSG_WAITALL makes the kernel finish a short send inside its op and the link
//! starts each send after the one before it, so several messages in flight on one TCP socket
//! arrive whole and in order. A zero-copy slot is reused only after its notification.

use super::{SendCounts, SendOptions, Sender, UringCounts, ZeroCopyCounts};
use crate::net::completions::CompletionCounts;
use crate::net::message::{self, field_sizes};
use crate::observation::Unsupported;
use crate::sys::uring_send::{self, SendRing, SendRingConfig, SetupError};
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// How long a send may wait for the kernel to finish with a slot before the peer is declared
/// stuck (as zero-copy's completions).
const COMPLETION_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this many messages per submission...
const BATCH_MAX: usize = 16;
/// ...and about this many bytes (a large message goes alone).
const BATCH_BYTES: usize = 4 << 20;

/// Messages per submission for messages of `size` bytes.
pub fn batch(size: usize) -> usize {
    (BATCH_BYTES / size.max(1)).clamp(1, BATCH_MAX)
}

/// Slots of the ring: uring reuses a slot as soon as its result arrives, so one submission's
/// worth; uring-zc keeps the zero-copy ring (`--zc-ring`) of messages awaiting notifications.
/// The default zero-copy ring is cut to what RLIMIT_MEMLOCK lets every sender of the process
/// keep in flight at once (`options.senders` of them, half the limit left for anything else of
/// the user's); a ring set with --zc-ring is kept, and refused by `new` when it does not fit.
pub fn ring_slots(size: usize, zero_copy: bool, options: &SendOptions) -> usize {
    if !zero_copy {
        return batch(size);
    }
    let slots = super::zero_copy::ring_slots(size, options.zc_ring);
    match (options.zc_ring, memlock_slots(size, options)) {
        (None, Some(fit)) => slots.min(fit.max(1)),
        _ => slots,
    }
}

/// How many unregistered zero-copy sends of `size` bytes one sender may have in flight within
/// its share of RLIMIT_MEMLOCK; None when zero-copy sends are not charged to it.
fn memlock_slots(size: usize, options: &SendOptions) -> Option<usize> {
    if options.fixed_buffers {
        return None; // charged once, when the buffer is registered
    }
    let share = uring_send::zero_copy_memlock_budget()? / 2 / options.senders.max(1) as u64;
    Some((share / uring_send::zero_copy_send_charge(size)) as usize)
}

pub struct UringSender {
    ring: SendRing,
    zero_copy: bool,
    verify: bool,
    /// Times a slot was still held by the kernel when its next message was due.
    slot_waits: u64,
    /// Messages per submission.
    batch: usize,
}

/// A refusal of the ring's set-up as the typed `Unsupported` inside the io::Error, so the
/// stream reports `unavailable: reason`.
pub(super) fn setup_error(mode: &str, err: SetupError) -> io::Error {
    match err {
        SetupError::Refused(reason) => io::Error::new(
            io::ErrorKind::Unsupported,
            Unsupported::new(format!("the {mode} send mode"), reason),
        ),
        SetupError::Failed(e) => e,
    }
}

impl UringSender {
    pub fn new(size: usize, fields: usize, verify: bool, zero_copy: bool, options: &SendOptions) -> io::Result<Self> {
        let mode = if zero_copy { "uring-zc" } else { "uring" };
        if options.fixed_buffers && !zero_copy {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "registered (fixed) buffers are for uring-zc only: the kernel refuses them for SENDMSG",
            ));
        }
        let slots = ring_slots(size, zero_copy, options);
        if zero_copy && memlock_slots(size, options).is_some_and(|fit| slots > fit) {
            let charge = uring_send::zero_copy_send_charge(size);
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                Unsupported::new(
                    format!("the {mode} send mode"),
                    format!(
                        "{} sender(s) x {slots} messages in flight x {} KiB charged each exceed half of RLIMIT_MEMLOCK ({} KiB) and the process lacks CAP_IPC_LOCK: raise `ulimit -l`, run as root, or use a smaller --zc-ring",
                        options.senders.max(1),
                        charge / 1024,
                        uring_send::zero_copy_memlock_budget().unwrap_or(0) / 1024
                    ),
                ),
            ));
        }
        let batch = if options.unbatched { 1 } else { batch(size).min(slots) };
        let config = SendRingConfig {
            slots,
            field_sizes: field_sizes(size, fields),
            batch,
            zero_copy,
            fixed_buffers: options.fixed_buffers,
            align: crate::net::message::placement(options.align).0,
            offset: crate::net::message::placement(options.align).1,
        };
        let ring = SendRing::new(&config).map_err(|e| setup_error(mode, e))?;
        let mut sender = UringSender {
            ring,
            zero_copy,
            verify,
            slot_waits: 0,
            batch,
        };
        // Every slot starts with a message's contents (and every page touched).
        for slot in 0..sender.ring.slots() {
            sender.fill(slot, slot as u64);
        }
        Ok(sender)
    }

    fn fill(&mut self, slot: usize, seq: u64) {
        let mut offset = 0u64;
        self.ring.write_fields(slot, |field| {
            message::fill(field, seq, offset);
            offset += field.len() as u64;
        });
    }
}

impl Sender for UringSender {
    fn send(&mut self, fd: RawFd, seq: u64) -> io::Result<()> {
        let slot = (seq % self.ring.slots() as u64) as usize;
        // Never touch a slot the kernel may still read.
        if !self.ring.is_free(slot) && self.ring.wait_free(slot, COMPLETION_TIMEOUT)? {
            self.slot_waits += 1;
        }
        if self.verify {
            self.fill(slot, seq);
        }
        self.ring.queue(slot, fd, COMPLETION_TIMEOUT)?;
        if self.ring.queued() >= self.batch {
            self.ring.submit(COMPLETION_TIMEOUT)?;
        }
        Ok(())
    }

    fn drain(&mut self, _fd: RawFd, timeout: Duration) -> io::Result<()> {
        self.ring.wait_idle(timeout)
    }

    fn counts(&self) -> SendCounts {
        let ring = self.ring.counts();
        let c = &ring.cqe;
        SendCounts {
            syscalls: ring.enters,
            zerocopy: self.zero_copy.then(|| ZeroCopyCounts {
                completions: CompletionCounts::of_ring(c),
                enobufs: 0,
                slot_waits: self.slot_waits,
            }),
            uring: Some(UringCounts {
                enters: ring.enters,
                sqes: c.sqes,
                cqes: c.cqes,
                messages: c.results,
                notifications: c.notifications,
                copied: c.copied,
                zero_copied: c.zero_copied,
                failed: c.failed_results,
                unexpected: c.unexpected,
            }),
        }
    }

    /// Rewrites the slot message `seq` was sent from. If its send is still queued it is
    /// submitted first and its result awaited — the moment a sendmsg() would have returned —
    /// but, for uring-zc, deliberately not its notification: the alias probe asks what the
    /// kernel holds at that moment.
    fn buffers(&self) -> Vec<(usize, usize)> {
        self.ring.buffers()
    }

    fn rewrite(&mut self, seq: u64) -> io::Result<()> {
        let slot = (seq % self.ring.slots() as u64) as usize;
        if self.ring.is_queued(slot) {
            self.ring.submit(COMPLETION_TIMEOUT)?;
        }
        let mut offset = 0u64;
        self.ring.overwrite_sent(slot, |field| {
            message::fill(field, seq + 1, offset);
            offset += field.len() as u64;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::message::Message;
    use crate::net::mode::{Receiver, ScatterReceiver};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    /// Send `count` messages through a ring and check every byte on the other end; returns
    /// the sender's counts after its drain.
    fn round_trip(size: usize, fields: usize, zero_copy: bool, options: SendOptions, count: u64) -> SendCounts {
        let (client, server) = pair();
        server.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut sender = match UringSender::new(size, fields, true, zero_copy, &options) {
            Ok(s) => s,
            Err(e) => panic!("the ring could not be set up here: {e}"),
        };
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut receiver = ScatterReceiver::new(size, fields, true, crate::case::Align::Page);
                for seq in 0..count {
                    assert!(receiver.recv(server.as_raw_fd(), seq).unwrap(), "message {seq}");
                }
                receiver.counts()
            });
            for seq in 0..count {
                sender.send(client.as_raw_fd(), seq).unwrap();
            }
            sender.drain(client.as_raw_fd(), Duration::from_secs(10)).unwrap();
            let got = reader.join().unwrap();
            assert_eq!(got.verified_messages, count);
            assert_eq!(got.corrupt_messages, 0);
        });
        sender.counts()
    }

    #[test]
    fn uring_sends_whole_messages_in_batches() {
        let counts = round_trip(64 << 10, 8, false, SendOptions::default(), 200);
        let uring = counts.uring.unwrap();
        assert_eq!(uring.messages, 200);
        assert_eq!(uring.sqes, 200);
        assert_eq!(uring.cqes, 200, "SENDMSG posts one CQE per message");
        assert_eq!(uring.notifications, 0);
        // 16 messages of 64 KiB per submission: far fewer enters than messages.
        assert!(uring.enters < 100, "{uring:?}");
        assert!(counts.zerocopy.is_none());
    }

    #[test]
    fn uring_zc_waits_for_every_notification_and_reports_the_copy() {
        let counts = round_trip(100_000, 3, true, SendOptions::default(), 300);
        let uring = counts.uring.unwrap();
        assert_eq!(uring.messages, 300);
        assert_eq!(uring.notifications, 300, "one notification per message: {uring:?}");
        assert_eq!(uring.cqes, 600);
        // Loopback delivery copies the pages: every notification says so.
        assert_eq!((uring.copied, uring.zero_copied), (300, 0));
        let zc = counts.zerocopy.unwrap();
        assert_eq!(zc.completions.completed, zc.completions.sends);
        assert_eq!(zc.completions.not_copied_fraction(), Some(0.0));
    }

    #[test]
    fn a_one_message_zero_copy_ring_reuses_its_buffer_after_each_notification() {
        let options = SendOptions {
            zc_ring: Some(1),
            ..Default::default()
        };
        assert_eq!(ring_slots(4096, true, &options), 1);
        let counts = round_trip(4096, 2, true, options, 50);
        let uring = counts.uring.unwrap();
        assert_eq!(uring.notifications, 50);
        assert_eq!((uring.copied, uring.messages), (50, 50));
    }

    #[test]
    fn fixed_buffers_carry_the_message_intact() {
        let options = SendOptions {
            fixed_buffers: true,
            zc_ring: Some(1 << 20),
            ..Default::default()
        };
        let counts = round_trip(10_000, 8, true, options, 100);
        assert_eq!(counts.uring.unwrap().notifications, 100);
        assert!(UringSender::new(
            1000,
            1,
            false,
            false,
            &SendOptions {
                fixed_buffers: true,
                ..Default::default()
            }
        )
        .is_err());
    }

    /// The alias probe's hook: after `send`, the slot holds message seq+1's pattern.
    #[test]
    fn rewrite_overwrites_the_slot_the_message_went_from() {
        let (client, _server) = pair();
        let mut sender = UringSender::new(1000, 2, false, false, &SendOptions::default()).unwrap();
        sender.send(client.as_raw_fd(), 5).unwrap();
        sender.rewrite(5).unwrap();
        let slot = 5 % sender.ring.slots();
        let expected = Message::new(1000, 2, 6);
        sender.ring.wait_idle(Duration::from_secs(5)).unwrap();
        let mut fields = expected.fields.iter();
        assert!(sender.ring.write_fields(slot, |got| {
            assert_eq!(&got[..], &fields.next().unwrap()[..]);
        }));
        assert!(fields.next().is_none());
    }

    #[test]
    fn a_refusal_is_an_unsupported_inside_the_io_error() {
        let err = setup_error("uring-zc", SetupError::Refused("io_uring is switched off".into()));
        let inner = err.get_ref().and_then(|e| e.downcast_ref::<Unsupported>()).unwrap();
        assert_eq!(
            inner.to_string(),
            "the uring-zc send mode unavailable: io_uring is switched off"
        );
    }
}
