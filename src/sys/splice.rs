//! The page-moving system calls of the sendfile and splice send modes: memfd_create and a
//! shared writable mapping of it (message bytes staged in the page cache), sendfile,
//! pipe2 with F_SETPIPE_SZ, vmsplice and splice. None of these has a completion
//! notification: the kernel keeps references to the pages it was handed and says nothing
//! when it lets them go.

use std::ffi::CStr;
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// splice/vmsplice flag: a hint to move pages rather than copy them (the kernel may ignore it).
const SPLICE_F_MOVE: u32 = libc::SPLICE_F_MOVE;

/// The largest pipe an unprivileged process may ask for, when /proc says (fs.pipe-max-size).
pub fn pipe_max_size() -> Option<usize> {
    super::procfs::read_i64("/proc/sys/fs/pipe-max-size").and_then(|v| usize::try_from(v).ok())
}

fn check(rc: isize) -> io::Result<usize> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// An anonymous file in the page cache (memfd_create, close-on-exec). Nothing is left behind:
/// it has no name in any filesystem and vanishes with its last reference.
pub fn memfd(name: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: name is a valid NUL-terminated string; the result is checked before use.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A shared read-write mapping of the first `len` bytes of a file: stores through it land in
/// the file's page-cache pages, the same pages sendfile hands to a socket. Unmapped on drop.
pub struct SharedFileMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned exclusively by this value (like a Box<[u8]>); access goes
// through &/&mut.
unsafe impl Send for SharedFileMap {}

impl SharedFileMap {
    /// Size the file to `len` bytes and map it.
    pub fn new(file: &OwnedFd, len: usize) -> io::Result<SharedFileMap> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty mapping"));
        }
        // SAFETY: ftruncate on a descriptor we borrow; the result is checked.
        if unsafe { libc::ftruncate64(file.as_raw_fd(), len as libc::off64_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: maps len bytes of a file just sized to len, with no address hint; checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedFileMap { ptr: ptr.cast(), len })
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is readable and writable for len bytes while self lives, and
        // &mut self makes this borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for SharedFileMap {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe the mapping this value created and still owns.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// sendfile(2): up to `count` bytes of `file` from `*offset` to socket `out`; advances
/// `*offset` by what was sent and returns that count.
pub fn sendfile(out: RawFd, file: RawFd, offset: &mut i64, count: usize) -> io::Result<usize> {
    // SAFETY: offset is a live, writable 64-bit offset the kernel updates (sendfile64, so the
    // width holds on every target); the descriptors are the caller's.
    check(unsafe { libc::sendfile64(out, file, offset as *mut i64 as *mut libc::off64_t, count) })
}

/// A pipe (O_CLOEXEC): (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Ask for a pipe of `bytes` capacity (F_SETPIPE_SZ); returns the capacity the kernel set
/// (rounded up to a power-of-two number of pages).
fn set_pipe_size(fd: RawFd, bytes: usize) -> io::Result<usize> {
    let bytes = libc::c_int::try_from(bytes).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: fcntl with an int argument on a descriptor the caller owns.
    let rc = unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, bytes) };
    check(rc as isize)
}

/// The pipe's capacity now (F_GETPIPE_SZ).
fn pipe_size(fd: RawFd) -> io::Result<usize> {
    // SAFETY: fcntl without an argument on a descriptor the caller owns.
    let rc = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
    check(rc as isize)
}

