//! What every integration test file needs: the binary, its output as text, results
//! databases, signals and bounded waits for child processes, metric look-ups in JSON
//! records, the bound on how long a stop may take, and how a test says it skipped a check.
//! Each test binary uses only some of these.
#![allow(dead_code)]

pub mod alloc;
pub mod cgroup;
pub mod netns;

use assert_cmd::Command;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a test lets a stop take (SIGINT, `Stop::request`, a server's SIGTERM) before it
/// fails. The promise is "about a second": every workload polls its stop flag at least every
/// 20 ms. But on a machine that other work keeps busy (CI runners, engineers building beside
/// the tests) a process can wait hundreds of milliseconds just to be scheduled, and a stop
/// wakes several threads, joins them and commits to SQLite: a 1 s bound failed there while the
/// code was right. That the stop did not wait for the cell it cut short is shown by what the
/// tests count as kept (cells stored, records printed), whatever the load; the time catches a
/// stop that hangs or waits out a 30 s window or child.
pub const STOP_WITHIN: Duration = Duration::from_secs(3);

/// Say that a check did not run here and why; the test then returns (a whole test skipped)
/// or goes on without that part. One line `SKIPPED <test>: <reason>` goes to stderr (shown
/// with `--nocapture`) and, when `IOPATH_SKIP_LOG` names a file, is appended to it with one
/// write (O_APPEND: lines from parallel tests and test binaries do not mix); `scripts/test`
/// (the README's test command) sets it, prints those lines and counts them into its closing
/// line as "N skipped". Use it only where the machine lacks something (root, a kernel
/// feature, a tool): never to excuse a figure that came out wrong.
pub fn skip(reason: &str) {
    use std::io::Write;
    let test = std::thread::current().name().unwrap_or("a test").to_string();
    let line = format!("SKIPPED {test}: {}\n", reason.replace('\n', " "));
    eprint!("{line}");
    if let Some(log) = std::env::var_os("IOPATH_SKIP_LOG") {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = appended {
            panic!(
                "cannot record the skip in {}: {e}",
                std::path::Path::new(&log).display()
            );
        }
    }
}

/// Why `program` cannot be run here (found neither on PATH nor as a path), or None when it
/// can. For a test that needs a tool the machine may lack: `if let Some(why) =
/// missing_program("tmux") { return skip(&why); }`. `scripts/test` installs the tools as root.
pub fn missing_program(program: &str) -> Option<String> {
    let found = if program.contains('/') {
        Path::new(program).exists()
    } else {
        std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
            .unwrap_or(false)
    };
    (!found).then(|| format!("{program} is not installed (scripts/test installs it as root)"))
}

/// Why python3 cannot import `module` here, or None when it can.
pub fn missing_python_module(module: &str) -> Option<String> {
    if let Some(why) = missing_program("python3") {
        return Some(why);
    }
    let out = std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output();
    match out {
        Ok(o) if o.status.success() => None,
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let last = err.lines().last().unwrap_or("no error text").trim().to_string();
            Some(format!(
                "python3 cannot import {module} ({last}; scripts/test installs it)"
            ))
        }
        Err(e) => Some(format!("cannot run python3: {e}")),
    }
}

/// The default results database of this test's commands (`IOPATH_DB`): every measuring
/// command stores its run, so each test (a thread of the test binary) gets a database of its
/// own under cargo's temporary folder — commands of one test share it as a user's would,
/// tests running in parallel never do, and nothing is written into the checkout.
pub fn own_db() -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static DB: PathBuf = {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("dbs-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a folder for the tests' databases");
            dir.join(format!("{}.db", NEXT.fetch_add(1, Ordering::Relaxed)))
        };
    }
    DB.with(PathBuf::clone)
}

/// `iopath` as built for the tests, for assert_cmd's run-to-completion style, with this
/// test's own default database ([`own_db`]).
pub fn iopath() -> Command {
    let mut command = Command::cargo_bin("iopath").expect("binary built");
    command.env("IOPATH_DB", own_db());
    command
}

/// The path of the `iopath` binary, for shell scripts and `std::process` children.
pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("iopath")
}

