//! Writing output files (exports, reports, charts) so that they never replace the results
//! database or any other SQLite file, and never stay half-written: each file is written to a
//! temporary file in the same folder and renamed into place; on failure the temporary file is
//! removed and the error is one line.

use super::db::{is_sqlite_file, sidecar, StoreError};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The path made absolute with symbolic links and `..` resolved as far as it exists, the rest
/// resolved lexically: two spellings of one place compare equal even before it exists.
fn normalize(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.clone();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    let mut base = loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            break real;
        }
        let mut components = existing.components();
        match components.next_back() {
            Some(Component::RootDir | Component::Prefix(_)) | None => break existing,
            Some(last) => {
                rest.push(last.as_os_str().to_owned());
                existing = components.as_path().to_path_buf();
            }
        }
    };
    for name in rest.iter().rev() {
        match Path::new(name).components().next() {
            Some(Component::ParentDir) => {
                base.pop();
            }
            Some(Component::CurDir) | None => {}
            Some(other) => base.push(other),
        }
    }
    base
}

/// Whether two paths name the same file: the same device and inode when both exist (which also
/// catches hard links), else the same normalized path.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => normalize(a) == normalize(b),
    }
}

fn refuse(output: &Path, why: String) -> anyhow::Error {
    StoreError::OutputIsDatabase {
        output: output.to_path_buf(),
        why,
    }
    .into()
}

/// Refuse an output path that is the results database `db` (by any spelling: a symbolic link,
/// `./x/../db`, a hard link), one of its `-wal`/`-shm`/`-journal` files, or any SQLite file.
pub fn check_output(output: &Path, db: &Path) -> anyhow::Result<()> {
    if same_file(output, db) {
        return Err(refuse(output, format!("it is the results database {}", db.display())));
    }
    for suffix in ["-wal", "-shm", "-journal"] {
        if same_file(output, &sidecar(db, suffix)) {
            return Err(refuse(
                output,
                format!("it is the {suffix} file of the results database {}", db.display()),
            ));
        }
    }
    if is_sqlite_file(output) {
        return Err(refuse(
            output,
            "it is an SQLite database (iopath never writes over one); choose another file name".into(),
        ));
    }
    Ok(())
}

static SERIAL: AtomicU64 = AtomicU64::new(0);

/// A fresh name for a temporary sibling of `name` in `dir`.
fn temp_name(dir: &Path, name: &str) -> PathBuf {
    let n = SERIAL.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}.iopath-tmp-{}-{n}", std::process::id()))
}

