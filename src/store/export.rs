//! Exporters: one trait, one method that serialises records. CSV is wide (one row per case
//! and repetition, a value column and a `_source` column per metric); JSON keeps the nested
//! record. Both are the documented contract in docs/output.md. For the history tools teams
//! already run: `otava_csv` (Apache Otava's CSV) and `bmf_json` (Bencher Metric Format).

use super::{Record, RunData};
use crate::case::Case;
use crate::observation::Role;
use std::collections::{BTreeMap, BTreeSet};

/// The source written for a metric column that a row's case does not measure at all.
pub const NOT_MEASURED: &str = "not measured by this case";

pub trait Exporter {
    fn serialize(&self, records: &[Record]) -> anyhow::Result<Vec<u8>>;
}

pub struct JsonExporter;
pub struct CsvExporter;

/// A record as JSON: the stored shape, plus `params` (typed, named as in every other format)
/// and whole-number metric values as integers.
fn record_json(record: &Record) -> anyhow::Result<serde_json::Value> {
    let mut v = serde_json::to_value(record)?;
    if let Some(metrics) = v["observation"]["metrics"].as_array_mut() {
        for m in metrics {
            let value = m["value"].as_f64();
            m["value"] = super::tidy::number(value);
        }
    }
    if let Some(object) = v.as_object_mut() {
        object.insert(
            "params".into(),
            serde_json::Value::Object(super::tidy::params(&record.case)),
        );
    }
    Ok(v)
}

impl Exporter for JsonExporter {
    fn serialize(&self, records: &[Record]) -> anyhow::Result<Vec<u8>> {
        let values = records.iter().map(record_json).collect::<anyhow::Result<Vec<_>>>()?;
        let mut out = serde_json::to_vec_pretty(&values)?;
        out.push(b'\n');
        Ok(out)
    }
}

/// Parameter columns come first in the order the first case of each workload lists them.
fn param_columns(records: &[Record]) -> Vec<&'static str> {
    let mut cols: Vec<&'static str> = Vec::new();
    for r in records {
        for (name, _) in r.case.params() {
            if !cols.contains(&name) {
                cols.push(name);
            }
        }
    }
    cols
}

impl Exporter for CsvExporter {
    fn serialize(&self, records: &[Record]) -> anyhow::Result<Vec<u8>> {
        let params = param_columns(records);
        // Metric columns sorted by role then name so files from different runs line up.
        let metric_keys: BTreeSet<(crate::observation::Role, String, String)> = records
            .iter()
            .flat_map(|r| r.observation.metrics.iter().map(|m| (m.role, m.name.clone(), m.key())))
            .collect();
        let mut header: Vec<String> = ["run_id", "workload", "label", "repetition"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        header.extend(params.iter().map(|s| s.to_string()));
        for (_, _, key) in &metric_keys {
            header.push(key.clone());
            header.push(format!("{key}_source"));
        }
        header.extend(["status".into(), "error".into(), "warnings".into()]);
        let mut rows: Vec<Vec<String>> = Vec::with_capacity(records.len());
        for r in records {
            let case_params = r.case.params();
            let mut row: Vec<String> = vec![
                r.run_id.map(|id| id.to_string()).unwrap_or_default(),
                r.case.workload().to_string(),
                r.label.clone(),
                r.repetition.to_string(),
            ];
            for p in &params {
                row.push(
                    case_params
                        .iter()
                        .find(|(n, _)| n == p)
                        .map(|(n, v)| super::tidy::csv_text(&super::tidy::param_value(n, v)))
                        .unwrap_or_default(),
                );
            }
            for (role, name, _) in &metric_keys {
                match r.observation.get(name, *role) {
                    Some(m) => {
                        row.push(m.value.map(|v| v.to_string()).unwrap_or_default());
                        row.push(m.source.to_string());
                    }
                    // This case does not produce the metric at all (e.g. zero-copy counts
                    // for a two-copy case), or the cell failed.
                    None => {
                        row.push(String::new());
                        row.push(NOT_MEASURED.to_string());
                    }
                }
            }
            row.push(if r.error.is_some() { "failed" } else { "ok" }.to_string());
            row.push(r.error.clone().unwrap_or_default());
            let warnings: Vec<&str> = r.observation.warnings.iter().map(|w| w.text.as_str()).collect();
            row.push(warnings.join(" | "));
            rows.push(row);
        }
        // A metric's value column empty in every row says nothing (no repetition has a value:
        // unavailable here, or no case measures it); its `_source` column, kept, says why.
        // The fixed and parameter columns stay, so a script finds them by name in every file.
        let metrics = 4 + params.len()..header.len() - 3;
        let kept: Vec<usize> = (0..header.len())
            .filter(|&i| {
                !metrics.contains(&i) || header[i].ends_with("_source") || rows.iter().any(|row| !row[i].is_empty())
            })
            .collect();
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(kept.iter().map(|&i| header[i].as_str()))?;
        for row in &rows {
            // no formulas (=, +, -, @)
            w.write_record(
                kept.iter()
                    .map(|&i| crate::format::spreadsheet_safe(&row[i]).into_owned()),
            )?;
        }
        Ok(w.into_inner()?)
    }
}

/// A stored run's cases with, for each, the values of every metric over its successful
/// repetitions (non-finite and unavailable values left out), in planned order; a case without
/// a successful repetition is left out.
type CaseValues<'a> = (usize, &'a Case, usize, BTreeMap<(Role, String), Vec<f64>>);

