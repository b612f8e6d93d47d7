//! SIGINT/SIGTERM as a flag: the first signal asks the program to stop cleanly (the flag is
//! set and blocking calls return EINTR); a second SIGINT ends the process at once.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNALS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only async-signal-safe work here: atomics and _exit.
    STOP.store(true, Ordering::SeqCst);
    if SIGNALS.fetch_add(1, Ordering::SeqCst) >= 1 {
        // SAFETY: _exit is async-signal-safe and takes no pointers.
        unsafe { libc::_exit(130) };
    }
}

/// Install the handler for SIGINT and SIGTERM (without SA_RESTART, so blocked system calls
/// wake with EINTR) and return the flag it sets.
pub fn install_stop_handler() -> &'static AtomicBool {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is plain data; zeroed gives an empty mask and no flags.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as *const () as usize;
        // SAFETY: action is initialised and on_signal only touches atomics and _exit.
        unsafe {
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
    &STOP
}

/// The flag without installing anything (false unless a handler was installed and fired).
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}
