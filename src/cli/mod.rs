//! The command line: clap definitions (raw flags) and their validation into plans, in two
//! stages. `run` dispatches a parsed command; exit codes are decided in main.rs.

pub mod ab;
pub mod error;
pub mod examples;
pub mod fake;
pub mod fleet;
pub mod launcher;
pub mod live;
pub mod load;
pub mod merge;
pub mod micro;
pub mod net;
pub mod output;
pub mod planfile;
pub mod progress;
pub mod quick;
pub mod records;
pub mod results;
pub mod rr;
pub mod run;
pub mod servers;
pub mod stored;
pub mod summary;
pub mod sysinfo;
pub mod udp_rr;
pub mod udp_stream;
pub mod values;
pub mod workloads;

pub use error::UsageError;

use crate::sweep::Plan;
use clap::{Args, CommandFactory, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

/// The version line: the package version, the commit it was built from (`git describe` at
/// build time, "unknown" outside a git checkout) and the build profile.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("IOPATH_COMMIT"),
    ", ",
    env!("IOPATH_PROFILE"),
    " build)"
);

const EXAMPLES: &str = "\
Examples:
  iopath quick                                  # every copy mode on loopback, with an HTML report
  iopath net stream --mode one-copy,zero-copy --size 4K..1M
  iopath net stream --size 1K..1M --reps 6 --shuffle   # stored as a run, with its findings
  iopath run --resume 4                         # finish run 4 after Ctrl-C or a crash
  iopath servers --model epoll,uring --clients 1,100
  iopath micro                                  # the OS microbenchmarks
  iopath runs
  iopath report                                 # the newest run in iopath-results/iopath.db
  iopath completions bash > ~/.local/share/bash-completion/completions/iopath

Every command has examples in its --help; `iopath man -o DIR` writes the manual pages.";

/// iopath measures what moving data through this machine costs: throughput, time per
/// message, CPU time, cycles, cache misses and context switches for each I/O primitive, with
/// the source of every number (pmu, software, rusage, tool, estimate).
#[derive(Parser, Debug)]
#[command(
    name = "iopath",
    version = VERSION,
    about,
    long_about = None,
    propagate_version = true,
    after_help = EXAMPLES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Network benchmarks: stream a structured message, request/response (rr, crr), UDP datagrams (udp-stream, udp-rr), in every send mode.
    #[command(subcommand, after_help = examples::NET)]
    Net(net::NetCommand),
    /// A one-minute sweep of the copy modes on loopback, saved to the database, with an HTML report.
    #[command(after_help = examples::QUICK)]
    Quick(quick::QuickArgs),
    /// Run a plan saved as TOML, or finish an interrupted run (the cells it is missing).
    #[command(after_help = examples::RUN)]
    Run(stored::PlanOrResumeArgs),
    /// List the runs in the results database.
    #[command(after_help = examples::RUNS)]
    Runs(results::RunsArgs),
    /// Write the self-contained HTML report (and PNG/SVG charts) of a run, or its data as CSV
    /// or JSON (--format).
    #[command(after_help = examples::REPORT)]
    Report(results::ReportArgs),
    /// Export a run's observations as CSV or JSON: `report --format` (kept for scripts).
    #[command(hide = true, after_help = examples::EXPORT)]
    Export(results::ExportArgs),
    /// Copy every run of other iopath databases into one, with new ids and their provenance.
    #[command(after_help = examples::MERGE)]
    Merge(merge::MergeArgs),
    /// Measure pairs of `net serve --agent` agents (all pairs, a ring, a star, a list) in
    /// rounds of disjoint pairs, stored as one run.
    #[command(subcommand, after_help = fleet::EXAMPLES)]
    Fleet(fleet::FleetCommand),
    /// Interleaved A/B of system settings or flags in one run: every cell as A and as B, in pairs.
    #[command(after_help = examples::AB)]
    Ab(Box<ab::AbArgs>),
    /// Compare two runs cell by cell, with a significance test.
    #[command(after_help = examples::COMPARE)]
    Compare(results::CompareArgs),
    /// OS microbenchmarks in the style of lmbench: syscalls, context switches, memory, disks.
    #[command(after_help = examples::MICRO)]
    Micro(micro::MicroArgs),
    /// Describe this machine: CPU, caches, memory, NICs, kernel, counters, io_uring.
    #[command(after_help = examples::SYSINFO)]
    Sysinfo(sysinfo::SysinfoArgs),
    /// Compare server concurrency models (iterative, threads, pool, select, poll, epoll, io_uring).
    #[command(after_help = examples::SERVERS)]
    Servers(servers::ServersArgs),
    /// The top-k CPU process service: serve it, or query a running one.
    #[command(subcommand, after_help = examples::PROCS)]
    Procs(servers::ProcsCommand),
    /// The old spelling of `man --completions SHELL`.
    #[command(hide = true, after_help = examples::COMPLETIONS)]
    Completions(CompletionsArgs),
    /// Write the manual pages: iopath.1 on stdout, or iopath.1 and one page per subcommand
    /// into a folder; or a shell completion script (--completions SHELL).
    #[command(after_help = examples::MAN)]
    Man(ManArgs),
    /// The deterministic test workload: cells that return, sleep, fail or panic on command.
    #[command(hide = true)]
    Fake(fake::FakeArgs),
}

