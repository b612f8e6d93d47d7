//! The results database is never damaged and always readable, with the binary run as a user
//! runs it: outputs never land on the database, outputs are whole or absent, readers open it
//! read-only (also on read-only media), empty, outdated, special and corrupt files are refused
//! with exit 2, several writers at once all succeed, and a run another process is executing is
//! not resumed.
//!
//! Tests that need a read-only or a full filesystem mount a small tmpfs, which needs root; when
//! not root they say so and use what an ordinary user has (a 0555 folder, /dev/full).

mod common;

use assert_cmd::Command;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Output, Stdio};
use std::time::{Duration, Instant};

fn iopath() -> Command {
    let mut cmd = Command::cargo_bin("iopath").unwrap();
    cmd.timeout(Duration::from_secs(60));
    cmd
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The hidden deterministic workload: 2 cases x 3 repetitions, stored in `db`.
fn fake_sweep(db: &Path) -> Output {
    iopath()
        .args(["sweep", "fake", "--cells", "ok:1,ok:2", "--reps", "3", "--db"])
        .arg(db)
        .output()
        .unwrap()
}

fn run_ok(args: &[&str], db: &Path) -> Output {
    let out = iopath().args(args).arg("--db").arg(db).output().unwrap();
    assert!(
        out.status.success(),
        "iopath {args:?} --db {}: {}",
        db.display(),
        stderr(&out)
    );
    out
}

/// Exit code 2 with one line on stderr that contains `needle`.
fn assert_refused(out: &Output, needle: &str, what: &str) {
    let err = stderr(out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{what}: expected exit 2, got {:?}: {err}",
        out.status
    );
    assert!(err.contains(needle), "{what}: expected '{needle}' in: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: one line expected: {err}");
}

/// The names in a folder, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn count(db: &Path, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A tmpfs mounted for one test (root only), unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(path: &Path, size: &str) -> Tmpfs {
        assert!(is_root());
        std::fs::create_dir_all(path).unwrap();
        let status = StdCommand::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success(), "root cannot mount a tmpfs at {}", path.display());
        Tmpfs(path.to_path_buf())
    }

    fn remount_read_only(&self) {
        let status = StdCommand::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(status.success(), "cannot remount {} read-only", self.0.display());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = StdCommand::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A small real net-stream run: it has charts, so a report writes PNG and SVG files.
fn stream_run(db: &Path) {
    let out = iopath()
        .args([
            "sweep",
            "net-stream",
            "--mode",
            "two-copy",
            "--size",
            "1K",
            "--threads",
            "1",
        ])
        .args(["--reps", "1", "--duration", "100ms", "--warmup", "100ms", "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn an_output_path_that_is_the_database_or_any_sqlite_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("iopath.db");
    assert!(fake_sweep(&db).status.success());
    let before = std::fs::read(&db).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let hard = dir.path().join("hard.db");
    std::fs::hard_link(&db, &hard).unwrap();
    let other = dir.path().join("other.sqlite");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE notes (x); INSERT INTO notes VALUES (1);")
        .unwrap();
    let other_before = std::fs::read(&other).unwrap();
    let dotted = dir.path().join("sub/../iopath.db");
    let wal = dir.path().join("iopath.db-wal");

    for (command, target) in [
        ("export", &db),
        ("export", &link),
        ("export", &hard),
        ("export", &dotted),
        ("export", &wal),
        ("report", &db),
        ("report", &link),
        ("report", &dotted),
        ("export", &other),
        ("report", &other),
    ] {
        let out = iopath()
            .arg(command)
            .arg("-o")
            .arg(target)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap();
        assert_refused(&out, "refusing", &format!("{command} -o {}", target.display()));
    }
    // quick refuses before it measures anything (it would run for a minute otherwise).
    for target in [&db, &dotted] {
        let out = iopath()
            .args(["quick", "-o"])
            .arg(target)
            .arg("--db")
            .arg(&db)
            .timeout(Duration::from_secs(20))
            .output()
            .unwrap();
        assert_refused(&out, "refusing to write", "quick -o <the database>");
    }
    assert!(std::fs::read(&db).unwrap() == before, "the database was changed");
    assert!(
        std::fs::read(&other).unwrap() == other_before,
        "another SQLite file was changed"
    );
    assert!(!wal.exists());
    run_ok(&["runs"], &db);
}

#[test]
fn outputs_are_whole_or_absent_when_the_disk_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("iopath.db");
    stream_run(&db);

    // A single file that cannot be written: one clear line, exit 2 (issue 19 D9: an output that
    // cannot be written is bad input, like every output-path problem; it was 1).
    let out = iopath()
        .args(["export", "-o", "/dev/full", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot write /dev/full") && err.contains("No space left"),
        "{err}"
    );

    // Standard output that cannot be written is an output that cannot be written too.
    for args in [&["runs"][..], &["export"], &["compare", "1", "1"]] {
        let out = StdCommand::new(assert_cmd::cargo::cargo_bin("iopath"))
            .args(args)
            .arg("--db")
            .arg(&db)
            .stdout(std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_refused(&out, "cannot write standard output", &format!("{args:?} > /dev/full"));
    }

    if !is_root() {
        common::skip("not root: cannot mount a tiny tmpfs, so only /dev/full was checked");
        return;
    }
    let tiny = Tmpfs::mount(&dir.path().join("tiny"), "300k");
    // The report with its 14 chart files does not fit: nothing of it may stay.
    let out = iopath()
        .args(["report", "-o"])
        .arg(tiny.0.join("r.html"))
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    for debug_dump in ["Custom {", "Os {", "IoError(", "kind:"] {
        assert!(!err.contains(debug_dump), "a debug dump, not a message: {err}");
    }
    assert_eq!(listing(&tiny.0), Vec::<String>::new(), "a failed report left files");

    // An export that fits, then a fuller disk: the next export fails and the first file stays
    // whole.
    let csv = tiny.0.join("out.csv");
    run_ok(&["export", "-o", csv.to_str().unwrap()], &db);
    let first = std::fs::read(&csv).unwrap();
    let mut filler = std::fs::File::create(tiny.0.join("filler")).unwrap();
    let block = vec![7u8; 4096];
    while std::io::Write::write_all(&mut filler, &block).is_ok() {}
    drop(filler);
    let out = iopath()
        .args(["export", "--format", "json", "-o"])
        .arg(&csv)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(std::fs::read(&csv).unwrap() == first, "the earlier export was damaged");
    assert_eq!(listing(&tiny.0), vec!["filler".to_string(), "out.csv".to_string()]);
}

/// Every reading command, each writing its files outside the database's folder.
fn read_everything(db: &Path, out_dir: &Path) {
    let runs = run_ok(&["runs"], db);
    assert!(stdout(&runs).contains("complete"), "{}", stdout(&runs));
    let html = out_dir.join("r.html");
    run_ok(&["report", "1", "-o", html.to_str().unwrap()], db);
    assert!(html.is_file());
    let export = run_ok(&["export", "1", "--format", "csv"], db);
    assert_eq!(stdout(&export).lines().count(), 7, "{}", stdout(&export));
    let csv = out_dir.join("x.csv");
    run_ok(&["export", "1", "-o", csv.to_str().unwrap()], db);
    run_ok(&["compare", "1", "1"], db);
}

#[test]
fn readers_change_nothing_and_work_on_read_only_media() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let db = data.join("iopath.db");
    assert!(fake_sweep(&db).status.success());
    let bytes = std::fs::read(&db).unwrap();
    assert_eq!(listing(&data), vec!["iopath.db"]);

    // A writable folder: no -wal or -shm is left, not a byte changes.
    read_everything(&db, &out_dir);
    assert_eq!(
        listing(&data),
        vec!["iopath.db"],
        "a reader left files beside the database"
    );
    assert!(std::fs::read(&db).unwrap() == bytes, "a reader changed the database");

    // Read-only media (root: a tmpfs remounted read-only; otherwise a 0555 folder).
    let ro_dir = dir.path().join("ro");
    let _mount = if is_root() {
        let mount = Tmpfs::mount(&ro_dir, "4m");
        std::fs::copy(&db, ro_dir.join("iopath.db")).unwrap();
        mount.remount_read_only();
        assert!(
            std::fs::File::create(ro_dir.join("probe")).is_err(),
            "the mount is not read-only"
        );
        Some(mount)
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir(&ro_dir).unwrap();
        std::fs::copy(&db, ro_dir.join("iopath.db")).unwrap();
        std::fs::set_permissions(&ro_dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        None
    };
    read_everything(&ro_dir.join("iopath.db"), &out_dir);
    assert_eq!(listing(&ro_dir), vec!["iopath.db"]);
}

#[test]
fn readers_see_what_a_live_writer_committed_and_leave_its_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("iopath.db");
    assert!(fake_sweep(&db).status.success());
    // Another process keeps the database open: the next run stays in the WAL.
    let holder = rusqlite::Connection::open(&db).unwrap();
    let runs: i64 = holder.query_row("SELECT count(*) FROM runs", [], |r| r.get(0)).unwrap();
    assert_eq!(runs, 1);
    assert!(fake_sweep(&db).status.success());
    assert!(dir.path().join("iopath.db-wal").is_file() && dir.path().join("iopath.db-shm").is_file());
    let runs = run_ok(&["runs"], &db);
    assert_eq!(stdout(&runs).matches("complete").count(), 2, "{}", stdout(&runs));
    run_ok(&["export", "2"], &db);
    drop(holder);
}

#[test]
fn empty_uninitialised_and_outdated_databases_are_reported_not_changed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.html");
    let readers: [&[&str]; 4] = [
        &["runs"],
        &["report", "-o", out.to_str().unwrap()],
        &["export"],
        &["compare", "1", "1"],
    ];

    // A 0-byte file: readers refuse it and leave it empty.
    let empty = dir.path().join("empty.db");
    std::fs::File::create(&empty).unwrap();
    for args in readers {
        let out = iopath().args(args).arg("--db").arg(&empty).output().unwrap();
        assert_refused(&out, "empty file, not an iopath database", &format!("{args:?}"));
    }
    assert_eq!(
        std::fs::metadata(&empty).unwrap().len(),
        0,
        "a reader initialised a 0-byte file"
    );

    // An SQLite database with nothing in it is not iopath's yet.
    let blank = dir.path().join("blank.db");
    rusqlite::Connection::open(&blank)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); DROP TABLE t;")
        .unwrap();
    let blank_bytes = std::fs::read(&blank).unwrap();
    for args in readers {
        let out = iopath().args(args).arg("--db").arg(&blank).output().unwrap();
        assert_refused(&out, "not an iopath database yet", &format!("{args:?}"));
    }
    assert!(std::fs::read(&blank).unwrap() == blank_bytes);

    // Written by an older iopath (iopath's application id, schema 0): reported, not migrated.
    let old = dir.path().join("old.db");
    rusqlite::Connection::open(&old)
        .unwrap()
        .execute_batch("PRAGMA application_id = 1768910945; PRAGMA user_version = 0;")
        .unwrap();
    let old_bytes = std::fs::read(&old).unwrap();
    for args in readers {
        let out = iopath().args(args).arg("--db").arg(&old).output().unwrap();
        assert_refused(&out, "written by an older iopath", &format!("{args:?}"));
    }
    assert!(
        std::fs::read(&old).unwrap() == old_bytes,
        "a reader migrated the database"
    );
    assert_eq!(listing(dir.path()), vec!["blank.db", "empty.db", "old.db"]);
    // The deliberate upgrade, then an ordinary read.
    let upgraded = run_ok(&["runs", "--upgrade"], &old);
    assert!(stdout(&upgraded).contains("no runs"), "{}", stdout(&upgraded));
    run_ok(&["runs"], &old);

    // Writers initialise a 0-byte file (documented in docs/output.md).
    assert!(fake_sweep(&empty).status.success());
    run_ok(&["runs"], &empty);
}

/// Start `n` fake sweeps on `db` at the same moment and wait for all of them.
fn sweeps_at_once(db: &Path, n: usize) -> Vec<Output> {
    let bin = assert_cmd::cargo::cargo_bin("iopath");
    let children: Vec<_> = (0..n)
        .map(|_| {
            StdCommand::new(&bin)
                .args(["sweep", "fake", "--cells", "ok:1,ok:2", "--reps", "3", "--db"])
                .arg(db)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children.into_iter().map(|c| c.wait_with_output().unwrap()).collect()
}

fn assert_all_succeeded(outputs: &[Output], db: &Path, runs: i64) {
    for out in outputs {
        assert!(out.status.success(), "a concurrent sweep failed: {}", stderr(out));
    }
    assert_eq!(count(db, "SELECT count(*) FROM runs WHERE status = 'complete'"), runs);
    assert_eq!(
        count(db, "SELECT count(*) FROM observations WHERE status = 'ok'"),
        runs * 6
    );
    let integrity: String = rusqlite::Connection::open(db)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
}

#[test]
fn four_writers_at_once_all_succeed_on_a_new_and_an_existing_database() {
    let dir = tempfile::tempdir().unwrap();
    // New databases: the four race to create the schema (several rounds: the race is short).
    for round in 0..3 {
        let db = dir.path().join(format!("new-{round}/iopath.db"));
        let outputs = sweeps_at_once(&db, 4);
        assert_all_succeeded(&outputs, &db, 4);
    }
    // A 0-byte file the four initialise together.
    let db = dir.path().join("empty.db");
    std::fs::File::create(&db).unwrap();
    assert_all_succeeded(&sweeps_at_once(&db, 4), &db, 4);
    // An existing database.
    let db = dir.path().join("existing.db");
    assert!(fake_sweep(&db).status.success());
    let outputs = sweeps_at_once(&db, 4);
    assert_all_succeeded(&outputs, &db, 5);
}

/// Poll `iopath runs` until run 1 is listed as running.
fn wait_until_running(db: &Path) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if db.exists() {
            let out = iopath().arg("runs").arg("--db").arg(db).output().unwrap();
            if stdout(&out).contains("running") {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the sweep never showed up as running");
}

#[test]
fn a_run_another_process_is_executing_is_not_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("iopath.db");
    let mut owner = StdCommand::new(assert_cmd::cargo::cargo_bin("iopath"))
        .args(["sweep", "fake", "--cells", "ok,sleep:2s", "--db"])
        .arg(&db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until_running(&db);
    let out = iopath()
        .args(["sweep", "--resume", "1", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let refused = out.status.code() == Some(2);
    // The owner is killed outright: its run stays `running`, and may now be resumed.
    owner.kill().unwrap();
    owner.wait().unwrap();
    assert!(
        refused,
        "resume of a running run was not refused: {:?} {}",
        out.status,
        stderr(&out)
    );
    assert_refused(&out, "being run by another iopath process", "resume while running");
    assert!(stdout(&run_ok(&["runs"], &db)).contains("running"));
    run_ok(&["sweep", "--resume", "1"], &db);
    assert_eq!(count(&db, "SELECT count(*) FROM runs WHERE status = 'complete'"), 1);
    assert_eq!(count(&db, "SELECT count(*) FROM observations WHERE status = 'ok'"), 2);
}

#[test]
fn special_and_wrong_files_are_refused_with_exit_2_by_readers_and_writers() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.db");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let text = dir.path().join("notes.db");
    std::fs::write(&text, "not a database").unwrap();
    let newer = dir.path().join("newer.db");
    assert!(fake_sweep(&newer).status.success());
    rusqlite::Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    let cases: [(&Path, &str); 5] = [
        (&fifo, "not a regular file"),
        (Path::new("/dev/null"), "not a regular file"),
        (dir.path(), "not a regular file"),
        (&text, "not an SQLite database"),
        (&newer, "newer than this iopath"),
    ];
    for (db, needle) in cases {
        for args in [
            &["runs"][..],
            &["export"],
            &["sweep", "fake", "--cells", "ok"],
            &["fake", "--cells", "ok"],
            &["sweep", "--resume", "1"],
        ] {
            let out = iopath()
                .args(args)
                .arg("--db")
                .arg(db)
                .timeout(Duration::from_secs(10))
                .output()
                .unwrap();
            assert_refused(&out, needle, &format!("{args:?} --db {}", db.display()));
        }
    }
    assert_eq!(std::fs::read_to_string(&text).unwrap(), "not a database");
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
}

#[test]
fn corrupt_stored_values_are_refused_not_obeyed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("iopath.db");
    assert!(fake_sweep(&db).status.success());
    let edit = |sql: &str| rusqlite::Connection::open(&db).unwrap().execute_batch(sql).unwrap();

    // A negative seed is how a seed above i64::MAX is stored: fine.
    edit("UPDATE runs SET seed = -5");
    run_ok(&["runs"], &db);

    edit("UPDATE runs SET repetitions = -3");
    for args in [
        &["runs"][..],
        &["report", "1", "-o", dir.path().join("r.html").to_str().unwrap()],
        &["export", "1"],
        &["compare", "1", "1"],
        &["sweep", "--resume", "1"],
    ] {
        let out = iopath().args(args).arg("--db").arg(&db).output().unwrap();
        assert_refused(&out, "run 1 has -3 repetitions", &format!("{args:?}"));
    }
    assert_eq!(
        count(&db, "SELECT count(*) FROM observations"),
        6,
        "a corrupt run was resumed"
    );

    edit("UPDATE runs SET repetitions = 3, status = 'exploded'");
    for args in [&["runs"][..], &["export", "1"], &["sweep", "--resume", "1"]] {
        let out = iopath().args(args).arg("--db").arg(&db).output().unwrap();
        assert_refused(&out, "unknown status 'exploded'", &format!("{args:?}"));
    }

    edit("UPDATE runs SET status = 'complete', repetitions = 100000");
    let out = iopath()
        .args(["sweep", "--resume", "1", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_refused(&out, "damaged", "resume with 100000 repetitions");
}

/// Text from others reaches the terminal escaped: a run name (and a stored error) edited to hold
/// terminal escape sequences — set the window title, clear the screen, an OSC 52 clipboard
/// write, an 8-bit CSI — is printed with its control characters made visible by `runs`,
/// `compare` (table and `--markdown`) and the failed-cell lines; CSV exports neutralise
/// spreadsheet formulas in text cells and leave numbers alone.
#[test]
fn stored_text_reaches_the_terminal_escaped_and_csv_cells_cannot_be_formulas() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    fake_sweep(&db);
    fake_sweep(&db);
    let hostile = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{1b}]52;c;aGk=\u{1b}\\\u{9b}31m\r";
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute("UPDATE runs SET name = ?1, command_line = ?1", [hostile])
            .unwrap();
        conn.execute(
            "UPDATE runs SET name = '=HYPERLINK(\"http://x\",\"y\")' WHERE id = 2",
            [],
        )
        .unwrap();
    }
    let raw = |text: &str| text.chars().any(|c| c.is_control() && c != '\n' && c != '\t');
    for args in [
        vec!["runs"],
        vec!["compare", "1", "2"],
        vec!["compare", "1", "2", "--markdown"],
    ] {
        let out = run_ok(&args, &db);
        let text = stdout(&out);
        assert!(!raw(&text), "{args:?} printed raw control characters: {text:?}");
        assert!(
            text.contains("\\x1b]0;owned\\x07"),
            "{args:?}: the name is not shown escaped: {text:?}"
        );
    }
    let out = run_ok(&["export", "2", "--format", "long"], &db);
    let text = stdout(&out);
    assert!(text.contains("'=HYPERLINK"), "{text}");
    assert!(!text.contains(",=HYPERLINK"), "{text}");
    assert!(
        text.lines().skip(1).all(|l| !l.contains(",'-") && !l.contains(",'1")),
        "numbers stay numbers: {text}"
    );
}

/// Unusable databases give 2 in readers and writers alike: a truncated file and one with
/// overwritten pages (damaged) in `runs`, `export`, `compare`, `report`, `--resume` and a new
/// sweep; a database on read-only media (root: a read-only tmpfs; otherwise a 0555 folder and
/// file) on `--resume` and on a new sweep, saying "read-only".
#[test]
fn unusable_databases_give_2_in_readers_and_writers_alike() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    assert!(fake_sweep(&db).status.success());
    assert!(fake_sweep(&db).status.success());
    let bytes = std::fs::read(&db).unwrap();
    assert!(bytes.len() >= 4 * 4096, "{}", bytes.len());
    let truncated = dir.path().join("truncated.db");
    std::fs::write(&truncated, &bytes[..8192]).unwrap();
    let overwritten = dir.path().join("pages.db");
    let mut damaged = bytes.clone();
    for (i, b) in damaged[4096..].iter_mut().enumerate() {
        *b = (i * 131 % 251) as u8;
    }
    std::fs::write(&overwritten, &damaged).unwrap();
    for bad in [&truncated, &overwritten] {
        let out_html = dir.path().join("out.html");
        let commands: Vec<Vec<&str>> = vec![
            vec!["runs"],
            vec!["export"],
            vec!["compare", "1", "2"],
            vec!["report", "-o", out_html.to_str().unwrap()],
            vec!["sweep", "--resume", "1"],
            vec!["sweep", "fake", "--cells", "ok"],
        ];
        for args in commands {
            let out = iopath().args(&args).arg("--db").arg(bad).output().unwrap();
            assert_refused(&out, "damaged", &format!("{args:?} on {}", bad.display()));
        }
    }

    let ro = dir.path().join("ro");
    let _mount = if is_root() {
        let mount = Tmpfs::mount(&ro, "4m");
        std::fs::copy(&db, ro.join("r.db")).unwrap();
        mount.remount_read_only();
        Some(mount)
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir(&ro).unwrap();
        std::fs::copy(&db, ro.join("r.db")).unwrap();
        std::fs::set_permissions(ro.join("r.db"), std::fs::Permissions::from_mode(0o444)).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
        None
    };
    let ro_db = ro.join("r.db");
    let resume = iopath()
        .args(["sweep", "--resume", "1", "--db"])
        .arg(&ro_db)
        .output()
        .unwrap();
    assert_refused(&resume, "read-only", "--resume on read-only media");
    let fresh = iopath()
        .args(["sweep", "fake", "--cells", "ok", "--db"])
        .arg(&ro_db)
        .output()
        .unwrap();
    assert_refused(&fresh, "read-only", "a new sweep on read-only media");
    let new_file = iopath()
        .args(["sweep", "fake", "--cells", "ok", "--db"])
        .arg(ro.join("new.db"))
        .output()
        .unwrap();
    assert_refused(&new_file, "read-only", "a new database on read-only media");
    assert_eq!(listing(&ro), vec!["r.db"]);
}

/// Resume re-validates every stored case with the same limits and memory check as the command
/// line: a case edited in the database (a message the CLI refuses, buffers far beyond the
/// memory) is refused as damaged with exit 2 before anything runs, not run until the process
/// is OOM-killed; and impossible stored positions are found before any cell runs.
#[test]
fn resume_revalidates_stored_cases_and_positions_before_any_cell_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    stream_run(&db);
    let edit = |sql: &str| {
        rusqlite::Connection::open(&db).unwrap().execute_batch(sql).unwrap();
    };
    // Make the run resumable: its only cell is gone.
    edit("DELETE FROM metrics; DELETE FROM observations; UPDATE runs SET status = 'interrupted';");
    for (what, set) in [
        ("a 2 GiB message", "json_set(case_json, '$.size', 2147483648)"),
        (
            "1 GiB messages on 1024 threads",
            "json_set(case_json, '$.size', 1073741824, '$.threads', 1024)",
        ),
        ("zero threads", "json_set(case_json, '$.threads', 0)"),
        ("a 100-day window", "json_set(case_json, '$.duration_ms', 8640000000)"),
        (
            "a remote address holding an escape sequence",
            "json_set(case_json, '$.endpoint', json('{\"kind\":\"remote\",\"addr\":\"\\u001b]0;x\\u0007:1\"}'))",
        ),
    ] {
        let original: String = rusqlite::Connection::open(&db)
            .unwrap()
            .query_row("SELECT case_json FROM cases", [], |r| r.get(0))
            .unwrap();
        edit(&format!("UPDATE cases SET case_json = {set}"));
        let out = iopath()
            .args(["sweep", "--resume", "1", "--db"])
            .arg(&db)
            .output()
            .unwrap();
        assert_refused(&out, "damaged", what);
        assert_eq!(count(&db, "SELECT count(*) FROM observations"), 0, "{what}: a cell ran");
        assert_eq!(
            count(&db, "SELECT count(*) FROM runs WHERE status = 'interrupted'"),
            1,
            "{what}: the run's status changed"
        );
        rusqlite::Connection::open(&db)
            .unwrap()
            .execute("UPDATE cases SET case_json = ?1", [original])
            .unwrap();
    }

    // Impossible positions: an observation of a repetition the run does not have, a case
    // stored at a position it cannot have.
    let fake = dir.path().join("fake.db");
    assert!(fake_sweep(&fake).status.success());
    let edit_fake = |sql: &str| {
        rusqlite::Connection::open(&fake).unwrap().execute_batch(sql).unwrap();
    };
    edit_fake("DELETE FROM observations WHERE repetition = 2; UPDATE runs SET status = 'interrupted';");
    let stored = count(&fake, "SELECT count(*) FROM observations");
    for (what, sql, undo) in [
        (
            "repetition 7 of 3",
            "UPDATE observations SET repetition = 7 WHERE id = (SELECT min(id) FROM observations)",
            "UPDATE observations SET repetition = 0 WHERE repetition = 7",
        ),
        (
            "a case at position 9",
            "UPDATE cases SET position = 9 WHERE position = 1",
            "UPDATE cases SET position = 1 WHERE position = 9",
        ),
        (
            "a negative repetition",
            "UPDATE observations SET repetition = -1 WHERE id = (SELECT min(id) FROM observations)",
            "UPDATE observations SET repetition = 0 WHERE repetition = -1",
        ),
    ] {
        edit_fake(sql);
        let out = iopath()
            .args(["sweep", "--resume", "1", "--db"])
            .arg(&fake)
            .output()
            .unwrap();
        assert_refused(&out, "damaged", what);
        assert_eq!(
            count(&fake, "SELECT count(*) FROM observations"),
            stored,
            "{what}: a cell ran"
        );
        edit_fake(undo);
    }
    // Undone, the run resumes.
    let out = iopath()
        .args(["sweep", "--resume", "1", "--db"])
        .arg(&fake)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Every output path is checked like report/export/quick: `man -o DIR` never writes over an
/// SQLite file (the folder itself, a page, a page that links to the database), and a report
/// to a device or FIFO (`/dev/stdout`) is refused instead of making a `-charts` folder beside
/// it (in /dev); a charts folder name that is a database is refused too.
#[test]
fn man_and_report_outputs_never_land_on_a_database_or_beside_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    assert!(fake_sweep(&db).status.success());
    let bytes = std::fs::read(&db).unwrap();

    // The folder is the database.
    let out = iopath().args(["man", "-o"]).arg(&db).output().unwrap();
    assert_refused(&out, "SQLite", "man -o DB");
    // A page is a database, or a link to the database.
    let pages = dir.path().join("man");
    std::fs::create_dir(&pages).unwrap();
    std::fs::copy(&db, pages.join("iopath.1")).unwrap();
    let out = iopath().args(["man", "-o"]).arg(&pages).output().unwrap();
    assert_refused(&out, "SQLite", "man -o DIR with iopath.1 a database");
    assert_eq!(
        listing(&pages),
        vec!["iopath.1"],
        "pages were written before the refusal"
    );
    std::fs::remove_file(pages.join("iopath.1")).unwrap();
    std::os::unix::fs::symlink(&db, pages.join("iopath-runs.1")).unwrap();
    let out = iopath().args(["man", "-o"]).arg(&pages).output().unwrap();
    assert_refused(&out, "SQLite", "man -o DIR with a page linking to the database");
    assert!(std::fs::read(&db).unwrap() == bytes, "the database changed");
    std::fs::remove_file(pages.join("iopath-runs.1")).unwrap();
    let out = iopath().args(["man", "-o"]).arg(&pages).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(listing(&pages).contains(&"iopath.1".to_string()));

    // A report to a device or a FIFO: refused, no charts folder beside it.
    let before: Vec<String> = listing(Path::new("/dev"));
    let out = iopath()
        .args(["report", "-o", "/dev/stdout", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_refused(&out, "a report's charts need a folder", "report -o /dev/stdout");
    assert!(
        !Path::new("/dev/stdout-charts").exists(),
        "a charts folder was made in /dev"
    );
    assert_eq!(
        listing(Path::new("/dev"))
            .iter()
            .filter(|n| n.contains("charts"))
            .count(),
        0
    );
    assert!(before.iter().all(|n| !n.contains("charts")));
    let fifo = dir.path().join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let out = iopath()
        .args(["report", "-o"])
        .arg(&fifo)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_refused(&out, "not a file", "report -o FIFO");
    assert!(!dir.path().join("pipe-charts").exists());
    // The charts folder's name is taken by a database.
    std::fs::copy(&db, dir.path().join("x-charts")).unwrap();
    let out = iopath()
        .args(["report", "-o"])
        .arg(dir.path().join("x.html"))
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_refused(&out, "x-charts", "report whose charts folder is a database");
    assert!(!dir.path().join("x.html").exists());
}

/// Issue 31, item 3: every database and output path is resolved (a descriptor through
/// /proc/self/fd) and checked by one function before any work; SQLite's side-file names are
/// refused everywhere.
#[test]
fn paths_that_are_not_what_they_look_like_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kept.db");
    assert!(fake_sweep(&db).status.success());
    let before = std::fs::read(&db).unwrap();
    // A database named like a side file, in every command that takes one.
    for name in ["kept.db-journal", "results-wal", "x.sqlite-shm"] {
        let side = dir.path().join(name);
        for args in [
            &["fake", "--cells", "ok"][..],
            &["runs"],
            &["export"],
            &["sweep", "fake", "--cells", "ok"],
        ] {
            let out = iopath().args(args).arg("--db").arg(&side).output().unwrap();
            assert_refused(&out, "SQLite keeps beside a database", &format!("{args:?} --db {name}"));
            assert!(!side.exists(), "{args:?} --db {name} made it");
        }
        for (command, flag) in [("export", "-o"), ("report", "-o")] {
            let out = iopath()
                .args([command, flag])
                .arg(&side)
                .arg("--db")
                .arg(&db)
                .output()
                .unwrap();
            assert_refused(&out, "SQLite keeps beside a database", &format!("{command} -o {name}"));
        }
        let out = iopath().arg("merge").arg(&side).arg(&db).output().unwrap();
        assert_refused(&out, "SQLite keeps beside a database", &format!("merge {name}"));
        assert!(!side.exists(), "merge {name} made it");
    }
    // A folder named like a side file, made by the output (SQLite then cannot open kept.db:
    // its -wal is a folder): man's pages, an export or a report inside one, a database in one.
    let wal_dir = dir.path().join("kept.db-wal");
    let inside = wal_dir.join("out.csv");
    let inside_report = wal_dir.join("r.html");
    let inside_db = wal_dir.join("new.db");
    for args in [
        vec!["man".into(), "-o".into(), wal_dir.clone().into_os_string()],
        vec![
            "export".into(),
            "-o".into(),
            inside.into_os_string(),
            "--db".into(),
            db.clone().into_os_string(),
        ],
        vec![
            "report".into(),
            "-o".into(),
            inside_report.into_os_string(),
            "--db".into(),
            db.clone().into_os_string(),
        ],
        vec![
            "fake".into(),
            "--cells".into(),
            "ok".into(),
            "--db".into(),
            inside_db.into_os_string(),
        ],
    ] {
        let out = iopath().args(&args).output().unwrap();
        assert_refused(&out, "SQLite keeps beside a database", &format!("{args:?}"));
        assert!(!wal_dir.exists(), "{args:?} made the folder");
    }
    let out = iopath().arg("runs").arg("--db").arg(&db).output().unwrap();
    assert!(out.status.success(), "kept.db still opens: {}", stderr(&out));
    // A link whose name looks harmless but leads to a side file's name.
    let innocent = dir.path().join("numbers.csv");
    std::os::unix::fs::symlink(dir.path().join("kept.db-wal"), &innocent).unwrap();
    let out = iopath()
        .args(["export", "-o"])
        .arg(&innocent)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_refused(
        &out,
        "SQLite keeps beside a database",
        "export -o a link to a -wal name",
    );

    // A database that is this process's stdout or another descriptor, redirected to a file:
    // refused with one line before anything is measured, nothing written into the file.
    for (spelling, fd_name) in [
        ("/dev/stdout", "standard output"),
        ("/dev/fd/1", "standard output"),
        ("/proc/self/fd/1", "standard output"),
    ] {
        let sink = dir.path().join("redirected.out");
        let err = dir.path().join("redirected.err");
        let status = std::process::Command::new(assert_cmd::cargo::cargo_bin("iopath"))
            .args(["fake", "--cells", "ok:3", "--db", spelling])
            .stdout(std::fs::File::create(&sink).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .status()
            .unwrap();
        let said = std::fs::read_to_string(&err).unwrap();
        assert_eq!(status.code(), Some(2), "--db {spelling}: {said}");
        assert!(
            said.contains(fd_name) && said.trim_end().lines().count() == 1,
            "--db {spelling}: {said}"
        );
        assert_eq!(
            std::fs::read(&sink).unwrap().len(),
            0,
            "--db {spelling} wrote into the redirected file"
        );
    }
    // An export into a descriptor the shell opened is written into what it is, in place.
    let opened = dir.path().join("opened.csv");
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#""$0" export -o /dev/fd/3 --db "$1" 3>"$2""#)
        .arg(assert_cmd::cargo::cargo_bin("iopath"))
        .arg(&db)
        .arg(&opened)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        std::fs::read_to_string(&opened).unwrap().starts_with("run_id,"),
        "the export is in the file fd 3 is"
    );
    // A report into a redirected stderr: no charts folder under /dev, one line, exit 2.
    let err = dir.path().join("report.err");
    let status = std::process::Command::new(assert_cmd::cargo::cargo_bin("iopath"))
        .args(["report", "-o", "/dev/fd/2", "--db"])
        .arg(&db)
        .stderr(std::fs::File::create(&err).unwrap())
        .status()
        .unwrap();
    let said = std::fs::read_to_string(&err).unwrap();
    assert_eq!(status.code(), Some(2), "{said}");
    assert!(
        said.contains("standard error") && said.trim_end().lines().count() == 1,
        "{said}"
    );
    assert!(!Path::new("/dev/fd-charts").exists() && !Path::new("/dev/stderr-charts").exists());
    assert!(std::fs::read(&db).unwrap() == before, "the database was changed");
}

/// Issue 31, item 4: a stored value out of range (negative, not finite, beyond 2^53, a
/// fraction above 1) or of the wrong type (text) is "damaged", exit 2, in every reader —
/// never printed, never a raw SQLite error.
#[test]
fn stored_values_out_of_range_or_of_the_wrong_type_are_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean.db");
    assert!(fake_sweep(&clean).status.success());
    assert!(fake_sweep(&clean).status.success());
    let html = dir.path().join("r.html");
    for (i, value) in ["-0.25", "-4096", "3e17", "1e999", "-1e999", "'quick'", "x'00ff'"]
        .iter()
        .enumerate()
    {
        let db = dir.path().join(format!("bad{i}.db"));
        std::fs::copy(&clean, &db).unwrap();
        rusqlite::Connection::open(&db)
            .unwrap()
            .execute_batch(&format!(
                "UPDATE metrics SET value = {value} WHERE rowid = (SELECT max(m.rowid) FROM metrics m \
                 JOIN observations o ON o.id = m.observation_id JOIN cases c ON c.id = o.case_id WHERE c.run_id = 2)"
            ))
            .unwrap();
        for args in [
            vec!["export"],
            vec!["export", "--format", "json"],
            vec!["compare", "1", "2"],
            vec!["report", "2", "-o", html.to_str().unwrap()],
        ] {
            let out = iopath().args(&args).arg("--db").arg(&db).output().unwrap();
            assert_refused(&out, "damaged", &format!("{args:?} with the value {value}"));
        }
    }
    // A fraction above 1.
    let db = dir.path().join("fraction.db");
    std::fs::copy(&clean, &db).unwrap();
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "UPDATE metrics SET name = 'served_fraction', value = 1.5 WHERE rowid = (SELECT max(rowid) FROM metrics)",
        )
        .unwrap();
    let out = iopath().arg("export").arg("--db").arg(&db).output().unwrap();
    assert_refused(&out, "damaged", "a fraction of 1.5");
}

