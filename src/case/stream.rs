//! Parameters of the network stream benchmark (`iopath net stream`).

use super::{format_bytes, Align, CpuList, NetParams};
use serde::{Deserialize, Serialize};

/// How a message of separately allocated fields is handed to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum CopyMode {
    /// Serialise the fields into one buffer in user space, then send() it.
    TwoCopy,
    /// sendmsg() with one iovec per field: the only copy is the kernel's.
    OneCopy,
    /// sendmsg(MSG_ZEROCOPY) with one iovec per field: the kernel pins the pages.
    ZeroCopy,
    /// io_uring SENDMSG with one iovec per field: one-copy's copies, io_uring's syscall model.
    Uring,
    /// io_uring SENDMSG_ZC with one iovec per field; a slot is reused after its notification.
    UringZc,
    /// The message's bytes staged in a file (page cache), sent with sendfile().
    Sendfile,
    /// vmsplice() the fields into a pipe, splice() the pipe into the socket.
    Splice,
}

impl CopyMode {
    pub const ALL: [CopyMode; 7] = [
        CopyMode::TwoCopy,
        CopyMode::OneCopy,
        CopyMode::ZeroCopy,
        CopyMode::Uring,
        CopyMode::UringZc,
        CopyMode::Sendfile,
        CopyMode::Splice,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CopyMode::TwoCopy => "two-copy",
            CopyMode::OneCopy => "one-copy",
            CopyMode::ZeroCopy => "zero-copy",
            CopyMode::Uring => "uring",
            CopyMode::UringZc => "uring-zc",
            CopyMode::Sendfile => "sendfile",
            CopyMode::Splice => "splice",
        }
    }
}

crate::choice::named_choices!(CopyMode, "mode");

/// How the receiving end takes a message back from the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum RxMode {
    /// recv() into one contiguous buffer (the fields are copied out of it only to verify).
    Copy,
    /// recvmsg() with one iovec per field: the kernel copies straight into the fields.
    Scatter,
    /// recv(MSG_TRUNC): the kernel discards the bytes without copying them anywhere, so the
    /// sender's cost is seen alone (iperf3 --skip-rx-copy). Nothing can be verified.
    Trunc,
    /// getsockopt(TCP_ZEROCOPY_RECEIVE): whole pages of the receive queue are mapped into a
    /// mmap of the socket; the rest (`recv_skip_hint`) is read with recv().
    Zerocopy,
}

impl RxMode {
    pub const ALL: [RxMode; 4] = [RxMode::Copy, RxMode::Scatter, RxMode::Trunc, RxMode::Zerocopy];

    pub fn as_str(self) -> &'static str {
        match self {
            RxMode::Copy => "copy",
            RxMode::Scatter => "scatter",
            RxMode::Trunc => "trunc",
            RxMode::Zerocopy => "zerocopy",
        }
    }

    /// The receive mode each send mode was paired with before receive modes were a choice:
    /// two-copy received into one buffer, the others scattered into the fields.
    pub fn paired_with(mode: CopyMode) -> RxMode {
        match mode {
            CopyMode::TwoCopy => RxMode::Copy,
            _ => RxMode::Scatter,
        }
    }
}

crate::choice::named_choices!(RxMode, "receive mode");

/// When the kernel wakes a receiver that waits for the rest of a message (`--rx-wake`).
/// Each wake-up is paid by the sender: its softirq delivers the bytes and wakes the reader,
/// across CPUs an interrupt to the other core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum RxWake {
    /// SO_RCVLOWAT set to the message size: the reader is woken once the whole message is
    /// queued (or the connection ends), as an application that knows its framing asks.
    Message,
    /// On any queued data: the reader takes what is there and waits again for the rest, as
    /// iperf3's and netperf's receivers do.
    Data,
}

impl RxWake {
    pub const ALL: [RxWake; 2] = [RxWake::Message, RxWake::Data];

    pub fn as_str(self) -> &'static str {
        match self {
            RxWake::Message => "message",
            RxWake::Data => "data",
        }
    }

    /// What a case stored before `--rx-wake` existed reads as: its receiver woke on any data.
    pub fn before_the_option() -> RxWake {
        RxWake::Data
    }

    /// Left out of a case's JSON when it is the behaviour of cases stored before the option,
    /// so their keys are unchanged.
    pub fn is_before_the_option(&self) -> bool {
        *self == RxWake::Data
    }
}

