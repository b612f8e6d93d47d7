//! Plain-text tables for the terminal (every one is a [`Table`], drawn by comfy-table):
//! right-aligned numbers, left-aligned text. A measuring command's default table fits
//! [`WIDTH`] columns; `--wide` prints every column.

/// The widest line a default table prints (a terminal of 100 columns).
pub const WIDTH: usize = 100;

/// When a column is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    /// Always: the columns that say which case a row is.
    Key,
    /// In the default table while it fits [`WIDTH`]; the last such columns are left out first.
    Default,
    /// In the default table while it fits, left out (the last first) before any `Default` one.
    Spare,
    /// Only with `--wide`.
    Wide,
}

/// How a measuring command's table is printed: the default, or every column (`--wide`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct View {
    pub wide: bool,
}

/// A table with a header row, drawn by comfy-table without borders: every column as wide as
/// its widest cell on screen (display width, so a wide character counts twice), two spaces
/// between columns, a cell that starts with a digit or `-` right-aligned, anything else
/// (titles, labels, `~` marks) left-aligned. The one text-table renderer of the CLI.
pub struct Table {
    header: Vec<String>,
    show: Vec<Show>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table every column of which is always printed (tables that are not a measuring
    /// command's).
    pub fn new(header: &[&str]) -> Table {
        Table::with_columns(&header.iter().map(|h| (*h, Show::Key)).collect::<Vec<_>>())
    }

    /// A table whose columns say when they are printed (see [`Table::render_view`]).
    pub fn with_columns(columns: &[(&str, Show)]) -> Table {
        Table {
            header: columns.iter().map(|(h, _)| h.to_string()).collect(),
            show: columns.iter().map(|(_, s)| *s).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The column titles, in order.
    pub fn header(&self) -> &[String] {
        &self.header
    }

    /// Every column.
    pub fn render(&self) -> String {
        render_columns(self.drawn(), &vec![true; self.header.len()])
    }

    /// `--wide`: every column. Otherwise the key and default columns, leaving out default
    /// columns from the last one back until every line fits [`WIDTH`]; returns the text and
    /// the titles of the columns left out (wide-only ones included).
    pub fn render_view(&self, view: View) -> (String, Vec<String>) {
        let drawn = self.drawn();
        if view.wide {
            return (render_columns(drawn, &vec![true; self.header.len()]), Vec::new());
        }
        let mut keep: Vec<bool> = self.show.iter().map(|s| *s != Show::Wide).collect();
        let widths = drawn.column_max_content_widths();
        let line_width = |keep: &[bool]| -> usize {
            let shown: Vec<usize> = widths
                .iter()
                .zip(keep)
                .filter(|(_, k)| **k)
                .map(|(w, _)| *w as usize)
                .collect();
            shown.iter().sum::<usize>() + GAP as usize * shown.len().saturating_sub(1)
        };
        while line_width(&keep) > WIDTH {
            let last_of = |show: Show| (0..keep.len()).rev().find(|i| keep[*i] && self.show[*i] == show);
            let Some(last) = last_of(Show::Spare).or_else(|| last_of(Show::Default)) else {
                break;
            };
            keep[last] = false;
        }
        let left_out = self
            .header
            .iter()
            .zip(&keep)
            .filter(|(_, k)| !**k)
            .map(|(h, _)| h.clone())
            .collect();
        (render_columns(drawn, &keep), left_out)
    }

    /// The comfy-table table of every column: no borders, no lines, the header first.
    fn drawn(&self) -> comfy_table::Table {
        use comfy_table::{Cell, CellAlignment};
        let mut drawn = comfy_table::Table::new();
        drawn.load_preset(comfy_table::presets::NOTHING);
        drawn.set_header(self.header.iter().map(Cell::new));
        for row in &self.rows {
            drawn.add_row(row.iter().take(self.header.len()).map(|cell| {
                let numeric = cell.chars().next().is_some_and(|c| c.is_ascii_digit() || c == '-');
                match numeric {
                    true => Cell::new(cell).set_alignment(CellAlignment::Right),
                    false => Cell::new(cell),
                }
            }));
        }
        drawn
    }
}

/// The spaces between two columns.
const GAP: u16 = 2;

/// `drawn` with the columns `keep` says, each line's trailing spaces trimmed.
fn render_columns(mut drawn: comfy_table::Table, keep: &[bool]) -> String {
    for (column, keep) in drawn.column_iter_mut().zip(keep) {
        column.set_padding((0, GAP));
        if !keep {
            column.set_constraint(comfy_table::ColumnConstraint::Hidden);
        }
    }
    let mut text = drawn.trim_fmt();
    text.push('\n');
    text
}

/// Break `text` into lines of at most [`WIDTH`] characters at spaces (a word longer than a
/// line stays whole), the lines after the first indented by `indent` spaces.
pub fn wrap(text: &str, indent: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    // Whether `line` holds a word yet (after its indentation).
    let mut has_word = false;
    for word in text.split(' ') {
        if has_word && line.chars().count() + 1 + word.chars().count() > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = " ".repeat(indent);
            has_word = false;
        }
        if has_word {
            line.push(' ');
        }
        line.push_str(word);
        has_word = true;
    }
    if has_word {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The findings about published claims of `cells` (report/claims.rs), under a title, wrapped
/// for the terminal; empty when no claim has both its sides here.
pub fn claims_text(cells: &[crate::report::cells::CellSummary], ab: Option<&crate::store::ab::AbRun>) -> String {
    let Some(group) = crate::report::findings::claims_group(cells, ab) else {
        return String::new();
    };
    let mut text = format!("{}:\n", group.title);
    for line in group.lines {
        text.push_str(&wrap(&format!("  {line}"), 4));
    }
    text
}

/// The line under a default table that names the columns it left out, if any.
pub fn left_out_line(left_out: &[String]) -> String {
    match left_out.len() {
        0 => String::new(),
        n => wrap(
            &format!(
                "{n} more {} with --wide: {}",
                if n == 1 { "column" } else { "columns" },
                left_out.join(", ")
            ),
            2,
        ),
    }
}

pub use crate::format::format_number as num;

/// Stored or remote text for the terminal (see [`crate::format::escape_control`]): use it
/// wherever a run name, label, stored error or a peer's message is printed.
pub use crate::format::escape_control as safe;

/// One record per case, in the order the cases first appear, each metric the median of the
/// repetitions that measured it (its source from the first of those; unavailable when none
/// did); with the number of repetitions merged.
/// Warnings and placement come from the first repetition.
pub fn median_records(records: &[crate::store::Record]) -> Vec<(crate::store::Record, usize)> {
    let mut groups: Vec<Vec<&crate::store::Record>> = Vec::new();
    for r in records {
        match groups.iter_mut().find(|g| g[0].case == r.case) {
            Some(g) => g.push(r),
            None => groups.push(vec![r]),
        }
    }
    groups
        .into_iter()
        .map(|group| {
            let mut merged = group[0].clone();
            for m in merged.observation.metrics.iter_mut() {
                let measured: Vec<&crate::observation::Metric> = group
                    .iter()
                    .filter_map(|r| r.observation.get(&m.name, m.role))
                    .filter(|x| x.value.is_some_and(f64::is_finite))
                    .collect();
                let mut values: Vec<f64> = measured.iter().filter_map(|x| x.value).collect();
                if let Some(first) = measured.first() {
                    // The value and its source come from repetitions that measured it.
                    m.value = Some(crate::measure::stats::median(&mut values));
                    m.source = first.source.clone();
                }
            }
            for r in &group[1..] {
                for w in &r.observation.warnings {
                    if !merged.observation.warnings.contains(w) {
                        merged.observation.warnings.push(w.clone());
                    }
                }
            }
            (merged, group.len())
        })
        .collect()
}

static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Write `text` to stdout, with every control character other than line feed and tab made
/// visible ([`crate::format::escape_control_keep_lines`]): whatever stored or remote text a
/// printer forgot to escape cannot set the window title, clear the screen or write the
/// clipboard. A closed pipe (`iopath sysinfo | head -1`) is not an error: the
/// reader has what it wanted, so later output is dropped quietly and the command goes on (a
/// run still stores its cells) and exits as it would have. Other write errors are
/// `StoreError::CannotWrite` (exit 2).
pub fn out(text: impl AsRef<str>) -> anyhow::Result<()> {
    use std::io::Write;
    use std::sync::atomic::Ordering;
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let text = crate::format::escape_control_keep_lines(text.as_ref());
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        // A stdout that cannot be written (`> /dev/full`) is an output that cannot be
        // written: exit 2, as for a file.
        Err(e) => Err(crate::store::StoreError::CannotWrite {
            path: "standard output".into(),
            detail: e.to_string(),
        }
        .into()),
        Ok(()) => Ok(()),
    }
}

/// `println!` through [`out`]: `say!("x = {}", x)?`.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::cli::output::out(format!("{}\n", format_args!($($arg)*)))
    };
}

/// A column's cell: from a row's record and the number of repetitions merged into it.
pub type Cell<'a> = Box<dyn Fn(&crate::store::Record, usize) -> String + 'a>;

/// A key column of a workload's table: `f` of the row's case when it is a `C` (empty when
/// the row is another workload's).
pub fn case_key<'a, C: crate::case::Workload>(title: &'static str, f: fn(&C) -> String) -> Column<'a> {
    Column::key(title, move |r, _| r.case.get::<C>().map(f).unwrap_or_default())
}

