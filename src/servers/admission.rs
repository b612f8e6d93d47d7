//! Admission under `--max-conns`, the same for every model: each admitted connection's place
//! (`Slot`) is registered with what its session last published about the frame it is
//! receiving (`Gauge`). A newcomer that finds every place taken takes the place of the peer
//! least entitled to it: the registry marks that peer evicted and shuts its socket down, which
//! every model sees as the peer's close (a blocked read returns 0, a poller reports the socket,
//! an io_uring recv completes) and closes as it closes any connection. The place passes
//! straight to the newcomer, so an evicted peer that reconnects at once cannot win it back by
//! being first in the listen backlog.
//!
//! Who gives way, in this order (`Admission::enter`):
//! 1. a peer whose partial frame is too slow (`too_slow`): at its average rate since its first
//!    byte it would not be whole within `--frame-timeout`, which would close it anyway; the
//!    slowest (fewest bytes per second) first, then the oldest frame. The rate, not the age,
//!    decides: a large request arriving steadily is old but not slow, a peer trickling a byte
//!    at a time is slow from its first bytes on. This protocol has no authentication, so a
//!    request completed earlier earns no protection: what counts is the frame arriving now.
//! 2. while newcomers are being turned away (one was refused in the last `TURNING_AWAY`), a
//!    quiet peer (no partial frame, no reply owed) idle for `FULL_IDLE`; the longest idle first.
//! 3. the per-address cap (with `per_address`, as `procs serve` runs): a peer of the address
//!    holding the most places, when that is at least two more than the newcomer's address
//!    holds (`over_share`) — so one address, however well its connections behave, never keeps
//!    every place from another, and a place moved this way never moves back (the two counts
//!    only come closer). Of that address: its stalled frames first (as 1), then its quiet
//!    peers (longest idle first, however short), then its partial frames (least advanced
//!    first); never one with a reply owed and no partial frame, in the middle of being answered.
//!
//! Apart from rule 3, a frame arriving fast enough to be whole within `--frame-timeout` never
//! gives way, however old, nor a newcomer that has not sent its first byte yet (before
//! FULL_IDLE); no rule takes a peer with a reply owed and no partial frame (it is the
//! server's turn).

use crate::sys::multiplex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// While newcomers are being turned away, a quiet connection idle this long gives its place
/// to the next newcomer, whatever `--idle-timeout` says.
pub const FULL_IDLE: Duration = Duration::from_secs(1);
/// How long after a refusal the server counts as turning newcomers away.
const TURNING_AWAY: Duration = Duration::from_secs(5);

const HELD: u8 = 0;
const EVICTED: u8 = 1;
const RELEASED: u8 = 2;

/// What a session publishes about itself for admission to judge it by.
#[derive(Debug, Clone, Copy)]
pub struct Standing {
    /// When the partial frame began arriving (None: no partial frame).
    pub frame_started: Option<Instant>,
    /// Bytes of the partial frame received so far.
    pub frame_bytes: usize,
    /// Bytes the whole frame has (the largest frame while its header is not whole).
    pub frame_needs: usize,
    pub last_active: Instant,
    /// A reply is still to be sent.
    pub owes: bool,
}

impl Standing {
    pub fn new(now: Instant) -> Standing {
        Standing {
            frame_started: None,
            frame_bytes: 0,
            frame_needs: 0,
            last_active: now,
            owes: false,
        }
    }

    /// The partial frame's age, if it is too slow to be whole within `limit` of its first byte.
    pub fn stalled_for(&self, now: Instant, limit: Duration) -> Option<Duration> {
        let age = now.saturating_duration_since(self.frame_started?);
        too_slow(self.frame_bytes, self.frame_needs, age, limit).then_some(age)
    }

    fn quiet_idle(&self, now: Instant) -> Option<Duration> {
        let idle = now.saturating_duration_since(self.last_active);
        (self.quiet() && idle >= FULL_IDLE).then_some(idle)
    }

    /// Nothing owed either way: no partial frame, no reply unsent.
    pub fn quiet(&self) -> bool {
        self.frame_started.is_none() && !self.owes
    }
}

/// Whether `got` bytes of a `needs`-byte frame, received over `age`, arrive too slowly for the
/// frame to be whole within `limit` of its first byte (at that average rate).
pub fn too_slow(got: usize, needs: usize, age: Duration, limit: Duration) -> bool {
    // got / age * limit < needs, without dividing by an age that may be zero.
    (got as u128) * limit.as_nanos() < (needs as u128) * age.as_nanos()
}

/// One admitted connection as admission sees it.
pub struct Gauge {
    fd: RawFd,
    /// The peer's address (None: unknown, or the per-address cap is off).
    peer: Option<IpAddr>,
    state: AtomicU8,
    progress: Mutex<Standing>,
}

