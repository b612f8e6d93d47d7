//! Page faults, minor and major labelled apart. Minor: first write to each page of fresh
//! anonymous memory (4 KiB pages, THP refused). Major: first read of each page of a file
//! mapping after the file's pages were dropped from the page cache (fsync, then
//! posix_fadvise DONTNEED, checked with mincore), with MADV_RANDOM so no readahead hides
//! faults. getrusage counts the faults taken, so the figure is per fault really taken.

use super::harness::{self, push_summary, push_value, Budget};
use super::scratch::{self, ScratchDir};
use crate::case::MicroCase;
use crate::observation::names;
use crate::observation::{Metric, Observation, Role, Source, WarningKind};
use crate::stop::Stop;
use crate::sys::mem::{self, AnonMap, FileMap, HugePages};
use crate::sys::rusage;
use std::io::Write;

pub const VARIANTS: &[&str] = crate::case::Bench::Pagefault.variants();

/// Bytes of pages faulted in between looks at the stop flag: 1,024 pages, so one atomic load
/// per thousand faults (and a major fault from a slow disk batch still ends in well under
/// 100 ms).
const CHUNK: usize = 4 << 20;

pub fn run(case: &MicroCase, stop: Stop) -> anyhow::Result<Observation> {
    let quick = harness::is_quick(case);
    let samples = Budget::of(case).samples.min(if quick { 3 } else { 7 });
    match case.option("variant").unwrap_or("minor") {
        "minor" => minor(case, quick, samples, stop),
        "major" => major(case, quick, samples, stop),
        other => anyhow::bail!(
            "pagefault: unknown variant '{other}' (accepted: {})",
            VARIANTS.join(", ")
        ),
    }
}

fn minor(case: &MicroCase, quick: bool, samples: usize, stop: Stop) -> anyhow::Result<Observation> {
    let size = harness::opt_u64(case, "size_bytes", if quick { 16 << 20 } else { 64 << 20 })? as usize;
    let pages = size.div_ceil(mem::page_size());
    let mut per_fault = Vec::new();
    let mut faults_per_page = Vec::new();
    for _ in 0..samples + 1 {
        let mut map = AnonMap::new(size, HugePages::Refuse)?;
        let before = rusage::thread()?;
        let t0 = harness::now();
        for chunk in map.as_mut_slice().chunks_mut(CHUNK) {
            mem::write_every_page(chunk);
            harness::check(stop)?;
        }
        let t1 = harness::now();
        let faults = rusage::thread()?.since(&before).minor_faults;
        drop(map);
        if faults == 0 {
            anyhow::bail!("pagefault: no minor faults were counted while touching {pages} new pages");
        }
        per_fault.push(harness::interval_ns(t0, t1) / faults as f64);
        faults_per_page.push(faults as f64 / pages as f64);
    }
    // The first round is warm-up (page tables, allocator).
    let mut obs = Observation::default();
    push_summary(&mut obs, names::TIME_PER_FAULT_NS, "ns", &per_fault[1..], Source::Tool);
    push_value(&mut obs, "pages_touched", "count", pages as f64);
    obs.push(Metric::new(
        "faults_per_page",
        Role::System,
        crate::measure::stats::median(&mut faults_per_page[1..].to_vec()),
        "ratio",
        Source::Rusage,
    ));
    harness::push_overheads(&mut obs);
    Ok(obs)
}

fn major(case: &MicroCase, quick: bool, samples: usize, stop: Stop) -> anyhow::Result<Observation> {
    let size = harness::opt_u64(case, "file_bytes", if quick { 8 << 20 } else { 64 << 20 })? as usize;
    let page = mem::page_size();
    let pages = size.div_ceil(page);
    let scratch = ScratchDir::new(&scratch::base_dir(case.option("dir")))?;
    let path = scratch.path().join("pagefault.dat");
    {
        let mut f = std::fs::File::create(&path)?;
        let block = vec![0x5au8; 1 << 20];
        let mut left = size;
        while left > 0 {
            harness::check(stop)?;
            let n = left.min(block.len());
            f.write_all(&block[..n])?;
            left -= n;
        }
        f.sync_all()?;
    }
    let file = std::fs::File::open(&path)?;
    let mut obs = Observation::default();
    let mut per_fault = Vec::new();
    let mut faults_per_page = Vec::new();
    for _ in 0..samples {
        harness::check(stop)?;
        nix::fcntl::posix_fadvise(&file, 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED)?;
        let map = FileMap::open(&file, size)?;
        let resident = map.resident_pages()?;
        if resident * 100 > pages {
            obs.push(Metric::unavailable(
                names::TIME_PER_FAULT_US,
                Role::System,
                "us",
                format!(
                    "the file's pages stay in memory after POSIX_FADV_DONTNEED ({resident} of {pages} resident): this filesystem (tmpfs?) cannot evict them; pass --dir on a disk filesystem"
                ),
            ));
            harness::push_overheads(&mut obs);
            return Ok(obs);
        }
        let before = rusage::thread()?;
        let t0 = harness::now();
        let mut from = 0;
        while from < size {
            std::hint::black_box(map.touch_pages(from, from + CHUNK));
            from += CHUNK;
            harness::check(stop)?;
        }
        let t1 = harness::now();
        let faults = rusage::thread()?.since(&before).major_faults;
        if faults == 0 {
            anyhow::bail!("pagefault: no major faults were counted reading {pages} evicted pages");
        }
        per_fault.push(harness::interval_ns(t0, t1) / 1000.0 / faults as f64);
        faults_per_page.push(faults as f64 / pages as f64);
    }
    push_summary(&mut obs, names::TIME_PER_FAULT_US, "us", &per_fault, Source::Tool);
    push_value(&mut obs, "pages_touched", "count", pages as f64);
    let ratio = crate::measure::stats::median(&mut faults_per_page);
    obs.push(Metric::new(
        "faults_per_page",
        Role::System,
        ratio,
        "ratio",
        Source::Rusage,
    ));
    if ratio < 0.9 {
        obs.warn(WarningKind::PartialFaults, format!(
            "only {:.0}% of the pages took a major fault (readahead or fault-around filled the rest); the time is per fault taken",
            ratio * 100.0
        ));
    }
    harness::push_overheads(&mut obs);
    Ok(obs)
}
