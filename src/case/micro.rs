//! Parameters of one OS microbenchmark (`iopath micro`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MicroCase {
    /// The benchmark's name as `iopath micro list` prints it.
    pub bench: String,
    /// Its options as (name, value) text pairs, sorted by name.
    pub options: Vec<(String, String)>,
}

impl MicroCase {
    pub fn label(&self) -> String {
        let opts: Vec<String> = self.options.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if opts.is_empty() {
            self.bench.clone()
        } else {
            format!("{} {}", self.bench, opts.join(" "))
        }
    }

    pub fn params(&self) -> Vec<(&'static str, String)> {
        vec![("bench", self.bench.clone())]
    }
}
