//! Measuring: clocks with their own overhead, per-thread counters with provenance, statistics, and the measured window with its probes.

pub mod clock;
pub mod counters;
pub mod histogram;
pub mod memtraffic;
pub mod queue;
pub mod stats;
pub mod system;
pub mod trace;
pub mod window;
