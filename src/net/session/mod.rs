//! One network session, below the workloads: what a client and a server of every network
//! workload do alike. The client coordinator, the handshake, the session server of `net serve`
//! and what a served session does with its data connections. Nothing here imports a workload
//! but `registry.rs`, the list of what `net serve` serves.

pub(crate) mod connect;
pub(crate) mod coordinator;
pub mod data;
pub(crate) mod gate;
pub mod handshake;
pub(crate) mod loops;
pub(crate) mod meter;
pub(crate) mod observe;
pub mod registry;
pub mod served;
pub mod server;

pub(crate) use connect::{connect, data_connection, interrupted};
pub use data::DATA_IDLE_TIMEOUT;

/// The most threads (connections, flows) a network case may have, on every network command
/// but `net records` (its own `MAX_THREADS`): the `--threads` parser's bound and every
/// workload's check of a stored or received case, so all say one range.
pub const MAX_THREADS: usize = 1024;
pub(crate) use data::{accept_data, accept_from, open_data_port};
pub(crate) use gate::StartGate;
pub use handshake::{Ready, Refusal, RefusalKind, ServerProof, ServerRefused, Unproven};
pub use served::{Hello, Served};
pub use server::{serve_session, serve_session_with, AllowList, ServeOptions, Session};

/// The system probes every served session's window starts with, whatever the workload: the
/// server threads' tracepoint evidence when the run counts (`perf`; `rx_copies`: whether the
/// transport's receive copies pass the tracepoint). A workload pushes its own after.
pub(crate) fn served_probes(
    perf: bool,
    rx_copies: crate::measure::trace::RxCopies,
) -> crate::measure::window::SystemProbes {
    let mut system = crate::measure::window::SystemProbes::default();
    crate::measure::trace::push_trace_probe(&mut system, crate::observation::Role::Server, perf, rx_copies);
    system
}
