//! The stream workload (being built in the net issue).

use crate::case::StreamCase;
use crate::observation::Observation;

/// Run one stream case and return its observation.
pub fn run(_case: &StreamCase) -> anyhow::Result<Observation> {
    anyhow::bail!("net stream is not built yet")
}
