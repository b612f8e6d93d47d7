//! A CLI that teaches: every command's --help has examples that are real commands, shell
//! completions and manual pages are generated, --version names the commit, a run whose stderr
//! is not a terminal prints plain progress lines, and `iopath` alone prints help without
//! prompting.

mod common;

use clap::{CommandFactory, Parser};
use common::{iopath, stderr, stdout, temp_db};
use iopath::cli::Cli;
use std::time::Duration;

/// Every visible subcommand path at every level ("net stream", "micro memlat", ...),
/// the root first.
fn command_paths() -> Vec<Vec<String>> {
    fn walk(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(path.clone());
        for sub in cmd.get_subcommands() {
            if sub.is_hide_set() || sub.get_name() == "help" {
                continue;
            }
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            walk(sub, p, out);
        }
    }
    let mut out = Vec::new();
    walk(&Cli::command(), Vec::new(), &mut out);
    out
}

/// The example lines of a help text: the indented lines after `Examples:` up to the first
/// blank line.
fn examples(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Examples:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
        .collect()
}

/// An example line as argv: what follows `#`, `>` or `|` belongs to the shell; single quotes
/// group words.
fn argv(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut started = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                started = true;
            }
            '#' | '>' | '|' if !quoted && !started => break,
            c if c.is_whitespace() && !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// Issue 33: one tree. The leaf commands `--help` shows are at most 35 (55 when every
/// measuring command had a `sweep` mirror); the old spellings still parse, hidden.
#[test]
fn the_help_shows_one_tree_of_at_most_35_leaf_commands() {
    let paths = command_paths();
    let leaves: Vec<String> = paths
        .iter()
        .filter(|p| !paths.iter().any(|q| q.len() == p.len() + 1 && q.starts_with(p)))
        .map(|p| p.join(" "))
        .collect();
    assert!(leaves.len() <= 35, "{} leaf commands: {leaves:?}", leaves.len());
    for old in ["sweep", "export", "micro list"] {
        assert!(
            !leaves.iter().any(|l| l == old || l.starts_with(&format!("{old} "))),
            "{old}: {leaves:?}"
        );
    }
    let top = stdout(&iopath().arg("--help").output().unwrap());
    assert!(!top.contains("  sweep") && !top.contains("  export"), "{top}");
    for old in [
        &["sweep", "net-stream", "--help"][..],
        &["sweep", "--resume", "1", "--help"],
        &["export", "--help"],
        &["micro", "list", "--help"],
    ] {
        let out = iopath().args(old).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{old:?}: {}", stderr(&out));
    }
}

