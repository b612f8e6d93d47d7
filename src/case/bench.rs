//! The OS microbenchmarks a micro case can run (`iopath micro` lists them).

use serde::{Deserialize, Serialize};
use std::fmt;

/// One microbenchmark. Serialises as its name (`memlat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Bench {
    Timer,
    Call,
    Syscall,
    Proc,
    Thread,
    Ctxswitch,
    Memlat,
    Membw,
    Pagefault,
    Tcp,
    Fs,
}

impl Bench {
    /// Every benchmark, in the order `micro all` runs them.
    pub const ALL: [Bench; 11] = [
        Bench::Timer,
        Bench::Call,
        Bench::Syscall,
        Bench::Proc,
        Bench::Thread,
        Bench::Ctxswitch,
        Bench::Memlat,
        Bench::Membw,
        Bench::Pagefault,
        Bench::Tcp,
        Bench::Fs,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Bench::Timer => "timer",
            Bench::Call => "call",
            Bench::Syscall => "syscall",
            Bench::Proc => "proc",
            Bench::Thread => "thread",
            Bench::Ctxswitch => "ctxswitch",
            Bench::Memlat => "memlat",
            Bench::Membw => "membw",
            Bench::Pagefault => "pagefault",
            Bench::Tcp => "tcp",
            Bench::Fs => "fs",
        }
    }

    /// One line for `iopath micro`'s list: what it measures.
    pub const fn description(self) -> &'static str {
        match self {
            Bench::Timer => "clock read cost and resolution, loop overhead, TSC frequency check",
            Bench::Call => "procedure call with 0..7 arguments",
            Bench::Syscall => "getppid (raw syscall), getcwd, 1-byte read of /dev/zero",
            Bench::Proc => "fork+exit+wait (from iopath and from a minimal helper), fork+exec+wait, posix_spawn+wait",
            Bench::Thread => {
                "thread create+join (Rust std::thread and bare pthread_create), time until a new thread runs"
            }
            Bench::Ctxswitch => "process pipe ping-pong and thread futex ping-pong, pinned and unpinned",
            Bench::Memlat => "pointer-chase latency over working sets, cache levels detected",
            Bench::Membw => "memory read, write and copy bandwidth: whole buffers >= 4x the LLC, and cache-resident",
            Bench::Pagefault => "minor (anonymous) and major (evicted file) page faults",
            Bench::Tcp => "loopback TCP round trip, bandwidth, connect, teardown",
            Bench::Fs => "O_DIRECT 4 KiB sequential/random reads, file cache size, read contention",
        }
    }

    /// Its variants (the `variant` option), empty when it has one figure per size instead.
    pub const fn variants(self) -> &'static [&'static str] {
        match self {
            Bench::Syscall => &["getppid", "getcwd", "read_dev_zero"],
            Bench::Proc => &["fork_exit", "fork_exit_minimal", "fork_exec", "posix_spawn"],
            Bench::Thread => &["create_join", "pthread_create_join", "start_latency"],
            Bench::Ctxswitch => &["pipe_procs", "futex_threads"],
            Bench::Membw => &["read", "write", "copy", "write_cached", "copy_cached"],
            Bench::Pagefault => &["minor", "major"],
            Bench::Tcp => &["rtt", "bandwidth", "connect", "teardown"],
            Bench::Fs => &["seq_read", "rand_read", "cache_read", "contention"],
            Bench::Timer | Bench::Call | Bench::Memlat => &[],
        }
    }

    /// The names, comma-separated, for messages that say what is accepted.
    pub fn names() -> String {
        Bench::ALL.map(Bench::name).join(", ")
    }
}

impl fmt::Display for Bench {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Bench {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        Bench::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| format!("unknown benchmark '{s}' (accepted: {})", Bench::names()))
    }
}

impl Serialize for Bench {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Bench {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_as_text() {
        for b in Bench::ALL {
            assert_eq!(b.name().parse::<Bench>(), Ok(b));
            assert_eq!(serde_json::to_string(&b).unwrap(), format!("\"{b}\""));
            assert!(!b.description().is_empty());
        }
        assert!("bogus".parse::<Bench>().unwrap_err().contains("memlat"));
    }
}
