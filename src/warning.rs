//! Warnings: what the user should know about a result, each of a kind that says what to do
//! about it (after hyperfine's `Warnings`), plus the detail text of this occurrence. Reports
//! group and count them by kind, never by comparing their text.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a warning is about. Serialised as its kebab-case name (`counters-restricted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WarningKind {
    /// perf counters exclude the kernel (perf_event_paranoid, not root).
    CountersRestricted,
    /// No hardware PMU: cycles are estimates, cache misses missing.
    NoHardwareCounters,
    /// Threads (or one side) left to the scheduler.
    Unpinned,
    /// Threads moved between CPUs inside the window.
    Migrated,
    /// Threads or requests that got no service (no CPU, left waiting, late to report).
    Starved,
    /// A measured thread waited on a CPU run queue for more than a few percent of the window.
    Contended,
    /// The kernel copied MSG_ZEROCOPY / SEND_ZC data anyway.
    ZeroCopyCopied,
    /// The alias probe found the kernel reading the sender's bytes after the send call
    /// returned (sendfile, splice): a buffer reused too early corrupts the data.
    ByReference,
    /// The file-descriptor limit was raised, or could not be raised enough.
    FdLimit,
    /// The kernel refuses a feature the case needs (io_uring disabled...).
    Unsupported,
    /// Requests failed (connect errors, timeouts, protocol or I/O errors).
    RequestErrors,
    /// The cell's figures come from a minority of its clients or connections: most of them
    /// failed or got no reply inside the window (servers: 999 of 1,000 clients timed out).
    MinorityServed,
    /// A property of the server model that shapes its numbers (iterative, pool sharing).
    ModelLimit,
    /// `--verify` adds its fill-and-check work to the figures.
    VerifyCost,
    /// Something that must not happen did (corrupt data, completions matching no send).
    Anomaly,
    /// The method asked for was not available and another was used (O_DIRECT, huge pages).
    Substituted,
    /// A buffer small enough for the caches to inflate the figure.
    CacheResident,
    /// Fewer major page faults than pages (readahead, fault-around).
    PartialFaults,
    /// A figure below what the subtracted overheads let us resolve.
    BelowResolution,
    /// Samples that vary a lot.
    Noisy,
    /// Datagrams the sender sent that never arrived (UDP, unpaced).
    DatagramsLost,
    /// The cell failed; its error.
    CellFailed,
    /// Not classified: text from an older iopath, or from a remote peer.
    Other,
}

impl WarningKind {
    pub const ALL: [WarningKind; 23] = [
        WarningKind::CountersRestricted,
        WarningKind::NoHardwareCounters,
        WarningKind::Unpinned,
        WarningKind::Migrated,
        WarningKind::Starved,
        WarningKind::Contended,
        WarningKind::ZeroCopyCopied,
        WarningKind::ByReference,
        WarningKind::FdLimit,
        WarningKind::Unsupported,
        WarningKind::RequestErrors,
        WarningKind::MinorityServed,
        WarningKind::ModelLimit,
        WarningKind::VerifyCost,
        WarningKind::Anomaly,
        WarningKind::Substituted,
        WarningKind::CacheResident,
        WarningKind::PartialFaults,
        WarningKind::BelowResolution,
        WarningKind::Noisy,
        WarningKind::DatagramsLost,
        WarningKind::CellFailed,
        WarningKind::Other,
    ];

