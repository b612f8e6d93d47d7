//! Exporters: one trait, one method that serialises records. CSV is wide (one row per case
//! and repetition, a value column and a `_source` column per metric); JSON keeps the nested
//! record. Both are the documented contract in docs/output.md.

use super::Record;
use std::collections::BTreeSet;

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
        let mut w = csv::Writer::from_writer(Vec::new());
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
        w.write_record(&header)?;
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
            w.write_record(row.iter().map(|c| crate::format::spreadsheet_safe(c).into_owned()))?;
            // no formulas (=, +, -, @)
        }
        Ok(w.into_inner()?)
    }
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
        let rows = [
            record(Bench::Syscall, Some("a_ns"), None),
            record(Bench::Call, Some("b_ns"), None),
            record(Bench::Fs, None, Some("boom")),
        ];
        let text = String::from_utf8(CsvExporter.serialize(&rows).unwrap()).unwrap();
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
    }

    /// The issue "Results that speak": `size` vs `size_bytes`, `any` vs `null`, `12.0` counts.
    #[test]
    fn json_and_csv_use_the_same_parameter_names_and_values() {
        let case = Case::NetStream(crate::case::StreamCase {
            mode: crate::case::CopyMode::OneCopy,
            rx_mode: crate::case::RxMode::Scatter,
            size: 4096,
            fields: 8,
            net: crate::case::NetParams {
                threads: 1,
                duration_ms: 100,
                warmup_ms: 10,
                client_cpus: None,
                server_cpus: None,
                verify: false,
                endpoint: crate::case::Endpoint::Loopback { port: 0 },
                perf: true,
            },
            prove_copies: false,
            zc_ring: None,
            fixed_buffers: false,
            align: crate::case::Align::Page,
        });
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
