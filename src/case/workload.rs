//! What every workload's case says about itself, so the report and the CLI ask the case
//! instead of matching on `Case`: its kind and label, its parameters, how long it runs, where
//! its threads are pinned, its headline metric, and how the findings rank its cells.
//!
//! `Case::as_workload` is the one place a `Case` is matched to reach its workload; code that
//! needs one workload's own fields (a chart only the stream draws) asks `Case::get::<T>()`.

use super::CpuList;
use crate::observation::Role;
use std::any::Any;
use std::time::Duration;

/// The longest latency windows and warm-ups of `window_seconds` in all can record, None
/// without a window. Each latency is timed from a send inside them to an answer read while
/// the window is open, so it is at most their length; twice that and a second, for a thread
/// descheduled between reading the window and the clock, keeps the bound certain.
pub fn latency_bound(window_seconds: f64) -> Option<Duration> {
    (window_seconds > 0.0)
        .then(|| Duration::try_from_secs_f64(2.0 * window_seconds + 1.0).ok())
        .flatten()
}

/// The metric that answers "how fast" for a case, and whether higher is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headline {
    pub name: &'static str,
    pub role: Role,
    /// Its unit as the producer writes it (`Gbit/s`, `txn/s`, `ns`).
    pub unit: &'static str,
    pub higher_is_better: bool,
}

impl Headline {
    /// A headline of role system, the role every workload's headline has.
    pub const fn system(name: &'static str, unit: &'static str, higher_is_better: bool) -> Headline {
        Headline {
            name,
            role: Role::System,
            unit,
            higher_is_better,
        }
    }
}

/// Where a case stands in the findings' contests: its group (the cases compared with each
/// other), the contender it is (a send mode, a server model), its point on the x axis, and
/// the words the findings use for this workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contest {
    /// `net stream, 1 thread`: cases of one group are ranked against each other.
    pub group: String,
    /// `one-copy`, `epoll`.
    pub contender: String,
    /// The point the contenders are compared at (message size, clients, records).
    pub x: u64,
    pub x_text: String,
    /// What the contenders are: `mode` or `model`.
    pub contenders_are: &'static str,
    /// What the x axis is: `size` or `load`.
    pub axis: &'static str,
    /// `every size` or `every load`: where a contender wins everywhere.
    pub everywhere: &'static str,
    /// The word for the winner when higher is better: `fastest` or `best`.
    pub best_word: &'static str,
}

/// The client and server CPU lists a case pins its threads to (None: not pinned).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pinning<'a> {
    pub client: Option<&'a CpuList>,
    pub server: Option<&'a CpuList>,
}

impl Pinning<'_> {
    pub fn any(&self) -> bool {
        self.client.is_some() || self.server.is_some()
    }
}

/// One workload's case. Implemented by every case type (`StreamCase`, `RrCase`, `RecordsCase`,
/// `ServersCase`, `MicroCase`, `FakeCase`); a method with a default is something only some
/// workloads have.
pub trait Workload: Any + std::fmt::Debug {
    /// The workload's name as the CLI spells it (`net-stream`, `net-crr`, `servers`, `micro`).
    /// The CLI looks up the table renderer and the stored-case check by it (`cli/workloads.rs`).
    fn kind(&self) -> &'static str;

    /// A short human label, unique within a sweep grid (e.g. `one-copy 64KiB t2`).
    fn label(&self) -> String;

