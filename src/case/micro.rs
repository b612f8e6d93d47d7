//! Parameters of one OS microbenchmark point (`iopath micro`): one case is one figure, e.g.
//! memlat at one working-set size, so the store and the report can hold curves.

use super::Bench;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MicroCase {
    /// The benchmark (serialised as its name, as `iopath micro` lists it).
    pub bench: Bench,
    /// Its options as (name, value) text pairs, sorted by name.
    pub options: Vec<(String, String)>,
}

/// Option names that get their own column in tables and CSV (in this order).
const OPTION_COLUMNS: [&str; 12] = [
    "variant",
    "args",
    "pinned",
    "size_bytes",
    "stride_bytes",
    "hugepages",
    "file_bytes",
    "procs",
    "program",
    "dir",
    "samples",
    "quick",
];

impl MicroCase {
    /// A case with its options sorted by name (so equal cases have equal keys).
    pub fn new(bench: Bench, options: Vec<(&str, String)>) -> MicroCase {
        let mut options: Vec<(String, String)> = options.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        options.sort();
        MicroCase { bench, options }
    }

    /// The value of one option, if set.
    pub fn option(&self, name: &str) -> Option<&str> {
        self.options.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn label(&self) -> String {
        let opts: Vec<String> = self
            .options
            .iter()
            .filter(|(k, _)| k != "samples" && k != "quick" && k != "dir")
            .map(|(k, v)| match (k.strip_suffix("_bytes"), v.parse::<u64>()) {
                // Sizes read as sizes in every label: size=16KiB, not size_bytes=16384.
                (Some(name), Ok(bytes)) => format!("{name}={}", crate::format::format_bytes(bytes)),
                _ => format!("{k}={v}"),
            })
            .collect();
        if opts.is_empty() {
            self.bench.to_string()
        } else {
            format!("{} {}", self.bench, opts.join(" "))
        }
    }

    /// The figure a user runs this case for — a time per operation or a bandwidth, never a
    /// setting such as the file system's magic number — and whether higher is better. The
    /// headline of the terminal table, the report, a run's summary and `compare`.
    pub fn headline(&self) -> (&'static str, bool) {
        let h = self.headline_metric();
        (h.name, h.higher_is_better)
    }

    /// `headline` with its role and unit (`Workload::headline`).
    pub fn headline_metric(&self) -> super::Headline {
        use crate::observation::names::*;
        let variant = self.option("variant").unwrap_or_default();
        let (name, unit, higher_is_better) = match (self.bench, variant) {
            (Bench::Timer, _) => (TIMER_READ_NS, "ns", false),
            (Bench::Call, _) | (Bench::Syscall, _) => (TIME_PER_CALL_NS, "ns", false),
            (Bench::Proc, _) => (TIME_PER_PROCESS_US, "us", false),
            (Bench::Thread, "start_latency") => (THREAD_START_LATENCY_US, "us", false),
            (Bench::Thread, _) => (TIME_PER_THREAD_US, "us", false),
            (Bench::Ctxswitch, _) => (TIME_PER_SWITCH_NS, "ns", false),
            (Bench::Memlat, _) => (LATENCY_NS, "ns", false),
            (Bench::Membw, _) => (BANDWIDTH_GIB_S, "GiB/s", true),
            (Bench::Pagefault, "major") => (TIME_PER_FAULT_US, "us", false),
            (Bench::Pagefault, _) => (TIME_PER_FAULT_NS, "ns", false),
            (Bench::Tcp, "bandwidth") => (BANDWIDTH_GBPS, "Gbit/s", true),
            (Bench::Tcp, "connect") => (CONNECT_TIME_US, "us", false),
            (Bench::Tcp, "teardown") => (TEARDOWN_TIME_US, "us", false),
            (Bench::Tcp, _) => (ROUND_TRIP_US, "us", false),
            (Bench::Fs, "cache_read") => (READ_TIME_PER_MIB_US, "us", false),
            (Bench::Fs, "contention") => (BANDWIDTH_TOTAL_MIB_S, "MiB/s", true),
            (Bench::Fs, _) => (TIME_PER_READ_US, "us", false),
        };
        super::Headline::system(name, unit, higher_is_better)
    }

    /// `bench`, then one column per known option (empty when unset), then any other options.
    pub fn params(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![("bench", self.bench.to_string())];
        for name in OPTION_COLUMNS {
            out.push((name, self.option(name).unwrap_or_default().to_string()));
        }
        let other: Vec<String> = self
            .options
            .iter()
            .filter(|(k, _)| !OPTION_COLUMNS.contains(&k.as_str()))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        out.push(("other_options", other.join(" ")));
        out
    }
}

impl super::Workload for MicroCase {
    fn kind(&self) -> &'static str {
        "micro"
    }

    fn label(&self) -> String {
        MicroCase::label(self)
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        MicroCase::params(self)
    }

    fn planned_seconds(&self) -> f64 {
        1.0
    }

    fn duration_known(&self) -> bool {
        false
    }

    fn headline(&self) -> super::Headline {
        self.headline_metric()
    }

    fn kind_headline(&self) -> Option<&'static str> {
        None
    }

    fn samples_within_repetition(&self) -> bool {
        true
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_sorted_and_labelled() {
        let c = MicroCase::new(
            Bench::Memlat,
            vec![("stride_bytes", "64".into()), ("size_bytes", "16384".into())],
        );
        assert_eq!(c.options[0].0, "size_bytes");
        assert_eq!(c.label(), "memlat size=16KiB stride=64B");
        assert_eq!(c.option("stride_bytes"), Some("64"));
        let params = c.params();
        assert!(params.contains(&("size_bytes", "16384".to_string())));
        let json = r#"{"bench":"memlat","options":[["size_bytes","16384"],["stride_bytes","64"]]}"#;
        assert_eq!(serde_json::to_string(&c).unwrap(), json);
        assert_eq!(serde_json::from_str::<MicroCase>(json).unwrap(), c);
    }
}
