//! Stopping a microbenchmark: a stop request ends a long case within seconds with
//! `Interrupted` and leaves no process behind; a forced exit (second signal) kills the children
//! that are alive and removes the scratch directories that exist.

use super::run_case;
use super::scratch::ScratchDir;
use crate::case::MicroCase;
use crate::stop::{Interrupted, Stop};
use crate::sys::process;
use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

/// This thread's run-queue wait so far (the second field of its schedstat): time it was
/// runnable but had no CPU.
fn waited_for_a_cpu() -> Duration {
    thread_waited_for_a_cpu(nix::unistd::gettid())
}

/// Thread `tid`'s (of this process) run-queue wait so far.
fn thread_waited_for_a_cpu(tid: Pid) -> Duration {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .map(Duration::from_nanos)
        .unwrap_or_default()
}

/// How long run_case took to return once the stop was requested: the wall time, and the same
/// less the time its thread spent waiting for a CPU meanwhile (what a loaded machine adds).
struct StopDelay {
    wall: Duration,
    on_cpu_or_blocked: Duration,
}

impl StopDelay {
    /// From `start` (when this thread had waited `waited_at_start` for a CPU) to now.
    fn since(start: Instant, waited_at_start: Duration) -> StopDelay {
        let wall = start.elapsed();
        let waited = waited_for_a_cpu().saturating_sub(waited_at_start);
        StopDelay {
            wall,
            on_cpu_or_blocked: wall.saturating_sub(waited),
        }
    }
}

/// Run `case`, request a stop from another thread once `after` passed and `ready` says so
/// (looked at for up to 10 s), and return the result and how long run_case took to return
/// once the stop was requested.
fn run_and_stop(
    case: &MicroCase,
    after: Duration,
    ready: impl Fn() -> bool + Send + 'static,
) -> (anyhow::Result<crate::observation::Observation>, StopDelay) {
    let stop = Stop::fresh();
    let runner = nix::unistd::gettid();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(after);
        let until = Instant::now() + Duration::from_secs(10);
        while !ready() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        let waited = thread_waited_for_a_cpu(runner);
        stop.request();
        (Instant::now(), waited)
    });
    let result = run_case(case, stop);
    // The stopper ended before the run did (it asked it to stop): the join does not wait.
    let (requested, waited_at_request) = stopper.join().expect("stopper thread");
    (result, StopDelay::since(requested, waited_at_request))
}

fn assert_interrupted(result: &anyhow::Result<crate::observation::Observation>, took: StopDelay, what: &str) {
    match result {
        Ok(_) => panic!("{what}: finished instead of stopping"),
        Err(e) => assert!(e.is::<Interrupted>(), "{what}: not Interrupted but {e:#}"),
    }
    // The loops look at the stop every few milliseconds. On a loaded 2-CPU machine the stopped
    // thread can wait seconds for a CPU (3 s of wall time failed there): that wait is taken out,
    // and the wall time is bounded only against a hang.
    assert!(
        took.on_cpu_or_blocked < Duration::from_secs(3) && took.wall < Duration::from_secs(30),
        "{what}: took {:?} to stop ({:?} of it not waiting for a CPU)",
        took.wall,
        took.on_cpu_or_blocked
    );
}

/// Whether process `pid` is gone: no such process, or a zombie nobody reaped yet (a grandchild
/// reparented to an init that does not reap still counts as dead).
fn dead(pid: i32) -> bool {
    match kill(Pid::from_raw(pid), None) {
        Err(Errno::ESRCH) => true,
        _ => std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true),
    }
}

fn eventually_dead(pid: i32) -> bool {
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if dead(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .expect("a pid")
}

fn sleep_binary() -> &'static str {
    ["/bin/sleep", "/usr/bin/sleep"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("a sleep binary")
}

#[test]
fn proc_stops_while_waiting_for_a_long_program_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("slow.sh");
    let d = dir.path().display();
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ > {d}/pid.tmp && mv {d}/pid.tmp {d}/pid\n{} 30 &\necho $! > {d}/sleep.tmp && mv {d}/sleep.tmp {d}/sleep\nwait\n",
            sleep_binary()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for variant in ["fork_exec", "posix_spawn"] {
        let _ = std::fs::remove_file(dir.path().join("pid"));
        let _ = std::fs::remove_file(dir.path().join("sleep"));
        let case = MicroCase::new(
            crate::case::Bench::Proc,
            vec![("variant", variant.into()), ("program", script.display().to_string())],
        );
        // Stop once the program runs and has started its own child.
        let started = dir.path().join("sleep");
        let (result, took) = run_and_stop(&case, Duration::from_millis(200), move || started.exists());
        assert_interrupted(&result, took, variant);
        // The script itself was our child: reaped, so no such process at all.
        let pid = read_pid(&dir.path().join("pid"));
        assert_eq!(
            kill(Pid::from_raw(pid), None),
            Err(Errno::ESRCH),
            "{variant}: the program ({pid}) is still there"
        );
        // What it started was in its process group and was killed with it.
        let sleeper = read_pid(&dir.path().join("sleep"));
        assert!(
            eventually_dead(sleeper),
            "{variant}: the program's child {sleeper} lives on"
        );
    }
}

