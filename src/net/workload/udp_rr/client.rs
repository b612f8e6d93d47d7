//! The client thread of `net udp-rr`: keep up to `inflight` requests outstanding (closed
//! loop: a new one as soon as a slot is free; open loop: one when due, latency counted from
//! when it was due), match every reply to its request by the sequence number its header
//! carries, and give up on a request after the loss timeout (counted lost; its slot takes a
//! new request). Inside the loop nothing is allocated: the slots are an array made once, the
//! datagram paths reuse their buffers, the tracker its arrival list.

use crate::measure::histogram::LatencyHistogram;
use crate::net::dgram::{monotonic_ns, DgramReceiver, DgramSender, SeqTracker};
use crate::net::session::meter::{Ctx, Meter, Metered};
use crate::observation::Role;
use std::io;
use std::net::UdpSocket;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How one thread sends.
pub struct Schedule {
    pub inflight: usize,
    /// Open loop: a request every `gap`, the first `phase` after the start; None: closed loop.
    pub gap: Option<Duration>,
    pub phase: Duration,
    pub loss_timeout: Duration,
}

/// What one client thread hands back (counts are of the measured window).
pub struct ClientOutcome {
    /// Replies received to requests still outstanding.
    pub transactions: u64,
    /// Requests sent.
    pub sent: u64,
    /// Requests whose reply had not come within the loss timeout.
    pub lost: u64,
    /// Replies that came after their request was given up on.
    pub late: u64,
    /// Replies whose sequence number had already arrived.
    pub duplicates: u64,
    /// Open loop: sends that were due while every slot was in flight.
    pub shed: u64,
    /// Replies whose bytes were checked (`--verify`), and of them corrupt.
    pub verified: u64,
    pub corrupt: u64,
    /// SO_RXQ_OVFL at the end (None: unknown).
    pub rxq_drops: Option<u64>,
    pub latency: LatencyHistogram,
    pub metered: Metered,
}

/// A request in flight: its sequence number and when it counts from (ns, monotonic).
#[derive(Clone, Copy)]
struct Slot {
    seq: u64,
    from_ns: u64,
    busy: bool,
}

const FREE: Slot = Slot {
    seq: 0,
    from_ns: 0,
    busy: false,
};

/// Counts of one thread, as the loop keeps them.
#[derive(Default)]
struct Counts {
    transactions: u64,
    sent: u64,
    lost: u64,
    late: u64,
    duplicates: u64,
    shed: u64,
}

/// Run one client socket until the window closes (or a thread failed). `socket` is connected
/// to its server socket and has a short receive timeout (the loop's poll).
pub fn run(
    ctx: &Ctx<'_>,
    index: usize,
    socket: &UdpSocket,
    mut sender: Box<dyn DgramSender>,
    mut receiver: Box<dyn DgramReceiver>,
    schedule: &Schedule,
    failed: &AtomicBool,
) -> io::Result<ClientOutcome> {
    // Sleeps end within microseconds of their deadline (open loop).
    let _ = nix::sys::prctl::set_timerslack(1);
    let fd = socket.as_raw_fd();
    let mut meter = Meter::start(ctx, Role::Client, index)?;
    let inflight = schedule.inflight.max(1);
    let mut slots = [FREE; super::MAX_INFLIGHT];
    let slots = &mut slots[..inflight];
    let timeout_ns = schedule.loss_timeout.as_nanos() as u64;
    let gap_ns = schedule.gap.map(|g| g.as_nanos().max(1) as u64);
    let mut seen = SeqTracker::new();
    seen.keep_arrivals(inflight.max(crate::net::dgram::ARRIVALS));
    let mut latency = LatencyHistogram::new();
    let mut c = Counts::default();
    let mut next_seq = 0u64;
    let mut due = monotonic_ns() + schedule.phase.as_nanos() as u64;
    // The tracker's counts as the window opened: the verify counts are the window's.
    let mut window_base = None;
    // SO_RXQ_OVFL as the window opened (None: no datagram had said yet, so 0).
    let mut drops_base = None;
    // The server's socket answered with ICMP port unreachable (its session ended or failed:
    // the control connection says which).
    let mut server_gone = false;
    // The poll() calls of the open loop.
    let mut own_syscalls = 0u64;
    loop {
        let open = meter.tick(|| own_syscalls + sender.syscalls() + receiver.syscalls());
        if meter.closed() || failed.load(Ordering::Relaxed) {
            break;
        }
        if open && window_base.is_none() {
            window_base = Some(seen.counts());
            drops_base = super::drops_now(fd, receiver.as_ref());
        }
        let now = monotonic_ns();
        expire(slots, now, timeout_ns, open, &mut c);
        let to_send = to_send(slots, gap_ns, (&mut due, now), open, &mut c);
        if to_send > 0 {
            let from = match gap_ns {
                // Open loop: from when it was due (the first of this call's).
                Some(gap) => due - gap * to_send as u64,
                None => monotonic_ns(),
            };
            let went = send(sender.as_mut(), (fd, next_seq, to_send), &mut server_gone)?;
            fill(slots, (next_seq, went), from, gap_ns);
            next_seq += went as u64;
            if open {
                c.sent += went as u64;
            }
        }
        // Receive: block until a reply or the poll interval (open loop: no longer than the
        // next due time).
        if gap_ns.is_some() {
            let wait = Duration::from_nanos(due.saturating_sub(monotonic_ns())).min(super::POLL);
            if slots.iter().all(|s| !s.busy) {
                // Nothing to wait for but the schedule.
                std::thread::sleep(wait);
                continue;
            }
            // A reply, or the next due time (whole milliseconds: under one, a look).
            own_syscalls += 1;
            if !readable(socket, wait)? {
                continue;
            }
        }
        match receiver.recv(fd, &mut seen) {
            Ok(_) => {}
            // The server's socket is gone (its session ended with the window, or it failed:
            // then the control connection says so): what is in flight times out.
            Err(e) if super::gone(&e) => server_gone = true,
            Err(e) => return Err(e),
        }
        match_arrivals(slots, &mut seen, open, &mut latency, &mut c);
    }
    if !server_gone {
        match sender.finish(fd) {
            Err(e) if !super::gone(&e) => return Err(e),
            _ => {}
        }
    }
    let at_end = seen.counts();
    let in_window = at_end.since(&window_base.unwrap_or(at_end));
    let metered = meter.finish(own_syscalls + sender.syscalls() + receiver.syscalls());
    Ok(ClientOutcome {
        transactions: c.transactions,
        sent: c.sent,
        lost: c.lost,
        late: c.late,
        duplicates: c.duplicates,
        shed: c.shed,
        verified: in_window.received.saturating_sub(in_window.verify_failures),
        corrupt: in_window.verify_failures,
        rxq_drops: window_base
            .and(super::drops_now(fd, receiver.as_ref()))
            .map(|d| d.saturating_sub(drops_base.unwrap_or(0))),
        latency,
        metered,
    })
}

