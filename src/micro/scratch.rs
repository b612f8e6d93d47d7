//! A scratch directory for benchmark files inside a directory the user names: created fresh,
//! removed with everything in it when dropped, so temp files go away after failures too, and
//! removed by a second signal's forced exit while it exists (which skips every destructor).
//! What nothing in the process can remove — the folders of a process killed with SIGKILL, its
//! large files and throwaway ssh keys — the next scratch directory made in the same place
//! removes: every `iopath-micro-<pid>-<n>` whose process is gone (see `left_by_the_dead`).

use crate::sys::procfs;
use crate::sys::signal::{self, ForcedExitGuard};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

pub struct ScratchDir {
    path: PathBuf,
    /// Removes the directory if the program is forced out while it exists.
    _forced_exit: ForcedExitGuard,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl ScratchDir {
    /// Create `<base>/iopath-micro-<pid>-<n>`, with its owner's start time inside, after
    /// removing the folders there that processes now gone left behind (one line on stderr
    /// says so).
    pub fn new(base: &Path) -> std::io::Result<ScratchDir> {
        let removed = remove_left_behind(base);
        if !removed.is_empty() {
            crate::tell!(
                "removed {} folder(s) that iopath processes killed before they could clean up left in {}: {}",
                removed.len(),
                base.display(),
                removed.join(", ")
            );
        }
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = base.join(format!("{PREFIX}{}-{n}", std::process::id()));
        std::fs::create_dir(&path)?;
        let doomed = path.clone();
        let forced_exit = signal::on_forced_exit(move || remove(&doomed));
        if let Some(start) = procfs::start_time(std::process::id()) {
            std::fs::write(path.join(OWNER), start.to_string())?;
        }
        Ok(ScratchDir {
            path,
            _forced_exit: forced_exit,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The start of every scratch directory's name; the owner's pid and a counter follow.
const PREFIX: &str = "iopath-micro-";

/// The file in a scratch directory that holds its owner's start time (`procfs::start_time`).
const OWNER: &str = ".iopath-owner";

/// Whether the scratch directory `dir` of process `pid` was left by a process that is gone:
/// no process has that pid now, or the one that has it started at another time than the owner
/// written inside (the pid was reused), or — a folder without that file, made by an older
/// iopath or caught before it was written — the program at that pid is not iopath. A live
/// run's folder is never taken for a dead one's.
fn left_by_the_dead(dir: &Path, pid: u32) -> bool {
    if pid == std::process::id() {
        return false;
    }
    let Some(started) = procfs::start_time(pid) else {
        return procfs::program_name(pid).is_none();
    };
    match std::fs::read_to_string(dir.join(OWNER))
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
    {
        Some(owner_started) => owner_started != started,
        None => procfs::program_name(pid).is_some_and(|name| !name.contains("iopath")),
    }
}

/// Remove the scratch directories in `base` that processes now gone left behind; their names.
pub fn remove_left_behind(base: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((pid, n)) = name.strip_prefix(PREFIX).and_then(|rest| rest.split_once('-')) else {
            continue;
        };
        let (Ok(pid), true) = (
            pid.parse::<u32>(),
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()),
        ) else {
            continue;
        };
        // Only a real folder (never a link to one elsewhere) of this user's.
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && left_by_the_dead(&entry.path(), pid) && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed.push(name);
        }
    }
    removed.sort();
    removed
}

/// Remove a scratch directory and everything in it, as well as possible (errors are ignored:
/// this runs on the way out).
fn remove(path: &Path) {
    let _ = std::fs::remove_dir_all(path);
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        remove(&self.path);
    }
}

/// Check a directory the user named: it exists, is a directory, and a file can be created in
/// it. The error says which of these failed.
pub fn check_dir(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("directory '{}' cannot be used: {e}", path.display()))?;
    if !meta.is_dir() {
        return Err(format!("'{}' is not a directory", path.display()));
    }
    ScratchDir::new(path)
        .map(drop)
        .map_err(|e| format!("directory '{}' is not writable: {e}", path.display()))
}

/// The base directory of a case: its `dir` option or the system temp dir, made absolute (the
/// programs a remote case starts — sshd, sshfs — run elsewhere than this process's folder).
pub fn base_dir(dir: Option<&str>) -> PathBuf {
    resolved(&dir.map(PathBuf::from).unwrap_or_else(std::env::temp_dir))
}

/// `dir` as an absolute path, links resolved where it exists: what a case stores, so a resume
/// from another folder uses the same place.
pub fn resolved(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir)
        .or_else(|_| std::path::absolute(dir))
        .unwrap_or_else(|_| dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_on_drop_even_with_files_inside() {
        let base = std::env::temp_dir();
        let path = {
            let s = ScratchDir::new(&base).unwrap();
            std::fs::write(s.path().join("f"), b"x").unwrap();
            s.path().to_path_buf()
        };
        assert!(!path.exists());
    }

    #[test]
    fn folders_of_gone_processes_are_removed_and_live_ones_kept() {
        let base = tempfile::tempdir().unwrap();
        // A child that has exited and been reaped: its pid names no process (unless reused
        // already, when the start time differs).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        // A live process that is not iopath, and one whose start time is recorded.
        let mut sleeper = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let live = sleeper.id();
        let make = |name: String, owner: Option<String>| {
            let dir = base.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("big"), b"x").unwrap();
            if let Some(owner) = owner {
                std::fs::write(dir.join(OWNER), owner).unwrap();
            }
            dir
        };
        let dead = make(format!("{PREFIX}{gone}-3"), None);
        let reused = make(format!("{PREFIX}{live}-0"), Some("1".into()));
        let not_iopath = make(format!("{PREFIX}{live}-1"), None);
        let alive = make(
            format!("{PREFIX}{live}-2"),
            Some(procfs::start_time(live).unwrap().to_string()),
        );
        let ours = make(format!("{PREFIX}{}-99", std::process::id()), None);
        let other = make(format!("{PREFIX}{gone}-x"), None);
        let removed = remove_left_behind(base.path());
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        assert_eq!(removed.len(), 3, "{removed:?}");
        for dir in [&dead, &reused, &not_iopath] {
            assert!(!dir.exists(), "{}", dir.display());
        }
        for dir in [&alive, &ours, &other] {
            assert!(dir.exists(), "{}", dir.display());
        }
    }

    #[test]
    fn a_relative_dir_is_made_absolute() {
        assert!(base_dir(Some("some/where")).is_absolute());
        assert!(base_dir(None).is_absolute());
    }

    #[test]
    fn bad_dirs_are_refused() {
        assert!(check_dir(Path::new("/nonexistent/iopath"))
            .unwrap_err()
            .contains("cannot be used"));
        assert!(check_dir(Path::new("/proc/version"))
            .unwrap_err()
            .contains("not a directory"));
        assert!(check_dir(&std::env::temp_dir()).is_ok());
    }
}