/// The README promises examples in every command's --help: each subcommand at every level has
/// an `Examples:` section, one of them names the command itself, and every example parses
/// with the real parser (without running).
#[test]
fn every_help_has_examples_that_parse() {
    let paths = command_paths();
    assert!(paths.len() > 40, "{} commands found", paths.len());
    let mut checked = 0;
    for path in &paths {
        let out = iopath().args(path).arg("--help").output().unwrap();
        let help = stdout(&out);
        let name = if path.is_empty() {
            "iopath".to_string()
        } else {
            path.join(" ")
        };
        assert_eq!(out.status.code(), Some(0), "{name} --help: {}", stderr(&out));
        let lines = examples(&help);
        assert!(!lines.is_empty(), "`{name} --help` has no Examples: section:\n{help}");
        let leaf = path.last().cloned().unwrap_or_default();
        assert!(
            lines.iter().any(|l| argv(l).contains(&leaf) || path.is_empty()),
            "no example of `{name}` names it: {lines:?}"
        );
        for line in &lines {
            let words = argv(line);
            assert_eq!(words.first().map(String::as_str), Some("iopath"), "{name}: {line}");
            if let Err(e) = Cli::try_parse_from(&words) {
                panic!("example in `{name} --help` does not parse: {line}\n{e}");
            }
            // `iopath ab … -- COMMAND`: the command after `--` parses as a command of its own.
            if let Some(at) = words.iter().position(|w| w == "--") {
                let inner: Vec<&str> = std::iter::once("iopath")
                    .chain(words[at + 1..].iter().map(String::as_str))
                    .collect();
                if let Err(e) = Cli::try_parse_from(&inner) {
                    panic!("the command after -- in `{name} --help` does not parse: {line}\n{e}");
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} examples");
}

#[test]
fn example_lines_split_like_a_shell() {
    assert_eq!(argv("iopath a 'b|c' d > x  # y"), ["iopath", "a", "b|c", "d"]);
    assert_eq!(argv("iopath man | man -l -"), ["iopath", "man"]);
    assert_eq!(argv("iopath quick   # about a minute"), ["iopath", "quick"]);
}

/// Completion scripts for every shell clap_complete knows, each naming several subcommands.
#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = iopath().args(["man", "--completions", shell]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        assert!(script.len() > 1000, "{shell}: {} bytes", script.len());
        for sub in ["stream", "resume", "memlat", "compare", "load"] {
            assert!(script.contains(sub), "{shell} script does not mention {sub}");
        }
    }
    let out = iopath().args(["man", "--completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("bash"), "{}", stderr(&out));
    // The old spelling still prints the same script.
    let old = iopath().args(["completions", "bash"]).output().unwrap();
    let new = iopath().args(["man", "--completions", "bash"]).output().unwrap();
    assert_eq!((old.status.code(), stdout(&old)), (Some(0), stdout(&new)));
}

/// `iopath man` prints iopath(1); `-o DIR` writes it and one page per subcommand.
#[test]
fn man_pages_are_generated() {
    let out = iopath().arg("man").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let page = stdout(&out);
    assert!(page.contains(".TH iopath 1"), "{}", &page[..page.len().min(400)]);
    for sub in ["net", "run", "micro", "report", "man"] {
        assert!(page.contains(sub), "iopath.1 does not mention {sub}");
    }
    let (dir, _) = temp_db("unused");
    let man = dir.path().join("man1");
    let out = iopath().args(["man", "-o"]).arg(&man).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for name in [
        "iopath.1",
        "iopath-net-stream.1",
        "iopath-micro-memlat.1",
        "iopath-procs-query.1",
        "iopath-man.1",
    ] {
        let text = std::fs::read_to_string(man.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(text.contains(".TH"), "{name}");
    }
    let stream = std::fs::read_to_string(man.join("iopath-net-stream.1")).unwrap();
    assert!(
        stream.contains("zero\\-copy") || stream.contains("zero-copy"),
        "{stream}"
    );
    let pages = std::fs::read_dir(&man).unwrap().count();
    assert_eq!(pages, command_paths().len(), "one page per command");
    for hidden in [
        "iopath-fake.1",
        "iopath-sweep.1",
        "iopath-export.1",
        "iopath-micro-list.1",
    ] {
        assert!(!man.join(hidden).exists(), "hidden commands have no page: {hidden}");
    }
}

/// --version names the commit (or "unknown" outside git) and the build profile.
#[test]
fn version_names_the_commit_and_profile() {
    let out = iopath().arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.starts_with("iopath 0."), "{text}");
    assert!(text.contains("(commit "), "{text}");
    let profile = if cfg!(debug_assertions) {
        "debug build"
    } else {
        "release build"
    };
    assert!(text.contains(profile), "{text}");
    let commit = text.split("(commit ").nth(1).and_then(|t| t.split(',').next()).unwrap();
    assert!(
        commit == "unknown" || commit.chars().all(|c| c.is_ascii_alphanumeric() || "-.".contains(c)),
        "{commit}"
    );
}

/// Without a terminal, a sweep prints plain progress lines on stderr: the estimate first, the
/// first and last cell numbered from 1 with their 1-based repetition, and a closing line; a
/// 2-second run prints no more than those (one line every 5 s at most in between).
#[test]
fn a_sweep_without_a_terminal_prints_plain_progress_lines() {
    let (_dir, db) = temp_db("progress.db");
    let out = iopath()
        .args([
            "sweep",
            "fake",
            "--cells",
            "sleep:300ms,sleep:300ms",
            "--reps",
            "3",
            "--db",
        ])
        .arg(&db)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // The line before the cells (what the plan can detect: tests/compare.rs) aside.
    // (wrapped at 100 columns: its continuation lines are indented).
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| !l.starts_with("detectable against") && !l.starts_with("    "))
        .collect();
    assert!(lines[0].starts_with("6 cells, about 2 s"), "{err}");
    let cells: Vec<&&str> = lines.iter().filter(|l| l.starts_with("cell ")).collect();
    assert_eq!(cells.len(), 2, "first and last only: {err}");
    assert!(
        cells[0].starts_with("cell 1/6 fake#0 sleep:300ms rep 0  elapsed "),
        "{err}"
    );
    assert!(cells[0].contains(" eta "), "{err}");
    assert!(
        cells[1].starts_with("cell 6/6 fake#1 sleep:300ms rep 2  elapsed "),
        "{err}"
    );
    assert!(err.contains("6/6 cells done in "), "{err}");
    assert!(
        !err.contains('\r') && !err.contains('\u{1b}'),
        "no bar or escapes: {err:?}"
    );
}

/// The estimate before a run counts the warm-up cell.
#[test]
fn the_estimate_counts_the_warm_up_cell() {
    let out = iopath()
        .args(["fake", "--cells", "sleep:1s,ok", "--warmup-cell", "--json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // After the line of what the plan can detect (a run of several cases), wrapped.
    let progress: Vec<&str> = err
        .lines()
        .skip_while(|l| l.starts_with("detectable against") || l.starts_with("    "))
        .collect();
    assert!(
        progress
            .first()
            .is_some_and(|l| l.starts_with("2 cells plus a discarded warm-up cell, about 2 s")),
        "{err}"
    );
    assert!(err.contains("warm-up cell (discarded): fake#0 sleep:1000ms"), "{err}");
}

/// `iopath` with no arguments and no terminal prints the help and exits 2; it never waits
/// for input.
#[test]
fn no_arguments_without_a_terminal_prints_help_and_never_prompts() {
    let out = iopath()
        .write_stdin("")
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let text = stderr(&out) + &stdout(&out);
    assert!(text.contains("Usage: iopath <COMMAND>"), "{text}");
    assert!(text.contains("Examples:"), "{text}");
}

/// The command an example's words name, as users see it (`iopath::cli::command()`), and the
/// words after it.
fn resolve<'a>(root: &'a clap::Command, words: &'a [String]) -> (&'a clap::Command, Vec<String>) {
    let mut cmd = root;
    let mut path = vec!["iopath".to_string()];
    for w in words.iter().skip(1) {
        match cmd.find_subcommand(w) {
            Some(sub) if !w.starts_with('-') => {
                cmd = sub;
                path.push(w.clone());
            }
            _ => break,
        }
    }
    (cmd, path)
}

/// Every flag an example in a `--help` uses is one of that command's shown options (not
/// hidden, as another `micro <bench>`'s options are): the examples teach only what the
/// options list documents.
#[test]
fn every_flag_in_a_help_example_is_among_that_commands_options() {
    let root = iopath::cli::command();
    let mut problems = Vec::new();
    for path in command_paths() {
        let out = iopath().args(&path).arg("--help").output().unwrap();
        for line in examples(&stdout(&out)) {
            let all = argv(&line);
            // `iopath ab … -- COMMAND`: the flags after `--` are COMMAND's.
            let split = all.iter().position(|w| w == "--").unwrap_or(all.len());
            let inner: Vec<String> = std::iter::once("iopath".to_string())
                .chain(all.iter().skip(split + 1).cloned())
                .collect();
            for words in [&all[..split], &inner[..]].into_iter().filter(|w| w.len() > 1) {
                let (cmd, at) = resolve(&root, words);
                for flag in words.iter().filter(|w| w.starts_with("--")) {
                    let long = flag.trim_start_matches('-').split('=').next().unwrap_or_default();
                    if long.is_empty() || long == "help" || long == "version" {
                        continue;
                    }
                    let shown = cmd
                        .get_arguments()
                        .any(|a| a.get_long() == Some(long) && !a.is_hide_set());
                    if !shown {
                        problems.push(format!("`{}`: {flag} in: {line}", at.join(" ")));
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "flags in examples that the command's options do not show:\n{}",
        problems.join("\n")
    );
}

/// Completion offers what the CLI does: not the hidden test workload `fake`, and the values
/// of `--mode`, `--rx-mode` and `--topology` by name instead of file names; each
/// `micro <bench> --help` lists only that bench's options.
#[test]
fn completion_and_micro_help_show_what_each_command_takes() {
    let bash = stdout(&iopath().args(["man", "--completions", "bash"]).output().unwrap());
    assert!(!bash.contains("fake"), "the hidden test workload is offered");
    for (flag, value) in [
        ("--mode", "zero-copy"),
        ("--rx-mode", "scatter"),
        ("--topology", "loopback"),
    ] {
        let arm = bash
            .split(&format!("{flag})"))
            .nth(1)
            .and_then(|rest| rest.split(";;").next())
            .unwrap_or_default()
            .to_string();
        assert!(arm.contains(value) && !arm.contains("compgen -f"), "{flag}: {arm}");
    }
    for shell in ["zsh", "fish"] {
        let script = stdout(&iopath().args(["man", "--completions", shell]).output().unwrap());
        assert!(!script.contains("fake"), "{shell} offers fake");
        assert!(script.contains("uring-zc"), "{shell} does not offer the modes");
    }
    let help = |args: &[&str]| stdout(&iopath().args(args).arg("--help").output().unwrap());
    let memlat = help(&["micro", "memlat"]);
    assert!(memlat.contains("--max") && memlat.contains("--stride"), "{memlat}");
    for other in [
        "--program",
        "--pinned",
        "--topology",
        "--cache-max",
        "--procs",
        "--size ",
    ] {
        assert!(!memlat.contains(other), "micro memlat --help lists {other}");
    }
    let tcp = help(&["micro", "tcp"]);
    assert!(tcp.contains("--topology") && !tcp.contains("--max"), "{tcp}");
    let all = help(&["micro", "all"]);
    assert!(all.contains("--max") && all.contains("--program"), "{all}");
    // The spelling of a remote topology in the help is one the parser takes.
    let stream = help(&["net", "stream"]);
    assert!(stream.contains("remote:HOST:PORT"), "{stream}");
    assert!(Cli::try_parse_from(["iopath", "net", "stream", "--topology", "remote:10.0.0.2:5201"]).is_ok());
}