crate::choice::named_choices!(RxWake, "receive wake-up");

/// Where the two ends of the stream live.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Endpoint {
    /// Both ends in this process over 127.0.0.1; port 0 picks a free one.
    Loopback { port: u16 },
    /// The client here, the server an `iopath net serve` at this address.
    Remote { addr: String },
    /// Both ends in this process on the loopback of a fresh private network namespace.
    Netns {
        port: u16,
        #[serde(flatten)]
        sizes: super::DeviceSizes,
        /// Over ::1 (`--topology netns:ipv6`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        ipv6: bool,
    },
    /// The client here, the server in a fresh namespace behind a veth pair.
    Veth {
        port: u16,
        #[serde(flatten)]
        link: super::Link,
    },
}

impl Endpoint {
    /// The port the in-process server listens on (0: any free one; remote: none).
    pub fn port(&self) -> u16 {
        match self {
            Endpoint::Loopback { port } | Endpoint::Netns { port, .. } | Endpoint::Veth { port, .. } => *port,
            Endpoint::Remote { .. } => 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "StoredStreamCase")]
pub struct StreamCase {
    pub mode: CopyMode,
    /// How the server receives. Always written; a case stored (or a hello sent) before receive
    /// modes existed has none and reads as the pairing used then (`RxMode::paired_with`).
    pub rx_mode: RxMode,
    /// Bytes per message (sum of all fields).
    pub size: u64,
    /// Separately allocated fields per message.
    pub fields: usize,
    /// Threads, window, CPUs, verify, endpoint, perf: flat keys of the JSON.
    #[serde(flatten)]
    pub net: NetParams,
    /// Before the measured run, probe what the kernel does with the sender's bytes (copied or
    /// by reference) on a loopback pair: net/alias.rs. Left out of the JSON when false, so the
    /// keys of cases stored before it existed are unchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prove_copies: bool,
    /// zero-copy and uring-zc: bytes of messages kept in flight (`--zc-ring`); None is the
    /// default ring (8 MiB, at least 4 messages). Absent from cases stored before it existed
    /// and left out of the JSON (and so the case key) when None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zc_ring: Option<u64>,
    /// uring-zc: the ring's memory in one registered (fixed) buffer (`--fixed-buffers`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fixed_buffers: bool,
    /// Where the buffers the kernel copies into and out of start (`--align`). Left out of the
    /// JSON when `malloc`, which is what a case stored before the option reads as (its
    /// buffers came from the allocator), so those keys are unchanged.
    #[serde(
        default = "Align::before_the_option",
        skip_serializing_if = "Align::is_before_the_option"
    )]
    pub align: Align,
    /// When the server's receiver is woken for the rest of a message (`--rx-wake`). Left out
    /// of the JSON when `data`, which is what a case stored before the option reads as, so
    /// those keys are unchanged.
    #[serde(
        default = "RxWake::before_the_option",
        skip_serializing_if = "RxWake::is_before_the_option"
    )]
    pub rx_wake: RxWake,
    /// Client sessions run at once against one server (`--clients`, an incast): each a whole
    /// stream session of its own, with `net.threads` connections. Left out of the JSON when 1,
    /// which is what a case stored (or a hello sent) before the option reads as.
    #[serde(default = "one_client", skip_serializing_if = "is_one_client")]
    pub clients: u32,
}

fn perf_default() -> bool {
    true
}

fn one_client() -> u32 {
    1
}

fn is_one_client(clients: &u32) -> bool {
    *clients == 1
}

impl CopyMode {
    /// The modes that keep a ring of messages in flight until the kernel's completion.
    pub fn is_zero_copy(self) -> bool {
        matches!(self, CopyMode::ZeroCopy | CopyMode::UringZc)
    }
}