/// Issue 31.4, a latency bound tied to the case: a stored latency longer than its case's
/// window and warm-up can record (an rr case of 1.1 s, one pass without counters: at most
/// 2 x 1.1 s + 1 s) is "damaged", exit 2, in every reader and in merge; within it, it reads.
#[test]
fn a_stored_latency_longer_than_its_cases_windows_is_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean.db");
    assert!(fake_sweep(&clean).status.success());
    let html = dir.path().join("r.html");
    let rr = r#"{"workload":"net-rr","kind":"rr","mode":"two-copy","rx_mode":"copy","request_size":64,"response_size":64,"fields":1,"inflight":1,"threads":1,"rate":null,"duration_ms":1000,"warmup_ms":100,"client_cpus":null,"server_cpus":null,"verify":false,"endpoint":{"kind":"loopback","port":0},"perf":false}"#;
    for (value, damaged) in [(3.35e6, true), (7.25e7, true), (3.1e5, false), (3.1e6, false)] {
        let db = dir.path().join(format!("window{value}.db"));
        std::fs::copy(&clean, &db).unwrap();
        let conn = rusqlite::Connection::open(&db).unwrap();
        let last = "(SELECT max(observation_id) FROM metrics)";
        conn.execute(
            &format!("UPDATE cases SET case_json = ?1 WHERE id = (SELECT case_id FROM observations WHERE id = {last})"),
            [rr],
        )
        .unwrap();
        let changed = conn
            .execute(
                &format!("UPDATE metrics SET name = 'latency_p99_us', value = ?1, role = 'client' WHERE observation_id = {last}"),
                [value],
            )
            .unwrap();
        assert_eq!(changed, 1, "the last observation has one value");
        drop(conn);
        let merged = dir.path().join(format!("merged{value}.db"));
        for args in [
            vec!["export".to_string()],
            vec!["report".into(), "1".into(), "-o".into(), html.to_str().unwrap().into()],
            vec!["merge".into(), merged.to_str().unwrap().into()],
        ] {
            let mut cmd = iopath();
            cmd.args(&args);
            if args[0] == "merge" {
                cmd.arg(&db);
            } else {
                cmd.arg("--db").arg(&db);
            }
            let out = cmd.output().unwrap();
            if damaged {
                assert_refused(&out, "damaged", &format!("{args:?} with a p99 of {value} us"));
                let err = stderr(&out);
                assert!(
                    err.contains("latency_p99_us") && err.contains("case's windows"),
                    "{err}"
                );
            } else {
                assert!(
                    out.status.success(),
                    "{args:?} with a p99 of {value} us: {}",
                    stderr(&out)
                );
            }
        }
    }
}

