//! A run's status as the `runs.status` column stores it.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use std::fmt;

/// Where a run stands. Stored as its text (`running`, `complete`, `interrupted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// Cells are being measured, or the process was killed while they were (a resume finishes it).
    Running,
    /// Every planned cell was attempted.
    Complete,
    /// Stopped early by Ctrl-C or a signal; a resume runs the missing cells.
    Interrupted,
}

impl RunStatus {
    pub const ALL: [RunStatus; 3] = [RunStatus::Running, RunStatus::Complete, RunStatus::Interrupted];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
        }
    }

    /// Whether the run has ended (it has an end time).
    pub fn is_finished(self) -> bool {
        self != RunStatus::Running
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored status this iopath does not know (a newer version wrote it, or the file was edited).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown run status '{0}' in the database (known: running, complete, interrupted)")]
pub struct UnknownStatus(pub String);

impl std::str::FromStr for RunStatus {
    type Err = UnknownStatus;
    fn from_str(s: &str) -> Result<Self, UnknownStatus> {
        RunStatus::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_string()))
    }
}

impl ToSql for RunStatus {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for RunStatus {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        value
            .as_str()?
            .parse()
            .map_err(|e: UnknownStatus| FromSqlError::Other(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_as_text() {
        for s in RunStatus::ALL {
            assert_eq!(s.as_str().parse::<RunStatus>(), Ok(s));
        }
        assert!("paused"
            .parse::<RunStatus>()
            .unwrap_err()
            .to_string()
            .contains("paused"));
    }
}
