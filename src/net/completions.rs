//! Bookkeeping for MSG_ZEROCOPY completions, as a pure state machine.
//!
//! Every sendmsg(MSG_ZEROCOPY) call that queues data takes the next 32-bit id (starting at 0
//! per socket, wrapping at 2^32). The kernel reports finished ids as inclusive ranges
//! [first, last] that may be coalesced and may arrive out of order. A buffer may be reused only
//! when the ids of every call that referenced it are complete.

use crate::sys::zerocopy::{self, ErrQueueRead};
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// The completion side of a MSG_ZEROCOPY sender with a ring of buffers (TCP's `zero-copy`
/// mode, UDP's `zerocopy`): the tracker, the id of the send call that last used each ring
/// slot, and what reading the error queue and waiting for slots cost.
pub struct ZcSlots {
    pub tracker: CompletionTracker,
    last_id: Vec<Option<u32>>,
    /// Error-queue reads and polls.
    pub reap_syscalls: u64,
    /// Sends that had to wait for their slot's completion.
    pub slot_waits: u64,
}

impl ZcSlots {
    /// A ring of `slots` buffers, none sent yet.
    pub fn new(slots: usize) -> ZcSlots {
        ZcSlots {
            // Room for two send calls per slot (a message a partial send split).
            tracker: CompletionTracker::with_room(2 * slots),
            last_id: vec![None; slots],
            reap_syscalls: 0,
            slot_waits: 0,
        }
    }

    /// Record that the send call whose id is `id` used `slot` last (it is not free until
    /// that call completes).
    pub fn sent_from(&mut self, slot: usize, id: u32) {
        self.last_id[slot] = Some(id);
    }

    /// Read every notification queued now; with `wait`, first block up to that long for one.
    pub fn reap(&mut self, fd: RawFd, wait: Option<Duration>) -> io::Result<()> {
        if let Some(wait) = wait {
            self.reap_syscalls += 1;
            zerocopy::wait_errqueue(fd, wait.as_millis().min(i32::MAX as u128) as i32)?;
        }
        loop {
            self.reap_syscalls += 1;
            match zerocopy::read_errqueue(fd)? {
                ErrQueueRead::Completion(n) => self.tracker.complete(n.first, n.last, n.copied),
                ErrQueueRead::Empty => return Ok(()),
                ErrQueueRead::Other { origin, errno } => {
                    return Err(io::Error::other(format!(
                        "socket error on the error queue (origin {origin}): {}",
                        io::Error::from_raw_os_error(errno as i32)
                    )))
                }
            }
        }
    }

    /// Block until every send call up to the slot's last one has completed (a message sent in
    /// several calls has several ids; all of them must be done before its pages are touched);
    /// after `timeout`, the error `stuck`.
    pub fn wait_for_slot(&mut self, fd: RawFd, slot: usize, timeout: Duration, stuck: &str) -> io::Result<()> {
        let Some(id) = self.last_id[slot] else {
            return Ok(());
        };
        if self.tracker.is_complete_through(id) {
            return Ok(());
        }
        self.reap(fd, None)?;
        if self.tracker.is_complete_through(id) {
            return Ok(());
        }
        self.slot_waits += 1;
        let deadline = Instant::now() + timeout;
        while !self.tracker.is_complete_through(id) {
            if Instant::now() > deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, stuck.to_string()));
            }
            self.reap(fd, Some(Duration::from_millis(100)))?;
        }
        Ok(())
    }

    /// Wait until the kernel holds none of the ring's buffers (every completion read); after
    /// `timeout`, the error `missing` says of the count still outstanding.
    pub fn drain(&mut self, fd: RawFd, timeout: Duration, missing: impl Fn(usize) -> String) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        self.reap(fd, None)?;
        while self.tracker.outstanding() > 0 {
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    missing(self.tracker.outstanding()),
                ));
            }
            self.reap(fd, Some(Duration::from_millis(50)))?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompletionCounts {
    /// Send calls that took an id.
    pub sends: u64,
    /// Notifications read from the error queue.
    pub notifications: u64,
    /// Send calls covered by a notification.
    pub completed: u64,
    /// Of those, calls the kernel copied (SO_EE_CODE_ZEROCOPY_COPIED).
    pub copied: u64,
    /// Ids reported that were never sent or were already complete (should stay 0).
    pub unexpected: u64,
}

