//! Machine-readable output: the tidy long export (CSV and NDJSON), the run summary, `runs
//! --json`, `--json-stream` (one flushed line per cell as it finishes), and a pandas pivot of
//! the long CSV checked against the numbers iopath printed. pandas is installed by scripts/test
//! (the README's test command); where python3 cannot import it the pandas tests skip, saying so.

mod common;

use common::{iopath, json_records, missing_python_module, skip, spawn, stderr, stdout, temp_db};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Output;
use std::time::Duration;

fn run(args: &[&str], db: &Path) -> Output {
    let out = iopath()
        .args(args)
        .arg("--db")
        .arg(db)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "iopath {args:?}: {}", stderr(&out));
    out
}

fn csv_rows(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().unwrap().iter().map(String::from).collect();
    let rows = reader
        .records()
        .map(|r| r.unwrap().iter().map(String::from).collect())
        .collect();
    (header, rows)
}

#[test]
fn long_csv_has_one_row_per_value_with_typed_parameters_and_the_schema_version() {
    let (_dir, db) = temp_db("long.db");
    let _ = iopath()
        .args(["sweep", "fake", "--cells", "ok:5,ok:7,fail", "--reps", "3", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let out = run(&["export", "1", "--format", "long"], &db);
    let (header, rows) = csv_rows(&stdout(&out));
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
    };
    for name in [
        "schema_version",
        "run_id",
        "workload",
        "label",
        "param_index",
        "param_behaviour",
        "repetition",
        "status",
        "role",
        "metric",
        "unit",
        "value",
        "source",
        "error",
        "tool_version",
        "hostname",
        "kernel",
    ] {
        col(name);
    }
    assert!(col("param_behaviour") < col("repetition") && col("repetition") < col("metric"));
    // 2 ok cases x 3 repetitions x 1 metric, plus 3 failed cells with their error.
    assert_eq!(rows.len(), 9, "{rows:?}");
    let ok: Vec<&Vec<String>> = rows.iter().filter(|r| r[col("status")] == "ok").collect();
    assert_eq!(ok.len(), 6);
    for r in &ok {
        assert_eq!(r[col("schema_version")], "1");
        assert_eq!(r[col("run_id")], "1");
        assert_eq!(
            (r[col("role")].as_str(), r[col("metric")].as_str()),
            ("system", "value")
        );
        assert_eq!(r[col("source")], "tool");
        // Counts are integers, and so are integer parameters.
        let expect = if r[col("param_index")] == "0" { "5" } else { "7" };
        assert_eq!(r[col("value")], expect, "{r:?}");
    }
    let failed: Vec<&Vec<String>> = rows.iter().filter(|r| r[col("status")] == "failed").collect();
    assert_eq!(failed.len(), 3);
    assert!(failed[0][col("error")].contains("fake failure"));
    assert_eq!(failed[0][col("value")], "");
    assert_eq!(failed[0][col("param_index")], "2");
}

#[test]
fn ndjson_export_has_the_run_then_one_line_per_value_with_the_same_names() {
    let (_dir, db) = temp_db("nd.db");
    run(
        &["sweep", "fake", "--cells", "ok:5,ok:7", "--reps", "2", "--name", "nd"],
        &db,
    );
    let out = run(&["export", "--format", "ndjson"], &db);
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 1 + 4);
    let head = &lines[0];
    assert_eq!(head["type"], "run");
    assert_eq!(head["workload"], "fake");
    assert_eq!(head["run_id"], 1);
    for key in lines[1].as_object().unwrap().keys() {
        assert!(head.get(key).is_some(), "the run line lacks {key}: {head}");
    }
    assert_eq!(head["schema_version"], 1);
    assert_eq!(head["run"]["name"], "nd");
    assert!(head["machine"]["kernel"].is_string() || head["machine"]["kernel"].is_null());
    assert!(head["environment"].is_object());
    for line in &lines[1..] {
        assert_eq!(line["type"], "value");
        assert_eq!(line["schema_version"], 1);
        assert!(line["value"].is_u64(), "a count is an integer: {line}");
        assert!(line["params"]["index"].is_u64(), "{line}");
        assert_eq!(line["metric"], "value");
    }
    assert_eq!(lines[3]["value"], 7);
    assert_eq!(lines[3]["repetition"], 0);
}

