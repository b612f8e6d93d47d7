//! Findings and crossovers through the command line: a one-repetition sweep claims neither a
//! crossover nor its absence, on the terminal and in the report (issue 18 B). The wording for
//! 2 and 5 repetitions is covered by the unit tests of report::findings and report::crossover.

mod common;

use common::{iopath, stderr, stdout};
use std::time::Duration;

#[test]
fn one_repetition_is_not_tested_never_no_crossover() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("iopath.db");
    let out = iopath()
        .args([
            "sweep",
            "net-stream",
            "--mode",
            "two-copy,one-copy",
            "--size",
            "1K,16K",
            "--reps",
            "1",
            "--duration",
            "100ms",
            "--warmup",
            "50ms",
            "--db",
        ])
        .arg(&db)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("not tested (1 repetition)"), "{text}");
    assert!(
        text.contains("Whether one-copy overtakes two-copy is not tested (1 repetition per case"),
        "{text}"
    );
    for claim in [
        "no crossover in the range",
        "No crossover",
        "is fastest",
        "never the best",
    ] {
        assert!(!text.contains(claim), "'{claim}' claimed with one repetition:\n{text}");
    }

    let html = dir.path().join("report.html");
    let out = iopath()
        .args(["report", "--db"])
        .arg(&db)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("not tested (1 repetition)"),
        "crossover table of the report"
    );
    assert!(!page.contains("no crossover in the range"));
}
