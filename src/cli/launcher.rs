//! The launcher: `iopath` with no arguments on a terminal asks what to measure — the
//! experiment family, then its parameters with sensible defaults (Enter keeps the default in
//! brackets) — shows the equivalent command line and how long it takes, optionally saves the
//! plan as TOML, and runs it with the live view. At the end it says where the results and
//! the report are and, when the database holds an earlier run of the same cases, prints the
//! `iopath compare` command.
//!
//! It only ever builds the argv of a measuring command (`iopath net stream ...`) and hands it to the same
//! parser and validation as the command line (via [`PlanFile`]), so it cannot offer a
//! parameter the command would refuse. Without a terminal on stdin and stdout it never opens:
//! `iopath` alone then prints the help and exits 2, as before.
//!
//! The questions are lines read from any `BufRead`, not a prompt crate: inquire 0.9 and
//! dialoguer 0.12 check an answer only on Enter, as this does, so they would add no checking
//! as you type; inquire would bring a second crossterm (0.29 beside ratatui's 0.28), and
//! scripted answers (the tests here) need no terminal.

use super::planfile::PlanFile;
use super::quick;
use crate::case::{Bench, CopyMode, Model, RecordsMode};
use crate::store::Store;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// Whether `iopath` with no arguments opens the launcher here: only on a terminal.
pub fn available() -> bool {
    super::live::terminal_ok()
}

/// One question: its text, its default, and the answer.
struct Prompter<R: BufRead, W: Write> {
    input: R,
    output: W,
    /// The answers given so far, by question: the defaults when the questions come again.
    memory: HashMap<String, String>,
    /// The (client, server) CPUs proposed, quick's (`quick::quick_pins`); None: cannot pin.
    pins: Option<(usize, usize)>,
}

impl<R: BufRead, W: Write> Prompter<R, W> {
    fn say(&mut self, text: &str) -> anyhow::Result<()> {
        writeln!(self.output, "{text}")?;
        Ok(())
    }

    /// Ask; Enter keeps `default` (or the answer given last time). End of input quits.
    fn ask(&mut self, question: &str, default: &str) -> anyhow::Result<String> {
        let default = self
            .memory
            .get(question)
            .cloned()
            .unwrap_or_else(|| default.to_string());
        let answer = self.ask_fresh(question, &default)?;
        self.memory.insert(question.to_string(), answer.clone());
        Ok(answer)
    }

    /// Ask without remembering (yes/no and file questions).
    fn ask_fresh(&mut self, question: &str, default: &str) -> anyhow::Result<String> {
        if default.is_empty() {
            write!(self.output, "{question}: ")?;
        } else {
            write!(self.output, "{question} [{default}]: ")?;
        }
        self.output.flush()?;
        let mut line = String::new();
        if self.input.read_line(&mut line)? == 0 {
            anyhow::bail!(Quit);
        }
        let answer = line.trim();
        Ok(if answer.is_empty() {
            default.to_string()
        } else {
            answer.to_string()
        })
    }

    /// Pick one of `choices` (by number or name).
    fn choose(&mut self, question: &str, choices: &[(&str, &str)], default: usize) -> anyhow::Result<String> {
        for (i, (name, about)) in choices.iter().enumerate() {
            self.say(&format!("  {}) {name:<22} {about}", i + 1))?;
        }
        loop {
            let answer = self.ask(question, &(default + 1).to_string())?;
            if let Some(name) = pick(&answer, choices) {
                return Ok(name);
            }
            self.say(&format!("  '{answer}' is not one of 1 to {}", choices.len()))?;
        }
    }