#[test]
fn summary_has_cell_statistics_and_findings() {
    let (_dir, db) = temp_db("sum.db");
    run(&["sweep", "fake", "--cells", "ok:100~1,ok:20", "--reps", "6"], &db);
    let out = run(&["export", "1", "--format", "summary"], &db);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (doc["type"].as_str(), doc["schema_version"].as_u64()),
        (Some("summary"), Some(1))
    );
    assert_eq!(doc["run"]["id"], 1);
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    let m = &cells[0]["metrics"][0];
    assert_eq!(cells[0]["headline"], "system.value");
    assert_eq!((m["n"].as_u64(), m["median"].as_u64()), (Some(6), Some(100)));
    assert_eq!(m["ci95"], serde_json::json!([99.0, 101.0]));
    assert_eq!((m["min"].as_u64(), m["max"].as_u64()), (Some(99), Some(101)));
    assert!(doc["crossovers"].is_array());
    assert!(doc["findings"]["caveats"].is_array() && doc["findings"]["noise"].is_array());
}

#[test]
fn runs_json_lists_every_run() {
    let (_dir, db) = temp_db("runs.db");
    let failed = iopath()
        .args([
            "sweep",
            "fake",
            "--cells",
            "ok:1,fail",
            "--reps",
            "2",
            "--name",
            "first",
            "--db",
        ])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(failed.status.code(), Some(1), "a failed cell fails the sweep");
    run(&["sweep", "fake", "--cells", "ok:1", "--reps", "1"], &db);
    let out = run(&["runs", "--json"], &db);
    let runs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["name"], "first");
    assert_eq!(
        (
            runs[0]["cells_ok"].as_u64(),
            runs[0]["cells_failed"].as_u64(),
            runs[0]["cells_planned"].as_u64()
        ),
        (Some(2), Some(2), Some(4))
    );
    assert_eq!(runs[1]["status"], "complete");
    // Each run says what it measured, in the JSON and in the table.
    assert!(runs.iter().all(|r| r["workload"] == "fake"), "{runs:?}");
    let table = stdout(&run(&["runs"], &db));
    let head: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(head[2], "workload", "{table}");
    assert_eq!(table.lines().filter(|l| l.contains(" fake ")).count(), 2, "{table}");
}

const NDJSON_READ: &str = r#"
import json, sys
try:
    import pandas as pd
except ImportError as e:
    print("PANDAS MISSING: " + str(e))
    sys.exit(3)
raw = pd.read_json(sys.argv[1], lines=True)
# The one-liner of docs/output.md ("Long export and NDJSON").
df = pd.read_json(sys.argv[1], lines=True).query("type == 'value'").drop(columns=["run", "machine", "environment"]).convert_dtypes()
print(json.dumps({
    "repetition_dtype": str(df["repetition"].dtype),
    "raw_columns": sorted(raw.columns),
    "columns": sorted(df.columns),
    "rows": len(df),
    "values": sorted(set(df["value"].tolist())),
    "values_missing": int(df["value"].isna().sum()),
    "run_rows": int((raw["type"] == "run").sum()),
    "run_name": raw[raw["type"] == "run"]["run"].iloc[0]["name"],
}))
"#;

/// `export --format ndjson` reads with `pandas.read_json(lines=True)`: the run line has the
/// value lines' keys (plus its run, machine and environment), so the documented one-liner
/// leaves exactly the value rows, every value present, and no column of the run line's.
#[test]
fn ndjson_reads_into_pandas_without_a_junk_row() {
    if let Some(why) = missing_python_module("pandas") {
        return skip(&why);
    }
    let (dir, db) = temp_db("ndpandas.db");
    run(
        &["sweep", "fake", "--cells", "ok:5,ok:7", "--reps", "3", "--name", "nd"],
        &db,
    );
    let file = dir.path().join("run.ndjson");
    run(&["export", "--format", "ndjson", "-o", file.to_str().unwrap()], &db);
    let script = dir.path().join("read.py");
    std::fs::write(&script, NDJSON_READ).unwrap();
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}): scripts/test installs python3 with pandas"));
    let text = stdout(&out);
    assert!(
        !text.contains("PANDAS MISSING"),
        "python3 cannot import pandas ({text}); scripts/test installs it"
    );
    assert!(out.status.success(), "the pandas script failed: {text}{}", stderr(&out));
    let got: Value = serde_json::from_str(text.trim()).unwrap();
    let value_keys = [
        "error",
        "label",
        "metric",
        "params",
        "repetition",
        "role",
        "run_id",
        "schema_version",
        "source",
        "status",
        "type",
        "unit",
        "value",
        "workload",
    ];
    assert_eq!(got["columns"], serde_json::json!(value_keys), "{got}");
    let mut raw: Vec<&str> = value_keys.to_vec();
    raw.extend(["environment", "machine", "run"]);
    raw.sort();
    assert_eq!(
        got["raw_columns"],
        serde_json::json!(raw),
        "only the run's own objects added: {got}"
    );
    assert_eq!(got["rows"], 6, "2 cases x 3 repetitions x 1 metric: {got}");
    assert_eq!(
        got["values"],
        serde_json::json!([5, 7]),
        "whole values stay integers: {got}"
    );
    assert_eq!(got["values_missing"], 0, "{got}");
    assert_eq!(got["run_rows"], 1);
    assert_eq!(got["run_name"], "nd");
    // Whole numbers stay integers with the documented one-liner (the run line's null made
    // them floats without convert_dtypes).
    assert_eq!(got["repetition_dtype"], "Int64", "{got}");
}

