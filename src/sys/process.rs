//! Processes for the microbenchmarks: fork/exec/posix_spawn timings, a pipe ping-pong child and
//! a file-reader child. A forked child of a (possibly) multithreaded parent may only make
//! async-signal-safe calls, so every child body here is plain system calls and `_exit`; all
//! memory it needs is prepared before the fork.
//!
//! No child outlives iopath or is left behind:
//! - every child leads its own process group (so a terminal's Ctrl-C reaches iopath alone, and
//!   killing the group also takes whatever the child started);
//! - a forked child asks for SIGKILL when its parent dies (PR_SET_PDEATHSIG), so even a
//!   SIGKILLed iopath leaves no orphan (posix_spawn offers no way to ask this: a spawned child
//!   has its group and the forced-exit action below, not this);
//! - while a child lives, a second signal's forced exit ([`signal::on_forced_exit`]) kills its
//!   group;
//! - [`Child::wait`] gives up when a stop is requested, and a `Child` dropped unwaited is killed
//!   (its whole group) and reaped.

use crate::stop::Stop;
use crate::sys::signal::{self, ForcedExitGuard};
use std::ffi::CString;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// How a bounded wait for a child ended.
enum Ending {
    Exited,
    Stopped,
    TimedOut,
}

/// The error of a wait or read given up because a stop was requested. It wraps
/// [`crate::stop::Interrupted`] (not `ErrorKind::Interrupted`, which callers retry as EINTR).
pub fn stopped() -> io::Error {
    io::Error::other(crate::stop::Interrupted)
}

/// The error of a wait given up because the child did not exit within `limit`
/// (`ErrorKind::TimedOut`; the child's group was killed and the child reaped).
pub fn timed_out(limit: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("the child did not exit within {}", seconds(limit)),
    )
}

/// A duration as "10 s" or "0.2 s".
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s} s")
    }
}

/// Whether `err` is [`stopped`].
#[cfg(test)]
pub fn is_stopped(err: &io::Error) -> bool {
    err.get_ref().is_some_and(|e| e.is::<crate::stop::Interrupted>())
}

/// A child process, identified by PID, leading its own process group (pgid = pid). Dropping it
/// unwaited kills that group and reaps the child, so none is ever left behind.
pub struct Child {
    pid: libc::pid_t,
    reaped: bool,
    /// Kills the child's group if a second signal forces iopath out while the child lives.
    forced_exit: Option<ForcedExitGuard>,
    /// Not Send: PR_SET_PDEATHSIG fires when the forking *thread* ends, so the child stays
    /// with the thread that forked it, which waits for it or drops it.
    _forking_thread: PhantomData<*const ()>,
}

