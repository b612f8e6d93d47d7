//! What every thread of a network session that meters itself (rr/crr, udp-rr, udp-stream)
//! does around its loop: pin, open its counters, wait at the start gate, follow the measured window (snapshotting its own system-call count at the window's
//! edges, as its counters open and close) and say where it ran.

use super::coordinator::Shared;
use super::StartGate;
use crate::case::{CpuList, NetParams};
use crate::measure::counters::{kernel_policy, CounterSample, KernelPolicy, ThreadCounters};
use crate::measure::window::{thread_counters, Edge, View, Window};
use crate::observation::{Role, ThreadPlacement};
use crate::sys::affinity;
use std::io;

/// What the threads of one end share.
pub struct Ctx<'a> {
    pub window: &'a Window,
    pub ready: &'a StartGate,
    pub policy: &'a KernelPolicy,
    pub perf: bool,
    /// The CPUs this end's threads are pinned to, thread i to entry i (wrapping).
    pub cpus: Option<&'a CpuList>,
}

impl<'a> Ctx<'a> {
    /// A client thread's: the coordinator's window, gate and policy, the case's perf choice
    /// and client CPUs.
    pub fn client(shared: &Shared<'a>, net: &'a NetParams) -> Ctx<'a> {
        Ctx {
            window: shared.window,
            ready: shared.ready,
            policy: shared.policy,
            perf: net.perf,
            cpus: net.client_cpus.as_ref(),
        }
    }
}

/// What the threads of a serving end share, owned by its session (rr, udp-rr, udp-stream):
/// the window, the start gate and the kernel's counter policy.
pub struct ServerShared {
    pub window: Window,
    pub ready: StartGate,
    pub policy: KernelPolicy,
}

impl ServerShared {
    pub fn new() -> ServerShared {
        ServerShared {
            window: Window::new(),
            ready: StartGate::default(),
            policy: kernel_policy(),
        }
    }

    /// A serving thread's context: the case's perf choice and server CPUs.
    pub fn ctx<'a>(&'a self, net: &'a NetParams) -> Ctx<'a> {
        Ctx {
            window: &self.window,
            ready: &self.ready,
            policy: &self.policy,
            perf: net.perf,
            cpus: net.server_cpus.as_ref(),
        }
    }
}

/// One thread's view of the window, its counters and its system-call snapshots.
pub struct Meter<'a> {
    view: View<'a, ThreadCounters>,
    role: Role,
    index: usize,
    pin: Option<usize>,
    base_syscalls: u64,
    counted_syscalls: Option<u64>,
    cpu_at_start: Option<usize>,
}

/// What a thread measured inside its window.
pub struct Metered {
    /// None when the thread never saw the window open.
    pub counters: Option<CounterSample>,
    pub syscalls: u64,
    pub placement: ThreadPlacement,
}

impl<'a> Meter<'a> {
    /// Pin (if asked), open the counters, and wait until every thread of the run is ready.
    /// The gate is always reached, even when pinning fails, so the coordinator never waits
    /// for ever.
    pub fn start(ctx: &Ctx<'a>, role: Role, index: usize) -> io::Result<Meter<'a>> {
        let pin = ctx.cpus.filter(|c| !c.is_empty()).map(|c| c[index % c.len()]);
        let pinned = pin.map(|cpu| affinity::pin_current_thread(&[cpu]));
        let view = View::new(ctx.window, thread_counters(ctx.perf, ctx.policy));
        if !ctx.ready.arrive_and_wait() {
            return Err(io::Error::other(
                "the start was abandoned: another thread of the run failed to start",
            ));
        }
        if let Some(Err(e)) = pinned {
            return Err(io::Error::new(
                e.kind(),
                format!("could not pin to CPU {}: {e}", pin.unwrap_or(0)),
            ));
        }
        Ok(Meter {
            view,
            role,
            index,
            pin,
            base_syscalls: 0,
            counted_syscalls: None,
            cpu_at_start: None,
        })
    }

    /// Look at the window once (one relaxed load unless an edge was crossed); `syscalls` is
    /// asked only at an edge. Whether the window is open now.
    #[inline]
    pub fn tick(&mut self, syscalls: impl FnOnce() -> u64) -> bool {
        match self.view.tick() {
            Edge::Opened => {
                self.base_syscalls = syscalls();
                self.cpu_at_start = affinity::current_cpu();
            }
            Edge::Closed => self.counted_syscalls = Some(syscalls().saturating_sub(self.base_syscalls)),
            Edge::None => {}
        }
        self.view.is_open()
    }

    /// Whether this thread has seen the window close.
    #[inline]
    pub fn closed(&self) -> bool {
        self.view.closed()
    }

    /// Close the window for this thread if it is still open (it is leaving) and say what
    /// it measured.
    pub fn finish(mut self, syscalls_now: u64) -> Metered {
        if self.view.is_open() {
            self.counted_syscalls = Some(syscalls_now.saturating_sub(self.base_syscalls));
        }
        let measured = self.view.take();
        let migrations = measured
            .as_ref()
            .and_then(|m| m.sample.cpu_migrations.as_ref().ok().copied());
        let saw_window = measured.is_some();
        Metered {
            counters: measured.map(|m| m.sample),
            syscalls: if saw_window {
                self.counted_syscalls.unwrap_or(0)
            } else {
                0
            },
            placement: ThreadPlacement {
                role: self.role,
                index: self.index,
                pinned: self.pin.map(|c| vec![c]),
                cpu_at_start: self.cpu_at_start.or_else(affinity::current_cpu),
                cpu_at_end: affinity::current_cpu(),
                migrations,
            },
        }
    }
}
