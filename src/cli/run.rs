//! The one way every measuring command runs: a validated [`Plan`] goes to the one runner,
//! whose cells go to the sinks — the results database (with `--db`, always for sweeps) and
//! the collector the printers read at the end. Stop, failure and resume behave the same for
//! `net stream`, `servers`, `micro`, `quick` and every `sweep`.

use super::output::View;
use super::sweep::{command_line, open_for_writing, store_error};
use crate::case::Case;
use crate::store::export::{CsvExporter, Exporter, JsonExporter};
use crate::store::{NewRun, Record, RunStatus, Store, StoreError, StoreSink};
use crate::sweep::{progress::Progress, run_plan, Cell, CellOutcome, Plan, RunEnd, Sink};
use clap::Args;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The flags every measuring command shares, with the same names, defaults and limits in the
/// direct command and in its sweep.
#[derive(Args, Debug, Clone, Default)]
pub struct RunFlags {
    /// Repetitions of every case, each one a cell of its own (1 to 1000). With 2 or more the
    /// table shows the median of the repetitions; confidence intervals need 3 or more.
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
    /// Keep every cell in this results database as it finishes, so `iopath report`, `export`
    /// and `sweep --resume` can use it (sweeps: default iopath-results/iopath.db).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Print JSON records (docs/output.md) instead of the table; failed cells carry their error.
    #[arg(long, conflicts_with_all = ["csv", "json_stream"])]
    pub json: bool,
    /// Print CSV, one row per case and repetition, with a value and a source column per metric.
    #[arg(long, conflicts_with = "json_stream")]
    pub csv: bool,
    /// Print one NDJSON record per cell the moment it finishes, flushed line by line (like
    /// iperf3 --json-stream), instead of the table at the end (docs/output.md).
    #[arg(long)]
    pub json_stream: bool,
    /// Print every column of the table and the source of each; without it the table keeps
    /// the columns that fit 100 characters and names the ones it left out.
    #[arg(long, conflicts_with_all = ["json", "csv", "json_stream"])]
    pub wide: bool,
    /// Show the run in a live terminal view (progress, results so far, warnings; q stops it
    /// like Ctrl-C). Needs a terminal: refused (exit 2) on a pipe.
    #[arg(long)]
    pub live: bool,
}

impl RunFlags {
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
        }
    }
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The collector the printers read: every finished cell as an export record, failed ones with
/// their error.
#[derive(Default)]
pub struct Collect {
    pub records: Vec<Record>,
    run_id: Option<i64>,
}

