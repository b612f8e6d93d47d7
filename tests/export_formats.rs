//! Exports for the history tools teams already run (docs/output.md): `export --format otava`
//! (Apache Otava's CSV: a time column, a column per metric, one row per run × case) and
//! `--format bmf` (Bencher Metric Format: per benchmark, per measure `value`, `lower_value`,
//! `upper_value`), their exact headers and shape on fake runs.

mod common;

use common::{iopath, stderr, stdout};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Output;
use std::time::Duration;

fn run(args: &[&str], db: &Path) -> Output {
    iopath()
        .args(args)
        .arg("--db")
        .arg(db)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

fn ok(args: &[&str], db: &Path) -> String {
    let out = run(args, db);
    assert!(out.status.success(), "iopath {args:?}: {}", stderr(&out));
    stdout(&out)
}

/// Run 1: a jittered case (10 repetitions: 5 7 9 11 13 15 5 7 9 11), a steady one, a failing
/// one; run 2: a jittered case of 3 repetitions (0, 0.4, 0.8).
fn fake_runs(db: &Path) {
    let out = run(&["sweep", "fake", "--cells", "ok:10~5,ok:7,fail", "--reps", "10"], db);
    assert_eq!(out.status.code(), Some(1), "a cell failed, as asked: {}", stderr(&out));
    ok(&["sweep", "fake", "--cells", "ok:1~1", "--reps", "3"], db);
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

fn rows(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().unwrap().iter().map(String::from).collect();
    let rows = reader
        .records()
        .map(|r| r.unwrap().iter().map(String::from).collect())
        .collect();
    (header, rows)
}

#[test]
fn otava_csv_has_a_time_column_and_a_column_per_metric_for_every_run_and_case() {
    let (_dir, db) = common::temp_db("otava.db");
    fake_runs(&db);
    let (header, all) = rows(&ok(&["export", "--format", "otava"], &db));
    assert_eq!(
        header,
        [
            "time",
            "run_id",
            "run_name",
            "host",
            "test",
            "workload",
            "case",
            "repetitions_ok",
            "system_value"
        ]
    );
    // Every run (no run named), one row per case with a successful repetition: the failing
    // case has none, so no row (Otava cannot read an empty value).
    assert_eq!(all.len(), 3, "{all:?}");
    let host = hostname();
    let slug: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let expect = [
        ("1", "fake#0 ok:10~5", "fake.fake-0-ok-10-5", "10", "9"),
        ("1", "fake#1 ok:7", "fake.fake-1-ok-7", "10", "7"),
        ("2", "fake#0 ok:1~1", "fake.fake-0-ok-1-1", "3", "0.4"),
    ];
    for (row, (run, case, test, reps, value)) in all.iter().zip(expect) {
        assert_eq!(row[1], run);
        assert_eq!(row[3], host);
        assert_eq!(row[4], format!("{slug}.{test}"));
        assert_eq!((row[5].as_str(), row[6].as_str()), ("fake", case));
        assert_eq!((row[7].as_str(), row[8].as_str()), (reps, value), "{row:?}");
        // The time Otava parses: the run's start as `YYYY-MM-DD HH:MM:SS +0000`.
        let t = row[0].as_bytes();
        assert_eq!(t.len(), 25, "{}", row[0]);
        assert!(row[0].ends_with(" +0000") && t[4] == b'-' && t[10] == b' ' && t[13] == b':');
        // Every metric value reads as a float, as Otava's importer reads it.
        assert!(row[8].parse::<f64>().is_ok());
    }
    // A named run: only its rows, under the same header.
    let (one_header, one) = rows(&ok(&["export", "2", "--format", "otava"], &db));
    assert_eq!(one_header, header);
    assert_eq!(one, vec![all[2].clone()]);
}

#[test]
fn bmf_has_per_benchmark_per_measure_value_and_bounds() {
    let (_dir, db) = common::temp_db("bmf.db");
    fake_runs(&db);
    let doc: Value = serde_json::from_str(&ok(&["export", "1", "--format", "bmf"], &db)).unwrap();
    // The median; the 95% interval of the median from order statistics with 10 values
    // (the 2nd and 9th: 5 and 13, narrower than min..max 5..15); the failing case is absent.
    assert_eq!(
        doc,
        json!({
            "fake/fake#0 ok:10~5": {"system_value": {"value": 9.0, "lower_value": 5.0, "upper_value": 13.0}},
            "fake/fake#1 ok:7": {"system_value": {"value": 7.0, "lower_value": 7.0, "upper_value": 7.0}},
        })
    );
    // Below 6 values there is no interval of the median: the bounds are min and max.
    let doc: Value = serde_json::from_str(&ok(&["export", "2", "--format", "bmf"], &db)).unwrap();
    let m = &doc["fake/fake#0 ok:1~1"]["system_value"];
    assert_eq!(
        (m["lower_value"].as_f64(), m["upper_value"].as_f64()),
        (Some(0.0), Some(0.8))
    );
    assert!((m["value"].as_f64().unwrap() - 0.4).abs() < 1e-12, "{m}");
    // Every measure holds numbers only, `value` always (the BMF JSON schema's one required key).
    for measures in doc.as_object().unwrap().values() {
        for m in measures.as_object().unwrap().values() {
            let m = m.as_object().unwrap();
            assert!(m.contains_key("value"));
            assert!(m
                .keys()
                .all(|k| ["value", "lower_value", "upper_value"].contains(&k.as_str())));
            assert!(m.values().all(Value::is_number));
        }
    }
}

/// The otava binary: `IOPATH_OTAVA`, or `otava` on PATH.
fn otava() -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("IOPATH_OTAVA") {
        return Some(path.into());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("otava"))
        .find(|p| p.is_file())
}

/// Apache Otava itself reads the export (one test's rows, with the config snippet of
/// docs/output.md) and finds the step of a history whose value fell by a fifth after five runs.
#[test]
fn otava_reads_the_export_and_finds_the_change_point() {
    let Some(otava) = otava() else {
        common::skip("Apache Otava is not installed (pip install apache-otava, or set IOPATH_OTAVA)");
        return;
    };
    let (dir, db) = common::temp_db("history.db");
    for night in 1..=10 {
        let scale = if night <= 5 { "1" } else { "0.8" };
        let out = iopath()
            .args(["sweep", "fake", "--cells", "noise:100~2,ok:3", "--reps", "3", "--db"])
            .arg(&db)
            .env("IOPATH_FAKE_SCALE", scale)
            .env("IOPATH_FAKE_SEED", night.to_string())
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        // Otava orders a series by time, which the store keeps to the second.
        std::thread::sleep(Duration::from_millis(1100));
    }
    let (header, all) = rows(&ok(&["export", "--format", "otava"], &db));
    let test = all[0][4].clone();
    let mut w = csv::Writer::from_path(dir.path().join("series.csv")).unwrap();
    w.write_record(&header).unwrap();
    for row in all.iter().filter(|r| r[4] == test) {
        w.write_record(row).unwrap();
    }
    w.flush().unwrap();
    std::fs::write(
        dir.path().join("otava.yaml"),
        format!(
            "tests:\n  {test}:\n    type: csv\n    file: {}\n    time_column: time\n    attributes: [run_id, host, case]\n    \
             metrics:\n      system_value:\n        direction: 1\n    csv_options:\n      delimiter: \",\"\n      quote_char: '\"'\n",
            dir.path().join("series.csv").display()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(otava)
        .args(["analyze", &test])
        .env("OTAVA_CONFIG", dir.path().join("otava.yaml"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "otava: {}{}", text, stderr(&out));
    // Ten rows of the series, and one change point between the fifth and the sixth run.
    let points: Vec<&str> = text
        .lines()
        .filter(|l| l.contains('%') && !l.contains("+0000"))
        .collect();
    assert_eq!(points.len(), 1, "{text}");
    assert!(points[0].trim().starts_with('-'), "{text}");
    let runs: Vec<&str> = text.lines().filter(|l| l.contains("+0000")).collect();
    assert_eq!(runs.len(), 10, "{text}");
    let before: Vec<&str> = text
        .lines()
        .take_while(|l| !l.contains('%'))
        .filter(|l| l.contains("+0000"))
        .collect();
    assert_eq!(before.len(), 5, "{text}");
}

/// Three loopback agents with one key, the hosts file naming them, and the key file.
fn loopback_fleet(dir: &Path) -> (Vec<common::LoopbackAgent>, std::path::PathBuf, std::path::PathBuf) {
    let key = dir.join("key");
    std::fs::write(&key, "fleet-export-key-0123456789abcdef\n").unwrap();
    let agents: Vec<_> = (0..3).map(|_| common::LoopbackAgent::start(&key)).collect();
    let hosts = dir.join("hosts");
    let list: String = agents.iter().map(|a| format!("{}\n", a.addr)).collect();
    std::fs::write(&hosts, list).unwrap();
    (agents, hosts, key)
}

/// `iopath fleet run rr` over all pairs of the hosts file, short cells.
fn fleet_rr(hosts: &Path, key: &Path, db: &Path, seed: &str) -> Output {
    iopath()
        .args(["fleet", "run", "rr", "--hosts"])
        .arg(hosts)
        .arg("--psk-file")
        .arg(key)
        .arg("--db")
        .arg(db)
        .args([
            "--pairs",
            "all",
            "--mode",
            "two-copy",
            "--duration",
            "200ms",
            "--warmup",
            "0",
            // One repetition a pair: six cells (the default, `auto`, plans what the matrix needs).
            "--reps",
            "1",
        ])
        .args(["--seed", seed])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap()
}

/// Issue 32 C: a history's series is the pair and the case. Two runs of the same fleet plan
/// with different seeds (so different rounds) export the same series names, in Otava's `test`
/// and `case` and in Bencher's benchmark names, with no round in them; Otava's `host` is the
/// pair, not the controller.
#[test]
fn fleet_exports_name_a_series_by_the_pair_and_the_case_whatever_the_round() {
    let (dir, db) = common::temp_db("fleet.db");
    let (_agents, hosts, key) = loopback_fleet(dir.path());
    for seed in ["1", "2"] {
        let out = fleet_rr(&hosts, &key, &db, seed);
        assert!(out.status.success(), "fleet run --seed {seed}: {}", stderr(&out));
    }
    let rounds = |run: &str| -> Vec<String> {
        let (header, rows) = rows(&ok(&["export", run, "--format", "csv"], &db));
        let label = header.iter().position(|h| h == "label").unwrap();
        let mut labels: Vec<String> = rows.iter().map(|r| r[label].clone()).collect();
        labels.sort();
        labels
    };
    assert_ne!(rounds("1"), rounds("2"), "the seeds drew different rounds");
    let (header, all) = rows(&ok(&["export", "--format", "otava"], &db));
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let series = |run: &str, name: &str| -> Vec<String> {
        let mut v: Vec<String> = all
            .iter()
            .filter(|r| r[col("run_id")] == run)
            .map(|r| r[col(name)].clone())
            .collect();
        v.sort();
        v
    };
    for name in ["test", "case", "host"] {
        assert_eq!(series("1", name).len(), 6, "{name}");
        assert_eq!(series("1", name), series("2", name), "Otava's {name}");
    }
    for row in &all {
        assert!(
            !row[col("case")].contains(" r1:") && row[col("case")].contains(" -> "),
            "{row:?}"
        );
        assert!(row[col("test")].starts_with("fleet.127-0-0-1-"), "{row:?}");
        assert!(
            row[col("host")].contains(" -> ") && row[col("host")] != hostname(),
            "{row:?}"
        );
    }
    let names = |run: &str| -> Vec<String> {
        let doc: Value = serde_json::from_str(&ok(&["export", run, "--format", "bmf"], &db)).unwrap();
        doc.as_object().unwrap().keys().cloned().collect()
    };
    assert_eq!(names("1").len(), 6);
    assert_eq!(names("1"), names("2"), "Bencher's benchmark names");
}

/// Issue 32 C: a wrong fleet key prints each cell's refusal once (the results table, not also
/// a progress note), and the resume command printed works once `KEY` is the right key file.
#[test]
fn a_wrong_fleet_key_is_said_once_per_cell_and_the_printed_resume_works() {
    let (dir, db) = common::temp_db("badkey.db");
    let (_agents, hosts, key) = loopback_fleet(dir.path());
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "another-key-0123456789abcdef\n").unwrap();
    let out = fleet_rr(&hosts, &wrong, &db, "3");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let (out_text, err) = (stdout(&out), stderr(&out));
    let both = format!("{out_text}{err}");
    let refusals = both
        .lines()
        .filter(|l| l.contains("wrong or missing pre-shared key"))
        .count();
    // Six cells, each once, plus the closing error quoting the first.
    assert_eq!(refusals, 7, "{both}");
    assert!(err.contains("6 cells failed: each is listed with its error"), "{err}");
    let resume = err
        .split('`')
        .find(|s| s.starts_with("iopath run --resume"))
        .unwrap_or_else(|| panic!("no resume command in {err}"));
    assert!(resume.ends_with(" --psk-file KEY"), "{resume}");
    let key_text = key.to_str().unwrap();
    let args: Vec<&str> = resume
        .split_whitespace()
        .skip(1)
        .map(|w| if w == "KEY" { key_text } else { w })
        .collect();
    let out = iopath().args(&args).timeout(Duration::from_secs(120)).output().unwrap();
    assert!(out.status.success(), "{resume}: {}", stderr(&out));
    assert_eq!(
        common::count(&db, "SELECT count(*) FROM observations WHERE status = 'ok'"),
        6,
        "the resume measured every refused cell"
    );
}
