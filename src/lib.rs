//! iopath: measures what moving data through a Linux machine costs.
//!
//! Layers, ground first (imports only run downwards): `sys` → `measure` (+ `case`,
//! `observation`, `format`) → workloads (`net`, `servers`, `micro`) → `fleet` → `sweep` → `store` → `report` → `cli`.
#![deny(unsafe_code)]

pub mod case;
pub mod cli;
pub mod fake;
pub mod fleet;
pub mod format;
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
