//! `iopath merge OUT IN…`: every run copied with new ids and its provenance, cells and metrics
//! identical; a run already there refused as a duplicate (exit 0, reported); OUT among the
//! inputs (by any spelling or link) and inputs that are not iopath databases refused (exit 2)
//! before anything is written; an input of an older schema read as it is, never changed.

mod common;

use common::{count, iopath, stderr, stdout, usage_error};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

fn run(args: &[&str]) -> Output {
    iopath().args(args).timeout(Duration::from_secs(120)).output().unwrap()
}

fn ok(args: &[&str]) -> Output {
    let out = run(args);
    assert!(out.status.success(), "iopath {args:?}: {}", stderr(&out));
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A database with one fake run per (cells, repetitions).
fn fake_db(path: &Path, runs: &[(&str, &str)]) {
    for (cells, reps) in runs {
        // Exit 1 when a cell failed (as asked), the run still stored.
        let out = run(&["sweep", "fake", "--cells", cells, "--reps", reps, "--db", s(path)]);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    }
}

/// Run `id`'s records as `export --format json` prints them, without the run id (which merge
/// changes): the cases, every cell, metric, source, warning and error.
fn records(db: &Path, id: i64) -> Vec<Value> {
    let out = ok(&["export", &id.to_string(), "--format", "json", "--db", s(db)]);
    let mut v: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    for r in &mut v {
        r.as_object_mut().unwrap().remove("run_id");
    }
    v
}

/// The provenance stored with run `id`: source file, original id, host.
fn provenance(db: &Path, id: i64) -> (String, i64, Option<String>) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(
        "SELECT source_file, source_run_id, source_host FROM runs WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

fn absolute(p: &Path) -> String {
    std::fs::canonicalize(p).unwrap().display().to_string()
}

struct Two {
    _dir: tempfile::TempDir,
    a: PathBuf,
    b: PathBuf,
    out: PathBuf,
}

/// a.db: one run of three cases (one failing), 3 repetitions; b.db: two runs.
fn two_databases() -> Two {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, out) = (
        dir.path().join("a.db"),
        dir.path().join("b.db"),
        dir.path().join("out.db"),
    );
    fake_db(&a, &[("ok:5,ok:7,fail", "3")]);
    fake_db(&b, &[("ok:1~1", "6"), ("ok:9", "2")]);
    Two { _dir: dir, a, b, out }
}

#[test]
fn every_run_is_copied_with_its_provenance_and_identical_cells() {
    let t = two_databases();
    let out = ok(&["merge", s(&t.out), s(&t.a), s(&t.b)]);
    let text = stdout(&out);
    assert!(text.contains("run 1 copied as run 1"), "{text}");
    let last = format!(
        "merged 3 runs from 2 databases into {}; 0 duplicates not copied\n",
        s(&t.out)
    );
    assert!(text.ends_with(&last), "{text}");
    assert_eq!(count(&t.out, "SELECT count(*) FROM runs"), 3);
    let host = hostname();
    assert_eq!(provenance(&t.out, 1), (absolute(&t.a), 1, Some(host.clone())));
    assert_eq!(provenance(&t.out, 2), (absolute(&t.b), 1, Some(host.clone())));
    assert_eq!(provenance(&t.out, 3), (absolute(&t.b), 2, Some(host)));
    assert_eq!(records(&t.out, 1), records(&t.a, 1));
    assert_eq!(records(&t.out, 2), records(&t.b, 1));
    assert_eq!(records(&t.out, 3), records(&t.b, 2));
    // The run rows themselves: command line, start, status, settings, machine, environment.
    let row = |db: &Path, id: i64| -> Vec<String> {
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.query_row(
            "SELECT name, command_line, tool_version, started_at, ended_at, status, repetitions, shuffle, seed,
             warmup_cell, machine_json, environment_json FROM runs WHERE id = ?1",
            [id],
            |r| {
                (0..12)
                    .map(|i| r.get::<_, rusqlite::types::Value>(i).map(|v| format!("{v:?}")))
                    .collect()
            },
        )
        .unwrap()
    };
    assert_eq!(row(&t.out, 3), row(&t.b, 2));
    // The reading commands work on the result.
    let runs = stdout(&ok(&["runs", "--json", "--db", s(&t.out)]));
    let runs: Vec<Value> = serde_json::from_str(&runs).unwrap();
    assert_eq!(runs.len(), 3);
    assert_eq!(
        (runs[0]["cells_ok"].as_i64(), runs[0]["cells_failed"].as_i64()),
        (Some(6), Some(3))
    );
    assert_eq!(runs[2]["source"]["file"], absolute(&t.b));
    assert_eq!(runs[2]["source"]["run_id"], 2);
    assert_eq!(runs[2]["source"]["host"], hostname());
    let native = stdout(&ok(&["runs", "--json", "--db", s(&t.a)]));
    assert!(serde_json::from_str::<Value>(&native).unwrap()[0]["source"].is_null());
    ok(&["compare", "2", "3", "--db", s(&t.out)]);
    let html = t.out.with_file_name("merged.html");
    ok(&["report", "1", "--db", s(&t.out), "-o", s(&html)]);
    assert!(html.exists());
    // A merged run is not resumed here: its cells were measured on another host.
    let err = usage_error(&["sweep", "--resume", "1", "--db", s(&t.out)]);
    assert!(err.contains("copied by `iopath merge` from run 1 of"), "{err}");
    // The inputs are not changed into the new schema.
    for input in [&t.a, &t.b] {
        assert_eq!(
            count(input, "SELECT count(*) FROM runs WHERE source_identity IS NOT NULL"),
            0
        );
    }
}

#[test]
fn a_run_already_merged_is_refused_as_a_duplicate() {
    let t = two_databases();
    ok(&["merge", s(&t.out), s(&t.a)]);
    // Again, with b.db new: a's run is a duplicate, b's runs are copied; exit 0.
    let out = ok(&["merge", s(&t.out), s(&t.a), s(&t.b)]);
    let text = stdout(&out);
    assert!(
        text.contains(&format!("{}: run 1 is already run 1 of", s(&t.a))),
        "{text}"
    );
    assert!(text.contains("merged 2 runs from 2 databases"), "{text}");
    assert!(text.contains("1 duplicate not copied"), "{text}");
    assert_eq!(count(&t.out, "SELECT count(*) FROM runs"), 3);
    // The same input twice in one merge: the second time everything is a duplicate.
    let twice = t.out.with_file_name("twice.db");
    let text = stdout(&ok(&["merge", s(&twice), s(&t.b), s(&t.b)]));
    assert!(text.contains("2 duplicates not copied"), "{text}");
    assert_eq!(count(&twice, "SELECT count(*) FROM runs"), 2);
    // A merged database merged on: its runs keep their first provenance, so merging one of
    // their sources beside it finds them there.
    let again = t.out.with_file_name("again.db");
    ok(&["merge", s(&again), s(&t.out)]);
    assert_eq!(provenance(&again, 2), (absolute(&t.b), 1, Some(hostname())));
    let text = stdout(&ok(&["merge", s(&again), s(&t.a), s(&t.b)]));
    assert!(
        text.contains("merged 0 runs") && text.contains("3 duplicates"),
        "{text}"
    );
    // A database holding a run measured into it, merged back from a copy: a duplicate too.
    let text = stdout(&ok(&["merge", s(&t.a), s(&again)]));
    assert!(
        text.contains(&format!("{}: run 1 is already run 1 of", s(&again))),
        "{text}"
    );
    assert_eq!(count(&t.a, "SELECT count(*) FROM runs"), 3);
}

#[test]
fn the_output_among_the_inputs_and_files_that_are_not_iopath_databases_are_refused() {
    let t = two_databases();
    ok(&["merge", s(&t.out), s(&t.a)]);
    let before = std::fs::read(&t.out).unwrap();
    let dir = t.out.parent().unwrap();
    let link = dir.join("link.db");
    std::os::unix::fs::symlink(&t.out, &link).unwrap();
    let hard = dir.join("hard.db");
    std::fs::hard_link(&t.out, &hard).unwrap();
    let dotted = format!("{}/./out.db", dir.display());
    for alias in [s(&t.out), s(&link), s(&hard), dotted.as_str()] {
        let err = usage_error(&["merge", s(&t.out), s(&t.b), alias]);
        assert!(err.contains("is both the output and an input"), "{err}");
        let err = usage_error(&["merge", alias, s(&t.out)]);
        assert!(err.contains("is both the output and an input"), "{err}");
    }
    assert_eq!(
        count(&t.out, "SELECT count(*) FROM runs"),
        1,
        "b.db was merged before the refusal"
    );
    assert!(std::fs::read(&t.out).unwrap() == before);

    // Inputs that are not iopath databases: refused before OUT is made.
    let fresh = dir.join("fresh.db");
    let text = dir.join("notes.txt");
    std::fs::write(&text, "not a database").unwrap();
    let foreign = dir.join("foreign.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    for (input, says) in [
        (text.clone(), "not an SQLite database"),
        (foreign, "of another program"),
        (dir.join("missing.db"), "no results database"),
        (dir.to_path_buf(), "not a regular file"),
    ] {
        let err = usage_error(&["merge", s(&fresh), s(&t.a), s(&input)]);
        assert!(
            err.contains(&format!("input {}", input.display())) && err.contains(says),
            "{err}"
        );
        assert!(!fresh.exists(), "OUT was created although an input was refused");
    }
    // An OUT that is not an iopath database is refused as every writer refuses it.
    let err = usage_error(&["merge", s(&text), s(&t.a)]);
    assert!(err.contains("not an SQLite database"), "{err}");
    assert_eq!(std::fs::read_to_string(&text).unwrap(), "not a database");
    // No input at all.
    let err = usage_error(&["merge", s(&fresh)]);
    assert!(err.contains("IN.db"), "{err}");
}

/// A database written before runs had provenance (schema 1) is read as it is: merged, and not
/// changed.
#[test]
fn an_input_of_the_older_schema_is_read_without_being_changed() {
    let t = two_databases();
    {
        let conn = rusqlite::Connection::open(&t.a).unwrap();
        conn.execute_batch(
            "DROP INDEX runs_by_source_identity;
             ALTER TABLE runs DROP COLUMN source_file; ALTER TABLE runs DROP COLUMN source_run_id;
             ALTER TABLE runs DROP COLUMN source_host; ALTER TABLE runs DROP COLUMN source_identity;
             ALTER TABLE runs DROP COLUMN merged_at; PRAGMA user_version = 1;
             PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE;",
        )
        .unwrap();
    }
    let before = std::fs::read(&t.a).unwrap();
    // Readers refuse it as written by an older iopath; merge reads it.
    let err = usage_error(&["runs", "--db", s(&t.a)]);
    assert!(err.contains("older iopath"), "{err}");
    ok(&["merge", s(&t.out), s(&t.a)]);
    assert_eq!(provenance(&t.out, 1), (absolute(&t.a), 1, Some(hostname())));
    assert!(std::fs::read(&t.a).unwrap() == before, "merge changed its input");
    ok(&["runs", "--upgrade", "--db", s(&t.a)]);
    assert_eq!(records(&t.out, 1), records(&t.a, 1));
}

/// A run another process is executing right now is not copied (its cells are still coming, and
/// a copy would stand for the finished run); once it has ended it is.
#[test]
fn a_run_being_executed_is_left_until_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let (a, out) = (dir.path().join("a.db"), dir.path().join("out.db"));
    let child = common::spawn(&["sweep", "fake", "--cells", "ok:1,sleep:60s", "--db", s(&a)]);
    common::wait_for_cells(&a, 1, Duration::from_secs(60));
    let text = stdout(&ok(&["merge", s(&out), s(&a)]));
    assert!(
        text.contains("run 1 is being run by another iopath process right now"),
        "{text}"
    );
    assert!(
        text.contains("merged 0 runs") && text.contains("1 run in progress not copied"),
        "{text}"
    );
    assert_eq!(count(&out, "SELECT count(*) FROM runs"), 0);
    common::sigint(&child);
    let stopped = common::finish_within(child, Duration::from_secs(30));
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    let text = stdout(&ok(&["merge", s(&out), s(&a)]));
    assert!(text.contains("run 1 copied as run 1"), "{text}");
    assert_eq!(records(&out, 1), records(&a, 1));
}

