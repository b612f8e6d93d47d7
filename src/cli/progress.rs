//! The progress bar long commands show on stderr (hidden when stderr is not a terminal).

use indicatif::{ProgressBar, ProgressStyle};

/// A bar over `cells` steps; `total_seconds` is the planned time, for the first ETA.
pub fn bar(cells: u64, total_seconds: f64) -> ProgressBar {
    let bar = ProgressBar::new(cells);
    let style = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} ETA {eta} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    if cells > 1 {
        bar.println(format!("{cells} cases, about {:.0} s of measuring", total_seconds));
    }
    bar
}