impl CompletionCounts {
    /// Fraction of completed sends the kernel did NOT copy; None before any completion.
    pub fn not_copied_fraction(&self) -> Option<f64> {
        (self.completed > 0).then(|| (self.completed - self.copied) as f64 / self.completed as f64)
    }

    /// An io_uring send ring's notifications as completions: a SENDMSG_ZC notification says
    /// whether the kernel copied (IORING_NOTIF_USAGE_ZC_COPIED), as an error-queue completion
    /// does; notifications of failed sends say nothing and are left out.
    pub fn of_ring(c: &crate::sys::uring_send::CqeCounts) -> CompletionCounts {
        CompletionCounts {
            sends: c.sqes,
            notifications: c.notifications,
            completed: c.copied + c.zero_copied,
            copied: c.copied,
            unexpected: c.unexpected,
        }
    }

    /// Add another socket's counts (a case's threads summed).
    pub fn add(&mut self, other: &CompletionCounts) {
        self.sends += other.sends;
        self.notifications += other.notifications;
        self.completed += other.completed;
        self.copied += other.copied;
        self.unexpected += other.unexpected;
    }
}

#[derive(Debug, Clone, Default)]
pub struct CompletionTracker {
    /// The oldest id not yet known complete.
    base: u32,
    /// done[i] says whether id base+i (wrapping) has completed; its length is the number of
    /// ids sent from base on.
    done: VecDeque<bool>,
    pub counts: CompletionCounts,
}

impl CompletionTracker {
    /// A tracker whose first id is `first_id` (0 for a new socket; tests start near the wrap).
    #[cfg(test)]
    pub fn starting_at(first_id: u32) -> CompletionTracker {
        CompletionTracker {
            base: first_id,
            ..Default::default()
        }
    }

    /// A new socket's tracker with room for `ids` outstanding send calls, so that recording
    /// them allocates nothing (the ring of a zero-copy sender bounds how many are out).
    pub fn with_room(ids: usize) -> CompletionTracker {
        CompletionTracker {
            done: VecDeque::with_capacity(ids),
            ..Default::default()
        }
    }

    /// Record one send call and return the id the kernel gave it.
    pub fn record_send(&mut self) -> u32 {
        let id = self.base.wrapping_add(self.done.len() as u32);
        self.done.push_back(false);
        self.counts.sends += 1;
        id
    }

    /// Apply one notification covering [first, last] inclusive (wrapping).
    pub fn complete(&mut self, first: u32, last: u32, copied: bool) {
        self.counts.notifications += 1;
        let span = last.wrapping_sub(first) as u64 + 1;
        for k in 0..span {
            let id = first.wrapping_add(k as u32);
            let index = id.wrapping_sub(self.base) as usize;
            match self.done.get_mut(index) {
                Some(slot) if !*slot => {
                    *slot = true;
                    self.counts.completed += 1;
                    if copied {
                        self.counts.copied += 1;
                    }
                }
                _ => self.counts.unexpected += 1,
            }
        }
        while self.done.front() == Some(&true) {
            self.done.pop_front();
            self.base = self.base.wrapping_add(1);
        }
    }

    /// Whether id is complete (ids before the oldest outstanding one are).
    #[cfg(test)]
    pub fn is_complete(&self, id: u32) -> bool {
        let index = id.wrapping_sub(self.base) as usize;
        match self.done.get(index) {
            Some(done) => *done,
            // Outside the outstanding window: behind base (retired, so complete) when the
            // wrapping distance is "negative", otherwise never sent.
            None => index > (u32::MAX / 2) as usize,
        }
    }

    /// Whether `id` and every id sent before it are complete: the test for reusing a buffer
    /// that several send calls (a message sent in parts) referenced, the last being `id`.
    pub fn is_complete_through(&self, id: u32) -> bool {
        // Retired ids lie "behind" base: their wrapping distance from it is negative.
        id.wrapping_sub(self.base) > u32::MAX / 2
    }

