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

/// What a path named on the command line or in a plan is used as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathUse {
    /// A results database (`--db`, `merge`'s output and inputs): SQLite reopens it by name and
    /// writes its journal beside it, so it must be a file of its own.
    Database,
    /// A file written whole (`export -o`, `man -o`'s pages, a plan written out).
    Output,
    /// A report's HTML file, whose charts go into a folder beside it.
    Report,
}

/// The suffixes of the files SQLite keeps beside a database.
const SIDECARS: [&str; 3] = ["-journal", "-wal", "-shm"];

/// Which of this process's descriptors `path` names, if any: `/dev/stdin`, `/dev/stdout`,
/// `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`, `/proc/thread-self/fd/N`, `/proc/<our pid>/fd/N`,
/// or a symbolic link (any chain of them) that leads to one.
pub fn descriptor_of(path: &Path) -> Option<u32> {
    let own = std::process::id().to_string();
    let mut at = std::path::absolute(path).ok()?;
    for _ in 0..40 {
        // The folder resolved (a link to /proc/self/fd, `..`), the last name kept as it is.
        if let (Some(dir), Some(name)) = (at.parent(), at.file_name()) {
            if let Ok(dir) = std::fs::canonicalize(dir) {
                at = dir.join(name);
            }
        }
        let parts: Vec<String> = at
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        let named: Vec<&str> = parts.iter().map(String::as_str).collect();
        match named[..] {
            ["dev", "stdin"] => return Some(0),
            ["dev", "stdout"] => return Some(1),
            ["dev", "stderr"] => return Some(2),
            ["dev", "fd", n] => return n.parse().ok(),
            ["proc", who, "fd", n] if who == "self" || who == "thread-self" || who == own => return n.parse().ok(),
            ["proc", who, "task", _, "fd", n] if who == own => return n.parse().ok(),
            _ => {}
        }
        let target = std::fs::read_link(&at).ok()?;
        at = match at.parent() {
            Some(dir) => dir.join(target),
            None => target,
        };
    }
    None
}

fn refuse_path(path: &Path, why: String) -> anyhow::Error {
    StoreError::PathRefused {
        path: path.to_path_buf(),
        why,
    }
    .into()
}

/// What a descriptor number is, in words for a refusal.
fn descriptor_words(fd: u32) -> String {
    match fd {
        0 => "this process's standard input".into(),
        1 => "this process's standard output".into(),
        2 => "this process's standard error".into(),
        n => format!("this process's open descriptor {n}"),
    }
}