    /// The parameters as flat (name, value text) pairs, for table, report and CSV columns.
    fn params(&self) -> Vec<(&'static str, String)>;

    /// The name of this case's series in a history tool (Otava, Bencher): what stays the same
    /// from one run of a plan to the next, so a series continues. The label, unless it carries
    /// where the schedule placed the case (a fleet cell's round, reshuffled every run).
    fn series(&self) -> String {
        self.label()
    }

    /// The hosts the case measured between, when not the machine that stored the run (a fleet
    /// cell's `SOURCE -> DESTINATION`; the controller only ran the schedule).
    fn hosts(&self) -> Option<String> {
        None
    }

    /// How many windows one cell runs (rr, crr and servers with counters: a latency pass and a
    /// counting pass, docs/methodology.md).
    fn passes(&self) -> u32 {
        1
    }

    /// Roughly how long one cell takes, in seconds, set-up included (the progress ETA).
    fn planned_seconds(&self) -> f64;

    /// Whether `planned_seconds` is known before the cell runs; a microbenchmark's is not (a
    /// run's announced estimate counts such cells instead of guessing them).
    fn duration_known(&self) -> bool {
        true
    }

    /// Seconds of measured windows and warm-ups one cell asks for (0 for a workload without
    /// a window of its own).
    fn window_seconds(&self) -> f64 {
        0.0
    }

    /// The longest latency a cell of this case can record ([`latency_bound`] of its windows):
    /// a stored or received latency above it is impossible (`observation::out_of_order`).
    fn longest_latency(&self) -> Option<Duration> {
        latency_bound(self.window_seconds())
    }

    /// The parameters that only say where in its run's schedule a cell ran (a fleet cell's
    /// round, which the seed decides), not what it measured: `compare` leaves them out when it
    /// matches cells of two runs.
    fn schedule_params(&self) -> &'static [&'static str] {
        &[]
    }

    /// The CPUs its threads are pinned to.
    fn pinning(&self) -> Pinning<'_> {
        Pinning::default()
    }

    /// The metric that answers "how fast".
    fn headline(&self) -> Headline;

    /// The headline every case of this kind shares, for a title over many cases; None when it
    /// depends on the parameters (a microbenchmark's is its bench's).
    fn kind_headline(&self) -> Option<&'static str> {
        Some(self.headline().name)
    }

    /// Where the findings rank it; None when it has nothing to be ranked against (a
    /// microbenchmark has one contender per run).
    fn contest(&self) -> Option<Contest> {
        None
    }

    /// A figure said among the findings when its median passes a bound (a fraction shown as
    /// a percentage); None for most workloads.
    fn alarm(&self) -> Option<Alarm> {
        None
    }

    /// Whether it sends by reference: sendfile and splice without --verify hand the kernel the
    /// same message's pages again and again, with nothing to say when reusing them is safe.
    fn sends_by_reference(&self) -> bool {
        false
    }

    /// Whether its cells are kept in the charts when their figures come from a minority of
    /// their clients (servers: its own charts name those cells and decide).
    fn charts_judge_minority(&self) -> bool {
        false
    }

    /// Whether one repetition already takes many samples (a microbenchmark): the advice for a
    /// noisy cell is more repetitions or less load, not pinning or a longer window.
    fn samples_within_repetition(&self) -> bool {
        false
    }

    /// Itself, for `Case::get`.
    fn as_any(&self) -> &dyn Any;
}

/// The contest of a request/response workload (`net rr`/`net crr`, `net udp-rr`): the modes
/// (`contender`, the case's path) race along the request size, in groups of the same
/// response size, requests in flight, threads and offered rate.
pub(super) fn request_response_contest(
    command: &str,
    (request_size, response_size): (u64, u64),
    inflight: usize,
    threads: usize,
    rate: Option<u64>,
    contender: String,
) -> Contest {
    Contest {
        group: format!(
            "{command}, {} responses, {inflight} in flight, {}{}",
            super::format_bytes(response_size),
            count(threads, "thread"),
            rate.map_or(String::new(), |rate| format!(", {rate}/s offered"))
        ),
        contender,
        x: request_size,
        x_text: format!("{} requests", super::format_bytes(request_size)),
        contenders_are: "mode",
        axis: "size",
        everywhere: "every size",
        best_word: "fastest",
    }
}

/// A figure that, past a bound, changes what the headline means and is said among the
/// findings, not left to a caveat: a UDP stream that lost most of its datagrams measured what
/// arrived, not what the sender can do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Alarm {
    pub metric: &'static str,
    pub role: crate::observation::Role,
    /// The median at or above which the finding is said.
    pub at_least: f64,
    /// What it is, after the contender and the percentage: `of its datagrams lost`.
    pub what: &'static str,
    /// Why it matters and what to do.
    pub advice: &'static str,
}

