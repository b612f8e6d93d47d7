//! `iopath net ...`

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum NetCommand {
    /// Stream messages from client threads to server threads and measure the cost per byte.
    Stream,
}

pub fn run(_cmd: NetCommand) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}
