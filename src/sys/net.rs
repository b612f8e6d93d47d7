//! Socket system calls on raw descriptors with the flags iopath needs (MSG_ZEROCOPY,
//! MSG_NOSIGNAL, scatter/gather), returning `io::Result` so callers never see errno.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::RawFd;

/// MSG_ZEROCOPY (include/linux/socket.h), present in libc but re-exported here for callers.
pub const MSG_ZEROCOPY: i32 = libc::MSG_ZEROCOPY;
/// MSG_NOSIGNAL: a vanished peer gives EPIPE, never SIGPIPE.
pub const MSG_NOSIGNAL: i32 = libc::MSG_NOSIGNAL;

fn check(rc: isize) -> io::Result<usize> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// send(2) of one contiguous buffer.
pub fn send(fd: RawFd, buf: &[u8], flags: i32) -> io::Result<usize> {
    // SAFETY: buf is a valid readable slice for its length; fd is the caller's socket.
    check(unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), flags) })
}

/// recv(2) into one contiguous buffer.
pub fn recv(fd: RawFd, buf: &mut [u8], flags: i32) -> io::Result<usize> {
    // SAFETY: buf is a valid writable slice for its length.
    check(unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), flags) })
}

/// sendmsg(2) with a gather list and flags, no address and no control data.
pub fn sendmsg(fd: RawFd, iov: &[IoSlice<'_>], flags: i32) -> io::Result<usize> {
    // SAFETY: msghdr is plain data; zeroed means no name and no control buffer.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is guaranteed ABI-compatible with struct iovec on Unix.
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iov.len() as _;
    // SAFETY: msg points at iov, which outlives the call; the kernel only reads the iovecs.
    check(unsafe { libc::sendmsg(fd, &msg, flags) })
}

/// recvmsg(2) with a scatter list and flags, ignoring names and control data.
pub fn recvmsg(fd: RawFd, iov: &mut [IoSliceMut<'_>], flags: i32) -> io::Result<usize> {
    // SAFETY: as in sendmsg; zeroed msghdr has no name and no control buffer.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSliceMut is guaranteed ABI-compatible with struct iovec on Unix.
    msg.msg_iov = iov.as_mut_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iov.len() as _;
    // SAFETY: every iovec points at a writable buffer borrowed mutably for this call.
    check(unsafe { libc::recvmsg(fd, &mut msg, flags) })
}

fn set_int_opt(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: value is a live c_int and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn get_int_opt(fd: RawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: value and len are live and writable; len holds value's size.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut i32).cast(), &mut len) };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Turn on SO_ZEROCOPY so that MSG_ZEROCOPY sends are accepted (EINVAL/ENOPROTOOPT without it).
pub fn enable_zerocopy(fd: RawFd) -> io::Result<()> {
    set_int_opt(fd, libc::SOL_SOCKET, libc::SO_ZEROCOPY, 1)
}

/// TCP_NODELAY on or off.
pub fn set_nodelay(fd: RawFd, on: bool) -> io::Result<()> {
    set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, on as i32)
}

/// The socket's current SO_SNDBUF / SO_RCVBUF as the kernel reports them.
pub fn buffer_sizes(fd: RawFd) -> io::Result<(i32, i32)> {
    Ok((
        get_int_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF)?,
        get_int_opt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF)?,
    ))
}

/// TCP_INFO's retransmission count and MSS, for the record.
pub fn tcp_info(fd: RawFd) -> io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain data; zeroed is valid.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: info and len are writable; len holds info's size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(info)
    } else {
        Err(io::Error::last_os_error())
    }
}
