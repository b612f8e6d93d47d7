//! Network workloads, one per module.

pub mod stream;
