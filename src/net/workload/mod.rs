//! Network workloads, one file each.

pub mod stream;
