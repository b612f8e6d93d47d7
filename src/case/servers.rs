//! Parameters of the server concurrency-model benchmark (`iopath servers`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ServersCase {
    pub model: String,
    pub workload: String,
    pub clients: usize,
    pub duration_ms: u64,
}

impl ServersCase {
    pub fn label(&self) -> String {
        format!("{} {} c{}", self.model, self.workload, self.clients)
    }

    pub fn params(&self) -> Vec<(&'static str, String)> {
        vec![
            ("model", self.model.clone()),
            ("workload", self.workload.clone()),
            ("clients", self.clients.to_string()),
            ("duration_ms", self.duration_ms.to_string()),
        ]
    }
}
