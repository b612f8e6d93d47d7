//! `SeqTracker`: what arrived of one flow of numbered datagrams — received datagrams and
//! bytes, duplicates, reordered ones, loss against the sender's count, interarrival jitter
//! (RFC 3550) and verify failures — with no allocation per datagram.

use super::header::{self, Header};

/// Sequence numbers this far below the highest seen are still told apart as new or duplicate
/// (a bitmap of 8 KiB); an older one is counted received and reordered but cannot be checked
/// for duplication (`beyond_window`).
pub const WINDOW: u64 = 1 << 16;
const WORDS: usize = (WINDOW / 64) as usize;

/// What a tracker counted (monotonic but for the jitter, the estimate at that moment).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SeqCounts {
    /// Datagrams received, duplicates and malformed ones included.
    pub received: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Distinct sequence numbers received.
    pub distinct: u64,
    /// Datagrams whose sequence number had already arrived.
    pub duplicates: u64,
    /// Distinct datagrams that arrived after one with a higher sequence number.
    pub reordered: u64,
    /// Of the reordered, those more than `WINDOW` below the highest: not checked for
    /// duplication (counted distinct).
    pub beyond_window: u64,
    /// Datagrams that failed the check (`--verify`: size, pattern).
    pub verify_failures: u64,
    /// Datagrams too short to carry a header: dropped (not received, not checked), counted
    /// here alone — none of ours is.
    pub short: u64,
    /// Datagrams whose sequence number the sender never sent (at or beyond its count, known
    /// once [`SeqTracker::settle`] is told it; or far ahead of the flow and more than the
    /// tracker holds apart): dropped, counted here alone.
    pub forged: u64,
    /// RFC 3550 interarrival jitter in nanoseconds; None before two datagrams.
    pub jitter_ns: Option<f64>,
    /// Transit-time differences the jitter was computed from (the weight when merging).
    pub jitter_samples: u64,
}

impl SeqCounts {
    /// Datagrams sent but never received: `expected` (the sender's count) less the distinct
    /// ones that arrived, never negative.
    pub fn lost(&self, expected: u64) -> u64 {
        expected.saturating_sub(self.distinct)
    }

    /// What was counted since `earlier` (a snapshot of the same tracker); the jitter is this
    /// snapshot's estimate.
    pub fn since(&self, earlier: &SeqCounts) -> SeqCounts {
        SeqCounts {
            received: self.received - earlier.received,
            bytes: self.bytes - earlier.bytes,
            distinct: self.distinct - earlier.distinct,
            duplicates: self.duplicates - earlier.duplicates,
            reordered: self.reordered - earlier.reordered,
            beyond_window: self.beyond_window - earlier.beyond_window,
            verify_failures: self.verify_failures - earlier.verify_failures,
            short: self.short - earlier.short,
            forged: self.forged.saturating_sub(earlier.forged),
            jitter_ns: self.jitter_ns,
            jitter_samples: self.jitter_samples - earlier.jitter_samples,
        }
    }

    /// Add another flow's counts (several threads): counts add up; the jitter is the mean of
    /// the flows' estimates weighted by their samples.
    pub fn add(&mut self, other: &SeqCounts) {
        let jitter = match (self.jitter_ns, other.jitter_ns) {
            (Some(a), Some(b)) => {
                let (wa, wb) = (self.jitter_samples as f64, other.jitter_samples as f64);
                Some(if wa + wb > 0.0 {
                    (a * wa + b * wb) / (wa + wb)
                } else {
                    (a + b) / 2.0
                })
            }
            (a, b) => a.or(b),
        };
        self.received += other.received;
        self.bytes += other.bytes;
        self.distinct += other.distinct;
        self.duplicates += other.duplicates;
        self.reordered += other.reordered;
        self.beyond_window += other.beyond_window;
        self.verify_failures += other.verify_failures;
        self.short += other.short;
        self.forged += other.forged;
        self.jitter_samples += other.jitter_samples;
        self.jitter_ns = jitter;
    }
}

