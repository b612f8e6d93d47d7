//! One network session, below the workloads: the handshake, the session server of `net serve`
//! and what a served session does with its data connections. Nothing here imports a workload
//! but `registry.rs`, the list of what `net serve` serves.

pub mod data;
pub mod handshake;
pub mod registry;
pub mod server;

pub use data::DATA_IDLE_TIMEOUT;
pub(crate) use data::{accept_from, budget_error, open_data_port, over_budget, send_outcome};
pub use handshake::{Ready, Refusal, RefusalKind, ServerRefused};
pub use server::{serve_session, serve_session_with, ServeOptions, Served, Session};
