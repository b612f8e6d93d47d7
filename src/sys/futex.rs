//! futex(2) wait and wake on an AtomicU32, for thread ping-pong without a pipe in between.

use std::io;
use std::sync::atomic::AtomicU32;

/// Sleep while `word` still holds `expected` (FUTEX_WAIT_PRIVATE, no timeout). Returns Ok on a
/// wake-up, and also when the value had already changed (EAGAIN) or a signal arrived (EINTR):
/// callers re-check the word in a loop.
pub fn wait(word: &AtomicU32, expected: u32) -> io::Result<()> {
    // SAFETY: word points to a live, aligned u32 for the whole call; a null timeout means forever.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(()),
        _ => Err(err),
    }
}

/// Wake up to `count` threads waiting on `word` (FUTEX_WAKE_PRIVATE); returns how many woke.
pub fn wake(word: &AtomicU32, count: i32) -> io::Result<usize> {
    // SAFETY: word points to a live, aligned u32; FUTEX_WAKE only reads the address.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            count,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}
