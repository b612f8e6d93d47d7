//! `iopath merge OUT.db IN.db…`: copy every run of the input databases into OUT (created when
//! missing) with new ids and their provenance; a run already in OUT is reported as a duplicate
//! and not copied. The inputs are opened read-only and never changed.

use super::error::usage;
use super::stored::{open_for_writing, store_error};
use crate::store::merge::{same_file, Merged};
use crate::store::Store;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The database the runs are copied into (created with the current schema when missing).
    #[arg(value_name = "OUT.db")]
    pub out: PathBuf,
    /// The iopath databases whose runs are copied (read, never changed; an older schema is
    /// read as it is).
    #[arg(value_name = "IN.db", required = true)]
    pub inputs: Vec<PathBuf>,
}

pub fn run(args: MergeArgs) -> anyhow::Result<()> {
    for input in &args.inputs {
        if same_file(&args.out, input) || args.out == *input {
            return Err(usage(format!(
                "{} is both the output and an input ({}: the same file); merge into a database that is none of the inputs",
                args.out.display(),
                input.display()
            )));
        }
    }
    // Every input is checked before OUT is created or written.
    let mut inputs: Vec<Store> = args
        .inputs
        .iter()
        .map(|path| {
            Store::open_merge_input(path).map_err(store_error).map_err(|e| {
                match e.downcast_ref::<super::UsageError>() {
                    Some(_) => usage(format!("input {}: {e}", path.display())),
                    None => e,
                }
            })
        })
        .collect::<anyhow::Result<_>>()?;
    // OUT made by this merge and left without a run (a damaged input found while copying the
    // first one) is removed again, with SQLite's files beside it: no empty database is left.
    let created = !args.out.exists();
    let mut out = open_for_writing(&args.out)?;
    let result = merge_into(&mut out, &mut inputs, &args);
    if result.is_err() && created && out.run_identities().is_ok_and(|runs| runs.is_empty()) {
        drop(out);
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut name = args.out.clone().into_os_string();
            name.push(suffix);
            let _ = std::fs::remove_file(name);
        }
    }
    result
}

/// Copy every input's runs into `out`, saying what became of each.
fn merge_into(out: &mut Store, inputs: &mut [Store], args: &MergeArgs) -> anyhow::Result<()> {
    let (mut copied, mut duplicates, mut in_progress) = (0usize, 0usize, 0usize);
    let count = inputs.len();
    // The identities of the runs OUT holds, computed once (a large run's cases are hashed).
    let mut known = out.run_identities().map_err(store_error)?;
    for input in inputs.iter_mut() {
        let name = input.path().display().to_string();
        for outcome in out.merge_from(input, &mut known).map_err(store_error)? {
            match outcome {
                Merged::Copied { source_run, run, host } => {
                    copied += 1;
                    crate::say!(
                        "{name}: run {source_run} copied as run {run} (host {})",
                        host.as_deref().unwrap_or("not recorded")
                    )?;
                }
                Merged::InProgress { source_run } => {
                    in_progress += 1;
                    crate::say!(
                        "{name}: run {source_run} is being run by another iopath process right now: not copied \
                         (merge again when it has ended)"
                    )?;
                }
                Merged::Duplicate { source_run, existing } => {
                    duplicates += 1;
                    crate::say!(
                        "{name}: run {source_run} is already run {existing} of {} (a duplicate: not copied)",
                        args.out.display()
                    )?;
                }
            }
        }
    }
    let running = match in_progress {
        0 => String::new(),
        n => format!(", {} in progress not copied", plural(n, "run")),
    };
    crate::say!(
        "merged {} from {} into {}; {} not copied{running}",
        plural(copied, "run"),
        plural(count, "database"),
        args.out.display(),
        plural(duplicates, "duplicate")
    )?;
    Ok(())
}

fn plural(n: usize, word: &str) -> String {
    match n {
        1 => format!("1 {word}"),
        n => format!("{n} {word}s"),
    }
}
