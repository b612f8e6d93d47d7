//! Network workloads, one per module.

pub mod rr;
pub mod stream;
