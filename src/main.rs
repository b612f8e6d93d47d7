//! iopath's entry point: parse flags, run, map errors to exit codes
//! (0 ok, 1 the run failed, 2 bad input).

use iopath::cli::{self, UsageError};
use iopath::format::escape_control_keep_lines as escape;
use std::process::ExitCode;

/// clap's error as one line: what is wrong, then what is accepted (the missing arguments, the
/// possible values, a suggestion), without the usage block.
fn one_line(err: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    use std::error::Error as _;
    let rendered = err.render().to_string();
    let mut parts: Vec<String> = Vec::new();
    for line in rendered.lines().map(str::trim) {
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() {
            parts.push(line.to_string());
        }
    }
    let mut text = parts.join(" ");
    // A value its parser refused reads as every refusal found later does: the flag, then the
    // parser's words, which say what is wrong and what is accepted (`--clients: '0' must be
    // at least 1 (accepted: ...)`); the value is named when those words do not quote it.
    if err.kind() == clap::error::ErrorKind::ValueValidation {
        if let (Some(ContextValue::String(arg)), Some(why)) = (err.get(ContextKind::InvalidArg), err.source()) {
            let flag = arg.split(' ').next().unwrap_or(arg);
            let why = why.to_string();
            text = match err.get(ContextKind::InvalidValue) {
                Some(ContextValue::String(value)) if !why.contains(value.as_str()) => {
                    format!("error: {flag} '{value}': {why}")
                }
                _ => format!("error: {flag}: {why}"),
            };
        }
    }
    // An integer flag given more digits than its type holds: say it is out of range, not a
    // parse failure ("number too large to fit in target type").
    for (from, to) in [
        (
            "number too large to fit in target type",
            "out of range (larger than this flag accepts)",
        ),
        (
            "number too small to fit in target type",
            "out of range (smaller than this flag accepts)",
        ),
    ] {
        text = text.replace(from, to);
    }
    if let Some(ContextValue::Strings(valid)) = err.get(ContextKind::ValidSubcommand) {
        if !text.contains("possible") {
            text.push_str(&format!(" (accepted: {})", valid.join(", ")));
        }
    } else if err.kind() == clap::error::ErrorKind::InvalidSubcommand {
        text.push_str(&format!(" (accepted: {})", subcommands_at_error().join(", ")));
    }
    if text.is_empty() {
        text = "error: bad arguments".into();
    }
    format!("{text} (see --help)")
}

/// The subcommands of the deepest command the arguments name, for "unrecognized subcommand".
fn subcommands_at_error() -> Vec<String> {
    let mut command = cli::command();
    for arg in std::env::args().skip(1) {
        match command.find_subcommand(&arg) {
            Some(sub) => command = sub.clone(),
            None => break,
        }
    }
    command
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .filter(|n| n != "help")
        .collect()
}

fn main() -> ExitCode {
    // The minimal fork helper of `micro proc --variant fork_exit_minimal`: before anything else,
    // so the process stays as small as a freshly exec'd program.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == iopath::micro::proc::HELPER_ARG)
    {
        let args: Vec<String> = std::env::args_os()
            .skip(2)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return ExitCode::from(iopath::micro::proc::helper_main(&args) as u8);
    }
    // `iopath` alone on a terminal opens the launcher; anywhere else it prints the help (exit 2).
    if std::env::args_os().len() == 1 && cli::launcher::available() {
        return exit_code(cli::launcher::run());
    }
    let parsed = match cli::parse() {
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
                    eprintln!("{}", escape(&one_line(&err)));
                    return ExitCode::from(2);
                }
            }
        }
    };
    exit_code(cli::run(parsed))
}

fn exit_code(result: anyhow::Result<()>) -> ExitCode {
    // An unusable database (damaged, read-only) is bad input wherever it was found: exit 2.
    let result = result.map_err(iopath::store::db::classify).map_err(|e| {
        match e.downcast_ref::<iopath::store::StoreError>().is_some() && e.downcast_ref::<UsageError>().is_none() {
            true => anyhow::Error::new(UsageError(e.to_string())),
            false => e,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // Errors can hold stored or remote text (a cell's error, a server's refusal, a path):
        // control characters reach the terminal escaped.
        Err(err) if err.downcast_ref::<UsageError>().is_some() => {
            eprintln!("error: {}", escape(&format!("{err}")));
            ExitCode::from(2)
        }
        Err(err) if err.downcast_ref::<cli::error::ExitWith>().is_some() => {
            eprintln!("error: {err}");
            ExitCode::from(err.downcast_ref::<cli::error::ExitWith>().map_or(1, |e| e.code))
        }
        Err(err) => {
            eprintln!("error: {}", escape(&iopath::format::error_text(&err)));
            ExitCode::from(1)
        }
    }
}