/// The one check of every output and database path, before any work: `path` resolved (links,
/// `..`, and `/dev/std*`, `/dev/fd/*` through /proc/self/fd to what the descriptor is) and
/// refused, with one line (exit 2), when it is not what it looks like:
/// - a name of SQLite's own side files (`-journal`, `-wal`, `-shm`), given or resolved, as the
///   file or as any folder on its way: SQLite deletes or rewrites them under the database they
///   belong to (and cannot open a database whose side file is a folder);
/// - for a database: one of this process's descriptors (a redirected stdout is not a file
///   SQLite can reopen by name);
/// - for a report: a descriptor (its charts need a folder beside a file of its own);
/// - for an output: the database `db`, one of its side files, any SQLite file, a folder, or a
///   place that cannot be written. A descriptor output is written in place (`write_atomic`).
pub fn check_path(path: &Path, role: PathUse, db: Option<&Path>) -> anyhow::Result<()> {
    // The names along the way: as given, each link's target (a link may point at a name that
    // does not exist yet), and the whole path resolved.
    let mut names = vec![path.to_path_buf()];
    while names.len() < 40 {
        let Some(target) = names.last().and_then(|at| std::fs::read_link(at).ok()) else {
            break;
        };
        let at = names
            .last()
            .and_then(|at| at.parent())
            .unwrap_or(Path::new("/"))
            .join(target);
        names.push(at);
    }
    names.push(normalize(path));
    // Every component, not only the last: a folder the output creates (`man -o a.db-wal`,
    // `export -o a.db-wal/x.csv`) would be taken by SQLite for the side file just the same.
    let components = names.iter().flat_map(|p| p.components()).filter_map(|c| match c {
        std::path::Component::Normal(name) => Some(name),
        _ => None,
    });
    for name in components {
        let name = name.to_string_lossy();
        if let Some(suffix) = SIDECARS.iter().find(|s| name.ends_with(*s)) {
            return Err(refuse_path(
                path,
                format!(
                    "a name ending in {suffix} is one of the files SQLite keeps beside a database (-journal, -wal, \
                     -shm), which SQLite deletes or rewrites; choose another name"
                ),
            ));
        }
    }
    let descriptor = descriptor_of(path);
    match (role, descriptor) {
        (PathUse::Database, Some(fd)) => {
            return Err(refuse_path(
                path,
                format!(
                    "it is {}, and a results database must be a file of its own (SQLite reopens it by name and keeps \
                     its journal beside it); give a file path such as results.db",
                    descriptor_words(fd)
                ),
            ))
        }
        (PathUse::Report, Some(fd)) => {
            return Err(refuse_path(
                path,
                format!(
                    "it is {}, and a report's charts need a folder beside a file of its own; give a file path such \
                     as report.html (its charts go into report-charts/)",
                    descriptor_words(fd)
                ),
            ))
        }
        _ => {}
    }
    match (role, db) {
        (PathUse::Database, _) | (_, None) => Ok(()),
        (_, Some(db)) => check_output(path, db),
    }
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
    if descriptor_of(path).is_some() {
        // `-o /dev/stdout` is what the descriptor is (a pipe, a terminal, the file the shell
        // redirected it to), written where it is: never a temporary file renamed over the
        // redirected file.
        let mut file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| cannot_write(path, e))?;
        return file
            .write_all(bytes)
            .and_then(|()| file.flush())
            .map_err(|e| cannot_write(path, e));
    }
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
    fn descriptors_and_side_files_are_known_by_any_spelling() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(descriptor_of(Path::new("/dev/stderr")), Some(2));
        assert_eq!(descriptor_of(Path::new("/dev/fd/7")), Some(7));
        assert_eq!(descriptor_of(Path::new("/proc/thread-self/fd/1")), Some(1));
        assert_eq!(
            descriptor_of(&PathBuf::from(format!("/proc/{}/fd/4", std::process::id()))),
            Some(4)
        );
        assert_eq!(descriptor_of(Path::new("/proc/1/fd/4")), None, "another process's");
        let link = dir.path().join("out.db");
        std::os::unix::fs::symlink("/dev/stdout", &link).unwrap();
        assert_eq!(descriptor_of(&link), Some(1), "a link to one");
        assert_eq!(descriptor_of(&dir.path().join("plain.db")), None);
        // A folder that is a link to /proc/self/fd, and `..` on the way.
        let fds = dir.path().join("fds");
        std::os::unix::fs::symlink("/proc/self/fd", &fds).unwrap();
        assert_eq!(descriptor_of(&fds.join("2")), Some(2));
        assert_eq!(descriptor_of(Path::new("/dev/../dev/./stdout")), Some(1));
        let err = check_path(&link, PathUse::Database, None).unwrap_err().to_string();
        assert!(err.contains("standard output"), "{err}");
        assert!(check_path(&link, PathUse::Report, None).is_err());
        for name in ["runs.db-wal", "x-shm", "a.sqlite-journal"] {
            for role in [PathUse::Database, PathUse::Output, PathUse::Report] {
                let err = check_path(&dir.path().join(name), role, None).unwrap_err().to_string();
                assert!(err.contains("SQLite keeps beside a database"), "{name}: {err}");
            }
        }
        // A link whose target is a side file's name.
        let to_side = dir.path().join("innocent.csv");
        std::os::unix::fs::symlink(dir.path().join("m.db-journal"), &to_side).unwrap();
        assert!(check_path(&to_side, PathUse::Output, None).is_err());
        assert!(check_path(&dir.path().join("wal.db"), PathUse::Database, None).is_ok());
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
