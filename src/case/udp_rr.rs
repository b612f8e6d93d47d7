//! Parameters of `iopath net udp-rr`: UDP request/response, one datagram each way per
//! transaction, with loss as a counted outcome (a request or its reply missing within the
//! loss timeout) instead of a hang.

use super::{format_bytes, NetParams, UdpRecvMode, UdpSendMode};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UdpRrCase {
    /// How requests and responses are handed to the kernel (both ends).
    pub mode: UdpSendMode,
    /// How both ends take them back (the server its requests, the client its responses).
    pub rx_mode: UdpRecvMode,
    /// Bytes per request datagram (client to server), the 16-byte header included.
    pub request_size: u64,
    /// Bytes per response datagram (server to client), the 16-byte header included.
    pub response_size: u64,
    /// Requests in flight per client socket (closed loop), and the batch of the batching
    /// modes (sendmmsg, recvmmsg): a client never has more than this many to send at once.
    pub inflight: usize,
    /// Open loop at this many transactions per second in total; None is closed loop.
    pub rate: Option<u64>,
    /// A request whose reply has not come within this many milliseconds is lost: counted,
    /// and a new request takes its place.
    pub loss_timeout_ms: u64,
    /// The receive buffer (SO_RCVBUF) asked for on both ends' sockets; None: the kernel's
    /// default. A tiny one makes the kernel drop datagrams on purpose.
    pub rcvbuf: Option<u64>,
    #[serde(flatten)]
    pub net: NetParams,
}

impl UdpRrCase {
    /// `udp-rr send/recv 64B/64B n1 t1 @1000/s`.
    pub fn label(&self) -> String {
        let mut label = format!(
            "udp-rr {} {}/{} n{} t{}",
            self.path(),
            format_bytes(self.request_size),
            format_bytes(self.response_size),
            self.inflight,
            self.net.threads
        );
        if let Some(rate) = self.rate {
            label.push_str(&format!(" @{rate}/s"));
        }
        if let Some(rcvbuf) = self.rcvbuf {
            label.push_str(&format!(" rcvbuf {}", format_bytes(rcvbuf)));
        }
        label
    }

    /// The send mode and the receive mode, `send/recv`.
    pub fn path(&self) -> String {
        format!("{}/{}", self.mode, self.rx_mode)
    }

    pub fn params(&self) -> Vec<(&'static str, String)> {
        let mut params = vec![
            ("mode", self.mode.to_string()),
            ("rx_mode", self.rx_mode.to_string()),
            ("request_bytes", self.request_size.to_string()),
            ("response_bytes", self.response_size.to_string()),
            ("inflight", self.inflight.to_string()),
            ("threads", self.net.threads.to_string()),
            ("rate", self.rate.map_or("closed".to_string(), |r| r.to_string())),
            ("loss_timeout_ms", self.loss_timeout_ms.to_string()),
            ("rcvbuf", self.rcvbuf.map_or("default".to_string(), |r| r.to_string())),
        ];
        params.extend(self.net.window_params());
        params
    }
}

impl super::Workload for UdpRrCase {
    fn kind(&self) -> &'static str {
        "net-udp-rr"
    }

    fn label(&self) -> String {
        UdpRrCase::label(self)
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        UdpRrCase::params(self)
    }

    fn planned_seconds(&self) -> f64 {
        self.net.session_seconds() + 0.1
    }

    fn window_seconds(&self) -> f64 {
        self.net.session_seconds()
    }

    fn pinning(&self) -> super::Pinning<'_> {
        self.net.pinning()
    }

    /// The median round trip, lower is better.
    fn headline(&self) -> super::Headline {
        super::Headline {
            name: crate::observation::names::LATENCY_P50_US,
            role: crate::observation::Role::Client,
            unit: "us",
            higher_is_better: false,
        }
    }

    fn contest(&self) -> Option<super::Contest> {
        Some(super::workload::request_response_contest(
            "net udp-rr",
            (self.request_size, self.response_size),
            self.inflight,
            self.net.threads,
            self.rate,
            self.path(),
        ))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Case;

    pub(crate) fn case() -> UdpRrCase {
        UdpRrCase {
            mode: UdpSendMode::Sendmsg,
            rx_mode: UdpRecvMode::Recvmmsg,
            request_size: 64,
            response_size: 1024,
            inflight: 4,
            rate: Some(1000),
            loss_timeout_ms: 100,
            rcvbuf: None,
            net: NetParams {
                threads: 2,
                duration_ms: 1000,
                warmup_ms: 100,
                verify: true,
                ..NetParams::for_test()
            },
        }
    }

    #[test]
    fn labels_name_the_paths_and_cases_round_trip_as_their_key() {
        let c = case();
        assert_eq!(c.label(), "udp-rr sendmsg/recvmmsg 64B/1KiB n4 t2 @1000/s");
        let small = UdpRrCase {
            rcvbuf: Some(4096),
            rate: None,
            ..c.clone()
        };
        assert_eq!(small.label(), "udp-rr sendmsg/recvmmsg 64B/1KiB n4 t2 rcvbuf 4KiB");
        let wrapped = Case::NetUdpRr(c.clone());
        assert_eq!(wrapped.workload(), "net-udp-rr");
        let key = wrapped.key();
        assert!(key.starts_with(r#"{"workload":"net-udp-rr","mode":"sendmsg""#), "{key}");
        assert_eq!(serde_json::from_str::<Case>(&key).unwrap(), wrapped);
        assert!(c.params().contains(&("loss_timeout_ms", "100".to_string())));
        let headline = crate::case::Workload::headline(&c);
        assert_eq!(headline.name, "latency_p50_us");
        assert!(!headline.higher_is_better);
    }
}
