//! What an A/B run (`iopath ab`) keeps besides its cells (migration 5): the variant of each
//! case, the run's settings and pair order, and the journal of the host values it changes.
//!
//! The journal is the promise that a host setting goes back: its original value is written
//! (committed) before the first change, marked restored after the last, and a row left
//! unrestored by a process that no longer exists (SIGKILL, a crash, a power cut) is what
//! [`Store::journal_orphans`] returns to the next iopath that opens the database for writing.

use super::Store;
use crate::net::settings::Setting;
use rusqlite::params;

const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')";

/// A value journaled and never restored by its process, which no longer runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Orphan {
    pub id: i64,
    /// The setting that puts the original value back.
    pub original: Setting,
    /// The network namespace (its inode) the value was read in: it is put back only from there.
    pub netns: u64,
}

/// The inode of the calling thread's network namespace (0 when it cannot be read).
pub fn current_netns() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net").map_or(0, |m| m.ino())
}

/// Which side of an A/B pair a case is: A the system as it was, B with the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Variant {
    A,
    B,
}

impl Variant {
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::A => "A",
            Variant::B => "B",
        }
    }
}

/// An A/B run's own description.
#[derive(Debug, Clone, PartialEq)]
pub struct AbRun {
    /// The settings of variant B, as `--set` spelt them.
    pub settings: Vec<String>,
    /// `abba` or `random` (seeded by the run's seed).
    pub pair_order: String,
    /// `host` (--host-settings) or `topology` (iopath's own namespaces).
    pub scope: String,
    /// The variant of each case, by position.
    pub variants: Vec<Variant>,
}