    /// Send calls still waiting for their notification.
    pub fn outstanding(&self) -> usize {
        self.done.iter().filter(|d| !**d).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn in_order_single_completions() {
        let mut t = CompletionTracker::default();
        let a = t.record_send();
        let b = t.record_send();
        assert_eq!((a, b), (0, 1));
        assert!(!t.is_complete(a));
        t.complete(0, 0, true);
        assert!(t.is_complete(a) && !t.is_complete(b));
        t.complete(1, 1, false);
        assert!(t.is_complete(b));
        assert_eq!(t.outstanding(), 0);
        assert_eq!(t.counts.copied, 1);
        assert_eq!(t.counts.not_copied_fraction(), Some(0.5));
    }

    #[test]
    fn coalesced_out_of_order_and_wrapping() {
        let mut t = CompletionTracker::starting_at(u32::MAX - 2);
        let ids: Vec<u32> = (0..6).map(|_| t.record_send()).collect();
        assert_eq!(ids, vec![u32::MAX - 2, u32::MAX - 1, u32::MAX, 0, 1, 2]);
        t.complete(0, 2, true); // the later half first, across the wrap
        assert!(!t.is_complete(u32::MAX - 2));
        assert!(t.is_complete(1));
        t.complete(u32::MAX - 2, u32::MAX, true);
        assert_eq!(t.outstanding(), 0);
        assert_eq!(t.counts.completed, 6);
        assert_eq!(t.counts.notifications, 2);
        assert_eq!(t.counts.unexpected, 0);
        assert_eq!(t.counts.not_copied_fraction(), Some(0.0));
    }

    /// Found in review: a message sent in two calls (ids 0 and 1) must not be reused when
    /// only its last call completed; the first may still hold the buffer's pages.
    #[test]
    fn a_buffer_is_free_only_when_every_earlier_call_completed() {
        let mut t = CompletionTracker::default();
        let first = t.record_send();
        let last = t.record_send();
        t.complete(last, last, false);
        assert!(t.is_complete(last));
        assert!(!t.is_complete_through(last), "call {first} still outstanding");
        t.complete(first, first, false);
        assert!(t.is_complete_through(last));
        let next = t.record_send();
        assert!(!t.is_complete_through(next));
    }

    #[test]
    fn unknown_and_duplicate_ids_are_counted_not_trusted() {
        let mut t = CompletionTracker::default();
        t.record_send();
        t.complete(0, 0, false);
        t.complete(0, 0, false);
        t.complete(5, 6, false);
        assert_eq!(t.counts.unexpected, 3);
        assert_eq!(t.counts.completed, 1);
    }

    proptest! {
        /// Any split of the sent ids into ranges, delivered in any order, completes every id
        /// exactly once, wherever the ids start (including across 2^32).
        #[test]
        fn any_coalescing_in_any_order_completes_everything(
            start in prop_oneof![Just(u32::MAX - 50), any::<u32>(), Just(0u32)],
            n in 1usize..200,
            cuts in proptest::collection::vec(any::<bool>(), 200),
            order_seed in any::<u64>(),
            copied in any::<bool>(),
        ) {
            let mut t = CompletionTracker::starting_at(start);
            let ids: Vec<u32> = (0..n).map(|_| t.record_send()).collect();
            // Cut the id sequence into inclusive ranges.
            let mut ranges = Vec::new();
            let mut first = 0usize;
            for i in 0..n {
                if i == n - 1 || cuts[i] {
                    ranges.push((ids[first], ids[i]));
                    first = i + 1;
                }
            }
            // Shuffle deterministically.
            let mut seed = order_seed | 1;
            for i in (1..ranges.len()).rev() {
                seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
                ranges.swap(i, (seed % (i as u64 + 1)) as usize);
            }
            for (k, (a, b)) in ranges.iter().enumerate() {
                t.complete(*a, *b, copied);
                // Nothing completes early: every id in a later range is still outstanding.
                for (c, d) in &ranges[k + 1..] {
                    prop_assert!(!t.is_complete(*c) && !t.is_complete(*d));
                }
            }
            prop_assert_eq!(t.outstanding(), 0);
            prop_assert_eq!(t.counts.completed, n as u64);
            prop_assert_eq!(t.counts.unexpected, 0);
            prop_assert_eq!(t.counts.copied, if copied { n as u64 } else { 0 });
            prop_assert!(ids.iter().all(|id| t.is_complete(*id) && t.is_complete_through(*id)));
        }
    }
}
