//! Plain-text tables for the terminal: right-aligned numbers, left-aligned text.

/// A table with a header row; `print` pads every column to its widest cell.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let cols = self.header.len();
        let mut width = vec![0usize; cols];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (i, cell) in row.iter().enumerate().take(cols) {
                width[i] = width[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for (n, row) in std::iter::once(&self.header).chain(&self.rows).enumerate() {
            let line: Vec<String> = row
                .iter()
                .enumerate()
                .take(cols)
                .map(|(i, cell)| {
                    let numeric = n > 0 && cell.chars().next().is_some_and(|c| c.is_ascii_digit() || c == '-');
                    if numeric {
                        format!("{cell:>w$}", w = width[i])
                    } else {
                        format!("{cell:<w$}", w = width[i])
                    }
                })
                .collect();
            out.push_str(line.join("  ").trim_end());
            out.push('\n');
        }
        out
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

/// The distinct warnings of `records`, one `note: ...` line each, in the order first seen.
pub fn notes(records: &[crate::store::Record]) -> String {
    let mut seen: Vec<&crate::observation::Warning> = Vec::new();
    for w in records.iter().flat_map(|r| &r.observation.warnings) {
        if !seen.contains(&w) {
            seen.push(w);
        }
    }
    seen.iter()
        .map(|w| format!("note: {}\n", safe(&w.to_string())))
        .collect()
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
}
