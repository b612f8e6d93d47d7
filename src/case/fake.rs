//! Parameters of the fake workload: a hidden, deterministic stand-in that sleeps, fails or
//! panics on command, so the runner, the sinks, resume and interruption can be tested without
//! sockets or timing races (hyperfine's mock executor).

use serde::{Deserialize, Serialize};
use std::fmt;

/// What one fake case does when it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum FakeBehaviour {
    /// Return at once with `value` as its only metric.
    Ok { value: u64 },
    /// Return `value` plus a deterministic jitter of at most `jitter`, which repeats every six
    /// calls of the case in one process (-1, -0.6, -0.2, 0.2, 0.6, 1 times `jitter`), so
    /// repetitions spread like a measurement and compare verdicts can be tested.
    Jitter { value: u64, jitter: u64 },
    /// Return `value` plus normal noise of standard deviation `sd`, drawn from a generator
    /// seeded with `IOPATH_FAKE_SEED` (default 0), the case's index and the call number: runs
    /// with the same seed repeat their values; runs with different seeds are independent draws
    /// from one distribution (for testing the statistics of `compare`).
    Noise { value: u64, sd: u64 },
    /// Sleep `ms` while watching the stop request, then return like `Ok`.
    Sleep { ms: u64 },
    /// Sleep `ms` ignoring the stop request (a workload that cannot be interrupted), holding a
    /// child process and a scratch file that only a forced exit must clean up.
    Stubborn { ms: u64 },
    /// Return an error.
    Fail,
    /// Panic.
    Panic,
}

impl fmt::Display for FakeBehaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FakeBehaviour::Ok { value } => write!(f, "ok:{value}"),
            FakeBehaviour::Jitter { value, jitter } => write!(f, "ok:{value}~{jitter}"),
            FakeBehaviour::Noise { value, sd } => write!(f, "noise:{value}~{sd}"),
            FakeBehaviour::Sleep { ms } => write!(f, "sleep:{ms}ms"),
            FakeBehaviour::Stubborn { ms } => write!(f, "stubborn:{ms}ms"),
            FakeBehaviour::Fail => f.write_str("fail"),
            FakeBehaviour::Panic => f.write_str("panic"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FakeCase {
    /// Position in the list the user gave, so equal behaviours stay distinct cases.
    pub index: usize,
    pub behaviour: FakeBehaviour,
}

impl FakeCase {
    pub fn label(&self) -> String {
        format!("fake#{} {}", self.index, self.behaviour)
    }

    pub fn params(&self) -> Vec<(&'static str, String)> {
        vec![
            ("index", self.index.to_string()),
            ("behaviour", self.behaviour.to_string()),
        ]
    }
}

impl super::Workload for FakeCase {
    fn kind(&self) -> &'static str {
        "fake"
    }

    fn label(&self) -> String {
        FakeCase::label(self)
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        FakeCase::params(self)
    }

    fn planned_seconds(&self) -> f64 {
        match self.behaviour {
            FakeBehaviour::Sleep { ms } | FakeBehaviour::Stubborn { ms } => ms as f64 / 1e3,
            _ => 0.0,
        }
    }

    fn headline(&self) -> super::Headline {
        super::Headline::system(crate::observation::names::FAKE_VALUE, "1", true)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
