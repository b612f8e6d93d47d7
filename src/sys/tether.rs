//! Programs started with std's `Command` that cannot outlive the thread that started them:
//! the child leads a process group of its own and asks for SIGKILL when that thread ends
//! (PR_SET_PDEATHSIG survives exec of a program that is not set-user-ID), so even a SIGKILLed
//! iopath leaves no orphan. Used for the external servers and clients iopath runs (sshd,
//! sshfs); the caller waits for or kills the child from the same thread.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Make `cmd` start its child in a process group of its own, killed with SIGKILL when the
/// calling thread ends. The child exits with an error before exec if the parent already died.
pub fn tether(cmd: &mut Command) {
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let setup = move || -> io::Result<()> {
        // SAFETY: setpgid, prctl and getppid are async-signal-safe system calls on this
        // (freshly forked) process and take no pointers; no memory is allocated here.
        unsafe {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        Ok(())
    };
    // SAFETY: the closure runs between fork and exec and only makes the async-signal-safe
    // system calls above (io::Error::last_os_error and from_raw_os_error do not allocate).
    unsafe { cmd.pre_exec(setup) };
}
