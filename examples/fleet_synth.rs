//! A synthetic fleet run of all directed pairs of N hosts, written into a results database
//! through the store's normal write path (one transaction per cell), to measure storing and
//! reporting a fleet run at scale (docs/benchmarks.md, "Fleet matrix at scale"):
//!
//! ```text
//! cargo run --release --example fleet_synth -- --hosts 1000 --db /tmp/fleet.db [--reps R]
//!     [--slow HOST,HOST…] [--seed S]
//! ```
//!
//! `--slow` takes 0-based host numbers whose pairs run at half the throughput (the matrix must
//! flag them). Prints the run id and the cell count; the database must not hold the run yet
//! (a new run is appended).

use iopath::report::matrix::synth::{generate, Spec};
use iopath::store::Store;
use std::path::PathBuf;
use std::process::ExitCode;

fn usage(text: &str) -> ExitCode {
    eprintln!(
        "error: {text}\nusage: fleet_synth --hosts N --db FILE [--reps R] [--slow HOST,HOST...] [--seed S] \
         (N from 2 to 5000, R from 1 to 100)"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut spec = Spec::new(0);
    let mut db: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let Some(value) = args.next() else {
            return usage(&format!("{flag} needs a value"));
        };
        let number = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: '{v}' is not a whole number"))
        };
        let parsed: Result<(), String> = match flag.as_str() {
            "--hosts" => number(&value).map(|n| spec.hosts = n as usize),
            "--reps" => number(&value).map(|n| spec.repetitions = n as u32),
            "--seed" => number(&value).map(|n| spec.seed = n),
            "--slow" => value
                .split(',')
                .map(|h| number(h).map(|n| n as usize))
                .collect::<Result<Vec<_>, _>>()
                .map(|hosts| spec.slow_hosts = hosts),
            "--db" => {
                db = Some(PathBuf::from(&value));
                Ok(())
            }
            other => Err(format!("unknown option {other}")),
        };
        if let Err(e) = parsed {
            return usage(&e);
        }
    }
    if !(2..=5000).contains(&spec.hosts) {
        return usage(&format!("--hosts {} is out of range", spec.hosts));
    }
    if !(1..=100).contains(&spec.repetitions) {
        return usage(&format!("--reps {} is out of range", spec.repetitions));
    }
    if let Some(h) = spec.slow_hosts.iter().find(|h| **h >= spec.hosts) {
        return usage(&format!("--slow {h}: there are only hosts 0 to {}", spec.hosts - 1));
    }
    let Some(db) = db else {
        return usage("--db is required");
    };
    let mut store = match Store::create_or_open(&db) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    spec.command_line = Some(std::env::args().collect::<Vec<_>>().join(" "));
    let total = spec.cells();
    let start = std::time::Instant::now();
    let step = (total / 20).max(1);
    let result = generate(&mut store, &spec, |done, total| {
        if done % step == 0 || done == total {
            eprintln!("{done} of {total} cells ({:.0} s)", start.elapsed().as_secs_f64());
        }
    });
    match result {
        Ok(id) => {
            println!("run {id}: {total} cells of {} hosts in {}", spec.hosts, db.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
