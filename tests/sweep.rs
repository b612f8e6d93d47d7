//! `iopath sweep`, `runs`, `export` and `compare` as a user runs them, with short loopback cells.

mod common;

use common::{
    count, finish_within, iopath, json_records, sigint, spawn, stderr, stdout, stored_cells, temp_db, usage_error,
    wait_for_cells,
};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::time::{Duration, Instant};

/// A small real sweep: 2 modes x 2 sizes x 1 thread count x `reps`.
fn small_sweep(db: &Path, reps: &str) -> std::process::Output {
    iopath()
        .args([
            "sweep",
            "net-stream",
            "--mode",
            "two-copy,one-copy",
            "--size",
            "1K,16K",
            "--threads",
            "1",
        ])
        .args(["--reps", reps, "--duration", "100ms", "--warmup", "100ms", "--db"])
        .arg(db)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap()
}

/// The run's status in the database (there is one run).
fn run_status(db: &Path) -> String {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT status FROM runs", [], |r| r.get(0)).unwrap()
}

#[test]
fn sweep_stores_every_cell_and_prints_the_per_cell_summary() {
    let (_dir, db) = temp_db("results/iopath.db");
    let out = small_sweep(&db, "2");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // net stream's own table: a row per case, mode and size first.
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().take(3).eq(["one-copy", "16KiB", "1"])),
        "{text}"
    );
    assert!(text.contains("Crossover sizes"), "{text}");
    assert_eq!(stored_cells(&db), 8);
    assert_eq!(
        count(&db, "SELECT count(*) FROM observations WHERE status = 'failed'"),
        0,
        "cells failed: {}",
        stderr(&out)
    );
    let runs = iopath().args(["runs", "--db"]).arg(&db).output().unwrap();
    let runs_text = stdout(&runs);
    assert!(runs.status.success(), "{}", stderr(&runs));
    assert!(runs_text.lines().nth(1).unwrap().contains("complete"), "{runs_text}");
}

