//! Opening the results database. Writers (`create_or_open`) refuse files that are not SQLite or
//! not iopath's, bring the schema up to date inside one `BEGIN IMMEDIATE` transaction (so
//! several processes creating the same database at once do not trip over each other), switch on
//! WAL and make every later transaction `IMMEDIATE`. Readers (`open_existing`) open the file
//! read-only and change nothing: no migration, no WAL switch, no `-wal`/`-shm` files left behind.

use super::lock;
use super::schema::{current_version, APPLICATION_ID, MIGRATIONS};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where every command stores and reads runs unless `--db` or [`DB_ENV`] says otherwise.
pub const DEFAULT_DB_PATH: &str = "iopath-results/iopath.db";

/// The environment variable that moves the default database (the tests give every command a
/// database of its own with it; a user keeps one lab database across folders).
pub const DB_ENV: &str = "IOPATH_DB";

/// The database a command uses without `--db`: [`DB_ENV`] when it is set and not empty, else
/// [`DEFAULT_DB_PATH`].
pub fn default_db_path() -> PathBuf {
    match std::env::var_os(DB_ENV) {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from(DEFAULT_DB_PATH),
    }
}

/// How long a command waits for other iopath processes holding the database before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Errors a caller branches on: all of them are the user pointing at the wrong thing, or at a
/// database iopath will not use as it is (exit code 2 in readers and writers alike).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no results database at {0} (run `iopath quick` or a measuring command first, or pass --db PATH)")]
    Missing(PathBuf),
    #[error("{0} is not an SQLite database (pass --db with an iopath results database)")]
    NotSqlite(PathBuf),
    #[error("{0} is an SQLite database of another program, not iopath's (pass --db with an iopath results database)")]
    Foreign(PathBuf),
    #[error("{path} has schema version {found}, newer than this iopath understands ({known}); upgrade iopath")]
    TooNew { path: PathBuf, found: i64, known: i64 },
    #[error("no run {id} in {path} (`iopath runs --db {path}` lists them)")]
    UnknownRun { id: i64, path: String },
    #[error("{0} has no runs yet (run `iopath quick` or `iopath sweep` first)")]
    Empty(PathBuf),
    #[error(
        "{0} is not a regular file (a FIFO, a device or a folder); pass --db with an iopath results database file"
    )]
    NotAFile(PathBuf),
    #[error("{0} is an empty file, not an iopath database (a writing command such as `iopath sweep ... --db {0}` makes it one)")]
    EmptyFile(PathBuf),
    #[error("{0} is an empty SQLite database, not an iopath database yet (a writing command with --db makes it one)")]
    Uninitialised(PathBuf),
    #[error(
        "{path} was written by an older iopath (schema {found}, this iopath uses {known}); reading commands do not \
         change it: run any writing command with --db {path} once, or `iopath runs --upgrade --db {path}`"
    )]
    Outdated { path: PathBuf, found: i64, known: i64 },
    #[error("{path} is damaged: {detail}; iopath will not use it")]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "run {id} in {path} is being run by another iopath process right now; wait for it to end (or stop it \
         with Ctrl-C), then resume"
    )]
    RunBusy { id: i64, path: PathBuf },
    #[error("refusing to write {output}: {why}")]
    OutputIsDatabase { output: PathBuf, why: String },
    #[error("{path} is read-only ({why}); a writing command needs a database it can write: copy it to a writable place, or pass --db with another file")]
    ReadOnly { path: PathBuf, why: String },
    #[error("the results database is damaged ({detail}); iopath will not use it")]
    Damaged { detail: String },
    #[error("cannot write {path}: {detail}")]
    CannotWrite { path: PathBuf, detail: String },
    #[error("refusing {path}: {why}")]
    PathRefused { path: PathBuf, why: String },
}

