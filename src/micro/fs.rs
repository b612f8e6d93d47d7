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
use rand::{Rng, SeedableRng};
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
    match statfs::fs_type(scratch.path()) {
        Ok(fs) => {
            harness::push_value(&mut obs, names::FS_TYPE_MAGIC, "f_type", fs.magic as f64);
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
        "cache_read" => cache_read(case, quick, scratch.path(), stop, &mut obs)?,
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
    let mut left = size;
    while left > 0 {
        harness::check(stop)?;
        let n = left.min(block.len() as u64) as usize;
        f.write_all(&block[..n])?;
        left -= n as u64;
    }
    f.sync_all()?;
    Ok(())
}

pub(super) fn drop_cache(file: &File) -> anyhow::Result<()> {
    nix::fcntl::posix_fadvise(
        file.as_raw_fd(),
        0,
        0,
        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
    )?;
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
                    rng.gen_range(0..blocks) * BLOCK as u64
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

/// Re-read a file that was just read (so it is cached if it fits): time per MiB.
fn cache_read(case: &MicroCase, quick: bool, dir: &Path, stop: Stop, obs: &mut Observation) -> anyhow::Result<()> {
    let size = harness::opt_u64(case, "file_bytes", if quick { 4 << 20 } else { 64 << 20 })?;
    let samples = Budget::of(case).samples.min(if quick { 3 } else { 5 });
    let path = dir.join("cache.dat");
    write_file(&path, size, stop)?;
    let file = File::open(&path)?;
    let mut buf = vec![0u8; 1 << 20];
    let read_all = |buf: &mut [u8]| -> anyhow::Result<u64> {
        let mut off = 0u64;
        loop {
            let n = file.read_at(buf, off)?;
            if n == 0 {
                return Ok(off);
            }
            off += n as u64;
            harness::check(stop)?; // once per MiB buffer
        }
    };
    read_all(&mut buf)?; // fill the page cache
    let mut us_per_mib = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t0 = harness::now();
        let bytes = read_all(&mut buf)?;
        let t1 = harness::now();
        us_per_mib.push(harness::interval_ns(t0, t1) / 1000.0 / (bytes as f64 / MIB));
    }
    push_summary(obs, names::READ_TIME_PER_MIB_US, "us", &us_per_mib, Source::Tool);
    // Whether the file really stayed in the page cache: time alone cannot tell a cached file
    // read from DRAM from one read off a fast disk.
    let map = FileMap::open(&file, size as usize)?;
    let pages = (size as usize).div_ceil(crate::sys::mem::page_size());
    push_value(
        obs,
        names::RESIDENT_FRACTION,
        "ratio",
        map.resident_pages()? as f64 / pages as f64,
    );
    Ok(())
}

/// The file cache size knee from (file bytes, fraction of its pages resident after re-reading
/// it) points: the smallest size of which less than 90% stayed in the page cache. None when
/// every file stayed resident (the cache holds at least the largest size tried).
pub fn detect_knee(points: &[(u64, f64)]) -> Option<u64> {
    let mut pts: Vec<(u64, f64)> = points.iter().copied().filter(|p| p.1.is_finite()).collect();
    pts.sort_by_key(|p| p.0);
    pts.iter().find(|p| p.1 < 0.9).map(|p| p.0)
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

    #[test]
    fn knee_where_files_stop_staying_resident() {
        let m = 1u64 << 20;
        let pts = [(m, 1.0), (2 * m, 1.0), (4 * m, 0.99), (8 * m, 0.4), (16 * m, 0.2)];
        assert_eq!(detect_knee(&pts), Some(8 * m));
        assert_eq!(detect_knee(&pts[..3]), None);
        assert_eq!(detect_knee(&[]), None);
        // Order does not matter.
        let mut rev = pts.to_vec();
        rev.reverse();
        assert_eq!(detect_knee(&rev), Some(8 * m));
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