#[test]
fn export_csv_has_the_documented_columns_and_one_row_per_cell() {
    let (_dir, db) = temp_db("iopath.db");
    let out = small_sweep(&db, "1");
    assert!(out.status.success(), "{}", stderr(&out));
    let csv_out = iopath()
        .args(["export", "1", "--format", "csv", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(csv_out.status.success(), "{}", stderr(&csv_out));
    let text = stdout(&csv_out);
    let header = text.lines().next().unwrap();
    assert_eq!(text.lines().count(), 5, "a header and one row per cell: {text}");
    // The fixed columns are the ones docs/output.md lists, and every metric column is documented.
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/output.md")).unwrap();
    let fixed = "run_id,workload,label,repetition,mode,rx_mode,size_bytes,fields,threads,duration_ms,warmup_ms,client_cpus,server_cpus,verify,perf,prove_copies,align,rx_wake";
    assert!(
        docs.contains(fixed),
        "docs/output.md must list the export's fixed columns"
    );
    assert!(header.starts_with(fixed), "{header}");
    assert!(header.ends_with(",warnings"), "{header}");
    let metric_cols: Vec<&str> = header
        .split(',')
        .skip(18)
        .filter(|c| !["status", "error", "warnings"].contains(c))
        .collect();
    assert!(metric_cols.contains(&"system_throughput_gbps"));
    for col in metric_cols.iter().filter(|c| !c.ends_with("_source")) {
        let name = col.split_once('_').unwrap().1;
        // A figure of one CPU (`softirq_net_rx_s_cpu3`) is documented once as `..._cpuN`.
        let name = match name.rsplit_once("_cpu") {
            Some((base, cpu)) if !cpu.is_empty() && cpu.chars().all(|c| c.is_ascii_digit()) => format!("{base}_cpuN"),
            _ => name.to_string(),
        };
        assert!(
            docs.contains(&format!("`{name}`")),
            "metric {name} is not documented in docs/output.md"
        );
        assert!(metric_cols.contains(&format!("{col}_source").as_str()));
    }
}

#[test]
fn export_json_has_one_record_per_cell() {
    let (_dir, db) = temp_db("iopath.db");
    let out = small_sweep(&db, "1");
    assert!(out.status.success(), "{}", stderr(&out));
    let json_out = iopath()
        .args(["export", "--format", "json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(json_out.status.success(), "{}", stderr(&json_out));
    let records = json_records(&json_out);
    assert_eq!(records.len(), 4);
    assert!(records.iter().all(|r| r["run_id"] == 1), "{records:?}");
}

/// The fake workload's sweep: its first case returns at once, the second sleeps for `sleep`
/// (long enough for the test to signal it while it runs), the third returns at once; two
/// repetitions, so six cells in the order ok, sleep, ok, ok, sleep, ok.
fn start_fake_sweep(db: &Path, sleep: &str) -> std::process::Child {
    let cells = format!("ok,sleep:{sleep},ok");
    spawn(&[
        "sweep",
        "fake",
        "--cells",
        &cells,
        "--reps",
        "2",
        "--db",
        db.to_str().unwrap(),
    ])
}

/// Resume run 1 and check it finished the run it resumed: every cell once, none failed.
fn assert_resume_completes(db: &Path) {
    let out = iopath()
        .args(["sweep", "--resume", "1", "--db"])
        .arg(db)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("run 1: 1 cells already stored, 5 to run"), "{err}");
    assert_eq!(stored_cells(db), 6);
    assert_eq!(
        count(
            db,
            "SELECT count(DISTINCT case_id || '/' || repetition) FROM observations"
        ),
        6
    );
    assert_eq!(
        count(db, "SELECT count(*) FROM observations WHERE status = 'failed'"),
        0
    );
    assert_eq!(
        count(db, "SELECT count(*) FROM runs"),
        1,
        "resume must not start a new run"
    );
    assert_eq!(run_status(db), "complete");
}

/// SIGKILL gives no chance to clean up: the run stays `running`, its finished cells stay
/// stored, and a resume runs only the cells it is missing. (The sleeping cell takes 3 s: the
/// kill lands while it runs, and the resume that runs it twice stays short.)
#[test]
fn resume_after_kill_runs_only_the_missing_cells() {
    let (_dir, db) = temp_db("iopath.db");
    let mut child = start_fake_sweep(&db, "3s");
    wait_for_cells(&db, 1, Duration::from_secs(30));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(stored_cells(&db), 1, "the kill must land while the sleeping cell runs");
    assert_eq!(run_status(&db), "running", "killed runs stay 'running'");
    assert_resume_completes(&db);
    let integrity: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
}

/// Ctrl-C in the middle of a cell: the cell is discarded, the finished one is printed and
/// stored, the run is marked interrupted, stderr says how to continue, and the exit is 0 —
/// without waiting for the cell to end.
#[test]
fn ctrl_c_discards_the_cell_in_flight_and_says_how_to_resume() {
    let (_dir, db) = temp_db("iopath.db");
    let started = Instant::now();
    let child = start_fake_sweep(&db, "30s");
    wait_for_cells(&db, 1, Duration::from_secs(20));
    sigint(&child);
    let out = finish_within(child, Duration::from_secs(20));
    assert!(
        started.elapsed() < Duration::from_secs(29),
        "the sleeping cell was not cut short"
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "Ctrl-C is a clean stop: {err}");
    assert!(
        err.contains(&format!("Continue with: iopath run --resume 1 --db {}", db.display())),
        "{err}"
    );
    assert!(
        err.contains("cut short (fake#1 sleep:30000ms rep 0) was discarded"),
        "{err}"
    );
    assert_eq!(stored_cells(&db), 1, "only the finished cell is stored");
    assert_eq!(run_status(&db), "interrupted");
    // The workload's own table: the finished cell has its row, the discarded one neither a
    // row nor a failure line.
    let text = stdout(&out);
    let rows = |case: &str| text.lines().filter(|l| l.starts_with(case)).count();
    assert_eq!(rows("fake#0 "), 1, "{text}");
    assert_eq!(rows("fake#1 "), 0, "{text}");
    assert!(!text.contains("failed:"), "{text}");
}

/// A resume of an interrupted run continues that run, and a Ctrl-C during the resume leaves
/// it interrupted and resumable again.
#[test]
fn an_interrupted_resume_continues_the_same_run() {
    let (_dir, db) = temp_db("iopath.db");
    let child = start_fake_sweep(&db, "30s");
    wait_for_cells(&db, 1, Duration::from_secs(20));
    sigint(&child);
    let out = finish_within(child, Duration::from_secs(20));
    assert!(out.status.success(), "{}", stderr(&out));
    let mut resume = spawn(&["sweep", "--resume", "1", "--db", db.to_str().unwrap()]);
    // This line comes after the stop handler is installed, before the sleeping cell ends.
    let mut reader = BufReader::new(resume.stderr.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.contains("run 1: 1 cells already stored, 5 to run"), "{line}");
    sigint(&resume);
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    let status = resume.wait().unwrap();
    assert!(status.success(), "{rest}");
    assert!(rest.contains("Continue with: iopath run --resume 1 --db"), "{rest}");
    assert_eq!(
        count(&db, "SELECT count(*) FROM runs"),
        1,
        "resume must not start a new run"
    );
    assert_eq!(stored_cells(&db), 1);
    assert_eq!(run_status(&db), "interrupted");
}

#[test]
fn resume_after_ctrl_c_finishes_the_run() {
    let (_dir, db) = temp_db("iopath.db");
    let child = start_fake_sweep(&db, "3s");
    wait_for_cells(&db, 1, Duration::from_secs(30));
    sigint(&child);
    let out = finish_within(child, Duration::from_secs(20));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stored_cells(&db), 1, "SIGINT must land while the sleeping cell runs");
    assert_eq!(run_status(&db), "interrupted");
    assert_resume_completes(&db);
}

/// `--resume` also retries the cells that failed; a cell that fails again fails the resume.
#[test]
fn resume_retries_failed_cells() {
    let (_dir, db) = temp_db("iopath.db");
    let db_arg = db.to_str().unwrap();
    let out = iopath()
        .args(["sweep", "fake", "--cells", "ok,fail", "--db", db_arg])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = iopath()
        .args(["sweep", "--resume", "1", "--db", db_arg])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("run 1: 1 cells already stored, 1 to run"), "{err}");
    assert!(err.contains("1 of 1 cells failed"), "{err}");
    assert_eq!(stored_cells(&db), 2, "the retried cell replaces its failed attempt");
}

#[test]
fn bad_input_exits_2_with_one_line_and_leaves_the_database_intact() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("iopath.db");
    let missing = dir.path().join("missing.db");
    let not_sqlite = dir.path().join("notes.db");
    std::fs::write(&not_sqlite, "these are my notes, not a database\n").unwrap();
    assert!(small_sweep(&db, "1").status.success());
    let before = count(&db, "SELECT count(*) FROM observations");

    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["report".into(), "7".into(), "--db".into(), db.display().to_string()],
            "no run 7",
        ),
        (
            vec!["export".into(), "7".into(), "--db".into(), db.display().to_string()],
            "no run 7",
        ),
        (
            vec![
                "compare".into(),
                "1".into(),
                "7".into(),
                "--db".into(),
                db.display().to_string(),
            ],
            "no run 7",
        ),
        (
            vec![
                "sweep".into(),
                "--resume".into(),
                "7".into(),
                "--db".into(),
                db.display().to_string(),
            ],
            "no run 7",
        ),
        (
            vec!["runs".into(), "--db".into(), missing.display().to_string()],
            "no results database",
        ),
        (
            vec!["report".into(), "--db".into(), missing.display().to_string()],
            "no results database",
        ),
        (
            vec![
                "sweep".into(),
                "--resume".into(),
                "1".into(),
                "--db".into(),
                missing.display().to_string(),
            ],
            "no results database",
        ),
        (
            vec!["runs".into(), "--db".into(), not_sqlite.display().to_string()],
            "not an SQLite database",
        ),
        (
            vec!["export".into(), "--db".into(), not_sqlite.display().to_string()],
            "not an SQLite database",
        ),
        (
            vec![
                "sweep".into(),
                "net-stream".into(),
                "--size".into(),
                "1K".into(),
                "--db".into(),
                not_sqlite.display().to_string(),
            ],
            "not an SQLite database",
        ),
        (
            vec![
                "report".into(),
                "1".into(),
                "--db".into(),
                db.display().to_string(),
                "-o".into(),
                "/nonexistent-dir/r.html".into(),
            ],
            "does not exist",
        ),
        (
            vec![
                "export".into(),
                "1".into(),
                "--db".into(),
                db.display().to_string(),
                "-o".into(),
                dir.path().display().to_string(),
            ],
            "is a folder",
        ),
        (
            vec![
                "sweep".into(),
                "net-stream".into(),
                "--size".into(),
                "0".into(),
                "--db".into(),
                db.display().to_string(),
            ],
            "--size",
        ),
        (
            vec![
                "sweep".into(),
                "net-stream".into(),
                "--mode".into(),
                "four-copy".into(),
                "--db".into(),
                db.display().to_string(),
            ],
            "accepted",
        ),
        (
            vec![
                "sweep".into(),
                "net-stream".into(),
                "--reps".into(),
                "0".into(),
                "--db".into(),
                db.display().to_string(),
            ],
            "--reps",
        ),
        (
            vec!["sweep".into(), "disk".into(), "--db".into(), db.display().to_string()],
            "accepted: net, quick, run",
        ),
        (
            vec![
                "compare".into(),
                "1".into(),
                "1".into(),
                "--metric".into(),
                "throughput".into(),
                "--db".into(),
                db.display().to_string(),
            ],
            "--metric",
        ),
    ];
    for (args, wanted) in cases {
        let out = iopath().args(&args).timeout(Duration::from_secs(30)).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "iopath {args:?}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "iopath {args:?} must say it in one line: {err}"
        );
        assert!(err.contains(wanted), "iopath {args:?}: expected '{wanted}' in: {err}");
    }
    assert!(!missing.exists(), "reading commands must not create a database");
    assert_eq!(
        std::fs::read_to_string(&not_sqlite).unwrap(),
        "these are my notes, not a database\n"
    );
    assert_eq!(count(&db, "SELECT count(*) FROM observations"), before);
    assert_eq!(count(&db, "SELECT count(*) FROM runs"), 1);
}

