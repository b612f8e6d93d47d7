//! Network workloads, one per module.

pub mod load;
pub mod records;
pub mod rr;
pub mod stream;
pub mod udp_rr;
pub mod udp_stream;
