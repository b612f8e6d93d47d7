//! One end of one stream connection, run on its own thread: pin, open counters, move messages
//! until told to stop, and count only inside the measured window.

use crate::case::StreamCase;
use crate::measure::counters::{CounterSample, KernelPolicy};
use crate::measure::window::{thread_counters, Edge, View, Window};
use crate::net::control::ThreadTally;
use crate::net::mode::{Receiver, RecvCounts, SendCounts, Sender};
use crate::net::session::StartGate;
use crate::observation::{Role, ThreadPlacement};
use crate::sys::affinity;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Which way the data goes on this thread.
pub enum End {
    Send(Box<dyn Sender>),
    Recv(Box<dyn Receiver>),
}

impl End {
    fn syscalls(&self) -> u64 {
        match self {
            End::Send(s) => s.counts().syscalls,
            End::Recv(r) => r.counts().syscalls,
        }
    }

    fn recv_counts(&self) -> Option<RecvCounts> {
        match self {
            End::Send(_) => None,
            End::Recv(r) => Some(r.counts()),
        }
    }
}

/// What a thread hands back when it is done.
pub struct ThreadOutcome {
    pub tally: ThreadTally,
    /// What the thread's counters measured in its window; None when it had no window.
    pub counters: Option<CounterSample>,
    pub placement: ThreadPlacement,
    pub send_counts: Option<SendCounts>,
    /// A receiver's counts over the whole session (warm-up included).
    pub recv_counts: Option<RecvCounts>,
    /// A receiver's counts inside its measured window (None: no window, or a sender).
    pub recv_window: Option<RecvCounts>,
}

pub struct ThreadPlan<'a> {
    pub role: Role,
    pub index: usize,
    pub pin: Option<usize>,
    pub fd: RawFd,
    pub message_size: u64,
    pub window: &'a Window,
    pub ready: &'a StartGate,
    pub policy: &'a KernelPolicy,
    /// Open perf counters (false: getrusage only).
    pub perf: bool,
    /// How long a sender may take to get its zero-copy buffers back at the end.
    pub drain_timeout: Duration,
}

/// What all threads of a session share.
pub struct Shared<'a> {
    pub window: &'a Window,
    pub ready: &'a StartGate,
    pub policy: &'a KernelPolicy,
}

/// How long a sender may wait for its zero-copy buffers at the end of a run.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