    /// The name stored and printed in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            WarningKind::CountersRestricted => "counters-restricted",
            WarningKind::NoHardwareCounters => "no-hardware-counters",
            WarningKind::Unpinned => "unpinned",
            WarningKind::Migrated => "migrated",
            WarningKind::Starved => "starved",
            WarningKind::Contended => "contended",
            WarningKind::ZeroCopyCopied => "zero-copy-copied",
            WarningKind::ByReference => "by-reference",
            WarningKind::FdLimit => "fd-limit",
            WarningKind::Unsupported => "unsupported",
            WarningKind::RequestErrors => "request-errors",
            WarningKind::MinorityServed => "minority-served",
            WarningKind::ModelLimit => "model-limit",
            WarningKind::VerifyCost => "verify-cost",
            WarningKind::Anomaly => "anomaly",
            WarningKind::Substituted => "substituted",
            WarningKind::CacheResident => "cache-resident",
            WarningKind::PartialFaults => "partial-faults",
            WarningKind::BelowResolution => "below-resolution",
            WarningKind::Noisy => "noisy",
            WarningKind::DatagramsLost => "datagrams-lost",
            WarningKind::CellFailed => "cell-failed",
            WarningKind::Other => "other",
        }
    }

    /// A heading for a group of warnings of this kind.
    pub fn title(self) -> &'static str {
        match self {
            WarningKind::CountersRestricted => "Counters exclude the kernel",
            WarningKind::NoHardwareCounters => "No hardware counters",
            WarningKind::Unpinned => "Threads not pinned",
            WarningKind::Migrated => "Threads migrated between CPUs",
            WarningKind::Starved => "Threads or requests starved",
            WarningKind::Contended => "Threads waited for a CPU",
            WarningKind::ZeroCopyCopied => "Zero-copy data copied by the kernel",
            WarningKind::ByReference => "Sent by reference",
            WarningKind::FdLimit => "File-descriptor limit",
            WarningKind::Unsupported => "Not supported on this machine",
            WarningKind::RequestErrors => "Requests failed",
            WarningKind::MinorityServed => "Figures from a minority of clients",
            WarningKind::ModelLimit => "Limits of the server model",
            WarningKind::VerifyCost => "Verification included in the figures",
            WarningKind::Anomaly => "Unexpected behaviour",
            WarningKind::Substituted => "Another method was used",
            WarningKind::CacheResident => "Buffers fit in the caches",
            WarningKind::PartialFaults => "Not every page took a major fault",
            WarningKind::BelowResolution => "Too small to resolve",
            WarningKind::Noisy => "Noisy samples",
            WarningKind::DatagramsLost => "Datagrams lost",
            WarningKind::CellFailed => "Cells failed",
            WarningKind::Other => "Workload warning",
        }
    }

    /// What the user can do about it (empty for `Other`, whose text is all there is).
    pub fn advice(self) -> &'static str {
        match self {
            WarningKind::CountersRestricted => {
                "run as root or set kernel.perf_event_paranoid=1 to count context switches and kernel time"
            }
            WarningKind::NoHardwareCounters => {
                "cycles are estimated from CPU time; run on bare metal (or a VM with a virtual PMU) for counted cycles and cache misses"
            }
            WarningKind::Unpinned => "pin both sides (--client-cpus and --server-cpus; micro: --pinned yes) for figures that repeat",
            WarningKind::Migrated => "pin threads to CPUs and keep other load off them",
            WarningKind::Starved => "use no more busy threads than CPUs, or read the tail latencies as the cost of waiting",
            WarningKind::Contended => "keep other load off the machine (see /proc/loadavg) and use no more busy threads than CPUs",
            WarningKind::ZeroCopyCopied => {
                "local delivery (loopback, veth) copies the pages: measure between two hosts to see zero-copy save the copy"
            }
            WarningKind::ByReference => {
                "never rewrite a buffer the kernel may still read: wait for a completion where the mode has one; sendfile and splice have none, so keep a ring larger than the socket buffers (iopath does) or copy"
            }
            WarningKind::FdLimit => "raise the limit (ulimit -n, or ulimit -Hn as root) or use fewer clients",
            WarningKind::Unsupported => {
                "enable the feature (e.g. sysctl kernel.io_uring_disabled=0) or leave that case out"
            }
            WarningKind::RequestErrors => "see the error counts; use fewer clients or a longer timeout",
            WarningKind::MinorityServed => {
                "read its rate and percentiles as those of the few clients served, not of the load asked for (charts leave it out); use fewer clients or another model"
            }
            WarningKind::ModelLimit => "expected of this model: compare its rows with that in mind",
            WarningKind::VerifyCost => "leave --verify off for throughput and CPU figures",
            WarningKind::Anomaly => "rerun; if it repeats, report it with the results database",
            WarningKind::Substituted => "use a setting or filesystem that supports the method (e.g. --dir on ext4 or xfs)",
            WarningKind::CacheResident => "use a buffer of at least 4x the last-level cache (--size; net records: --table)",
            WarningKind::PartialFaults => "the time is per fault taken; a larger file or no readahead faults more pages",
            WarningKind::BelowResolution => "nothing to fix: the operation costs less than the overheads subtracted",
            WarningKind::Noisy => "rerun on a quiet machine or with more --samples",
            WarningKind::DatagramsLost => "pace the sender with --rate (or a larger --rcvbuf) to measure without loss",
            WarningKind::CellFailed => "see the error; `iopath sweep --resume` retries failed cells",
            WarningKind::Other => "",
        }
    }
}

impl fmt::Display for WarningKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for WarningKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A kind this iopath does not know (written by a newer one) reads as `Other`.
impl<'de> Deserialize<'de> for WarningKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Ok(WarningKind::ALL
            .into_iter()
            .find(|k| k.as_str() == name)
            .unwrap_or(WarningKind::Other))
    }
}

/// One warning: its kind and the text of this occurrence (which the user reads; it prints as
/// just that text). Serialised as `{"kind": "unpinned", "text": "..."}`; a plain string (as
/// older versions stored) reads as kind `other`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Warning {
    pub kind: WarningKind,
    pub text: String,
}

impl Warning {
    pub fn new(kind: WarningKind, text: impl Into<String>) -> Warning {
        Warning {
            kind,
            text: text.into(),
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Warning {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Typed { kind: WarningKind, text: String },
            Text(String),
        }
        Ok(match Stored::deserialize(d)? {
            Stored::Typed { kind, text } => Warning { kind, text },
            Stored::Text(text) => Warning::new(WarningKind::Other, text),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_every_one_but_other_gives_advice() {
        for k in WarningKind::ALL {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(serde_json::from_str::<WarningKind>(&json).unwrap(), k);
            assert!(!k.title().is_empty());
            assert_eq!(k.advice().is_empty(), k == WarningKind::Other, "{k}");
        }
        assert_eq!(
            serde_json::from_str::<WarningKind>("\"from-the-future\"").unwrap(),
            WarningKind::Other
        );
    }

    #[test]
    fn typed_warnings_round_trip_and_old_plain_strings_read_as_other() {
        let w = Warning::new(WarningKind::Unpinned, "threads were not pinned");
        let json = serde_json::to_string(&w).unwrap();
        assert_eq!(json, r#"{"kind":"unpinned","text":"threads were not pinned"}"#);
        assert_eq!(serde_json::from_str::<Warning>(&json).unwrap(), w);
        assert_eq!(w.to_string(), "threads were not pinned");
        // warnings_json of a row written before warnings had kinds.
        let old: Vec<Warning> =
            serde_json::from_str(r#"["3 threads migrated between CPUs during the window"]"#).unwrap();
        assert_eq!(old[0].kind, WarningKind::Other);
        assert_eq!(old[0].text, "3 threads migrated between CPUs during the window");
    }
}
