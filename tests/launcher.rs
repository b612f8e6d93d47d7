//! The launcher, the live view and plan files, driven the way a person uses them: in a real
//! terminal (tmux, with send-keys and capture-pane), and through pipes where nothing may ever
//! prompt. The terminal tests need tmux (scripts/test installs it); without it they skip,
//! saying so.

mod common;

use common::*;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A tmux server of this test's own (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Start `command` (a shell line) in a 120x40 terminal; the pane stays after it exits and
    /// prints `IOPATH-EXIT=<code>`. None (the test skipped, saying why) when tmux is missing.
    fn start(name: &str, dir: &Path, command: &str) -> Option<Tmux> {
        if let Some(why) = missing_program("tmux") {
            skip(&why);
            return None;
        }
        let tmux = Tmux {
            socket: format!("iopath-test-{}-{name}", std::process::id()),
        };
        let line = format!("{command}; echo IOPATH-EXIT=$?; sleep 600");
        let ok = std::process::Command::new("tmux")
            .args(["-L", &tmux.socket, "-f", "/dev/null", "new-session", "-d", "-s", "t"])
            .args(["-x", "120", "-y", "40", "-c"])
            .arg(dir)
            .arg(line)
            .env("TERM", "xterm-256color")
            .status()
            .expect("run tmux");
        assert!(ok.success(), "tmux new-session failed");
        Some(tmux)
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("run tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Type `text` and press Enter.
    fn line(&self, text: &str) {
        if !text.is_empty() {
            self.tmux(&["send-keys", "-t", "t", "-l", text]);
        }
        self.tmux(&["send-keys", "-t", "t", "Enter"]);
    }

    fn key(&self, key: &str) {
        self.tmux(&["send-keys", "-t", "t", key]);
    }

    /// The screen and its scroll-back.
    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "t", "-S", "-300"])
    }

    /// Wait until the screen shows `text`; panics with the screen after `limit`.
    fn wait_for(&self, text: &str, limit: Duration) -> String {
        self.wait_for_all(&[text], limit)
    }

    /// Wait until the screen shows every one of `texts` at once.
    fn wait_for_all(&self, texts: &[&str], limit: Duration) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if texts.iter().all(|t| screen.contains(t)) {
                return screen;
            }
            assert!(
                start.elapsed() < limit,
                "the terminal never showed {texts:?} within {limit:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Answer the question that ends with `prompt`.
    fn answer(&self, prompt: &str, text: &str) {
        self.wait_for(prompt, Duration::from_secs(20));
        self.line(text);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

fn run_status(db: &Path, id: i64) -> String {
    let conn = rusqlite::Connection::open(db).expect("open the database");
    conn.query_row("SELECT status FROM runs WHERE id = ?1", [id], |r| r.get(0))
        .expect("the run's status")
}

fn command_line(db: &Path, id: i64) -> String {
    let conn = rusqlite::Connection::open(db).expect("open the database");
    conn.query_row("SELECT command_line FROM runs WHERE id = ?1", [id], |r| r.get(0))
        .expect("the run's command line")
}

/// A person opens the launcher, picks the (hidden) fake workload, saves the plan, runs it,
/// and presses q in the middle: the finished cells are stored and the run is interrupted.
/// A second launcher run of the same cases offers the compare command.
#[test]
fn the_launcher_runs_a_plan_live_and_q_stops_it_like_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let plan = dir.path().join("plan.toml");
    let Some(t) = Tmux::start("q", dir.path(), &bin().display().to_string()) else {
        return;
    };
    let screen = t.wait_for("experiment [1]:", Duration::from_secs(20));
    assert!(
        screen.contains("copy modes") && screen.contains("server models"),
        "{screen}"
    );
    t.line("fake");
    t.answer("cells [", "sleep:300ms,ok:7");
    t.answer("repetitions [6]:", "20");
    t.answer("a name for the run [none]:", "");
    t.answer("results database [", &db.display().to_string());
    let screen = t.wait_for("save the plan as TOML", Duration::from_secs(20));
    assert!(
        screen.contains(&format!(
            "iopath fake --cells sleep:300ms,ok:7 --reps 20 --db {}",
            db.display()
        )),
        "the equivalent command is shown: {screen}"
    );
    assert!(screen.contains("40 cells, about 6 s of measuring"), "{screen}");
    t.line(&plan.display().to_string());
    t.answer("run it now with the live view?", "");
    let screen = t.wait_for("q: stop", Duration::from_secs(20));
    assert!(screen.contains("value per case"), "the chart is drawn: {screen}");
    wait_for_cells(&db, 4, Duration::from_secs(30));
    t.key("q");
    let screen = t.wait_for("IOPATH-EXIT=", Duration::from_secs(20));
    assert!(screen.contains("IOPATH-EXIT=0"), "{screen}");
    assert!(
        screen.contains("stopped:") && screen.contains("run --resume 1"),
        "{screen}"
    );
    assert!(
        screen.contains(&format!("iopath report 1 --db {}", db.display())),
        "{screen}"
    );
    let cells = stored_cells(&db);
    assert!((4..40).contains(&cells), "{cells} cells stored");
    assert_eq!(run_status(&db, 1), "interrupted");
    assert!(command_line(&db, 1).starts_with("iopath fake --cells sleep:300ms,ok:7"));
    let text = std::fs::read_to_string(&plan).expect("the plan was saved");
    assert!(text.contains("command = [\"fake\", \"--cells\""), "{text}");
    drop(t);

    // The same cases again, run to the end: the launcher offers the comparison.
    let Some(t) = Tmux::start("again", dir.path(), &bin().display().to_string()) else {
        return;
    };
    t.answer("experiment [1]:", "fake");
    t.answer("cells [", "sleep:300ms,ok:7");
    t.answer("repetitions [6]:", "1");
    t.answer("a name for the run [none]:", "");
    t.answer("results database [", &db.display().to_string());
    t.answer("save the plan as TOML", "");
    t.answer("run it now with the live view?", "y");
    let screen = t.wait_for("IOPATH-EXIT=", Duration::from_secs(30));
    assert!(screen.contains("IOPATH-EXIT=0"), "{screen}");
    assert!(
        screen.contains(&format!("iopath compare 1 2 --db {}", db.display())),
        "{screen}"
    );
    assert_eq!(run_status(&db, 2), "complete");
}

/// The copy-modes family with a short real net-stream: the launcher's defaults and answers
/// become a valid plan, the view draws the throughput chart, the cells are stored.
#[test]
fn the_launcher_runs_a_short_net_stream() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("n.db");
    let Some(t) = Tmux::start("stream", dir.path(), &bin().display().to_string()) else {
        return;
    };
    t.answer("experiment [1]:", "1");
    t.answer("modes [all]:", "2");
    t.answer("message sizes", "4K");
    t.answer("client threads", "");
    t.answer("measured window per cell [1s]:", "200ms");
    t.answer("warm-up per cell [200ms]:", "100ms");
    // Proposed: quick's pinning of this machine; answered: none (a 1-CPU runner has no CPU 1).
    t.answer("pin client threads", "none");
    t.answer("pin server threads", "none");
    t.answer("repetitions (6 give intervals of the median", "3");
    t.answer("a name for the run [none]:", "");
    t.answer("results database [", &db.display().to_string());
    let screen = t.wait_for("save the plan as TOML", Duration::from_secs(20));
    assert!(
        screen.contains(
            "iopath net stream --mode one-copy --size 4K --threads 1 --duration 200ms --warmup 100ms --reps 3"
        ),
        "{screen}"
    );
    t.line("");
    t.answer("run it now with the live view?", "y");
    t.wait_for("throughput (Gbit/s, median so far)", Duration::from_secs(20));
    let screen = t.wait_for("IOPATH-EXIT=", Duration::from_secs(60));
    assert!(screen.contains("IOPATH-EXIT=0"), "{screen}");
    // net stream's own table follows: mode, size, threads first.
    assert!(
        screen
            .lines()
            .any(|l| l.split_whitespace().take(3).eq(["one-copy", "4KiB", "1"])),
        "the cell table follows: {screen}"
    );
    assert_eq!(stored_cells(&db), 3);
    assert_eq!(run_status(&db, 1), "complete");
}