/// The command line as users see it: the derived [`Cli`] with each `micro <bench>` showing
/// only the options that bench reads (and the shared ones) in its `--help`, man page and
/// completions. Parsing is unchanged.
pub fn command() -> clap::Command {
    in_order(
        in_order(Cli::command(), "micro", micro::scope_options),
        "fleet",
        fleet::scope_options,
    )
}

/// `cmd` with its subcommand `name` changed by `f`, the subcommands kept in their order
/// (clap's `mut_subcommand` moves the changed one to the end, which reorders the lists that
/// errors and help show): every subcommand is taken out and put back in turn.
fn in_order(cmd: clap::Command, name: &str, f: impl FnOnce(clap::Command) -> clap::Command) -> clap::Command {
    let names: Vec<String> = cmd.get_subcommands().map(|c| c.get_name().to_string()).collect();
    let mut f = Some(f);
    let mut cmd = cmd;
    for sub in names {
        let change = (sub == name).then(|| f.take()).flatten();
        cmd = cmd.mut_subcommand(sub, |c| match change {
            Some(f) => f(c),
            None => c,
        });
    }
    cmd
}

/// Parse the process's arguments with [`command`].
pub fn parse() -> Result<Cli, clap::Error> {
    parse_from(std::env::args_os())
}

/// Parse a command line (program name first) with [`command`], old spellings included.
pub fn parse_from(args: impl IntoIterator<Item = impl Into<OsString>>) -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    command()
        .try_get_matches_from(new_spelling(args))
        .and_then(|m| Cli::from_arg_matches(&m))
}

/// A command line of an earlier iopath in today's words. `sweep` ran a measuring command as a
/// stored run, which every measuring command now is: `sweep net-<w> …` is `net <w> …`, `sweep
/// servers|micro|udp-stream …` the command itself, and `sweep --resume|--plan …` is `run`.
/// Kept so scripts and plan files of earlier versions still work; nowhere in the help.
pub fn new_spelling(args: Vec<OsString>) -> Vec<OsString> {
    if args.get(1).and_then(|a| a.to_str()) != Some("sweep") {
        return args;
    }
    let workload = args.get(2).and_then(|a| a.to_str()).unwrap_or("-");
    let (words, rest): (Vec<&str>, _) = match workload.strip_prefix("net-") {
        _ if workload.starts_with('-') => (vec!["run"], &args[2..]),
        _ if workload == "udp-stream" => (vec!["net"], &args[2..]),
        Some(net) => (vec!["net", net], &args[3..]),
        None => (vec![workload], &args[3..]),
    };
    let words = words.into_iter().map(OsString::from);
    std::iter::once(args[0].clone())
        .chain(words)
        .chain(rest.iter().cloned())
        .collect()
}

