//! The progress bar: cell label, count and ETA on stderr; hidden when stderr is not a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar over `total` cells, announcing about how long they take when there are several.
    pub fn planned(total: usize, planned_seconds: f64) -> Progress {
        let progress = Progress::new(total);
        if total > 1 && planned_seconds >= 1.0 {
            progress.note(&format!(
                "{total} cells, about {} of measuring",
                crate::format::format_duration_s(planned_seconds)
            ));
        }
        progress
    }

    pub fn new(total: usize) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
        if !std::io::stderr().is_terminal() {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        let style = ProgressStyle::with_template("{bar:30} {pos}/{len} cells  eta {eta}  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Progress { bar }
    }

    /// A bar that never draws (tests, library callers).
    pub fn hidden(total: usize) -> Progress {
        Progress {
            bar: ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::hidden()),
        }
    }

    pub fn start_cell(&self, label: &str) {
        self.bar.set_message(label.to_string());
    }

    pub fn finish_cell(&self) {
        self.bar.inc(1);
    }

    /// Print a line above the bar (or plainly when hidden).
    pub fn note(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
