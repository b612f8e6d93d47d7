//! The one way every measuring command runs: a validated [`Plan`] goes to the one runner,
//! whose cells go to the sinks — the results database (always), the
//! progress on stderr or the live view, the NDJSON stream, and the printout that prints the
//! records (or the stored run's summary) when the run ends. [`run_workload`] is that path for
//! every command; stop, failure and resume behave the same for `net stream`, `net rr`,
//! `net records`, `servers`, `micro`, `fake`, `quick`, `run --plan|--resume`.

use super::error::usage;
use super::output::View;
use super::progress::ProgressSink;
use super::stored::{command_line, open_for_writing, store_error};
use crate::case::Case;
use crate::net::auth::Credentials;
use crate::observation::Observation;
use crate::store::export::{CsvExporter, Exporter, JsonExporter};
use crate::store::{NewRun, Record, RunStatus, Store, StoreError, StoreSink};
use crate::sweep::{run_plan, Cell, CellOutcome, Plan, RunEnd, Sink};
use clap::Args;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The flags every measuring command shares, with the same names, defaults and limits in
/// every command, plan file and `ab`.
#[derive(Args, Debug, Clone, Default)]
pub struct RunFlags {
    /// Repetitions of every case, each one a cell of its own (1 to 1000). With 2 or more the
    /// table shows their median; the 95% interval of the median needs 6 or more, and a
    /// comparison of two cases (crossover, winner) is tested from 4 a side, "not tested" below.
    /// quick and the launcher run 6.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub reps: u32,
    /// Run the cells in a random order (fixed by --seed) so drift does not line up with the grid.
    #[arg(long)]
    pub shuffle: bool,
    /// Seed for --shuffle (default: from the clock; stored with the run).
    #[arg(long, requires = "shuffle")]
    pub seed: Option<u64>,
    /// Run the first case once before the first cell and discard it (warms caches, page
    /// tables, CPU frequency and the allocator).
    #[arg(long)]
    pub warmup_cell: bool,
    /// A name for the run, shown by `iopath runs` and in the report (at most 200 characters).
    #[arg(long, value_parser = super::values::parse_name)]
    pub name: Option<String>,
    /// The results database every cell is stored in as it finishes, for `iopath report`,
    /// `export`, `compare` and `run --resume` [default: $IOPATH_DB, else
    /// iopath-results/iopath.db].
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Print JSON records (docs/output.md) instead of the table; failed cells carry their error.
    #[arg(long)]
    pub json: bool,
    /// Print CSV, one row per case and repetition, with a value and a source column per metric.
    #[arg(long)]
    pub csv: bool,
    /// Print one NDJSON record per cell the moment it finishes, flushed line by line (like
    /// iperf3 --json-stream), instead of the table at the end (docs/output.md).
    #[arg(long)]
    pub json_stream: bool,
    /// Print every column of the table and the source of each; without it the table keeps
    /// the columns that fit 100 characters and names the ones it left out.
    #[arg(long)]
    pub wide: bool,
    /// Show the run in a live terminal view (progress, results so far, warnings; q stops it
    /// like Ctrl-C). Needs a terminal: refused (exit 2) on a pipe.
    #[arg(long)]
    pub live: bool,
}

impl RunFlags {
    /// The database the run is stored in: `--db`, else the default one.
    pub fn db_path(&self) -> PathBuf {
        self.db.clone().unwrap_or_else(crate::store::default_db_path)
    }

    /// The plan's run settings from these flags.
    pub fn plan(&self, cases: Vec<Case>, interface: &str) -> Plan {
        Plan {
            cases,
            repetitions: self.reps,
            shuffle: self.shuffle,
            seed: self.seed.unwrap_or_else(clock_seed),
            warmup_cell: self.warmup_cell,
            name: self.name.clone(),
            interface: interface.to_string(),
            credentials: Credentials::default(),
        }
    }
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// What prints a stored run's own summary (quick's headline tables and report): called once,
/// when the run has ended.
pub type PrintStored = Box<dyn FnOnce(&StoredRun) -> anyhow::Result<()>>;

/// A run as the store closed it, for the summary printed at its end.
pub struct StoredRun<'a> {
    pub db: &'a Path,
    pub run_id: i64,
    pub end: &'a RunEnd,
    pub view: View,
    /// Its network clients proved a key (a resume needs it given again).
    pub keyed: bool,
}

