//! A scratch directory for benchmark files inside a directory the user names: created fresh,
//! removed with everything in it when dropped, so temp files go away after failures too, and
//! removed by a second signal's forced exit while it exists (which skips every destructor).

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
    /// Create `<base>/iopath-micro-<pid>-<n>`.
    pub fn new(base: &Path) -> std::io::Result<ScratchDir> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = base.join(format!("iopath-micro-{}-{n}", std::process::id()));
        std::fs::create_dir(&path)?;
        let doomed = path.clone();
        let forced_exit = signal::on_forced_exit(move || remove(&doomed));
        Ok(ScratchDir {
            path,
            _forced_exit: forced_exit,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
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

/// The base directory of a case: its `dir` option or the system temp dir.
pub fn base_dir(dir: Option<&str>) -> PathBuf {
    dir.map(PathBuf::from).unwrap_or_else(std::env::temp_dir)
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