    /// Pick several of `names` (numbers or names, comma-separated; `all`).
    fn choose_many(&mut self, question: &str, names: &[&str], default: &str) -> anyhow::Result<String> {
        let listed: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(i, n)| format!("{}) {n}", i + 1))
            .collect();
        self.say(&format!("  {}", listed.join("  ")))?;
        loop {
            let answer = self.ask(question, default)?;
            if answer == "all" {
                return Ok(names.join(","));
            }
            let picked: Option<Vec<String>> = answer
                .split(',')
                .map(|a| pick(a.trim(), &names.iter().map(|n| (*n, "")).collect::<Vec<_>>()))
                .collect();
            match picked {
                Some(p) if !p.is_empty() => return Ok(p.join(",")),
                _ => self.say(&format!(
                    "  '{answer}': give numbers 1 to {} or names, comma-separated",
                    names.len()
                ))?,
            }
        }
    }
}

fn pick(answer: &str, choices: &[(&str, &str)]) -> Option<String> {
    if let Ok(n) = answer.parse::<usize>() {
        return choices.get(n.checked_sub(1)?).map(|c| c.0.to_string());
    }
    choices.iter().find(|c| c.0 == answer).map(|c| c.0.to_string())
}

/// The person left the launcher (end of input).
#[derive(Debug, thiserror::Error)]
#[error("the launcher was left before anything ran")]
struct Quit;

const FAMILIES: [(&str, &str); 6] = [
    (
        "copy modes",
        "net stream: what two-copy, one-copy and zero-copy sends cost",
    ),
    (
        "server models",
        "servers: iterative, threads, pool, select, poll, epoll, io_uring",
    ),
    (
        "OS microbenchmarks",
        "micro: syscalls, context switches, memory, TCP, files",
    ),
    (
        "record store",
        "net records: N records of R bytes sent copy-out, gather or zero copy",
    ),
    (
        "request/response",
        "net rr: round-trip latency (HDR percentiles) of request/response pairs",
    ),
    (
        "connect per request",
        "net crr: connect, request, response, close, per transaction",
    ),
];

/// Push `--flag value` when the value is not empty or "none".
fn flag(argv: &mut Vec<String>, name: &str, value: &str) {
    if !value.is_empty() && value != "none" {
        argv.push(name.to_string());
        argv.push(value.to_string());
    }
}

/// The repetitions the launcher proposes: quick's (`quick::QUICK_REPS`, 6), the fewest for
/// which a cell has the 95 % interval of its median and a comparison can be tested.
pub const PROPOSED_REPS: u32 = quick::QUICK_REPS;

/// The repetitions question, with the numbers the run enforces: the interval of the median
/// needs `MIN_VALUES_FOR_CI` (6); a comparison (crossover, winner) is "not tested" below the
/// fewest repetitions a side with which the rank test can reach p < 0.05 (4).
pub fn reps_question() -> String {
    format!(
        "repetitions ({} give intervals of the median and tested comparisons; with fewer than {} nothing is tested)",
        crate::measure::stats::MIN_VALUES_FOR_CI,
        fewest_testable_reps()
    )
}

/// The fewest repetitions a side with which a comparison can be significant at all.
pub fn fewest_testable_reps() -> usize {
    (1..100)
        .find(|n| crate::report::crossover::testable(*n, *n))
        .unwrap_or(100)
}

/// What the launcher says before the questions of where threads run: quick's pinning, or why
/// it cannot pin.
fn pin_note(pins: Option<(usize, usize)>) -> String {
    match pins {
        Some((client, server)) => format!(
            "  quick's design: client on CPU {client}, server on CPU {server} (pinned: the scheduler cannot move them mid-window), {PROPOSED_REPS} repetitions"
        ),
        None => format!(
            "  not pinned: fewer than two CPUs are available to this process, so client and server share one; {PROPOSED_REPS} repetitions"
        ),
    }
}

/// The CPU list proposed for one end: its pinned CPU, or none.
fn pin_default(pins: Option<(usize, usize)>, server: bool) -> String {
    match pins {
        Some((c, s)) => (if server { s } else { c }).to_string(),
        None => "none".into(),
    }
}