impl Child {
    /// Take charge of `pid`, a child of this process that leads its own process group.
    fn adopt(pid: libc::pid_t) -> Child {
        Child {
            pid,
            reaped: false,
            forced_exit: Some(signal::on_forced_exit(move || signal::kill_process_group(pid))),
            _forking_thread: PhantomData,
        }
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Wait for the child to exit; returns its exit status (or 128 + signal). When `stop` is
    /// requested first, the child's group is killed, the child reaped and the error is
    /// [`stopped`]. The stop is looked at every [`Stop::POLL`] at most.
    pub fn wait(self, stop: Stop) -> io::Result<i32> {
        self.wait_within(stop, None)
    }

    /// [`Child::wait`], bounded: when the child has not exited within `limit`, its group is
    /// killed, the child reaped and the error is [`timed_out`] (`ErrorKind::TimedOut`).
    pub fn wait_within(mut self, stop: Stop, limit: Option<Duration>) -> io::Result<i32> {
        let deadline = limit.map(|l| Instant::now() + l);
        let exited = self.wait_exit(stop, deadline);
        match exited {
            Ok(Ending::Exited) => {}
            Ok(Ending::Stopped) => {
                self.kill_and_reap();
                return Err(stopped());
            }
            Ok(Ending::TimedOut) => {
                self.kill_and_reap();
                return Err(timed_out(limit.unwrap_or_default()));
            }
            Err(e) => {
                self.kill_and_reap();
                return Err(e);
            }
        }
        // Exited and not yet reaped: the PID (and so the group ID) is still ours while the
        // forced-exit action is unregistered, so that action can never hit a stranger.
        self.forced_exit = None;
        let status = wait_pid(self.pid);
        self.reaped = true;
        status
    }

    /// Block until the child has exited, without reaping it; give up as soon as `stop` is
    /// requested or `deadline` passes.
    fn wait_exit(&self, stop: Stop, deadline: Option<Instant>) -> io::Result<Ending> {
        let pidfd = pidfd_open(self.pid);
        let mut nap = Duration::from_micros(50);
        loop {
            if stop.requested() {
                return Ok(Ending::Stopped);
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => return Ok(Ending::TimedOut),
                },
                None => Stop::POLL,
            };
            match &pidfd {
                Some(fd) => {
                    let mut p = libc::pollfd {
                        fd: fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // At least 1 ms, so a deadline less than 1 ms away is not a busy loop.
                    let ms = left.min(Stop::POLL).as_millis().max(1) as libc::c_int;
                    // SAFETY: p is one valid pollfd; the pidfd is open for the whole call.
                    let rc = unsafe { libc::poll(&mut p, 1, ms) };
                    if rc > 0 {
                        return Ok(Ending::Exited);
                    }
                    if rc < 0 {
                        let err = io::Error::last_os_error();
                        if err.raw_os_error() != Some(libc::EINTR) {
                            return Err(err);
                        }
                    }
                }
                // No pidfd (Linux before 5.3): look without blocking, in short naps.
                None => {
                    if self.has_exited()? {
                        return Ok(Ending::Exited);
                    }
                    std::thread::sleep(nap.min(left));
                    nap = (nap * 2).min(Stop::POLL);
                }
            }
        }
    }

    /// Whether the child has exited (it stays unreaped: WNOWAIT).
    fn has_exited(&self) -> io::Result<bool> {
        // SAFETY: an all-zero siginfo_t is valid; waitid fills it or leaves si_pid 0.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: info is a valid out-pointer; pid is an unreaped child of this process.
            let rc = unsafe {
                libc::waitid(
                    libc::P_PID,
                    self.pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
                )
            };
            if rc == 0 {
                // SAFETY: waitid succeeded, so info holds a SIGCHLD-style record (or zeros).
                return Ok(unsafe { info.si_pid() } != 0);
            }
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(err);
            }
        }
    }

    /// Kill the child's process group, then reap the child.
    fn kill_and_reap(&mut self) {
        if self.reaped {
            return;
        }
        signal::kill_process_group(self.pid);
        // SAFETY: kill with the child's own PID: it is not reaped yet, so the PID is still ours
        // (this reaches it also if it had not yet moved into its own group).
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        self.forced_exit = None;
        let _ = wait_pid(self.pid);
        self.reaped = true;
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

/// A pidfd for `pid` (close-on-exec), or None where the kernel has no pidfd_open.
fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a PID and flags (0) and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the descriptor was just created and nobody else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
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

/// In a freshly forked child (async-signal-safe calls only): lead a process group of its own
/// and die with SIGKILL when the parent does. False when that could not be arranged, or the
/// parent already died before PR_SET_PDEATHSIG took effect.
fn child_setup(parent: libc::pid_t) -> bool {
    // SAFETY: setpgid, prctl and getppid are plain system calls on this process, no pointers.
    unsafe {
        libc::setpgid(0, 0) == 0
            && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) == 0
            && libc::getppid() == parent
    }
}

/// fork(); in the child run `body` (async-signal-safe calls only) and `_exit` with its result.
/// The child leads its own process group and is killed if iopath dies (see the module doc).
/// PR_SET_PDEATHSIG fires when the forking *thread* ends: `Child` is not Send, so the thread
/// that forked a child is the one that waits for it or drops it.
fn fork_with(body: impl FnOnce() -> i32) -> io::Result<Child> {
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: fork has no memory preconditions; the child only runs `child_setup` and `body`,
    // which callers in this file restrict to async-signal-safe system calls, then `_exit` (no
    // destructors, no atexit handlers, no stdio flush).
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            let code = if child_setup(parent) { body() } else { 126 };
            // SAFETY: leaving the child without running any Rust or libc teardown.
            unsafe { libc::_exit(code) }
        }
        pid => {
            // Also from this side, so the group exists whichever process runs first. It fails
            // harmlessly (EACCES) when the child has already exec'd: it made its group itself.
            // SAFETY: setpgid on our own child, no pointers.
            unsafe { libc::setpgid(pid, pid) };
            Ok(Child::adopt(pid))
        }
    }
}

