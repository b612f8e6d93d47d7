//! A bare POSIX thread: `pthread_create` of a function that returns at once, then
//! `pthread_join`, with no Rust runtime work around it (no name, no thread-local setup, no
//! result packet, no `Arc` of the thread handle: what `std::thread::spawn` adds). The stack is
//! the C library's default; glibc caches freed stacks, so a create after a join reuses one.

use std::io;

extern "C" fn return_at_once(arg: *mut libc::c_void) -> *mut libc::c_void {
    arg
}

/// Create one thread that returns at once and join it. Errors are the C library's (EAGAIN when
/// the thread limit or memory is exhausted).
pub fn create_join() -> io::Result<()> {
    // SAFETY: an all-zero pthread_t is plain data that pthread_create overwrites.
    let mut thread: libc::pthread_t = unsafe { std::mem::zeroed() };
    // SAFETY: `thread` is a valid place to write the id; null attributes mean the defaults;
    // the start routine is an `extern "C"` function that touches nothing and returns its
    // (null) argument, so no Rust code unwinds across the C boundary.
    let rc = unsafe { libc::pthread_create(&mut thread, std::ptr::null(), return_at_once, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    // SAFETY: `thread` was created above, is joinable (default attributes) and is joined
    // exactly once; the return value is not wanted (null place).
    let rc = unsafe { libc::pthread_join(thread, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_bare_thread_is_created_and_joined_many_times() {
        for _ in 0..100 {
            super::create_join().unwrap();
        }
    }
}
