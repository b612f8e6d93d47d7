//! Opening the results database: refuse files that are not SQLite or not iopath's, switch on WAL
//! and foreign keys, and bring the schema up to date inside a transaction.

use super::schema::{current_version, APPLICATION_ID, MIGRATIONS};
use rusqlite::{Connection, OpenFlags};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Where sweeps write unless `--db` says otherwise.
pub const DEFAULT_DB_PATH: &str = "iopath-results/iopath.db";

/// Errors a caller branches on: all of them are the user pointing at the wrong thing.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no results database at {0} (run `iopath quick` or `iopath sweep` first, or pass --db PATH)")]
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
}

pub struct Store {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
}

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Check the first bytes before SQLite touches the file, so a wrong path is never written to.
fn check_header(path: &Path) -> Result<(), anyhow::Error> {
    let mut file = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
    let mut head = [0u8; 16];
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
        }
    }
    if got == 0 {
        return Ok(()); // an empty file is an empty database
    }
    if got < head.len() || &head != SQLITE_MAGIC {
        return Err(StoreError::NotSqlite(path.to_path_buf()).into());
    }
    Ok(())
}

impl Store {
    /// Open the database for writing, creating it (and its folder) when missing.
    pub fn create_or_open(path: &Path) -> anyhow::Result<Store> {
        if path.exists() {
            check_header(path)?;
        } else if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("cannot create the folder {} for the database: {e}", dir.display()))?;
        }
        let conn = Connection::open(path).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        Store::prepare(conn, path)
    }

    /// Open an existing database (for reading commands); a missing file is an error, not a new
    /// database.
    pub fn open_existing(path: &Path) -> anyhow::Result<Store> {
        if !path.is_file() {
            return Err(StoreError::Missing(path.to_path_buf()).into());
        }
        check_header(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        Store::prepare(conn, path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn prepare(mut conn: Connection, path: &Path) -> anyhow::Result<Store> {
        let not_sqlite = |e: rusqlite::Error| -> anyhow::Error {
            if let rusqlite::Error::SqliteFailure(f, _) = &e {
                if f.code == rusqlite::ErrorCode::NotADatabase {
                    return StoreError::NotSqlite(path.to_path_buf()).into();
                }
            }
            anyhow::anyhow!("{}: {e}", path.display())
        };
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(not_sqlite)?;
        let app: i64 = conn
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(not_sqlite)?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(not_sqlite)?;
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(not_sqlite)?;
        if app != APPLICATION_ID && !(app == 0 && tables == 0) {
            return Err(StoreError::Foreign(path.to_path_buf()).into());
        }
        if version > current_version() {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found: version,
                known: current_version(),
            }
            .into());
        }
        // WAL: readers never block the sweep writing; synchronous=NORMAL keeps every committed
        // cell across a crash of the process (only a power loss can lose the last commits).
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .map_err(not_sqlite)?;
        conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
            .map_err(not_sqlite)?;
        for (index, sql) in MIGRATIONS.iter().enumerate().skip(version.max(0) as usize) {
            let tx = conn.transaction()?;
            tx.execute_batch(sql)?;
            tx.execute_batch(&format!(
                "PRAGMA user_version = {}; PRAGMA application_id = {APPLICATION_ID};",
                index + 1
            ))?;
            tx.commit()?;
        }
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> anyhow::Result<i64> {
        Ok(self.conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }
}
