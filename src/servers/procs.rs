//! The top-k process service: read /proc/[pid]/stat for every process and rank by CPU ticks,
//! either since each process started (utime+stime) or during the last sampling interval.

use super::protocol::{ProcEntry, ProcsReply, Rank};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One process as read from its stat file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: u32,
    pub name: String,
    pub user_ticks: u64,
    pub system_ticks: u64,
    /// Start time in ticks since boot: tells a reused pid from the process that had it before.
    pub start_ticks: u64,
}

/// Parse the text of /proc/[pid]/stat. The command name sits between the first '(' and the
/// LAST ')' because it may itself contain spaces and parentheses.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    if close < open {
        return None;
    }
    let pid = text[..open].trim().parse().ok()?;
    let name = text[open + 1..close].to_string();
    // Fields after the name, numbered from 3 (state) as in proc(5).
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).and_then(|s| s.parse::<u64>().ok());
    Some(ProcStat {
        pid,
        name,
        user_ticks: field(14)?,
        system_ticks: field(15)?,
        start_ticks: field(22)?,
    })
}

/// Read every process now. Processes that exit mid-scan (their stat file vanishes or reads
/// short) are skipped.
pub fn scan() -> std::io::Result<Vec<ProcStat>> {
    let mut out = Vec::with_capacity(256);
    for entry in std::fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|s| s.bytes().all(|b| b.is_ascii_digit())) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(stat) = parse_stat(&text) {
            out.push(stat);
        }
    }
    Ok(out)
}

/// The k entries with the most ranked ticks, most first (ties: lower pid first).
pub fn top_k(mut entries: Vec<ProcEntry>, k: usize) -> Vec<ProcEntry> {
    entries.sort_by(|a, b| b.ranked_ticks.cmp(&a.ranked_ticks).then(a.pid.cmp(&b.pid)));
    entries.truncate(k);
    entries
}

fn totals(stats: &[ProcStat]) -> Vec<ProcEntry> {
    stats
        .iter()
        .map(|s| ProcEntry {
            pid: s.pid,
            name: s.name.clone(),
            user_ticks: s.user_ticks,
            system_ticks: s.system_ticks,
            ranked_ticks: s.user_ticks + s.system_ticks,
        })
        .collect()
}

/// CPU used between two scans, for processes present in both (same pid and start time).
pub fn deltas(before: &[ProcStat], after: &[ProcStat]) -> Vec<ProcEntry> {
    let earlier: HashMap<(u32, u64), &ProcStat> = before.iter().map(|s| ((s.pid, s.start_ticks), s)).collect();
    after
        .iter()
        .filter_map(|s| {
            let b = earlier.get(&(s.pid, s.start_ticks))?;
            let user = s.user_ticks.saturating_sub(b.user_ticks);
            let system = s.system_ticks.saturating_sub(b.system_ticks);
            Some(ProcEntry {
                pid: s.pid,
                name: s.name.clone(),
                user_ticks: user,
                system_ticks: system,
                ranked_ticks: user + system,
            })
        })
        .collect()
}

/// USER_HZ, the unit of the tick counts.
pub fn ticks_per_s() -> u32 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(100)
}

/// The service behind `procs` requests. With an interval, a sampler thread rescans /proc every
/// interval and keeps the per-interval ranking ready, so no request ever waits an interval.
pub struct ProcsService {
    interval: Option<Duration>,
    latest: Arc<Mutex<Option<Vec<ProcEntry>>>>,
    sampler: Mutex<Option<Sampler>>,
    ticks_per_s: u32,
}

struct Sampler {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: JoinHandle<()>,
}

impl ProcsService {
    pub fn new(interval: Option<Duration>) -> ProcsService {
        let latest = Arc::new(Mutex::new(None));
        let sampler = interval.map(|every| {
            let stop = Arc::new((Mutex::new(false), Condvar::new()));
            let (stop2, latest2) = (stop.clone(), latest.clone());
            let thread = std::thread::spawn(move || sample_loop(every, &stop2, &latest2));
            Sampler { stop, thread }
        });
        ProcsService {
            interval,
            latest,
            sampler: Mutex::new(sampler),
            ticks_per_s: ticks_per_s(),
        }
    }