/// A `StreamCase` as read: `rx_mode` may be absent (older databases and clients).
#[derive(Deserialize)]
struct StoredStreamCase {
    mode: CopyMode,
    #[serde(default)]
    rx_mode: Option<RxMode>,
    size: u64,
    fields: usize,
    threads: usize,
    duration_ms: u64,
    warmup_ms: u64,
    client_cpus: Option<CpuList>,
    server_cpus: Option<CpuList>,
    verify: bool,
    endpoint: Endpoint,
    #[serde(default = "perf_default")]
    perf: bool,
    #[serde(default)]
    prove_copies: bool,
    #[serde(default)]
    zc_ring: Option<u64>,
    #[serde(default)]
    fixed_buffers: bool,
    #[serde(default = "Align::before_the_option")]
    align: Align,
    #[serde(default = "RxWake::before_the_option")]
    rx_wake: RxWake,
    #[serde(default = "one_client")]
    clients: u32,
}

impl From<StoredStreamCase> for StreamCase {
    fn from(c: StoredStreamCase) -> StreamCase {
        StreamCase {
            mode: c.mode,
            rx_mode: c.rx_mode.unwrap_or(RxMode::paired_with(c.mode)),
            size: c.size,
            fields: c.fields,
            net: NetParams {
                threads: c.threads,
                duration_ms: c.duration_ms,
                warmup_ms: c.warmup_ms,
                client_cpus: c.client_cpus,
                server_cpus: c.server_cpus,
                verify: c.verify,
                endpoint: c.endpoint,
                perf: c.perf,
            },
            prove_copies: c.prove_copies,
            zc_ring: c.zc_ring,
            fixed_buffers: c.fixed_buffers,
            align: c.align,
            rx_wake: c.rx_wake,
            clients: c.clients,
        }
    }
}

/// Cases for tests, built from what a test cares about: `StreamCase::for_test(mode, size)` is
/// a short loopback case (one field, `NetParams::for_test()`: one thread, 100 ms, no warm-up,
/// no perf counters; page aligned, woken per message, the receive mode the send mode pairs
/// with), and each `with_`
/// method changes one thing of it.
impl StreamCase {
    #[doc(hidden)]
    pub fn for_test(mode: CopyMode, size: u64) -> StreamCase {
        StreamCase {
            mode,
            rx_mode: RxMode::paired_with(mode),
            size,
            fields: 1,
            net: NetParams::for_test(),
            prove_copies: false,
            zc_ring: None,
            fixed_buffers: false,
            align: Align::Page,
            rx_wake: RxWake::Message,
            clients: 1,
        }
    }

    #[doc(hidden)]
    pub fn with_rx(self, rx_mode: RxMode) -> StreamCase {
        StreamCase { rx_mode, ..self }
    }

    #[doc(hidden)]
    pub fn with_fields(self, fields: usize) -> StreamCase {
        StreamCase { fields, ..self }
    }

    #[doc(hidden)]
    pub fn with_threads(mut self, threads: usize) -> StreamCase {
        self.net.threads = threads;
        self
    }

    /// The measured window and the warm-up before it.
    #[doc(hidden)]
    pub fn with_window_ms(mut self, duration_ms: u64, warmup_ms: u64) -> StreamCase {
        self.net.duration_ms = duration_ms;
        self.net.warmup_ms = warmup_ms;
        self
    }

    /// With perf counters (`perf: true`, what a command runs with).
    #[doc(hidden)]
    pub fn with_perf(mut self) -> StreamCase {
        self.net.perf = true;
        self
    }

    #[doc(hidden)]
    pub fn with_server_cpus(mut self, cpus: CpuList) -> StreamCase {
        self.net.server_cpus = Some(cpus);
        self
    }

    #[doc(hidden)]
    pub fn with_net(self, net: NetParams) -> StreamCase {
        StreamCase { net, ..self }
    }
}

impl StreamCase {
    /// `one-copy 64KiB t1`; the receive mode is named only when it is not the one the send
    /// mode was always paired with (`one-copy/trunc 64KiB t1`), so labels of runs made before
    /// receive modes existed stay what they were.
    pub fn label(&self) -> String {
        let mut label = format!("{} {} t{}", self.path(false), format_bytes(self.size), self.net.threads);
        if let Some(ring) = self.zc_ring {
            // A ring smaller than one message holds one message: say so rather than "1B".
            if ring < self.size {
                label.push_str(" ring=1msg");
            } else {
                label.push_str(&format!(" ring={}", format_bytes(ring)));
            }
        }
        if self.fixed_buffers {
            label.push_str(" fixed");
        }
        if self.align == Align::Misaligned {
            label.push_str(" misaligned");
        }
        if self.clients > 1 {
            label.push_str(&format!(" x{} clients", self.clients));
        }
        label
    }