/// A measuring command's plan and its run flags; None for a command that measures nothing or
/// plans its run its own way (`quick`, `fleet run`, `ab`). Every command is named, so a new one
/// must say which it is.
pub fn measuring(command: &Command) -> Option<anyhow::Result<(Plan, &run::RunFlags)>> {
    match command {
        Command::Net(net) => net::measuring(net),
        Command::Servers(args) => Some(Plan::try_from(args).map(|plan| (plan, &args.run))),
        Command::Micro(args) => micro::measuring(args),
        Command::Fake(args) => Some(Plan::try_from(args).map(|plan| (plan, &args.run))),
        Command::Quick(_)
        | Command::Run(_)
        | Command::Runs(_)
        | Command::Report(_)
        | Command::Export(_)
        | Command::Merge(_)
        | Command::Fleet(_)
        | Command::Ab(_)
        | Command::Compare(_)
        | Command::Sysinfo(_)
        | Command::Procs(_)
        | Command::Completions(_)
        | Command::Man(_) => None,
    }
}

/// Every measuring command as its words (`net stream`, `micro memlat`, …): the leaves of the
/// tree that [`measuring`] takes with their defaults (`hidden`: the test workload `fake` and
/// the hidden `micro list` too); for plan files, `ab` and their "(accepted: …)".
pub fn measuring_commands(hidden: bool) -> Vec<String> {
    fn leaves(cmd: &clap::Command, hidden: bool, path: Vec<String>, out: &mut Vec<Vec<String>>) {
        let subs: Vec<&clap::Command> = cmd
            .get_subcommands()
            .filter(|s| (hidden || !s.is_hide_set()) && s.get_name() != "help")
            .collect();
        if subs.is_empty() {
            out.push(path.clone());
        }
        for sub in subs {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            leaves(sub, hidden, p, out);
        }
    }
    let mut paths = Vec::new();
    leaves(&command(), hidden, Vec::new(), &mut paths);
    paths
        .into_iter()
        .filter(|path| {
            let argv = std::iter::once("iopath".to_string()).chain(path.iter().cloned());
            Cli::try_parse_from(argv).is_ok_and(|cli| measuring(&cli.command).is_some())
        })
        .map(|path| path.join(" "))
        .collect()
}

/// Run one parsed command.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    if let Some(measured) = measuring(&cli.command) {
        let (plan, flags) = measured?;
        return run::measure(&plan, flags, false);
    }
    match cli.command {
        Command::Net(cmd) => net::run(cmd),
        Command::Quick(args) => quick::run_quick(args),
        Command::Fleet(cmd) => fleet::run(cmd),
        Command::Run(args) => stored::run_stored(args),
        Command::Runs(args) => results::run_runs(args),
        Command::Report(args) => results::run_report(args),
        Command::Export(args) => results::run_export(args),
        Command::Compare(args) => results::run_compare(args),
        Command::Ab(args) => ab::run(*args),
        Command::Merge(args) => merge::run(args),
        Command::Micro(_) => micro::print_list(),
        Command::Sysinfo(args) => sysinfo::run(args),
        Command::Procs(cmd) => servers::run_procs(cmd),
        Command::Servers(_) | Command::Fake(_) => unreachable!("measured above"),
        Command::Completions(args) => {
            output::out(String::from_utf8_lossy(&completions(args.shell)))?;
            Ok(())
        }
        Command::Man(args) => run_man(args),
    }
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write iopath.1 and one page per subcommand (iopath-net-stream.1, ...) into this folder,
    /// created if missing, instead of iopath.1 on stdout.
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Print the completion script of this shell (bash, zsh, fish, elvish, powershell) on
    /// stdout instead: the visible commands, and `--topology`'s values by name.
    #[arg(long, value_enum, value_name = "SHELL", conflicts_with = "output")]
    pub completions: Option<clap_complete::Shell>,
}