/// The questions every network family asks last, in this order: window, warm-up, where each
/// side's threads run (quick's pinning proposed), repetitions (quick's 6 proposed).
fn ask_window_cpus_and_reps<R: BufRead, W: Write>(
    p: &mut Prompter<R, W>,
    argv: &mut Vec<String>,
) -> anyhow::Result<()> {
    flag(argv, "--duration", &p.ask("measured window per cell", "1s")?);
    flag(argv, "--warmup", &p.ask("warm-up per cell", "200ms")?);
    p.say(&pin_note(p.pins))?;
    let (client, server) = (pin_default(p.pins, false), pin_default(p.pins, true));
    flag(
        argv,
        "--client-cpus",
        &p.ask("pin client threads to CPUs (none, 0, 0-1)", &client)?,
    );
    flag(
        argv,
        "--server-cpus",
        &p.ask("pin server threads to CPUs (none, 1, 2-3)", &server)?,
    );
    flag(argv, "--reps", &p.ask(&reps_question(), &PROPOSED_REPS.to_string())?);
    Ok(())
}

fn ask_command<R: BufRead, W: Write>(p: &mut Prompter<R, W>) -> anyhow::Result<Vec<String>> {
    p.say("What do you want to measure?")?;
    let family = ask_family(p)?;
    let mut argv: Vec<String> = Vec::new();
    match family.as_str() {
        "copy modes" => {
            argv.extend(["net".into(), "stream".into()]);
            let names: Vec<&str> = CopyMode::ALL.iter().map(|m| m.as_str()).collect();
            let modes = p.choose_many("modes", &names, "all")?;
            flag(&mut argv, "--mode", &modes);
            flag(
                &mut argv,
                "--size",
                &p.ask("message sizes (4K,64K or 1K..1M)", "4K,64K,1M")?,
            );
            flag(&mut argv, "--threads", &p.ask("client threads (1,2 or 1..4)", "1")?);
            ask_window_cpus_and_reps(p, &mut argv)?;
        }
        "server models" => ask_servers(p, &mut argv)?,
        "OS microbenchmarks" => ask_micro(p, &mut argv)?,
        "record store" => {
            argv.extend(["net".into(), "records".into()]);
            let names: Vec<&str> = RecordsMode::ALL.iter().map(|m| m.as_str()).collect();
            let modes = p.choose_many("modes", &names, "all")?;
            flag(&mut argv, "--mode", &modes);
            flag(&mut argv, "--record-size", &p.ask("record sizes (128,1K)", "128,1K")?);
            flag(
                &mut argv,
                "--records",
                &p.ask("records per response (1,8,16 or 1..32)", "1..32")?,
            );
            flag(
                &mut argv,
                "--table",
                &p.ask("table size (several times the last-level cache)", "256M")?,
            );
            ask_window_cpus_and_reps(p, &mut argv)?;
        }
        "request/response" | "connect per request" => {
            let crr = family == "connect per request";
            argv.extend(["net".into(), if crr { "crr" } else { "rr" }.into()]);
            // crr closes its socket every transaction: modes whose completions are read from
            // the socket's error queue cannot follow (the parser refuses them).
            let names: Vec<&str> = CopyMode::ALL
                .iter()
                .filter(|m| !crr || !crate::net::workload::rr::per_socket_completions(**m))
                .map(|m| m.as_str())
                .collect();
            let modes = p.choose_many("modes", &names, if crr { "1,2" } else { "1,2,3" })?;
            flag(&mut argv, "--mode", &modes);
            flag(&mut argv, "--request-size", &p.ask("request sizes (64,1K)", "64")?);
            flag(&mut argv, "--response-size", &p.ask("response sizes (64,16K)", "64")?);
            flag(&mut argv, "--threads", &p.ask("client threads (1,2 or 1..4)", "1")?);
            ask_window_cpus_and_reps(p, &mut argv)?;
        }
        _ => {
            argv.push("fake".into());
            flag(&mut argv, "--cells", &p.ask("cells", "sleep:300ms,sleep:300ms")?);
            flag(&mut argv, "--reps", &p.ask("repetitions", &PROPOSED_REPS.to_string())?);
        }
    }
    flag(&mut argv, "--name", &p.ask("a name for the run", "none")?);
    let db = crate::store::default_db_path().display().to_string();
    flag(&mut argv, "--db", &p.ask("results database", &db)?);
    Ok(argv)
}

