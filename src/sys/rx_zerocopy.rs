//! Receiving without the receive copy: TCP_ZEROCOPY_RECEIVE maps whole pages of a socket's
//! receive queue into a mmap of the socket, and recv(MSG_TRUNC) discards bytes in the kernel.
//!
//! The kernel maps a page only when the queued data holds it whole: a page fragment of
//! exactly one page at offset 0. What it cannot map it reports as `recv_skip_hint`, bytes the
//! caller reads with recv(). With nothing queued after the peer's FIN it fails with EIO.

use super::mem::page_size;
use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;

/// getsockopt option number (include/uapi/linux/tcp.h); missing from libc.
pub const TCP_ZEROCOPY_RECEIVE: i32 = 35;

/// `struct tcp_zerocopy_receive` as of Linux 5.11 (64 bytes). Our own: libc has none, and
/// the kernel accepts any prefix of at least `address` and `length`, copying back the fields
/// it knows.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct TcpZerocopyReceive {
    /// In: where the socket is mapped (page aligned).
    address: u64,
    /// In: bytes to map; out: bytes mapped.
    length: u32,
    /// Out: bytes at the head of the queue that could not be mapped (read them with recv).
    recv_skip_hint: u32,
    /// Out: bytes queued.
    inq: u32,
    /// Out: a pending socket error (negative errno), 0 if none.
    err: i32,
    /// In: a buffer for small reads (unused: 0).
    copybuf_address: u64,
    /// In/out: that buffer's length, then bytes copied (unused: 0).
    copybuf_len: i32,
    /// In: flags (none).
    flags: u32,
    /// Ancillary data (unused: 0).
    msg_control: u64,
    msg_controllen: u64,
    msg_flags: u32,
    reserved: u32,
}

const _: () = assert!(std::mem::size_of::<TcpZerocopyReceive>() == 64);

/// What one TCP_ZEROCOPY_RECEIVE did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZeroCopyRead {
    /// Bytes now mapped at the start of the mapping (whole pages).
    pub mapped: usize,
    /// Bytes after those that could not be mapped: read them with recv().
    pub skip_hint: usize,
    /// Bytes queued on the socket when the kernel looked.
    pub queued: usize,
}

/// A read-only mmap of a TCP socket, the window into which the kernel maps received pages.
pub struct SocketMapping {
    addr: NonNull<u8>,
    len: usize,
    /// Bytes the last receive mapped and not yet released.
    mapped: usize,
}

// SAFETY: the mapping is owned memory of this process; only &mut self changes what is mapped.
unsafe impl Send for SocketMapping {}

impl SocketMapping {
    /// Map `len` bytes (rounded up to whole pages) of socket `fd`. Fails when the socket
    /// cannot be mapped (ENODEV on a kernel or socket without TCP receive zero-copy).
    pub fn new(fd: RawFd, len: usize) -> io::Result<SocketMapping> {
        let page = page_size();
        let len = len.max(1).div_ceil(page) * page;
        // SAFETY: a fresh shared read-only mapping of the socket; no existing memory is named.
        let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, fd, 0) };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let addr = NonNull::new(addr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(SocketMapping { addr, len, mapped: 0 })
    }

    /// Ask the kernel to map up to `want` bytes (whole pages, at most the mapping's length)
    /// of `fd`'s receive queue. Pages mapped earlier are released first. EIO: the peer closed
    /// and nothing is queued.
    pub fn receive(&mut self, fd: RawFd, want: usize) -> io::Result<ZeroCopyRead> {
        self.release()?;
        let page = page_size();
        let ask = want.min(self.len) / page * page;
        let mut zc = TcpZerocopyReceive {
            address: self.addr.as_ptr() as u64,
            length: ask.min(u32::MAX as usize / page * page) as u32,
            ..Default::default()
        };
        let mut optlen = std::mem::size_of::<TcpZerocopyReceive>() as libc::socklen_t;
        // SAFETY: zc and optlen are live and writable, optlen holds zc's size; the kernel
        // maps pages only inside our mapping at `address`, never past `length`.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                TCP_ZEROCOPY_RECEIVE,
                (&mut zc as *mut TcpZerocopyReceive).cast(),
                &mut optlen,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        if zc.err != 0 {
            return Err(io::Error::from_raw_os_error(-zc.err));
        }
        self.mapped = (zc.length as usize).min(ask);
        Ok(ZeroCopyRead {
            mapped: self.mapped,
            skip_hint: zc.recv_skip_hint as usize,
            queued: zc.inq as usize,
        })
    }

    /// The bytes the last receive mapped.
    pub fn mapped(&self) -> &[u8] {
        // SAFETY: the first `mapped` bytes are pages the kernel mapped into our mapping and
        // that stay mapped until release() or receive(), which take &mut self.
        unsafe { std::slice::from_raw_parts(self.addr.as_ptr(), self.mapped) }
    }

    /// Give the mapped pages back (MADV_DONTNEED), so the kernel can free them.
    pub fn release(&mut self) -> io::Result<()> {
        if self.mapped == 0 {
            return Ok(());
        }
        let len = self.mapped.div_ceil(page_size()) * page_size();
        self.mapped = 0;
        // SAFETY: the range lies inside our own mapping; its pages are not borrowed (&mut self).
        let rc = unsafe { libc::madvise(self.addr.as_ptr().cast(), len, libc::MADV_DONTNEED) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl Drop for SocketMapping {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by new() with this address and length and is unmapped
        // once; nothing borrows it any more.
        unsafe {
            libc::munmap(self.addr.as_ptr().cast(), self.len);
        }
    }
}

/// recv(MSG_TRUNC) of up to `len` bytes from TCP socket `fd`: the kernel drops them from the
/// queue without copying. No buffer is passed at all (NULL): TCP never writes with MSG_TRUNC,
/// and if a kernel ever did, the call would fail with EFAULT instead of writing anywhere.
pub fn recv_discard(fd: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: the buffer pointer is NULL; the kernel reads no user memory for recv and, with
    // MSG_TRUNC on TCP, writes none (a write would be EFAULT).
    let rc = unsafe { libc::recv(fd, std::ptr::null_mut(), len, libc::MSG_TRUNC) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// Wait up to `timeout_ms` for `fd` to be readable (data, end of stream or error).
pub fn wait_readable(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    Ok(super::net::poll_one(fd, libc::POLLIN, timeout_ms)? != 0)
}
