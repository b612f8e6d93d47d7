//! iopath's entry point: parse flags, run, map errors to exit codes
//! (0 ok, 1 the run failed, 2 bad input).

use clap::Parser;
use iopath::cli::{self, UsageError};
use std::process::ExitCode;

fn main() -> ExitCode {
    let parsed = match cli::Cli::try_parse() {
        Ok(parsed) => parsed,
        Err(err) => {
            use clap::error::ErrorKind;
            match err.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = err.print();
                    return if err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        ExitCode::from(2)
                    } else {
                        ExitCode::SUCCESS
                    };
                }
                _ => {
                    // One line: clap's first line says what is wrong and what is accepted.
                    let rendered = err.render().to_string();
                    let first = rendered
                        .lines()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("error: bad arguments");
                    eprintln!("{first} (see --help)");
                    return ExitCode::from(2);
                }
            }
        }
    };
    match cli::run(parsed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if err.downcast_ref::<UsageError>().is_some() => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(1)
        }
    }
}