/// One flow's arrivals (one socket's sequence numbers).
pub struct SeqTracker {
    counts: SeqCounts,
    /// The highest sequence number seen.
    highest: Option<u64>,
    /// Bit `s % WINDOW` says whether `s` arrived, for `s` in (highest − WINDOW, highest].
    seen: Box<[u64; WORDS]>,
    /// The last distinct datagram's transit time (arrival − send, ns, wrapping).
    last_transit: Option<i64>,
    jitter: f64,
    /// The header of the last datagram recorded (duplicates included).
    last: Option<Header>,
    /// Flows merged in besides this one (their windows are not this one's).
    merged: bool,
    /// The datagrams recorded since `clear_arrivals`, kept only after `keep_arrivals` (up to
    /// its capacity; more are counted, not kept): what a request/response client matches
    /// replies by (udp-rr).
    arrivals: Vec<Arrival>,
    keep: usize,
    /// Datagrams more than WINDOW ahead of the highest sequence number (or of 0, before any):
    /// held apart, not counted, so a forged number far ahead cannot move the window. The
    /// next number after a held one is the flow moving on after a long loss: both join it.
    /// What is still held when the sender's count is known is settled by it.
    ahead: Vec<Held>,
}

/// A datagram held apart by [`SeqTracker`]: far ahead of its flow.
#[derive(Debug, Clone, Copy)]
struct Held {
    seq: u64,
    len: usize,
    sent_ns: u64,
    arrival_ns: u64,
}

/// Datagrams held apart at most; more far-ahead ones are counted forged at once.
const AHEAD: usize = 256;

/// One recorded datagram as `SeqTracker::arrivals` keeps it: its number, when it arrived
/// (our clock, ns) and whether the number was new (false: a duplicate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    pub seq: u64,
    pub arrival_ns: u64,
    pub new: bool,
}

/// Room for the arrivals of any one receive call: a 64 KiB GRO buffer of 16-byte datagrams.
pub const ARRIVALS: usize = 4096;

impl Default for SeqTracker {
    fn default() -> Self {
        SeqTracker::new()
    }
}

impl SeqTracker {
    pub fn new() -> SeqTracker {
        SeqTracker {
            counts: SeqCounts::default(),
            highest: None,
            seen: Box::new([0; WORDS]),
            last_transit: None,
            jitter: 0.0,
            last: None,
            merged: false,
            arrivals: Vec::new(),
            keep: 0,
            ahead: Vec::with_capacity(AHEAD),
        }
    }

    /// Keep every datagram recorded from now on (up to `capacity` between two
    /// `clear_arrivals`; the room is made here, so recording allocates nothing).
    pub fn keep_arrivals(&mut self, capacity: usize) {
        self.keep = capacity;
        self.arrivals = Vec::with_capacity(capacity);
    }

    /// The datagrams recorded since the last `clear_arrivals`, in arrival order.
    pub fn arrivals(&self) -> &[Arrival] {
        &self.arrivals
    }

    pub fn clear_arrivals(&mut self) {
        self.arrivals.clear();
    }

