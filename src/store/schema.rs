//! The database schema as numbered migrations. `PRAGMA user_version` holds how many have been
//! applied; `PRAGMA application_id` marks the file as iopath's. A migration is only ever
//! appended, never edited, once released.

/// "iopa" in ASCII: marks an iopath results database.
pub const APPLICATION_ID: i64 = 0x696f_7061;

/// The condition of the partial index `metrics_of_fleet_matrix` (migration 4): the metric names
/// `report --matrix` draws (`report::matrix::METRICS`, a test keeps the two together). A query
/// that wants the index repeats this text word for word: SQLite uses a partial index only for a
/// query whose WHERE holds the index's own condition.
macro_rules! fleet_matrix_names {
    () => {
        "name IN ('throughput_gbps', 'transactions_per_s', 'latency_p99_us', 'cycles_per_byte', 'cpu_us_per_txn')"
    };
}

/// [`fleet_matrix_names!`] as a value, for the queries that use the index.
pub const FLEET_MATRIX_NAMES: &str = fleet_matrix_names!();

/// Migration N (1-based) brings the schema from version N-1 to N.
pub const MIGRATIONS: &[&str] = &[
    // 1: runs, their cases, one observation per (case, repetition) and its metrics.
    "CREATE TABLE runs (
        id               INTEGER PRIMARY KEY,
        name             TEXT,
        command_line     TEXT NOT NULL,
        tool_version     TEXT NOT NULL,
        started_at       TEXT NOT NULL,
        ended_at         TEXT,
        status           TEXT NOT NULL,
        repetitions      INTEGER NOT NULL,
        shuffle          INTEGER NOT NULL,
        seed             INTEGER NOT NULL,
        warmup_cell      INTEGER NOT NULL,
        machine_json     TEXT NOT NULL,
        environment_json TEXT NOT NULL
    );
    CREATE TABLE cases (
        id        INTEGER PRIMARY KEY,
        run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        position  INTEGER NOT NULL,
        workload  TEXT NOT NULL,
        label     TEXT NOT NULL,
        case_key  TEXT NOT NULL,
        case_json TEXT NOT NULL,
        UNIQUE (run_id, position)
    );
    CREATE TABLE observations (
        id             INTEGER PRIMARY KEY,
        case_id        INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
        repetition     INTEGER NOT NULL,
        status         TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
        error          TEXT,
        finished_at    TEXT NOT NULL,
        elapsed_s      REAL NOT NULL,
        warnings_json  TEXT NOT NULL,
        placement_json TEXT NOT NULL,
        UNIQUE (case_id, repetition)
    );
    CREATE TABLE metrics (
        observation_id INTEGER NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
        role           TEXT NOT NULL,
        name           TEXT NOT NULL,
        value          REAL,
        unit           TEXT NOT NULL,
        source         TEXT NOT NULL
    );
    CREATE INDEX metrics_by_observation ON metrics (observation_id);",
    // 2: provenance of a run copied by `iopath merge` (store/merge.rs): the file and run it came
    // from, its host, and its identity (unique: the same run is never merged twice). NULL for
    // a run measured into this database.
    "ALTER TABLE runs ADD COLUMN source_file TEXT;
    ALTER TABLE runs ADD COLUMN source_run_id INTEGER;
    ALTER TABLE runs ADD COLUMN source_host TEXT;
    ALTER TABLE runs ADD COLUMN source_identity TEXT;
    ALTER TABLE runs ADD COLUMN merged_at TEXT;
    CREATE UNIQUE INDEX runs_by_source_identity ON runs (source_identity) WHERE source_identity IS NOT NULL;",
    // 3: the machines at both ends of a fleet cell (store/machines.rs): each distinct machine
    // description once (its SHA-256 unique), and per observation and end the machine it had.
    // Deleting an observation (a failed cell replaced) deletes its links. `IF NOT EXISTS`: a
    // database taken back to an older version by hand (tests/merge.rs) keeps its tables.
    "CREATE TABLE IF NOT EXISTS machines (
        id           INTEGER PRIMARY KEY,
        digest       TEXT NOT NULL UNIQUE,
        machine_json TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS observation_machines (
        observation_id INTEGER NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
        pair_end       TEXT NOT NULL CHECK (pair_end IN ('source', 'destination')),
        machine_id     INTEGER NOT NULL REFERENCES machines(id),
        PRIMARY KEY (observation_id, pair_end)
    ) WITHOUT ROWID;",
    // 4: the few metric rows a fleet matrix draws, by name and observation, with their values:
    // `report --matrix` reads a 10^6-cell run's 3 million such rows from this index instead of
    // scanning its 72 million metric rows (docs/benchmarks.md, "Fleet matrix at scale"). Its
    // condition names only those metrics, so it costs the other cells little. The successful
    // observations of a run's cases come from the index of observations by
    // case and status, without reading an observation's row.
    concat!(
        "CREATE INDEX IF NOT EXISTS metrics_of_fleet_matrix ON metrics (name, observation_id, role, value, source) WHERE ",
        fleet_matrix_names!(),
        ";
        CREATE INDEX IF NOT EXISTS observations_by_case_status ON observations (case_id, status);"
    ),
    // 5: A/B runs (`iopath ab`, store/ab.rs): each case's variant (no row outside an A/B run), the
    // run's settings and order; and the journal of the host values an A/B run changes, written
    // before the first change and marked restored after the last, so that a run killed in
    // between is put right by the next iopath that opens the database.
    // `IF NOT EXISTS` throughout, as in 3 (and no ALTER TABLE, which cannot be repeated).
    "CREATE TABLE IF NOT EXISTS case_variants (
        case_id INTEGER PRIMARY KEY REFERENCES cases(id) ON DELETE CASCADE,
        variant TEXT NOT NULL CHECK (variant IN ('A', 'B'))
    );
    CREATE TABLE IF NOT EXISTS ab_runs (
        run_id        INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
        settings_json TEXT NOT NULL,
        pair_order    TEXT NOT NULL,
        scope         TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS setting_journal (
        id           INTEGER PRIMARY KEY,
        owner_pid    INTEGER NOT NULL,
        owner_start  INTEGER NOT NULL,
        netns        INTEGER NOT NULL,
        run_id       INTEGER,
        original     TEXT NOT NULL,
        recorded_at  TEXT NOT NULL,
        restored_at  TEXT
    );",
];

/// The schema version this build writes.
pub fn current_version() -> i64 {
    MIGRATIONS.len() as i64
}
