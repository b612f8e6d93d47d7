//! The matrix of a fleet run (issue 23): the section of `iopath report` and the page of
//! `iopath report --matrix`, on fleet runs written by the synthetic generator through the
//! store's write path (no agents needed), and the refusals of `--matrix`.

mod common;

use common::{iopath, stderr, stdout, usage_error};
use iopath::report::matrix::synth::{generate, host_name, Spec};
use iopath::store::Store;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A fleet of 6 hosts in which host 2 (10.0.0.3:7000) is slow both ways and the pair 0 -> 1
/// failed, in a database of its own; 3 repetitions (15 cells a host side: what flags a host
/// of 6 in 3 matrices).
fn fleet_db(dir: &Path) -> PathBuf {
    let db = dir.join("fleet.db");
    let mut store = Store::create_or_open(&db).unwrap();
    let mut spec = Spec::new(6);
    spec.repetitions = 3;
    spec.slow_hosts = vec![2];
    spec.failed = vec![(0, 1)];
    generate(&mut store, &spec, |_, _| {}).unwrap();
    db
}

#[test]
fn a_fleet_runs_report_has_a_matrix_section_that_flags_the_slow_host() {
    let dir = tempfile::tempdir().unwrap();
    let db = fleet_db(dir.path());
    let html_path = dir.path().join("report.html");
    let out = iopath()
        .args(["report", "--db"])
        .arg(&db)
        .arg("-o")
        .arg(&html_path)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(
        html.contains("<h2 id=\"matrix\">Fleet matrix</h2>"),
        "no matrix section"
    );
    assert!(html.contains("id=\"matrix_1_throughput\""), "no throughput heat map");
    for stem in ["matrix_1_throughput", "matrix_1_cpu_per_byte_source"] {
        for ext in ["svg", "png"] {
            let file = dir.path().join(format!("report-charts/{stem}.{ext}"));
            assert!(file.exists(), "{} missing", file.display());
        }
    }
    // The slow host is flagged, by name, and the failed pair is listed as missing.
    assert!(
        html.contains(&format!("<td>3 {}</td>", host_name(2))),
        "slow host not flagged"
    );
    assert!(html.contains("1 missing (no successful cell)"));
    assert!(html.contains(&format!("1 {} → 2 {}", host_name(0), host_name(1))));
}

#[test]
fn report_matrix_writes_the_page_of_the_matrix_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = fleet_db(dir.path());
    let html_path = dir.path().join("m.html");
    let out = iopath()
        .args(["report", "--matrix", "--db"])
        .arg(&db)
        .arg("-o")
        .arg(&html_path)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(said.contains("(6 hosts; 1 hosts and 0 links flagged;"), "{said}");
    // Each matrix's noise and what it takes to flag, and the flagged host with its test.
    assert!(
        said.contains(
            "median throughput (Gbit/s), one-copy 64KiB t1: 1 hosts and 0 links flagged. Noise: a cell lies within"
        ),
        "{said}"
    );
    assert!(said.contains("the smallest deviation flagged 4 times in 5:"), "{said}");
    assert!(
        said.contains(&format!("flagged host 3 {}: low as source: 15 / 0 of 15", host_name(2))),
        "{said}"
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.contains("<h2 id=\"matrix\">Fleet matrix</h2>"));
    assert!(!html.contains("Per-case statistics"), "only the matrix");
    assert!(html.contains(&format!("<td>3 {}</td>", host_name(2))));
    // The failed pair's square says missing (and the key under the colour bar); none says 0.
    let svg = std::fs::read_to_string(dir.path().join("m-charts/matrix_1_throughput.svg")).unwrap();
    assert_eq!(svg.matches("\nmissing\n").count(), 2);
    assert!(!svg.contains("\n0\n"));
}

