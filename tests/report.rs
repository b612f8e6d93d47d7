//! `iopath report` as a user runs it: one self-contained HTML file with every chart, the
//! crossover table and the per-cell statistics, and the charts as SVG and PNG beside it.

mod common;

use common::{iopath, stderr};
use std::time::Duration;

#[test]
fn report_holds_every_chart_and_the_crossover_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("iopath.db");
    let out = iopath()
        .args([
            "sweep",
            "net-stream",
            "--size",
            "1K,16K",
            "--threads",
            "1,2",
            "--reps",
            "2",
        ])
        .args([
            "--duration",
            "100ms",
            "--warmup",
            "100ms",
            "--name",
            "report test",
            "--db",
        ])
        .arg(&db)
        .timeout(Duration::from_secs(180))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    let html_path = dir.path().join("out/report.html");
    std::fs::create_dir_all(html_path.parent().unwrap()).unwrap();
    let out = iopath()
        .args(["report", "--db"])
        .arg(&db)
        .arg("-o")
        .arg(&html_path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("report.html"));

    let html = std::fs::read_to_string(&html_path).unwrap();
    let charts = [
        "throughput_vs_size",
        "time_per_msg_vs_threads",
        "cpu_per_byte_vs_size",
        "net_vs_app_cpu_vs_size",
        "cycles_per_byte_vs_size",
        "cache_misses_vs_size",
        "context_switches_vs_size",
        "zerocopy_not_copied_vs_size",
    ];
    for stem in charts {
        // A chart with nothing to plot (no PMU here) is one line of text, not an empty box.
        assert!(
            html.contains(&format!("<figure id=\"{stem}\""))
                || html.contains(&format!("<figure class=\"empty\" id=\"{stem}\"")),
            "chart {stem} missing from the report"
        );
        for ext in ["svg", "png"] {
            let file = dir.path().join(format!("out/report-charts/{stem}.{ext}"));
            // A chart with nothing to plot (no PMU here) is small but still a picture.
            let bytes = std::fs::read(&file).unwrap_or_default();
            let is_picture = if ext == "svg" {
                bytes.starts_with(b"<svg")
            } else {
                bytes.starts_with(b"\x89PNG")
            };
            assert!(
                is_picture && bytes.len() > 500,
                "{} missing or not a picture",
                file.display()
            );
        }
    }
    assert!(dir.path().join("out/report-charts/summary.png").is_file());
    for section in [
        "Crossover sizes",
        "one-copy",
        "zero-copy",
        "Per-case statistics",
        "Findings",
        "Re-run this",
        "Noise warnings",
        "Environment",
        "report test",
    ] {
        assert!(html.contains(section), "'{section}' missing from the report");
    }
    // The story first: the headline numbers, then the findings per thread count, before the
    // charts, on any screen (issue 32 B: the numbers were 6,000 px down).
    let numbers = html.find("id=\"numbers\"").expect("a headline numbers section");
    let findings = html.find("id=\"findings\"").expect("a findings section");
    assert!(numbers < findings && findings < html.find("id=\"charts\"").unwrap());
    let headline = &html[numbers..findings];
    for part in [
        "net stream, 1 thread: throughput_gbps (Gbit/s)",
        "net stream, 2 threads",
        "one-copy",
        "1KiB",
    ] {
        assert!(
            headline.contains(part),
            "'{part}' missing from the headline numbers: {headline}"
        );
    }
    for thread in ["net stream, 1 thread", "net stream, 2 threads", "Noise: "] {
        assert!(html.contains(thread), "'{thread}' missing from the findings");
    }
    assert!(html.contains("name=\"viewport\""));
    // Machine figures in human units, not raw bytes and hertz.
    assert!(html.contains("RAM") && html.contains(" GHz"));
    // Three pairs x two thread counts, none testable with 2 repetitions a side: the crossover
    // table's six rows all say so. (A loaded machine can leave a 100 ms cell without a throughput, and its
    // pairs then read "not tested (1 repetition)": still a row that claims nothing.)
    let crossover = &html[html.find("id=\"crossover\"").unwrap()..html.find("id=\"cells\"").unwrap()];
    assert_eq!(crossover.matches("not tested (").count(), 6);
    // The findings say it too, once per question they could not test.
    assert!(html.contains("not tested (2 repetitions per case"));
    // Loopback copies every zero-copy send: the report must say so.
    assert!(
        html.contains("zero-copy was copied by the kernel"),
        "zero-copy caveat missing"
    );
    // Self-contained: no scripts, nothing loaded from elsewhere (SVG's xmlns is a name, not a fetch).
    assert!(!html.contains("<script"));
    for attr in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!html.contains(attr), "the report loads '{attr}...'");
    }
}

#[test]
fn quick_refuses_an_unwritable_report_path_before_running_anything() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("iopath.db");
    let out = iopath()
        .args(["quick", "-o", "/nonexistent-dir/report.html", "--db"])
        .arg(&db)
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("does not exist") && err.lines().count() == 1, "{err}");
    assert!(
        !db.exists(),
        "nothing may run or be stored before the output path is checked"
    );
}

/// Issue 19 E12, end to end: the iterative model serves one connection at a time, so of three
/// persistent clients exactly one gets replies. The cell carries a `minority-served` warning and
/// its counts, the report leaves it out of the charts and says why, and every command the
/// report prints names the database it is in.
#[test]
fn a_server_model_whose_clients_mostly_failed_is_marked_and_not_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lab.db");
    let out = iopath()
        .args([
            "servers",
            "--model",
            "iterative",
            "--clients",
            "3",
            "--duration",
            "200ms",
            "--warmup",
            "50ms",
            "--json",
            "--db",
        ])
        .arg(&db)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let records: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let obs = &records[0]["observation"];
    let metric = |name: &str| {
        obs["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .and_then(|m| m["value"].as_f64())
    };
    assert_eq!(metric("clients_served"), Some(1.0), "{obs}");
    assert_eq!(metric("served_fraction").map(|f| (f * 3.0).round()), Some(1.0));
    assert!(
        obs["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["kind"] == "minority-served" && w["text"].as_str().unwrap().starts_with("only 1 of 3 clients")),
        "{obs}"
    );

    let html_path = dir.path().join("r.html");
    let out = iopath()
        .args(["report", "-o"])
        .arg(&html_path)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(
        html.contains("MOST CLIENTS FAILED"),
        "the per-case table marks the cell"
    );
    assert!(
        html.contains(
            "NOT DRAWN (figures from a minority of clients or connections, never ranked): iterative at 3 clients"
        ),
        "the charts say what they leave out"
    );
    assert!(html.contains(&format!("iopath report 1 --db {}", db.display())));
}
