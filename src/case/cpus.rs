//! A list of CPU numbers (where threads are pinned), in the order given: thread i of a side
//! runs on entry `i % len`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// CPU numbers in the order given. Serialises as a JSON array of numbers (the stream case's
/// form); `as_text` serialises it in the kernel's list syntax (`0-1,4`) instead (the servers
/// case's form).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CpuList(Vec<usize>);

impl CpuList {
    pub fn new(cpus: Vec<usize>) -> CpuList {
        CpuList(cpus)
    }

    pub fn as_slice(&self) -> &[usize] {
        &self.0
    }

    pub fn to_vec(&self) -> Vec<usize> {
        self.0.clone()
    }

    /// The CPU thread `index` of a side is pinned to: the list's entries in turn, wrapping;
    /// None for an empty list.
    pub fn cpu_for(&self, index: usize) -> Option<usize> {
        (!self.0.is_empty()).then(|| self.0[index % self.0.len()])
    }
}

impl From<Vec<usize>> for CpuList {
    fn from(cpus: Vec<usize>) -> CpuList {
        CpuList(cpus)
    }
}

impl std::ops::Deref for CpuList {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        &self.0
    }
}

/// A side's CPUs as a case parameter: space-separated in the order given, or `any` when the
/// side was not pinned.
pub fn param_text(cpus: &Option<CpuList>) -> String {
    match cpus {
        Some(list) => list.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" "),
        None => "any".to_string(),
    }
}

/// The kernel's list syntax: ascending runs of consecutive CPUs as `a-b`, others
/// comma-separated, in the order given (`0-1`, `0,2`, `3,1`).
impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end += 1;
            }
            parts.push(if end > start {
                format!("{start}-{end}")
            } else {
                start.to_string()
            });
            i += 1;
        }
        f.write_str(&parts.join(","))
    }
}

impl std::str::FromStr for CpuList {
    type Err = String;
    /// The kernel's list syntax, e.g. `0`, `0,2` or `0-3,5`; an empty list is refused.
    fn from_str(s: &str) -> Result<Self, String> {
        crate::sys::procfs::parse_cpu_list(s)
            .filter(|c| !c.is_empty())
            .map(CpuList)
            .ok_or_else(|| format!("'{s}' is not a CPU list (accepted: CPU numbers like 0, 0,1 or 0-3)"))
    }
}

/// `#[serde(with = "as_text")]` for an `Option<CpuList>` stored as `"0-1"` (or null).
pub mod as_text {
    use super::CpuList;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(cpus: &Option<CpuList>, s: S) -> Result<S::Ok, S::Error> {
        match cpus {
            Some(list) => s.collect_str(list),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<CpuList>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(text) => text.parse().map(Some).map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips_and_keeps_the_order() {
        for text in ["0", "0-1", "0,2", "0-3,5", "3,1", "1-2,0"] {
            assert_eq!(text.parse::<CpuList>().unwrap().to_string(), text);
        }
        assert_eq!("2,0".parse::<CpuList>().unwrap().as_slice(), &[2, 0]);
        let wraps = CpuList::new(vec![3, 1]);
        assert_eq!([0, 1, 2].map(|i| wraps.cpu_for(i)), [Some(3), Some(1), Some(3)]);
        assert_eq!(CpuList::new(vec![]).cpu_for(0), None);
        assert!("".parse::<CpuList>().is_err());
        assert!("a".parse::<CpuList>().unwrap_err().contains("accepted"));
        assert_eq!(serde_json::to_string(&CpuList::new(vec![0, 1])).unwrap(), "[0,1]");
    }
}
