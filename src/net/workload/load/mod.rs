//! Latency under load (`iopath net load`): being built.

use crate::case::LoadCase;
use crate::net::auth::Credentials;
use crate::observation::Observation;
use crate::stop::Stop;

pub fn run(_case: &LoadCase, _stop: Stop, _credentials: &Credentials) -> anyhow::Result<Observation> {
    anyhow::bail!("net load: the session is not built yet")
}