/// What prints on stdout once the run has ended.
pub enum Print {
    /// `--json`: the records as JSON (docs/output.md).
    Json,
    /// `--csv`: the records as CSV.
    Csv,
    /// The stored run's summary (`summary::print`): each workload's own table with the failed
    /// cells listed after it, and for a run of several cases the crossovers and findings.
    Summary,
    /// Another summary of the stored run (quick's).
    Stored(PrintStored),
    /// Nothing: `--json-stream` printed every cell as it finished.
    Nothing,
}

/// The end-of-run printer as a sink: it keeps every finished cell as an export record (failed
/// ones with their error) and prints them as [`Print`] says when the run ends — after the
/// store has closed the run and the progress or the live view has given the terminal back
/// (it is the last sink). A run that ended on a sink's error prints nothing: that error is
/// what the command says. A closed stdout (a pipe to `head`) ends the printing quietly.
pub struct Printout {
    print: Option<Print>,
    view: View,
    run_id: i64,
    db: PathBuf,
    keyed: bool,
    /// Every finished cell, in the order they finished.
    pub records: Vec<Record>,
}

impl Printout {
    pub fn new(print: Print, view: View, run_id: i64, db: PathBuf, keyed: bool) -> Printout {
        Printout {
            print: Some(print),
            view,
            run_id,
            db,
            keyed,
            records: Vec::new(),
        }
    }
}

