//! System calls issued directly (no libc wrapper or cache in between), for timing their cost.

use std::io;
use std::os::fd::RawFd;

/// getppid through syscall(2): glibc once cached getpid, so the raw call is what gets timed.
#[inline(never)]
pub fn raw_getppid() -> i64 {
    // SAFETY: SYS_getppid takes no arguments and touches no memory.
    unsafe { libc::syscall(libc::SYS_getppid) }
}

/// getcwd through syscall(2) into `buf`; returns the length the kernel wrote.
#[inline(never)]
pub fn raw_getcwd(buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is writable for buf.len() bytes, which is the size passed.
    let rc = unsafe { libc::syscall(libc::SYS_getcwd, buf.as_mut_ptr(), buf.len()) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// read(2) of up to buf.len() bytes through syscall(2).
#[inline(never)]
pub fn raw_read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is writable for buf.len() bytes; an invalid fd only yields EBADF.
    let rc = unsafe { libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len()) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// write(2) through syscall(2).
#[inline(never)]
pub fn raw_write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is readable for buf.len() bytes; an invalid fd only yields EBADF.
    let rc = unsafe { libc::syscall(libc::SYS_write, fd, buf.as_ptr(), buf.len()) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}