    /// The send and receive modes as one name: `one-copy/scatter` with `always_rx`, otherwise
    /// the send mode alone when the receive mode is its usual pairing.
    pub fn path(&self, always_rx: bool) -> String {
        if always_rx || self.rx_mode != RxMode::paired_with(self.mode) {
            format!("{}/{}", self.mode, self.rx_mode)
        } else {
            self.mode.to_string()
        }
    }

    pub fn params(&self) -> Vec<(&'static str, String)> {
        let mut params = vec![
            ("mode", self.mode.to_string()),
            ("rx_mode", self.rx_mode.to_string()),
            ("size_bytes", self.size.to_string()),
            ("fields", self.fields.to_string()),
            ("threads", self.net.threads.to_string()),
        ];
        params.extend(self.net.window_params());
        params.extend([
            ("prove_copies", self.prove_copies.to_string()),
            ("align", self.align.to_string()),
            ("rx_wake", self.rx_wake.to_string()),
        ]);
        // Only when given, so the columns of runs that never use them stay as they were (an
        // export's columns are the union over its cases: the others' cells are empty).
        if let Some(bytes) = self.zc_ring {
            params.push(("zc_ring_bytes", bytes.to_string()));
        }
        if self.fixed_buffers {
            params.push(("fixed_buffers", "true".to_string()));
        }
        if self.clients > 1 {
            params.push(("clients", self.clients.to_string()));
        }
        params
    }
}

