//! `iopath ab`: a measuring command run as an interleaved A/B experiment of system settings or
//! of its own flags, stored as one run. Every case runs twice per repetition, A (the system as
//! it was) and B (with `--set`), one right after the other (ABBA, or a seeded coin per pair);
//! `report::ab` judges the pairs.
//!
//! Where a setting applies: inside `--topology netns|veth`, to iopath's own namespaces
//! (`net::settings::set_scoped`, applied by `Topology::establish`, gone with the namespace);
//! with `--host-settings`, to this host between cells — read and journaled in the database
//! (`store/ab.rs`) before the first change, put back before every A cell, at the end, on a stop
//! (the variant sink's `finish`) and on a forced exit (`sys::signal::on_forced_exit`), and by
//! [`restore_orphans`] at the next start after a SIGKILL or a crash. A flag (`flag:--align=misaligned`)
//! makes variant B's cases from the command line with the flag added.

use super::error::{exit_with, usage};
use super::run::{self, Destination, Outputs, Print};
use super::stored::{command_line, open_for_writing, store_error};
use crate::net::settings::{self, Setting};
use crate::report::ab::AbAnalysis;
use crate::report::compare::{CompareOptions, Correction, Gate};
use crate::store::ab::Variant;
use crate::store::{NewRun, Store};
use crate::sweep::{Cell, CellOutcome, Plan, RunEnd, Sink};
use clap::Args;
use std::path::{Path, PathBuf};

/// `ab --order`: how each pair's two cells are ordered (stored with the run by its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairOrder {
    Abba,
    Random,
}

impl PairOrder {
    pub const ALL: [PairOrder; 2] = [PairOrder::Abba, PairOrder::Random];

    pub fn as_str(self) -> &'static str {
        match self {
            PairOrder::Abba => "abba",
            PairOrder::Random => "random",
        }
    }
}

crate::case::named_choices!(PairOrder, "order");

#[derive(Args, Debug)]
pub struct AbArgs {
    /// A setting of variant B (repeat for several): sysctl:NAME=VALUE, dev:DEV:gro|gso|tso=on|off,
    /// dev:DEV:gso_max_size=BYTES, qdisc:DEV:'tc words' (or default), flag:--FLAG[=VALUE] (a flag
    /// of the measuring command). Inside --topology netns|veth, DEV is `server` or `client`.
    #[arg(long = "set", value_name = "KIND:SETTING", required_unless_present = "show")]
    pub set: Vec<String>,
    /// The order of each pair's two cells: abba (A B, B A, A B, ...) or random (a coin per pair,
    /// seeded by --seed).
    #[arg(long, default_value = "abba")]
    pub order: PairOrder,
    /// Seed of --order random (default: from the clock; stored with the run).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Allow settings of this host itself (its sysctls and devices): printed before the run,
    /// journaled in the database and put back on every exit. Needed with the loopback topology.
    #[arg(long)]
    pub host_settings: bool,
    /// The noise band in percent, as compare's: a pair ratio whose interval lies within it is
    /// "no change".
    #[arg(long, default_value = "3", value_parser = super::results::parse_threshold, value_name = "PERCENT")]
    pub threshold: f64,
    /// A gate for CI, with compare's exit codes: 1 when B is worse for the whole run or a cell
    /// (beyond the band and significant), 3 when the pairs cannot decide, 0 otherwise.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// Print the analysis as JSON (docs/output.md) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Analyse a stored A/B run instead of running one.
    #[arg(long, value_name = "RUN_ID", value_parser = super::values::parse_run_id, conflicts_with_all = ["set", "command"])]
    pub show: Option<i64>,
    /// Results database (the run is always stored).
    #[arg(long, default_value_os_t = crate::store::default_db_path(), value_name = "PATH")]
    pub db: PathBuf,
    /// The measuring command after `--`, as it is typed without `iopath` (`net stream --size 64K
    /// --reps 8`); its --reps are the pairs of each case.
    #[arg(last = true, value_name = "COMMAND", required_unless_present = "show")]
    pub command: Vec<String>,
}

/// What `--set` asked for.
enum Asked {
    System(Setting),
    Flag(String),
}