/// Which family of experiments (a number, or `fake` for the test workload).
fn ask_family<R: BufRead, W: Write>(p: &mut Prompter<R, W>) -> anyhow::Result<String> {
    Ok(loop {
        for (i, (name, about)) in FAMILIES.iter().enumerate() {
            p.say(&format!("  {}) {name:<20} {about}", i + 1))?;
        }
        let answer = p.ask("experiment", "1")?;
        if answer == "fake" {
            break "fake".to_string();
        }
        match pick(&answer, &FAMILIES) {
            Some(f) => break f,
            None => p.say(&format!("  '{answer}' is not one of 1 to {}", FAMILIES.len()))?,
        }
    })
}

/// `servers`' questions: models, request, clients, window, pinning and repetitions.
fn ask_servers<R: BufRead, W: Write>(p: &mut Prompter<R, W>, argv: &mut Vec<String>) -> anyhow::Result<()> {
    argv.push("servers".into());
    let names: Vec<&str> = Model::ALL.iter().map(|m| m.as_str()).collect();
    let models = p.choose_many("models", &names, "all")?;
    flag(argv, "--model", &models);
    flag(argv, "--request", &p.ask("request (echo:64, procs:2)", "echo:64")?);
    flag(argv, "--clients", &p.ask("concurrent clients", "1,10,100")?);
    flag(argv, "--duration", &p.ask("measured window per cell", "1s")?);
    flag(argv, "--warmup", &p.ask("warm-up per cell", "200ms")?);
    p.say(&pin_note(p.pins))?;
    let (client, server) = (pin_default(p.pins, false), pin_default(p.pins, true));
    flag(
        argv,
        "--server-cpus",
        &p.ask("pin server threads to CPUs (none, 1, 0-1)", &server)?,
    );
    flag(
        argv,
        "--client-cpus",
        &p.ask("pin load-generator threads to CPUs", &client)?,
    );
    flag(argv, "--reps", &p.ask(&reps_question(), &PROPOSED_REPS.to_string())?);
    Ok(())
}

/// `micro`'s questions: the benchmark, quick or not, and repetitions.
fn ask_micro<R: BufRead, W: Write>(p: &mut Prompter<R, W>, argv: &mut Vec<String>) -> anyhow::Result<()> {
    argv.push("micro".into());
    let benches: Vec<(String, &str)> = std::iter::once(("all".to_string(), "every benchmark"))
        .chain(Bench::ALL.iter().map(|b| (b.to_string(), b.description())))
        .collect();
    let borrowed: Vec<(&str, &str)> = benches.iter().map(|(n, d)| (n.as_str(), *d)).collect();
    argv.push(p.choose("benchmark", &borrowed, 0)?);
    if p.ask("quick (fewer samples, smaller sizes)? y/n", "y")?
        .starts_with('y')
    {
        argv.push("--quick".into());
    }
    // Each micro cell takes its own samples, with their interval: one repetition is
    // a full measurement; more compare the runs of a benchmark with each other.
    flag(
        argv,
        "--reps",
        &p.ask("repetitions (each cell takes its own samples and their interval)", "1")?,
    );
    Ok(())
}

