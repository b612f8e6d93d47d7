//! Plan files: a plan saved as TOML and run again with `iopath sweep --plan FILE`.
//!
//! A plan file stores the argv of the equivalent command (`sweep <workload> <flags>`, without
//! the program name), exactly what the command line would say. Loading re-parses it with the
//! same clap structs and validates it with the same `TryFrom<&Args> for Plan`, so a plan file
//! accepts, refuses and means exactly what the command does; nothing else is in the file to
//! drift. A run started from a plan file stores the equivalent command as its command line
//! (`iopath runs` shows it), so the plan text is kept with the run.
//!
//! ```toml
//! # iopath plan: run it with `iopath sweep --plan FILE`
//! version = 1
//! command = ["sweep", "net-stream", "--mode", "one-copy,zero-copy", "--size", "4K,64K"]
//! ```

use super::error::usage;
use super::sweep::SweepWorkload;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The one format version this iopath reads and writes.
pub const VERSION: u32 = 1;

/// The most bytes a plan file may hold: a plan is a short command line in TOML; a device
/// (`/dev/zero`) or a huge file is refused ("too large"), never read until the memory is gone.
pub const MAX_PLAN_FILE: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// The format version (1).
    pub version: u32,
    /// The equivalent command without the program name: `["sweep", "<workload>", flags...]`.
    pub command: Vec<String>,
}

impl PlanFile {
    pub fn new(command: Vec<String>) -> PlanFile {
        PlanFile {
            version: VERSION,
            command,
        }
    }

    /// The TOML text, with a comment that says how to run it.
    pub fn to_toml(&self) -> anyhow::Result<String> {
        Ok(format!(
            "# iopath plan: run it with `iopath sweep --plan FILE`.\n# {}\n{}",
            self.command_line(),
            toml::to_string(self)?
        ))
    }

    /// The command as a person would type it (arguments with spaces quoted).
    pub fn command_line(&self) -> String {
        std::iter::once("iopath".to_string())
            .chain(self.command.iter().map(|a| shell_word(a)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Parse TOML text (no validation of the command yet: see [`PlanFile::workload`]).
    pub fn parse(text: &str) -> anyhow::Result<PlanFile> {
        let file: PlanFile = toml::from_str(text).map_err(|e| anyhow::anyhow!("{}", e.message()))?;
        if file.version != VERSION {
            anyhow::bail!(
                "version {} is not one this iopath reads (accepted: {VERSION})",
                file.version
            );
        }
        Ok(file)
    }

    /// The workload and its flags, parsed by the same clap structs as the command line.
    pub fn workload(&self) -> anyhow::Result<SweepWorkload> {
        let workloads = super::sweep::workload_names(true);
        match (self.command.first().map(String::as_str), self.command.get(1)) {
            (Some("sweep"), Some(w)) if workloads.contains(w) => {}
            _ => anyhow::bail!(
                "command must start with \"sweep\" and a workload ({}); got {:?}",
                workloads.join(", "),
                self.command.iter().take(2).collect::<Vec<_>>()
            ),
        }
        let cli = <super::Cli as clap::Parser>::try_parse_from(
            std::iter::once("iopath").chain(self.command.iter().map(String::as_str)),
        )
        .map_err(|e| anyhow::anyhow!("{}", clap_line(&e)))?;
        match cli.command {
            super::Command::Sweep(args) => match args.workload {
                Some(w) => Ok(w),
                None => anyhow::bail!("the command names no workload"),
            },
            _ => unreachable!("the command starts with sweep"),
        }
    }

    /// Read and check a plan file (at most [`MAX_PLAN_FILE`] bytes); every problem is a usage error naming the file.
    pub fn load(path: &Path) -> anyhow::Result<(PlanFile, SweepWorkload)> {
        let bytes = crate::sys::input::read_bounded(path, MAX_PLAN_FILE)
            .map_err(|e| usage(format!("--plan {}: {e}", path.display())))?;
        let text = String::from_utf8(bytes).map_err(|_| {
            usage(format!(
                "--plan {}: it is not UTF-8 text (a plan file is TOML)",
                path.display()
            ))
        })?;
        let file = PlanFile::parse(&text).map_err(|e| usage(format!("--plan {}: {e}", path.display())))?;
        let workload = file
            .workload()
            .map_err(|e| usage(format!("--plan {}: {e}", path.display())))?;
        Ok((file, workload))
    }

    /// Write the plan to `path` (whole: a temporary file renamed into place).
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let text = self.to_toml()?;
        // Like every output: never over an SQLite file, whole or absent, a device written in place.
        crate::store::output::check_path(path, crate::store::output::PathUse::Output, None)
            .map_err(super::sweep::store_error)?;
        crate::store::output::write_atomic(path, text.as_bytes()).map_err(super::sweep::store_error)
    }
}

/// clap's error as one line without the usage block.
fn clap_line(err: &clap::Error) -> String {
    let rendered = err.render().to_string();
    rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// One argument as a POSIX shell reads it back: quoted when it holds anything special.
pub fn shell_word(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ",._-/:=@%+".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &str) -> Vec<String> {
        words.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn a_plan_round_trips_through_toml() {
        let plan = PlanFile::new(args("sweep fake --cells ok:3,ok:4 --reps 2 --name my run"));
        let text = plan.to_toml().unwrap();
        assert!(text.contains("version = 1"), "{text}");
        assert_eq!(PlanFile::parse(&text).unwrap(), plan);
    }

    #[test]
    fn the_command_is_validated_as_the_command_line_is() {
        let ok = PlanFile::new(args("sweep fake --cells ok:3 --reps 2"));
        let w = ok.workload().unwrap();
        let SweepWorkload::Fake(f) = w else { panic!("not fake") };
        assert_eq!((f.cells.as_str(), f.run.reps), ("ok:3", 2));
        let bad = PlanFile::new(args("sweep fake --reps 0"));
        let err = bad.workload().unwrap_err().to_string();
        assert!(err.contains("--reps"), "{err}");
        let stream = PlanFile::new(args("sweep net-stream --size 4K --mode nope"));
        let err = stream.workload().unwrap_err().to_string();
        assert!(err.contains("nope"), "{err}");
    }

    #[test]
    fn only_sweep_workloads_are_accepted() {
        for words in ["runs", "sweep", "sweep --resume 1", "net stream --size 4K"] {
            let err = PlanFile::new(args(words)).workload().unwrap_err().to_string();
            assert!(err.contains("must start with"), "{words}: {err}");
        }
    }

    #[test]
    fn unknown_keys_and_versions_are_refused() {
        assert!(PlanFile::parse("version = 1\ncommand = []\nextra = 2\n").is_err());
        let err = PlanFile::parse("version = 9\ncommand = [\"sweep\"]\n").unwrap_err();
        assert!(err.to_string().contains("version 9"), "{err}");
        assert!(PlanFile::parse("command = [\"sweep\"]\n").is_err());
    }

    #[test]
    fn command_lines_quote_what_the_shell_would_split() {
        let plan = PlanFile::new(vec!["sweep".into(), "fake".into(), "--name".into(), "a b".into()]);
        assert_eq!(plan.command_line(), "iopath sweep fake --name 'a b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
    }
}