/// `--live` on a direct sweep in a terminal: the view shows progress and results, the run
/// completes and stores every cell, and the table is printed after the view closes.
#[test]
fn live_view_on_a_sweep_in_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v.db");
    let command = format!(
        "{} sweep fake --cells sleep:250ms,ok:3,fail --reps 6 --db {} --live",
        bin().display(),
        db.display()
    );
    let Some(t) = Tmux::start("live", dir.path(), &command) else {
        return;
    };
    let screen = t.wait_for("q: stop", Duration::from_secs(20));
    assert!(screen.contains("iopath fake") && screen.contains("eta"), "{screen}");
    t.wait_for_all(
        &["failed cells (", "failed: fake#2 fail rep 0: fake failure"],
        Duration::from_secs(20),
    );
    let screen = t.wait_for("IOPATH-EXIT=", Duration::from_secs(30));
    assert!(screen.contains("IOPATH-EXIT=1"), "failed cells exit 1: {screen}");
    assert!(screen.contains("fake#1 ok:3"), "the table follows the view: {screen}");
    assert!(
        screen.contains("cell failed: fake#2 fail rep 0"),
        "stderr written during the view comes out after it: {screen}"
    );
    assert_eq!(stored_cells(&db), 18);
    assert_eq!(run_status(&db, 1), "complete");
}

