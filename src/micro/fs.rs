//! File system, in a directory the user names (files removed afterwards, also on failure):
//! sequential and random 4 KiB reads with O_DIRECT (buffered reads after dropping the page
//! cache where the filesystem refuses O_DIRECT, e.g. tmpfs, with a note), the file cache size
//! (re-read time per MiB against file size, and how much of each file mincore finds resident:
//! the knee is where files stop staying in the page cache), and read
//! contention among 1..N processes each reading its own file. The directory's file system
//! (statfs) is recorded with every result, with a note where it is not a disk: on tmpfs the
//! "disk" reads are memory copies, and this kernel accepts O_DIRECT there.

use super::harness::{self, push_summary, push_value, Budget};
use super::scratch::{self, ScratchDir};
use crate::case::MicroCase;
use crate::observation::names;
use crate::observation::{Metric, Observation, Role, Source, WarningKind};
use crate::stop::Stop;
use crate::sys::mem::{AnonMap, FileMap, HugePages};
use crate::sys::process;
use crate::sys::statfs::{self, Backing, FsType};
use rand::{RngExt, SeedableRng};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

pub const VARIANTS: &[&str] = crate::case::Bench::Fs.variants();
const BLOCK: usize = 4096;
const MIB: f64 = (1u64 << 20) as f64;
/// 4 KiB reads between looks at the stop flag: a read takes microseconds (milliseconds at
/// random on a spinning disk), so eight of them beside one atomic load cost nothing measurable
/// and still end well within 100 ms.
const READS_PER_CHECK: usize = 8;

/// A stop request is noticed every MiB written or read and while waiting for the contention
/// readers; reader children are killed and reaped, and the scratch directory removed, on
/// every return.
pub fn run(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    let quick = harness::is_quick(case);
    let scratch = ScratchDir::new(&scratch::base_dir(case.option("dir")))?;
    let mut obs = Observation::default();
    let variant = case.option("variant").unwrap_or("seq_read");
    let mut in_memory = false;
    match statfs::fs_type(scratch.path()) {
        Ok(fs) => {
            in_memory = fs.backing == Backing::Memory;
            harness::push_value(&mut obs, "fs_type_magic", "f_type", fs.magic as f64);
            if let Some(note) = filesystem_note(fs, variant == "cache_read") {
                obs.warn(WarningKind::Substituted, note);
            }
        }
        Err(e) => obs.push(Metric::unavailable(
            names::FS_TYPE_MAGIC,
            Role::System,
            "f_type",
            format!("statfs failed: {e}"),
        )),
    }
    match variant {
        v @ ("seq_read" | "rand_read") => direct_reads(case, quick, v == "rand_read", scratch.path(), stop, &mut obs)?,
        "cache_read" => cache_read(case, quick, in_memory, scratch.path(), stop, &mut obs)?,
        "contention" => contention(case, quick, scratch.path(), stop, &mut obs)?,
        other => anyhow::bail!("fs: unknown variant '{other}' (accepted: {})", VARIANTS.join(", ")),
    }
    harness::push_overheads(&mut obs);
    Ok(obs)
}

/// What was really measured when the directory is not on a disk-backed file system; None on a
/// disk. `cache_read` re-reads cached files, the others read past the page cache.
pub fn filesystem_note(fs: FsType, cache_read: bool) -> Option<String> {
    let name = fs.name;
    Some(match (fs.backing, cache_read) {
        (Backing::Disk, _) => return None,
        (Backing::Memory, false) => format!(
            "the directory is on {name} (memory): O_DIRECT reads measure memory copies, not a disk; use --dir on a disk-backed file system"
        ),
        (Backing::Memory, true) => format!(
            "the directory is on {name} (memory): its files are never evicted to a disk, so they always stay resident and no file cache knee can show; use --dir on a disk-backed file system"
        ),
        (Backing::Overlay, _) => format!(
            "the directory is on {name} (a container's root): reads pass through to the file system below it (its upper or lower layer), which statfs cannot name from here; if that is tmpfs the reads measure memory, so use --dir on a disk-backed mount (a volume)"
        ),
        (Backing::Network, _) => format!(
            "the directory is on {name} (network): reads go to a server and its caches, O_DIRECT bypasses only this machine's page cache; use --dir on a local disk to measure a disk"
        ),
        (Backing::Fuse, _) => format!(
            "the directory is on {name} (a FUSE daemon such as virtiofs or sshfs): what a read reaches, and whether O_DIRECT is honoured, is up to the daemon; use --dir on a local disk to measure a disk"
        ),
        (Backing::Unknown, _) => format!(
            "the directory is on a file system iopath does not know (statfs f_type {:#x}): check that it is disk-backed before reading these figures as disk reads",
            fs.magic
        ),
    })
}