/// One column of a measuring command's table: its title, when it shows, its cell for a row
/// (a case's merged record and how many repetitions were merged) and, for a figure, where its
/// numbers came from.
pub struct Column<'a> {
    pub title: &'static str,
    pub show: Show,
    pub cell: Cell<'a>,
    pub source: Option<String>,
}

impl<'a> Column<'a> {
    /// A column that says which case a row is (no source).
    pub fn key(title: &'static str, cell: impl Fn(&crate::store::Record, usize) -> String + 'a) -> Column<'a> {
        Column {
            title,
            show: Show::Key,
            cell: Box::new(cell),
            source: None,
        }
    }

    /// A metric's median: `n/a` when unavailable, `-` when the case does not produce it.
    pub fn metric(
        title: &'static str,
        show: Show,
        name: &'static str,
        role: crate::observation::Role,
        records: &[crate::store::Record],
    ) -> Column<'a> {
        Column {
            title,
            show,
            cell: Box::new(move |r, _| match r.observation.get(name, role) {
                Some(m) => num(m.value),
                None => "-".into(),
            }),
            source: metric_source(records, name, role),
        }
    }
}

/// Render `rows` with `columns` in `view`: the table, the columns a default view left out, and
/// the `sources:` line of the columns shown. When a default table must leave figures out to
/// fit, key columns (after the first) that hold one value in every row give their place
/// first: they are said once, on an `every row:` line, instead.
pub fn render_table(columns: &[Column], rows: &[(crate::store::Record, usize)], view: View) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|(r, reps)| columns.iter().map(|c| (c.cell)(r, *reps)).collect())
        .collect();
    let build = |skip: &[usize]| {
        let kept = |i: &usize| !skip.contains(i);
        let header: Vec<(&str, Show)> = (0..columns.len())
            .filter(kept)
            .map(|i| (columns[i].title, columns[i].show))
            .collect();
        let mut table = Table::with_columns(&header);
        for row in &cells {
            table.row((0..columns.len()).filter(kept).map(|i| row[i].clone()).collect());
        }
        table.render_view(view)
    };
    let (mut text, mut left_out) = build(&[]);
    let constant: Vec<usize> = (1..columns.len())
        .filter(|i| columns[*i].show == Show::Key && cells.len() >= 2)
        .filter(|i| cells.iter().all(|row| row[*i] == cells[0][*i]))
        .collect();
    let figure_left_out = columns
        .iter()
        .any(|c| matches!(c.show, Show::Default | Show::Spare) && left_out.iter().any(|t| t == c.title));
    let mut caption = String::new();
    if figure_left_out && !constant.is_empty() {
        (text, left_out) = build(&constant);
        let said: Vec<String> = constant
            .iter()
            .map(|i| format!("{} {}", columns[*i].title, cells[0][*i]))
            .collect();
        caption = wrap(&format!("every row: {}", said.join(", ")), 2);
    }
    text.push_str(&caption);
    text.push_str(&left_out_line(&left_out));
    let sources: Vec<(String, String)> = columns
        .iter()
        .filter(|c| !left_out.iter().any(|t| t == c.title))
        .filter_map(|c| Some((c.title.to_string(), c.source.clone()?)))
        .collect();
    text.push_str(&sources_line(&sources));
    text
}