/// `1 thread`, `2 threads`.
pub(super) fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{
        Bench, Case, FakeBehaviour, FakeCase, MicroCase, Model, RecordsCase, Request, RrCase, ServersCase, StreamCase,
    };
    use crate::observation::names;

    fn case(json: &str) -> Case {
        serde_json::from_str(json).unwrap()
    }

    /// Each case answers as its workload: the kind is its JSON tag (crr says so), `get` finds
    /// only its own type, and what the report and the CLI used to match out of each variant
    /// (headline, pinning, passes, the findings' words) comes from the trait.
    #[test]
    fn every_case_answers_as_its_workload() {
        let stream = case(
            r#"{"workload":"net-stream","mode":"zero-copy","size":65536,"fields":8,"threads":2,"duration_ms":5000,"warmup_ms":1000,"client_cpus":[0,1],"server_cpus":null,"verify":false,"endpoint":{"kind":"loopback","port":0},"perf":true}"#,
        );
        let crr = case(
            r#"{"workload":"net-rr","kind":"crr","mode":"sendfile","request_size":64,"response_size":1024,"fields":1,"inflight":1,"threads":1,"rate":null,"duration_ms":100,"warmup_ms":0,"client_cpus":null,"server_cpus":null,"verify":false,"endpoint":{"kind":"loopback","port":0},"perf":true}"#,
        );
        let records = case(
            r#"{"workload":"net-records","mode":"zero-copy","record_size":128,"records":16,"table_bytes":1048576,"pick":"random","outstanding":8,"threads":1,"duration_ms":1000,"warmup_ms":100,"client_cpus":null,"server_cpus":null,"verify":true,"endpoint":{"kind":"netns","port":0},"perf":false}"#,
        );
        let servers = Case::Servers(ServersCase::new(Model::Epoll, Request::Echo(64), 1, 100));
        let micro = Case::Micro(MicroCase::new(Bench::Memlat, vec![("size_bytes", "16384".into())]));
        let fake = Case::Fake(FakeCase {
            index: 0,
            behaviour: FakeBehaviour::Sleep { ms: 250 },
        });

        let kinds: Vec<&str> = [&stream, &crr, &records, &servers, &micro, &fake]
            .iter()
            .map(|c| c.workload())
            .collect();
        assert_eq!(
            kinds,
            ["net-stream", "net-crr", "net-records", "servers", "micro", "fake"]
        );
        assert!(stream.get::<StreamCase>().is_some() && stream.get::<RrCase>().is_none());
        assert!(crr.get::<RrCase>().is_some() && crr.get::<StreamCase>().is_none());
        assert!(records.get::<RecordsCase>().is_some() && micro.get::<MicroCase>().is_some());
        assert!(fake.get::<FakeCase>().is_some() && fake.get::<ServersCase>().is_none());

        let w = stream.as_workload();
        assert_eq!(w.headline(), Headline::system(names::THROUGHPUT_GBPS, "Gbit/s", true));
        assert_eq!(w.pinning().client.map(|c| c.to_string()), Some("0-1".to_string()));
        assert!(w.pinning().any() && !w.sends_by_reference());
        let contest = w.contest().unwrap();
        assert_eq!(
            (
                contest.group.as_str(),
                contest.contender.as_str(),
                contest.x,
                contest.x_text.as_str()
            ),
            ("net stream, 2 threads", "zero-copy", 65536, "64KiB")
        );
        assert_eq!((contest.best_word, contest.everywhere), ("fastest", "every size"));

        // crr with counters runs two passes; sendfile without --verify sends by reference.
        let w = crr.as_workload();
        assert_eq!((w.passes(), w.planned_seconds()), (2, 0.4));
        assert!(w.sends_by_reference() && !w.pinning().any());
        assert_eq!(w.headline().name, names::TRANSACTIONS_PER_S);

        let w = records.as_workload();
        assert_eq!(w.contest().unwrap().x_text, "16 records");
        assert_eq!(
            (w.contest().unwrap().contenders_are, w.contest().unwrap().axis),
            ("mode", "size")
        );

        let w = servers.as_workload();
        assert!(w.charts_judge_minority() && w.passes() == 2);
        assert_eq!(w.contest().unwrap().x_text, "1 client");

        let w = micro.as_workload();
        assert!(w.contest().is_none() && w.samples_within_repetition() && !w.duration_known());
        assert_eq!((w.headline().name, w.headline().unit), (names::LATENCY_NS, "ns"));
        assert_eq!(w.kind_headline(), None);

        let w = fake.as_workload();
        assert_eq!(
            (w.planned_seconds(), w.kind_headline()),
            (0.25, Some(names::FAKE_VALUE))
        );
    }
}