#[test]
fn report_matrix_refuses_a_run_without_fleet_cells_and_other_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fake.db");
    let out = iopath()
        .args(["sweep", "fake", "--cells", "ok:1", "--db"])
        .arg(&db)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let db_text = db.to_str().unwrap();
    let html = dir.path().join("m.html");
    let err = usage_error(&["report", "--matrix", "--db", db_text, "-o", html.to_str().unwrap()]);
    assert!(err.contains("run 1 has no fleet cells (its cases are fake)"), "{err}");
    assert!(!html.exists(), "nothing written");
    let csv = dir.path().join("m.csv");
    let err = usage_error(&["report", "--matrix", "--db", db_text, "-o", csv.to_str().unwrap()]);
    assert!(err.contains("give -o a file ending in .html"), "{err}");
    let err = usage_error(&["report", "--matrix", "7", "--db", db_text]);
    assert!(err.contains("no run 7"), "{err}");
}

/// Issue 31, item 4: a fleet run whose every stored metric is what a lying agent would have
/// sent (-1, 1e308, ±inf, NaN stored as text, a text value) is "damaged", exit 2 and one line,
/// in `report --matrix`, `report`, `export` and `compare` — never a flagged host, a
/// 309-digit integer or a negative rate on the page.
#[test]
fn a_fleet_run_whose_every_value_is_impossible_is_damaged_in_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let clean = fleet_db(dir.path());
    for (i, value) in ["-1", "1e308", "1e999", "-1e999", "'NaN'", "'fast'"].iter().enumerate() {
        let db = dir.path().join(format!("lied{i}.db"));
        std::fs::copy(&clean, &db).unwrap();
        rusqlite::Connection::open(&db)
            .unwrap()
            .execute_batch(&format!("UPDATE metrics SET value = {value}"))
            .unwrap();
        let db = db.to_str().unwrap();
        let html = dir.path().join(format!("m{i}.html"));
        let html = html.to_str().unwrap();
        for args in [
            vec!["report", "--matrix", "--db", db, "-o", html],
            vec!["report", "--db", db, "-o", html],
            vec!["export", "--db", db],
            vec!["compare", "1", "1", "--db", db],
        ] {
            let err = usage_error(&args);
            assert!(err.contains("damaged"), "{args:?} with every value {value}: {err}");
        }
        assert!(!Path::new(html).exists(), "a page written from the value {value}");
    }
}

/// Issue 31.4's bound of a latency, new values: a fleet run with a stored p99 of 250 s, above
/// the 100 s a latency histogram holds, or of 45 s, above what the run's 3 s windows after
/// their warm-up can record, is "damaged" in `report --matrix` (which reads that value
/// alone) as in every other reader.
#[test]
fn a_fleet_latency_above_what_a_histogram_or_window_holds_is_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let clean = fleet_db(dir.path());
    for (value, why) in [(2.5e8, "histogram holds"), (4.5e7, "case's windows")] {
        let db = dir.path().join(format!("slow{value}.db"));
        std::fs::copy(&clean, &db).unwrap();
        let changed = rusqlite::Connection::open(&db)
            .unwrap()
            .execute(
                "UPDATE metrics SET name = 'latency_p99_us', value = ?1 \
                 WHERE rowid = (SELECT max(rowid) FROM metrics WHERE name = 'throughput_gbps')",
                [value],
            )
            .unwrap();
        assert_eq!(
            changed, 1,
            "the synthetic fleet run has throughputs, one made a p99 latency"
        );
        let db = db.to_str().unwrap();
        let html = dir.path().join("m.html");
        let html = html.to_str().unwrap();
        for args in [
            vec!["report", "--matrix", "--db", db, "-o", html],
            vec!["export", "--db", db],
        ] {
            let err = usage_error(&args);
            assert!(
                err.contains("damaged") && err.contains("latency_p99_us") && err.contains(why),
                "{args:?} with {value}: {err}"
            );
        }
        assert!(!Path::new(html).exists(), "a page written");
    }
}