/// An SQLite failure that means the database itself cannot be used as it is — damaged
/// (malformed pages, a truncated file, an I/O error reading it), not SQLite, or read-only —
/// as the `StoreError` that says so; None for anything else (busy, full, a bug).
pub fn unusable(path: Option<&Path>, e: &rusqlite::Error) -> Option<StoreError> {
    let rusqlite::Error::SqliteFailure(f, message) = e else {
        return None;
    };
    let detail = message.clone().unwrap_or_else(|| e.to_string());
    use rusqlite::ErrorCode as C;
    let damaged = |detail: String| match path {
        Some(path) => StoreError::Corrupt {
            path: path.to_path_buf(),
            detail,
        },
        None => StoreError::Damaged { detail },
    };
    match f.code {
        C::DatabaseCorrupt => Some(damaged(format!("the SQLite file is malformed: {detail}"))),
        C::SystemIoFailure => Some(damaged(format!("it cannot be read: {detail}"))),
        C::NotADatabase => Some(match path {
            Some(path) => StoreError::NotSqlite(path.to_path_buf()),
            None => damaged(format!("not an SQLite database: {detail}")),
        }),
        C::ReadOnly => Some(StoreError::ReadOnly {
            path: path
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("the results database")),
            why: detail,
        }),
        _ => None,
    }
}

/// `err` with an unusable-database SQLite failure anywhere in its chain turned into the
/// `StoreError` that says so (exit 2); other errors unchanged.
pub fn classify(err: anyhow::Error) -> anyhow::Error {
    if err.downcast_ref::<StoreError>().is_some() {
        return err;
    }
    let found = err
        .chain()
        .find_map(|cause| cause.downcast_ref::<rusqlite::Error>().and_then(|e| unusable(None, e)));
    match found {
        Some(store_error) => store_error.into(),
        None => err,
    }
}

/// Refuse to write a database on a read-only file system, or a file (or, for a new database or
/// its WAL files, a folder) this user cannot write: "read-only", before SQLite's "unable to
/// open database file" or "attempt to write a readonly database".
fn check_writable(path: &Path, exists: bool) -> anyhow::Result<()> {
    use nix::unistd::{access, AccessFlags};
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    let mut targets = vec![(dir.clone(), "its folder")];
    if exists {
        targets.insert(0, (path.to_path_buf(), "the file"));
    } else if !dir.exists() {
        return Ok(());
    }
    for (target, what) in targets {
        match access(&target, AccessFlags::W_OK) {
            Ok(()) => {}
            Err(nix::errno::Errno::EROFS) => {
                return Err(StoreError::ReadOnly {
                    path: path.to_path_buf(),
                    why: format!("{what} is on a read-only file system"),
                }
                .into())
            }
            Err(nix::errno::Errno::EACCES | nix::errno::Errno::EPERM) => {
                return Err(StoreError::ReadOnly {
                    path: path.to_path_buf(),
                    why: format!("{what} is not writable by this user"),
                }
                .into())
            }
            Err(_) => {}
        }
    }
    Ok(())
}

pub struct Store {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
    /// Descriptors holding iopath's own locks on the database file (a reader's guard, the runs
    /// this process executes). Declared after `conn` so they are closed after it: closing any
    /// descriptor of the file drops the process's POSIX locks, SQLite's included.
    pub(super) locks: Vec<File>,
}

pub(super) const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// The first `n` bytes of a regular file (fewer when it is shorter).
fn read_head(path: &Path, n: usize) -> Result<Vec<u8>, anyhow::Error> {
    let mut file = File::open(path).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
    let mut head = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match file.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
        }
    }
    head.truncate(got);
    Ok(head)
}

/// Whether a regular file begins with SQLite's header magic.
pub fn is_sqlite_file(path: &Path) -> bool {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => read_head(path, SQLITE_MAGIC.len()).is_ok_and(|h| h == SQLITE_MAGIC),
        _ => false,
    }
}

/// What is at the path: refused unless it is a regular file (checked before anything opens
/// it, so a FIFO never blocks and a device is never written). None when nothing is there.
fn regular_file(path: &Path) -> Result<Option<std::fs::Metadata>, anyhow::Error> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(Some(m)),
        Ok(_) => Err(StoreError::NotAFile(path.to_path_buf()).into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => anyhow::bail!("cannot open {}: {e}", path.display()),
    }
}

/// The 100-byte SQLite header of a non-empty regular file, or NotSqlite.
fn check_header(path: &Path) -> Result<Vec<u8>, anyhow::Error> {
    let head = read_head(path, 100)?;
    if head.len() < SQLITE_MAGIC.len() || &head[..SQLITE_MAGIC.len()] != SQLITE_MAGIC {
        return Err(StoreError::NotSqlite(path.to_path_buf()).into());
    }
    Ok(head)
}