/// `iopath` as a `std::process::Command`, for children the test signals or kills, with this
/// test's own default database ([`own_db`]).
pub fn iopath_child() -> std::process::Command {
    let mut command = std::process::Command::new(bin());
    command.env("IOPATH_DB", own_db());
    command
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The JSON records a `--json` run printed on stdout.
pub fn json_records(out: &Output) -> Vec<Value> {
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}\nstderr: {}", stdout(out), stderr(out)));
    v.as_array().expect("an array of records").clone()
}

/// A fresh temporary folder and the path of a results database inside it (not created).
/// Keep the folder alive as long as the database is used.
pub fn temp_db(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join(name);
    (dir, db)
}

/// The one number an SQL query over the results database gives.
pub fn count(db: &Path, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).expect("open the results database");
    conn.query_row(sql, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Cells stored in the database (successful and failed).
pub fn stored_cells(db: &Path) -> i64 {
    count(db, "SELECT count(*) FROM observations")
}

/// Wait until the database holds at least `n` cells; panics after `limit`.
pub fn wait_for_cells(db: &Path, n: i64, limit: Duration) {
    let start = Instant::now();
    loop {
        let got = db
            .exists()
            .then(|| rusqlite::Connection::open(db).ok())
            .flatten()
            .and_then(|c| {
                c.query_row("SELECT count(*) FROM observations", [], |r| r.get::<_, i64>(0))
                    .ok()
            })
            .unwrap_or(0);
        if got >= n {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "{} holds {got} cells after {limit:?}, expected {n}",
            db.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Send `sig` to a child process.
pub fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).expect("send the signal");
}

/// Ctrl-C, as the terminal sends it.
pub fn sigint(child: &Child) {
    signal(child, nix::sys::signal::Signal::SIGINT);
}

/// Wait for a child whose stdout and stderr are piped, reading both as it runs; kill it and
/// panic when it has not exited within `limit`.
pub fn finish_within(mut child: Child, limit: Duration) -> Output {
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let err = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
            panic!("iopath did not exit within {limit:?}; stderr: {err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// Spawn `iopath args` with stdout and stderr piped.
pub fn spawn(args: &[&str]) -> Child {
    iopath_child()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn iopath")
}

/// Run `iopath args`, expect a usage error: exit 2, one line on stderr, nothing on stdout.
/// Returns the line.
pub fn usage_error(args: &[&str]) -> String {
    let out = iopath()
        .args(args)
        .timeout(Duration::from_secs(30))
        .output()
        .expect("run iopath");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "iopath {args:?}: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "iopath {args:?}: not one line: {err}"
    );
    assert!(out.stdout.is_empty(), "iopath {args:?} printed: {}", stdout(&out));
    err
}

/// The metric `name` of any role in a JSON record.
pub fn metric<'a>(record: &'a Value, name: &str) -> Option<&'a Value> {
    record["observation"]["metrics"]
        .as_array()?
        .iter()
        .find(|m| m["name"] == name)
}

/// The metric `name` of `role` (client, server, system) in a JSON record.
pub fn role_metric<'a>(record: &'a Value, role: &str, name: &str) -> Option<&'a Value> {
    record["observation"]["metrics"]
        .as_array()?
        .iter()
        .find(|m| m["role"] == role && m["name"] == name)
}

/// The value of `role`'s metric `name` in a JSON record; None when it is absent or unavailable.
pub fn value_of(record: &Value, role: &str, name: &str) -> Option<f64> {
    role_metric(record, role, name).and_then(|m| m["value"].as_f64())
}

/// The value of `role`'s metric `name` in a JSON record; panics naming it when it is absent or
/// unavailable.
pub fn value(record: &Value, role: &str, name: &str) -> f64 {
    value_of(record, role, name).unwrap_or_else(|| panic!("{role} {name} has no value in {}", record["label"]))
}

/// A child process, killed (by its pid) and reaped when dropped.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The pre-shared key the tests give `net serve --psk-file` and their clients.
pub const PSK: &str = "0123456789abcdef0123456789abcdef";

/// Write [`PSK`] to the file `key` in `dir`; returns its path, for `--psk-file`.
pub fn psk_file(dir: &Path) -> String {
    let key = dir.join("key");
    std::fs::write(&key, PSK).unwrap();
    key.to_str().unwrap().to_string()
}

/// A `net serve` child on a free loopback port, killed (by its pid) and reaped when dropped.
/// What it logs is read on as it runs, so it never writes into a full or closed pipe.
pub struct NetServe {
    pub child: Child,
    /// Where it listens: `127.0.0.1:PORT`.
    pub addr: String,
    drain: Option<std::thread::JoinHandle<()>>,
}

