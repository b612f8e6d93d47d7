//! `iopath sweep`, `runs`, `export` and `compare` as a user runs them, with short loopback cells.

mod common;

use common::{bin, count, iopath, stderr};
use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
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
        .args([
            "--reps",
            reps,
            "--duration",
            "100ms",
            "--warmup",
            "100ms",
            "--no-warmup-cell",
            "--db",
        ])
        .arg(db)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap()
}

#[test]
fn sweep_stores_every_cell_and_export_matches_the_documented_columns() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results/iopath.db");
    let out = small_sweep(&db, "2");
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("one-copy 16KiB t1"), "{stdout}");
    assert!(stdout.contains("Crossover sizes"), "{stdout}");
    assert_eq!(count(&db, "SELECT count(*) FROM observations"), 8);
    let failed = count(&db, "SELECT count(*) FROM observations WHERE status = 'failed'");
    assert!(failed < 8, "every cell failed: {}", stderr(&out));

    let runs = iopath().args(["runs", "--db"]).arg(&db).output().unwrap();
    let runs_text = String::from_utf8_lossy(&runs.stdout);
    assert!(runs.status.success());
    assert!(runs_text.lines().nth(1).unwrap().contains("complete"), "{runs_text}");

    let csv_out = iopath()
        .args(["export", "1", "--format", "csv", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(csv_out.status.success(), "{}", stderr(&csv_out));
    let text = String::from_utf8(csv_out.stdout).unwrap();
    let header = text.lines().next().unwrap();
    assert_eq!(text.lines().count(), 9, "a header and one row per cell");
    // The fixed columns are the ones docs/output.md lists, and every metric column is documented.
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/output.md")).unwrap();
    let fixed = "run_id,workload,label,repetition,mode,size_bytes,fields,threads,duration_ms,warmup_ms,client_cpus,server_cpus,verify,perf";
    assert!(
        docs.contains(fixed),
        "docs/output.md must list the export's fixed columns"
    );
    assert!(header.starts_with(fixed), "{header}");
    assert!(header.ends_with(",warnings"), "{header}");
    let metric_cols: Vec<&str> = header
        .split(',')
        .skip(14)
        .filter(|c| !["status", "error", "warnings"].contains(c))
        .collect();
    assert!(metric_cols.contains(&"system_throughput_gbps"));
    for col in metric_cols.iter().filter(|c| !c.ends_with("_source")) {
        let name = col.split_once('_').unwrap().1;
        assert!(
            docs.contains(&format!("`{name}`")),
            "metric {name} is not documented in docs/output.md"
        );
        assert!(metric_cols.contains(&format!("{col}_source").as_str()));
    }

    let json_out = iopath()
        .args(["export", "--format", "json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let records: serde_json::Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(records.as_array().unwrap().len(), 8);
    assert_eq!(records[0]["run_id"], 1);
}

/// Wait until the database holds at least `n` observations, or give up after `limit`.
fn wait_for_cells(db: &Path, n: i64, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if db.exists() {
            let conn = rusqlite::Connection::open(db).unwrap();
            let got: Option<i64> = conn
                .query_row("SELECT count(*) FROM observations", [], |r| r.get(0))
                .ok();
            if got.unwrap_or(0) >= n {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn start_sweep(db: &Path) -> std::process::Child {
    StdCommand::new(bin())
        .args([
            "sweep",
            "net-stream",
            "--mode",
            "two-copy",
            "--size",
            "1K,2K,4K",
            "--threads",
            "1",
            "--reps",
            "3",
        ])
        .args(["--duration", "150ms", "--warmup", "100ms", "--no-warmup-cell", "--db"])
        .arg(db)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn assert_resume_completes(db: &Path) {
    let out = iopath()
        .args(["sweep", "--resume", "1", "--db"])
        .arg(db)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(count(db, "SELECT count(*) FROM observations"), 9);
    assert_eq!(
        count(
            db,
            "SELECT count(DISTINCT case_id || '/' || repetition) FROM observations"
        ),
        9
    );
    // A workload failure is stored as a failed cell (and retried by a later resume): the cell
    // exists either way.
    let failed = count(db, "SELECT count(*) FROM observations WHERE status = 'failed'");
    if failed > 0 {
        eprintln!("note: {failed} cells failed in the workload; see `iopath export`");
    }
    assert_eq!(count(db, "SELECT count(*) FROM runs WHERE status = 'complete'"), 1);
    assert_eq!(
        count(db, "SELECT count(*) FROM runs"),
        1,
        "resume must not start a new run"
    );
}

#[test]
fn resume_after_kill_runs_only_the_missing_cells() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("iopath.db");
    let mut child = start_sweep(&db);
    let reached = wait_for_cells(&db, 2, Duration::from_secs(60));
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    assert!(reached, "the sweep stored no cells in 60 s");
    let stored = count(&db, "SELECT count(*) FROM observations");
    if stored >= 9 {
        eprintln!("note: the sweep finished before the kill landed; resume is then a no-op");
    }
    assert_eq!(
        count(&db, "SELECT count(*) FROM runs WHERE status = 'running'"),
        1,
        "killed runs stay 'running'"
    );
    assert_resume_completes(&db);
    let integrity: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
}

#[test]
fn ctrl_c_stops_after_the_current_cell_and_resume_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("iopath.db");
    let child = start_sweep(&db);
    assert!(
        wait_for_cells(&db, 1, Duration::from_secs(60)),
        "no cell stored in 60 s"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "Ctrl-C is a clean stop: {}", stderr(&out));
    let stored = count(&db, "SELECT count(*) FROM observations");
    if stored < 9 {
        assert!(stderr(&out).contains("--resume 1"), "{}", stderr(&out));
        assert_eq!(count(&db, "SELECT count(*) FROM runs WHERE status = 'interrupted'"), 1);
    } else {
        eprintln!("note: the sweep finished before SIGINT landed");
    }
    assert_resume_completes(&db);
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
            "accepted: net-stream",
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

#[test]
fn compare_matches_cells_and_says_when_reps_are_too_few() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("iopath.db");
    assert!(small_sweep(&db, "3").status.success());
    assert!(small_sweep(&db, "3").status.success());
    let out = iopath().args(["compare", "1", "2", "--db"]).arg(&db).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("4 matching cells"), "{text}");
    assert!(text.contains("no difference can reach p < 0.05"), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.trim_end().ends_with('~')).count(),
        4,
        "3 vs 3 is never significant: {text}"
    );
    let out = iopath()
        .args(["compare", "1", "2", "--metric", "client.cpu_sys_s", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("client.cpu_sys_s"));
    // Found in review: a metric neither run holds used to print "0 matching cells", exit 0.
    let out = iopath()
        .args(["compare", "1", "2", "--metric", "client.nope", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("is not in both runs") && stderr(&out).contains("system.throughput_gbps"));
}

#[test]
fn servers_and_micro_sweeps_land_in_the_same_database_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("iopath.db");
    let servers = iopath()
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
        .args(["--duration", "200ms", "--warmup", "50ms", "--no-warmup-cell", "--db"])
        .arg(&db)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(servers.status.success(), "{}", stderr(&servers));
    assert!(String::from_utf8_lossy(&servers.stdout).contains("requests_per_s"));
    let micro = iopath()
        .args([
            "sweep",
            "micro",
            "--bench",
            "syscall",
            "--small",
            "--reps",
            "2",
            "--no-warmup-cell",
            "--db",
        ])
        .arg(&db)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(micro.status.success(), "{}", stderr(&micro));
    assert_eq!(count(&db, "SELECT count(*) FROM runs"), 2);
    assert_eq!(
        count(&db, "SELECT count(*) FROM cases c WHERE c.workload = 'servers'"),
        4
    );

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

    // Flags of another workload are refused, naming the flag.
    let out = iopath()
        .args(["sweep", "micro", "--bench", "syscall", "--clients", "4", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--clients does not apply to micro"),
        "{}",
        stderr(&out)
    );
}

/// Found in review: a sweep that lost cells exited 0, so a script could not tell. Too few
/// file descriptors make the 8-thread cell fail while the 1-thread cell runs.
#[test]
fn a_sweep_with_failed_cells_exits_1_and_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("f.db");
    let bin = bin();
    let script = format!(
        "ulimit -n 24 && exec '{}' sweep net-stream --mode one-copy --size 1K --threads 1,8 --reps 1 --duration 100ms --warmup 0 --no-warmup-cell --db '{}'",
        bin.display(),
        db.display()
    );
    let out = std::process::Command::new("sh").args(["-c", &script]).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("1 cells failed") && err.contains("--resume"), "{err}");
    let csv = iopath()
        .args(["export", "--format", "csv", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&csv.stdout);
    assert!(text.contains(",failed,") && text.contains(",ok,"), "{text}");
}
