//! Exporters: one trait, one method that serialises records. CSV is wide (one row per case
//! and repetition, a value column and a `_source` column per metric); JSON keeps the nested
//! record. Both are the documented contract in docs/output.md.

use super::Record;
use std::collections::BTreeSet;

pub trait Exporter {
    fn serialize(&self, records: &[Record]) -> anyhow::Result<Vec<u8>>;
}

pub struct JsonExporter;
pub struct CsvExporter;

impl Exporter for JsonExporter {
    fn serialize(&self, records: &[Record]) -> anyhow::Result<Vec<u8>> {
        let mut out = serde_json::to_vec_pretty(records)?;
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
        header.push("warnings".into());
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
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default(),
                );
            }
            for (role, name, _) in &metric_keys {
                match r.observation.get(name, *role) {
                    Some(m) => {
                        row.push(m.value.map(|v| v.to_string()).unwrap_or_default());
                        row.push(m.source.to_string());
                    }
                    None => {
                        row.push(String::new());
                        row.push(String::new());
                    }
                }
            }
            row.push(r.observation.warnings.join(" | "));
            w.write_record(&row)?;
        }
        Ok(w.into_inner()?)
    }
}