/// Write `size` bytes of a pattern to `path` and fsync it.
pub(super) fn write_file(path: &Path, size: u64, stop: Stop) -> anyhow::Result<()> {
    let mut f = File::create(path)?;
    let block: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    harness::write_in_chunks(&mut f, &block, size, stop)?;
    f.sync_all()?;
    Ok(())
}

pub(super) fn drop_cache(file: &File) -> anyhow::Result<()> {
    nix::fcntl::posix_fadvise(file, 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED)?;
    Ok(())
}

/// Open for reading with O_DIRECT, or buffered when the filesystem refuses it (Ok(false)).
pub(super) fn open_direct(path: &Path) -> anyhow::Result<(File, bool)> {
    match OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok((File::open(path)?, false)),
        Err(e) => Err(e.into()),
    }
}

const NO_DIRECT_NOTE: &str = "this filesystem refuses O_DIRECT (EINVAL, e.g. tmpfs): buffered reads after POSIX_FADV_DONTNEED were timed instead, and the page cache may still serve them";

fn direct_reads(
    case: &MicroCase,
    quick: bool,
    random: bool,
    dir: &Path,
    stop: Stop,
    obs: &mut Observation,
) -> anyhow::Result<()> {
    let size = harness::opt_u64(case, "file_bytes", if quick { 8 << 20 } else { 64 << 20 })?;
    let size = size.div_ceil(BLOCK as u64) * BLOCK as u64;
    let samples = Budget::of(case).samples.min(if quick { 3 } else { 5 });
    let path = dir.join("fs.dat");
    write_file(&path, size, stop)?;
    let (file, direct) = open_direct(&path)?;
    if !direct {
        obs.warn(WarningKind::Substituted, NO_DIRECT_NOTE);
    }
    let mut buf = AnonMap::new(BLOCK, HugePages::Refuse)?;
    let blocks = size / BLOCK as u64;
    let reads = if random {
        blocks.min(if quick { 1024 } else { 8192 })
    } else {
        blocks
    };
    let mut rng = rand::rngs::SmallRng::seed_from_u64(42);
    let mut per_read_us = Vec::with_capacity(samples);
    let mut mib_s = Vec::with_capacity(samples);
    for _ in 0..samples {
        drop_cache(&file)?;
        let offsets: Vec<u64> = (0..reads)
            .map(|i| {
                if random {
                    rng.random_range(0..blocks) * BLOCK as u64
                } else {
                    i * BLOCK as u64
                }
            })
            .collect();
        let t0 = harness::now();
        for batch in offsets.chunks(READS_PER_CHECK) {
            for off in batch {
                let n = file.read_at(&mut buf.as_mut_slice()[..BLOCK], *off)?;
                if n != BLOCK {
                    anyhow::bail!("fs: short read of {n} bytes at offset {off}");
                }
            }
            harness::check(stop)?;
        }
        let t1 = harness::now();
        let ns = harness::interval_ns(t0, t1);
        per_read_us.push(ns / 1000.0 / reads as f64);
        mib_s.push(reads as f64 * BLOCK as f64 / MIB / (ns / 1e9));
    }
    push_summary(obs, names::TIME_PER_READ_US, "us", &per_read_us, Source::Tool);
    push_summary(obs, names::BANDWIDTH_MIB_S, "MiB/s", &mib_s, Source::Tool);
    push_value(obs, "o_direct", "bool", if direct { 1.0 } else { 0.0 });
    Ok(())
}

/// The first working set `cache_read` re-reads; it doubles from there.
pub const CACHE_START: u64 = 1 << 20;
/// How long `cache_read` may grow its working set by default: 30 s (15 s with --quick;
/// `--cache-time` sets it, case option `budget_s`), checked before
/// each doubling (the next size is expected to take twice the last) and every MiB within one.
pub const CACHE_BUDGET_S: u64 = 30;
pub const CACHE_BUDGET_QUICK_S: u64 = 15;
/// With --quick (and no --cache-max) the working set stops at 16 MiB: a quick run is a few
/// seconds, not a search for the knee.
pub const CACHE_QUICK_MAX: u64 = 16 << 20;
/// A size is resident when at least this fraction of its pages stayed in the page cache.
const RESIDENT: f64 = 0.9;