impl Sink for Printout {
    fn cell_finished(&mut self, case: &Case, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()> {
        let (observation, error) = match &outcome.result {
            Ok(obs) => (obs.clone(), None),
            Err(e) => (Default::default(), Some(e.clone())),
        };
        self.records.push(Record {
            run_id: Some(self.run_id),
            label: case.label(),
            case: case.clone(),
            repetition: cell.repetition,
            observation,
            error,
        });
        Ok(())
    }

    fn finish(&mut self, end: &RunEnd) -> anyhow::Result<()> {
        let Some(print) = self.print.take() else {
            return Ok(());
        };
        if end.error.is_some() {
            return Ok(());
        }
        let text = match print {
            Print::Json => String::from_utf8_lossy(&JsonExporter.serialize(&self.records)?).into_owned(),
            Print::Csv => String::from_utf8_lossy(&CsvExporter.serialize(&self.records)?).into_owned(),
            Print::Nothing => return Ok(()),
            Print::Summary | Print::Stored(_) => {
                let stored = StoredRun {
                    db: &self.db,
                    run_id: self.run_id,
                    end,
                    view: self.view,
                    keyed: self.keyed,
                };
                return match print {
                    Print::Stored(print) => print(&stored),
                    _ => super::summary::print(&stored),
                };
            }
        };
        super::output::out(text)
    }
}

/// The table of the successful records, then a line per failed cell, repetitions numbered as
/// the store numbers them (from 0).
pub(super) fn records_table(records: &[Record], view: View, table: fn(&[Record], View) -> String) -> String {
    let ok: Vec<Record> = records.iter().filter(|r| r.error.is_none()).cloned().collect();
    let mut text = if ok.is_empty() { String::new() } else { table(&ok, view) };
    for r in records.iter().filter(|r| r.error.is_some()) {
        text.push_str(&format!(
            "failed: {} rep {}: {}\n",
            super::output::safe(&r.label),
            r.repetition,
            super::output::safe(r.error.as_deref().unwrap_or_default())
        ));
    }
    text
}

/// `--json-stream`: each cell as one NDJSON line on `out` the moment it finishes, flushed (docs/
/// output.md, `tidy::cell_record`). A closed pipe (`| head -1`) ends the writing quietly; the
/// run goes on and is still stored.
pub struct NdjsonSink<W: Write> {
    pub out: W,
    pub run_id: Option<i64>,
    closed: bool,
}

impl<W: Write> NdjsonSink<W> {
    pub fn new(out: W, run_id: Option<i64>) -> Self {
        NdjsonSink {
            out,
            run_id,
            closed: false,
        }
    }
}

impl<W: Write> Sink for NdjsonSink<W> {
    fn cell_finished(&mut self, case: &Case, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()> {
        if self.closed {
            return Ok(());
        }
        let empty = crate::observation::Observation::default();
        let (observation, error) = match &outcome.result {
            Ok(obs) => (obs, None),
            Err(e) => (&empty, Some(e.as_str())),
        };
        let record = crate::store::tidy::cell_record(
            self.run_id,
            case,
            cell.repetition,
            observation,
            error,
            outcome.elapsed_s,
        );
        let mut line = serde_json::to_vec(&record)?;
        line.push(b'\n');
        match self.out.write_all(&line).and_then(|()| self.out.flush()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            Err(e) => Err(anyhow::anyhow!("cannot write the NDJSON stream: {e}")),
        }
    }
}

/// What a run gave: its records (in the order they finished) and how it ended.
pub struct Executed {
    pub run_id: i64,
    pub db: PathBuf,
    pub records: Vec<Record>,
    pub end: RunEnd,
    /// The run's network clients proved a key.
    pub keyed: bool,
}

/// Where a run goes: a new run in a database, or the missing cells of a stored run.
pub enum Destination<'a> {
    NewRun(&'a Path),
    Resume(&'a Path, i64),
}

/// How every measuring command runs (each `net` workload, `servers`, `micro <bench>`, `fleet
/// run`, a plan file): the run stored in the database of its flags as its cells finish, and
/// at its end its own table — with the crossovers and findings when it has several cases —
/// or the records as `--json`/`--csv` ask. `live`: the live view asked for besides the flags.
pub fn measure(plan: &Plan, flags: &RunFlags, live: bool) -> anyhow::Result<()> {
    let outputs = Outputs {
        detectable: plan.cases.len() > 1,
        ..Outputs::of(flags, live)?
    };
    run_workload(plan, Destination::NewRun(&flags.db_path()), outputs)
}

/// What a run shows and prints besides the database: the sinks `execute` adds, what prints
/// when the run ends, and what fails the command afterwards.
pub struct Outputs {
    /// `--json-stream`: one NDJSON line per cell on stdout as it finishes.
    pub json_stream: bool,
    /// `--live`: the live terminal view (needs a terminal) instead of the progress lines.
    pub live: bool,
    /// Say on stderr once the run is open, before its first cell, what the plan can detect
    /// against a run like it (sweep and quick).
    pub detectable: bool,
    /// What prints on stdout when the run has ended.
    pub print: Print,
    /// `--wide`: the view of the table.
    pub view: View,
    /// The cells to run in their order (`sweep::ab_cells` for `iopath ab`); None: `Plan::cells`.
    pub order: Option<CellOrder>,
    /// A sink that comes before every other (`iopath ab`'s settings: set before a cell starts,
    /// put back in `finish` before the store closes the run).
    pub first: Option<Box<dyn Sink>>,
}

impl Default for Outputs {
    fn default() -> Outputs {
        Outputs {
            json_stream: false,
            live: false,
            detectable: false,
            print: Print::Nothing,
            view: View::default(),
            order: None,
            first: None,
        }
    }
}

/// The cells of a plan still to run (those not `done`), in the order they run.
pub type CellOrder = fn(&Plan, &HashSet<Cell>) -> Vec<Cell>;

/// What fails a command once its records are printed: `count` of an observation above zero
/// means `what` ("messages", "records") arrived corrupted.
#[derive(Clone, Copy)]
pub struct Corrupt {
    pub what: &'static str,
    pub count: fn(&Observation) -> f64,
}

impl Outputs {
    /// The outputs `flags` ask for (`live`: also asked for by `run --live`), with the stored
    /// run's summary printed at the end when no record format is asked; refused by
    /// [`check_outputs`].
    pub fn of(flags: &RunFlags, live: bool) -> anyhow::Result<Outputs> {
        let live = live || flags.live;
        check_outputs(flags, live)?;
        let print = if flags.json {
            Print::Json
        } else if flags.csv {
            Print::Csv
        } else if flags.json_stream {
            Print::Nothing
        } else {
            Print::Summary
        };
        Ok(Outputs {
            json_stream: flags.json_stream,
            live,
            detectable: false,
            print,
            view: View { wide: flags.wide },
            order: None,
            first: None,
        })
    }
}

/// The one rule of which output flags combine (docs/output.md). Each output is a sink, so any
/// combination that does not write standard output twice works: `--live` draws while the run
/// goes and closes before the records print, so it takes `--json`, `--csv` and `--wide`; the
/// database (`--db`) takes everything. Refused, in one line (exit 2): two of `--json`, `--csv`
/// and `--json-stream` (each prints the records on stdout), `--live` with `--json-stream` (both
/// write stdout while the run goes), and `--wide` with any of the three (it shapes the table,
/// which they replace).
pub fn check_outputs(flags: &RunFlags, live: bool) -> anyhow::Result<()> {
    let records: Vec<&str> = [
        ("--json", flags.json),
        ("--csv", flags.csv),
        ("--json-stream", flags.json_stream),
    ]
    .into_iter()
    .filter_map(|(flag, on)| on.then_some(flag))
    .collect();
    if let [first, second, ..] = records[..] {
        return Err(usage(format!(
            "{first} and {second} both print the records on standard output: choose one (the run is stored for `iopath report --format`)"
        )));
    }
    if live && flags.json_stream {
        return Err(usage(
            "--live and --json-stream both write standard output while the run goes: choose one (--live takes --json or --csv, printed after the view closes)",
        ));
    }
    if let (true, Some(format)) = (flags.wide, records.first()) {
        return Err(usage(format!(
            "--wide widens the table, and {format} prints the records instead of a table: drop --wide"
        )));
    }
    Ok(())
}

/// The one way a command runs: `plan` through [`execute`] to `destination`, with the sinks
/// `outputs` asks for (the records or the stored run's summary print when the run ends), then
/// the corrupted-data check of each record's workload and [`conclude`]. Every measuring
/// command ends here: through [`measure`], or (quick, `run --plan|--resume`, `fleet run
/// --resume`) with a new or resumed run of its own.
pub fn run_workload(plan: &Plan, destination: Destination<'_>, outputs: Outputs) -> anyhow::Result<()> {
    let executed = execute(plan, destination, outputs)?;
    fail_on_corrupt(&executed)?;
    conclude(&executed)
}

/// Run `plan` through the runner into the sinks `outputs` asks for and, when asked, the
/// database; the records print when the run ends. Prints the closing lines (how to resume) on
/// stderr afterwards.
pub fn execute(plan: &Plan, destination: Destination<'_>, outputs: Outputs) -> anyhow::Result<Executed> {
    check_plan(plan)?;
    if outputs.live {
        super::live::check_terminal()?;
    }
    let stop = crate::sys::signal::install_stop_handler();
    let (mut store, run_id, done) = open_destination(plan, destination)?;
    super::ab::restore_orphans(&mut store)?;
    let cells = outputs
        .order
        .map_or_else(|| plan.cells(&done), |order| order(plan, &done));
    if !done.is_empty() {
        crate::tell!(
            "run {run_id}: {} cells already stored, {} to run",
            done.len(),
            cells.len()
        );
    }
    if outputs.detectable {
        let line = crate::report::compare::plan_detectable_line(plan.repetitions as usize, plan.cases.len());
        crate::tell_part!("{}", super::output::wrap(&line, 4));
    }
    // A second signal exits at once: it must not leave the run `running`.
    let db = store.path().to_path_buf();
    let _forced_exit_guard = {
        let path = db.clone();
        crate::sys::signal::on_forced_exit(move || crate::store::mark_interrupted_if_running(&path, run_id))
    };
    // A records table lists each failed cell with its error: the progress only counts them.
    let table_lists_failures = matches!(outputs.print, Print::Summary);
    let keyed = plan.credentials.key().is_some();
    let mut printout = Printout::new(outputs.print, outputs.view, run_id, db.clone(), keyed);
    let end = {
        let mut store_sink = StoreSink {
            store: &mut store,
            run_id,
        };
        let mut progress = (!outputs.live).then(|| match table_lists_failures {
            true => ProgressSink::listing_failures_at_end(),
            false => ProgressSink::default(),
        });
        let mut live = outputs.live.then(|| super::live::LiveSink::new(stop));
        let mut stream = outputs
            .json_stream
            .then(|| NdjsonSink::new(std::io::stdout(), Some(run_id)));
        // `finish` runs in this order: the store closes the run (complete or interrupted, even
        // after a sink's error) before anything prints, and the progress bar is cleared or the
        // live view closed before the printout writes stdout.
        let mut sinks: Vec<&mut dyn Sink> = Vec::new();
        let mut first = outputs.first;
        if let Some(s) = first.as_mut() {
            sinks.push(s.as_mut());
        }
        sinks.push(&mut store_sink);
        if let Some(s) = progress.as_mut() {
            sinks.push(s);
        }
        if let Some(s) = live.as_mut() {
            sinks.push(s);
        }
        if let Some(s) = stream.as_mut() {
            sinks.push(s);
        }
        sinks.push(&mut printout);
        run_plan(
            plan,
            &cells,
            &mut crate::sweep::executor(plan, &cells),
            &mut sinks,
            stop,
        )
    };
    let end = end?;
    if end.interrupted {
        tell_stopped(&end, &db, run_id, keyed);
    }
    Ok(Executed {
        run_id,
        db,
        records: printout.records,
        end,
        keyed,
    })
}

/// The database a run writes and the run in it (a new one, or the one resumed, locked and
/// running again with the cells it already has).
fn open_destination(plan: &Plan, destination: Destination<'_>) -> anyhow::Result<(Store, i64, HashSet<Cell>)> {
    Ok(match destination {
        Destination::NewRun(path) => {
            let mut store = open_for_writing(path)?;
            let id = store
                .create_run(&NewRun::of_plan(plan, command_line()))
                .map_err(store_error)?;
            // Held until the run is closed: `run --resume` refuses a run this process executes.
            store.lock_run(id).map_err(store_error)?;
            (store, id, HashSet::new())
        }
        Destination::Resume(path, id) => {
            let mut store = open_for_writing(path)?;
            store.lock_run(id).map_err(store_error)?;
            let done = store.done_cells(id)?;
            store.set_run_status(id, RunStatus::Running)?;
            (store, id, done)
        }
    })
}

/// After a stop: how many cells finished, and how to resume.
fn tell_stopped(end: &RunEnd, db: &Path, run_id: i64, keyed: bool) {
    let cut = end
        .cut_short
        .as_ref()
        .map(|l| format!("; the cell cut short ({l}) was discarded"))
        .unwrap_or_default();
    // Not eprintln!: after SIGHUP the terminal may be gone, and a failed write must not
    // turn a clean stop into a panic.
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "stopped: {} cells finished{cut}", end.recorded);
    let _ = writeln!(
        err,
        "everything finished is stored. Continue with: {}",
        resume_command(run_id, db, keyed)
    );
}

/// Fail the command, once its records are printed, at the first record whose workload's
/// `corrupt` check finds data that arrived corrupted.
pub fn fail_on_corrupt(executed: &Executed) -> anyhow::Result<()> {
    for r in &executed.records {
        if let Some(corrupt) = super::workloads::of(&r.case).corrupt {
            if (corrupt.count)(&r.observation) > 0.0 {
                anyhow::bail!("{}: {} arrived corrupted", r.label, corrupt.what);
            }
        }
    }
    Ok(())
}

/// The command that resumes run `id` of `db`, as it works: with `--psk-file KEY` when the
/// run proved a key to its remote ends (`keyed`: a fleet run's agents, a `--connect` server),
/// since the key is never stored and the resume is refused without it.
pub fn resume_command(id: i64, db: &Path, keyed: bool) -> String {
    let key = if keyed { " --psk-file KEY" } else { "" };
    format!("iopath run --resume {id} --db {}{key}", db.display())
}

/// After printing: say where the run is stored, and fail (exit 1) when cells failed.
pub fn conclude(executed: &Executed) -> anyhow::Result<()> {
    let (id, db) = (executed.run_id, &executed.db);
    crate::tell!(
        "stored as run {id} in {db}; `iopath report {id} --db {db}` draws it",
        db = db.display()
    );
    let failed: Vec<&Record> = executed.records.iter().filter(|r| r.error.is_some()).collect();
    if !failed.is_empty() {
        anyhow::bail!(
            "{} of {} cells failed (`{}` retries them); first: {}: {}",
            failed.len(),
            executed.records.len(),
            resume_command(id, db, executed.keyed),
            failed[0].label,
            failed[0].error.as_deref().unwrap_or_default()
        );
    }
    Ok(())
}

/// The most repetitions a resumed run may have: what `--reps` accepts.
const MAX_REPS: u32 = 1000;

/// Resume needs a database that exists and holds the run. Nothing stored is obeyed unchecked:
/// every stored case passes the same limits and memory check as the command line that would
/// make it ([`check_stored_case`]), and every stored position must be one the plan has, all
/// before any cell runs; a value that fails is "PATH is damaged: …" (exit 2).
pub fn resume_plan(db: &Path, run_id: i64) -> anyhow::Result<Plan> {
    // Resuming writes: an existing database is brought up to date like any writer does.
    let store = Store::upgrade(db).map_err(store_error)?;
    let run = store.run(run_id).map_err(store_error)?;
    if store.ab_run(run_id)?.is_some() {
        return Err(usage(format!(
            "run {run_id} is an A/B run (`iopath ab`): its settings are not kept for a resume; run the `iopath ab` command again"
        )));
    }
    // A merged run's cells were measured on another host: more cells here would mix machines.
    if let Some(from) = store.provenance(run_id).map_err(store_error)? {
        return Err(usage(format!(
            "run {run_id} was copied by `iopath merge` from run {} of {} (host {}); resume it there, then merge \
             into a new database",
            from.source_run_id,
            from.source_file,
            from.source_host.as_deref().unwrap_or("not recorded")
        )));
    }
    let cases = store.cases(run_id).map_err(store_error)?;
    let damaged = |detail: String| {
        store_error(
            StoreError::Corrupt {
                path: db.to_path_buf(),
                detail,
            }
            .into(),
        )
    };
    if run.repetitions > MAX_REPS {
        return Err(damaged(format!(
            "run {run_id} has {} repetitions (at most {MAX_REPS})",
            run.repetitions
        )));
    }
    if let Some(bad) = store
        .impossible_positions(run_id, cases.len(), run.repetitions)
        .map_err(store_error)?
    {
        return Err(damaged(format!("run {run_id}: {bad}")));
    }
    let headroom = crate::sys::procfs::memory_headroom();
    for (position, case) in cases.iter().enumerate() {
        check_stored_case(case, headroom)
            .map_err(|why| damaged(format!("run {run_id}, case {} ({}): {why}", position + 1, case.label())))?;
    }
    let environment: serde_json::Value = serde_json::from_str(&run.environment_json).unwrap_or_default();
    Ok(Plan {
        cases,
        repetitions: run.repetitions,
        shuffle: run.shuffle,
        seed: run.seed,
        warmup_cell: run.warmup_cell,
        name: run.name,
        interface: environment["interface"].as_str().unwrap_or("lo").to_string(),
        // Never stored: the command that resumes gives the key again.
        credentials: Credentials::default(),
    })
}

/// Every case of a plan passes its workload's check and the memory check in this process
/// ([`check_stored_case`]) before anything runs: the seam every path goes through (a direct
/// command, a plan file, `quick`, a resume), so a workload whose own flag checks
/// forgot memory is still refused up front (exit 2), not cell by cell.
fn check_plan(plan: &Plan) -> anyhow::Result<()> {
    let headroom = crate::sys::procfs::memory_headroom();
    for case in &plan.cases {
        check_stored_case(case, headroom).map_err(|why| usage(format!("{}: {why}", case.label())))?;
    }
    Ok(())
}

/// Whether a stored case could have come from the command line: each workload's own
/// `check_case` (the limits its flags enforce) and the memory check the CLI makes with
/// `headroom` (MemAvailable and the memory cgroup; None skips it).
pub fn check_stored_case(case: &Case, headroom: Option<u64>) -> Result<(), String> {
    // Text parameters (a remote address, micro options) are printed in labels and progress.
    fn has_control(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::String(s) => s.chars().any(char::is_control),
            serde_json::Value::Array(a) => a.iter().any(has_control),
            serde_json::Value::Object(o) => o.iter().any(|(k, v)| k.chars().any(char::is_control) || has_control(v)),
            _ => false,
        }
    }
    if has_control(&serde_json::to_value(case).unwrap_or_default()) {
        return Err("its parameters hold control characters".into());
    }
    super::workloads::check_here(case, headroom)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{FakeBehaviour, FakeCase};