impl Sink for Collect {
    fn cell(&mut self, case: &Case, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()> {
        let (observation, error) = match &outcome.result {
            Ok(obs) => (obs.clone(), None),
            Err(e) => (Default::default(), Some(e.clone())),
        };
        self.records.push(Record {
            run_id: self.run_id,
            label: case.label(),
            case: case.clone(),
            repetition: cell.repetition,
            observation,
            error,
        });
        Ok(())
    }
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
    fn cell(&mut self, case: &Case, cell: Cell, outcome: &CellOutcome) -> anyhow::Result<()> {
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
    pub run_id: Option<i64>,
    pub db: Option<PathBuf>,
    pub records: Vec<Record>,
    pub end: RunEnd,
}

/// Where a run goes: nowhere but the printers, a new run in a database, or the missing cells
/// of a stored run.
pub enum Destination<'a> {
    Terminal,
    NewRun(&'a Path),
    Resume(&'a Path, i64),
}

/// A direct command stores its run only when `--db` is given.
pub fn direct_destination(flags: &RunFlags) -> Destination<'_> {
    match &flags.db {
        Some(path) => Destination::NewRun(path),
        None => Destination::Terminal,
    }
}

/// Sinks a run adds besides the collector and the database, as the flags ask.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outputs {
    /// `--json-stream`: one NDJSON line per cell on stdout as it finishes.
    pub json_stream: bool,
    /// `--live`: the live terminal view (needs a terminal).
    pub live: bool,
    /// Say on stderr once the run is open, before its first cell, what the plan can detect
    /// against a run like it (sweep and quick).
    pub detectable: bool,
}

impl From<&RunFlags> for Outputs {
    fn from(flags: &RunFlags) -> Outputs {
        Outputs {
            json_stream: flags.json_stream,
            live: flags.live,
            detectable: false,
        }
    }
}

/// Run `plan` through the runner into the collector and, when asked, the database. Prints the
/// closing lines (where it is stored, how to resume); the caller prints the records.
pub fn execute(plan: &Plan, destination: Destination<'_>, outputs: Outputs) -> anyhow::Result<Executed> {
    if outputs.live {
        super::live::check_terminal()?;
    }
    let stop = crate::sys::signal::install_stop_handler();
    let (mut store, run_id, done) = match destination {
        Destination::Terminal => (None, None, HashSet::new()),
        Destination::NewRun(path) => {
            let mut store = open_for_writing(path)?;
            let id = store
                .create_run(&NewRun::of_plan(plan, command_line()))
                .map_err(store_error)?;
            // Held until the run is closed: `sweep --resume` refuses a run this process executes.
            store.lock_run(id).map_err(store_error)?;
            (Some(store), Some(id), HashSet::new())
        }
        Destination::Resume(path, id) => {
            let mut store = open_for_writing(path)?;
            store.lock_run(id).map_err(store_error)?;
            let done = store.done_cells(id)?;
            store.set_run_status(id, RunStatus::Running)?;
            (Some(store), Some(id), done)
        }
    };
    let cells = plan.cells(&done);
    if let (Some(id), false) = (run_id, done.is_empty()) {
        eprintln!("run {id}: {} cells already stored, {} to run", done.len(), cells.len());
    }
    if outputs.detectable {
        let line = crate::report::compare::plan_detectable_line(plan.repetitions as usize, plan.cases.len());
        eprint!("{}", super::output::wrap(&line, 4));
    }
    // A second signal exits at once: it must not leave the run `running`.
    let _forced_exit_guard = match (&store, run_id) {
        (Some(store), Some(id)) => {
            let path = store.path().to_path_buf();
            Some(crate::sys::signal::on_forced_exit(move || {
                crate::store::mark_interrupted_if_running(&path, id)
            }))
        }
        _ => None,
    };
    // The run exists already: a view that cannot start must not leave it `running`.
    let live = match outputs.live {
        true => super::live::LiveView::start(plan, &cells, stop)
            .map_err(|e| eprintln!("note: no live view ({e:#}); the run goes on without it"))
            .ok(),
        false => None,
    };
    let mut live_sink = live.as_ref().map(|v| v.sink());
    let progress = match live {
        Some(_) => Progress::hidden(cells.len()),
        None => Progress::for_plan(plan, &cells),
    };
    let mut collect = Collect {
        records: Vec::new(),
        run_id,
    };
    let end = {
        let mut store_sink = store
            .as_mut()
            .zip(run_id)
            .map(|(store, run_id)| StoreSink { store, run_id });
        let mut stream = outputs.json_stream.then(|| NdjsonSink::new(std::io::stdout(), run_id));
        let mut sinks: Vec<&mut dyn Sink> = vec![&mut collect];
        if let Some(s) = store_sink.as_mut() {
            sinks.push(s);
        }
        if let Some(s) = stream.as_mut() {
            sinks.push(s);
        }
        if let Some(s) = live_sink.as_mut() {
            sinks.push(s);
        }
        run_plan(
            plan,
            &cells,
            &mut |case, stop| crate::sweep::execute_case(case, stop),
            &mut sinks,
            stop,
            &progress,
        )
    };
    if let Some(view) = live {
        view.finish();
    }
    let db = store.as_ref().map(|s| s.path().to_path_buf());
    if let (Some(store), Some(id)) = (store.as_mut(), run_id) {
        // Close the run even when a sink failed, so it is never left `running`.
        let status = match &end {
            Ok(e) if !e.interrupted => RunStatus::Complete,
            _ => RunStatus::Interrupted,
        };
        store.set_run_status(id, status)?;
    }
    let end = end?;
    if end.interrupted {
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
        let _ = match (&db, run_id) {
            (Some(db), Some(id)) => writeln!(
                err,
                "everything finished is stored. Continue with: iopath sweep --resume {id} --db {}",
                db.display()
            ),
            _ => writeln!(
                err,
                "nothing was stored (no --db): run again with --db PATH to be able to resume"
            ),
        };
    }
    Ok(Executed {
        run_id,
        db,
        records: collect.records,
        end,
    })
}

/// Print the records as JSON or CSV when asked, otherwise with `table` (in the view `--wide`
/// asks for); then list the failed cells, repetitions numbered as the store numbers them (from
/// 0). A closed stdout (a pipe to `head`) ends the printing quietly.
pub fn print_records(
    flags: &RunFlags,
    records: &[Record],
    table: impl Fn(&[Record], View) -> String,
) -> anyhow::Result<()> {
    if flags.json_stream {
        // Every cell was printed as it finished.
        return Ok(());
    }
    let bytes = if flags.json {
        JsonExporter.serialize(records)?
    } else if flags.csv {
        CsvExporter.serialize(records)?
    } else {
        let ok: Vec<Record> = records.iter().filter(|r| r.error.is_none()).cloned().collect();
        let view = View { wide: flags.wide };
        let mut text = if ok.is_empty() { String::new() } else { table(&ok, view) };
        for r in records.iter().filter(|r| r.error.is_some()) {
            text.push_str(&format!(
                "failed: {} rep {}: {}\n",
                super::output::safe(&r.label),
                r.repetition,
                super::output::safe(r.error.as_deref().unwrap_or_default())
            ));
        }
        text.into_bytes()
    };
    super::output::out(String::from_utf8_lossy(&bytes))?;
    Ok(())
}

/// After printing: say where the run is stored, and fail (exit 1) when cells failed.
/// Fail the command, once its table is printed, at the first record in which `corrupt` counts
/// data that arrived corrupted (`what`: "messages", "records").
pub fn fail_on_corrupt(
    executed: &Executed,
    what: &str,
    corrupt: impl Fn(&crate::observation::Observation) -> f64,
) -> anyhow::Result<()> {
    match executed.records.iter().find(|r| corrupt(&r.observation) > 0.0) {
        Some(r) => anyhow::bail!("{}: {what} arrived corrupted", r.label),
        None => Ok(()),
    }
}

pub fn conclude(executed: &Executed) -> anyhow::Result<()> {
    if let (Some(db), Some(id)) = (&executed.db, executed.run_id) {
        eprintln!(
            "stored as run {id} in {db}; `iopath report {id} --db {db}` draws it",
            db = db.display()
        );
    }
    let failed: Vec<&Record> = executed.records.iter().filter(|r| r.error.is_some()).collect();
    if !failed.is_empty() {
        let retry = match (&executed.db, executed.run_id) {
            (Some(db), Some(id)) => format!(" (`iopath sweep --resume {id} --db {}` retries them)", db.display()),
            _ => String::new(),
        };
        anyhow::bail!(
            "{} of {} cells failed{retry}; first: {}: {}",
            failed.len(),
            executed.records.len(),
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
    })
}

/// Whether a stored case could have come from the command line: each workload's own
/// `check_case` (the limits its flags enforce) and the memory check the CLI makes with
/// `headroom` (MemAvailable and the memory cgroup; None skips it).
pub fn check_stored_case(case: &Case, headroom: Option<u64>) -> Result<(), String> {
    use crate::case::Endpoint;
    use crate::format::format_bytes;
    use crate::net::workload::{records, rr, stream};
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
    match case {
        Case::NetStream(c) => {
            stream::check_case(c, crate::observation::Role::Client, None)?;
            // As `net stream` does: both ends live in this process unless the server is remote.
            let server = match c.net.endpoint {
                Endpoint::Remote { .. } => 0,
                _ => stream::buffer_bytes(c, crate::observation::Role::Server),
            };
            let need = stream::buffer_bytes(c, crate::observation::Role::Client).saturating_add(server);
            match headroom {
                Some(h) if need > h / 2 => Err(format!(
                    "it needs about {} of buffers in this process, more than half of the {} available",
                    format_bytes(need),
                    format_bytes(h)
                )),
                _ => Ok(()),
            }
        }
        Case::NetRr(c) => rr::check_case(c),
        Case::NetRecords(c) => {
            let headroom = headroom.filter(|_| !matches!(c.net.endpoint, Endpoint::Remote { .. }));
            records::check_case(c, headroom)
        }
        Case::Servers(c) => super::servers::check_case(c),
        Case::Micro(c) => super::micro::check_case(c, headroom),
        Case::Fake(_) => Ok(()),
    }
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
        sink.cell(&case, cell(0), &outcome(Ok(3.0))).unwrap();
        sink.cell(&case, cell(1), &outcome(Err("boom"))).unwrap();
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
        sink.cell(&case, cell(2), &outcome(Ok(3.0))).unwrap();
        sink.cell(&case, cell(3), &outcome(Ok(3.0))).unwrap();
        assert_eq!(sink.out.bytes.len(), text.len(), "nothing more after the reader left");
    }
}
