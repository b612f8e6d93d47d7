//! Results storage and export. Exporters turn records into CSV or JSON following
//! docs/output.md.

pub mod export;

use crate::case::Case;
use crate::observation::Observation;
use serde::{Deserialize, Serialize};

/// One observation of one case: what exporters write, one row per case and repetition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The run it belongs to, once stored.
    pub run_id: Option<i64>,
    pub label: String,
    pub case: Case,
    /// 0-based repetition index within the run.
    pub repetition: u32,
    pub observation: Observation,
}