/// fork, the child exits at once, wait: one process creation and teardown.
///
/// The wait is a plain blocking waitpid (EINTR retried), not [`Child::wait`]: the child's body
/// is `_exit` right after its set-up system calls, so it cannot hang and there is no stop to
/// watch for (the benchmark looks at the stop between batches). The stop-aware wait polls a
/// pidfd, which wakes the parent at the child's exit notification, before the child can be
/// reaped; with both on one CPU the parent then blocks again in waitpid, and the extra
/// wake-up cost ~10 us per fork that a C program's `fork` + `waitpid` does not pay. The
/// forced-exit action (kill the child's group) stays registered during the wait; it is
/// dropped right after the reap, and a PID is handed out again only once the kernel's cyclic
/// allocator has gone round all of pid_max, so that action cannot reach a stranger.
pub fn fork_exit_wait() -> io::Result<()> {
    let mut child = fork_with(|| 0)?;
    let waited = wait_pid(child.pid);
    child.reaped = waited.is_ok();
    child.forced_exit = None;
    // On an error the child is still unreaped: dropping it kills its group and reaps it.
    let status = waited?;
    if status != 0 {
        return Err(io::Error::other(format!("child exited with status {status}")));
    }
    Ok(())
}

/// A program and its arguments prepared (as C strings) before any fork, with the posix_spawn
/// attributes that put a spawned child in a process group of its own.
pub struct Program {
    path: CString,
    _args: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    /// Boxed: glibc does not promise the attributes can be moved once initialised.
    spawn_attr: Box<libc::posix_spawnattr_t>,
}

impl Program {
    pub fn new(path: &str) -> io::Result<Program> {
        let path_c = CString::new(path).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
        let args = vec![path_c.clone()];
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        // SAFETY: an all-zero posix_spawnattr_t is plain memory for posix_spawnattr_init to set.
        let mut spawn_attr: Box<libc::posix_spawnattr_t> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: spawn_attr points to memory owned by the box; init comes first, and the
        // setters only write into it. Drop destroys it.
        let rc = unsafe {
            match libc::posix_spawnattr_init(&mut *spawn_attr) {
                0 => {
                    match libc::posix_spawnattr_setflags(&mut *spawn_attr, libc::POSIX_SPAWN_SETPGROUP as libc::c_short)
                    {
                        0 => libc::posix_spawnattr_setpgroup(&mut *spawn_attr, 0),
                        rc => rc,
                    }
                }
                rc => return Err(io::Error::from_raw_os_error(rc)),
            }
        };
        let program = Program {
            path: path_c,
            _args: args,
            argv,
            envp: vec![std::ptr::null()],
            spawn_attr,
        };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(program)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the attributes were initialised in `new` (a Program exists only then).
        unsafe { libc::posix_spawnattr_destroy(&mut *self.spawn_attr) };
    }
}

/// fork + execve of `program` + wait. Status 127 means exec failed in the child. Gives up with
/// [`stopped`] (the child's group killed and the child reaped) when `stop` is requested, and
/// with [`timed_out`] (likewise) when the child has not exited within `limit`.
pub fn fork_exec_wait(program: &Program, stop: Stop, limit: Option<Duration>) -> io::Result<i32> {
    let (path, argv, envp) = (program.path.as_ptr(), program.argv.as_ptr(), program.envp.as_ptr());
    let child = fork_with(move || {
        // SAFETY: path, argv and envp are NUL-terminated arrays built before the fork and still
        // alive in the child's copy of memory; execve only returns on failure.
        unsafe { libc::execve(path, argv, envp) };
        127
    })?;
    child.wait_within(stop, limit)
}

