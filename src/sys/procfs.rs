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

/// When process `pid` started, in clock ticks after boot (/proc/PID/stat field 22): with the
/// pid, what names one process for good (a pid is reused, a start time with it is not).
/// None when no such process exists.
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count after its last ')'.
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
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

/// CPU numbers above this are refused before any list is expanded (the kernel's largest
/// NR_CPUS is 8192).
pub const MAX_CPU: usize = 8191;

/// The online CPUs (/sys/devices/system/cpu/online), or 0..available_parallelism when that
/// cannot be read.
pub fn online_cpus() -> Vec<usize> {
    read_trimmed("/sys/devices/system/cpu/online")
        .and_then(|s| parse_cpu_list(&s))
        .filter(|cpus| !cpus.is_empty())
        .unwrap_or_else(|| (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect())
}

/// Parse a CPU list such as "0-3,5,7-8" (the kernel's format in /sys/devices/system/cpu/*).
/// None for malformed text or a CPU number above [`MAX_CPU`].
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>().ok()?, b.trim().parse::<usize>().ok()?),
            None => {
                let one = part.trim().parse::<usize>().ok()?;
                (one, one)
            }
        };
        if a > b || b > MAX_CPU {
            return None;
        }
        cpus.extend(a..=b);
        if cpus.len() > MAX_CPU + 1 {
            return None;
        }
    }
    Some(cpus)
}

/// Memory this process may still allocate: MemAvailable, lowered by the memory cgroup's limit
/// (v2 `memory.max` - `memory.current` of this cgroup and every ancestor; v1
/// `memory.limit_in_bytes` - `memory.usage_in_bytes`). None when MemAvailable is unknown.
pub fn memory_headroom() -> Option<u64> {
    let available = meminfo_bytes("MemAvailable:")?;
    Some(cgroup_headroom().map_or(available, |h| h.min(available)))
}

fn cgroup_headroom() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut best: Option<u64> = None;
    let mut consider = |limit: Option<u64>, used: Option<u64>| {
        if let (Some(limit), Some(used)) = (limit, used) {
            let room = limit.saturating_sub(used);
            best = Some(best.map_or(room, |b| b.min(room)));
        }
    };
    let number = |path: String| read_trimmed(&path).and_then(|t| t.parse::<u64>().ok());
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        // The limit of every ancestor applies too.
        let (root, limit, usage) = if controllers.is_empty() {
            ("/sys/fs/cgroup", "memory.max", "memory.current")
        } else if controllers.split(',').any(|c| c == "memory") {
            (
                "/sys/fs/cgroup/memory",
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        } else {
            continue;
        };
        let mut dir = std::path::PathBuf::from(format!("{root}{path}"));
        loop {
            let d = dir.display();
            consider(number(format!("{d}/{limit}")), number(format!("{d}/{usage}")));
            if !dir.pop() || !dir.starts_with(root) {
                break;
            }
        }
    }
    best
}

/// When process `pid` started (field 22 of /proc/PID/stat, clock ticks after boot): with the
/// pid, what tells one process from a later one given the same pid. None when there is no
/// such process, or only its zombie (dead, not yet reaped).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or ')'.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    if matches!(fields.next(), Some("Z" | "X" | "x")) {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// The file name of process `pid`'s program (/proc/PID/exe; its command name when the link
/// cannot be read, as for another user's process). None when there is no such process or only
/// its zombie.
pub fn program_name(pid: u32) -> Option<String> {
    start_time(pid)?;
    match std::fs::read_link(format!("/proc/{pid}/exe")) {
        Ok(exe) => exe.file_name().map(|n| n.to_string_lossy().into_owned()),
        Err(_) => read_trimmed(format!("/proc/{pid}/comm")),
    }
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
        // Found by attack: a huge range was expanded until memory ran out.
        assert_eq!(parse_cpu_list("0-18446744073709551615"), None);
        assert_eq!(parse_cpu_list("9000"), None);
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }
}
