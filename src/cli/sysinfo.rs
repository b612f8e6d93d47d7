//! `iopath sysinfo`: placeholder until the machine description lands.

use clap::Args;

#[derive(Args, Debug)]
pub struct SysinfoArgs {}

pub fn run(_args: SysinfoArgs) -> anyhow::Result<()> {
    anyhow::bail!("iopath sysinfo is not built yet")
}
