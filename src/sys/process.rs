//! Processes for the microbenchmarks: fork/exec/posix_spawn timings, a pipe ping-pong child and
//! a file-reader child. A forked child of a (possibly) multithreaded parent may only make
//! async-signal-safe calls, so every child body here is plain system calls and `_exit`; all
//! memory it needs is prepared before the fork. Every child is reaped: `Child` waits on drop.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A forked child, identified by PID. Dropping it kills (by that PID) and reaps it if the
/// caller did not wait for it, so none is ever left behind.
pub struct Child {
    pid: libc::pid_t,
    reaped: bool,
}

impl Child {
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Wait for the child to exit; returns its exit status (or 128 + signal).
    pub fn wait(mut self) -> io::Result<i32> {
        let status = wait_pid(self.pid)?;
        self.reaped = true;
        Ok(status)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            // SAFETY: kill with this child's own PID; it is not reaped yet, so the PID is ours.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let _ = wait_pid(self.pid);
        }
    }
}

fn wait_pid(pid: libc::pid_t) -> io::Result<i32> {
    loop {
        let mut status = 0;
        // SAFETY: status is a valid out-pointer; pid is a child of this process.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            return Ok(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else if libc::WIFSIGNALED(status) {
                128 + libc::WTERMSIG(status)
            } else {
                -1
            });
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// fork(); in the child run `body` (async-signal-safe calls only) and `_exit` with its result.
fn fork_with(body: impl FnOnce() -> i32) -> io::Result<Child> {
    // SAFETY: fork has no memory preconditions; the child only runs `body`, which callers in
    // this file restrict to async-signal-safe system calls, then `_exit` (no destructors,
    // no atexit handlers, no stdio flush).
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            let code = body();
            // SAFETY: leaving the child without running any Rust or libc teardown.
            unsafe { libc::_exit(code) }
        }
        pid => Ok(Child { pid, reaped: false }),
    }
}

/// fork, the child exits at once, wait: one process creation and teardown.
pub fn fork_exit_wait() -> io::Result<()> {
    let status = fork_with(|| 0)?.wait()?;
    if status != 0 {
        return Err(io::Error::other(format!("child exited with status {status}")));
    }
    Ok(())
}

/// A program and its arguments prepared (as C strings) before any fork.
pub struct Program {
    path: CString,
    _args: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

impl Program {
    pub fn new(path: &str) -> io::Result<Program> {
        let path_c = CString::new(path).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
        let args = vec![path_c.clone()];
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        Ok(Program {
            path: path_c,
            _args: args,
            argv,
            envp: vec![std::ptr::null()],
        })
    }

