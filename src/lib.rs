//! iopath: measures what moving data through a Linux machine costs.
//!
//! Rooms, ground first (a room's code names only rooms before it; `tests/architecture.rs`
//! checks it): `stop`, `sys`, `format`, `warning`, `choice`, `machine`, `observation`, `case`,
//! `measure`, `sysinfo`, `net`, `fake`, `servers`, `micro`, `fleet`, `sweep`, `store`, `report`,
//! `cli`.
#![deny(unsafe_code)]

pub mod case;
pub mod choice;
pub mod cli;
pub mod fake;
pub mod fleet;
pub mod format;
pub mod machine;
pub mod measure;
pub mod micro;
pub mod net;
pub mod observation;
pub mod report;
pub mod servers;
pub mod stop;
pub mod store;
pub mod sweep;
pub mod sys;
pub mod sysinfo;
pub mod warning;
