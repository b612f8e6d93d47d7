//! Tidy, machine-readable exports (docs/output.md, "Long export and NDJSON"): one row per
//! value — run, case parameters, repetition, role, metric, unit, value, source — as CSV
//! (`export --format long`) or NDJSON (`export --format ndjson`), and the one-record-per-cell
//! NDJSON of `--json-stream`. The same names everywhere: parameters are the case's parameter
//! names (`size_bytes`), typed (numbers are numbers, an unpinned CPU list is null/empty, never
//! `any`), and in CSV prefixed `param_` so they never collide with a metric or a fixed column.

use super::RunData;
use crate::case::Case;
use crate::observation::{Metric, Observation};
use serde_json::{json, Map, Value};

/// The version of the long CSV, the NDJSON export and the `--json-stream` records. Raised on
/// any change of names or meaning.
pub const SCHEMA_VERSION: u32 = 1;

/// Prefix of the parameter columns of the long CSV.
pub const PARAM_PREFIX: &str = "param_";

/// A parameter's text (as `Case::params` gives it) as a typed JSON value: whole numbers as
/// integers, `true`/`false` (and `on`/`off` of `perf`) as booleans, `any` (not pinned) and the
/// empty text as null, anything else as text.
pub fn param_value(name: &str, text: &str) -> Value {
    match text {
        "" | "any" => Value::Null,
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "on" if name == "perf" => Value::Bool(true),
        "off" if name == "perf" => Value::Bool(false),
        t => match t.parse::<i64>() {
            Ok(n) => Value::from(n),
            Err(_) => Value::String(t.to_string()),
        },
    }
}

/// The case's parameters, typed, in the case's order.
pub fn params(case: &Case) -> Map<String, Value> {
    case.params()
        .into_iter()
        .map(|(name, text)| (name.to_string(), param_value(name, &text)))
        .collect()
}

/// A metric value: a whole number (a count) as an integer, any other as a float, none as null.
pub fn number(value: Option<f64>) -> Value {
    match value.filter(|v| v.is_finite()) {
        Some(v) if v.fract() == 0.0 && v.abs() < 9.0e15 => Value::from(v as i64),
        Some(v) => Value::from(v),
        None => Value::Null,
    }
}

fn metric_json(m: &Metric) -> Value {
    json!({
        "role": m.role.as_str(),
        "metric": m.name,
        "unit": m.unit,
        "value": number(m.value),
        "source": m.source.to_string(),
    })
}

/// The `--json-stream` record of one finished cell.
pub fn cell_record(
    run_id: Option<i64>,
    case: &Case,
    repetition: u32,
    observation: &Observation,
    error: Option<&str>,
    elapsed_s: f64,
) -> Value {
    json!({
        "type": "cell",
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "workload": case.workload(),
        "label": case.label(),
        "params": params(case),
        "repetition": repetition,
        "status": if error.is_some() { "failed" } else { "ok" },
        "error": error,
        "elapsed_s": elapsed_s,
        "metrics": observation.metrics.iter().map(metric_json).collect::<Vec<_>>(),
        "warnings": observation.warnings,
    })
}

/// A run's own fields as every JSON output names them (`runs --json`, the summary, compare,
/// the run line of NDJSON).
pub fn run_json(r: &super::RunSummary) -> Value {
    json!({
        "id": r.id,
        "name": r.name,
        "command_line": r.command_line,
        "tool_version": r.tool_version,
        "started_at": r.started_at,
        "ended_at": r.ended_at,
        "status": r.status.to_string(),
        "repetitions": r.repetitions,
        "shuffle": r.shuffle,
        "seed": r.seed,
        "warmup_cell": r.warmup_cell,
        "cases": r.cases,
        "cells_ok": r.cells_ok,
        "cells_failed": r.cells_failed,
        "cells_planned": r.cells_planned(),
    })
}

/// The keys of an NDJSON value line, which the run line has too (null where they mean
/// nothing for a run), so a dataframe read from the file has no column only the run line
/// fills but `run`, `machine` and `environment`.
pub const VALUE_KEYS: [&str; 14] = [
    "type",
    "schema_version",
    "run_id",
    "workload",
    "label",
    "params",
    "repetition",
    "status",
    "error",
    "role",
    "metric",
    "unit",
    "value",
    "source",
];

/// The run's header record: the run's settings, the machine and the environment as stored,
/// with every key of a value line (`type` `run` tells it apart: docs/output.md).
pub fn run_record(data: &RunData) -> Value {
    let r = &data.run;
    let parse = |t: &str| serde_json::from_str::<Value>(t).unwrap_or(Value::Null);
    let mut record = json!({
        "type": "run",
        "schema_version": SCHEMA_VERSION,
        "run_id": r.id,
        "workload": run_workload(data),
        "params": {},
        "status": r.status.to_string(),
        "run": run_json(r),
        "machine": parse(&r.machine_json),
        "environment": parse(&r.environment_json),
    });
    if let Some(object) = record.as_object_mut() {
        for key in VALUE_KEYS {
            object.entry(key).or_insert(Value::Null);
        }
    }
    record
}

/// What a run measured: its cases' workload (`net-stream`), or their workloads joined with
/// `+` in planned order when it mixed several (`net-stream+servers`); null without cases.
pub fn workload_of(cases: &[Case]) -> Value {
    let mut names: Vec<&str> = Vec::new();
    for case in cases {
        if !names.contains(&case.workload()) {
            names.push(case.workload());
        }
    }
    if names.is_empty() {
        Value::Null
    } else {
        Value::from(names.join("+"))
    }
}