/// The completion script for `shell`: the visible commands only (never the hidden test
/// workload `fake`), and the values of `--topology` offered by name instead of file names
/// (flags of named choices such as `--mode` carry their names in their parser).
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut for_completion(&command()), "iopath", &mut script);
    script
}

/// `cmd` rebuilt for a completion generator: hidden subcommands left out (clap_complete
/// offers them otherwise), and `--topology` given the kinds its parser accepts.
fn for_completion(cmd: &clap::Command) -> clap::Command {
    // clap takes 'static names; this command lives for one completion script.
    fn leak(text: &str) -> &'static str {
        Box::leak(text.to_string().into_boxed_str())
    }
    let mut out = clap::Command::new(leak(cmd.get_name()));
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    for alias in cmd.get_visible_aliases() {
        out = out.visible_alias(leak(alias));
    }
    for arg in cmd.get_arguments() {
        let mut arg = arg.clone();
        if arg.get_id() == "topology" {
            let names: Vec<&'static str> = topology_names().iter().map(|n| leak(n)).collect();
            arg = arg.value_parser(clap::builder::PossibleValuesParser::new(names));
        }
        out = out.arg(arg);
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        out = out.subcommand(for_completion(sub));
    }
    out
}

/// The topology kinds, read from the "(accepted: a, b, c)" of the refusal of a value no
/// kind takes: `veth[:mtu=N]` is offered as `veth` and `veth:`, `remote:HOST:PORT` as `remote:`.
fn topology_names() -> Vec<String> {
    let error = "\u{1}".parse::<crate::net::topology::Topology>().err();
    let Some(text) = error else { return Vec::new() };
    let Some(list) = text.split("(accepted: ").nth(1).and_then(|l| l.split(')').next()) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    for item in list.split(", ").map(str::trim) {
        let (head, options) = match item.split_once('[') {
            Some((head, _)) => (head, true),
            None => (item, false),
        };
        let head = match head.find(|c: char| c.is_ascii_uppercase()) {
            Some(i) => &head[..i],
            None => head,
        };
        if head.is_empty() || head.contains(' ') {
            continue;
        }
        names.push(head.to_string());
        if options {
            names.push(format!("{head}:"));
        }
    }
    names.dedup();
    names
}

/// Every manual page: (file name, roff text) for iopath.1 and each visible subcommand at
/// every level (iopath-net-stream.1, iopath-micro-memlat.1, ...).
pub fn man_pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    /// Each visible command with its page's name (`iopath-net-stream`), its parent's and its
    /// children's, parents first.
    fn walk(cmd: &clap::Command, parent: Option<&str>, out: &mut Vec<(clap::Command, String, Option<String>)>) {
        let name = clap_mangen::Man::new(cmd.clone()).get_filename();
        let name = name.trim_end_matches(".1").to_string();
        out.push((cmd.clone(), name.clone(), parent.map(String::from)));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, Some(&name), out);
        }
    }
    let mut cmd = command().disable_help_subcommand(true);
    cmd.build();
    let mut commands = Vec::new();
    walk(&cmd, None, &mut commands);
    let mut pages = Vec::new();
    for (cmd, name, parent) in &commands {
        let children: Vec<&str> = commands
            .iter()
            .filter(|(_, _, p)| p.as_deref() == Some(name.as_str()))
            .map(|(_, n, _)| n.as_str())
            .collect();
        pages.push((format!("{name}.1"), man_page(cmd, parent.as_deref(), &children)?));
    }
    Ok(pages)
}

/// Text for a roff line kept as it is: backslashes and hyphens escaped (a copied `\-\-mode`
/// stays two ASCII hyphens), and a line that begins with a control character made text.
fn roff_literal(line: &str) -> String {
    let text = line.replace('\\', "\\e").replace('-', "\\-");
    if text.starts_with('.') || text.starts_with('\'') {
        format!("\\&{text}")
    } else {
        text
    }
}