#[test]
fn memory_benchmarks_stop_inside_long_samples() {
    // Sizes where every sample takes a good part of a second in a debug build.
    let cases = [
        MicroCase::new(
            crate::case::Bench::Memlat,
            vec![("size_bytes", (128u64 << 20).to_string())],
        ),
        MicroCase::new(
            crate::case::Bench::Membw,
            vec![("variant", "read".into()), ("size_bytes", (256u64 << 20).to_string())],
        ),
    ];
    for case in &cases {
        let (result, took) = run_and_stop(case, Duration::from_millis(300), || true);
        assert_interrupted(&result, took, &case.label());
    }
}

#[test]
fn a_stop_requested_before_the_case_ends_it_at_once() {
    let stop = Stop::fresh();
    stop.request();
    let (t, waited) = (Instant::now(), waited_for_a_cpu());
    let result = run_case(
        &MicroCase::new(crate::case::Bench::Ctxswitch, vec![("variant", "pipe_procs".into())]),
        stop,
    );
    assert_interrupted(&result, StopDelay::since(t, waited), "ctxswitch");
}

const CHILD_ENV: &str = "IOPATH_TEST_FORCED_EXIT_CHILD";

/// Re-runs itself in a child process that holds a scratch directory and a forked child, then
/// sends itself SIGINT twice: the forced exit must remove the directory, kill the child and
/// exit 130.
#[test]
fn forced_exit_kills_children_and_removes_scratch() {
    if std::env::var_os(CHILD_ENV).is_some() {
        forced_exit_child_side();
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "micro::interrupt_tests::forced_exit_kills_children_and_removes_scratch",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, base.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = |key: &str| -> String {
        stdout
            .lines()
            // libtest prints "test <name> ... " before the child's first line.
            .find_map(|l| l.split_once(key).map(|(_, v)| v))
            .unwrap_or_else(|| {
                panic!(
                    "no {key} in the child's output: {stdout}\nstderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
            .to_string()
    };
    let scratch = value("scratch=");
    let child: i32 = value("child=").parse().unwrap();
    assert_eq!(out.status.code(), Some(130), "stdout: {stdout}");
    assert!(!Path::new(&scratch).exists(), "{scratch} was left behind");
    assert!(
        eventually_dead(child),
        "the echo child {child} outlived the forced exit"
    );
}

fn forced_exit_child_side() {
    let _stop = crate::sys::signal::install_stop_handler();
    let base = std::env::var_os(CHILD_ENV).unwrap();
    let scratch = ScratchDir::new(Path::new(&base)).unwrap();
    std::fs::write(scratch.path().join("data"), vec![0u8; 1 << 16]).unwrap();
    // An echo child that blocks reading a pipe nobody writes: it lives until killed.
    let (to_child_r, to_child_w) = process::pipe().unwrap();
    let (from_child_r, from_child_w) = process::pipe().unwrap();
    let child = process::fork_pipe_echo(
        to_child_r.as_raw_fd(),
        from_child_w.as_raw_fd(),
        None,
        &[to_child_w.as_raw_fd(), from_child_r.as_raw_fd()],
    )
    .unwrap();
    let mut stdout = std::io::stdout();
    writeln!(stdout, "scratch={}", scratch.path().display()).unwrap();
    writeln!(stdout, "child={}", child.pid()).unwrap();
    stdout.flush().unwrap();
    nix::sys::signal::raise(Signal::SIGINT).unwrap();
    nix::sys::signal::raise(Signal::SIGINT).unwrap();
    // The watcher thread exits the process with 130 long before this ends.
    std::thread::sleep(Duration::from_secs(10));
    drop((child, to_child_w, from_child_r, scratch));
    panic!("the forced exit did not happen");
}
