//! One network session, below the workloads: what a client (and a server) of every network
//! workload does alike. Nothing here imports a workload.

pub(crate) mod connect;
pub(crate) mod coordinator;
pub(crate) mod gate;
pub(crate) mod observe;

pub(crate) use connect::{connect, interrupted};
pub(crate) use gate::{StartGate, START_PATIENCE};
