//! What every measuring command shares, through the one plan -> runner -> sinks path: the run
//! flags, failed cells, and Ctrl-C. Driven with the hidden deterministic `fake` workload, whose
//! cells return, sleep, fail or panic on command.

mod common;

use common::{
    finish_within, iopath, json_records, sigint, spawn, stderr, stdout, stored_cells, temp_db, usage_error,
    wait_for_cells,
};
use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

const RUN_FLAGS: [&str; 8] = [
    "--reps",
    "--shuffle",
    "--seed",
    "--warmup-cell",
    "--name",
    "--db",
    "--json",
    "--csv",
];

#[test]
fn every_measuring_command_and_its_sweep_take_the_same_run_flags() {
    let commands: [&[&str]; 8] = [
        &["net", "stream"],
        &["servers"],
        &["micro", "syscall"],
        &["fake"],
        &["sweep", "net-stream"],
        &["sweep", "servers"],
        &["sweep", "micro", "syscall"],
        &["sweep", "fake"],
    ];
    for command in commands {
        let out = iopath().args(command).arg("--help").output().unwrap();
        assert!(out.status.success(), "{command:?}: {}", stderr(&out));
        let help = stdout(&out);
        for flag in RUN_FLAGS {
            assert!(help.contains(flag), "{command:?} --help lacks {flag}");
        }
    }
}

#[test]
fn the_old_sweep_flags_are_gone() {
    for args in [
        &["fake", "--no-warmup-cell"][..],
        &["sweep", "fake", "--no-warmup-cell"],
        &["sweep", "micro", "--bench", "syscall"],
        &["sweep", "micro", "syscall", "--small"],
        &["servers", "--workload", "echo:64"],
        &["servers", "--repetitions", "2"],
    ] {
        let err = usage_error(args);
        assert!(err.contains("unexpected argument"), "{args:?}: {err}");
    }
}

#[test]
fn seed_needs_shuffle() {
    let err = usage_error(&["fake", "--seed", "7"]);
    assert!(err.contains("--shuffle"), "{err}");
}

/// The output flags are sinks and combine; the one rule refuses, in one line and before
/// anything runs or is stored, only what would write standard output twice (or `--wide`,
/// which shapes a table nobody prints) — in a direct command, a sweep and a plan file alike
/// (docs/output.md).
#[test]
fn two_outputs_on_stdout_are_refused_in_one_line() {
    let (dir, db) = temp_db("o.db");
    let db_arg = db.to_str().unwrap();
    let refused: [(&[&str], &str); 5] = [
        (
            &["fake", "--json", "--csv"],
            "--json and --csv both print the records on standard output",
        ),
        (
            &["fake", "--csv", "--json-stream"],
            "--csv and --json-stream both print",
        ),
        (
            &["fake", "--live", "--json-stream"],
            "--live and --json-stream both write standard output",
        ),
        (
            &["fake", "--wide", "--json"],
            "--wide widens the table, and --json prints",
        ),
        (
            &["sweep", "fake", "--json-stream", "--csv", "--db", db_arg],
            "--csv and --json-stream both print",
        ),
    ];
    for (args, says) in refused {
        let line = usage_error(args);
        assert!(line.contains(says), "{args:?}: {line}");
    }
    let plan = dir.path().join("p.toml");
    std::fs::write(
        &plan,
        format!("version = 1\ncommand = [\"sweep\", \"fake\", \"--json-stream\", \"--db\", \"{db_arg}\"]\n"),
    )
    .unwrap();
    let line = usage_error(&["sweep", "--plan", plan.to_str().unwrap(), "--live"]);
    assert!(line.contains("--live and --json-stream"), "{line}");
    assert!(!db.exists(), "a refused run created the database");

    // What combines runs: the records print at the end, the database keeps them and the
    // store's sink closed the run before they printed.
    let out = iopath()
        .args(["fake", "--cells", "ok:3", "--reps", "2", "--csv", "--db", db_arg])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).lines().count(),
        3,
        "a header and a row per cell: {}",
        stdout(&out)
    );
    assert_eq!(stored_cells(&db), 2);
    assert_eq!(
        common::count(&db, "SELECT count(*) FROM runs WHERE status = 'complete'"),
        1
    );
}

