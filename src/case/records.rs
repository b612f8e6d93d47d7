//! Parameters of the in-memory record store workload (`iopath net records`): a server holds a
//! table of fixed-size records and answers each request naming N record ids with those N
//! records, sent in one of four ways.

use super::{format_bytes, Align, NetParams};
use serde::{Deserialize, Serialize};

/// How the server hands the N records of a response to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum RecordsMode {
    /// memcpy the N records into one transmit buffer, then send() it.
    CopyOut,
    /// sendmsg() with one iovec per record, pointing into the table in place.
    Gather,
    /// sendmsg(MSG_ZEROCOPY) with one iovec per record: the kernel pins the table's pages.
    ZeroCopy,
    /// io_uring IORING_OP_SENDMSG_ZC with one iovec per record.
    UringZc,
}

impl RecordsMode {
    pub const ALL: [RecordsMode; 4] = [
        RecordsMode::CopyOut,
        RecordsMode::Gather,
        RecordsMode::ZeroCopy,
        RecordsMode::UringZc,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RecordsMode::CopyOut => "copy-out",
            RecordsMode::Gather => "gather",
            RecordsMode::ZeroCopy => "zero-copy",
            RecordsMode::UringZc => "uring-zc",
        }
    }

    /// Whether the kernel is asked to send the table's pages without copying them.
    pub fn is_zero_copy(self) -> bool {
        matches!(self, RecordsMode::ZeroCopy | RecordsMode::UringZc)
    }
}

crate::choice::named_choices!(RecordsMode, "mode");

/// Which record ids a client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Pick {
    /// Uniformly random over the whole table: most records come from DRAM, not the cache.
    Random,
    /// Uniformly random over the first HOT_SET_BYTES of the table: a set that stays cached.
    Hot,
}

/// The part of the table `--pick hot` draws from: small enough for any L2 cache.
pub const HOT_SET_BYTES: u64 = 256 << 10;

impl Pick {
    pub const ALL: [Pick; 2] = [Pick::Random, Pick::Hot];

    pub fn as_str(self) -> &'static str {
        match self {
            Pick::Random => "random",
            Pick::Hot => "hot",
        }
    }
}

crate::choice::named_choices!(Pick, "pick");

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RecordsCase {
    pub mode: RecordsMode,
    /// Bytes per record (R).
    pub record_size: u64,
    /// Records per response (N).
    pub records: usize,
    /// Bytes of the server's table (a whole number of records).
    pub table_bytes: u64,
    pub pick: Pick,
    /// Requests each client keeps in flight on its connection.
    pub outstanding: usize,
    /// Threads, window, CPUs, verify, endpoint, perf: flat keys of the JSON.
    #[serde(flatten)]
    pub net: NetParams,
    /// Run the alias probe before the window (`--prove-copies`). Left out of the key when
    /// false, like the stream's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prove_copies: bool,
    /// Where the table and the response buffers start (`--align`). Left out of the JSON when
    /// `malloc`, what a case stored before the option reads as, so those keys are unchanged.
    #[serde(
        default = "Align::before_the_option",
        skip_serializing_if = "Align::is_before_the_option"
    )]
    pub align: Align,
}

impl RecordsCase {
    /// Payload bytes of one response.
    pub fn response_bytes(&self) -> u64 {
        self.record_size * self.records as u64
    }

    /// Records the table holds.
    pub fn table_records(&self) -> u64 {
        self.table_bytes / self.record_size.max(1)
    }

    pub fn label(&self) -> String {
        let label = format!(
            "{} {}x{} o{} t{}",
            self.mode,
            self.records,
            format_bytes(self.record_size),
            self.outstanding,
            self.net.threads
        );
        if self.align == Align::Misaligned {
            label + " misaligned"
        } else {
            label
        }
    }

    pub fn params(&self) -> Vec<(&'static str, String)> {
        let mut params = vec![
            ("mode", self.mode.to_string()),
            ("record_size_bytes", self.record_size.to_string()),
            ("records", self.records.to_string()),
            ("table_bytes", self.table_bytes.to_string()),
            ("pick", self.pick.to_string()),
            ("outstanding", self.outstanding.to_string()),
            ("threads", self.net.threads.to_string()),
        ];
        params.extend(self.net.window_params());
        params.extend([
            ("prove_copies", self.prove_copies.to_string()),
            ("align", self.align.to_string()),
        ]);
        params
    }
}

impl super::Workload for RecordsCase {
    fn kind(&self) -> &'static str {
        "net-records"
    }

    fn label(&self) -> String {
        RecordsCase::label(self)
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        RecordsCase::params(self)
    }

    /// Filling the table takes about a second per GiB.
    fn planned_seconds(&self) -> f64 {
        self.net.session_seconds() + 0.05 + self.table_bytes as f64 / 1e9
    }

    fn window_seconds(&self) -> f64 {
        self.net.session_seconds()
    }

    fn pinning(&self) -> super::Pinning<'_> {
        self.net.pinning()
    }

    fn headline(&self) -> super::Headline {
        super::Headline::system(crate::observation::names::RESPONSES_PER_S, "responses/s", true)
    }

    fn contest(&self) -> Option<super::Contest> {
        Some(super::Contest {
            group: format!(
                "net records, {} records, {} outstanding, {}",
                format_bytes(self.record_size),
                self.outstanding,
                super::workload::count(self.net.threads, "thread")
            ),
            contender: self.mode.to_string(),
            x: self.records as u64,
            x_text: super::workload::count(self.records, "record"),
            contenders_are: "mode",
            axis: "size",
            everywhere: "every load",
            best_word: "best",
        })
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Case, Endpoint};

    #[test]
    fn modes_and_picks_parse_and_round_trip_through_json() {
        for m in RecordsMode::ALL {
            assert_eq!(m.as_str().parse::<RecordsMode>().unwrap(), m);
        }
        assert!("two-copy"
            .parse::<RecordsMode>()
            .unwrap_err()
            .contains("accepted: copy-out"));
        assert_eq!("hot".parse::<Pick>().unwrap(), Pick::Hot);
        let case = Case::NetRecords(RecordsCase {
            mode: RecordsMode::ZeroCopy,
            record_size: 128,
            records: 16,
            table_bytes: 1 << 20,
            pick: Pick::Random,
            outstanding: 8,
            net: NetParams {
                duration_ms: 1000,
                warmup_ms: 100,
                verify: true,
                endpoint: Endpoint::Netns {
                    port: 0,
                    sizes: Default::default(),
                    ipv6: false,
                },
                ..NetParams::for_test()
            },
            prove_copies: false,
            align: crate::case::Align::Page,
        });
        let text = case.key();
        assert!(text.contains(r#""workload":"net-records""#), "{text}");
        assert!(text.contains(r#""mode":"zero-copy""#), "{text}");
        assert_eq!(serde_json::from_str::<Case>(&text).unwrap(), case);
        assert_eq!(case.label(), "zero-copy 16x128B o8 t1");
    }
}