/// vmsplice(2) of user memory into a pipe's write end: the pipe takes references to the
/// pages behind `iov` (no copy); returns the bytes taken, which may be fewer than offered
/// when the pipe fills. What the pipe holds is read from those pages when it is spliced
/// out, so they must not change until then: private, used only by [`PagePipe`], which
/// empties the pipe before the borrow of the pages ends.
fn vmsplice(pipe_w: RawFd, iov: &[IoSlice<'_>], flags: u32) -> io::Result<usize> {
    // SAFETY: IoSlice is ABI-compatible with struct iovec; the kernel only reads the iovecs
    // and takes references to the pages they name (the caller keeps them mapped).
    check(unsafe { libc::vmsplice(pipe_w, iov.as_ptr().cast(), iov.len(), flags) })
}

/// splice(2) of up to `len` bytes from `from` to `to` (one of them a pipe), no offsets.
fn splice(from: RawFd, to: RawFd, len: usize, flags: u32) -> io::Result<usize> {
    // SAFETY: null offsets mean "the descriptors' own positions"; nothing else is passed by
    // pointer.
    check(unsafe { libc::splice(from, std::ptr::null_mut(), to, std::ptr::null_mut(), len, flags) })
}

/// Retry on EINTR, counting every attempt.
fn retry(calls: &mut u64, mut call: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
    loop {
        *calls += 1;
        match call() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Why a [`PagePipe::send`] failed: the system call (`vmsplice` or `splice`) and its error.
#[derive(Debug)]
pub struct PipeError {
    pub call: &'static str,
    pub error: io::Error,
}

/// A pipe that user pages pass through on their way to a socket, without a copy: vmsplice
/// gives the pipe references to the pages, splice moves them on into the socket. The pipe
/// reads the pages when it is spliced out, so they must not change while it holds them:
/// `send` borrows them for the call and returns only with the pipe empty. A failure that
/// leaves pages in the pipe poisons it: every later `send` fails with the first error, and
/// nothing is spliced out of it any more (the pages it still names may change by then).
pub struct PagePipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
    /// The first failure with bytes left in the pipe: (call, kind, text).
    poisoned: Option<(&'static str, io::ErrorKind, String)>,
    /// vmsplice and splice calls made, EINTR retries included.
    pub vmsplice_calls: u64,
    pub splice_calls: u64,
}

impl PagePipe {
    /// A pipe (O_CLOEXEC) of about `want` bytes (F_SETPIPE_SZ); over the user's pipe-page
    /// quota (fs.pipe-user-pages-soft: EPERM) it keeps the default size.
    pub fn new(want: usize) -> io::Result<PagePipe> {
        let (read, write) = pipe()?;
        let capacity = match set_pipe_size(write.as_raw_fd(), want) {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => pipe_size(write.as_raw_fd())?,
            Err(e) => return Err(e),
        };
        Ok(PagePipe {
            read,
            write,
            capacity,
            poisoned: None,
            vmsplice_calls: 0,
            splice_calls: 0,
        })
    }

    /// The pipe's capacity in bytes, as the kernel set it.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Move every byte `iov` names into socket `to`, in order: vmsplice as much as the pipe
    /// takes, splice all of it out (SPLICE_F_MOVE), repeat. Returns with the pipe empty.
    pub fn send(&mut self, to: RawFd, mut iov: &mut [IoSlice<'_>]) -> Result<(), PipeError> {
        if let Some((call, kind, ref text)) = self.poisoned {
            return Err(PipeError {
                call,
                error: io::Error::new(kind, text.clone()),
            });
        }
        let (read, write) = (self.read.as_raw_fd(), self.write.as_raw_fd());
        while !iov.is_empty() {
            // The pipe is empty here: it takes as much as fits and returns.
            let mut in_pipe =
                retry(&mut self.vmsplice_calls, || vmsplice(write, iov, 0)).map_err(|error| PipeError {
                    call: "vmsplice",
                    error,
                })?;
            if in_pipe == 0 {
                return Err(self.poison(
                    "vmsplice",
                    io::Error::other("vmsplice took no bytes into an empty pipe"),
                ));
            }
            IoSlice::advance_slices(&mut iov, in_pipe);
            while in_pipe > 0 {
                let n = match retry(&mut self.splice_calls, || splice(read, to, in_pipe, SPLICE_F_MOVE)) {
                    Ok(0) => Err(io::Error::other("splice moved nothing out of a non-empty pipe")),
                    other => other,
                };
                in_pipe -= n.map_err(|e| self.poison("splice", e))?;
            }
        }
        Ok(())
    }

    /// Bytes may be left in the pipe: refuse every later send with this error.
    fn poison(&mut self, call: &'static str, error: io::Error) -> PipeError {
        self.poisoned = Some((call, error.kind(), error.to_string()));
        PipeError { call, error }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Bytes written through the shared mapping are what sendfile reads from the file, and a
    /// vmspliced buffer comes out of the pipe intact.
    #[test]
    fn memfd_mapping_sendfile_and_vmsplice_move_the_bytes() {
        let file = memfd(c"iopath-test").unwrap();
        let mut map = SharedFileMap::new(&file, 8192).unwrap();
        map.as_mut_slice()[..5].copy_from_slice(b"hello");
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut offset = 0i64;
        assert_eq!(sendfile(b.as_raw_fd(), file.as_raw_fd(), &mut offset, 5).unwrap(), 5);
        assert_eq!(offset, 5);
        let mut got = [0u8; 5];
        a.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");

        let (r, w) = pipe().unwrap();
        let cap = set_pipe_size(w.as_raw_fd(), 128 * 1024).unwrap();
        assert!(cap >= 128 * 1024, "{cap}");
        assert_eq!(pipe_size(r.as_raw_fd()).unwrap(), cap);
        let data = vec![7u8; 3000];
        let n = vmsplice(w.as_raw_fd(), &[IoSlice::new(&data)], 0).unwrap();
        assert_eq!(n, 3000);
        let moved = splice(r.as_raw_fd(), b.as_raw_fd(), n, SPLICE_F_MOVE).unwrap();
        assert_eq!(moved, 3000);
        let mut back = vec![0u8; 3000];
        a.read_exact(&mut back).unwrap();
        assert_eq!(back, data);
    }

    /// Pages go through the pipe whole and in order, even when they do not fit at once; a
    /// send that fails with pages left in the pipe poisons it: the next send fails with the
    /// first error and calls nothing (the pages still in the pipe are never spliced out).
    #[test]
    fn a_page_pipe_sends_whole_and_a_failure_poisons_it() {
        use std::os::unix::net::UnixStream;
        let mut pipe = PagePipe::new(64 << 10).unwrap();
        let big: Vec<u8> = (0..3 * pipe.capacity() + 123).map(|i| (i % 251) as u8).collect();
        let small = vec![5u8; 1000];
        let (mut a, b) = UnixStream::pair().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            a.read_to_end(&mut got).map(|_| got)
        });
        pipe.send(b.as_raw_fd(), &mut [IoSlice::new(&big), IoSlice::new(&small)])
            .unwrap();
        assert!(
            pipe.vmsplice_calls >= 4 && pipe.splice_calls >= 4,
            "{} {}",
            pipe.vmsplice_calls,
            pipe.splice_calls
        );
        drop(b);
        let got = reader.join().unwrap().unwrap();
        assert_eq!(got.len(), big.len() + small.len());
        assert!(got[..big.len()] == big[..] && got[big.len()..] == small[..]);

        // A peer gone: the splice out fails with the bytes still in the pipe.
        let (gone, c) = UnixStream::pair().unwrap();
        drop(gone);
        let err = pipe.send(c.as_raw_fd(), &mut [IoSlice::new(&small)]).unwrap_err();
        assert_eq!(err.call, "splice");
        assert_eq!(err.error.kind(), io::ErrorKind::BrokenPipe, "{}", err.error);
        let calls = (pipe.vmsplice_calls, pipe.splice_calls);
        let (mut d, e) = UnixStream::pair().unwrap();
        let again = pipe.send(e.as_raw_fd(), &mut [IoSlice::new(&big)]).unwrap_err();
        assert_eq!((again.call, again.error.to_string()), (err.call, err.error.to_string()));
        assert_eq!(
            (pipe.vmsplice_calls, pipe.splice_calls),
            calls,
            "no call after the failure"
        );
        drop(e);
        let mut rest = Vec::new();
        d.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "nothing left in the pipe reached a socket");
    }
}