    fn outcome(result: Result<f64, &str>) -> CellOutcome {
        CellOutcome {
            result: result
                .map(|v| {
                    let mut o = crate::observation::Observation::default();
                    o.push(crate::observation::Metric::new(
                        "value",
                        crate::observation::Role::System,
                        v,
                        "1",
                        crate::observation::Source::Tool,
                    ));
                    o
                })
                .map_err(String::from),
            elapsed_s: 0.5,
        }
    }

    /// A writer that counts flushes and can play a closed pipe.
    struct Pipe {
        bytes: Vec<u8>,
        flushes: usize,
        closed: bool,
    }

    impl Write for Pipe {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.closed {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            self.bytes.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.flushes += 1;
            Ok(())
        }
    }

    #[test]
    fn ndjson_sink_writes_and_flushes_one_line_per_cell_and_survives_a_closed_pipe() {
        let case = Case::Fake(FakeCase {
            index: 0,
            behaviour: FakeBehaviour::Ok { value: 3 },
        });
        let pipe = Pipe {
            bytes: Vec::new(),
            flushes: 0,
            closed: false,
        };
        let mut sink = NdjsonSink::new(pipe, Some(7));
        let cell = |repetition| Cell {
            position: 0,
            repetition,
        };
        sink.cell_finished(&case, cell(0), &outcome(Ok(3.0))).unwrap();
        sink.cell_finished(&case, cell(1), &outcome(Err("boom"))).unwrap();
        assert_eq!(sink.out.flushes, 2, "a flush per line");
        let text = String::from_utf8(sink.out.bytes.clone()).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["run_id"], 7);
        assert_eq!(lines[0]["metrics"][0]["value"], 3);
        assert_eq!(
            (lines[1]["status"].as_str(), lines[1]["error"].as_str()),
            (Some("failed"), Some("boom"))
        );
        sink.out.closed = true;
        sink.cell_finished(&case, cell(2), &outcome(Ok(3.0))).unwrap();
        sink.cell_finished(&case, cell(3), &outcome(Ok(3.0))).unwrap();
        assert_eq!(sink.out.bytes.len(), text.len(), "nothing more after the reader left");
    }
}
