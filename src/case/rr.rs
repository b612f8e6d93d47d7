//! Parameters of the request/response benchmarks (`iopath net rr` and `iopath net crr`).

use super::{format_bytes, Align, CopyMode, CpuList, Endpoint, NetParams, RxMode, RxWake};
use serde::{Deserialize, Serialize};

/// Request/response on long-lived connections, or a fresh connection per transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum RrKind {
    /// Each connection carries transaction after transaction (netperf TCP_RR, neper tcp_rr).
    Rr,
    /// Every transaction is connect, request, response, close (netperf TCP_CRR, neper tcp_crr).
    Crr,
}

impl RrKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RrKind::Rr => "rr",
            RrKind::Crr => "crr",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "StoredRrCase", into = "StoredRrCase")]
pub struct RrCase {
    pub kind: RrKind,
    /// How requests and responses are handed to the kernel.
    pub mode: CopyMode,
    /// How both ends take them back: the server its requests, the client its responses.
    /// Always written; a case stored (or a hello sent) before rr had receive modes has none
    /// and reads as the pairing used then (`RxMode::paired_with`).
    pub rx_mode: RxMode,
    /// Bytes per request (client to server).
    pub request_size: u64,
    /// Bytes per response (server to client).
    pub response_size: u64,
    /// Separately allocated fields per message.
    pub fields: usize,
    /// Transactions in flight per connection (closed loop; always 1 for crr).
    pub inflight: usize,
    /// Open loop at this many transactions per second in total; None is closed loop.
    pub rate: Option<u64>,
    /// Threads, window, CPUs, verify, endpoint, perf. Not flattened by serde: `rate` sits
    /// between `threads` and `duration_ms` in the stored JSON (the case's key), so the case
    /// is written through `StoredRrCase`, which keeps that order.
    pub net: NetParams,
    /// Where the buffers the kernel copies into and out of start (`--align`). Left out of the
    /// JSON when `malloc` (see `StoredRrCase`), which is what a case stored before the option
    /// reads as (its buffers came from the allocator), so those keys are unchanged.
    pub align: Align,
    /// When each end's receiver is woken for the rest of a request or response
    /// (`--rx-wake`). Left out of the JSON when `data`, what a case stored before the option
    /// reads as (see `StoredRrCase`).
    pub rx_wake: RxWake,
}

/// An `RrCase` as stored: its keys in their order. As read, `rx_mode` may be absent (older
/// databases, clients and plan files); as written it is always there.
#[derive(Serialize, Deserialize)]
struct StoredRrCase {
    kind: RrKind,
    mode: CopyMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rx_mode: Option<RxMode>,
    request_size: u64,
    response_size: u64,
    fields: usize,
    inflight: usize,
    threads: usize,
    rate: Option<u64>,
    duration_ms: u64,
    warmup_ms: u64,
    client_cpus: Option<CpuList>,
    server_cpus: Option<CpuList>,
    verify: bool,
    endpoint: Endpoint,
    perf: bool,
    #[serde(
        default = "Align::before_the_option",
        skip_serializing_if = "Align::is_before_the_option"
    )]
    align: Align,
    #[serde(
        default = "RxWake::before_the_option",
        skip_serializing_if = "RxWake::is_before_the_option"
    )]
    rx_wake: RxWake,
}

impl From<StoredRrCase> for RrCase {
    fn from(c: StoredRrCase) -> RrCase {
        RrCase {
            kind: c.kind,
            mode: c.mode,
            rx_mode: c.rx_mode.unwrap_or(RxMode::paired_with(c.mode)),
            request_size: c.request_size,
            response_size: c.response_size,
            fields: c.fields,
            inflight: c.inflight,
            rate: c.rate,
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
            align: c.align,
            rx_wake: c.rx_wake,
        }
    }
}

impl From<RrCase> for StoredRrCase {
    fn from(c: RrCase) -> StoredRrCase {
        let NetParams {
            threads,
            duration_ms,
            warmup_ms,
            client_cpus,
            server_cpus,
            verify,
            endpoint,
            perf,
        } = c.net;
        StoredRrCase {
            kind: c.kind,
            mode: c.mode,
            rx_mode: Some(c.rx_mode),
            request_size: c.request_size,
            response_size: c.response_size,
            fields: c.fields,
            inflight: c.inflight,
            threads,
            rate: c.rate,
            duration_ms,
            warmup_ms,
            client_cpus,
            server_cpus,
            verify,
            endpoint,
            perf,
            align: c.align,
            rx_wake: c.rx_wake,
        }
    }
}

impl RrCase {
    /// `rr one-copy 64B/1KiB n4 t2 @10000/s`; the receive mode is named only when it is not
    /// the send mode's usual pairing (`rr one-copy/zerocopy 64B/64B n1 t1`), so labels of runs
    /// made before rr had receive modes stay what they were.
    pub fn label(&self) -> String {
        let mut label = format!(
            "{} {} {}/{}",
            self.kind.as_str(),
            self.path(),
            format_bytes(self.request_size),
            format_bytes(self.response_size)
        );
        if self.kind == RrKind::Rr {
            label.push_str(&format!(" n{}", self.inflight));
        }
        label.push_str(&format!(" t{}", self.net.threads));
        if let Some(rate) = self.rate {
            label.push_str(&format!(" @{rate}/s"));
        }
        if self.align == Align::Misaligned {
            label.push_str(" misaligned");
        }
        // `data` is rr's default and what cases stored before the option did: unmarked, so
        // their labels are unchanged.
        if self.rx_wake == RxWake::Message {
            label.push_str(" wake=message");
        }
        label
    }

