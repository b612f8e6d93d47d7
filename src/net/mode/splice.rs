//! splice: per message, vmsplice() the fields (one iovec each) into a pipe, which takes
//! references to their pages, then splice() the pipe into the socket, which takes the pages
//! over; repeated until the message is through (a message larger than the pipe, or whose
//! fields straddle more pages than the pipe has slots, goes in pieces).
//!
//! vmsplice has no completion notification: the socket may reference a message's pages long
//! after splice returns (over loopback until the receiver has read them). Without `--verify`
//! nothing rewrites a message, so one is sent again and again (as one-copy does). With it, the
//! sender keeps a ring of messages larger than the kernel can hold (`unnotified_ring_slots`)
//! and rewrites a slot only after the whole ring went by; if the kernel still held it, `--verify` finds the
//! message corrupted. The ring lives in one anonymous mapping: when the sender is dropped the
//! pages the kernel still references stay intact, never handed to another allocation. A field
//! of a page or more starts as `--align` says (on a page boundary, or 16 bytes past one; slots
//! are then a whole number of pages apart); smaller fields, and every field with `malloc`, are
//! packed at word-aligned offsets, so a ring of hundreds of thousands of small messages stays
//! close to its payload size.

use super::{peer_error, SendCounts, Sender};
use crate::case::Align;
use crate::net::message;
use crate::sys::mem::{AnonMap, HugePages};
use crate::sys::net::IovecStore;
use crate::sys::splice::{self as sp, PagePipe};
use std::io::{self, IoSlice};
use std::os::fd::RawFd;

/// Fields start on their own word, as separate heap allocations would (no more: the ring
/// must stay close to its payload size, it can hold hundreds of thousands of small messages).
const FIELD_ALIGN: usize = 8;

pub struct SpliceSender {
    ring: AnonMap,
    /// (offset in a slot, length) of every non-empty field.
    fields: Vec<(usize, usize)>,
    /// Room for the iovecs of a vmsplice: nothing is allocated per message.
    iov: IovecStore,
    slot_stride: usize,
    slots: usize,
    pipe: PagePipe,
    verify: bool,
}

impl SpliceSender {
    pub fn new(size: usize, fields: usize, verify: bool, align: Align) -> io::Result<Self> {
        let page = crate::sys::mem::page_size();
        let (boundary, offset) = message::placement(align);
        let mut layout = Vec::new();
        let mut at = 0usize;
        let mut paged = false;
        for len in message::field_sizes(size, fields).into_iter().filter(|n| *n > 0) {
            if boundary > 1 && len >= page {
                at = at.div_ceil(boundary) * boundary + offset;
                paged = true;
            }
            layout.push((at, len));
            at += len.div_ceil(FIELD_ALIGN) * FIELD_ALIGN;
        }
        let slot_stride = if paged {
            at.div_ceil(page) * page
        } else {
            at.max(FIELD_ALIGN)
        };
        let slots = super::unnotified_ring_slots(size, verify);
        let ring = AnonMap::new(slot_stride * slots, HugePages::Refuse)?;
        // As large as the message (whole messages in one vmsplice/splice pair), bounded by
        // what an unprivileged process may ask for. Over the user's pipe-page quota the
        // default pipe stays: the message goes in more pieces, which the syscall count shows.
        let want = size.clamp(64 << 10, sp::pipe_max_size().unwrap_or(1 << 20).max(64 << 10));
        let pipe = PagePipe::new(want)?;
        let mut sender = SpliceSender {
            ring,
            iov: IovecStore::with_capacity(layout.len()),
            fields: layout,
            slot_stride,
            slots,
            pipe,
            verify,
        };
        for slot in 0..slots {
            sender.fill_slot(slot, slot as u64);
        }
        Ok(sender)
    }

    fn slot(&self, seq: u64) -> usize {
        (seq % self.slots as u64) as usize
    }

