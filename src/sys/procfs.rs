//! Small readers for /proc and /sys files. No unsafe here; they live in sys/ because they are
//! the machine's raw answers, parsed by callers.

use std::path::Path;

/// A /proc or /sys file as trimmed text, or None when it is missing or unreadable.
pub fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// A file holding one integer (e.g. /proc/sys/net/core/optmem_max).
pub fn read_i64(path: impl AsRef<Path>) -> Option<i64> {
    read_trimmed(path)?.parse().ok()
}

/// A /proc/meminfo field (e.g. "MemAvailable:") in bytes.
pub fn meminfo_bytes(key: &str) -> Option<u64> {
    meminfo_field(&read_trimmed("/proc/meminfo")?, key)
}

/// The field `key` of meminfo-formatted `text` ("MemTotal:  123 kB"), in bytes.
pub fn meminfo_field(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Parse a CPU list such as "0-3,5,7-8" (the kernel's format in /sys/devices/system/cpu/*).
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.trim().parse().ok()?),
        }
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_fields() {
        let text = "MemTotal:       24000000 kB\nMemAvailable:   1000 kB\n";
        assert_eq!(meminfo_field(text, "MemAvailable:"), Some(1_024_000));
        assert_eq!(meminfo_field(text, "Nope:"), None);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,5"), Some(vec![0, 1, 2, 3, 5]));
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }
}
