//! Plan files: a plan saved as TOML and run again with `iopath run --plan FILE`.
//!
//! A plan file stores the argv of the equivalent measuring command (`net stream <flags>`,
//! without the program name), exactly what the command line would say; a file of an earlier
//! version (`sweep net-stream <flags>`) reads in today's words (`cli::new_spelling`). Loading re-parses it with the
//! same clap structs and validates it with the same `TryFrom<&Args> for Plan`, so a plan file
//! accepts, refuses and means exactly what the command does; nothing else is in the file to
//! drift. A run started from a plan file stores the equivalent command as its command line
//! (`iopath runs` shows it), so the plan text is kept with the run.
//!
//! ```toml
//! # iopath plan: run it with `iopath run --plan FILE`
//! version = 1
//! command = ["net", "stream", "--mode", "one-copy,zero-copy", "--size", "4K,64K"]
//! ```

use super::error::usage;
use super::run::RunFlags;
use crate::sweep::Plan;
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
    /// The equivalent measuring command without the program name: `["net", "stream", flags...]`.
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
            "# iopath plan: run it with `iopath run --plan FILE`.\n# {}\n{}",
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

    /// Parse TOML text (no validation of the command yet: see [`PlanFile::plan`]).
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

    /// The plan and the run flags of the command, parsed and validated by the same clap
    /// structs and checks as the command line.
    pub fn plan(&self) -> anyhow::Result<(Plan, RunFlags)> {
        let argv = super::new_spelling(
            std::iter::once("iopath")
                .chain(self.command.iter().map(String::as_str))
                .map(std::ffi::OsString::from)
                .collect(),
        );
        let words: Vec<String> = argv[1..].iter().map(|w| w.to_string_lossy().into_owned()).collect();
        let names = |command: &String| {
            let command: Vec<&str> = command.split(' ').collect();
            words.len() >= command.len() && command.iter().zip(&words).all(|(a, b)| a == b)
        };
        let measuring = super::measuring_commands(true).iter().any(names);
        if !measuring {
            anyhow::bail!(
                "command must be a measuring command ({}); got {:?}",
                super::measuring_commands(false).join(", "),
                self.command.iter().take(2).collect::<Vec<_>>()
            );
        }
        let cli = super::parse_from(argv).map_err(|e| anyhow::anyhow!("{}", clap_line(&e)))?;
        let (plan, flags) = super::measuring(&cli.command).expect("a measuring command")?;
        Ok((plan, flags.clone()))
    }

    /// Read and check a plan file (at most [`MAX_PLAN_FILE`] bytes): the file, its plan and
    /// its run flags; every problem is a usage error naming the file.
    pub fn load(path: &Path) -> anyhow::Result<(PlanFile, Plan, RunFlags)> {
        let bytes = crate::sys::input::read_bounded(path, MAX_PLAN_FILE)
            .map_err(|e| usage(format!("--plan {}: {e}", path.display())))?;
        let text = String::from_utf8(bytes).map_err(|_| {
            usage(format!(
                "--plan {}: it is not UTF-8 text (a plan file is TOML)",
                path.display()
            ))
        })?;
        let file = PlanFile::parse(&text).map_err(|e| usage(format!("--plan {}: {e}", path.display())))?;
        let (plan, flags) = file
            .plan()
            .map_err(|e| usage(format!("--plan {}: {e}", path.display())))?;
        Ok((file, plan, flags))
    }

    /// Write the plan to `path` (whole: a temporary file renamed into place).
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let text = self.to_toml()?;
        // Like every output: never over an SQLite file, whole or absent, a device written in place.
        crate::store::output::check_path(path, crate::store::output::PathUse::Output, None)
            .map_err(super::stored::store_error)?;
        crate::store::output::write_atomic(path, text.as_bytes()).map_err(super::stored::store_error)
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
        let plan = PlanFile::new(args("fake --cells ok:3,ok:4 --reps 2 --name my run"));
        let text = plan.to_toml().unwrap();
        assert!(text.contains("version = 1"), "{text}");
        assert_eq!(PlanFile::parse(&text).unwrap(), plan);
    }

    #[test]
    fn the_command_is_validated_as_the_command_line_is() {
        let ok = PlanFile::new(args("fake --cells ok:3 --reps 2"));
        let (plan, flags) = ok.plan().unwrap();
        assert_eq!((plan.cases.len(), flags.reps), (1, 2));
        let bad = PlanFile::new(args("fake --reps 0"));
        let err = bad.plan().unwrap_err().to_string();
        assert!(err.contains("--reps"), "{err}");
        let stream = PlanFile::new(args("net stream --size 4K --mode nope"));
        let err = stream.plan().unwrap_err().to_string();
        assert!(err.contains("nope"), "{err}");
    }

    /// A plan file of an earlier version (`sweep net-stream …`) still runs, as the command
    /// it names today.
    #[test]
    fn a_plan_file_of_the_old_sweep_spelling_still_loads() {
        let old = PlanFile::new(args("sweep net-stream --mode one-copy --size 4K,64K --reps 2"));
        let (plan, flags) = old.plan().unwrap();
        assert_eq!((plan.cases.len(), flags.reps), (2, 2));
        assert_eq!(plan.cases[0].workload(), "net-stream");
        let micro = PlanFile::new(args("sweep micro syscall"));
        assert_eq!(micro.plan().unwrap().0.cases[0].workload(), "micro");
    }

    #[test]
    fn only_measuring_commands_are_accepted() {
        for words in [
            "runs",
            "sweep",
            "sweep --resume 1",
            "net serve",
            "micro",
            "quick",
            "nope",
        ] {
            let err = PlanFile::new(args(words)).plan().unwrap_err().to_string();
            assert!(err.contains("must be a measuring command"), "{words}: {err}");
            assert!(err.contains("net stream, "), "{words}: {err}");
        }
    }

    #[test]
    fn unknown_keys_and_versions_are_refused() {
        assert!(PlanFile::parse("version = 1\ncommand = []\nextra = 2\n").is_err());
        let err = PlanFile::parse("version = 9\ncommand = [\"net\"]\n").unwrap_err();
        assert!(err.to_string().contains("version 9"), "{err}");
        assert!(PlanFile::parse("command = [\"net\"]\n").is_err());
    }

    #[test]
    fn command_lines_quote_what_the_shell_would_split() {
        let plan = PlanFile::new(vec!["fake".into(), "--name".into(), "a b".into()]);
        assert_eq!(plan.command_line(), "iopath fake --name 'a b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
    }
}