/// Issue 31.4's bounds between stored values, new values: one observation whose p75 is above
/// its p99.99, or whose mean is above its maximum, is "damaged", exit 2, naming both metrics,
/// in every reader, and so is a latency above what a histogram holds; in order and within it,
/// the same values read.
#[test]
fn stored_values_out_of_order_are_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean.db");
    assert!(fake_sweep(&clean).status.success());
    let html = dir.path().join("r.html");
    // The fake's observations have one value each: the last one's becomes `a`, and `b` is
    // added beside it.
    let cases = [
        ("latency_p75_us", 2048.5, "latency_p9999_us", 1999.0, true),
        ("latency_mean_us", 61.0, "latency_max_us", 60.75, true),
        // In order, but above the 100 s a latency histogram holds.
        ("connect_p50_us", 1.5e8, "connect_max_us", 1.6e8, true),
        ("latency_p75_us", 1999.0, "latency_p9999_us", 2048.5, false),
    ];
    for (i, (a, va, b, vb, damaged)) in cases.into_iter().enumerate() {
        let db = dir.path().join(format!("order{i}.db"));
        std::fs::copy(&clean, &db).unwrap();
        let conn = rusqlite::Connection::open(&db).unwrap();
        let last = "(SELECT max(observation_id) FROM metrics)";
        let changed = conn
            .execute(
                &format!("UPDATE metrics SET name = ?1, value = ?2, role = 'client' WHERE observation_id = {last}"),
                rusqlite::params![a, va],
            )
            .unwrap();
        assert_eq!(changed, 1, "the last observation has one value");
        conn.execute(
            &format!(
                "INSERT INTO metrics (observation_id, role, name, value, unit, source) \
                 SELECT observation_id, role, ?1, ?2, unit, source FROM metrics WHERE observation_id = {last}"
            ),
            rusqlite::params![b, vb],
        )
        .unwrap();
        drop(conn);
        for args in [
            vec!["export"],
            vec!["export", "--format", "json"],
            vec!["report", "1", "-o", html.to_str().unwrap()],
        ] {
            let out = iopath().args(&args).arg("--db").arg(&db).output().unwrap();
            if damaged {
                assert_refused(&out, "damaged", &format!("{args:?} with {a} {va} and {b} {vb}"));
                let err = stderr(&out);
                assert!(
                    err.contains(a) && (err.contains(b) || err.contains("longest latency")),
                    "{err}"
                );
            } else {
                assert!(out.status.success(), "{args:?}: {}", stderr(&out));
            }
        }
    }
}