/// The warnings of `records`, one `note:` line per kind (placement, noise, zero copy …) in the
/// order the kinds are declared: its title, in how many of the cases it was given, and its text
/// (the first one, `e.g.` when the cases' texts differ); `--wide` adds what to do about it.
/// Warnings of kind `other` (text only) are one line per distinct text.
pub fn notes(records: &[crate::store::Record], view: View) -> String {
    use crate::observation::WarningKind;
    struct Group<'a> {
        kind: WarningKind,
        text: &'a str,
        varied: bool,
        cases: Vec<&'a crate::case::Case>,
    }
    let mut cases: Vec<&crate::case::Case> = Vec::new();
    let mut groups: Vec<Group> = Vec::new();
    for r in records {
        if !cases.contains(&&r.case) {
            cases.push(&r.case);
        }
        for w in &r.observation.warnings {
            let same = |g: &&mut Group| g.kind == w.kind && (w.kind != WarningKind::Other || g.text == w.text);
            match groups.iter_mut().find(|g| same(g)) {
                Some(g) => {
                    g.varied |= g.text != w.text;
                    if !g.cases.contains(&&r.case) {
                        g.cases.push(&r.case);
                    }
                }
                None => groups.push(Group {
                    kind: w.kind,
                    text: &w.text,
                    varied: false,
                    cases: vec![&r.case],
                }),
            }
        }
    }
    groups.sort_by_key(|g| g.kind);
    let mut out = String::new();
    for g in groups {
        let title = match g.kind {
            WarningKind::Other => String::new(),
            kind => format!("{} ", kind.title()),
        };
        let count = format!(
            "({} of {} {})",
            g.cases.len(),
            cases.len(),
            if cases.len() == 1 { "case" } else { "cases" }
        );
        let example = if g.varied { "e.g. " } else { "" };
        let mut line = format!("note: {title}{count}: {example}{}", safe(g.text));
        if view.wide && !g.kind.advice().is_empty() {
            line.push_str(&format!(". What to do: {}.", g.kind.advice()));
        }
        out.push_str(&wrap(&line, 6));
    }
    out
}

