//! OS microbenchmarks, one file each (being built in the micro issue).

use crate::case::MicroCase;
use crate::observation::Observation;

/// Run one microbenchmark case.
pub fn run_case(_case: &MicroCase) -> anyhow::Result<Observation> {
    anyhow::bail!("micro is not built yet")
}