/// Ctrl-C in the view (a key in raw mode) is Ctrl-C: the run stops cleanly and is
/// interrupted, with the finished cells kept.
#[test]
fn ctrl_c_in_the_live_view_stops_like_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let command = format!(
        "{} fake --cells sleep:300ms --reps 30 --db {} --live",
        bin().display(),
        db.display()
    );
    let Some(t) = Tmux::start("ctrlc", dir.path(), &command) else {
        return;
    };
    t.wait_for("q: stop", Duration::from_secs(20));
    wait_for_cells(&db, 2, Duration::from_secs(30));
    t.key("C-c");
    let screen = t.wait_for("IOPATH-EXIT=", Duration::from_secs(20));
    assert!(screen.contains("IOPATH-EXIT=0"), "{screen}");
    assert!(screen.contains("stopped:"), "{screen}");
    assert_eq!(run_status(&db, 1), "interrupted");
    let cells = stored_cells(&db);
    assert!((2..30).contains(&cells), "{cells} cells");
}

/// Without a terminal `iopath` never prompts: it prints the help and exits 2 at once, even
/// with answers waiting on stdin.
#[test]
fn without_a_terminal_iopath_alone_prints_help_and_never_prompts() {
    let out = iopath()
        .write_stdin("fake\n\n\n\n\n\ny\n")
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("Usage: iopath"), "{text}");
    assert!(!text.contains("experiment ["), "it prompted: {text}");
    assert!(!text.contains('\x1b'), "escape codes on a pipe: {text:?}");
    // Stdin a terminal-less pipe that stays open: still no wait.
    let child = iopath_child()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish_within(child, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(2));
}

/// `--live` without a terminal is refused before anything runs or is stored.
#[test]
fn live_without_a_terminal_is_refused() {
    let (dir, db) = temp_db("r.db");
    let line = usage_error(&["sweep", "fake", "--cells", "ok", "--db", db.to_str().unwrap(), "--live"]);
    assert!(line.contains("--live needs a terminal"), "{line}");
    assert!(!db.exists(), "a refused run created the database");
    let line = usage_error(&["fake", "--cells", "ok", "--live"]);
    assert!(line.contains("--live needs a terminal"), "{line}");
    let plan = dir.path().join("p.toml");
    std::fs::write(
        &plan,
        format!(
            "version = 1\ncommand = [\"sweep\", \"fake\", \"--db\", \"{}\"]\n",
            db.display()
        ),
    )
    .unwrap();
    let line = usage_error(&["sweep", "--plan", plan.to_str().unwrap(), "--live"]);
    assert!(line.contains("--live needs a terminal"), "{line}");
    assert!(!db.exists(), "a refused run created the database");
}

/// A plan file runs non-interactively with the same validation as the command line, and the
/// run stores the plan's command as its command line.
#[test]
fn a_plan_file_runs_without_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "version = 1\ncommand = [\"sweep\", \"fake\", \"--cells\", \"ok:4,ok:5\", \"--reps\", \"2\", \"--name\", \"from a plan\", \"--db\", \"{}\"]\n",
            db.display()
        ),
    )
    .unwrap();
    let out = iopath()
        .args(["sweep", "--plan", plan.to_str().unwrap(), "--json"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    // --json belongs to the workload's flags: at sweep level it is refused.
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = iopath()
        .args(["sweep", "--plan", plan.to_str().unwrap()])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("fake#1 ok:5"), "{}", stdout(&out));
    assert_eq!(stored_cells(&db), 4);
    assert_eq!(run_status(&db, 1), "complete");
    assert_eq!(
        command_line(&db, 1),
        format!(
            "iopath sweep fake --cells ok:4,ok:5 --reps 2 --name 'from a plan' --db {}",
            db.display()
        )
    );

    // Refused like the command line refuses it, naming the file; nothing runs.
    std::fs::write(
        &plan,
        "version = 1\ncommand = [\"sweep\", \"fake\", \"--reps\", \"0\"]\n",
    )
    .unwrap();
    let line = usage_error(&["sweep", "--plan", plan.to_str().unwrap()]);
    assert!(line.contains("plan.toml") && line.contains("--reps"), "{line}");
    std::fs::write(&plan, "version = 1\ncommand = [\"runs\"]\n").unwrap();
    let line = usage_error(&["run", "--plan", plan.to_str().unwrap()]);
    assert!(line.contains("must be a measuring command (net stream, "), "{line}");
    let line = usage_error(&["sweep", "--plan", dir.path().join("none.toml").to_str().unwrap()]);
    assert!(line.contains("cannot read"), "{line}");
    let line = usage_error(&["sweep", "--plan", plan.to_str().unwrap(), "--resume", "1"]);
    assert!(line.contains("--resume") || line.contains("--plan"), "{line}");
    // The database is the plan's own --db: a second one beside --plan is refused, not ignored.
    let line = usage_error(&["sweep", "--plan", plan.to_str().unwrap(), "--db", "other.db"]);
    assert!(line.contains("--db") && line.contains("--plan"), "{line}");
    assert_eq!(stored_cells(&db), 4);
}