/// Two runs of the same small sweep in one database.
fn two_runs(reps: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, db) = temp_db("iopath.db");
    for _ in 0..2 {
        let out = small_sweep(&db, reps);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    (dir, db)
}

#[test]
fn compare_matches_cells_and_says_when_reps_are_too_few() {
    let (_dir, db) = two_runs("3");
    let out = iopath().args(["compare", "1", "2", "--db"]).arg(&db).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("4 matching cells"), "{text}");
    assert!(text.contains("no difference can reach p < 0.05"), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.trim_end().ends_with("inconclusive")).count(),
        4,
        "3 vs 3 is never significant: {text}"
    );
}

#[test]
fn compare_metric_picks_the_metric() {
    let (_dir, db) = two_runs("1");
    let out = iopath()
        .args(["compare", "1", "2", "--metric", "client.cpu_sys_s", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("client.cpu_sys_s"), "{}", stdout(&out));
}

/// Found in review: a metric neither run holds used to print "0 matching cells", exit 0.
#[test]
fn compare_refuses_a_metric_neither_run_holds_and_lists_the_ones_they_do() {
    let (_dir, db) = two_runs("1");
    let out = iopath()
        .args(["compare", "1", "2", "--metric", "client.nope", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is not in both runs") && err.contains("system.throughput_gbps"),
        "{err}"
    );
}

fn servers_sweep(db: &Path) -> std::process::Output {
    iopath()
        .args([
            "sweep",
            "servers",
            "--model",
            "epoll,threads",
            "--clients",
            "1,4",
            "--reps",
            "1",
        ])
        .args(["--duration", "200ms", "--warmup", "50ms", "--db"])
        .arg(db)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap()
}

#[test]
fn servers_and_micro_sweeps_land_in_the_same_database() {
    let (_dir, db) = temp_db("iopath.db");
    let servers = servers_sweep(&db);
    assert!(servers.status.success(), "{}", stderr(&servers));
    // The servers table of `iopath servers`: requests/s, p99, errors and the clients served.
    let head = stdout(&servers).lines().next().unwrap_or_default().to_string();
    for column in ["req/s", "p99 us", "errors", "served"] {
        assert!(head.contains(column), "{column}: {}", stdout(&servers));
    }
    let micro = iopath()
        .args(["sweep", "micro", "syscall", "--quick", "--reps", "2", "--db"])
        .arg(&db)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(micro.status.success(), "{}", stderr(&micro));
    assert!(stdout(&micro).contains("time_per_call_ns"), "{}", stdout(&micro));
    assert_eq!(count(&db, "SELECT count(*) FROM runs"), 2);
    assert_eq!(count(&db, "SELECT count(*) FROM cases WHERE workload = 'servers'"), 4);
    assert_eq!(count(&db, "SELECT count(*) FROM cases WHERE workload = 'micro'"), 3);
}

#[test]
fn a_servers_report_has_the_servers_charts_and_no_stream_ones() {
    let (dir, db) = temp_db("iopath.db");
    let servers = servers_sweep(&db);
    assert!(servers.status.success(), "{}", stderr(&servers));
    let html = dir.path().join("servers.html");
    let out = iopath()
        .args(["report", "1", "--db"])
        .arg(&db)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.contains("id=\"servers_requests_vs_clients\"") && text.contains("id=\"servers_p99_vs_clients\""));
    assert!(
        !text.contains("id=\"throughput_vs_size\""),
        "no stream charts for a servers run"
    );
    assert!(
        !text.contains("Crossover sizes"),
        "no crossover table without stream cells"
    );
}

/// A sweep takes exactly the direct command's flags: another workload's flag is refused,
/// naming it, before anything runs.
#[test]
fn flags_of_another_workload_are_refused_naming_the_flag() {
    let (_dir, db) = temp_db("iopath.db");
    let err = usage_error(&[
        "sweep",
        "micro",
        "syscall",
        "--clients",
        "4",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(err.contains("--clients"), "{err}");
    assert!(!db.exists(), "nothing may be stored");
}

/// Found in review: a sweep that lost cells exited 0, so a script could not tell. It exits 1,
/// says how to retry, and keeps the failed cell beside the finished ones.
#[test]
fn a_sweep_with_failed_cells_exits_1_and_keeps_them() {
    let (_dir, db) = temp_db("f.db");
    let out = iopath()
        .args(["sweep", "fake", "--cells", "ok,fail", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("1 of 2 cells failed") && err.contains("--resume 1"),
        "{err}"
    );
    let csv = iopath()
        .args(["export", "--format", "csv", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let text = stdout(&csv);
    assert!(text.contains(",failed,") && text.contains(",ok,"), "{text}");
}
