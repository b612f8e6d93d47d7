//! The CPU caches as the kernel describes them in /sys/devices/system/cpu/cpu0/cache.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheInfo {
    pub level: u32,
    /// "Data", "Instruction" or "Unified".
    pub kind: String,
    pub size_bytes: u64,
    pub line_bytes: Option<u64>,
    pub ways: Option<u64>,
    /// The CPUs sharing this cache, in the kernel's list format ("0-1").
    pub shared_cpus: Option<String>,
}

/// Parse sysfs cache sizes such as "32K", "32768K", "1M".
pub fn parse_cache_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, mult) = match t.chars().last()? {
        'K' | 'k' => (&t[..t.len() - 1], 1024),
        'M' | 'm' => (&t[..t.len() - 1], 1024 * 1024),
        'G' | 'g' => (&t[..t.len() - 1], 1024 * 1024 * 1024),
        _ => (t, 1),
    };
    digits.trim().parse::<u64>().ok().map(|n| n * mult)
}

/// cpu0's caches, by level then kind; empty when sysfs does not say.
pub fn cpu0_caches() -> Vec<CacheInfo> {
    let dir = "/sys/devices/system/cpu/cpu0/cache";
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let read = |p: &std::path::Path, f: &str| super::procfs::read_trimmed(p.join(f));
    let mut out: Vec<CacheInfo> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("index"))
        })
        .filter_map(|p| {
            Some(CacheInfo {
                level: read(&p, "level")?.parse().ok()?,
                kind: read(&p, "type")?,
                size_bytes: parse_cache_size(&read(&p, "size")?)?,
                line_bytes: read(&p, "coherency_line_size").and_then(|s| s.parse().ok()),
                ways: read(&p, "ways_of_associativity").and_then(|s| s.parse().ok()),
                shared_cpus: read(&p, "shared_cpu_list"),
            })
        })
        .collect();
    out.sort_by(|a, b| (a.level, &a.kind).cmp(&(b.level, &b.kind)));
    out
}

/// The size of the last-level cache, if known.
pub fn last_level_bytes() -> Option<u64> {
    cpu0_caches()
        .iter()
        .filter(|c| c.kind != "Instruction")
        .max_by_key(|c| c.level)
        .map(|c| c.size_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_cache_size("32K"), Some(32768));
        assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(parse_cache_size("1M"), Some(1 << 20));
        assert_eq!(parse_cache_size("bogus"), None);
    }
}
