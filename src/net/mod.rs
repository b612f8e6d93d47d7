//! Network workloads: the message, the copy modes, the stream workload and where ends live.

pub mod workload;
