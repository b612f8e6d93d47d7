//! Parameters of `iopath net udp-stream`: datagrams of one size from the client's threads to
//! the server's, in a UDP send mode and a UDP receive mode, paced or as fast as possible.

use super::{format_bytes, NetParams, UdpRecvMode, UdpSendMode};
use serde::{Deserialize, Serialize};

/// A paced sending rate, in total over every thread: datagrams per second, or bits per second
/// of UDP payload (written with a `bit` suffix: `2Gbit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UdpRate {
    /// Datagrams per second (`100k`).
    Datagrams(u64),
    /// Bits of UDP payload per second (`2Gbit`).
    Bits(u64),
}

impl UdpRate {
    /// Datagrams per second for datagrams of `size` bytes (at least 1).
    pub fn datagrams_per_s(self, size: u64) -> f64 {
        match self {
            UdpRate::Datagrams(n) => n as f64,
            UdpRate::Bits(b) => (b as f64 / (8.0 * size.max(1) as f64)).max(1.0),
        }
    }

    /// Payload bytes per second for datagrams of `size` bytes.
    pub fn bytes_per_s(self, size: u64) -> f64 {
        self.datagrams_per_s(size) * size as f64
    }
}

impl std::fmt::Display for UdpRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (n, unit) = match *self {
            UdpRate::Datagrams(n) => (n, ""),
            UdpRate::Bits(n) => (n, "bit"),
        };
        // The largest decimal prefix that divides the number exactly, so it reads back the same.
        for (div, prefix) in [(1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")] {
            if n >= div && n % div == 0 {
                return write!(f, "{}{prefix}{unit}", n / div);
            }
        }
        write!(f, "{n}{unit}")
    }
}

impl std::str::FromStr for UdpRate {
    type Err = String;

    /// `100000`, `100k`, `2M` datagrams per second; `500Mbit`, `2Gbit`, `64000bit` bits per
    /// second. Decimal prefixes (k = 1000), whole numbers.
    fn from_str(text: &str) -> Result<UdpRate, String> {
        const ACCEPTED: &str =
            "accepted: datagrams per second (100000, 100k, 2M) or payload bits per second with a bit suffix (500Mbit, 2Gbit)";
        let t = text.trim();
        let (t, bits) = match t.strip_suffix("bit") {
            Some(rest) => (rest, true),
            None => (t, false),
        };
        let (digits, mult) = match t.char_indices().last() {
            Some((i, 'k')) => (&t[..i], 1_000u64),
            Some((i, 'M')) => (&t[..i], 1_000_000),
            Some((i, 'G')) => (&t[..i], 1_000_000_000),
            _ => (t, 1),
        };
        let n: u64 = digits
            .parse()
            .ok()
            .and_then(|n: u64| n.checked_mul(mult))
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("'{text}' is not a rate ({ACCEPTED})"))?;
        Ok(if bits { UdpRate::Bits(n) } else { UdpRate::Datagrams(n) })
    }
}

/// One `net udp-stream` experiment point.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UdpStreamCase {
    /// How the client hands datagrams to the kernel.
    pub mode: UdpSendMode,
    /// How the server takes them back.
    pub rx_mode: UdpRecvMode,
    /// Bytes per datagram (UDP payload).
    pub size: u64,
    /// Datagrams per system call for the batching modes (sendmmsg, gso, uring, recvmmsg).
    pub batch: usize,
    /// Paced at this rate in total; None: as fast as the sender goes.
    pub rate: Option<UdpRate>,
    /// The server sockets' SO_RCVBUF (bytes asked for); None: the kernel's default.
    pub rcvbuf: Option<u64>,
    /// Threads, window, CPUs, verify, endpoint, perf: flat keys of the JSON.
    #[serde(flatten)]
    pub net: NetParams,
}

impl UdpStreamCase {
    /// The smallest datagram: the header (sequence number + send time) and nothing else.
    pub const MIN_SIZE: u64 = 16;
    /// The largest datagram accepted: 64 KiB less the IPv4 and UDP headers (65507 bytes).
    pub const MAX_SIZE: u64 = 65_507;

    /// `udp send/recv 1KiB b32 t1 @100k/s rcvbuf=4KiB`.
    pub fn label(&self) -> String {
        let mut label = format!("udp {}/{} {}", self.mode, self.rx_mode, format_bytes(self.size));
        if self.batches() {
            label.push_str(&format!(" b{}", self.batch));
        }
        label.push_str(&format!(" t{}", self.net.threads));
        if let Some(rate) = self.rate {
            label.push_str(&format!(" @{rate}/s"));
        }
        if let Some(rcvbuf) = self.rcvbuf {
            label.push_str(&format!(" rcvbuf={}", format_bytes(rcvbuf)));
        }
        label
    }

    /// Whether the server's end drops every datagram (`--topology veth:peer=drop`): the
    /// receiver's figures are zero by design and the sender's are the measurement.
    pub fn peer_drops(&self) -> bool {
        matches!(&self.net.endpoint, super::Endpoint::Veth { link, .. } if link.peer_drops_udp)
    }

    /// Whether `batch` means anything for the case's modes.
    pub fn batches(&self) -> bool {
        self.mode.batches() || self.rx_mode == UdpRecvMode::Recvmmsg
    }