/// Where the bytes of `path` really go: the target of a symbolic link (so the link stays a
/// link), else the path itself.
fn destination(path: &Path) -> PathBuf {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

/// An output that cannot be written (a missing or read-only folder, a full disk, a device that
/// refuses): `StoreError::CannotWrite`, exit 2 like every output-path problem.
fn cannot_write(path: &Path, e: impl std::fmt::Display) -> anyhow::Error {
    StoreError::CannotWrite {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
    .into()
}

/// Write `bytes` to `path` through a temporary file in the same folder renamed into place, so
/// the file is either the old one or the whole new one. A device or FIFO (`/dev/stdout`,
/// `/dev/null`) is written directly: renaming over it would replace the device. Refuses to
/// replace an SQLite file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dest = destination(path);
    match std::fs::metadata(&dest) {
        Ok(m) if m.is_dir() => return Err(cannot_write(path, "it is a folder")),
        Ok(m) if !m.is_file() => {
            let mut file = OpenOptions::new()
                .write(true)
                .open(&dest)
                .map_err(|e| cannot_write(path, e))?;
            return file
                .write_all(bytes)
                .and_then(|()| file.flush())
                .map_err(|e| cannot_write(path, e));
        }
        Ok(_) if is_sqlite_file(&dest) => {
            return Err(refuse(
                path,
                "it is an SQLite database (iopath never writes over one)".into(),
            ))
        }
        _ => {}
    }
    let dir = dest
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    let tmp = temp_name(dir, &name);
    let result = (|| -> std::io::Result<()> {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        if let Ok(m) = std::fs::metadata(&dest) {
            file.set_permissions(m.permissions())?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(cannot_write(path, e));
    }
    rename_into_place(&tmp, &dest).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Rename a finished temporary file over `dest`, unless `dest` is an SQLite file.
fn rename_into_place(tmp: &Path, dest: &Path) -> anyhow::Result<()> {
    if is_sqlite_file(dest) {
        return Err(refuse(
            dest,
            "it is an SQLite database (iopath never writes over one)".into(),
        ));
    }
    std::fs::rename(tmp, dest).map_err(|e| {
        if e.kind() == std::io::ErrorKind::CrossesDevices {
            // Kept as an io::Error: `Staging::commit` copies across instead.
            anyhow::Error::new(e).context(format!("cannot write {}", dest.display()))
        } else {
            cannot_write(dest, e)
        }
    })
}

/// A set of output files written first into a temporary folder beside them and moved into
/// place together by `commit`; dropped without commit (an error on the way), the temporary
/// folder and everything in it is removed and nothing at the destinations has changed.
pub struct Staging {
    dir: PathBuf,
    moves: Vec<(PathBuf, PathBuf)>,
}

impl Staging {
    /// A temporary folder in `beside` (which must exist), on the destinations' filesystem.
    pub fn new(beside: &Path) -> anyhow::Result<Staging> {
        let dir = temp_name(beside, "staging");
        std::fs::create_dir(&dir).map_err(|e| cannot_write(beside, e))?;
        Ok(Staging { dir, moves: Vec::new() })
    }

    /// Where to write the file that `commit` moves to `dest` (in the order they were added).
    pub fn file(&mut self, dest: &Path) -> PathBuf {
        // Keep the file name's extension: the PNG encoder chooses the format by it.
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let staged = self.dir.join(format!("{}-{name}", self.moves.len()));
        self.moves.push((staged.clone(), dest.to_path_buf()));
        staged
    }

    /// Write `bytes` as the file that `commit` moves to `dest`.
    pub fn write(&mut self, dest: &Path, bytes: &[u8]) -> anyhow::Result<()> {
        let staged = self.file(dest);
        let mut file = File::create(&staged).map_err(|e| cannot_write(dest, e))?;
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(|e| cannot_write(dest, e))
    }

    /// Move every staged file to its destination (creating the destination folders), in the
    /// order they were added, refusing to replace an SQLite file.
    pub fn commit(self) -> anyhow::Result<()> {
        for (staged, dest) in &self.moves {
            if let Some(dir) = dest.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| cannot_write(dir, e))?;
            }
            let _ = File::open(staged).and_then(|f| f.sync_all());
            let target = destination(dest);
            let cross_device = |e: &anyhow::Error| {
                e.root_cause()
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::CrossesDevices)
            };
            match rename_into_place(staged, &target) {
                // The destination folder is on another filesystem (a link or mount point).
                Err(e) if cross_device(&e) => {
                    let bytes = std::fs::read(staged).map_err(|e| cannot_write(dest, e))?;
                    write_atomic(&target, &bytes)?;
                }
                other => other?,
            }
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_path_are_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert!(same_file(&dir.path().join("sub/../x.db"), &db), "before it exists");
        std::fs::write(&db, b"x").unwrap();
        assert!(same_file(&dir.path().join("sub/../x.db"), &db));
        assert!(same_file(&dir.path().join("./sub/../missing/../x.db"), &db));
        assert!(!same_file(&dir.path().join("y.db"), &db));
    }

    #[test]
    fn a_failed_staging_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut staging = Staging::new(dir.path()).unwrap();
        staging.write(&dir.path().join("a.txt"), b"a").unwrap();
        drop(staging);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
