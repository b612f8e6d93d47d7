//! `iopath micro`: placeholder until the microbenchmark suite lands.

use clap::Args;

#[derive(Args, Debug)]
pub struct MicroArgs {}

pub fn run(_args: MicroArgs) -> anyhow::Result<()> {
    anyhow::bail!("iopath micro is not built yet")
}
