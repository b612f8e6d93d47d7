//! iopath's own advisory locks on the database file: Linux open-file-description locks
//! (`F_OFD_SETLK`), which belong to one descriptor rather than to the process and which the
//! kernel drops when the process ends, however it ends. They sit on byte ranges SQLite never
//! locks (run locks) or mirror SQLite's own shared lock (a reader's guard), so they never
//! disturb SQLite's locking.
//!
//! Closing any descriptor of a file drops the process's POSIX locks on it, SQLite's included:
//! the descriptors returned here must be closed only after the SQLite connection (see
//! `Store::locks`).

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg};
use std::fs::{File, OpenOptions};
use std::path::Path;

/// SQLite's shared-lock bytes (os_unix.c: PENDING_BYTE 0x40000000 + 2, 510 bytes).
const SQLITE_SHARED_FIRST: i64 = 0x4000_0002;
const SQLITE_SHARED_SIZE: i64 = 510;
/// Where run locks start: far beyond SQLite's lock bytes and any real database size.
const RUN_LOCK_BASE: i64 = 1 << 46;

/// Try to take a lock without waiting: the descriptor and whether it holds the lock (false when
/// another descriptor, another process, holds a conflicting one). The descriptor is returned
/// either way, so the caller decides when it is closed. Filesystems without OFD locks count as
/// locked: the lock is then advisory in name only, never an error.
fn try_lock(file: File, write: bool, start: i64, len: i64) -> anyhow::Result<(File, bool)> {
    let flock = libc::flock {
        l_type: if write { libc::F_WRLCK } else { libc::F_RDLCK } as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: start,
        l_len: len,
        l_pid: 0,
    };
    match fcntl(&file, FcntlArg::F_OFD_SETLK(&flock)) {
        Ok(_) => Ok((file, true)),
        Err(Errno::EAGAIN | Errno::EACCES) => Ok((file, false)),
        Err(Errno::EINVAL | Errno::ENOLCK | Errno::EOPNOTSUPP) => Ok((file, true)),
        Err(e) => anyhow::bail!("cannot lock: {e}"),
    }
}

/// A read lock on SQLite's shared-lock bytes: while it is held no SQLite connection can take
/// the exclusive lock with which a closing writer folds its WAL into the database file.
pub(super) fn shared_guard(path: &Path) -> anyhow::Result<(File, bool)> {
    let file = File::open(path).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
    try_lock(file, false, SQLITE_SHARED_FIRST, SQLITE_SHARED_SIZE)
}

/// The lock of run `id`, held by the process executing it.
pub(super) fn run_lock(path: &Path, id: i64) -> anyhow::Result<(File, bool)> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
    try_lock(file, true, RUN_LOCK_BASE + id.max(0), 1)
}

/// Whether another process is executing run `id` right now (it holds the run's lock): the
/// descriptor and true when it is. When it is not, the descriptor holds a read lock on the
/// run's byte until it is closed, so no process starts executing (resuming) the run meanwhile;
/// it needs only read access to the file.
pub(super) fn run_in_progress(path: &Path, id: i64) -> anyhow::Result<(File, bool)> {
    let file = File::open(path).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
    let (file, free) = try_lock(file, false, RUN_LOCK_BASE + id.max(0), 1)?;
    Ok((file, !free))
}
