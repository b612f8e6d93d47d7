//! Socket system calls on raw descriptors with the flags iopath needs (MSG_ZEROCOPY,
//! MSG_NOSIGNAL, scatter/gather), returning `io::Result` so callers never see errno.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::RawFd;

/// MSG_ZEROCOPY (include/linux/socket.h), present in libc but re-exported here for callers.
pub const MSG_ZEROCOPY: i32 = libc::MSG_ZEROCOPY;
/// MSG_NOSIGNAL: a vanished peer gives EPIPE, never SIGPIPE.
pub const MSG_NOSIGNAL: i32 = libc::MSG_NOSIGNAL;

/// A byte count or -1 with errno, as `io::Result`.
pub(super) fn check(rc: isize) -> io::Result<usize> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// poll(2) of one descriptor for `events`, up to `timeout_ms`: the events it reported, none
/// when the time ran out or a signal interrupted the wait (callers wait again in their loop).
pub(crate) fn poll_one(fd: RawFd, events: i16, timeout_ms: i32) -> io::Result<i16> {
    let mut pfd = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: pfd is one valid pollfd, and the count passed is 1.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if rc >= 0 {
        return Ok(pfd.revents);
    }
    let err = io::Error::last_os_error();
    if err.kind() == io::ErrorKind::Interrupted {
        Ok(0)
    } else {
        Err(err)
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

/// Room for a gather or scatter list, reused call after call: building a list writes the
/// addresses of the slices into it and allocates nothing once it has held a list as long (the
/// send and receive paths of the copy modes keep one each and build their list per message).
pub struct IovecStore {
    raw: Vec<libc::iovec>,
}

// SAFETY: between calls the store holds only stale addresses, never read: every list handed
// out is rebuilt from slices borrowed for exactly as long as the list, on the thread using it.
unsafe impl Send for IovecStore {}

impl IovecStore {
    /// Room for `entries` iovecs before the first list is built.
    pub fn with_capacity(entries: usize) -> IovecStore {
        IovecStore {
            raw: Vec::with_capacity(entries),
        }
    }

    /// The slices as a gather list (for sendmsg, vmsplice), in this store's room.
    pub fn gather<'a>(&'a mut self, slices: impl IntoIterator<Item = &'a [u8]>) -> &'a mut [IoSlice<'a>] {
        self.raw.clear();
        self.raw.extend(slices.into_iter().map(|s| libc::iovec {
            iov_base: s.as_ptr() as *mut libc::c_void,
            iov_len: s.len(),
        }));
        // SAFETY: IoSlice is guaranteed ABI-compatible with struct iovec on Unix (it is a
        // transparent wrapper of one). Every iovec was made from a slice borrowed for 'a, so
        // each IoSlice<'a> describes memory that stays readable and unchanged for 'a; the
        // list borrows the store mutably for 'a, so nothing rewrites or frees the room
        // meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.raw.as_mut_ptr().cast::<IoSlice<'a>>(), self.raw.len()) }
    }

    /// The slices as a scatter list (for recvmsg), in this store's room.
    pub fn scatter<'a>(&'a mut self, slices: impl IntoIterator<Item = &'a mut [u8]>) -> &'a mut [IoSliceMut<'a>] {
        self.raw.clear();
        self.raw.extend(slices.into_iter().map(|s| libc::iovec {
            iov_base: s.as_mut_ptr().cast::<libc::c_void>(),
            iov_len: s.len(),
        }));
        // SAFETY: IoSliceMut is guaranteed ABI-compatible with struct iovec on Unix. Every
        // iovec was made from a slice borrowed mutably for 'a and consumed here, so each
        // IoSliceMut<'a> is the only way to reach its memory for 'a (the same exclusive
        // borrow, moved into the list); the list borrows the store mutably for 'a.
        unsafe { std::slice::from_raw_parts_mut(self.raw.as_mut_ptr().cast::<IoSliceMut<'a>>(), self.raw.len()) }
    }
}

/// An option value setsockopt/getsockopt take as plain bytes of a fixed size: a C int or a
/// 64-bit count. Sealed to those, so no value with pointers or padding reaches the kernel.
pub(crate) trait OptValue: Copy + sealed::Sealed {}
impl OptValue for i32 {}
impl OptValue for u64 {}
mod sealed {
    pub trait Sealed {}
    impl Sealed for i32 {}
    impl Sealed for u64 {}
}

/// setsockopt of one fixed-size value: the one setsockopt in `sys/` (every socket option of
/// `net.rs` and `udp.rs` goes through it).
pub(crate) fn set_opt<T: OptValue>(fd: RawFd, level: i32, name: i32, value: T) -> io::Result<()> {
    // SAFETY: value is a live T (an i32 or a u64, no padding) and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// setsockopt of one C int.
pub(crate) fn set_int_opt(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    set_opt(fd, level, name, value)
}

/// getsockopt of one C int.
pub(crate) fn get_int_opt(fd: RawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: value and len are live, writable and len says value's size.
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

/// Set SO_RCVLOWAT: a blocking recv (and poll) waits for this many bytes (or the end).
pub fn set_rcvlowat(fd: RawFd, bytes: i32) -> io::Result<()> {
    set_int_opt(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, bytes)
}

/// Set TCP_MAXSEG (before connect: clamps the MSS both ends use on this connection).
pub fn set_maxseg(fd: RawFd, bytes: i32) -> io::Result<()> {
    set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, bytes)
}

/// TCP_NODELAY on or off.
pub fn set_nodelay(fd: RawFd, on: bool) -> io::Result<()> {
    set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, on as i32)
}
