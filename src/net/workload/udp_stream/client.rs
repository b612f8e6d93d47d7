//! A udp-stream client thread: send numbered datagrams on its own connected socket, paced by
//! a user-space gap or as fast as the sender goes, counting what it sent inside the window.

use crate::case::UdpStreamCase;
use crate::net::dgram::{DgramSender, ZcCounts};
use crate::net::session::coordinator::Shared;
use crate::net::session::meter::{Ctx, Meter, Metered};
use crate::observation::Role;
use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What one client thread hands back.
pub(crate) struct ClientOutcome {
    /// Datagrams it handed to the kernel inside its window.
    pub window_datagrams: u64,
    pub metered: Metered,
    /// The zero-copy mode's completion counts, after every completion was read.
    pub zerocopy: Option<ZcCounts>,
}

/// The pacing of one thread: `per_call` datagrams every `gap` (the rate shared evenly by the
/// threads), on a schedule kept from the thread's start, so a late send is caught up by the
/// next calls rather than lost from the rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Pace {
    pub gap: Duration,
    pub per_call: usize,
    /// Datagrams per second of this thread.
    per_s: f64,
}

impl Pace {
    /// None: unpaced.
    pub fn of(case: &UdpStreamCase) -> Option<Pace> {
        let rate = case.rate?;
        let per_s = rate.datagrams_per_s(case.size) / case.net.threads as f64;
        let per_call = match case.mode {
            mode if mode.batches() => case.batch.max(1),
            _ => 1,
        };
        Some(Pace {
            gap: Duration::from_secs_f64(per_call as f64 / per_s),
            per_call,
            per_s,
        })
    }

    /// Datagrams due `elapsed` after the start.
    fn due(&self, elapsed: Duration) -> u64 {
        (elapsed.as_secs_f64() * self.per_s) as u64
    }

    /// Sleep until datagram `next` is due, but never longer than 20 ms, so the thread looks
    /// at the window often enough. A sleep that overshoots is caught up by the next calls
    /// (`due` counts from the start), so the rate holds while no CPU is spent spinning.
    fn wait_for(&self, next: u64, origin: Instant) {
        let at = origin + Duration::from_secs_f64(next as f64 / self.per_s);
        if let Some(left) = at.checked_duration_since(Instant::now()) {
            std::thread::sleep(left.min(crate::stop::Stop::POLL));
        }
    }
}

/// A send that found no room (the socket buffer, the device queue) or was interrupted: try again.
fn full(e: &io::Error) -> bool {
    crate::net::dgram::is_full(e) || e.kind() == io::ErrorKind::Interrupted
}

/// One client thread: send until its window closes (or `quit`), then wait for the kernel to
/// give back every buffer. `sent` is what it sent in the whole session, stored on every way out.
#[allow(clippy::too_many_arguments)]
pub(crate) fn send_flow(
    case: &UdpStreamCase,
    shared: &Shared<'_>,
    index: usize,
    socket: &UdpSocket,
    mut sender: Box<dyn DgramSender>,
    pace: Option<Pace>,
    quit: &AtomicBool,
    sent: &AtomicU64,
) -> io::Result<ClientOutcome> {
    let ctx = Ctx::client(shared, &case.net);
    let mut seq = 0u64;
    let result = run(&ctx, index, socket, &mut *sender, pace, quit, &mut seq);
    sent.store(seq, Ordering::SeqCst);
    let (window_datagrams, metered) = result?;
    Ok(ClientOutcome {
        window_datagrams,
        metered,
        zerocopy: sender.zerocopy(),
    })
}

fn run(
    ctx: &Ctx<'_>,
    index: usize,
    socket: &UdpSocket,
    sender: &mut dyn DgramSender,
    pace: Option<Pace>,
    quit: &AtomicBool,
    seq: &mut u64,
) -> io::Result<(u64, Metered)> {
    let fd = socket.as_raw_fd();
    let mut meter = Meter::start(ctx, Role::Client, index)?;
    let per_call = pace.map_or(sender.batch(), |p| p.per_call).max(1);
    let origin = Instant::now();
    let (mut open, mut at_open, mut at_close) = (false, None, None);
    loop {
        let now_open = meter.tick(|| sender.syscalls());
        if now_open != open {
            if now_open {
                at_open = Some(*seq);
            } else {
                at_close = Some(*seq);
            }
            open = now_open;
        }
        if meter.closed() || quit.load(Ordering::Relaxed) {
            break;
        }
        let count = match pace {
            None => per_call,
            Some(p) => {
                let due = p.due(origin.elapsed());
                if due <= *seq {
                    p.wait_for(*seq + 1, origin);
                    continue;
                }
                ((due - *seq) as usize).min(per_call)
            }
        };
        match sender.send(fd, *seq, count) {
            Ok(n) => *seq += n as u64,
            Err(e) if full(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let end = at_close.unwrap_or(*seq);
    let window = at_open.map_or(0, |start| end - start);
    sender.finish(fd)?;
    Ok((window, meter.finish(sender.syscalls())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{NetParams, UdpRate, UdpRecvMode, UdpSendMode};

    #[test]
    fn the_rate_is_shared_by_the_threads_in_calls_of_a_batch() {
        let case = UdpStreamCase {
            mode: UdpSendMode::Sendmmsg,
            rx_mode: UdpRecvMode::Recv,
            size: 1000,
            batch: 10,
            rate: Some(UdpRate::Bits(80_000_000)),
            rcvbuf: None,
            net: NetParams {
                threads: 2,
                duration_ms: 1000,
                ..NetParams::for_test()
            },
        };
        // 80 Mbit/s of 1000-byte datagrams is 10000/s, 5000/s per thread, 10 per call: 2 ms.
        let pace = Pace::of(&case).unwrap();
        assert_eq!((pace.per_call, pace.gap), (10, Duration::from_millis(2)));
        assert_eq!(pace.due(Duration::from_millis(3)), 15);
        let single = UdpStreamCase {
            mode: UdpSendMode::Send,
            ..case.clone()
        };
        assert_eq!(Pace::of(&single).unwrap().per_call, 1);
        assert_eq!(Pace::of(&UdpStreamCase { rate: None, ..case }), None);
    }
}