fn parse_set(text: &str) -> anyhow::Result<Asked> {
    if let Some(flag) = text.strip_prefix("flag:") {
        if !flag.starts_with("--") || flag.len() < 3 {
            return Err(usage(format!(
                "--set '{text}': a flag is flag:--NAME=VALUE or flag:--NAME (accepted: {})",
                settings::ACCEPTED
            )));
        }
        return Ok(Asked::Flag(flag.to_string()));
    }
    text.parse::<Setting>().map(Asked::System).map_err(usage)
}

/// The measuring command's plan from its words (`net stream …`), parsed and checked as the
/// command line parses and checks it.
fn plan_of_words(words: &[String]) -> anyhow::Result<Plan> {
    let argv = std::iter::once("iopath").chain(words.iter().map(String::as_str));
    let parsed = super::parse_from(argv).map_err(|e| {
        let text = e.to_string();
        let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        usage(format!(
            "the measuring command `{}` does not parse: {}",
            words.join(" "),
            line.trim_start_matches("error: ")
        ))
    })?;
    let Some(measured) = super::measuring(&parsed.command) else {
        return Err(usage(format!(
            "ab runs a measuring command after `--` ({}), e.g. `iopath ab --set flag:--verify -- net stream --reps 8`",
            super::measuring_commands(false).join(", ")
        )));
    };
    let (plan, flags) = measured?;
    for (given, flag) in [
        (flags.db.is_some(), "--db"),
        (flags.json, "--json"),
        (flags.csv, "--csv"),
        (flags.json_stream, "--json-stream"),
        (flags.live, "--live"),
        (flags.shuffle, "--shuffle"),
    ] {
        if given {
            return Err(usage(format!(
                "{flag} belongs to ab, not to the measuring command (ab stores the run in its --db, prints its pairs, and orders them with --order)"
            )));
        }
    }
    Ok(plan)
}

/// The value of `--topology` among the measuring command's words.
fn topology_word(words: &[String]) -> Option<String> {
    words
        .iter()
        .enumerate()
        .find_map(|(i, w)| match w.strip_prefix("--topology") {
            Some("") => words.get(i + 1).cloned(),
            Some(rest) => rest.strip_prefix('=').map(String::from),
            None => None,
        })
}

/// Where the system settings go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Only flags: nothing of the system changes.
    Flags,
    /// iopath's own namespaces (`--topology netns|veth`).
    Topology,
    /// This host (`--host-settings`).
    Host,
}

impl Scope {
    fn name(self) -> &'static str {
        match self {
            Scope::Flags => "flags",
            Scope::Topology => "topology",
            Scope::Host => "host",
        }
    }
}

pub fn run(args: AbArgs) -> anyhow::Result<()> {
    if let Some(id) = args.show {
        return show(&args.db, id, &args, false);
    }
    let (system, flags) = asked_settings(&args)?;
    let scope = checked_scope(&args, &system)?;
    let (plan, half) = paired_plan(&args, &flags)?;
    let settings_text: Vec<String> = args.set.clone();
    let mut store = open_for_writing(&args.db)?;
    restore_orphans(&mut store)?;
    // Read before anything changes; journaled before the run's first cell.
    let originals = match scope {
        Scope::Host => system
            .iter()
            .map(Setting::current)
            .collect::<anyhow::Result<Vec<_>>>()?,
        _ => Vec::new(),
    };
    let run_id = store
        .create_run(&NewRun::of_plan(&plan, command_line()))
        .map_err(store_error)?;
    store.mark_ab_run(run_id, &settings_text, args.order.as_str(), scope.name(), half)?;
    let journal = store.journal_originals(Some(run_id), &originals)?;
    drop(store);
    if scope == Scope::Host {
        for (s, o) in system.iter().zip(&originals) {
            eprintln!("host setting: variant B sets {s} on this host (now {o}); put back after every B cell and on every exit");
        }
    }
    let db = args.db.clone();
    let restore = originals.clone();
    let journal_ids = journal.clone();
    // A second signal exits at once: the host's values go back first.
    let _forced = (scope == Scope::Host).then(|| {
        crate::sys::signal::on_forced_exit(move || {
            for o in &restore {
                let _ = o.apply();
            }
            crate::store::ab::mark_restored_at(&db, &journal_ids);
        })
    });
    let sink = VariantSink {
        half,
        scope,
        settings: system,
        originals,
        journal,
        db: args.db.clone(),
        applied: false,
    };
    let outputs = Outputs {
        order: Some(crate::sweep::ab_cells),
        first: Some(Box::new(sink)),
        print: Print::Nothing,
        ..Outputs::default()
    };
    let executed = run::execute(&plan, Destination::Resume(&args.db, run_id), outputs)?;
    if executed.end.interrupted {
        eprintln!("(an A/B run is not resumed: its pairs so far are in `iopath ab --show {run_id}`; run the ab command again for a whole one)");
        return Ok(());
    }
    let shown = show(&args.db, run_id, &args, true);
    run::conclude(&executed)?;
    shown
}