/// posix_spawn of `program` (in a process group of its own) + wait; gives up like
/// [`fork_exec_wait`].
pub fn spawn_wait(program: &Program, stop: Stop, limit: Option<Duration>) -> io::Result<i32> {
    let mut pid: libc::pid_t = 0;
    // SAFETY: pid is a valid out-pointer; path/argv/envp are NUL-terminated and alive; the
    // attributes were initialised in Program::new; null file actions mean the defaults.
    let rc = unsafe {
        libc::posix_spawn(
            &mut pid,
            program.path.as_ptr(),
            std::ptr::null(),
            &*program.spawn_attr,
            program.argv.as_ptr() as *const *mut libc::c_char,
            program.envp.as_ptr() as *const *mut libc::c_char,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Child::adopt(pid).wait_within(stop, limit)
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

/// Wait until `fd` is readable (or hung up): true; false as soon as `stop` is requested.
fn wait_readable(fd: RawFd, stop: Stop) -> io::Result<bool> {
    loop {
        if stop.requested() {
            return Ok(false);
        }
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: p is one valid pollfd for an fd the caller keeps open.
        let rc = unsafe { libc::poll(&mut p, 1, Stop::POLL.as_millis() as libc::c_int) };
        if rc > 0 {
            return Ok(true);
        }
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(err);
            }
        }
    }
}

/// Read exactly buf.len() bytes from a pipe (retrying short reads and EINTR); gives up with
/// [`stopped`] when `stop` is requested while it waits for data.
pub fn read_exact_fd(fd: &OwnedFd, buf: &mut [u8], stop: Stop) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        if !wait_readable(fd.as_raw_fd(), stop)? {
            return Err(stopped());
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked_echo() -> (Child, OwnedFd, OwnedFd) {
        let (to_child_r, to_child_w) = pipe().unwrap();
        let (from_child_r, from_child_w) = pipe().unwrap();
        let child = fork_pipe_echo(
            to_child_r.as_raw_fd(),
            from_child_w.as_raw_fd(),
            None,
            &[to_child_w.as_raw_fd(), from_child_r.as_raw_fd()],
        )
        .unwrap();
        (child, to_child_w, from_child_r)
    }

    fn gone(pid: libc::pid_t) -> bool {
        // SAFETY: signal 0 only checks that the process exists.
        unsafe { libc::kill(pid, 0) != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) }
    }

    #[test]
    fn a_child_leads_its_own_group_and_dropping_it_kills_and_reaps_it() {
        let (child, _w, _r) = blocked_echo();
        let pid = child.pid();
        // SAFETY: getpgid only reads; pid is our unreaped child.
        assert_eq!(unsafe { libc::getpgid(pid) }, pid);
        drop(child);
        assert!(gone(pid));
    }

    #[test]
    fn a_stop_ends_the_wait_kills_the_child_and_reaps_it() {
        let (child, _w, _r) = blocked_echo();
        let pid = child.pid();
        let stop = Stop::fresh();
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            stop.request();
        });
        let t = std::time::Instant::now();
        let err = child.wait(stop).unwrap_err();
        assert!(is_stopped(&err), "{err}");
        // The child never exits on its own: any bound shows the stop ended the wait, so it is
        // generous for a loaded machine.
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(gone(pid));
        stopper.join().unwrap();
    }

    /// A child that never exits (here: an echo child nobody writes to or closes) ends a bounded
    /// wait at the limit, killed with its group and reaped.
    #[test]
    fn a_child_that_does_not_exit_in_time_is_killed_and_reaped() {
        let (child, _w, _r) = blocked_echo();
        let pid = child.pid();
        let t = std::time::Instant::now();
        let err = child
            .wait_within(Stop::fresh(), Some(Duration::from_millis(200)))
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(err.to_string().contains("within 0.2 s"), "{err}");
        assert!(!is_stopped(&err));
        let waited = t.elapsed();
        assert!(waited >= Duration::from_millis(200), "gave up early: {waited:?}");
        assert!(gone(pid));
        // A child that exits in time is not affected by the limit.
        let (child, w, _r) = blocked_echo();
        drop(w);
        assert_eq!(
            child.wait_within(Stop::fresh(), Some(Duration::from_secs(10))).unwrap(),
            0
        );
    }

    #[test]
    fn a_normal_exit_is_waited_for() {
        fork_exit_wait().unwrap();
        let (child, w, _r) = blocked_echo();
        drop(w); // end of file: the echo child exits 0
        assert_eq!(child.wait(Stop::fresh()).unwrap(), 0);
    }
}