/// A line per cell, each flushed as the cell finishes: the first arrives while a later cell is
/// still sleeping.
#[test]
fn json_stream_prints_each_cell_as_it_finishes() {
    let (_dir, db) = temp_db("stream.db");
    let mut child = spawn(&[
        "sweep",
        "fake",
        "--cells",
        "ok:5,sleep:5s",
        "--json-stream",
        "--db",
        db.to_str().unwrap(),
    ]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    // The sleeping cell has not finished: the database (written cell by cell) does not hold
    // it yet. A line printed only at the end would come after both cells were stored. (Not
    // a time: the first line used to be due within 1.8 s, which a loaded machine can miss;
    // this fails only if the test itself is kept off the CPU for the whole 5 s sleep.)
    assert!(
        common::stored_cells(&db) < 2,
        "the first line came only when the sleeping cell had ended"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first line came only when the run had ended"
    );
    assert_eq!(first["type"], "cell");
    assert_eq!(first["schema_version"], 1);
    assert_eq!(first["run_id"], 1);
    assert_eq!(first["params"]["index"], 0);
    assert_eq!(first["status"], "ok");
    assert_eq!(first["metrics"][0]["metric"], "value");
    assert_eq!(first["metrics"][0]["value"], 5);
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert!(child.wait().unwrap().success());
    assert_eq!(rest.len(), 1, "only NDJSON on stdout, no tables: {rest:?}");
    let second: Value = serde_json::from_str(&rest[0]).unwrap();
    assert_eq!(second["label"], "fake#1 sleep:5000ms");

    // A direct command streams too; a failed cell carries its error.
    let out = iopath()
        .args(["fake", "--cells", "ok:3,fail", "--reps", "2", "--json-stream"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let records: Vec<Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), 4);
    assert_eq!(records[1]["status"], "failed");
    assert!(records[1]["error"].as_str().unwrap().contains("fake failure"));
    assert!(records[0]["run_id"].is_i64(), "every run is stored: {}", records[0]);
    let err = common::usage_error(&["fake", "--json-stream", "--json"]);
    assert!(err.contains("--json"), "{err}");
}

const PIVOT: &str = r#"
import json, sys
try:
    import pandas as pd
except ImportError as e:
    print("PANDAS MISSING: " + str(e))
    sys.exit(3)
df = pd.read_csv(sys.argv[1])
assert str(df["value"].dtype) == "int64", df["value"].dtype
assert str(df["param_index"].dtype) == "int64", df["param_index"].dtype
v = df[(df["role"] == "system") & (df["metric"] == "value")]
pivot = v.pivot(index="label", columns="repetition", values="value")
print(json.dumps({label: {str(rep): int(x) for rep, x in row.items()} for label, row in pivot.iterrows()}))
"#;

/// The long CSV loads into pandas; its value-by-case-by-repetition pivot holds exactly the
/// values iopath printed for the run (`--json`).
#[test]
fn pandas_pivot_of_the_long_export_matches_what_iopath_printed() {
    if let Some(why) = missing_python_module("pandas") {
        return skip(&why);
    }
    let (dir, db) = temp_db("pandas.db");
    let printed = run(
        &[
            "sweep",
            "fake",
            "--cells",
            "ok:100~10,ok:50~5,ok:7",
            "--reps",
            "6",
            "--json",
        ],
        &db,
    );
    let records = json_records(&printed);
    assert_eq!(records.len(), 18);
    let csv = dir.path().join("long.csv");
    run(&["export", "1", "--format", "long", "-o", csv.to_str().unwrap()], &db);
    let script = dir.path().join("pivot.py");
    std::fs::write(&script, PIVOT).unwrap();
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(&csv)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}): scripts/test installs python3 with pandas"));
    let text = stdout(&out);
    assert!(
        !text.contains("PANDAS MISSING"),
        "python3 cannot import pandas ({text}); scripts/test installs it"
    );
    assert!(
        out.status.success(),
        "the pandas script failed: {}{}",
        text,
        stderr(&out)
    );
    let pivot: Value = serde_json::from_str(text.trim()).unwrap();
    let labels = pivot.as_object().unwrap();
    assert_eq!(labels.len(), 3, "{pivot}");
    for r in &records {
        let label = r["label"].as_str().unwrap();
        let rep = r["repetition"].as_u64().unwrap().to_string();
        let printed_value = common::metric(r, "value").unwrap()["value"].as_f64().unwrap();
        assert_eq!(
            pivot[label][&rep].as_f64(),
            Some(printed_value),
            "{label} rep {rep}: pandas {} vs printed {printed_value}",
            pivot[label][&rep]
        );
    }
    assert_eq!(pivot["fake#0 ok:100~10"]["0"], 90);
    assert_eq!(pivot["fake#2 ok:7"]["5"], 7);
}