    fn bit(seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    /// Clear the bits of (from, to], which now stand for new sequence numbers.
    fn clear(&mut self, from: u64, to: u64) {
        if to - from >= WINDOW {
            self.seen.fill(0);
            return;
        }
        for s in from + 1..=to {
            let (w, b) = Self::bit(s);
            self.seen[w] &= !b;
        }
    }

    /// One arrived datagram of `len` bytes with sequence number `seq`, sent at `sent_ns` by
    /// the sender's clock and received at `arrival_ns` by ours. True when its number was new.
    pub fn record(&mut self, seq: u64, len: usize, sent_ns: u64, arrival_ns: u64) -> bool {
        let new = self.count(seq, len, sent_ns, arrival_ns);
        if self.arrivals.len() < self.keep {
            self.arrivals.push(Arrival { seq, arrival_ns, new });
        }
        new
    }

    fn count(&mut self, seq: u64, len: usize, sent_ns: u64, arrival_ns: u64) -> bool {
        if seq.saturating_sub(self.highest.unwrap_or(0)) > WINDOW {
            return self.hold(Held {
                seq,
                len,
                sent_ns,
                arrival_ns,
            });
        }
        self.count_in_window(seq, len, sent_ns, arrival_ns)
    }

    /// A datagram far ahead of the flow: held apart, joined to the flow with those it
    /// continues, or (no room) counted forged. True when it joined the flow as new.
    fn hold(&mut self, held: Held) -> bool {
        if self.ahead.iter().any(|h| h.seq == held.seq) {
            self.counts.forged += 1;
            return false;
        }
        if !self.ahead.iter().any(|h| h.seq.wrapping_add(1) == held.seq) {
            if self.ahead.len() < AHEAD {
                self.ahead.push(held);
            } else {
                self.counts.forged += 1;
            }
            return false;
        }
        // The flow moved on past a long loss: it continues from the held ones within a
        // window below this one (in order), and the window restarts there.
        let mut joined: Vec<Held> = Vec::new();
        self.ahead.retain(|h| {
            let near = h.seq < held.seq && held.seq - h.seq < WINDOW;
            if near {
                joined.push(*h);
            }
            !near
        });
        joined.sort_unstable_by_key(|h| h.seq);
        joined.push(held);
        self.seen.fill(0);
        self.highest = Some(joined[0].seq.saturating_sub(1));
        for h in &joined {
            self.count_in_window(h.seq, h.len, h.sent_ns, h.arrival_ns);
        }
        true
    }

    /// The sender's count of this flow is known (`sent` datagrams, numbered from 0): what is
    /// still held apart joins the count if the sender sent it, else is forged; so are the
    /// numbers at or beyond `sent` the window holds (taken back out of what was received).
    /// Returns how many were taken back: datagrams that had been counted received before they
    /// could be told apart, so counts taken while they arrived (a window's) include them.
    pub fn settle(&mut self, sent: u64) -> u64 {
        let mut taken_back = 0;
        for h in std::mem::take(&mut self.ahead) {
            if h.seq < sent {
                self.counts.received += 1;
                self.counts.bytes += h.len as u64;
                self.counts.distinct += 1;
                self.counts.reordered += 1;
            } else {
                self.counts.forged += 1;
            }
        }
        if let Some(highest) = self.highest.filter(|h| *h >= sent) {
            let low = sent.max(highest.saturating_sub(WINDOW - 1));
            let beyond = (low..=highest)
                .filter(|&s| {
                    let (w, b) = Self::bit(s);
                    self.seen[w] & b != 0
                })
                .count() as u64;
            self.counts.forged += beyond;
            self.counts.distinct -= beyond.min(self.counts.distinct);
            taken_back += beyond.min(self.counts.received);
            self.counts.received -= beyond.min(self.counts.received);
        }
        // Forged numbers older than the window cannot be told apart: no more distinct
        // datagrams arrived than were sent, whatever else arrived.
        if self.counts.distinct > sent {
            let excess = self.counts.distinct - sent;
            self.counts.forged += excess;
            self.counts.distinct = sent;
            taken_back += excess.min(self.counts.received);
            self.counts.received -= excess.min(self.counts.received);
        }
        taken_back
    }

    fn count_in_window(&mut self, seq: u64, len: usize, sent_ns: u64, arrival_ns: u64) -> bool {
        self.counts.received += 1;
        self.counts.bytes += len as u64;
        self.last = Some(Header { seq, sent_ns });
        let new = match self.highest {
            None => {
                self.highest = Some(seq);
                true
            }
            Some(h) if seq > h => {
                self.clear(h, seq);
                self.highest = Some(seq);
                true
            }
            Some(h) if h - seq >= WINDOW => {
                self.counts.beyond_window += 1;
                self.counts.reordered += 1;
                self.counts.distinct += 1;
                self.jitter_sample(sent_ns, arrival_ns);
                return true;
            }
            Some(_) => {
                let (w, b) = Self::bit(seq);
                if self.seen[w] & b != 0 {
                    self.counts.duplicates += 1;
                    return false;
                }
                self.counts.reordered += 1;
                true
            }
        };
        debug_assert!(new);
        let (w, b) = Self::bit(seq);
        self.seen[w] |= b;
        self.counts.distinct += 1;
        self.jitter_sample(sent_ns, arrival_ns);
        true
    }

    /// RFC 3550 §6.4.1: J += (|D| − J)/16, D the difference of consecutive transit times.
    fn jitter_sample(&mut self, sent_ns: u64, arrival_ns: u64) {
        let transit = arrival_ns.wrapping_sub(sent_ns) as i64;
        if let Some(last) = self.last_transit {
            let d = transit.wrapping_sub(last).unsigned_abs() as f64;
            self.jitter += (d - self.jitter) / 16.0;
            self.counts.jitter_samples += 1;
            self.counts.jitter_ns = Some(self.jitter);
        }
        self.last_transit = Some(transit);
    }

    /// One received datagram as the receive paths hand it over: its bytes, whether the kernel
    /// cut it short (MSG_TRUNC), when it arrived, and with `verify` the datagram size every
    /// byte is checked against. A datagram too short to hold a header is dropped and counted
    /// `short` (it cannot be one of ours).
    pub fn datagram(&mut self, data: &[u8], truncated: bool, arrival_ns: u64, verify: Option<usize>) {
        if data.len() < header::HEADER {
            self.counts.short += 1;
            return;
        }
        match verify {
            Some(size) => match header::check(data, size) {
                Ok(h) if !truncated => {
                    self.record(h.seq, data.len(), h.sent_ns, arrival_ns);
                }
                Ok(h) => {
                    self.record(h.seq, data.len(), h.sent_ns, arrival_ns);
                    self.counts.verify_failures += 1;
                }
                Err(_) => self.unchecked(data, arrival_ns, true),
            },
            None => self.unchecked(data, arrival_ns, false),
        }
    }

    /// Record what the header says; with `failed` (or no header) count a failure too.
    fn unchecked(&mut self, data: &[u8], arrival_ns: u64, failed: bool) {
        match Header::read(data) {
            Some(h) => {
                self.record(h.seq, data.len(), h.sent_ns, arrival_ns);
                if failed {
                    self.counts.verify_failures += 1;
                }
            }
            None => self.counts.short += 1,
        }
    }

    pub fn counts(&self) -> SeqCounts {
        self.counts
    }

    /// The sequence number and send time of the last datagram recorded (a request/response
    /// client matches a reply to its request with it).
    pub fn last(&self) -> Option<Header> {
        self.last
    }

    /// `counts().lost(expected)`.
    pub fn lost(&self, expected: u64) -> u64 {
        self.counts.lost(expected)
    }

    /// Whether other flows were merged into this tracker.
    pub fn is_merged(&self) -> bool {
        self.merged
    }

    /// Add another flow's (thread's) counts to this one (see `SeqCounts::add`). The result is
    /// for reporting: later `record`s go on checking this tracker's own flow only.
    pub fn merge(&mut self, other: &SeqTracker) {
        self.counts.add(&other.counts);
        self.merged = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(t: &mut SeqTracker, seqs: &[u64]) {
        for &s in seqs {
            t.record(s, 100, 0, 0);
        }
    }

    /// Kept arrivals say each datagram's number and whether it was new, up to the room asked
    /// for, until cleared.
    #[test]
    fn kept_arrivals_name_each_datagram_until_cleared() {
        let mut t = SeqTracker::new();
        feed(&mut t, &[0]);
        assert!(t.arrivals().is_empty(), "nothing kept before keep_arrivals");
        t.keep_arrivals(3);
        t.record(5, 100, 0, 7);
        t.record(5, 100, 0, 8);
        t.record(4, 100, 0, 9);
        t.record(6, 100, 0, 10);
        let kept: Vec<(u64, u64, bool)> = t.arrivals().iter().map(|a| (a.seq, a.arrival_ns, a.new)).collect();
        assert_eq!(kept, [(5, 7, true), (5, 8, false), (4, 9, true)]);
        assert_eq!(t.counts().received, 5, "a datagram beyond the room is still counted");
        t.clear_arrivals();
        t.record(7, 100, 0, 11);
        assert_eq!(t.arrivals().len(), 1);
    }

    #[test]
    fn loss_is_what_never_arrived() {
        let mut t = SeqTracker::new();
        feed(&mut t, &[0, 1, 2, 4, 5, 8, 9]);
        let c = t.counts();
        assert_eq!((c.received, c.distinct, c.bytes), (7, 7, 700));
        assert_eq!((c.duplicates, c.reordered), (0, 0));
        assert_eq!(t.lost(10), 3);
        assert_eq!(t.lost(5), 0, "never negative");
    }

    #[test]
    fn a_late_datagram_is_reordered_and_a_repeated_one_a_duplicate() {
        let mut t = SeqTracker::new();
        feed(&mut t, &[0, 2, 1, 3, 3, 1, 5, 4, 0]);
        let c = t.counts();
        assert_eq!(c.received, 9);
        assert_eq!(c.distinct, 6);
        assert_eq!(c.duplicates, 3, "3, 1 and 0 again");
        assert_eq!(c.reordered, 2, "1 after 2, 4 after 5");
        assert_eq!(t.lost(6), 0);
        assert_eq!(t.last(), Some(Header { seq: 0, sent_ns: 0 }));
    }

    #[test]
    fn the_window_slides_and_what_falls_out_of_it_is_counted_not_checked() {
        let mut t = SeqTracker::new();
        feed(&mut t, &[0, 1, WINDOW + 1, WINDOW - 1, WINDOW - 1, 1]);
        let c = t.counts();
        assert_eq!(
            c.duplicates, 1,
            "WINDOW-1 twice; its bit was cleared of an older number's"
        );
        assert_eq!(c.beyond_window, 1, "1 again, too old to tell");
        assert_eq!(c.distinct, 5);
        // A jump of more than a window is held apart until the flow continues from it, then
        // clears everything.
        feed(&mut t, &[10 * WINDOW]);
        assert_eq!(t.counts().distinct, 5, "held apart");
        feed(&mut t, &[10 * WINDOW + 1, 10 * WINDOW - 3, 10 * WINDOW - 3]);
        assert_eq!(t.counts().distinct, 8);
        assert_eq!(t.counts().duplicates, 2);
        assert_eq!(t.counts().forged, 0);
    }

    #[test]
    fn jitter_follows_rfc_3550_on_a_known_series() {
        let mut t = SeqTracker::new();
        // Transit times 10, 12, 10, 14 ns: D = 2, 2, 4.
        for (seq, (sent, arrival)) in [(100u64, 110u64), (200, 212), (300, 310), (400, 414)]
            .into_iter()
            .enumerate()
        {
            t.record(seq as u64, 64, sent, arrival);
        }
        let mut j = 0.0f64;
        for d in [2.0, 2.0, 4.0] {
            j += (d - j) / 16.0;
        }
        let c = t.counts();
        assert_eq!(c.jitter_samples, 3);
        assert!((c.jitter_ns.unwrap() - j).abs() < 1e-12, "{c:?} vs {j}");
        assert!((j - 0.477_050_781_25).abs() < 1e-12);
        // A clock offset between the ends cancels; a duplicate adds no sample.
        let mut shifted = SeqTracker::new();
        let series = [
            (0u64, 100u64, 5_110u64),
            (1, 200, 5_212),
            (1, 250, 5_400),
            (2, 300, 5_310),
            (3, 400, 5_414),
        ];
        for (seq, sent, arrival) in series {
            shifted.record(seq, 64, sent, arrival);
        }
        assert_eq!(shifted.counts().duplicates, 1);
        assert_eq!(shifted.counts().jitter_ns, c.jitter_ns);
    }

    #[test]
    fn merged_flows_add_their_counts_and_weigh_their_jitter() {
        let mut a = SeqTracker::new();
        feed(&mut a, &[0, 1, 1]);
        let mut b = SeqTracker::new();
        feed(&mut b, &[0, 2]);
        a.merge(&b);
        let c = a.counts();
        assert_eq!((c.received, c.distinct, c.duplicates), (5, 4, 1));
        assert_eq!(a.lost(6), 2);
        assert!(a.is_merged());
        let mut x = SeqCounts {
            jitter_ns: Some(10.0),
            jitter_samples: 1,
            ..Default::default()
        };
        x.add(&SeqCounts {
            jitter_ns: Some(40.0),
            jitter_samples: 2,
            ..Default::default()
        });
        assert_eq!(x.jitter_ns, Some(30.0));
    }

    #[test]
    fn datagrams_are_checked_and_failures_counted() {
        use super::header::write_part;
        let mut t = SeqTracker::new();
        let mut d = vec![0u8; 64];
        write_part(&mut d, 0, &Header { seq: 3, sent_ns: 1 }, true);
        t.datagram(&d, false, 2, Some(64));
        t.datagram(&d, true, 2, Some(64));
        let mut bad = d.clone();
        bad[40] ^= 0xff;
        t.datagram(&bad, false, 2, Some(64));
        t.datagram(&bad, false, 2, None);
        t.datagram(&d[..8], false, 2, None);
        let c = t.counts();
        assert_eq!(c.received, 4, "not the one without a header");
        assert_eq!(c.distinct, 1);
        assert_eq!(c.duplicates, 3);
        assert_eq!(c.verify_failures, 2, "truncated, a changed byte");
        assert_eq!(c.short, 1);
    }

    /// Issue 31.5: datagrams shorter than the header (0 to 15 bytes) are dropped and counted
    /// `short` alone, with or without --verify: never received, never loss's complement.
    #[test]
    fn datagrams_shorter_than_the_header_are_dropped_and_counted_apart() {
        let mut t = SeqTracker::new();
        feed(&mut t, &[0, 1]);
        for len in [0, 1, 3, super::header::HEADER - 1] {
            t.datagram(&vec![0xab; len], false, 5, None);
            t.datagram(&vec![0xab; len], false, 5, Some(64));
        }
        let c = t.counts();
        assert_eq!((c.received, c.distinct, c.short, c.verify_failures), (2, 2, 8, 0));
        assert_eq!(t.lost(3), 1);
    }

    /// Issue 31.5: numbers the sender never sent — beyond its count, far ahead of the flow,
    /// or again — are dropped and counted `forged` once the count is known; the genuine
    /// counts (and so the loss) are as if they never came: received > sent is never 0 loss.
    #[test]
    fn numbers_the_sender_never_sent_are_forged_and_taken_out_of_the_count() {
        // 7500 sent, 1000 of them lost; forged copies of 3000 of the numbers sent (duplicates),
        // 2000 numbers just beyond the count, and some far ahead, before and after.
        let mut t = SeqTracker::new();
        feed(&mut t, &[u64::MAX / 2, 1 << 40]);
        let sent = 7500u64;
        feed(&mut t, &(0..sent - 1000).collect::<Vec<_>>());
        feed(&mut t, &(0..3000).collect::<Vec<_>>());
        feed(&mut t, &(sent..sent + 2000).collect::<Vec<_>>());
        feed(&mut t, &[1 << 50, (1 << 50) + 7]);
        assert_eq!(
            t.settle(sent),
            2000,
            "the numbers just beyond the count had been counted"
        );
        let c = t.counts();
        assert_eq!(c.distinct, sent - 1000);
        assert_eq!(t.lost(sent), 1000);
        assert_eq!(c.duplicates, 3000);
        assert_eq!(c.forged, 2000 + 4);
        assert_eq!(c.received, sent - 1000 + 3000, "the duplicates, not the forged");
    }

    /// A forged number a window ahead does not move the window: the genuine ones after it
    /// are still told apart as new and duplicate.
    #[test]
    fn a_forged_number_far_ahead_does_not_move_the_window() {
        let mut t = SeqTracker::new();
        feed(&mut t, &[0, 1, 2, 5 * WINDOW, 3, 3, 4]);
        let c = t.counts();
        assert_eq!((c.distinct, c.duplicates, c.reordered, c.beyond_window), (5, 1, 0, 0));
        t.settle(5);
        assert_eq!((t.counts().distinct, t.counts().forged), (5, 1));
    }
}