/// The settings `--set` asks for: those of the system, and variant B's flags; each named once.
fn asked_settings(args: &AbArgs) -> anyhow::Result<(Vec<Setting>, Vec<String>)> {
    let mut system = Vec::new();
    let mut flags = Vec::new();
    for text in &args.set {
        match parse_set(text)? {
            Asked::System(s) => system.push(s),
            Asked::Flag(f) => flags.push(f),
        }
    }
    let mut targets: Vec<String> = system.iter().map(Setting::target).collect();
    targets.extend(flags.iter().map(|f| f.split('=').next().unwrap_or(f).to_string()));
    targets.sort();
    if let Some(twice) = targets.windows(2).find(|w| w[0] == w[1]) {
        return Err(usage(format!("--set names {} twice: give each setting once", twice[0])));
    }
    Ok((system, flags))
}

/// Where the system settings are changed (the topology's namespaces, or the host with
/// `--host-settings`), each setting checked there; a host change without `--host-settings`
/// is refused.
fn checked_scope(args: &AbArgs, system: &[Setting]) -> anyhow::Result<Scope> {
    let in_namespaces = topology_word(&args.command).is_some_and(|t| t.starts_with("netns") || t.starts_with("veth"));
    let scope = match (system.is_empty(), args.host_settings, in_namespaces) {
        (true, _, _) => Scope::Flags,
        (false, true, _) => Scope::Host,
        (false, false, true) => Scope::Topology,
        (false, false, false) => {
            return Err(usage(format!(
                "--set {}: the measuring command does not run inside --topology netns|veth, so this would change the host itself: add --host-settings to allow it (printed before the run, journaled in the database, put back on every exit), or measure inside --topology netns|veth",
                system[0]
            )))
        }
    };
    for s in system {
        match scope {
            Scope::Host => s.check_here(),
            _ => settings::check_scoped(s).and_then(|()| match s {
                Setting::Sysctl { .. } => s.check_here(),
                // The devices do not exist yet: held to the tso_max_size of their kind.
                Setting::MaxSize { .. } => topology_word(&args.command)
                    .and_then(|t| t.parse::<crate::net::topology::Topology>().ok())
                    .map_or(Ok(()), |t| {
                        t.check_device_setting(s).map_err(|e| format!("--set {s}: {e}"))
                    }),
                _ => Ok(()),
            }),
        }
        .map_err(usage)?;
    }
    Ok(scope)
}

/// Variant A's cases then variant B's (the command with B's flags) as one plan, and how many
/// each has; B's flags must change each case, not the grid.
fn paired_plan(args: &AbArgs, flags: &[String]) -> anyhow::Result<(Plan, usize)> {
    let plan_a = plan_of_words(&args.command)?;
    let mut words_b = args.command.clone();
    words_b.extend(flags.iter().cloned());
    let plan_b = plan_of_words(&words_b).map_err(|e| {
        usage(format!(
            "--set flag:…: {}",
            e.to_string()
                .replace("the measuring command", "the measuring command with variant B's flags")
        ))
    })?;
    if plan_a.cases.len() != plan_b.cases.len() {
        return Err(usage(format!(
            "variant B's flags change the number of cases ({} against {}): a flag of variant B must change each case, not the grid",
            plan_b.cases.len(),
            plan_a.cases.len()
        )));
    }
    let half = plan_a.cases.len();
    let settings_text: Vec<String> = args.set.clone();
    let plan = Plan {
        cases: plan_a.cases.iter().chain(&plan_b.cases).cloned().collect(),
        repetitions: plan_a.repetitions,
        shuffle: args.order == PairOrder::Random,
        seed: args.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        }),
        warmup_cell: plan_a.warmup_cell,
        name: Some(
            plan_a
                .name
                .clone()
                .unwrap_or_else(|| format!("ab {}", settings_text.join(" "))),
        ),
        interface: plan_a.interface.clone(),
        credentials: plan_a.credentials.clone(),
    };
    Ok((plan, half))
}