/// The `sources:` line: the columns grouped by where their numbers came from (`tool`,
/// `rusage`, `unavailable: <reason>` …), from `(column title, source)` pairs, wrapped.
pub fn sources_line(columns: &[(String, String)]) -> String {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for (title, source) in columns {
        match groups.iter_mut().find(|(s, _)| s == source) {
            Some((_, titles)) => titles.push(title),
            None => groups.push((source, vec![title])),
        }
    }
    if groups.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(source, titles)| format!("{source}: {}", titles.join(", ")))
        .collect();
    wrap(&format!("sources: {}", parts.join("; ")), 9)
}

/// Where the values of one metric came from over `records`: the one source, or `mixed`; None
/// when no record has the metric.
pub fn metric_source(records: &[crate::store::Record], name: &str, role: crate::observation::Role) -> Option<String> {
    let mut sources: Vec<String> = Vec::new();
    for m in records.iter().filter_map(|r| r.observation.get(name, role)) {
        let s = m.source.to_string();
        if !sources.contains(&s) {
            sources.push(s);
        }
    }
    match sources.len() {
        0 => None,
        1 => sources.pop(),
        _ => Some("mixed".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Case, FakeBehaviour, FakeCase};
    use crate::observation::{Metric, Observation, Role, Source};
    use crate::store::Record;

    fn record(repetition: u32, metric: Metric) -> Record {
        let mut observation = Observation::default();
        observation.push(metric);
        Record {
            run_id: None,
            label: "fake".into(),
            case: Case::Fake(FakeCase {
                index: 0,
                behaviour: FakeBehaviour::Ok { value: 1 },
            }),
            repetition,
            observation,
            error: None,
        }
    }

    /// Found in review: a first repetition without the value put its "unavailable" source
    /// beside the median of the others.
    #[test]
    fn the_median_takes_its_source_from_the_repetitions_that_measured() {
        let merged = median_records(&[
            record(0, Metric::unavailable("x", Role::System, "u", "not counted")),
            record(1, Metric::new("x", Role::System, 2.0, "u", Source::Software)),
            record(2, Metric::new("x", Role::System, 4.0, "u", Source::Software)),
        ]);
        let m = &merged[0].0.observation.metrics[0];
        assert_eq!((m.value, &m.source, merged[0].1), (Some(3.0), &Source::Software, 3));
        let none = median_records(&[record(0, Metric::unavailable("x", Role::System, "u", "no"))]);
        assert_eq!(none[0].0.observation.metrics[0].value, None);
    }

    fn table() -> Table {
        let mut t = Table::with_columns(&[
            ("key", Show::Key),
            ("first", Show::Default),
            ("second", Show::Default),
            ("spare", Show::Spare),
            ("hidden", Show::Wide),
        ]);
        t.row(vec![
            "k".into(),
            "1".repeat(40),
            "2".repeat(40),
            "3".repeat(30),
            "4".into(),
        ]);
        t
    }

    /// The default view leaves out spare columns first, then default ones from the last, never
    /// a key; `--wide` prints everything.
    #[test]
    fn the_default_view_fits_100_columns_and_wide_prints_every_column() {
        let (text, left_out) = table().render_view(View::default());
        assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
        assert_eq!(left_out, ["spare", "hidden"]);
        assert!(text.starts_with("key  first"), "{text}");
        let (text, left_out) = table().render_view(View { wide: true });
        assert!(left_out.is_empty());
        let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(header, ["key", "first", "second", "spare", "hidden"], "{text}");
        let mut t = Table::with_columns(&[("key", Show::Key), ("a", Show::Default), ("b", Show::Default)]);
        t.row(vec!["k".into(), "1".repeat(60), "2".repeat(60)]);
        assert_eq!(t.render_view(View::default()).1, ["b"], "the last default goes first");
    }

    /// A label of wide characters (a CJK run name) takes two columns a character on screen:
    /// the next column starts at the same place on every line.
    #[test]
    fn columns_line_up_by_the_width_on_screen() {
        let mut t = Table::new(&["name", "value"]);
        t.row(vec!["速度".into(), "1".into()]);
        t.row(vec!["abcde".into(), "22".into()]);
        assert_eq!(t.render(), "name   value\n速度       1\nabcde     22\n");
    }

    #[test]
    fn wrap_breaks_at_spaces_within_100_columns_with_a_hanging_indent() {
        let text = format!("note: {}", "word ".repeat(60));
        let wrapped = wrap(text.trim_end(), 6);
        let lines: Vec<&str> = wrapped.lines().collect();
        assert!(lines.len() >= 3, "{wrapped}");
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH), "{wrapped}");
        assert!(lines[1..].iter().all(|l| l.starts_with("      word")), "{wrapped}");
        assert_eq!(wrapped.split_whitespace().count(), 61, "no word lost");
        assert_eq!(wrap("short line", 2), "short line\n");
    }

    /// Issue 18 D: placement and noise warnings are one line per kind, with the count.
    #[test]
    fn notes_are_one_line_per_kind_with_the_count_of_cases() {
        use crate::observation::WarningKind;
        let with = |index, warnings: &[(WarningKind, &str)]| {
            let mut r = record(0, Metric::new("x", Role::System, 1.0, "u", Source::Tool));
            r.case = Case::Fake(FakeCase {
                index,
                behaviour: FakeBehaviour::Ok { value: 1 },
            });
            for (kind, text) in warnings {
                r.observation.warn(*kind, text.to_string());
            }
            r
        };
        let records = [
            with(
                0,
                &[
                    (WarningKind::Migrated, "1 threads migrated"),
                    (WarningKind::Noisy, "x: 9%"),
                ],
            ),
            with(1, &[(WarningKind::Migrated, "2 threads migrated")]),
            with(2, &[(WarningKind::Migrated, "1 threads migrated")]),
            with(3, &[]),
        ];
        let text = notes(&records, View::default());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "note: Threads migrated between CPUs (3 of 4 cases): e.g. 1 threads migrated",
                "note: Noisy samples (1 of 4 cases): x: 9%",
            ]
        );
        assert!(notes(&records, View { wide: true }).contains("What to do: pin threads"));
    }
}