#[test]
fn reps_repeat_every_case_as_a_cell_of_its_own() {
    let out = iopath()
        .args(["fake", "--cells", "ok:5,ok:7", "--reps", "3", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let records = json_records(&out);
    let cells: Vec<(String, u64)> = records
        .iter()
        .map(|r| {
            (
                r["label"].as_str().unwrap().to_string(),
                r["repetition"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, u64)> = (0..3)
        .flat_map(|rep| [("fake#0 ok:5".to_string(), rep), ("fake#1 ok:7".to_string(), rep)])
        .collect();
    assert_eq!(cells, expected, "repetition-major order");
}

#[test]
fn the_same_seed_gives_the_same_shuffled_order() {
    let order = |seed: &str| -> Vec<String> {
        let out = iopath()
            .args([
                "fake",
                "--cells",
                "ok:1,ok:2,ok:3,ok:4",
                "--reps",
                "3",
                "--shuffle",
                "--seed",
                seed,
                "--json",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        json_records(&out)
            .iter()
            .map(|r| format!("{} rep {}", r["label"], r["repetition"]))
            .collect()
    };
    let first = order("42");
    assert_eq!(first.len(), 12);
    assert_eq!(first, order("42"));
    let mut sorted = first.clone();
    sorted.sort_by_key(|c| (c.rsplit(' ').next().unwrap().to_string(), c.clone()));
    assert_ne!(first, sorted, "seed 42 left the repetition-major order as it was");
}

/// Failed cells are printed with the others (JSON records carry their error) and the run
/// exits 1.
#[test]
fn failed_cells_are_printed_with_the_others_and_exit_1() {
    let out = iopath()
        .args(["fake", "--cells", "ok,fail", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let records = json_records(&out);
    assert_eq!(records.len(), 2, "{records:?}");
    assert!(records[0]["error"].is_null(), "{records:?}");
    assert_eq!(records[1]["error"], "fake failure (as asked)", "{records:?}");
    assert!(stderr(&out).contains("1 of 2 cells failed"), "{}", stderr(&out));
}

#[test]
fn a_panicking_cell_is_a_failed_cell_and_the_run_goes_on() {
    let out = iopath().args(["fake", "--cells", "panic,ok:3"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("fake#1 ok:3"), "the next cell ran: {text}");
    assert!(
        text.contains("failed: fake#0 panic rep 0: the workload panicked: fake panic (as asked)"),
        "{text}"
    );
}

/// Ctrl-C during a direct command with --db: the cell in flight is discarded, the finished
/// one is printed and stored, stderr says how to continue, exit 0.
#[test]
fn ctrl_c_prints_and_stores_the_finished_cells_and_exits_0() {
    let (_dir, db) = temp_db("iopath.db");
    let child = spawn(&[
        "fake",
        "--cells",
        "ok,sleep:30s,ok",
        "--reps",
        "2",
        "--json",
        "--db",
        db.to_str().unwrap(),
    ]);
    wait_for_cells(&db, 1, Duration::from_secs(20));
    sigint(&child);
    let out = finish_within(child, Duration::from_secs(20));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("stopped: 1 cells finished; the cell cut short (fake#1 sleep:30000ms rep 0) was discarded"),
        "{err}"
    );
    assert!(
        err.contains(&format!("Continue with: iopath run --resume 1 --db {}", db.display())),
        "{err}"
    );
    let records = json_records(&out);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["label"], "fake#0 ok:1");
    assert_eq!(stored_cells(&db), 1);
}

/// Ctrl-C without --db: the run is in the default database (`IOPATH_DB` here), and stderr
/// says how to resume it from there.
#[test]
fn ctrl_c_without_db_stores_in_the_default_database_and_says_how_to_resume() {
    let mut child = spawn(&["fake", "--cells", "sleep:30s,ok", "--json"]);
    // The plan's line comes after the stop handler is installed, before the cell ends (after
    // the line of what the plan can detect).
    let mut reader = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("cells, about") {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "no plan line");
    }
    assert!(line.contains("2 cells, about 30 s"), "{line}");
    // Whether the signal lands before or inside the first cell, nothing finished.
    sigint(&child);
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    let out = finish_within(child, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(0), "{rest}");
    assert!(rest.contains("stopped: 0 cells finished"), "{rest}");
    let db = common::own_db();
    assert!(
        rest.contains(&format!("Continue with: iopath run --resume 1 --db {}", db.display())),
        "{rest}"
    );
    assert!(json_records(&out).is_empty());
    assert_eq!(
        common::count(&db, "SELECT count(*) FROM runs WHERE status = 'interrupted'"),
        1
    );
}