/// Why the working set stopped growing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheStop {
    /// A size did not stay resident: the knee.
    Knee,
    /// The time budget (`CACHE_BUDGET_S`).
    Time,
    /// The next size would take more than half the scratch folder's free space.
    Disk,
    /// The next size is past twice the memory this process may use (MemAvailable and the
    /// memory cgroup's headroom; a quarter of it on tmpfs): the page cache cannot hold it.
    Memory,
    /// `--cache-max`.
    CacheMax,
    /// `--quick` without `--cache-max`: `CACHE_QUICK_MAX`.
    Quick,
}

impl CacheStop {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheStop::Knee => "knee",
            CacheStop::Time => "time",
            CacheStop::Disk => "disk",
            CacheStop::Memory => "memory",
            CacheStop::CacheMax => "--cache-max",
            CacheStop::Quick => "--quick, which stops at 16MiB",
        }
    }
}

/// One working set re-read: its size, the fraction of its pages mincore found resident after
/// the re-reads and the time of each re-read per MiB.
#[derive(Debug, Clone)]
pub struct CachePoint {
    pub bytes: u64,
    pub resident: f64,
    pub us_per_mib: Vec<f64>,
}

/// The bounds of one growing run.
#[derive(Debug, Clone, Copy)]
pub struct CacheBounds {
    /// `--cache-max`, if given.
    pub cache_max: Option<u64>,
    /// `CACHE_QUICK_MAX` with --quick and no --cache-max.
    pub quick: Option<u64>,
    /// Half the free space of the scratch folder.
    pub disk: Option<u64>,
    /// Twice the memory headroom.
    pub memory: Option<u64>,
}

impl CacheBounds {
    /// What stops a working set of `next` bytes from being tried: the first bound it exceeds,
    /// in the order --cache-max, --quick, disk, memory.
    pub fn refuses(&self, next: u64) -> Option<CacheStop> {
        let over = |b: Option<u64>| b.is_some_and(|b| next > b);
        if over(self.cache_max) {
            Some(CacheStop::CacheMax)
        } else if over(self.quick) {
            Some(CacheStop::Quick)
        } else if over(self.disk) {
            Some(CacheStop::Disk)
        } else if over(self.memory) {
            Some(CacheStop::Memory)
        } else {
            None
        }
    }
}

/// The knee of a growing run: the first size that did not stay resident, with the size just
/// below it (None when the very first size did not fit).
pub fn knee_of(points: &[CachePoint]) -> Option<(Option<&CachePoint>, &CachePoint)> {
    let i = points.iter().position(|p| p.resident < RESIDENT)?;
    Some((i.checked_sub(1).map(|j| &points[j]), &points[i]))
}

/// Re-read a growing working set (one file, doubling from 1 MiB) until a size no longer stays
/// in the page cache (the knee) or a bound stops it (time, disk, memory, --cache-max). Each
/// size is written, read once to fill the cache, re-read `samples` times (timed) and then
/// looked at with mincore.
fn cache_read(
    case: &MicroCase,
    quick: bool,
    in_memory: bool,
    dir: &Path,
    stop: Stop,
    obs: &mut Observation,
) -> anyhow::Result<()> {
    let samples = Budget::of(case).samples.clamp(1, if quick { 2 } else { 3 });
    let budget_s = harness::opt_u64(
        case,
        "budget_s",
        if quick { CACHE_BUDGET_QUICK_S } else { CACHE_BUDGET_S },
    )?;
    if !(1..=86_400).contains(&budget_s) {
        anyhow::bail!("fs cache_read: budget_s must be 1 to 86400 seconds, got {budget_s}");
    }
    let free = nix::sys::statvfs::statvfs(dir)
        .ok()
        .map(|s| s.blocks_available().saturating_mul(s.fragment_size()));
    let headroom = crate::sys::procfs::memory_headroom();
    let cache_max: Option<u64> = case.option("cache_max_bytes").map(|t| t.parse()).transpose()?;
    let bounds = CacheBounds {
        cache_max,
        quick: (quick && cache_max.is_none()).then_some(CACHE_QUICK_MAX),
        disk: free.map(|f| f / 2),
        // On a file system in memory (tmpfs) the files are memory themselves and are never
        // evicted: a quarter of the headroom at most.
        memory: headroom.map(|h| if in_memory { h / 4 } else { h.saturating_mul(2) }),
    };
    let budget_ns = budget_s as f64 * 1e9;
    let start = harness::now();
    let elapsed = || harness::interval_ns(start, harness::now());
    let path = dir.join("cache.dat");
    let mut buf = vec![0u8; 1 << 20];
    let mut points: Vec<CachePoint> = Vec::new();
    // A --cache-max below 1 MiB is the one size tried.
    let page = crate::sys::mem::page_size() as u64;
    let mut size = bounds.cache_max.map_or(CACHE_START, |m| m.clamp(page, CACHE_START));
    let mut last_step_ns = 0.0;
    let stopped_by = loop {
        if let Some(why) = bounds.refuses(size) {
            break why;
        }
        if !points.is_empty() && elapsed() + 2.0 * last_step_ns > budget_ns {
            break CacheStop::Time;
        }
        let t_step = elapsed();
        match cache_point(&path, size, samples, &mut buf, stop, || elapsed() > budget_ns)? {
            Some(p) => points.push(p),
            None => break CacheStop::Time,
        }
        last_step_ns = elapsed() - t_step;
        if knee_of(&points).is_some() {
            break CacheStop::Knee;
        }
        size = size.saturating_mul(2);
    };
    let _ = std::fs::remove_file(&path);
    push_cache_figures(obs, &points, stopped_by, headroom);
    Ok(())
}