fn case_values(data: &RunData) -> Vec<CaseValues<'_>> {
    let mut out: Vec<CaseValues<'_>> = Vec::new();
    for (position, case) in data.cases.iter().enumerate() {
        let mut values: BTreeMap<(Role, String), Vec<f64>> = BTreeMap::new();
        let mut ok = 0;
        for cell in data
            .cells
            .iter()
            .filter(|c| c.position == position && c.error.is_none())
        {
            ok += 1;
            for m in &cell.observation.metrics {
                let entry = values.entry((m.role, m.name.clone())).or_default();
                if let Some(v) = m.value.filter(|v| v.is_finite()) {
                    entry.push(v);
                }
            }
        }
        if ok > 0 {
            out.push((position, case, ok, values));
        }
    }
    out
}

/// Letters, digits, `-` and `_` kept, any other run of characters one `-`: a name part that
/// needs no quoting in a file name or a YAML key.
fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// `2026-11-24T18:36:20Z` (as the store writes it) as `2026-11-24 18:36:20 +0000`, the form
/// Otava prints; any other text unchanged.
fn otava_time(started_at: &str) -> String {
    match started_at.strip_suffix('Z') {
        Some(t) if t.len() == 19 && t.as_bytes()[10] == b'T' => format!("{} {} +0000", &t[..10], &t[11..]),
        _ => started_at.to_string(),
    }
}

/// The fixed columns of `export --format otava`, before one column per metric.
pub const OTAVA_COLUMNS: [&str; 8] = [
    "time",
    "run_id",
    "run_name",
    "host",
    "test",
    "workload",
    "case",
    "repetitions_ok",
];