    pub fn path(&self) -> &CStr {
        &self.path
    }
}

/// fork + execve of `program` + wait. Status 127 means exec failed in the child.
pub fn fork_exec_wait(program: &Program) -> io::Result<i32> {
    let (path, argv, envp) = (program.path.as_ptr(), program.argv.as_ptr(), program.envp.as_ptr());
    let child = fork_with(move || {
        // SAFETY: path, argv and envp are NUL-terminated arrays built before the fork and still
        // alive in the child's copy of memory; execve only returns on failure.
        unsafe { libc::execve(path, argv, envp) };
        127
    })?;
    child.wait()
}

/// posix_spawn of `program` + wait.
pub fn spawn_wait(program: &Program) -> io::Result<i32> {
    let mut pid: libc::pid_t = 0;
    // SAFETY: pid is a valid out-pointer; path/argv/envp are NUL-terminated and alive; null
    // file actions and attributes mean the defaults.
    let rc = unsafe {
        libc::posix_spawn(
            &mut pid,
            program.path.as_ptr(),
            std::ptr::null(),
            std::ptr::null(),
            program.argv.as_ptr() as *const *mut libc::c_char,
            program.envp.as_ptr() as *const *mut libc::c_char,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Child { pid, reaped: false }.wait()
}

/// A pipe: (read end, write end), close-on-exec.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a writable array of two ints, as pipe2 requires.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both fds are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn pin_raw(cpu: usize) -> bool {
    // SAFETY: zeroed cpu_set_t is the empty set; CPU_SET is only called below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= libc::CPU_SETSIZE as usize {
            return false;
        }
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Fork a child that (optionally pinned to `cpu`) first writes one byte holding the CPU it runs
/// on (255 when unknown), then echoes every byte read from `from` back into `to`, until `from`
/// reaches end of file. The child's copies of `close_in_child` are closed first so the parent
/// closing its write end really ends the child.
pub fn fork_pipe_echo(from: RawFd, to: RawFd, cpu: Option<usize>, close_in_child: &[RawFd]) -> io::Result<Child> {
    let close: Vec<RawFd> = close_in_child.to_vec();
    fork_with(move || {
        for fd in &close {
            // SAFETY: closing the child's copy of an inherited descriptor.
            unsafe { libc::close(*fd) };
        }
        if let Some(cpu) = cpu {
            if !pin_raw(cpu) {
                return 3;
            }
        }
        // SAFETY: sched_getcpu only returns a number.
        let here = unsafe { libc::sched_getcpu() };
        let mut byte = [u8::try_from(here).unwrap_or(255)];
        loop {
            // SAFETY: byte is a valid 1-byte buffer for write/read on the inherited pipe fds.
            if unsafe { libc::write(to, byte.as_ptr() as *const libc::c_void, 1) } != 1 {
                return 2;
            }
            // SAFETY: as above.
            match unsafe { libc::read(from, byte.as_mut_ptr() as *mut libc::c_void, 1) } {
                1 => continue,
                0 => return 0,
                _ => return 1,
            }
        }
    })
}

/// What a file-reader child measured: bytes read and CLOCK_MONOTONIC nanoseconds it took.
#[derive(Debug, Clone, Copy)]
pub struct ReaderResult {
    pub bytes: u64,
    pub nanos: u64,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer; clock_gettime is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Fork a child that waits for one byte on `go` (so all readers start together), then reads
/// the already open `file` from offset 0 to the end in `buf.len()` blocks (pread into `buf`,
/// which must suit O_DIRECT if the file was opened with it) and writes a ReaderResult (two
/// little-endian u64) to `report`.
pub fn fork_file_reader(file: RawFd, buf: &mut [u8], go: RawFd, report: RawFd) -> io::Result<Child> {
    let (ptr, len) = (buf.as_mut_ptr(), buf.len());
    fork_with(move || {
        let mut byte = 0u8;
        // SAFETY: reading one byte into a local.
        if unsafe { libc::read(go, &mut byte as *mut u8 as *mut libc::c_void, 1) } != 1 {
            return 2;
        }
        let start = monotonic_ns();
        let mut offset: i64 = 0;
        loop {
            // SAFETY: ptr..ptr+len is the child's copy of the caller's buffer.
            let n = unsafe { libc::pread(file, ptr as *mut libc::c_void, len, offset) };
            if n < 0 {
                return 1;
            }
            if n == 0 {
                break;
            }
            offset += n as i64;
        }
        let nanos = monotonic_ns() - start;
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&(offset as u64).to_le_bytes());
        out[8..].copy_from_slice(&nanos.to_le_bytes());
        // SAFETY: out is a valid 16-byte buffer; pipe writes of <= PIPE_BUF bytes are atomic.
        if unsafe { libc::write(report, out.as_ptr() as *const libc::c_void, 16) } != 16 {
            return 3;
        }
        0
    })
}

/// Decode one ReaderResult written by a reader child.
pub fn decode_reader_result(bytes: &[u8; 16]) -> ReaderResult {
    let mut a = [0u8; 8];
    let mut b = [0u8; 8];
    a.copy_from_slice(&bytes[..8]);
    b.copy_from_slice(&bytes[8..]);
    ReaderResult {
        bytes: u64::from_le_bytes(a),
        nanos: u64::from_le_bytes(b),
    }
}

/// Read exactly buf.len() bytes from a pipe (retrying short reads and EINTR).
pub fn read_exact_fd(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: buf[done..] is writable for the length passed.
        let n = unsafe {
            libc::read(
                fd.as_raw_fd(),
                buf[done..].as_mut_ptr() as *mut libc::c_void,
                buf.len() - done,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "pipe closed early"));
        }
        done += n as usize;
    }
    Ok(())
}

/// Write all of `data` to a pipe (retrying short writes and EINTR).
pub fn write_all_fd(fd: &OwnedFd, data: &[u8]) -> io::Result<()> {
    let mut done = 0;
    while done < data.len() {
        // SAFETY: data[done..] is readable for the length passed.
        let n = unsafe {
            libc::write(
                fd.as_raw_fd(),
                data[done..].as_ptr() as *const libc::c_void,
                data.len() - done,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(err);
        }
        done += n as usize;
    }
    Ok(())
}
