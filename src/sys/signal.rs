//! SIGINT/SIGTERM/SIGHUP (and the other signals that would end the process: SIGUSR1,
//! SIGUSR2, SIGALRM) and SIGQUIT, decided in one place.
//!
//! - The first of [`STOP_SIGNALS`] asks the program to stop cleanly: a closed terminal or SSH
//!   session (SIGHUP) is treated like Ctrl-C and `kill` (SIGINT, SIGTERM): the flag is set (workloads see it
//!   through [`crate::stop::Stop`]) and a blocked system call in the thread that took the
//!   signal wakes with EINTR (no SA_RESTART).
//! - The second signal means "now": a watcher thread runs every registered
//!   [`on_forced_exit`] action (kill child process groups, remove scratch files, mark the run
//!   interrupted in the database), then exits with status 130.
//! - A third signal, or a forced exit whose actions take longer than [`FORCED_EXIT_PATIENCE`],
//!   exits at once with 130.
//! - SIGQUIT (Ctrl-\\) means "quit now" at once: no clean stop, but the same forced exit — the
//!   registered actions run (children killed, scratch removed, the run marked `interrupted`,
//!   never left `running`), then the process exits with 131 (128 + SIGQUIT) and no core dump.

use crate::stop::Stop;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNALS: AtomicUsize = AtomicUsize::new(0);
/// Write end of the pipe that wakes the watcher thread on the second signal (-1: none yet).
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
static INSTALL: Once = Once::new();
/// The exit status of a forced exit: 130, or 131 when SIGQUIT asked for it.
static FORCED_CODE: AtomicI32 = AtomicI32::new(130);

/// The signals whose first arrival asks for a clean stop (each would otherwise end the process
/// and leave a run `running`).
pub const STOP_SIGNALS: [libc::c_int; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
];

/// The signal that forces an exit at once (after the forced-exit actions), exit 131.
pub const QUIT_SIGNAL: libc::c_int = libc::SIGQUIT;

/// How long the forced-exit actions may take before the process exits anyway.
pub const FORCED_EXIT_PATIENCE: Duration = Duration::from_secs(3);

type Action = Box<dyn Fn() + Send + Sync>;

static ACTIONS: Mutex<Vec<(u64, Action)>> = Mutex::new(Vec::new());
static NEXT_ACTION: AtomicU64 = AtomicU64::new(1);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work here: atomics, write and _exit.
    STOP.store(true, Ordering::SeqCst);
    let mut seen = SIGNALS.fetch_add(1, Ordering::SeqCst);
    if sig == QUIT_SIGNAL && seen < 1 {
        // Quit now: go straight to the forced exit (as if this were the second signal).
        FORCED_CODE.store(131, Ordering::SeqCst);
        SIGNALS.fetch_add(1, Ordering::SeqCst);
        seen = 1;
    }
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if seen >= 2 || (seen == 1 && fd < 0) {
        let code = FORCED_CODE.load(Ordering::SeqCst);
        // SAFETY: _exit is async-signal-safe and takes no pointers.
        unsafe { libc::_exit(code) };
    }
    if seen == 1 {
        let byte = 1u8;
        // SAFETY: write is async-signal-safe; the buffer is one valid byte on this stack.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// Install the handler for [`STOP_SIGNALS`] and [`QUIT_SIGNAL`] (once per process) and return
/// the stop handle it sets.
pub fn install_stop_handler() -> Stop {
    INSTALL.call_once(|| {
        start_watcher();
        for sig in STOP_SIGNALS.into_iter().chain([QUIT_SIGNAL]) {
            // SAFETY: sigaction is plain data; zeroed gives an empty mask and no flags.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = on_signal as *const () as usize;
            // SAFETY: action is initialised and on_signal only touches atomics, write and _exit.
            unsafe {
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(sig, &action, std::ptr::null_mut());
            }
        }
    });
    Stop::new(&STOP)
}

/// Whether a stop was requested by a signal.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// The thread that carries out a forced exit. Without it (the pipe could not be made) a
/// second signal exits at once, as before.
fn start_watcher() {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let read_fd = fds[0];
    let spawned = std::thread::Builder::new()
        .name("iopath-signals".into())
        .spawn(move || {
            let mut byte = 0u8;
            loop {
                // SAFETY: read_fd is this thread's pipe end; the buffer is one valid byte.
                let n = unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) };
                if n == 1 {
                    break;
                }
                if n == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    return;
                }
            }
            forced_exit();
        });
    if spawned.is_ok() {
        WAKE_FD.store(fds[1], Ordering::SeqCst);
    }
}

fn forced_exit() -> ! {
    // A watchdog so that an action that hangs cannot keep the process alive.
    let _ = std::thread::Builder::new().spawn(|| {
        std::thread::sleep(FORCED_EXIT_PATIENCE);
        let code = FORCED_CODE.load(Ordering::SeqCst);
        // SAFETY: _exit takes no pointers and ends the process without running destructors.
        unsafe { libc::_exit(code) };
    });
    let actions = match ACTIONS.lock() {
        Ok(a) => a,
        Err(poisoned) => poisoned.into_inner(),
    };
    for (_, action) in actions.iter() {
        action();
    }
    let code = FORCED_CODE.load(Ordering::SeqCst);
    // SAFETY: as above; every cleanup that matters has run.
    unsafe { libc::_exit(code) }
}

/// An action registered with [`on_forced_exit`]; dropping it unregisters the action.
#[must_use = "the action is unregistered when this guard is dropped"]
pub struct ForcedExitGuard {
    id: u64,
}

impl Drop for ForcedExitGuard {
    fn drop(&mut self) {
        if let Ok(mut actions) = ACTIONS.lock() {
            actions.retain(|(id, _)| *id != self.id);
        }
    }
}

/// Run `action` if the program is forced out by a second signal while the guard lives: kill a
/// child's process group, remove scratch files, mark a run interrupted. Actions run on the
/// watcher thread, in registration order, and must not wait for other threads.
pub fn on_forced_exit(action: impl Fn() + Send + Sync + 'static) -> ForcedExitGuard {
    let id = NEXT_ACTION.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut actions) = ACTIONS.lock() {
        actions.push((id, Box::new(action)));
    }
    ForcedExitGuard { id }
}

/// Kill a whole process group with SIGKILL (for [`on_forced_exit`] actions and teardown).
pub fn kill_process_group(pgid: libc::pid_t) {
    if pgid > 1 {
        // SAFETY: kill with a negative pid signals that process group; no pointers involved.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_unregister_their_actions() {
        let before = ACTIONS.lock().unwrap().len();
        let guard = on_forced_exit(|| {});
        assert_eq!(ACTIONS.lock().unwrap().len(), before + 1);
        drop(guard);
        assert_eq!(ACTIONS.lock().unwrap().len(), before);
    }
}