    /// The send mode, and `/rx` when the receive mode is not its usual pairing.
    pub fn path(&self) -> String {
        if self.rx_mode == RxMode::paired_with(self.mode) {
            self.mode.to_string()
        } else {
            format!("{}/{}", self.mode, self.rx_mode)
        }
    }

    pub fn params(&self) -> Vec<(&'static str, String)> {
        let mut params = vec![
            ("kind", self.kind.as_str().to_string()),
            ("mode", self.mode.to_string()),
            ("rx_mode", self.rx_mode.to_string()),
            ("request_bytes", self.request_size.to_string()),
            ("response_bytes", self.response_size.to_string()),
            ("fields", self.fields.to_string()),
            ("inflight", self.inflight.to_string()),
            ("threads", self.net.threads.to_string()),
            ("rate", self.rate.map_or("closed".to_string(), |r| r.to_string())),
        ];
        params.extend(self.net.window_params());
        params.push(("align", self.align.to_string()));
        params.push(("rx_wake", self.rx_wake.to_string()));
        params
    }
}

impl super::Workload for RrCase {
    fn kind(&self) -> &'static str {
        match self.kind {
            RrKind::Rr => "net-rr",
            RrKind::Crr => "net-crr",
        }
    }

    fn label(&self) -> String {
        RrCase::label(self)
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        RrCase::params(self)
    }

    fn passes(&self) -> u32 {
        if self.net.perf {
            2
        } else {
            1
        }
    }

    fn planned_seconds(&self) -> f64 {
        super::Workload::passes(self) as f64 * (self.net.session_seconds() + 0.1)
    }

    fn window_seconds(&self) -> f64 {
        super::Workload::passes(self) as f64 * self.net.session_seconds()
    }

    fn pinning(&self) -> super::Pinning<'_> {
        self.net.pinning()
    }

    fn headline(&self) -> super::Headline {
        super::Headline::system(crate::observation::names::TRANSACTIONS_PER_S, "txn/s", true)
    }

    fn contest(&self) -> Option<super::Contest> {
        Some(super::workload::request_response_contest(
            &format!("net {}", self.kind.as_str()),
            (self.request_size, self.response_size),
            self.inflight,
            self.net.threads,
            self.rate,
            // The send mode, with the receive mode when it is not the usual pairing.
            self.path(),
        ))
    }

    fn sends_by_reference(&self) -> bool {
        self.mode.sends_by_reference(self.net.verify)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_what_differs_and_cases_round_trip() {
        let case = RrCase {
            kind: RrKind::Rr,
            mode: CopyMode::OneCopy,
            rx_mode: RxMode::Scatter,
            request_size: 64,
            response_size: 1024,
            fields: 1,
            inflight: 4,
            net: NetParams {
                threads: 2,
                duration_ms: 1000,
                warmup_ms: 100,
                perf: true,
                ..NetParams::for_test()
            },
            rate: Some(10_000),
            align: crate::case::Align::Page,
            rx_wake: crate::case::RxWake::Data,
        };
        assert_eq!(case.label(), "rr one-copy 64B/1KiB n4 t2 @10000/s");
        let crr = RrCase {
            kind: RrKind::Crr,
            inflight: 1,
            rate: None,
            ..case.clone()
        };
        assert_eq!(crr.label(), "crr one-copy 64B/1KiB t2");
        let text = serde_json::to_string(&crr).unwrap();
        assert_eq!(serde_json::from_str::<RrCase>(&text).unwrap(), crr);
        let odd = RrCase {
            rx_mode: RxMode::Zerocopy,
            ..crr.clone()
        };
        assert_eq!(odd.label(), "crr one-copy/zerocopy 64B/1KiB t2");
        assert!(odd.params().contains(&("rx_mode", "zerocopy".to_string())));
    }

    /// A case stored before rr had receive modes loads with the pairing it ran with, and is
    /// written back naming it.
    #[test]
    fn a_stored_case_without_rx_mode_reads_as_the_old_pairing() {
        let stored_before_rx_modes = |mode: CopyMode| {
            let case = RrCase {
                kind: RrKind::Rr,
                mode,
                rx_mode: RxMode::Trunc,
                request_size: 64,
                response_size: 64,
                fields: 1,
                inflight: 1,
                net: NetParams {
                    perf: true,
                    ..NetParams::for_test()
                },
                rate: None,
                align: crate::case::Align::Page,
                rx_wake: crate::case::RxWake::Data,
            };
            let mut json = serde_json::to_value(&case).unwrap();
            json.as_object_mut().unwrap().remove("rx_mode");
            serde_json::from_value::<RrCase>(json).unwrap()
        };
        assert_eq!(stored_before_rx_modes(CopyMode::TwoCopy).rx_mode, RxMode::Copy);
        let one = stored_before_rx_modes(CopyMode::OneCopy);
        assert_eq!(one.rx_mode, RxMode::Scatter);
        assert_eq!(one.label(), "rr one-copy 64B/64B n1 t1");
        assert!(serde_json::to_string(&one).unwrap().contains(r#""rx_mode":"scatter""#));
    }
}