/// Start `iopath net serve --listen 127.0.0.1:0` with these extra flags; returns once it says
/// where it listens.
pub fn net_serve(flags: &[&str]) -> NetServe {
    use std::io::BufRead;
    let mut child = iopath_child()
        .args(["net", "serve", "--listen", "127.0.0.1:0"])
        .args(flags)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn net serve");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("piped stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("net serve's first line");
    let addr = line
        .split_whitespace()
        .find(|w| w.starts_with("127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {line}"))
        .to_string();
    let drain = std::thread::spawn(move || {
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
    });
    NetServe {
        child,
        addr,
        drain: Some(drain),
    }
}

impl Drop for NetServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The pipe is closed now: the reader ends.
        if let Some(drain) = self.drain.take() {
            let _ = drain.join();
        }
    }
}

/// One in-process run at a time in a test binary: the thread check of
/// [`assert_stops_as_interrupted`] looks at every thread of this process. Hold the guard for
/// the run (a test that panicked while holding it does not stop the others).
pub fn in_process_alone() -> std::sync::MutexGuard<'static, ()> {
    static IN_PROCESS_RUNS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    IN_PROCESS_RUNS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Names of this process's threads that start with `prefix` (from /proc/self/task/*/comm).
#[allow(dead_code)]
pub fn threads_named(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// Run `run` in-process on its own thread, request `stop` after `after`, and check it comes back
/// as `Interrupted` (not a cut-short observation) within `STOP_WITHIN`, with no thread whose
/// name starts with one of `thread_prefixes` left behind.
#[allow(dead_code)]
pub fn assert_stops_as_interrupted(
    run: impl FnOnce() -> anyhow::Result<iopath::observation::Observation> + Send + 'static,
    stop: iopath::stop::Stop,
    after: Duration,
    thread_prefixes: &[&str],
) {
    let run = std::thread::spawn(run);
    std::thread::sleep(after);
    let asked = Instant::now();
    stop.request();
    while !run.is_finished() && asked.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = asked.elapsed();
    assert!(run.is_finished(), "the run did not stop within 5 s");
    let err = run.join().unwrap().expect_err("a stopped run is not an observation");
    assert!(err.downcast_ref::<iopath::stop::Interrupted>().is_some(), "{err:#}");
    assert!(took < STOP_WITHIN, "stopping took {took:?}");
    // A scoped thread counts as joined once its closure returns, a moment before its OS thread
    // is gone from /proc/self/task: give those a second, which no stuck thread gets past.
    let leftover = || -> Vec<String> { thread_prefixes.iter().flat_map(|p| threads_named(p)).collect() };
    let exited_by = Instant::now() + Duration::from_secs(1);
    while !leftover().is_empty() && Instant::now() < exited_by {
        std::thread::sleep(Duration::from_millis(10));
    }
    let left = leftover();
    assert!(left.is_empty(), "threads left behind: {left:?}");
}

/// A `net serve --agent` child on a free loopback port with the key in `key_file`: a fleet
/// "host" that needs no root. Dropped, it is killed and reaped.
pub struct LoopbackAgent {
    child: Child,
    /// `127.0.0.1:PORT`, as a fleet's `--hosts` names it.
    pub addr: String,
}

impl LoopbackAgent {
    pub fn start(key_file: &Path) -> LoopbackAgent {
        use std::io::BufRead;
        let mut child = iopath_child()
            .args(["net", "serve", "--agent", "--listen", "127.0.0.1:0", "--psk-file"])
            .arg(key_file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn net serve --agent");
        let mut first = String::new();
        // The first line names the address; the rest of stderr is left to the pipe (the
        // agent writes little, and is killed at the end of the test).
        let mut lines = std::io::BufReader::new(child.stderr.take().expect("piped stderr"));
        lines.read_line(&mut first).expect("the agent's first line");
        let addr = first
            .split_whitespace()
            .find(|w| w.starts_with("127.0.0.1:"))
            .unwrap_or_else(|| panic!("no address in {first}"))
            .to_string();
        // Keep reading so the agent never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while matches!(lines.read_line(&mut sink), Ok(n) if n > 0) {
                sink.clear();
            }
        });
        LoopbackAgent { child, addr }
    }
}

impl Drop for LoopbackAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
