//! Parameters of latency under load (`iopath net load`): a request/response probe timed first
//! on an idle link, then while bulk TCP flows run between the same two ends.

use super::{format_bytes, CopyMode, NetParams, RxMode};
use serde::{Deserialize, Serialize};

/// Which way the bulk flows go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
    /// Both at once: `flows` each way (flent's rrul is 4 and 4).
    Both,
}

impl Direction {
    pub const ALL: [Direction; 3] = [Direction::Up, Direction::Down, Direction::Both];

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Up => "up",
            Direction::Down => "down",
            Direction::Both => "both",
        }
    }

    /// Flows that go up and flows that go down, for `flows` per direction.
    pub fn split(self, flows: usize) -> (usize, usize) {
        match self {
            Direction::Up => (flows, 0),
            Direction::Down => (0, flows),
            Direction::Both => (flows, flows),
        }
    }
}

crate::choice::named_choices!(Direction, "direction");

/// The most bulk flows a case may run each way.
pub const MAX_FLOWS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LoadCase {
    /// Bulk flows each way (`--flows`, 1..=MAX_FLOWS).
    pub flows: usize,
    pub direction: Direction,
    /// How the flows' senders hand their data to the kernel (the client's up, the server's
    /// down).
    pub mode: CopyMode,
    /// How the flows' receivers take it.
    pub rx_mode: RxMode,
    /// Bytes per send of a flow.
    pub size: u64,
    /// Bytes of the probe's request and of its response.
    pub probe_size: u64,
    /// How long the probe is timed on the idle link, before the flows start: the first part
    /// of the warm-up (`net.warmup_ms`), the flows' ramp the rest.
    pub idle_ms: u64,
    /// `--probe-rate`: the probe's round trips start this far apart (None: each as soon as
    /// the last is answered). One that is late starts at once; none is skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_interval_us: Option<u64>,
    /// `--cc`: the flows' TCP congestion control, set on both ends' sockets (None: the
    /// kernel's default, which the run's environment records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// The loaded window (`duration_ms`), the warm-up before it (`warmup_ms`: the idle pass,
    /// then the flows' ramp), CPUs, endpoint, perf. `threads` is the probe's connections: 1.
    #[serde(flatten)]
    pub net: NetParams,
}

impl LoadCase {
    /// `load up 2×one-copy 64KiB probe 64B`, then ` cubic` when the flows' congestion
    /// control is set.
    pub fn label(&self) -> String {
        let cc = self.congestion.as_ref().map(|c| format!(" {c}")).unwrap_or_default();
        format!(
            "load {} {}×{} {} probe {}{cc}",
            self.direction,
            self.flows,
            self.path(),
            format_bytes(self.size),
            format_bytes(self.probe_size)
        )
    }

    /// The flows' send mode, and `/rx` when the receive mode is not its usual pairing.
    pub fn path(&self) -> String {
        if self.rx_mode == RxMode::paired_with(self.mode) {
            self.mode.to_string()
        } else {
            format!("{}/{}", self.mode, self.rx_mode)
        }
    }

    /// Every bulk flow's data connection, up then down: (up, down).
    pub fn flow_counts(&self) -> (usize, usize) {
        self.direction.split(self.flows)
    }

    /// The session from the start gate: the idle pass, the ramp, the loaded window.
    pub fn session_ms(&self) -> u64 {
        self.net.session_ms()
    }

    /// The flows' ramp: the warm-up after the idle pass.
    pub fn ramp_ms(&self) -> u64 {
        self.net.warmup_ms.saturating_sub(self.idle_ms)
    }

    pub fn params(&self) -> Vec<(&'static str, String)> {
        let mut params = vec![
            ("direction", self.direction.to_string()),
            ("flows", self.flows.to_string()),
            ("mode", self.mode.to_string()),
            ("rx_mode", self.rx_mode.to_string()),
            ("size", self.size.to_string()),
            ("probe_bytes", self.probe_size.to_string()),
            ("idle_ms", self.idle_ms.to_string()),
        ];
        if let Some(us) = self.probe_interval_us {
            params.push(("probe_interval_us", us.to_string()));
        }
        if let Some(cc) = &self.congestion {
            params.push(("congestion", cc.clone()));
        }
        params.extend(self.net.window_params());
        params
    }
}

impl super::Workload for LoadCase {
    fn kind(&self) -> &'static str {
        "net-load"
    }

    fn label(&self) -> String {
        LoadCase::label(self)
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        LoadCase::params(self)
    }

    fn planned_seconds(&self) -> f64 {
        self.session_ms() as f64 / 1000.0 + 0.1
    }

    fn window_seconds(&self) -> f64 {
        self.session_ms() as f64 / 1000.0
    }

    fn pinning(&self) -> super::Pinning<'_> {
        self.net.pinning()
    }

    /// The probe's loaded median: lower is better.
    fn headline(&self) -> super::Headline {
        super::Headline::system(crate::observation::names::LATENCY_LOADED_P50_US, "us", false)
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

    pub(crate) fn case() -> LoadCase {
        LoadCase {
            flows: 2,
            direction: Direction::Up,
            mode: CopyMode::OneCopy,
            rx_mode: RxMode::paired_with(CopyMode::OneCopy),
            size: 64 << 10,
            probe_size: 64,
            idle_ms: 1000,
            probe_interval_us: None,
            congestion: None,
            net: NetParams {
                warmup_ms: 1500,
                ..NetParams::for_test()
            },
        }
    }

    #[test]
    fn labels_name_the_shape_and_cases_round_trip() {
        let c = case();
        assert_eq!(c.label(), "load up 2×one-copy 64KiB probe 64B");
        assert_eq!(
            LoadCase {
                direction: Direction::Both,
                ..c.clone()
            }
            .flow_counts(),
            (2, 2)
        );
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<LoadCase>(&text).unwrap(), c);
        assert_eq!((c.session_ms(), c.ramp_ms()), (1600, 500));
        assert_eq!(
            "sideways".parse::<Direction>().unwrap_err(),
            "unknown direction 'sideways' (accepted: up, down, both)"
        );
    }
}