/// `export --format otava` (docs/output.md): one row per run and case with at least one
/// successful repetition, oldest run first; `time` the run's start; `test` names the series
/// (host, workload and case; for a fleet cell its workload, pair and network case, no round
/// and no controller) for Otava, which reads a file as one series; `host` the machine, or a
/// fleet cell's pair; `case` the series' case (`Workload::series`); one column per
/// metric (`<role>_<name>`, sorted) holding the median over the case's successful
/// repetitions, empty where the case has no value of it.
pub fn otava_csv(runs: &[RunData]) -> anyhow::Result<Vec<u8>> {
    let mut runs: Vec<&RunData> = runs.iter().collect();
    runs.sort_by(|a, b| (&a.run.started_at, a.run.id).cmp(&(&b.run.started_at, b.run.id)));
    let tables: Vec<(&RunData, Vec<CaseValues<'_>>)> = runs.iter().map(|d| (*d, case_values(d))).collect();
    let metrics: BTreeSet<(Role, String)> = tables
        .iter()
        .flat_map(|(_, cases)| cases.iter().flat_map(|(_, _, _, v)| v.keys().cloned()))
        .collect();
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = OTAVA_COLUMNS.iter().map(|s| s.to_string()).collect();
    header.extend(metrics.iter().map(|(role, name)| format!("{}_{name}", role.as_str())));
    w.write_record(&header)?;
    for (data, cases) in &tables {
        let machine = super::merge::host_of(&data.run.machine_json).unwrap_or_else(|| "unknown-host".into());
        for (_, case, ok, values) in cases {
            // A fleet cell's hosts are its pair (already in its series), not the controller.
            let (host, test) = match case.as_workload().hosts() {
                Some(pair) => (pair, format!("{}.{}", case.workload(), slug(&case.series()))),
                None => (
                    machine.clone(),
                    format!("{}.{}.{}", slug(&machine), case.workload(), slug(&case.series())),
                ),
            };
            let mut row = vec![
                otava_time(&data.run.started_at),
                data.run.id.to_string(),
                data.run.name.clone().unwrap_or_default(),
                host,
                test,
                case.workload().to_string(),
                case.series(),
                ok.to_string(),
            ];
            for key in &metrics {
                let mut v = values.get(key).cloned().unwrap_or_default();
                row.push(match v.is_empty() {
                    true => String::new(),
                    false => super::tidy::csv_text(&super::tidy::number(Some(crate::measure::stats::median(&mut v)))),
                });
            }
            w.write_record(row.iter().map(|c| crate::format::spreadsheet_safe(c).into_owned()))?;
        }
    }
    Ok(w.into_inner()?)
}

/// `export --format bmf` (docs/output.md): Bencher Metric Format. Per case (`<workload>/<series>`:
/// the label, a fleet cell's without its round,
/// `#<position>` added when two cases share a label), per metric with a value
/// (`<role>_<name>`): `value` the median over the successful repetitions, `lower_value` and
/// `upper_value` the 95% confidence interval of the median (order statistics, as the report)
/// when there are at least 6 values, else the smallest and largest value.
pub fn bmf_json(data: &RunData) -> anyhow::Result<Vec<u8>> {
    let cases = case_values(data);
    let names: Vec<String> = cases
        .iter()
        .map(|(_, case, _, _)| format!("{}/{}", case.workload(), case.series()))
        .collect();
    let mut uses: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for name in &names {
        *uses.entry(name.as_str()).or_default() += 1;
    }
    let mut doc = serde_json::Map::new();
    for ((position, _, _, values), name) in cases.iter().zip(&names) {
        let name = match uses[name.as_str()] {
            1 => name.clone(),
            _ => format!("{name} #{position}"),
        };
        let mut measures = serde_json::Map::new();
        for ((role, metric), v) in values {
            let Some(s) = crate::measure::stats::summarize(v) else {
                continue;
            };
            let (lower, upper) = s.ci95.unwrap_or((s.min, s.max));
            measures.insert(
                format!("{}_{metric}", role.as_str()),
                serde_json::json!({"value": s.median, "lower_value": lower, "upper_value": upper}),
            );
        }
        if !measures.is_empty() {
            doc.insert(name, serde_json::Value::Object(measures));
        }
    }
    let mut out = serde_json::to_vec_pretty(&serde_json::Value::Object(doc))?;
    out.push(b'\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Bench, Case, MicroCase};
    use crate::observation::{Metric, Observation, Role, Source};

    fn record(bench: Bench, metric: Option<&str>, error: Option<&str>) -> Record {
        let case = Case::Micro(MicroCase {
            bench,
            options: Vec::new(),
        });
        let mut observation = Observation::default();
        if let Some(name) = metric {
            observation.push(Metric::new(name, Role::System, 1.5, "ns", Source::Tool));
        }
        Record {
            run_id: Some(1),
            label: case.label(),
            case,
            repetition: 0,
            observation,
            error: error.map(String::from),
        }
    }

    /// Found in review: a failed cell showed only in free-text warnings, and a metric a case
    /// never produces had an empty source.
    #[test]
    fn csv_has_status_and_error_and_says_what_a_case_does_not_measure() {
        let rows_in = [
            record(Bench::Syscall, Some("a_ns"), None),
            record(Bench::Call, Some("b_ns"), None),
            record(Bench::Fs, None, Some("boom")),
        ];
        let text = String::from_utf8(CsvExporter.serialize(&rows_in).unwrap()).unwrap();
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let header = reader.headers().unwrap().clone();
        let col = |name: &str| header.iter().position(|h| h == name).unwrap();
        let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(&rows[0][col("status")], "ok");
        assert_eq!(&rows[0][col("system_a_ns")], "1.5");
        assert_eq!(&rows[0][col("system_b_ns_source")], NOT_MEASURED);
        assert_eq!(&rows[2][col("status")], "failed");
        assert_eq!(&rows[2][col("error")], "boom");
        assert_eq!(header.iter().next_back(), Some("warnings"));
        // The issue "A user's first hour": no metric column is empty in every row (`a_ns` of
        // the failed row's metric is not measured by the others, but has a value in one).
        let unavailable = {
            let mut r = record(Bench::Call, None, None);
            r.observation
                .push(Metric::unavailable("c_ns", Role::System, "ns", "not here"));
            r
        };
        let text = String::from_utf8(CsvExporter.serialize(&[rows_in[0].clone(), unavailable]).unwrap()).unwrap();
        let header = text.lines().next().unwrap();
        assert!(header.contains(",system_a_ns,"), "{header}");
        assert!(
            !header.contains(",system_c_ns,"),
            "a value column empty in every row: {header}"
        );
        assert!(header.contains(",system_c_ns_source,"), "its source says why: {header}");
        assert!(
            header.contains(",options,") || header.contains(",bench,"),
            "parameters stay: {header}"
        );
    }

    /// The issue "Results that speak": `size` vs `size_bytes`, `any` vs `null`, `12.0` counts.
    #[test]
    fn json_and_csv_use_the_same_parameter_names_and_values() {
        let case = Case::NetStream(
            crate::case::StreamCase::for_test(crate::case::CopyMode::OneCopy, 4096)
                .with_fields(8)
                .with_window_ms(100, 10)
                .with_perf(),
        );
        let mut observation = Observation::default();
        observation.push(Metric::new(
            "messages_sent",
            Role::Client,
            12.0,
            "messages",
            Source::Tool,
        ));
        let record = Record {
            run_id: None,
            label: case.label(),
            case,
            repetition: 0,
            observation,
            error: None,
        };
        let json: serde_json::Value =
            serde_json::from_slice(&JsonExporter.serialize(std::slice::from_ref(&record)).unwrap()).unwrap();
        assert_eq!(json[0]["params"]["size_bytes"], 4096);
        assert_eq!(json[0]["params"]["client_cpus"], serde_json::Value::Null);
        assert_eq!(json[0]["case"]["size"], 4096, "the stored case is unchanged");
        assert!(json[0]["observation"]["metrics"][0]["value"].is_u64());
        let text = String::from_utf8(CsvExporter.serialize(&[record]).unwrap()).unwrap();
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let header = reader.headers().unwrap().clone();
        let row = reader.records().next().unwrap().unwrap();
        let col = |name: &str| header.iter().position(|h| h == name).unwrap();
        assert_eq!(&row[col("size_bytes")], "4096");
        assert_eq!(&row[col("client_cpus")], "", "unpinned is empty, as null in JSON");
        assert_eq!(&row[col("client_messages_sent")], "12");
    }
}
