//! Network workloads: the message, the copy modes, the stream workload and where ends live.

pub mod agent;
pub mod alias;
pub mod auth;
pub mod completions;
pub mod control;
pub mod dgram;
pub mod message;
pub mod mode;
pub mod session;
pub mod settings;
pub mod topology;
pub mod workload;