    pub fn params(&self) -> Vec<(&'static str, String)> {
        let mut params = vec![
            ("mode", self.mode.to_string()),
            ("rx_mode", self.rx_mode.to_string()),
            ("size", self.size.to_string()),
            ("batch", self.batch.to_string()),
            ("rate", self.rate.map_or("unpaced".to_string(), |r| r.to_string())),
            ("rcvbuf", self.rcvbuf.map_or("default".to_string(), |r| r.to_string())),
            ("threads", self.net.threads.to_string()),
        ];
        params.extend(self.net.window_params());
        params
    }
}

impl super::Workload for UdpStreamCase {
    fn kind(&self) -> &'static str {
        "net-udp-stream"
    }

    fn label(&self) -> String {
        UdpStreamCase::label(self)
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        UdpStreamCase::params(self)
    }

    fn planned_seconds(&self) -> f64 {
        // The session, and the server's drain after it.
        self.net.session_seconds() + 0.3
    }

    fn window_seconds(&self) -> f64 {
        self.net.session_seconds()
    }

    fn pinning(&self) -> super::Pinning<'_> {
        self.net.pinning()
    }

    fn headline(&self) -> super::Headline {
        if self.peer_drops() {
            // Nothing arrives by design (`veth:peer=drop`): what is measured is the sender.
            return super::Headline {
                name: crate::observation::names::THROUGHPUT_GBPS,
                role: crate::observation::Role::Client,
                unit: "Gbit/s",
                higher_is_better: true,
            };
        }
        // What arrived: a sender that outruns its receiver is not faster.
        super::Headline::system(crate::observation::names::THROUGHPUT_GBPS, "Gbit/s", true)
    }

    /// Most datagrams lost: the throughput is what the receiver kept up with. Not across
    /// `veth:peer=drop`, where every datagram is dropped on purpose.
    fn alarm(&self) -> Option<super::Alarm> {
        if self.peer_drops() {
            return None;
        }
        Some(super::Alarm {
            metric: crate::observation::names::LOSS_FRACTION,
            role: crate::observation::Role::System,
            at_least: 0.5,
            what: "of its datagrams lost",
            advice: "its Gbit/s is what the receiver kept up with, not what the sender can send; --rate paces it",
        })
    }

    fn contest(&self) -> Option<super::Contest> {
        Some(super::Contest {
            group: format!(
                "net udp-stream, {}{}",
                super::workload::count(self.net.threads, "thread"),
                self.rate.map_or(String::new(), |r| format!(", {r}/s offered"))
            ),
            contender: format!("{}/{}", self.mode, self.rx_mode),
            x: self.size,
            x_text: format!("{} datagrams", format_bytes(self.size)),
            contenders_are: "mode",
            axis: "size",
            everywhere: "every size",
            best_word: "fastest",
        })
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Case;

    fn case() -> UdpStreamCase {
        UdpStreamCase {
            mode: UdpSendMode::Sendmmsg,
            rx_mode: UdpRecvMode::Recvmmsg,
            size: 1024,
            batch: 32,
            rate: Some(UdpRate::Datagrams(100_000)),
            rcvbuf: Some(4096),
            net: NetParams {
                duration_ms: 1000,
                warmup_ms: 200,
                verify: true,
                perf: true,
                ..NetParams::for_test()
            },
        }
    }

    #[test]
    fn labels_name_the_modes_and_cases_round_trip_with_flat_keys() {
        let c = case();
        assert_eq!(c.label(), "udp sendmmsg/recvmmsg 1KiB b32 t1 @100k/s rcvbuf=4KiB");
        let plain = UdpStreamCase {
            mode: UdpSendMode::Send,
            rx_mode: UdpRecvMode::Recv,
            rate: None,
            rcvbuf: None,
            ..c.clone()
        };
        assert_eq!(plain.label(), "udp send/recv 1KiB t1");
        let whole = Case::NetUdpStream(c.clone());
        let key = whole.key();
        assert!(
            key.starts_with(r#"{"workload":"net-udp-stream","mode":"sendmmsg","rx_mode":"recvmmsg","size":1024"#),
            "{key}"
        );
        assert!(key.contains(r#""rate":{"datagrams":100000}"#), "{key}");
        assert!(key.contains(r#""threads":1,"duration_ms":1000"#), "{key}");
        assert_eq!(serde_json::from_str::<Case>(&key).unwrap(), whole);
    }

    #[test]
    fn rates_parse_in_datagrams_or_bits_and_print_back() {
        for (text, rate) in [
            ("100k", UdpRate::Datagrams(100_000)),
            ("2500", UdpRate::Datagrams(2500)),
            ("2M", UdpRate::Datagrams(2_000_000)),
            ("2Gbit", UdpRate::Bits(2_000_000_000)),
            ("500Mbit", UdpRate::Bits(500_000_000)),
            ("64000bit", UdpRate::Bits(64_000)),
        ] {
            assert_eq!(text.parse::<UdpRate>(), Ok(rate), "{text}");
            assert_eq!(rate.to_string().parse::<UdpRate>(), Ok(rate));
        }
        assert_eq!(UdpRate::Bits(2_000_000_000).to_string(), "2Gbit");
        for bad in ["", "0", "fast", "2Gbps", "1.5M", "-3", "k"] {
            let e = bad.parse::<UdpRate>().unwrap_err();
            assert!(e.contains("accepted: datagrams per second"), "{bad}: {e}");
        }
        // 1 Gbit/s of 1000-byte datagrams is 125000 datagrams per second.
        assert_eq!(UdpRate::Bits(1_000_000_000).datagrams_per_s(1000), 125_000.0);
    }
}