/// Write a file of `size` bytes, read it once, re-read it `samples` times (timed) and ask
/// mincore how much of it stayed; None when `late()` said the time budget ran out first.
fn cache_point(
    path: &Path,
    size: u64,
    samples: usize,
    buf: &mut [u8],
    stop: Stop,
    late: impl Fn() -> bool,
) -> anyhow::Result<Option<CachePoint>> {
    let _ = std::fs::remove_file(path); // the last size's pages leave the cache with it
    {
        let mut f = File::create(path)?;
        let mut left = size;
        let block: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        while left > 0 {
            harness::check(stop)?;
            if late() {
                return Ok(None);
            }
            let n = left.min(block.len() as u64) as usize;
            f.write_all(&block[..n])?;
            left -= n as u64;
        }
        f.sync_all()?;
    }
    let file = File::open(path)?;
    let read_all = |buf: &mut [u8]| -> anyhow::Result<Option<u64>> {
        let mut off = 0u64;
        loop {
            let n = file.read_at(buf, off)?;
            if n == 0 {
                return Ok(Some(off));
            }
            off += n as u64;
            harness::check(stop)?; // once per MiB buffer
            if late() {
                return Ok(None);
            }
        }
    };
    if read_all(buf)?.is_none() {
        return Ok(None); // the first read fills the page cache
    }
    let mut us_per_mib = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t0 = harness::now();
        let Some(bytes) = read_all(buf)? else {
            return Ok(None);
        };
        let t1 = harness::now();
        us_per_mib.push(harness::interval_ns(t0, t1) / 1000.0 / (bytes as f64 / MIB));
    }
    // Whether the file really stayed in the page cache: time alone cannot tell a cached file
    // read from DRAM from one read off a fast disk.
    let map = FileMap::open(&file, size as usize)?;
    let pages = (size as usize).div_ceil(crate::sys::mem::page_size());
    let resident = map.resident_pages()? as f64 / pages as f64;
    Ok(Some(CachePoint {
        bytes: size,
        resident,
        us_per_mib,
    }))
}