fn run_workload(data: &RunData) -> Value {
    workload_of(&data.cases)
}

/// One long row: the cell's identity and one metric (None: the row of a failed cell).
struct LongRow<'a> {
    case: &'a Case,
    repetition: u32,
    error: Option<&'a str>,
    metric: Option<&'a Metric>,
}

fn long_rows(data: &RunData) -> Vec<LongRow<'_>> {
    let mut rows = Vec::new();
    for cell in &data.cells {
        let error = cell.error.as_deref();
        if error.is_some() || cell.observation.metrics.is_empty() {
            rows.push(LongRow {
                case: &cell.case,
                repetition: cell.repetition,
                error,
                metric: None,
            });
        }
        if error.is_none() {
            for m in &cell.observation.metrics {
                rows.push(LongRow {
                    case: &cell.case,
                    repetition: cell.repetition,
                    error,
                    metric: Some(m),
                });
            }
        }
    }
    rows
}

fn long_json(data: &RunData, row: &LongRow<'_>) -> Value {
    let m = row.metric;
    json!({
        "type": "value",
        "schema_version": SCHEMA_VERSION,
        "run_id": data.run.id,
        "workload": row.case.workload(),
        "label": row.case.label(),
        "params": params(row.case),
        "repetition": row.repetition,
        "status": if row.error.is_some() { "failed" } else { "ok" },
        "error": row.error,
        "role": m.map(|m| m.role.as_str()),
        "metric": m.map(|m| m.name.as_str()),
        "unit": m.map(|m| m.unit.as_str()),
        "value": number(m.and_then(|m| m.value)),
        "source": m.map(|m| m.source.to_string()),
    })
}

/// `export --format ndjson`: the run record, then one line per value.
pub fn ndjson(data: &RunData) -> anyhow::Result<Vec<u8>> {
    let mut out = serde_json::to_vec(&run_record(data))?;
    out.push(b'\n');
    for row in long_rows(data) {
        serde_json::to_writer(&mut out, &long_json(data, &row))?;
        out.push(b'\n');
    }
    Ok(out)
}

/// The machine fields repeated on every long CSV row.
const MACHINE_COLUMNS: [&str; 3] = ["hostname", "kernel", "cpu_model"];

/// A typed value as CSV text: null is empty, text is itself, numbers and booleans as JSON.
pub fn csv_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `export --format long`: one CSV row per value (and one per failed cell, with its error).
pub fn long_csv(data: &RunData) -> anyhow::Result<Vec<u8>> {
    let mut param_names: Vec<&'static str> = Vec::new();
    for case in &data.cases {
        for (name, _) in case.params() {
            if !param_names.contains(&name) {
                param_names.push(name);
            }
        }
    }
    let machine: Value = serde_json::from_str(&data.run.machine_json).unwrap_or(Value::Null);
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = ["schema_version", "run_id", "workload", "label"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    header.extend(param_names.iter().map(|n| format!("{PARAM_PREFIX}{n}")));
    header.extend(
        [
            "repetition",
            "status",
            "role",
            "metric",
            "unit",
            "value",
            "source",
            "error",
            "run_name",
            "run_started_at",
            "tool_version",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    header.extend(MACHINE_COLUMNS.iter().map(|s| s.to_string()));
    w.write_record(&header)?;
    for row in long_rows(data) {
        let p = params(row.case);
        let m = row.metric;
        let mut line = vec![
            SCHEMA_VERSION.to_string(),
            data.run.id.to_string(),
            row.case.workload().to_string(),
            row.case.label(),
        ];
        line.extend(param_names.iter().map(|n| p.get(*n).map(csv_text).unwrap_or_default()));
        line.extend([
            row.repetition.to_string(),
            if row.error.is_some() { "failed" } else { "ok" }.to_string(),
            m.map(|m| m.role.as_str().to_string()).unwrap_or_default(),
            m.map(|m| m.name.clone()).unwrap_or_default(),
            m.map(|m| m.unit.clone()).unwrap_or_default(),
            csv_text(&number(m.and_then(|m| m.value))),
            m.map(|m| m.source.to_string()).unwrap_or_default(),
            row.error.unwrap_or_default().to_string(),
            data.run.name.clone().unwrap_or_default(),
            data.run.started_at.clone(),
            data.run.tool_version.clone(),
        ]);
        line.extend(MACHINE_COLUMNS.iter().map(|k| csv_text(&machine[*k])));
        w.write_record(line.iter().map(|c| crate::format::spreadsheet_safe(c).into_owned()))?;
        // no formulas (=, +, -, @)
    }
    Ok(w.into_inner()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_typed_and_counts_are_integers() {
        assert_eq!(param_value("size_bytes", "65536"), json!(65536));
        assert_eq!(param_value("client_cpus", "any"), Value::Null);
        assert_eq!(param_value("client_cpus", "0 1"), json!("0 1"));
        assert_eq!(param_value("verify", "false"), json!(false));
        assert_eq!(param_value("perf", "on"), json!(true));
        assert_eq!(param_value("rate", "closed"), json!("closed"));
        assert_eq!(number(Some(12.0)), json!(12));
        assert_eq!(serde_json::to_string(&number(Some(12.0))).unwrap(), "12");
        assert_eq!(number(Some(1.5)), json!(1.5));
        assert_eq!(number(None), Value::Null);
        assert_eq!(number(Some(f64::NAN)), Value::Null);
    }
}