impl Gauge {
    /// Publish the session's state (its owner thread calls this as bytes come and go).
    pub fn publish(&self, progress: Standing) {
        *lock(&self.progress) = progress;
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The places under `--max-conns` and the connections holding them.
pub struct Admission {
    max_conns: usize,
    frame_timeout: Duration,
    /// Rule 3, the per-address cap, applies.
    per_address: bool,
    started: Instant,
    active: AtomicUsize,
    held: Mutex<HashMap<u64, Arc<Gauge>>>,
    next_id: AtomicU64,
    /// When a newcomer was last refused, in ms since `started` (+1; 0: never).
    refused_at_ms: AtomicU64,
}

/// How a newcomer was admitted, or not.
pub enum Entry {
    /// A free place.
    Free(Slot),
    /// The place of a peer that gave way (see the module's order).
    InPlaceOf(Slot),
    /// Every place is held by a peer that may keep it.
    Full,
}

impl Admission {
    /// `per_address`: one address may not keep every place from another (rule 3).
    pub fn new(max_conns: usize, frame_timeout: Duration, per_address: bool) -> Admission {
        Admission {
            max_conns,
            frame_timeout,
            per_address,
            started: Instant::now(),
            active: AtomicUsize::new(0),
            held: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            refused_at_ms: AtomicU64::new(0),
        }
    }

    pub fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// A place for the connection on `fd` from `peer`: a free one, or one a peer gives way
    /// (its socket is shut down here; its model closes it). `Full` when neither.
    pub fn enter(self: &Arc<Self>, fd: RawFd, peer: Option<IpAddr>) -> Entry {
        let now = Instant::now();
        let mut held = lock(&self.held);
        if self.active.fetch_add(1, Ordering::SeqCst) < self.max_conns {
            return Entry::Free(self.register(&mut held, fd, peer, now));
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
        let mut victims = self.givers_way(&held, now);
        if self.per_address {
            victims.extend(self.over_share(&held, peer, now));
        }
        for victim in victims {
            // A peer closing by itself at this moment keeps its own place (and frees it).
            if victim
                .state
                .compare_exchange(HELD, EVICTED, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                // The fd is still open: its Slot, dropped before its socket closes in every
                // model, must take the registry's lock (held here) to leave it.
                multiplex::shutdown_both(victim.fd);
                return Entry::InPlaceOf(self.register(&mut held, fd, peer, now));
            }
        }
        drop(held);
        let ms = now.saturating_duration_since(self.started).as_millis() as u64 + 1;
        self.refused_at_ms.store(ms, Ordering::Relaxed);
        Entry::Full
    }

    fn register(
        self: &Arc<Self>,
        held: &mut HashMap<u64, Arc<Gauge>>,
        fd: RawFd,
        peer: Option<IpAddr>,
        now: Instant,
    ) -> Slot {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let gauge = Arc::new(Gauge {
            fd,
            peer: if self.per_address { peer } else { None },
            state: AtomicU8::new(HELD),
            progress: Mutex::new(Standing::new(now)),
        });
        held.insert(id, gauge.clone());
        Slot {
            admission: self.clone(),
            gauge,
            id,
        }
    }

    /// The held connections that would give way to a newcomer now, in the order they do.
    fn givers_way(&self, held: &HashMap<u64, Arc<Gauge>>, now: Instant) -> Vec<Arc<Gauge>> {
        let turning_away = self.turning_away(now);
        let mut stalled = Vec::new();
        let mut idle = Vec::new();
        for gauge in held.values() {
            if gauge.state.load(Ordering::SeqCst) != HELD {
                continue;
            }
            let progress = *lock(&gauge.progress);
            if let Some(age) = progress.stalled_for(now, self.frame_timeout) {
                stalled.push((progress.frame_bytes, age, gauge.clone()));
            } else if let Some(for_how_long) = progress.quiet_idle(now).filter(|_| turning_away) {
                idle.push((for_how_long, gauge.clone()));
            }
        }
        // Slowest first (fewest bytes per second: a.got / a.age < b.got / b.age), then oldest.
        stalled.sort_by(|(a_got, a_age, _), (b_got, b_age, _)| {
            let a_rate = (*a_got as u128) * b_age.as_nanos();
            let b_rate = (*b_got as u128) * a_age.as_nanos();
            a_rate.cmp(&b_rate).then(b_age.cmp(a_age))
        });
        idle.sort_by_key(|(for_how_long, _)| std::cmp::Reverse(*for_how_long));
        stalled
            .into_iter()
            .map(|(_, _, g)| g)
            .chain(idle.into_iter().map(|(_, g)| g))
            .collect()
    }

    /// Rule 3: the peers of the address holding the most places, when it holds at least two
    /// more than `newcomer`'s address, in the order they give way (stalled frames slowest
    /// first, quiet peers longest idle first, partial frames least advanced first); never one
    /// with a reply owed and no partial frame. Empty when no address is over its share.
    fn over_share(&self, held: &HashMap<u64, Arc<Gauge>>, newcomer: Option<IpAddr>, now: Instant) -> Vec<Arc<Gauge>> {
        let mut places: HashMap<Option<IpAddr>, usize> = HashMap::new();
        for gauge in held.values().filter(|g| g.state.load(Ordering::SeqCst) == HELD) {
            *places.entry(gauge.peer).or_default() += 1;
        }
        let own = places.get(&newcomer).copied().unwrap_or(0);
        let Some((fullest, most)) = places
            .into_iter()
            .filter(|(address, _)| *address != newcomer)
            .max_by_key(|(_, count)| *count)
        else {
            return Vec::new();
        };
        if most < own + 2 {
            return Vec::new();
        }
        // (rank, then within it: a key that sorts the one to go first lowest).
        let mut ranked: Vec<((u8, u128, u128), Arc<Gauge>)> = Vec::new();
        for gauge in held.values() {
            if gauge.peer != fullest || gauge.state.load(Ordering::SeqCst) != HELD {
                continue;
            }
            let p = *lock(&gauge.progress);
            let key = if let Some(age) = p.stalled_for(now, self.frame_timeout) {
                // Bytes per second, scaled so that whole numbers compare (age at least 1 ns).
                let rate = (p.frame_bytes as u128) * 1_000_000_000_000 / age.as_nanos().max(1);
                (0, rate, u128::MAX - age.as_nanos())
            } else if p.quiet() {
                let idle = now.saturating_duration_since(p.last_active).as_nanos();
                (1, u128::MAX - idle, 0)
            } else if let Some(started) = p.frame_started {
                // The share of the frame received, in millionths; then the oldest.
                let share = (p.frame_bytes as u128) * 1_000_000 / (p.frame_needs as u128).max(1);
                (2, share, u128::MAX - now.saturating_duration_since(started).as_nanos())
            } else {
                // A reply owed and nothing arriving: in the middle of being answered.
                continue;
            };
            ranked.push((key, gauge.clone()));
        }
        ranked.sort_by_key(|(key, _)| *key);
        ranked.into_iter().map(|(_, g)| g).collect()
    }

    /// A newcomer was refused lately.
    fn turning_away(&self, now: Instant) -> bool {
        let at = self.refused_at_ms.load(Ordering::Relaxed);
        at > 0
            && now.saturating_duration_since(self.started).as_millis() as u64
                <= at - 1 + TURNING_AWAY.as_millis() as u64
    }
}

/// A connection's place under `--max-conns`; given back when dropped, unless it was given to
/// a newcomer. Every model drops it before closing the connection's socket (so a client that
/// reconnects the moment it sees the close is not told "full", and the registry never shuts
/// down a descriptor that was closed and reused).
pub struct Slot {
    admission: Arc<Admission>,
    gauge: Arc<Gauge>,
    id: u64,
}

impl Slot {
    /// Where the connection's session publishes its progress.
    pub fn gauge(&self) -> Arc<Gauge> {
        self.gauge.clone()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let own = self
            .gauge
            .state
            .compare_exchange(HELD, RELEASED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if own {
            self.admission.active.fetch_sub(1, Ordering::SeqCst);
        }
        lock(&self.admission.held).remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn a_trickle_is_too_slow_and_a_steady_frame_is_not() {
        let limit = Duration::from_secs(5);
        let mib = 1 << 20;
        // One byte a second of an unknown-length frame: slow at once.
        assert!(too_slow(1, mib, Duration::from_millis(1), limit));
        // 512 KiB in a second of a 1 MiB frame: whole in 2 s.
        assert!(!too_slow(mib / 2, mib, Duration::from_secs(1), limit));
        // Nothing can be judged at age zero.
        assert!(!too_slow(0, mib, Duration::ZERO, limit));
    }

    fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    #[test]
    fn a_newcomer_takes_the_slowest_partial_frame_and_never_a_steady_one() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let admission = Arc::new(Admission::new(2, Duration::from_secs(5), false));
        let (_c1, s1) = pair(&listener);
        let (mut c2, s2) = pair(&listener);
        let Entry::Free(steady) = admission.enter(s1.as_raw_fd(), None) else {
            panic!("a free place")
        };
        let Entry::Free(trickler) = admission.enter(s2.as_raw_fd(), None) else {
            panic!("a free place")
        };
        let now = Instant::now();
        let begun = now - Duration::from_secs(1);
        steady.gauge().publish(Standing {
            frame_started: Some(begun),
            frame_bytes: 900 << 10,
            frame_needs: 1 << 20,
            ..Standing::new(now)
        });
        trickler.gauge().publish(Standing {
            frame_started: Some(begun),
            frame_bytes: 10,
            frame_needs: 1 << 20,
            ..Standing::new(now)
        });
        let (_c3, s3) = pair(&listener);
        let Entry::InPlaceOf(newcomer) = admission.enter(s3.as_raw_fd(), None) else {
            panic!("the trickler gives way")
        };
        // The trickler's socket was shut down: its peer reads the close.
        use std::io::Read;
        c2.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(c2.read(&mut [0u8; 8]).unwrap(), 0);
        assert_eq!(admission.active(), 2);
        // Its model closes it; the place stays the newcomer's.
        drop(trickler);
        assert_eq!(admission.active(), 2);
        // The steady frame never gives way, nor the newcomer, which has sent nothing yet.
        let (_c4, s4) = pair(&listener);
        assert!(matches!(admission.enter(s4.as_raw_fd(), None), Entry::Full));
        drop(newcomer);
        assert_eq!(admission.active(), 1);
        drop(steady);
        assert_eq!(admission.active(), 0);
    }

    /// Rule 3 with new values: four places all held by 127.0.9.9, each behaving (one owed a
    /// reply, one frame arriving steadily, two quiet under FULL_IDLE): newcomers from other
    /// addresses take that address's places — the longest idle first, then the other quiet
    /// one, then the partial frame — until it holds no more than one more than theirs, and
    /// never the one being answered. Without the cap the first newcomer is refused.
    #[test]
    fn one_address_never_keeps_every_place_from_another() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let ip = |last: u8| Some(IpAddr::from([127, 0, 9, last]));
        let hog = ip(9);
        for per_address in [false, true] {
            let admission = Arc::new(Admission::new(4, Duration::from_secs(30), per_address));
            let now = Instant::now();
            let standings = [
                // Answered now: a reply owed, nothing arriving.
                Standing {
                    owes: true,
                    ..Standing::new(now)
                },
                // 700 of 1,000 bytes in 100 ms: steady.
                Standing {
                    frame_started: Some(now - Duration::from_millis(100)),
                    frame_bytes: 700,
                    frame_needs: 1000,
                    ..Standing::new(now)
                },
                // Quiet, active 10 ms ago.
                Standing::new(now - Duration::from_millis(10)),
                // Quiet, active 600 ms ago (under FULL_IDLE).
                Standing::new(now - Duration::from_millis(600)),
            ];
            let mut hogs = Vec::new();
            for standing in standings {
                let (client, server) = pair(&listener);
                let Entry::Free(slot) = admission.enter(server.as_raw_fd(), hog) else {
                    panic!("a free place")
                };
                slot.gauge().publish(standing);
                hogs.push((client, server, slot));
            }
            let (_c, newcomer) = pair(&listener);
            let entry = admission.enter(newcomer.as_raw_fd(), ip(20));
            if !per_address {
                assert!(
                    matches!(entry, Entry::Full),
                    "without the cap every place stays the hog's"
                );
                continue;
            }
            let Entry::InPlaceOf(_first) = entry else {
                panic!("a newcomer from another address takes one of the hog's places")
            };
            let closed = |i: usize, hogs: &mut Vec<(TcpStream, TcpStream, Slot)>| {
                use std::io::Read;
                hogs[i].0.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                hogs[i].0.read(&mut [0u8; 8]).unwrap() == 0
            };
            assert!(closed(3, &mut hogs), "the longest idle gives way first");
            // 3 to 1: the hog's own newcomer takes nothing from the other address.
            let (_c, again) = pair(&listener);
            assert!(matches!(admission.enter(again.as_raw_fd(), hog), Entry::Full));
            let (_c, second) = pair(&listener);
            let Entry::InPlaceOf(_second) = admission.enter(second.as_raw_fd(), ip(21)) else {
                panic!("3 places against none")
            };
            assert!(closed(2, &mut hogs), "then the other quiet one");
            let (_c, third) = pair(&listener);
            let Entry::InPlaceOf(_third) = admission.enter(third.as_raw_fd(), ip(22)) else {
                panic!("2 places against none")
            };
            assert!(closed(1, &mut hogs), "then the partial frame");
            // One each: nobody is over the share, and the one being answered was never taken.
            let (_c, fourth) = pair(&listener);
            assert!(matches!(admission.enter(fourth.as_raw_fd(), ip(23)), Entry::Full));
            hogs[0].0.set_nonblocking(true).unwrap();
            use std::io::Read;
            assert!(
                matches!(hogs[0].0.read(&mut [0u8; 8]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
                "the peer being answered is still open"
            );
        }
    }
}