const STREAM_PIVOT: &str = r#"
import json, sys
try:
    import pandas as pd
except ImportError as e:
    print("PANDAS MISSING: " + str(e))
    sys.exit(3)
df = pd.read_csv(sys.argv[1], float_precision="round_trip")
assert str(df["param_size_bytes"].dtype) == "int64", df["param_size_bytes"].dtype
assert df["param_client_cpus"].isna().all(), "unpinned CPU lists are empty, read as missing"
t = df[(df["role"] == "system") & (df["metric"] == "throughput_gbps")]
pivot = t.pivot_table(index="param_size_bytes", columns="param_mode", values="value", aggfunc="median")
print(json.dumps({str(size): {mode: float(x) for mode, x in row.items()} for size, row in pivot.iterrows()}))
"#;

/// The same with a tiny real sweep: throughput by size x mode from the long CSV equals the
/// throughput iopath printed for each case.
#[test]
fn pandas_pivot_of_a_net_stream_sweep_matches_the_printed_throughput() {
    if let Some(why) = missing_python_module("pandas") {
        return skip(&why);
    }
    let (dir, db) = temp_db("stream.db");
    let printed = run(
        &[
            "sweep",
            "net-stream",
            "--mode",
            "one-copy,two-copy",
            "--size",
            "4K,64K",
            "--duration",
            "100ms",
            "--warmup",
            "0",
            "--json",
        ],
        &db,
    );
    let records = json_records(&printed);
    assert_eq!(records.len(), 4);
    let csv = dir.path().join("long.csv");
    run(&["export", "--format", "long", "-o", csv.to_str().unwrap()], &db);
    let script = dir.path().join("pivot.py");
    std::fs::write(&script, STREAM_PIVOT).unwrap();
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(&csv)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}): scripts/test installs python3 with pandas"));
    let text = stdout(&out);
    assert!(
        !text.contains("PANDAS MISSING"),
        "python3 cannot import pandas ({text}); scripts/test installs it"
    );
    assert!(
        out.status.success(),
        "the pandas script failed: {}{}",
        text,
        stderr(&out)
    );
    let pivot: Value = serde_json::from_str(text.trim()).unwrap();
    for r in &records {
        let size = r["params"]["size_bytes"].as_u64().unwrap().to_string();
        let mode = r["params"]["mode"].as_str().unwrap();
        let printed_value = common::role_metric(r, "system", "throughput_gbps").unwrap()["value"]
            .as_f64()
            .unwrap();
        let got = pivot[&size][mode]
            .as_f64()
            .unwrap_or_else(|| panic!("no {size} x {mode} in {pivot}"));
        assert!(
            (got - printed_value).abs() <= 1e-12 * printed_value.abs(),
            "{size} x {mode}: pandas {got} vs printed {printed_value}"
        );
    }
}

/// `--json-stream` is one of the run flags every measuring command and sweep share.
#[test]
fn every_measuring_command_takes_json_stream() {
    let commands: [&[&str]; 8] = [
        &["net", "stream"],
        &["servers"],
        &["micro", "syscall"],
        &["fake"],
        &["sweep", "net-stream"],
        &["sweep", "servers"],
        &["sweep", "micro", "syscall"],
        &["sweep", "fake"],
    ];
    for command in commands {
        let out = iopath().args(command).arg("--help").output().unwrap();
        assert!(out.status.success(), "{command:?}: {}", stderr(&out));
        assert!(
            stdout(&out).contains("--json-stream"),
            "{command:?} lacks --json-stream"
        );
    }
}