/// Print the analysis of stored A/B run `id` and apply the gate.
fn show(db: &Path, id: i64, args: &AbArgs, just_run: bool) -> anyhow::Result<()> {
    let options = CompareOptions::new(args.threshold, Correction::default(), Vec::new());
    match show_if_ab(db, id, &options, args.json)? {
        Some(analysis) => gate(&analysis, args.fail_on_regression),
        None if just_run => anyhow::bail!("run {id} was stored without its A/B description"),
        None => Err(usage(format!(
            "run {id} in {} is not an A/B run (`iopath ab` makes them; `iopath compare` compares two runs)",
            db.display()
        ))),
    }
}

/// `--fail-on-regression`: compare's exit codes.
pub fn gate(analysis: &AbAnalysis, fail_on_regression: bool) -> anyhow::Result<()> {
    if !fail_on_regression {
        return Ok(());
    }
    match analysis.gate() {
        Gate::Pass => Ok(()),
        Gate::Regression(message) => anyhow::bail!("{message}"),
        Gate::Undecidable(message) => Err(exit_with(3, message)),
    }
}

/// The analysis of run `id` printed (table or JSON) when it is an A/B run; None (nothing
/// printed) for any other run. `compare RUN RUN` and `ab --show RUN` read an A/B run here.
pub fn show_if_ab(db: &Path, id: i64, options: &CompareOptions, json: bool) -> anyhow::Result<Option<AbAnalysis>> {
    let store = Store::open_existing(db).map_err(store_error)?;
    let Some(ab) = store.ab_run(id).map_err(store_error)? else {
        return Ok(None);
    };
    let data = store.load_run(id).map_err(store_error)?;
    let analysis = crate::report::ab::analyse(&data, &ab, options);
    if json {
        let gate = analysis.gate();
        let doc = serde_json::json!({
            "type": "ab",
            "run": id,
            "settings": ab.settings,
            "order": ab.pair_order,
            "scope": ab.scope,
            "test": "exact two-sided Wilcoxon signed-rank of ln(B/A) per pair",
            "analysis": analysis,
            "gate": {"decision": gate.name(), "exit_code": gate.exit_code(), "message": gate.message()},
        });
        super::output::out(format!("{}\n", serde_json::to_string_pretty(&doc)?))?;
    } else {
        crate::say!(
            "run {id}: A/B of {} ({} pairs, order {}, settings applied to {})",
            super::output::safe(&ab.settings.join(" ")),
            analysis.whole.pairs,
            ab.pair_order,
            ab.scope
        )?;
        super::output::out(ab_table(&analysis))?;
        let cells = crate::report::cells::summarize_run(&data);
        super::output::out(super::output::claims_text(&cells, Some(&ab)))?;
    }
    Ok(Some(analysis))
}

/// The A/B table (docs/output.md, "iopath ab"): a row per cell, the cells without a complete
/// pair, then the whole-run line.
fn ab_table(analysis: &AbAnalysis) -> String {
    use super::output::{safe, Table};
    let mut table = Table::new(&[
        "cell", "pairs", "median A", "median B", "B/A", "interval", "B+/B-", "p (adj)", "verdict",
    ]);
    let num = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.4}"));
    let ratio = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
    let interval = |v: Option<(f64, f64)>| v.map_or("-".into(), |(l, h)| format!("{l:.3}..{h:.3}"));
    for r in &analysis.rows {
        table.row(vec![
            safe(&r.label).into_owned(),
            r.pairs.to_string(),
            num(r.median_a),
            num(r.median_b),
            ratio(r.ratio),
            interval(r.ratio_ci95),
            format!("{}/{}", r.b_better, r.b_worse),
            format!("{:.3}", r.p_adjusted),
            r.verdict.to_string(),
        ]);
    }
    let mut out = table.render();
    for label in &analysis.unpaired {
        out.push_str(&format!(
            "{}: no complete pair (a cell of A or B failed)\n",
            safe(label)
        ));
    }
    let w = &analysis.whole;
    out.push_str(&format!(
        "whole run ({} pairs): {}, B against A {} (above 1: B better), interval {}, signed-rank p {:.3}: {}\n",
        w.pairs,
        w.verdict,
        ratio(w.better_ratio),
        interval(w.better_ratio_ci95),
        w.p,
        w.reason
    ));
    out
}