    /// Answer one request.
    pub fn reply(&self, k: u16, rank: Rank) -> Result<ProcsReply, String> {
        let entries = match rank {
            Rank::Total => totals(&scan().map_err(|e| format!("reading /proc failed: {e}"))?),
            Rank::Interval => {
                if self.interval.is_none() {
                    return Err("this server ranks by total CPU only (start it with --interval)".into());
                }
                match self.latest.lock() {
                    Ok(guard) => guard.clone().unwrap_or_default(),
                    Err(_) => return Err("sampler failed".into()),
                }
            }
        };
        Ok(ProcsReply {
            rank,
            interval_ms: self.interval.map_or(0, |d| d.as_millis().min(u32::MAX as u128) as u32),
            ticks_per_s: self.ticks_per_s,
            entries: top_k(entries, k as usize),
        })
    }

    /// Stop and join the sampler thread (also done on drop).
    pub fn shutdown(&self) {
        let sampler = self.sampler.lock().ok().and_then(|mut s| s.take());
        if let Some(s) = sampler {
            if let Ok(mut flag) = s.stop.0.lock() {
                *flag = true;
            }
            s.stop.1.notify_all();
            let _ = s.thread.join();
        }
    }
}

impl Drop for ProcsService {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn sample_loop(every: Duration, stop: &(Mutex<bool>, Condvar), latest: &Mutex<Option<Vec<ProcEntry>>>) {
    let mut previous = scan().unwrap_or_default();
    let mut next = Instant::now() + every;
    loop {
        // Sleep until the next sample or until asked to stop.
        let Ok(mut stopped) = stop.0.lock() else { return };
        while !*stopped {
            let now = Instant::now();
            if now >= next {
                break;
            }
            match stop.1.wait_timeout(stopped, next - now) {
                Ok((guard, _)) => stopped = guard,
                Err(_) => return,
            }
        }
        if *stopped {
            return;
        }
        drop(stopped);
        next += every;
        let current = scan().unwrap_or_default();
        let ranked = deltas(&previous, &current);
        if let Ok(mut slot) = latest.lock() {
            *slot = Some(ranked);
        }
        previous = current;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 17 4 0 0 20 0 1 0 5555 1000 10 18446744073709551615";

    #[test]
    fn names_with_spaces_and_parentheses() {
        let s = parse_stat(STAT).unwrap();
        assert_eq!(s.pid, 1234);
        assert_eq!(s.name, "a (weird) name");
        assert_eq!(s.user_ticks, 17);
        assert_eq!(s.system_ticks, 4);
        assert_eq!(s.start_ticks, 5555);
    }

    #[test]
    fn truncated_stat_is_rejected() {
        assert_eq!(parse_stat("12 (x) S 1 2 3"), None);
        assert_eq!(parse_stat(""), None);
        assert_eq!(parse_stat("12 )x( S"), None);
    }

    #[test]
    fn this_process_is_in_the_scan() {
        let me = std::process::id();
        let all = scan().unwrap();
        assert!(all.iter().any(|s| s.pid == me));
    }

    #[test]
    fn ranking_and_deltas() {
        let p = |pid, u, s, start| ProcStat {
            pid,
            name: format!("p{pid}"),
            user_ticks: u,
            system_ticks: s,
            start_ticks: start,
        };
        let top = top_k(totals(&[p(1, 5, 5, 0), p(2, 20, 0, 0), p(3, 1, 9, 0)]), 2);
        assert_eq!(top.iter().map(|e| e.pid).collect::<Vec<_>>(), vec![2, 1]);
        // pid 3 was reused (new start time): not in the deltas.
        let d = deltas(&[p(1, 5, 5, 0), p(3, 1, 1, 0)], &[p(1, 7, 6, 0), p(3, 1, 1, 9)]);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].ranked_ticks, 3);
    }
}