/// Exit 2 with one line on stderr naming `file` and saying "damaged".
fn assert_damaged(out: &Output, file: &Path, what: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert!(err.contains("damaged") && err.contains(s(file)), "{what}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
}

/// Issue 31, item 4: a stored source identity is checked against the run's content, never
/// obeyed: a tampered one neither makes a genuine run a "duplicate" nor lets a run in twice.
#[test]
fn a_stored_identity_that_is_not_the_contents_is_damaged_not_obeyed() {
    let t = two_databases();
    let merged_b = t.out.with_file_name("merged-b.db");
    ok(&["merge", s(&merged_b), s(&t.b)]);
    ok(&["merge", s(&t.out), s(&t.a)]);
    let identity_of_a: String = rusqlite::Connection::open(&t.out)
        .unwrap()
        .query_row("SELECT source_identity FROM runs WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    for (id, forged) in [
        (1, identity_of_a.clone()),
        (2, "0".repeat(64)),
        (1, identity_of_a.to_uppercase()),
    ] {
        let tampered = t.out.with_file_name(format!("tampered-{id}.db"));
        std::fs::copy(&merged_b, &tampered).unwrap();
        rusqlite::Connection::open(&tampered)
            .unwrap()
            .execute(
                "UPDATE runs SET source_identity = ?1 WHERE id = ?2",
                rusqlite::params![forged, id],
            )
            .unwrap();
        let out = run(&["merge", s(&t.out), s(&tampered)]);
        assert_damaged(&out, &tampered, &format!("run {id} with identity {forged}"));
        assert_eq!(
            count(&t.out, "SELECT count(*) FROM runs"),
            1,
            "nothing copied from a tampered input"
        );
    }
    // Untouched, the same database merges as before.
    let text = stdout(&ok(&["merge", s(&t.out), s(&merged_b)]));
    assert!(text.contains("merged 2 runs"), "{text}");
}

/// Issue 31, item 7: a damaged input is named, and an output the merge created is not left
/// behind empty.
#[test]
fn a_damaged_input_is_named_and_leaves_no_empty_output() {
    let t = two_databases();
    let bytes = std::fs::read(&t.b).unwrap();
    // Pages overwritten past the first; a value of the wrong type; a value out of range;
    // values out of order.
    let overwritten = t.out.with_file_name("overwritten.db");
    let mut damaged = bytes.clone();
    for (i, b) in damaged[4096..].iter_mut().enumerate() {
        *b = (i * 31 % 251) as u8;
    }
    std::fs::write(&overwritten, &damaged).unwrap();
    let mut inputs = vec![overwritten];
    for (name, value) in [("text.db", "'lots'"), ("negative.db", "-12.5"), ("huge.db", "4e300")] {
        let path = t.out.with_file_name(name);
        std::fs::write(&path, &bytes).unwrap();
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch(&format!(
                "UPDATE metrics SET value = {value} WHERE rowid = (SELECT max(rowid) FROM metrics)"
            ))
            .unwrap();
        inputs.push(path);
    }
    // Values out of order (issue 31.4's bounds between values): one observation's p99 below
    // its p75.
    let order = t.out.with_file_name("order.db");
    std::fs::write(&order, &bytes).unwrap();
    rusqlite::Connection::open(&order)
        .unwrap()
        .execute_batch(
            "UPDATE metrics SET name = 'latency_p99_us', value = 310.5, role = 'client' \
             WHERE rowid = (SELECT max(rowid) FROM metrics);
             INSERT INTO metrics (observation_id, role, name, value, unit, source) SELECT observation_id, role, \
             'latency_p75_us', 404.0, unit, source FROM metrics WHERE rowid = (SELECT max(rowid) FROM metrics)",
        )
        .unwrap();
    inputs.push(order);
    for input in &inputs {
        let fresh = t.out.with_file_name("fresh.db");
        let out = run(&["merge", s(&fresh), s(input)]);
        assert_damaged(&out, input, &format!("merge fresh.db {}", input.display()));
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let left = format!("{}{suffix}", fresh.display());
            assert!(!Path::new(&left).exists(), "{left} left behind by a failed merge");
        }
    }
    // An output that existed before keeps what it had.
    ok(&["merge", s(&t.out), s(&t.a)]);
    let out = run(&["merge", s(&t.out), s(&inputs[1])]);
    assert_damaged(&out, &inputs[1], "merge into an existing output");
    assert_eq!(count(&t.out, "SELECT count(*) FROM runs"), 1);
}