/// Send `count` requests numbered from `seq` on `fd` in one call; how many went. A full
/// socket buffer sends none; the server's socket gone (`server_gone`, then set) none from
/// now on (an io_uring ring refuses every call after a failed one): what is in flight times out.
fn send(
    sender: &mut dyn DgramSender,
    (fd, seq, count): (RawFd, u64, usize),
    server_gone: &mut bool,
) -> io::Result<usize> {
    if *server_gone {
        return Ok(0);
    }
    match sender.send(fd, seq, count) {
        Ok(n) => Ok(n),
        Err(e) if crate::net::dgram::is_full(&e) => Ok(0),
        Err(e) if super::gone(&e) => {
            *server_gone = true;
            Ok(0)
        }
        Err(e) => Err(e),
    }
}

/// Requests whose time is up are lost (counted inside the window); their slots are free again.
fn expire(slots: &mut [Slot], now: u64, timeout_ns: u64, open: bool, c: &mut Counts) {
    for slot in slots
        .iter_mut()
        .filter(|s| s.busy && now.saturating_sub(s.from_ns) >= timeout_ns)
    {
        slot.busy = false;
        if open {
            c.lost += 1;
        }
    }
}

/// How many requests to send now: closed loop (`gap_ns` None), one into every free slot at
/// once (one call of the batching modes); open loop, one per due time that has come, `due`
/// moved past them, and those due with every slot in flight shed.
fn to_send(slots: &[Slot], gap_ns: Option<u64>, (due, now): (&mut u64, u64), open: bool, c: &mut Counts) -> usize {
    let free = slots.iter().filter(|s| !s.busy).count();
    let Some(gap) = gap_ns else {
        return free;
    };
    let mut n = 0;
    while *due <= now && n < free {
        n += 1;
        *due += gap;
    }
    // Due with every slot in flight: shed.
    while *due <= now {
        if open {
            c.shed += 1;
        }
        *due += gap;
    }
    n
}

/// The `went` requests numbered from `first` are in flight: each in a free slot, sent at
/// `from` (open loop: each at its own due time, `gap_ns` apart).
fn fill(slots: &mut [Slot], (first, went): (u64, usize), from: u64, gap_ns: Option<u64>) {
    let mut seqs = first..first + went as u64;
    for (k, slot) in slots.iter_mut().filter(|s| !s.busy).take(went).enumerate() {
        *slot = Slot {
            seq: seqs.next().unwrap_or(first),
            from_ns: match gap_ns {
                Some(gap) => from + gap * k as u64,
                None => from,
            },
            busy: true,
        };
    }
}

/// Match the replies that arrived with their requests' slots: a transaction and its latency
/// inside the window; a reply to no request in flight is late (new) or a duplicate.
fn match_arrivals(
    slots: &mut [Slot],
    seen: &mut SeqTracker,
    open: bool,
    latency: &mut LatencyHistogram,
    c: &mut Counts,
) {
    for arrival in seen.arrivals() {
        match slots.iter_mut().find(|s| s.busy && s.seq == arrival.seq) {
            Some(slot) => {
                slot.busy = false;
                if open {
                    latency.record_ns(arrival.arrival_ns.saturating_sub(slot.from_ns));
                    c.transactions += 1;
                }
            }
            None if open && arrival.new => c.late += 1,
            None if open => c.duplicates += 1,
            None => {}
        }
    }
    seen.clear_arrivals();
}

/// Whether `socket` has a datagram to read within `wait` (poll(2), whole milliseconds).
fn readable(socket: &UdpSocket, wait: Duration) -> io::Result<bool> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(socket.as_fd(), PollFlags::POLLIN)];
    let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(n) => Ok(n > 0),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(io::Error::from(e)),
    }
}