/// The figures of a growing run: `file_cache_bytes` (the knee, or unavailable with "no knee
/// up to X (stopped by: ...)"), the re-read time and resident fraction of the size just above
/// the knee (or of the largest size when there is none) and of the size just below it, the
/// largest size tried and the memory headroom the ceiling came from.
pub fn push_cache_figures(obs: &mut Observation, points: &[CachePoint], stopped_by: CacheStop, headroom: Option<u64>) {
    let largest = points.last();
    match knee_of(points) {
        Some((below, above)) => {
            push_value(obs, "file_cache_bytes", "bytes", above.bytes as f64);
            // One figure per run (n = 1): the terminal table lists it beside the re-read time.
            push_value(obs, "file_cache_bytes_n", "count", 1.0);
            push_summary(obs, "read_time_per_mib_us", "us", &above.us_per_mib, Source::Tool);
            push_value(obs, "resident_fraction", "ratio", above.resident);
            if let Some(b) = below {
                push_value(obs, "below_knee_bytes", "bytes", b.bytes as f64);
                push_summary(
                    obs,
                    "below_knee_read_time_per_mib_us",
                    "us",
                    &b.us_per_mib,
                    Source::Tool,
                );
                push_value(obs, "below_knee_resident_fraction", "ratio", b.resident);
            }
        }
        None => {
            let reason = match largest {
                Some(p) => format!(
                    "no knee up to {} (stopped by: {}): every size stayed resident",
                    crate::format::format_bytes(p.bytes),
                    stopped_by.as_str()
                ),
                None => format!(
                    "no size was tried (stopped by: {}): the first, {}, is past the bound",
                    stopped_by.as_str(),
                    crate::format::format_bytes(CACHE_START)
                ),
            };
            obs.push(Metric::unavailable("file_cache_bytes", Role::System, "bytes", reason));
            if let Some(p) = largest {
                push_summary(obs, "read_time_per_mib_us", "us", &p.us_per_mib, Source::Tool);
                push_value(obs, "resident_fraction", "ratio", p.resident);
            }
        }
    }
    if let Some(p) = largest {
        push_value(obs, "largest_tried_bytes", "bytes", p.bytes as f64);
    }
    if let Some(h) = headroom {
        push_value(obs, "memory_headroom_bytes", "bytes", h as f64);
    }
}