/// Put back every value an earlier iopath journaled and did not restore (killed, crashed), in
/// this network namespace, and say so in one line; values journaled in another namespace are
/// named and left.
pub fn restore_orphans(store: &mut Store) -> anyhow::Result<()> {
    let orphans = store.journal_orphans()?;
    if orphans.is_empty() {
        return Ok(());
    }
    let here = crate::store::ab::current_netns();
    let (mine, elsewhere): (Vec<_>, Vec<_>) = orphans.into_iter().partition(|o| o.netns == here);
    let mut restored = Vec::new();
    let mut ids = Vec::new();
    for o in &mine {
        o.original.apply().map_err(|e| {
            anyhow::anyhow!(
                "an earlier iopath changed {} and ended before putting it back; putting back {} failed: {e:#}",
                o.original.target(),
                o.original
            )
        })?;
        restored.push(o.original.to_string());
        ids.push(o.id);
    }
    store.journal_restored(&ids)?;
    if !restored.is_empty() {
        eprintln!(
            "restored {} setting(s) an earlier iopath left changed when it was killed: {}",
            restored.len(),
            restored.join(", ")
        );
    }
    if !elsewhere.is_empty() {
        eprintln!(
            "{} setting(s) journaled in another network namespace are left for an iopath started there",
            elsewhere.len()
        );
    }
    Ok(())
}

/// The settings of each cell's variant, set when the cell starts and put back in `finish`
/// (every exit path of the runner) and on drop.
struct VariantSink {
    half: usize,
    scope: Scope,
    settings: Vec<Setting>,
    originals: Vec<Setting>,
    journal: Vec<i64>,
    db: PathBuf,
    /// The host has variant B's values now.
    applied: bool,
}

impl VariantSink {
    fn variant(&self, cell: Cell) -> Variant {
        if cell.position >= self.half {
            Variant::B
        } else {
            Variant::A
        }
    }

    fn set(&mut self, variant: Variant) -> anyhow::Result<()> {
        match self.scope {
            Scope::Flags => Ok(()),
            Scope::Topology => {
                settings::set_scoped(if variant == Variant::B {
                    self.settings.clone()
                } else {
                    Vec::new()
                });
                Ok(())
            }
            Scope::Host => {
                let want_b = variant == Variant::B;
                if want_b == self.applied {
                    return Ok(());
                }
                // Marked first: a failure halfway still puts everything back at the end.
                self.applied = true;
                let values = if want_b { &self.settings } else { &self.originals };
                for s in values {
                    s.apply()
                        .map_err(|e| anyhow::anyhow!("variant {}: {e:#}", variant.as_str()))?;
                }
                self.applied = want_b;
                Ok(())
            }
        }
    }

    /// Everything back as it was, once.
    fn put_back(&mut self) -> anyhow::Result<()> {
        settings::set_scoped(Vec::new());
        if self.scope != Scope::Host || self.journal.is_empty() {
            return Ok(());
        }
        let mut failed = None;
        if self.applied {
            for o in &self.originals {
                if let Err(e) = o.apply() {
                    failed.get_or_insert(format!("could not put back {o}: {e:#}"));
                }
            }
            self.applied = false;
        }
        if let Some(failed) = failed {
            // Left in the journal: the next start tries again.
            anyhow::bail!("{failed}");
        }
        let ids = std::mem::take(&mut self.journal);
        crate::store::ab::mark_restored_at(&self.db, &ids);
        Ok(())
    }
}

impl Sink for VariantSink {
    fn warmup_started(&mut self, _case: &crate::case::Case) -> anyhow::Result<()> {
        self.set(Variant::A)
    }

    fn cell_started(&mut self, _case: &crate::case::Case, cell: Cell) -> anyhow::Result<()> {
        let variant = self.variant(cell);
        self.set(variant)
    }

    fn cell_finished(&mut self, _: &crate::case::Case, _: Cell, _: &CellOutcome) -> anyhow::Result<()> {
        Ok(())
    }

    fn finish(&mut self, _end: &RunEnd) -> anyhow::Result<()> {
        self.put_back()
    }
}

impl Drop for VariantSink {
    fn drop(&mut self) {
        if let Err(e) = self.put_back() {
            eprintln!("error: {e}");
        }
    }
}