impl<'a> ThreadPlan<'a> {
    /// The plan for thread `index` of `role` in `case`, on connection `fd`: pinned to its
    /// side's CPU list entry, if any.
    pub fn new(case: &StreamCase, role: Role, index: usize, fd: RawFd, shared: &Shared<'a>) -> ThreadPlan<'a> {
        let cpus = if role == Role::Client {
            &case.net.client_cpus
        } else {
            &case.net.server_cpus
        };
        ThreadPlan {
            role,
            index,
            pin: cpus.as_ref().and_then(|c| c.cpu_for(index)),
            fd,
            message_size: case.size,
            window: shared.window,
            ready: shared.ready,
            policy: shared.policy,
            perf: case.net.perf,
            drain_timeout: if role == Role::Client {
                DRAIN_TIMEOUT
            } else {
                Duration::ZERO
            },
        }
    }
}

/// Where the thread's own counts stood when its window opened.
struct Before {
    messages: u64,
    syscalls: u64,
    cpu: Option<usize>,
    recv: Option<RecvCounts>,
}

/// What the thread counted itself inside its window.
struct Counted {
    messages: u64,
    syscalls: u64,
    cpu_at_start: Option<usize>,
    recv: Option<RecvCounts>,
}

/// Run the thread's loop. The barrier is always reached, even when pinning fails, so the
/// coordinator never waits forever.
pub fn run(plan: ThreadPlan<'_>, mut end: End) -> io::Result<ThreadOutcome> {
    let pinned = plan.pin.map(|cpu| affinity::pin_current_thread(&[cpu]).map(|_| cpu));
    let mut view = View::new(plan.window, thread_counters(plan.perf, plan.policy));
    if !plan.ready.arrive_and_wait() {
        return Err(io::Error::other(
            "the start was abandoned: another thread of the run failed to start",
        ));
    }
    if let Some(Err(e)) = pinned {
        return Err(io::Error::new(
            e.kind(),
            format!("could not pin to CPU {}: {e}", plan.pin.unwrap_or(0)),
        ));
    }

    let mut seq: u64 = 0;
    let mut before = Before {
        messages: 0,
        syscalls: 0,
        cpu: None,
        recv: None,
    };
    let mut counted: Option<Counted> = None;
    let count = |before: &Before, seq: u64, end: &End| Counted {
        messages: seq - before.messages,
        syscalls: end.syscalls() - before.syscalls,
        cpu_at_start: before.cpu,
        recv: end
            .recv_counts()
            .zip(before.recv.as_ref())
            .map(|(now, then)| now.since(then)),
    };
    loop {
        match view.tick() {
            Edge::Opened => {
                before = Before {
                    messages: seq,
                    syscalls: end.syscalls(),
                    cpu: affinity::current_cpu(),
                    recv: end.recv_counts(),
                }
            }
            Edge::Closed => counted = Some(count(&before, seq, &end)),
            Edge::None => {}
        }
        // A sender stops when the window closes; a receiver reads on until its peer closes,
        // unless the run was cut short.
        if view.closed() && (matches!(end, End::Send(_)) || view.abandoned()) {
            break;
        }
        let more = match &mut end {
            End::Send(s) => s.send(plan.fd, seq).map(|_| true),
            End::Recv(r) => r.recv(plan.fd, seq),
        }?;
        if !more {
            break;
        }
        seq += 1;
    }
    // A receiver whose peer closed before it saw the window close ends its window at the close.
    if view.is_open() {
        view.finish();
        counted = Some(count(&before, seq, &end));
    }
    let cpu_at_end = affinity::current_cpu();
    if let End::Send(s) = &mut end {
        s.drain(plan.fd, plan.drain_timeout)?;
    }
    // A thread can miss the window entirely: a receiver blocked in recv() the whole time
    // because its sender was starved, or a thread that first looked after the window closed.
    // It has no window (not an empty one): it measured nothing, so it must not count in the
    // mean window length or the rates; the caller warns.
    let (measured, counted) = match (view.take(), counted) {
        (Some(m), Some(c)) => (Some(m), c),
        _ => (
            None,
            Counted {
                messages: 0,
                syscalls: 0,
                cpu_at_start: affinity::current_cpu(),
                recv: None,
            },
        ),
    };
    let migrations = measured
        .as_ref()
        .and_then(|m| m.sample.cpu_migrations.as_ref().ok().copied());
    let window_s = measured.as_ref().map(|m| m.elapsed.as_secs_f64());
    Ok(ThreadOutcome {
        tally: ThreadTally {
            bytes: counted.messages * plan.message_size,
            messages: counted.messages,
            window_s,
            syscalls: counted.syscalls,
        },
        counters: measured.map(|m| m.sample),
        placement: ThreadPlacement {
            role: plan.role,
            index: plan.index,
            pinned: plan.pin.map(|c| vec![c]),
            cpu_at_start: counted.cpu_at_start,
            cpu_at_end,
            migrations,
        },
        send_counts: match &end {
            End::Send(s) => Some(s.counts()),
            End::Recv(_) => None,
        },
        recv_counts: end.recv_counts(),
        recv_window: counted.recv,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From review: a Barrier hung the whole run when one thread failed to start. The gate
    /// releases every waiting thread with "abandoned" instead.
    #[test]
    fn an_abandoned_start_releases_every_waiting_thread() {
        let gate = StartGate::default();
        std::thread::scope(|s| {
            let waiters: Vec<_> = (0..3).map(|_| s.spawn(|| gate.arrive_and_wait())).collect();
            // Four were expected, three arrive: the coordinator gives up after its patience.
            assert!(!gate.open_when(4, Duration::from_millis(200)));
            for w in waiters {
                assert!(!w.join().unwrap());
            }
        });
        let gate = StartGate::default();
        std::thread::scope(|s| {
            let w = s.spawn(|| gate.arrive_and_wait());
            assert!(gate.open_when(1, Duration::from_secs(10)));
            assert!(w.join().unwrap());
        });
    }
}
