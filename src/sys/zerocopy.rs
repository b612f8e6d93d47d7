//! Reading MSG_ZEROCOPY completion notifications from a socket's error queue.
//!
//! Each notification is a `struct sock_extended_err` with origin SO_EE_ORIGIN_ZEROCOPY whose
//! [ee_info, ee_data] is an inclusive range of send-call sequence numbers; ee_code has
//! SO_EE_CODE_ZEROCOPY_COPIED when the kernel fell back to copying the data.

use std::io;
use std::os::fd::RawFd;

/// Missing from libc: include/uapi/linux/errqueue.h.
pub const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// Missing from libc: the kernel copied the data instead of sending the user pages.
pub const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// One completion notification: the inclusive range of send calls it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notification {
    pub first: u32,
    pub last: u32,
    pub copied: bool,
}

/// What one non-blocking read of the error queue found.
#[derive(Debug, PartialEq, Eq)]
pub enum ErrQueueRead {
    /// A zero-copy completion.
    Completion(Notification),
    /// Some other queued error (origin, errno): a real socket error.
    Other { origin: u8, errno: u32 },
    /// Nothing queued right now.
    Empty,
}

/// Read one message from the error queue without blocking.
pub fn read_errqueue(fd: RawFd) -> io::Result<ErrQueueRead> {
    // Room for one cmsg carrying sock_extended_err plus an address; 128 bytes is ample.
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain data; zeroed means no name and no data iovecs.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: msg's control buffer is writable and of the length given; no iovecs.
    let rc = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::EAGAIN) => Ok(ErrQueueRead::Empty),
            _ => Err(err),
        };
    }
    // SAFETY: msg was filled by recvmsg; CMSG_FIRSTHDR/NXTHDR stay inside msg_controllen.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !cmsg.is_null() {
        // SAFETY: cmsg is non-null and points inside the control buffer.
        let hdr = unsafe { &*cmsg };
        let is_recverr = (hdr.cmsg_level == libc::SOL_IP && hdr.cmsg_type == libc::IP_RECVERR)
            || (hdr.cmsg_level == libc::SOL_IPV6 && hdr.cmsg_type == libc::IPV6_RECVERR);
        if is_recverr {
            // SAFETY: for IP(V6)_RECVERR the data is a sock_extended_err; read_unaligned
            // because the control buffer gives no alignment guarantee for it.
            let ee: libc::sock_extended_err = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
            if ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY {
                return Ok(ErrQueueRead::Completion(Notification {
                    first: ee.ee_info,
                    last: ee.ee_data,
                    copied: ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0,
                }));
            }
            return Ok(ErrQueueRead::Other {
                origin: ee.ee_origin,
                errno: ee.ee_errno,
            });
        }
        // SAFETY: msg and cmsg are valid as above.
        cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
    }
    Ok(ErrQueueRead::Other { origin: 0, errno: 0 })
}

/// Wait up to `timeout_ms` for the error queue to become readable (POLLERR).
pub fn wait_errqueue(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    Ok(super::net::poll_one(fd, 0, timeout_ms)? & libc::POLLERR != 0)
}