impl Store {
    /// Mark run `run_id` an A/B run: cases at positions from `first_b` on are variant B.
    pub fn mark_ab_run(
        &mut self,
        run_id: i64,
        settings: &[String],
        pair_order: &str,
        scope: &str,
        first_b: usize,
    ) -> anyhow::Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO ab_runs (run_id, settings_json, pair_order, scope) VALUES (?1, ?2, ?3, ?4)",
            params![run_id, serde_json::to_string(settings)?, pair_order, scope],
        )?;
        tx.execute(
            "INSERT INTO case_variants (case_id, variant)
             SELECT id, CASE WHEN position >= ?2 THEN 'B' ELSE 'A' END FROM cases WHERE run_id = ?1",
            params![run_id, first_b as i64],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// The A/B description of run `run_id`; None for any other run.
    pub fn ab_run(&self, run_id: i64) -> anyhow::Result<Option<AbRun>> {
        let row = self.conn.query_row(
            "SELECT settings_json, pair_order, scope FROM ab_runs WHERE run_id = ?1",
            [run_id],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)),
        );
        let (settings, pair_order, scope) = match row {
            Ok(row) => row,
            Err(rusqlite::Error::QueryReturnedNoRows) => return Ok(None),
            // A database of an older schema read as it is (a merge input) has no A/B runs.
            Err(rusqlite::Error::SqliteFailure(_, Some(m))) if m.starts_with("no such table") => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let settings: Vec<String> = serde_json::from_str(&settings)
            .map_err(|e| self.corrupt(format!("the settings of A/B run {run_id} do not parse ({e})")))?;
        let mut stmt = self.conn.prepare(
            "SELECT v.variant FROM cases c LEFT JOIN case_variants v ON v.case_id = c.id
             WHERE c.run_id = ?1 ORDER BY c.position",
        )?;
        let variants = stmt
            .query_map([run_id], |r| r.get::<_, Option<String>>(0))?
            .map(|v| match v?.as_deref() {
                Some("A") => Ok(Variant::A),
                Some("B") => Ok(Variant::B),
                _ => Err(self.corrupt(format!("a case of A/B run {run_id} has no variant"))),
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Some(AbRun {
            settings,
            pair_order,
            scope,
            variants,
        }))
    }

    /// Journal the original values this process is about to change (committed before it
    /// changes anything); the rows' ids, for [`Store::journal_restored`].
    pub fn journal_originals(&mut self, run_id: Option<i64>, originals: &[Setting]) -> anyhow::Result<Vec<i64>> {
        let pid = std::process::id();
        let start = crate::sys::procfs::process_start_ticks(pid).unwrap_or(0);
        let tx = self.conn.transaction()?;
        let mut ids = Vec::new();
        for original in originals {
            tx.execute(
                &format!(
                    "INSERT INTO setting_journal (owner_pid, owner_start, netns, run_id, original, recorded_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, {NOW})"
                ),
                params![
                    pid,
                    start as i64,
                    current_netns() as i64,
                    run_id,
                    serde_json::to_string(original)?
                ],
            )?;
            ids.push(tx.last_insert_rowid());
        }
        tx.commit()?;
        Ok(ids)
    }

    /// The journal rows `ids` are back to their original values.
    pub fn journal_restored(&mut self, ids: &[i64]) -> anyhow::Result<()> {
        let tx = self.conn.transaction()?;
        for id in ids {
            tx.execute(
                &format!("UPDATE setting_journal SET restored_at = {NOW} WHERE id = ?1"),
                [id],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Original values never restored by a process that no longer runs, newest first: put
    /// back in this order, the value journaled first is the one that stays.
    pub fn journal_orphans(&self) -> anyhow::Result<Vec<Orphan>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, owner_pid, owner_start, original, netns FROM setting_journal WHERE restored_at IS NULL ORDER BY id DESC",
        )?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let mut orphans = Vec::new();
        for (id, pid, start, original, netns) in rows {
            let alive = u32::try_from(pid)
                .ok()
                .and_then(crate::sys::procfs::process_start_ticks)
                .is_some_and(|s| s as i64 == start);
            if alive {
                continue;
            }
            let setting: Setting = serde_json::from_str(&original)
                .map_err(|e| self.corrupt(format!("journal row {id} does not parse ({e})")))?;
            orphans.push(Orphan {
                id,
                original: setting,
                netns: netns as u64,
            });
        }
        Ok(orphans)
    }
}

/// The schema version that has A/B runs (migration 5).
const AB_VERSION: i64 = 5;

/// `iopath merge`: copy run `run`'s A/B description (its `ab_runs` row and its cases'
/// variants, `case_ids` mapping the input's case ids to the output's) into the run `new_run`
/// being written by `out`; nothing for an input older than migration 5 or a run that is not
/// an A/B run. The journal is the input machine's own and is not copied.
pub(super) fn copy_run(
    input: &Store,
    out: &rusqlite::Connection,
    run: i64,
    new_run: i64,
    case_ids: &std::collections::HashMap<i64, i64>,
) -> anyhow::Result<()> {
    if input.schema_version()? < AB_VERSION {
        return Ok(());
    }
    let mut read = input
        .conn
        .prepare("SELECT settings_json, pair_order, scope FROM ab_runs WHERE run_id = ?1")?;
    let mut rows = read.query([run])?;
    let Some(row) = rows.next()? else {
        return Ok(());
    };
    out.execute(
        "INSERT INTO ab_runs (run_id, settings_json, pair_order, scope) VALUES (?1, ?2, ?3, ?4)",
        params![
            new_run,
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?
        ],
    )?;
    let mut read = input.conn.prepare(
        "SELECT v.case_id, v.variant FROM case_variants v JOIN cases c ON c.id = v.case_id WHERE c.run_id = ?1",
    )?;
    let mut rows = read.query([run])?;
    while let Some(r) = rows.next()? {
        let case_id = case_ids[&r.get::<_, i64>(0)?];
        out.execute(
            "INSERT INTO case_variants (case_id, variant) VALUES (?1, ?2)",
            params![case_id, r.get::<_, String>(1)?],
        )?;
    }
    Ok(())
}

/// Mark journal rows restored in the database at `path` (for a forced exit, which has no
/// store at hand); errors are dropped: the next start finds the rows and puts them back again.
pub fn mark_restored_at(path: &std::path::Path, ids: &[i64]) {
    if let Ok(mut store) = Store::create_or_open(path) {
        let _ = store.journal_restored(ids);
    }
}