/// The exit codes every command shares (main.rs).
const MAN_EXIT_STATUS: &str = ".TP
0
Success.
.TP
1
A measurement failed: a failed cell (the run is still stored and can be resumed), data that
arrived corrupted, or a regression found by
.B compare \\-\\-fail\\-on\\-regression.
.TP
2
Bad input: a flag, a file or a database iopath cannot use. One line says what is wrong and
what is accepted; nothing was measured or written.
.TP
3
.B compare \\-\\-fail\\-on\\-regression
could not decide (too few runs or repetitions to tell a change from the noise).
";

const MAN_FILES: &str = ".TP
iopath\\-results/iopath.db
The results database (SQLite) that
.B quick
and every measuring command write every repetition into (another with
.B \\-\\-db
or the environment variable
.BR IOPATH_DB );
report, export and compare read it.
.TP
iopath\\-results/report\\-<run>.html
The report of a run (self\\-contained HTML), with its charts as SVG and PNG in
.IR report\\-<run>\\-charts/ .
";

/// One manual page: clap_mangen's title, NAME, SYNOPSIS, options and subcommands; a
/// DESCRIPTION only when the long help says more than NAME; then the help's examples as
/// preformatted lines (never reflowed into prose), EXIT STATUS, FILES, SEE ALSO and VERSION.
fn man_page(cmd: &clap::Command, parent: Option<&str>, children: &[&str]) -> std::io::Result<Vec<u8>> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    let about = cmd.get_about().map(|a| a.to_string());
    let long = cmd.get_long_about().map(|a| a.to_string());
    if long.is_some() && long != about {
        man.render_description_section(&mut page)?;
    }
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut page)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(&mut page)?;
    }
    let mut roff = String::new();
    if let Some(after) = cmd.get_after_long_help().or_else(|| cmd.get_after_help()) {
        let text = after.to_string();
        let lines: Vec<&str> = text.lines().filter(|l| l.trim() != "Examples:").collect();
        roff.push_str(".SH EXAMPLES\n.nf\n");
        for line in lines {
            roff.push_str(&roff_literal(line.strip_prefix("  ").unwrap_or(line)));
            roff.push('\n');
        }
        roff.push_str(".fi\n");
    }
    roff.push_str(".SH \"EXIT STATUS\"\n");
    roff.push_str(MAN_EXIT_STATUS);
    roff.push_str(".SH FILES\n");
    roff.push_str(MAN_FILES);
    let mut see: Vec<String> = Vec::new();
    if let Some(p) = parent {
        see.push(p.to_string());
    }
    see.extend(children.iter().map(|c| c.to_string()));
    if !see.is_empty() {
        roff.push_str(".SH \"SEE ALSO\"\n");
        let refs: Vec<String> = see.iter().map(|s| format!(".BR {} (1)", roff_literal(s))).collect();
        roff.push_str(&refs.join(",\n"));
        roff.push('\n');
    }
    page.extend_from_slice(roff.as_bytes());
    man.render_version_section(&mut page)?;
    Ok(page)
}