/// What the launcher decided: the plan file to run, or nothing (the person said no).
fn decide<R: BufRead, W: Write>(p: &mut Prompter<R, W>) -> anyhow::Result<Option<PlanFile>> {
    p.say("iopath: what moving data through this machine costs. Enter keeps the [default].")?;
    loop {
        let file = PlanFile::new(ask_command(p)?);
        let plan = file.plan().map(|(plan, _)| plan);
        let plan = match plan {
            Ok(plan) => plan,
            Err(e) => {
                p.say(&format!(
                    "\nThat is not a valid experiment: {e}\nAgain, with your answers as defaults:\n"
                ))?;
                continue;
            }
        };
        let cells = plan.cells(&Default::default());
        p.say(&format!("\nThe equivalent command:\n  {}", file.command_line()))?;
        p.say(&format!(
            "{} cell{}, about {} of measuring.",
            cells.len(),
            if cells.len() == 1 { "" } else { "s" },
            crate::format::format_duration_s(plan.planned_seconds(&cells))
        ))?;
        let save = p.ask_fresh("save the plan as TOML (a path, or Enter for no)", "")?;
        if !save.is_empty() {
            file.save(&PathBuf::from(&save))?;
            p.say(&format!("saved: `iopath run --plan {save}` runs it again"))?;
        }
        let go = p.ask_fresh("run it now with the live view? y/n (e to edit)", "y")?;
        match go.chars().next() {
            Some('y') | Some('Y') => return Ok(Some(file)),
            Some('e') => continue,
            _ => return Ok(None),
        }
    }
}

/// The earlier run in `db` with exactly these cases, if any.
fn previous_run(db: &std::path::Path, run_id: i64) -> Option<i64> {
    let store = Store::open_existing(db).ok()?;
    let keys = |id: i64| -> Option<Vec<String>> { Some(store.cases(id).ok()?.iter().map(|c| c.key()).collect()) };
    let mine = keys(run_id)?;
    store
        .list_runs()
        .ok()?
        .iter()
        .rev()
        .filter(|r| r.id < run_id)
        .find(|r| keys(r.id).as_ref() == Some(&mine))
        .map(|r| r.id)
}

