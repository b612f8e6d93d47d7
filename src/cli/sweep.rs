//! `iopath sweep` and `iopath quick`: placeholders until the runner and store land.

use clap::Args;

#[derive(Args, Debug)]
pub struct SweepArgs {}

#[derive(Args, Debug)]
pub struct QuickArgs {}

pub fn run_sweep(_args: SweepArgs) -> anyhow::Result<()> {
    anyhow::bail!("iopath sweep is not built yet")
}

pub fn run_quick(_args: QuickArgs) -> anyhow::Result<()> {
    anyhow::bail!("iopath quick is not built yet")
}