fn run_man(args: ManArgs) -> anyhow::Result<()> {
    if let Some(shell) = args.completions {
        output::out(String::from_utf8_lossy(&completions(shell)))?;
        return Ok(());
    }
    let pages = man_pages()?;
    let Some(dir) = args.output else {
        let (_, page) = pages.first().ok_or_else(|| anyhow::anyhow!("no manual page"))?;
        output::out(String::from_utf8_lossy(page))?;
        return Ok(());
    };
    if std::fs::metadata(&dir).is_ok_and(|m| !m.is_dir()) {
        let what = if crate::store::db::is_sqlite_file(&dir) {
            "it is an SQLite database (iopath never writes over one)"
        } else {
            "it is a file, not a folder"
        };
        return Err(error::usage(format!(
            "refusing to write the manual pages into {}: {what}",
            dir.display()
        )));
    }
    // Checked like every output, all pages before any is written: none replaces an SQLite file
    // (a database, or a link to one), a folder or a device.
    for (name, _) in &pages {
        let path = dir.join(name);
        crate::store::output::check_path(&path, crate::store::output::PathUse::Output, None)
            .map_err(stored::store_error)?;
        match std::fs::metadata(&path) {
            Ok(_) if crate::store::db::is_sqlite_file(&path) => {
                return Err(error::usage(format!(
                    "refusing to write {}: it is an SQLite database (iopath never writes over one)",
                    path.display()
                )))
            }
            Ok(m) if !m.is_file() => {
                return Err(error::usage(format!(
                    "refusing to write {}: it is not a regular file",
                    path.display()
                )))
            }
            _ => {}
        }
    }
    std::fs::create_dir_all(&dir).map_err(|e| error::usage(format!("cannot create {}: {e}", dir.display())))?;
    for (name, page) in &pages {
        crate::store::output::write_atomic(&dir.join(name), page).map_err(stored::store_error)?;
    }
    crate::tell!("wrote {} manual pages into {}", pages.len(), dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The old `sweep` spellings in today's words; anything else is left as it is.
    #[test]
    fn old_sweep_spellings_read_as_todays_commands() {
        let words = |line: &str| -> Vec<String> {
            new_spelling(line.split(' ').map(OsString::from).collect())
                .into_iter()
                .map(|w| w.into_string().unwrap())
                .collect()
        };
        assert_eq!(
            words("iopath sweep net-stream --size 4K"),
            ["iopath", "net", "stream", "--size", "4K"]
        );
        assert_eq!(
            words("iopath sweep udp-stream --rate 1k"),
            ["iopath", "net", "udp-stream", "--rate", "1k"]
        );
        assert_eq!(words("iopath sweep micro memlat"), ["iopath", "micro", "memlat"]);
        assert_eq!(
            words("iopath sweep --resume 3 --db a.db"),
            ["iopath", "run", "--resume", "3", "--db", "a.db"]
        );
        assert_eq!(words("iopath sweep"), ["iopath", "run"]);
        assert_eq!(
            words("iopath net stream --name sweep"),
            ["iopath", "net", "stream", "--name", "sweep"]
        );
    }

    /// Issue 32 B: EXAMPLES stay preformatted lines (not reflowed prose), every page has EXIT
    /// STATUS, FILES and SEE ALSO, and DESCRIPTION is left out where it would repeat NAME.
    #[test]
    fn man_pages_keep_examples_as_lines_and_have_the_usual_sections() {
        let pages = man_pages().unwrap();
        let page = |name: &str| {
            let bytes = &pages
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("{name}"))
                .1;
            String::from_utf8(bytes.clone()).unwrap()
        };
        let stream = page("iopath-net-stream.1");
        let examples = stream
            .split(".SH EXAMPLES\n.nf\n")
            .nth(1)
            .expect("an EXAMPLES section")
            .split("\n.fi\n")
            .next()
            .unwrap();
        let want = examples::NET_STREAM.lines().filter(|l| l.trim() != "Examples:").count();
        assert_eq!(examples.lines().count(), want, "one roff line per example: {examples}");
        assert!(
            examples.lines().any(
                |l| l == "iopath net stream \\-\\-mode zero\\-copy \\-\\-size 1M \\-\\-verify \\-\\-json > zc.json"
            ),
            "{examples}"
        );
        for section in [
            ".SH \"EXIT STATUS\"",
            ".SH FILES",
            ".SH \"SEE ALSO\"",
            ".BR iopath\\-net (1)",
        ] {
            assert!(stream.contains(section), "{section}: {stream}");
        }
        assert!(!stream.contains(".SH EXTRA"), "{stream}");
        // NAME already says what `about` says.
        assert!(!stream.contains(".SH DESCRIPTION"), "{stream}");
        let root = page("iopath.1");
        assert!(root.contains(".BR iopath\\-run (1)"), "{root}");
        assert!(!root.contains("iopath\\-sweep"), "the old spelling is hidden: {root}");
        assert_eq!(roff_literal(".x \\ -y"), "\\&.x \\e \\-y");
    }
}
