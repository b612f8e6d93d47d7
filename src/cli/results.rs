//! `iopath runs|report|export|compare`: placeholders until the store lands.

use clap::Args;

#[derive(Args, Debug)]
pub struct RunsArgs {}
#[derive(Args, Debug)]
pub struct ReportArgs {}
#[derive(Args, Debug)]
pub struct ExportArgs {}
#[derive(Args, Debug)]
pub struct CompareArgs {}

pub fn run_runs(_a: RunsArgs) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}
pub fn run_report(_a: ReportArgs) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}
pub fn run_export(_a: ExportArgs) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}
pub fn run_compare(_a: CompareArgs) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}
