//! Runs that exist before the command: `iopath run --plan FILE` (a plan saved as TOML, the
//! equivalent command re-parsed) and `iopath run --resume RUN_ID` (the missing cells of a
//! stored run), and the helpers every command that writes the database shares.

use super::error::usage;
use super::run::{self, Destination};
use crate::store::{Store, StoreError};
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["plan", "resume"])))]
pub struct PlanOrResumeArgs {
    /// Run a plan saved as TOML (by the launcher, or written by hand: docs/output.md), with the
    /// same validation as the command it holds; its own --db says where the run is stored.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["db", "psk_file"])]
    pub plan: Option<PathBuf>,
    /// Finish an interrupted or killed run: runs only the cells it is missing (and failed ones).
    #[arg(long, value_name = "RUN_ID", value_parser = super::values::parse_run_id)]
    pub resume: Option<i64>,
    /// The results database of the run to resume [default: $IOPATH_DB, else
    /// iopath-results/iopath.db].
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Show the run in the live terminal view (progress, results so far, warnings).
    #[arg(long)]
    pub live: bool,
    /// With --resume: the pre-shared key of the run's remote ends (the agents of a fleet run,
    /// a `--connect` server), as the command that made the run took it; never stored.
    #[arg(long, value_name = "FILE", requires = "resume")]
    pub psk_file: Option<PathBuf>,
}

pub fn run_stored(args: PlanOrResumeArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.plan {
        let (file, plan, flags) = super::planfile::PlanFile::load(path)?;
        set_command_line(file.command_line());
        return run::measure(&plan, &flags, args.live);
    }
    let Some(id) = args.resume else {
        return Err(usage("run needs --plan FILE or --resume RUN_ID"));
    };
    let db = args.db.clone().unwrap_or_else(crate::store::default_db_path);
    let credentials = crate::net::auth::Credentials::from_file(args.psk_file.as_deref()).map_err(usage)?;
    let plan = run::resume_plan(&db, id)?.with_credentials(credentials);
    let fleet = plan.cases.iter().any(|c| c.get::<crate::case::FleetCase>().is_some());
    if fleet && args.psk_file.is_none() {
        return Err(usage(format!(
            "run {id} is a fleet run: resuming it needs the agents' key, --psk-file KEY (never stored)"
        )));
    }
    let outputs = run::Outputs {
        live: args.live,
        print: run::Print::Summary,
        ..Default::default()
    };
    run::run_workload(&plan, Destination::Resume(&db, id), outputs)
}

/// Store errors are the user pointing at the wrong file or run: exit code 2.
pub(super) fn store_error(err: anyhow::Error) -> anyhow::Error {
    // A damaged, unreadable or read-only database found by a query (not only when opening).
    let err = crate::store::db::classify(err);
    if err.downcast_ref::<StoreError>().is_some() {
        usage(err.to_string())
    } else {
        err
    }
}

/// The command line stored with a run started from a plan file: the plan's own command.
static COMMAND_LINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Store `line` as the command line of the run this process starts (plan files, the launcher).
pub(super) fn set_command_line(line: String) {
    let _ = COMMAND_LINE.set(line);
}

pub(super) fn command_line() -> String {
    if let Some(line) = COMMAND_LINE.get() {
        return line.clone();
    }
    std::env::args()
        .map(|a| {
            if a.contains(char::is_whitespace) || a.is_empty() {
                format!("'{a}'")
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn open_for_writing(db: &Path) -> anyhow::Result<Store> {
    Store::create_or_open(db).map_err(|e| {
        if e.downcast_ref::<StoreError>().is_some() {
            store_error(e)
        } else {
            usage(format!("--db {}: {e:#}", db.display()))
        }
    })
}