    /// Write message `seq`'s pattern into ring slot `slot`, field by field.
    fn fill_slot(&mut self, slot: usize, seq: u64) {
        let base = slot * self.slot_stride;
        let bytes = self.ring.as_mut_slice();
        let mut offset = 0u64;
        for &(at, len) in &self.fields {
            message::fill(&mut bytes[base + at..base + at + len], seq, offset);
            offset += len as u64;
        }
    }
}

impl Sender for SpliceSender {
    fn send(&mut self, fd: RawFd, seq: u64) -> io::Result<()> {
        let slot = self.slot(seq);
        if self.verify {
            self.fill_slot(slot, seq);
        }
        let base = slot * self.slot_stride;
        let bytes = self.ring.as_slice();
        let fields = self.fields.iter().map(|&(at, len)| &bytes[base + at..base + at + len]);
        let list: &mut [IoSlice<'_>] = self.iov.gather(fields);
        self.pipe.send(fd, list).map_err(|e| peer_error(e.error, e.call))
    }

    fn counts(&self) -> SendCounts {
        SendCounts {
            syscalls: self.pipe.vmsplice_calls + self.pipe.splice_calls,
            ..SendCounts::default()
        }
    }

    /// Writes message `seq + 1`'s pattern into the ring slot whose pages were vmspliced for
    /// message `seq`.
    /// Every non-empty field of every slot (the pages vmsplice hands to the pipe).
    fn buffers(&self) -> Vec<(usize, usize)> {
        let base = self.ring.as_slice().as_ptr() as usize;
        let slots = 0..self.slots;
        slots
            .flat_map(|slot| {
                self.fields
                    .iter()
                    .map(move |&(at, len)| (base + slot * self.slot_stride + at, len))
            })
            .collect()
    }

    fn rewrite(&mut self, seq: u64) -> io::Result<()> {
        self.fill_slot(self.slot(seq), seq + 1);
        Ok(())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::net::message::Message;
    use crate::net::mode::{Receiver, ScatterReceiver};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    /// Send `messages` messages with `sender` over a loopback connection while a thread
    /// receives and checks them; returns how many arrived intact.
    pub(in crate::net::mode) fn send_and_verify(
        sender: &mut dyn Sender,
        size: usize,
        fields: usize,
        messages: u64,
    ) -> u64 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        client.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut receiver = ScatterReceiver::new(size, fields, true, Align::Page);
                for seq in 0..messages {
                    assert!(receiver.recv(server.as_raw_fd(), seq).unwrap());
                }
                receiver.counts().verified_messages
            });
            for seq in 0..messages {
                sender.send(client.as_raw_fd(), seq).unwrap();
            }
            reader.join().unwrap()
        })
    }

    /// A message larger than the largest pipe goes through in pieces, every byte intact, in
    /// more than one vmsplice/splice pair.
    #[test]
    fn a_message_larger_than_the_pipe_goes_in_pieces() {
        let size = sp::pipe_max_size().unwrap_or(1 << 20) + 5000;
        let mut sender = SpliceSender::new(size, 3, true, Align::Page).unwrap();
        assert!(sender.pipe.capacity() < size);
        assert_eq!(send_and_verify(&mut sender, size, 3, 3), 3);
        assert!(sender.counts().syscalls >= 3 * 4, "{:?}", sender.counts());
    }

    /// The ring slots hold the fields in order, so a slot reads back as the message.
    #[test]
    fn a_slot_holds_the_message_fields_in_order() {
        let mut sender = SpliceSender::new(1000, 7, true, Align::Page).unwrap();
        assert_eq!(send_and_verify(&mut sender, 1000, 7, 1), 1);
        let expected = Message::new(1000, 7, 5);
        let slot = sender.slot(5) * sender.slot_stride;
        let bytes = sender.ring.as_slice();
        for (field, &(at, len)) in expected.fields.iter().zip(&sender.fields) {
            assert_eq!(&bytes[slot + at..slot + at + len], &field[..]);
        }
    }
}