/// `<db>-wal`, `<db>-shm`: the files SQLite keeps beside a WAL database while it is in use.
pub(super) fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

pub(super) fn sqlite_error(path: &Path, e: rusqlite::Error) -> anyhow::Error {
    if let Some(store_error) = unusable(Some(path), &e) {
        return store_error.into();
    }
    anyhow::anyhow!("{}: {e}", path.display())
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

/// Why a schema found in a database cannot be used; Ok(true) when it still needs migrations.
fn judge_schema(path: &Path, app: i64, version: i64, tables: i64) -> anyhow::Result<bool> {
    if app != APPLICATION_ID {
        return Err(if app == 0 && tables == 0 {
            StoreError::Uninitialised(path.to_path_buf())
        } else {
            StoreError::Foreign(path.to_path_buf())
        }
        .into());
    }
    if version > current_version() {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version,
            known: current_version(),
        }
        .into());
    }
    Ok(version < current_version())
}

/// Failures of opening as a writer: busy ones are retried, the others are final.
enum OpenError {
    Busy(rusqlite::Error),
    Fatal(anyhow::Error),
}

impl Store {
    /// Open the database for writing, creating it (and its folder) when missing. A 0-byte file
    /// is initialised as a new database (the user named it as the place to write).
    pub fn create_or_open(path: &Path) -> anyhow::Result<Store> {
        super::output::check_path(path, super::output::PathUse::Database, None)?;
        match regular_file(path)? {
            Some(meta) if meta.len() > 0 => {
                check_header(path)?;
                check_writable(path, true)?;
            }
            Some(_) => check_writable(path, true)?,
            None => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| match e.raw_os_error() {
                        Some(libc::EROFS) => StoreError::ReadOnly {
                            path: path.to_path_buf(),
                            why: format!("its folder {} cannot be made on a read-only file system", dir.display()),
                        }
                        .into(),
                        _ => anyhow::anyhow!("cannot create the folder {} for the database: {e}", dir.display()),
                    })?;
                }
                check_writable(path, false)?;
            }
        }
        // Several iopath processes may create or migrate the same database at once: each step
        // waits for the others (busy timeout), and a step SQLite refuses at once because of a
        // lock is tried again from the start until the timeout.
        let deadline = Instant::now() + BUSY_TIMEOUT;
        let mut attempt = 0u64;
        loop {
            match Store::open_writer(path) {
                Ok(store) => return Ok(store),
                Err(OpenError::Busy(e)) if Instant::now() < deadline => {
                    attempt += 1;
                    let jitter = (std::process::id() as u64 * 7 + attempt * 13) % 40;
                    std::thread::sleep(Duration::from_millis(10 + jitter));
                    let _ = e;
                }
                Err(OpenError::Busy(e)) => {
                    anyhow::bail!(
                        "{} stayed locked by other processes for {} s: {e}",
                        path.display(),
                        BUSY_TIMEOUT.as_secs()
                    )
                }
                Err(OpenError::Fatal(e)) => return Err(e),
            }
        }
    }

    fn open_writer(path: &Path) -> Result<Store, OpenError> {
        let fatal = |e: rusqlite::Error| {
            if is_busy(&e) {
                OpenError::Busy(e)
            } else {
                OpenError::Fatal(sqlite_error(path, e))
            }
        };
        let mut conn = Connection::open(path)
            .map_err(|e| OpenError::Fatal(anyhow::anyhow!("cannot open {}: {e}", path.display())))?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(fatal)?;
        // Every transaction of a writer takes the write lock at BEGIN: a deferred one that read
        // first could not be upgraded while another process writes (SQLITE_BUSY at once).
        conn.set_transaction_behavior(TransactionBehavior::Immediate);
        {
            // Check and migrate inside one write transaction: a process creating the schema
            // at the same moment is either wholly before or wholly after this one.
            let tx = conn.transaction().map_err(fatal)?;
            let read = |sql: &str| tx.query_row(sql, [], |r| r.get::<_, i64>(0));
            let app = read("PRAGMA application_id").map_err(fatal)?;
            let version = read("PRAGMA user_version").map_err(fatal)?;
            let tables = read("SELECT count(*) FROM sqlite_master").map_err(fatal)?;
            let migrate = match judge_schema(path, app, version, tables) {
                Ok(migrate) => migrate,
                // An empty SQLite database (or a 0-byte file) becomes iopath's.
                Err(e) if matches!(e.downcast_ref::<StoreError>(), Some(StoreError::Uninitialised(_))) => true,
                Err(e) => return Err(OpenError::Fatal(e)),
            };
            if migrate {
                for sql in MIGRATIONS.iter().skip(version.max(0) as usize) {
                    tx.execute_batch(sql).map_err(fatal)?;
                }
                tx.execute_batch(&format!(
                    "PRAGMA user_version = {}; PRAGMA application_id = {APPLICATION_ID};",
                    current_version()
                ))
                .map_err(fatal)?;
            }
            tx.commit().map_err(fatal)?;
        }
        // WAL: readers never block the sweep writing; synchronous=NORMAL keeps every committed
        // cell across a crash of the process (only a power loss can lose the last commits).
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).map_err(fatal)?;
        if !mode.eq_ignore_ascii_case("wal") {
            let mode: String = conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
                .map_err(fatal)?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(OpenError::Fatal(anyhow::anyhow!(
                    "{}: cannot switch the database to WAL mode (it stays '{mode}')",
                    path.display()
                )));
            }
        }
        conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
            .map_err(fatal)?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            locks: Vec::new(),
        })
    }

    /// Bring an existing database up to date (the one write a reading command makes, when
    /// asked with `iopath runs --upgrade`).
    pub fn upgrade(path: &Path) -> anyhow::Result<Store> {
        if regular_file(path)?.is_none() {
            return Err(StoreError::Missing(path.to_path_buf()).into());
        }
        Store::create_or_open(path)
    }

    /// Open an existing database for reading commands, read-only: a missing, empty or special
    /// file is refused, nothing is migrated or switched, and no file is created. A database
    /// that needs a migration is refused with `StoreError::Outdated`.
    ///
    /// A WAL database that no process has open (no `-shm`, no non-empty `-wal`) is read with
    /// `immutable=1`, which creates no `-wal`/`-shm` and works on read-only media; iopath holds
    /// a read lock on SQLite's shared-lock bytes meanwhile, so a writer that starts and ends
    /// while we read cannot fold its WAL back into the file under us. A database in use is
    /// opened with `mode=ro` and reads through the writers' `-shm` and `-wal`.
    pub fn open_existing(path: &Path) -> anyhow::Result<Store> {
        Store::open_reader(path, false)
    }

    /// [`Store::open_existing`] for an input of `iopath merge`: a database written by an older
    /// iopath is read as it is (never migrated: an input is not changed), each reader of it
    /// using only the columns its schema version has (`schema_version`).
    /// Every page of it is read once first (SQLite's `quick_check`) and its rows checked as a
    /// reader checks them (`Store::check_merge_input`), so a damaged input is named before the
    /// output is created or written.
    pub fn open_merge_input(path: &Path) -> anyhow::Result<Store> {
        let store = Store::open_reader(path, true)?;
        let found: String = store
            .conn
            .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
            .map_err(|e| sqlite_error(path, e))?;
        if found != "ok" {
            return Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                detail: format!(
                    "SQLite's check of every page found: {}",
                    found
                        .lines()
                        .filter(|l| !l.starts_with("***"))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            }
            .into());
        }
        store
            .check_merge_input()
            .map_err(|e| super::merge::damaged_input(e, path))?;
        Ok(store)
    }

    fn open_reader(path: &Path, older_ok: bool) -> anyhow::Result<Store> {
        super::output::check_path(path, super::output::PathUse::Database, None)?;
        let Some(meta) = regular_file(path)? else {
            return Err(StoreError::Missing(path.to_path_buf()).into());
        };
        if meta.len() == 0 {
            return Err(StoreError::EmptyFile(path.to_path_buf()).into());
        }
        let head = check_header(path)?;
        // Bytes 18 and 19 (file format write/read version) are 2 for a WAL database.
        let wal_mode = head.len() >= 20 && head[18] == 2 && head[19] == 2;
        let in_use =
            || sidecar(path, "-shm").exists() || std::fs::metadata(sidecar(path, "-wal")).is_ok_and(|m| m.len() > 0);
        let deadline = Instant::now() + BUSY_TIMEOUT;
        let mut locks = Vec::new();
        let immutable = loop {
            if !wal_mode || in_use() {
                break false;
            }
            // (No SQLite connection to the file is open yet: closing a guard here is harmless.)
            match lock::shared_guard(path)? {
                (guard, true) if !in_use() => {
                    locks.push(guard);
                    break true;
                }
                // A writer appeared between the look and the lock: read through its files.
                (_, true) => break false,
                // A writer is closing (it holds SQLite's exclusive lock to fold its WAL in).
                (_, false) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                (_, false) => anyhow::bail!("{} stayed locked by a closing writer", path.display()),
            }
        };
        let uri = uri_of(path, if immutable { "immutable=1" } else { "mode=ro" })?;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&uri, flags)
            .map_err(|e| anyhow::anyhow!("cannot open {} for reading: {e}", path.display()))?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| sqlite_error(path, e))?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
            locks,
        };
        store.check_readable(older_ok)?;
        Ok(store)
    }

    /// The schema as found, in one read transaction: usable as it is, or why not.
    fn check_readable(&mut self, older_ok: bool) -> anyhow::Result<()> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(|e| sqlite_error(&path, e))?;
        let read = |sql: &str| {
            tx.query_row(sql, [], |r| r.get::<_, i64>(0))
                .map_err(|e| sqlite_error(&path, e))
        };
        let app = read("PRAGMA application_id")?;
        let version = read("PRAGMA user_version")?;
        let tables = read("SELECT count(*) FROM sqlite_master")?;
        if judge_schema(&path, app, version, tables)? && !(older_ok && version >= 1) {
            return Err(StoreError::Outdated {
                path,
                found: version,
                known: current_version(),
            }
            .into());
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Mark run `id` as executed by this process until the store is dropped (an advisory lock
    /// the kernel releases when the process ends, however it ends). Refused with
    /// `StoreError::RunBusy` while another process holds it.
    pub fn lock_run(&mut self, id: i64) -> anyhow::Result<()> {
        let (file, held) = lock::run_lock(&self.path, id)?;
        // Kept even when not held: it must be closed after the connection.
        self.locks.push(file);
        if held {
            Ok(())
        } else {
            Err(StoreError::RunBusy {
                id,
                path: self.path.clone(),
            }
            .into())
        }
    }

    /// The first stored position a run of `cases` cases and `repetitions` repetitions cannot
    /// have — a case position outside 0..cases or repeated, an observation of a repetition
    /// outside 0..repetitions — described, or None when all are possible.
    pub fn impossible_positions(&self, run_id: i64, cases: usize, repetitions: u32) -> anyhow::Result<Option<String>> {
        let positions: Vec<i64> = self
            .conn
            .prepare("SELECT position FROM cases WHERE run_id = ?1 ORDER BY position")?
            .query_map([run_id], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        if let Some((i, p)) = positions.iter().enumerate().find(|(i, p)| **p != *i as i64) {
            return Ok(Some(format!(
                "a case is stored at position {p} where position {i} was expected (cases are numbered 0 to {})",
                cases.saturating_sub(1)
            )));
        }
        let cell: Option<(i64, i64, i64)> = self
            .conn
            .query_row(
                "SELECT o.id, c.position, o.repetition FROM observations o JOIN cases c ON c.id = o.case_id
                 WHERE c.run_id = ?1 AND (o.repetition < 0 OR o.repetition >= ?2 OR c.position < 0 OR c.position >= ?3)
                 LIMIT 1",
                rusqlite::params![run_id, i64::from(repetitions), cases as i64],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })?;
        Ok(cell.map(|(id, position, repetition)| {
            format!(
                "observation {id} is at case {position}, repetition {repetition}; the run has {cases} cases and {repetitions} repetitions"
            )
        }))
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> anyhow::Result<i64> {
        Ok(self.conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }
}

/// An SQLite URI for the file with the given query, the path percent-encoded where it must be.
fn uri_of(path: &Path, query: &str) -> anyhow::Result<String> {
    let absolute = std::path::absolute(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut uri = String::from("file:");
    for &b in absolute.as_os_str().as_encoded_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => uri.push(b as char),
            _ => uri.push_str(&format!("%{b:02X}")),
        }
    }
    uri.push('?');
    uri.push_str(query);
    Ok(uri)
}
