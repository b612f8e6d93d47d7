//! The only place in the crate with `unsafe`: thin wrappers over system calls and CPU
//! instructions that the standard library, nix and socket2 do not cover. Every unsafe block
//! carries a `// SAFETY:` comment; everything exported from here is a safe function.
#![allow(unsafe_code)]

pub mod affinity;
pub mod aligned;
pub mod bpf;
pub mod cache;
pub mod ethtool;
pub mod futex;
pub mod input;
pub mod mem;
pub mod multiplex;
pub mod net;
pub mod netns;
pub mod process;
pub mod procfs;
pub mod rtnetlink;
pub mod rusage;
pub mod rx_zerocopy;
pub mod signal;
pub mod splice;
pub mod statfs;
pub mod syscall;
pub mod tcpinfo;
pub mod tether;
pub mod thread;
pub mod tracepoint;
pub mod tsc;
pub mod udp;
pub mod uncore;
pub mod uring;
pub mod uring_gather_zc;
pub mod uring_send;
pub mod zerocopy;