/// Run the launcher on this terminal.
pub fn run() -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let mut prompter = Prompter {
        input: stdin.lock(),
        output: std::io::stdout(),
        memory: HashMap::new(),
        pins: quick::quick_pins(),
    };
    let file = match decide(&mut prompter) {
        Ok(Some(file)) => file,
        Ok(None) => {
            crate::tell!("nothing ran.");
            return Ok(());
        }
        Err(e) if e.downcast_ref::<Quit>().is_some() => {
            crate::tell!("\nnothing ran.");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    drop(prompter);
    let (plan, flags) = file.plan()?;
    let db = flags.db_path();
    super::stored::set_command_line(file.command_line());
    let result = super::run::measure(&plan, &flags, true);
    let db_text = db.display().to_string();
    if let Some(run_id) = Store::open_existing(&db).ok().and_then(|s| {
        s.list_runs()
            .ok()?
            .iter()
            .rev()
            .find(|r| r.command_line == file.command_line())
            .map(|r| r.id)
    }) {
        crate::tell!("results: run {run_id} in {db_text}");
        crate::tell!("report:  iopath report {run_id} --db {db_text}");
        if let Some(previous) = previous_run(&db, run_id) {
            crate::tell!(
                "compare with the previous run of the same cases: iopath compare {previous} {run_id} --db {db_text}"
            );
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(lines: &[&str]) -> (anyhow::Result<Vec<String>>, String) {
        answers_pinned(lines, None)
    }

    fn answers_pinned(lines: &[&str], pins: Option<(usize, usize)>) -> (anyhow::Result<Vec<String>>, String) {
        let text = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
        let mut out = Vec::new();
        let result = {
            let mut p = Prompter {
                input: std::io::Cursor::new(text),
                output: &mut out,
                memory: HashMap::new(),
                pins,
            };
            ask_command(&mut p)
        };
        (result, String::from_utf8_lossy(&out).into_owned())
    }

    /// The defaults are quick's design: 6 repetitions (what the run needs for intervals and
    /// tested comparisons, and what the question says), client and server pinned to quick's
    /// two CPUs of this machine, or not pinned with the reason said.
    #[test]
    fn defaults_give_a_valid_copy_mode_sweep_with_quicks_design() {
        let pins = quick::quick_pins();
        let (argv, out) = answers_pinned(&["", "", "", "", "", "", "", "", "", "", ""], pins);
        let file = PlanFile::new(argv.unwrap());
        match pins {
            Some((c, s)) => {
                assert!(
                    file.command_line()
                        .contains(&format!("--client-cpus {c} --server-cpus {s} --reps 6")),
                    "{}",
                    file.command_line()
                );
                assert!(
                    out.contains(&format!("quick's design: client on CPU {c}, server on CPU {s}")),
                    "{out}"
                );
            }
            None => assert!(out.contains("not pinned: fewer than two CPUs"), "{out}"),
        }
        assert!(
            out.contains("repetitions (6 give intervals of the median and tested comparisons; with fewer than 4 nothing is tested) [6]:"),
            "{out}"
        );
        assert_eq!(file.command[..2], ["net", "stream"]);
        assert!(
            file.command_line().contains("--mode two-copy,one-copy,zero-copy,uring"),
            "{}",
            file.command_line()
        );
        let (plan, _) = file.plan().unwrap();
        // Every mode at the three default sizes.
        assert_eq!(plan.cases.len(), CopyMode::ALL.len() * 3);
        assert_eq!(plan.repetitions, 6);
        assert_eq!(plan.repetitions as usize, crate::measure::stats::MIN_VALUES_FOR_CI);
        assert!(crate::report::crossover::testable(6, 6) && !crate::report::crossover::testable(3, 3));
    }

    /// Every `--reps` help (net stream's, shared by every measuring command through
    /// `RunFlags`) states the numbers the run enforces and the launcher proposes.
    #[test]
    fn the_reps_help_states_the_numbers_the_run_enforces() {
        let cmd = crate::cli::command();
        let stream = cmd
            .find_subcommand("net")
            .and_then(|n| n.find_subcommand("stream"))
            .expect("net stream");
        let reps = stream.get_arguments().find(|a| a.get_id() == "reps").expect("--reps");
        let help = reps.get_long_help().or(reps.get_help()).expect("help").to_string();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        for says in [
            format!("needs {} or more", crate::measure::stats::MIN_VALUES_FOR_CI),
            format!("tested from {} a side", fewest_testable_reps()),
            format!("the launcher run {PROPOSED_REPS}"),
        ] {
            assert!(help.contains(&says), "{says:?} not in: {help}");
        }
        assert_eq!(PROPOSED_REPS as usize, crate::measure::stats::MIN_VALUES_FOR_CI);
    }

    /// With two CPUs the proposal is quick's pinning; with one it says why it cannot pin.
    #[test]
    fn the_pinning_proposed_is_quicks_or_the_reason_it_cannot_pin() {
        let (argv, out) = answers_pinned(&["1", "1", "4K", "", "", "", "", "", "", "", ""], Some((0, 1)));
        let line = PlanFile::new(argv.unwrap()).command_line();
        assert!(line.contains("--client-cpus 0 --server-cpus 1 --reps 6"), "{line}");
        assert!(out.contains("pin client threads to CPUs (none, 0, 0-1) [0]:"), "{out}");
        assert!(out.contains("pin server threads to CPUs (none, 1, 2-3) [1]:"), "{out}");
        let (argv, out) = answers_pinned(&["1", "1", "4K", "", "", "", "", "", "", "", ""], None);
        let line = PlanFile::new(argv.unwrap()).command_line();
        assert!(!line.contains("-cpus") && line.contains("--reps 6"), "{line}");
        assert!(
            out.contains("not pinned: fewer than two CPUs are available to this process"),
            "{out}"
        );
    }

    #[test]
    fn choices_by_number_and_name_and_a_second_try() {
        let (argv, out) = answers(&["9", "2", "5,epoll", "", "1,10", "", "", "", "", "2", "srv", "x.db"]);
        let argv = argv.unwrap();
        assert!(out.contains("'9' is not one of 1 to 6"), "{out}");
        let line = PlanFile::new(argv).command_line();
        assert!(line.starts_with("iopath servers --model poll,epoll "), "{line}");
        assert!(line.contains("--clients 1,10") && line.contains("--reps 2"), "{line}");
        assert!(line.ends_with("--name srv --db x.db"), "{line}");
    }

    #[test]
    fn a_refused_answer_is_shown_and_the_questions_start_again() {
        let input = [
            "fake", "bogus", "", "", "x.db", "fake", "ok:2", "1", "", "x.db", "", "n",
        ];
        let (decided, out) = decide_on(input.iter());
        assert!(out.contains("That is not a valid experiment: --cells"), "{out}");
        assert!(
            out.contains("experiment [fake]: cells [bogus]:"),
            "answers are remembered: {out}"
        );
        assert!(out.contains("iopath fake --cells ok:2 --reps 1 --db x.db"), "{out}");
        assert!(out.contains("1 cell, about"), "{out}");
        assert!(decided.is_none(), "the person said no");
    }

    /// `decide` on these answers, one a line: what it decided and what it printed.
    fn decide_on<'a>(answers: impl Iterator<Item = &'a &'a str>) -> (Option<PlanFile>, String) {
        let text: String = answers.map(|l| format!("{l}\n")).collect();
        let mut out = Vec::new();
        let decided = decide(&mut Prompter {
            input: std::io::Cursor::new(text),
            output: &mut out,
            memory: HashMap::new(),
            pins: None,
        })
        .unwrap();
        (decided, String::from_utf8_lossy(&out).into_owned())
    }

    /// Issue 32 D: the equivalent command is printed whole on one line, however long (the
    /// defaults' is over 100 characters), so it copies into a shell as it is.
    #[test]
    fn the_equivalent_command_is_printed_unwrapped() {
        let defaults = [""; 11];
        let line = PlanFile::new(answers(&defaults).0.unwrap()).command_line();
        assert!(line.len() > 100, "{line}");
        let (_, out) = decide_on(defaults.iter().chain(&["", "n"]));
        assert!(out.contains(&format!("The equivalent command:\n  {line}\n")), "{out}");
    }

    #[test]
    fn end_of_input_quits() {
        let (result, _) = answers(&["2"]);
        assert!(result.unwrap_err().downcast_ref::<Quit>().is_some());
    }

    #[test]
    fn the_record_store_is_the_fourth_family() {
        let (argv, _) = answers(&["4", "1,3", "128", "1,16", "16M", "", "", "", "", "", "", "r.db"]);
        let line = PlanFile::new(argv.unwrap()).command_line();
        assert_eq!(
            line,
            "iopath net records --mode copy-out,zero-copy --record-size 128 --records 1,16 --table 16M --duration 1s --warmup 200ms --reps 6 --db r.db"
        );
    }

    #[test]
    fn microbenchmarks_are_picked_by_name() {
        let (argv, _) = answers(&["3", "memlat", "y", "", "", "m.db"]);
        let line = PlanFile::new(argv.unwrap()).command_line();
        assert_eq!(line, "iopath micro memlat --quick --reps 1 --db m.db");
    }

    /// Found in issue 19: the launcher offered no rr or crr.
    #[test]
    fn request_response_and_connect_per_request_are_families_too() {
        let (argv, out) = answers(&["5", "", "64,1K", "64", "1", "", "", "", "", "", "", "rr.db"]);
        let line = PlanFile::new(argv.unwrap()).command_line();
        assert!(
            out.contains("request/response") && out.contains("connect per request"),
            "{out}"
        );
        assert_eq!(
            line,
            "iopath net rr --mode two-copy,one-copy,zero-copy --request-size 64,1K --response-size 64 --threads 1 --duration 1s --warmup 200ms --reps 6 --db rr.db"
        );
        let (argv, out) = answers(&["6", "", "", "", "", "", "", "", "", "", "", "crr.db"]);
        let line = PlanFile::new(argv.unwrap()).command_line();
        assert!(!out.contains(") zero-copy"), "crr offers zero-copy: {out}");
        assert!(line.starts_with("iopath net crr --mode two-copy,one-copy "), "{line}");
    }
}
