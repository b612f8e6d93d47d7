//! `iopath servers` and `iopath procs`: placeholders until the server models land.

use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct ServersArgs {}

#[derive(Subcommand, Debug)]
pub enum ProcsCommand {
    /// Serve the top-k process list.
    Serve,
    /// Query a running service.
    Query,
}

pub fn run(_args: ServersArgs) -> anyhow::Result<()> {
    anyhow::bail!("iopath servers is not built yet")
}

pub fn run_procs(_cmd: ProcsCommand) -> anyhow::Result<()> {
    anyhow::bail!("iopath procs is not built yet")
}
