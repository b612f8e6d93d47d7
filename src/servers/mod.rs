//! Server concurrency models (being built in the servers issue).

use crate::case::ServersCase;
use crate::observation::Observation;

/// Run one server-model case: start the server, drive it, measure it.
pub fn run_case(_case: &ServersCase) -> anyhow::Result<Observation> {
    anyhow::bail!("servers is not built yet")
}