/// N processes, each reading its own file start to end at the same moment.
fn contention(case: &MicroCase, quick: bool, dir: &Path, stop: Stop, obs: &mut Observation) -> anyhow::Result<()> {
    let procs = harness::opt_u64(case, "procs", 1)? as usize;
    if procs == 0 || procs > 64 {
        anyhow::bail!("fs contention: procs must be 1..64, got {procs}");
    }
    let size = harness::opt_u64(case, "file_bytes", if quick { 4 << 20 } else { 32 << 20 })?;
    let rounds = Budget::of(case).samples.min(if quick { 2 } else { 3 });
    let mut files = Vec::with_capacity(procs);
    let mut direct_everywhere = true;
    for i in 0..procs {
        let path = dir.join(format!("reader-{i}.dat"));
        write_file(&path, size, stop)?;
        let (f, direct) = open_direct(&path)?;
        direct_everywhere &= direct;
        files.push(f);
    }
    if !direct_everywhere {
        obs.warn(WarningKind::Substituted, NO_DIRECT_NOTE);
    }
    let mut buf = AnonMap::new(64 << 10, HugePages::Refuse)?;
    let mut per_proc = Vec::new();
    let mut aggregate = Vec::new();
    for _ in 0..rounds {
        harness::check(stop)?;
        for f in &files {
            drop_cache(f)?;
        }
        let (go_r, go_w) = process::pipe()?;
        let (rep_r, rep_w) = process::pipe()?;
        let mut children = Vec::with_capacity(procs);
        for f in &files {
            children.push(process::fork_file_reader(
                f.as_raw_fd(),
                buf.as_mut_slice(),
                go_r.as_raw_fd(),
                rep_w.as_raw_fd(),
            )?);
        }
        drop((go_r, rep_w));
        process::write_all_fd(&go_w, &vec![1u8; procs])?;
        let mut slowest = 0u64;
        let mut total = 0u64;
        for _ in 0..procs {
            let mut raw = [0u8; 16];
            // Waits in Stop::POLL steps; on a stop the readers are killed as `children` drops.
            process::read_exact_fd(&rep_r, &mut raw, stop)?;
            let r = process::decode_reader_result(&raw);
            per_proc.push(r.bytes as f64 / MIB / (r.nanos.max(1) as f64 / 1e9));
            slowest = slowest.max(r.nanos);
            total += r.bytes;
        }
        for child in children {
            let status = child.wait(stop)?;
            if status != 0 {
                anyhow::bail!("fs contention: a reader exited with status {status}");
            }
        }
        aggregate.push(total as f64 / MIB / (slowest.max(1) as f64 / 1e9));
    }
    push_summary(obs, "bandwidth_per_proc_mib_s", "MiB/s", &per_proc, Source::Tool);
    push_summary(obs, names::BANDWIDTH_TOTAL_MIB_S, "MiB/s", &aggregate, Source::Tool);
    push_value(obs, "o_direct", "bool", if direct_everywhere { 1.0 } else { 0.0 });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(mib: u64, resident: f64, us: f64) -> CachePoint {
        CachePoint {
            bytes: mib << 20,
            resident,
            us_per_mib: vec![us, us * 1.1],
        }
    }

    #[test]
    fn knee_where_files_stop_staying_resident() {
        let pts = [
            point(1, 1.0, 80.0),
            point(2, 1.0, 90.0),
            point(4, 0.99, 95.0),
            point(8, 0.4, 900.0),
        ];
        let (below, above) = knee_of(&pts).expect("a knee");
        assert_eq!(below.map(|b| b.bytes), Some(4 << 20));
        assert_eq!(above.bytes, 8 << 20);
        assert!(knee_of(&pts[..3]).is_none());
        assert!(knee_of(&[]).is_none());
        let (below, above) = knee_of(&pts[3..]).expect("the first size did not fit");
        assert!(below.is_none());
        assert_eq!(above.bytes, 8 << 20);
    }

    /// The knee is a stored figure with the evidence beside it; without one the reason says
    /// how far the run got and what stopped it.
    #[test]
    fn the_knee_is_a_figure_and_no_knee_says_why() {
        let pts = [point(1, 1.0, 80.0), point(2, 0.97, 90.0), point(4, 0.5, 900.0)];
        let mut obs = Observation::default();
        push_cache_figures(&mut obs, &pts, CacheStop::Knee, Some(96 << 20));
        let v = |n: &str| obs.value(n, Role::System);
        assert_eq!(v("file_cache_bytes"), Some((4u64 << 20) as f64));
        assert_eq!(v("below_knee_bytes"), Some((2u64 << 20) as f64));
        assert_eq!(v("resident_fraction"), Some(0.5));
        assert_eq!(v("below_knee_resident_fraction"), Some(0.97));
        assert!(v("read_time_per_mib_us").is_some_and(|t| t > 900.0));
        assert!(v("below_knee_read_time_per_mib_us").is_some_and(|t| t < 100.0));
        assert_eq!(v("memory_headroom_bytes"), Some((96u64 << 20) as f64));

        let mut obs = Observation::default();
        push_cache_figures(&mut obs, &pts[..2], CacheStop::Time, None);
        let m = obs.get("file_cache_bytes", Role::System).expect("always pushed");
        assert_eq!(m.value, None);
        assert!(
            m.source.to_string().contains("no knee up to 2MiB (stopped by: time)"),
            "{}",
            m.source
        );
        assert_eq!(
            obs.value("largest_tried_bytes", Role::System),
            Some((2u64 << 20) as f64)
        );
        assert_eq!(obs.value("resident_fraction", Role::System), Some(0.97));
    }

    #[test]
    fn each_bound_stops_the_growth_and_is_named() {
        let b = CacheBounds {
            cache_max: None,
            quick: None,
            disk: Some(64 << 20),
            memory: Some(32 << 20),
        };
        assert_eq!(b.refuses(32 << 20), None);
        assert_eq!(b.refuses(64 << 20), Some(CacheStop::Memory));
        assert_eq!(b.refuses(128 << 20), Some(CacheStop::Disk));
        let b = CacheBounds {
            cache_max: Some(4 << 20),
            ..b
        };
        assert_eq!(b.refuses(8 << 20), Some(CacheStop::CacheMax));
        let quick = CacheBounds {
            cache_max: None,
            quick: Some(CACHE_QUICK_MAX),
            disk: None,
            memory: None,
        };
        assert_eq!(quick.refuses(CACHE_QUICK_MAX), None);
        assert_eq!(quick.refuses(2 * CACHE_QUICK_MAX), Some(CacheStop::Quick));
        let none = CacheBounds {
            cache_max: None,
            quick: None,
            disk: None,
            memory: None,
        };
        assert_eq!(none.refuses(u64::MAX), None);
    }

    #[test]
    fn a_directory_in_memory_says_what_was_measured() {
        let tmpfs = statfs::classify(0x0102_1994);
        let note = filesystem_note(tmpfs, false).unwrap();
        assert!(
            note.starts_with("the directory is on tmpfs (memory): O_DIRECT reads measure memory copies, not a disk")
        );
        assert!(filesystem_note(tmpfs, true).unwrap().contains("no file cache knee"));
        assert!(filesystem_note(statfs::classify(0x794c_7630), false)
            .unwrap()
            .contains("pass through"));
        assert!(filesystem_note(statfs::classify(0x1234), false)
            .unwrap()
            .contains("0x1234"));
        assert_eq!(
            filesystem_note(statfs::classify(0x5846_5342), false),
            None,
            "xfs is a disk"
        );
    }
}