impl super::Workload for StreamCase {
    fn kind(&self) -> &'static str {
        "net-stream"
    }

    fn label(&self) -> String {
        StreamCase::label(self)
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        StreamCase::params(self)
    }

    fn planned_seconds(&self) -> f64 {
        self.net.session_seconds() + 0.05
    }

    fn window_seconds(&self) -> f64 {
        self.net.session_seconds()
    }

    fn pinning(&self) -> super::Pinning<'_> {
        self.net.pinning()
    }

    fn headline(&self) -> super::Headline {
        super::Headline::system(crate::observation::names::THROUGHPUT_GBPS, "Gbit/s", true)
    }

    fn contest(&self) -> Option<super::Contest> {
        Some(super::Contest {
            group: format!("net stream, {}", super::workload::count(self.net.threads, "thread")),
            // The send mode, with the receive mode when it is not the usual pairing.
            contender: self.path(false),
            x: self.size,
            x_text: format_bytes(self.size),
            contenders_are: "mode",
            axis: "size",
            everywhere: "every size",
            best_word: "fastest",
        })
    }

    fn sends_by_reference(&self) -> bool {
        self.mode.sends_by_reference(self.net.verify)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl CopyMode {
    /// Whether this mode, with or without --verify, sends by reference (`Workload::
    /// sends_by_reference`): sendfile and splice without --verify.
    pub fn sends_by_reference(self, verify: bool) -> bool {
        matches!(self, CopyMode::Sendfile | CopyMode::Splice) && !verify
    }
}

#[cfg(test)]
mod endpoint_tests {
    use super::*;

    /// prove_copies is left out when false, so the key (the JSON) of a case stored before the
    /// field existed is unchanged and it reads back as false; when true it round-trips.
    #[test]
    fn prove_copies_keeps_old_keys_and_round_trips() {
        let mut case = StreamCase::for_test(CopyMode::Sendfile, 1024).with_perf();
        let text = serde_json::to_string(&case).unwrap();
        assert!(!text.contains("prove_copies"), "{text}");
        assert_eq!(serde_json::from_str::<StreamCase>(&text).unwrap(), case);
        case.prove_copies = true;
        let text = serde_json::to_string(&case).unwrap();
        assert!(text.contains("\"prove_copies\":true"), "{text}");
        assert_eq!(serde_json::from_str::<StreamCase>(&text).unwrap(), case);
        assert!(case.params().contains(&("prove_copies", "true".to_string())));
    }

    /// A case stored before `zc_ring`, `fixed_buffers` and `rx_wake` existed loads with the
    /// values that ran then, and serialises (its key) exactly as before; a case woken per
    /// message names it.
    #[test]
    fn old_cases_load_and_keep_their_key() {
        let old = r#"{"mode":"zero-copy","size":65536,"fields":8,"threads":1,"duration_ms":300,"warmup_ms":100,"client_cpus":null,"server_cpus":null,"verify":false,"endpoint":{"kind":"loopback","port":0},"perf":true}"#;
        let case: StreamCase = serde_json::from_str(old).unwrap();
        assert_eq!(
            (case.zc_ring, case.fixed_buffers, case.rx_wake),
            (None, false, RxWake::Data)
        );
        let text = serde_json::to_string(&case).unwrap();
        assert!(
            !text.contains("zc_ring") && !text.contains("fixed_buffers") && !text.contains("rx_wake"),
            "{text}"
        );
        let woken = StreamCase {
            rx_wake: RxWake::Message,
            ..case.clone()
        };
        let text = serde_json::to_string(&woken).unwrap();
        assert!(text.ends_with(r#","rx_wake":"message"}"#), "{text}");
        assert_eq!(serde_json::from_str::<StreamCase>(&text).unwrap(), woken);
        assert_eq!(case.label(), "zero-copy 64KiB t1");
        assert!(case
            .params()
            .iter()
            .all(|(n, _)| *n != "zc_ring_bytes" && *n != "fixed_buffers"));
        let ringed = StreamCase {
            mode: CopyMode::UringZc,
            zc_ring: Some(65536),
            fixed_buffers: true,
            ..case
        };
        assert_eq!(ringed.label(), "uring-zc 64KiB t1 ring=64KiB fixed");
        let params = ringed.params();
        assert!(params.contains(&("zc_ring_bytes", "65536".to_string())));
        assert!(params.contains(&("fixed_buffers", "true".to_string())));
        let text = serde_json::to_string(&ringed).unwrap();
        assert_eq!(serde_json::from_str::<StreamCase>(&text).unwrap(), ringed);
    }

    /// A case stored before receive modes existed loads with the pairing used then, and is
    /// written back naming it.
    #[test]
    fn a_case_without_rx_mode_reads_as_the_old_pairing() {
        let old = |mode: &str| {
            format!(
                r#"{{"mode":"{mode}","size":1024,"fields":8,"threads":1,"duration_ms":100,"warmup_ms":0,"client_cpus":null,"server_cpus":null,"verify":false,"endpoint":{{"kind":"loopback","port":0}}}}"#
            )
        };
        let two: StreamCase = serde_json::from_str(&old("two-copy")).unwrap();
        assert_eq!(two.rx_mode, RxMode::Copy);
        let one: StreamCase = serde_json::from_str(&old("one-copy")).unwrap();
        assert_eq!(one.rx_mode, RxMode::Scatter);
        assert!(one.net.perf);
        assert_eq!(one.label(), "one-copy 1KiB t1");
        let text = serde_json::to_string(&one).unwrap();
        assert!(text.contains(r#""rx_mode":"scatter""#), "{text}");
        let trunc = StreamCase {
            rx_mode: RxMode::Trunc,
            ..one
        };
        assert_eq!(trunc.label(), "one-copy/trunc 1KiB t1");
        let back: StreamCase = serde_json::from_str(&serde_json::to_string(&trunc).unwrap()).unwrap();
        assert_eq!(back, trunc);
    }

    #[test]
    fn namespace_endpoints_round_trip_through_json() {
        let veth = Endpoint::Veth {
            port: 0,
            link: crate::case::Link {
                mtu: Some(4148),
                rate_bps: Some(100_000_000),
                ..Default::default()
            },
        };
        for e in [
            Endpoint::Netns {
                port: 7,
                sizes: Default::default(),
                ipv6: false,
            },
            Endpoint::Netns {
                port: 7,
                sizes: Default::default(),
                ipv6: true,
            },
            veth,
            Endpoint::Loopback { port: 0 },
        ] {
            let text = serde_json::to_string(&e).unwrap();
            assert_eq!(serde_json::from_str::<Endpoint>(&text).unwrap(), e, "{text}");
        }
    }
}
