//! The command line: clap definitions (raw flags) and their validation into plans, in two
//! stages. `run` dispatches a parsed command; exit codes are decided in main.rs.

pub mod error;
pub mod fake;
pub mod launcher;
pub mod live;
pub mod micro;
pub mod net;
pub mod output;
pub mod planfile;
pub mod results;
pub mod run;
pub mod servers;
pub mod sweep;
pub mod sysinfo;
pub mod values;

pub use error::UsageError;

use clap::{Parser, Subcommand};

/// iopath measures what moving data through this machine costs: throughput, time per
/// message, CPU time, cycles, cache misses and context switches for each I/O primitive, with
/// the source of every number (pmu, software, rusage, tool, estimate).
#[derive(Parser, Debug)]
#[command(name = "iopath", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Network benchmarks: stream a structured message with two-copy, one-copy or zero-copy sends.
    #[command(subcommand)]
    Net(net::NetCommand),
    /// A short sweep of all copy modes on loopback, saved to the database, with an HTML report.
    Quick(sweep::QuickArgs),
    /// Run any measuring command as a stored run (the same flags), or resume one.
    Sweep(Box<sweep::SweepArgs>),
    /// List the runs in the results database.
    Runs(results::RunsArgs),
    /// Write the self-contained HTML report (and PNG/SVG charts) of a run.
    Report(results::ReportArgs),
    /// Export a run's observations as CSV or JSON.
    Export(results::ExportArgs),
    /// Compare two runs cell by cell, with a significance test.
    Compare(results::CompareArgs),
    /// OS microbenchmarks in the style of lmbench: syscalls, context switches, memory, disks.
    Micro(micro::MicroArgs),
    /// Describe this machine: CPU, caches, memory, NICs, kernel, counters, io_uring.
    Sysinfo(sysinfo::SysinfoArgs),
    /// Compare server concurrency models (iterative, threads, pool, select, poll, epoll, io_uring).
    Servers(servers::ServersArgs),
    /// The top-k CPU process service: serve it, or query a running one.
    #[command(subcommand)]
    Procs(servers::ProcsCommand),
    /// The deterministic test workload: cells that return, sleep, fail or panic on command.
    #[command(hide = true)]
    Fake(fake::FakeArgs),
}

/// Run one parsed command.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Net(cmd) => net::run(cmd),
        Command::Quick(args) => sweep::run_quick(args),
        Command::Sweep(args) => sweep::run_sweep(*args),
        Command::Runs(args) => results::run_runs(args),
        Command::Report(args) => results::run_report(args),
        Command::Export(args) => results::run_export(args),
        Command::Compare(args) => results::run_compare(args),
        Command::Micro(args) => micro::run(args),
        Command::Sysinfo(args) => sysinfo::run(args),
        Command::Servers(args) => servers::run(args),
        Command::Procs(cmd) => servers::run_procs(cmd),
        Command::Fake(args) => fake::run(args),
    }
}
