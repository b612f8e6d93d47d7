//! Measuring: clocks with their own overhead, per-thread counters with provenance, statistics.

pub mod clock;
pub mod counters;
pub mod histogram;
pub mod stats;
