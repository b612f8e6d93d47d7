//! Issue 24 B: the size of the file cache. `micro fs --variant cache_read` grows its working
//! set until a size no longer stays in the page cache; run inside a memory cgroup (the page
//! cache a process fills is charged to its cgroup) the knee must appear at the cgroup's limit,
//! a size load cannot move. Without the cgroup the run stays within its bounds and says
//! either a size or "no knee up to X (stopped by: ...)".

mod common;

use common::cgroup::MemCgroup;
use common::*;
use serde_json::Value;

const MIB: u64 = 1 << 20;

/// A scratch folder on a disk-backed file system (the temp dir may be tmpfs, where files are
/// never evicted): beside the build.
fn disk_dir() -> tempfile::TempDir {
    let base = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    tempfile::tempdir_in(base).expect("a scratch folder beside the build")
}

fn metric_value(rec: &Value, name: &str) -> Option<f64> {
    metric(rec, name).and_then(|m| m["value"].as_f64())
}

fn cache_record(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status,
        stdout(out),
        stderr(out)
    );
    let recs = json_records(out);
    assert_eq!(recs.len(), 1, "one growing case: {recs:?}");
    recs[0].clone()
}

#[test]
fn the_knee_appears_at_a_memory_cgroups_limit() {
    let limit = 96 * MIB;
    let cg = match MemCgroup::new(limit) {
        Ok(cg) => cg,
        Err(why) => return skip(&why),
    };
    let dir = disk_dir();
    let d = dir.path().to_str().expect("utf-8 path");
    // A generous time budget: the bound this test checks is the memory, not the clock.
    let out = cg
        .command(
            &bin(),
            &[
                "micro",
                "fs",
                "--variant",
                "cache_read",
                "--samples",
                "1",
                "--cache-time",
                "10m",
                "--dir",
                d,
                "--json",
            ],
        )
        .output()
        .expect("run iopath in the cgroup");
    let rec = cache_record(&out);
    let knee =
        metric_value(&rec, "file_cache_bytes").unwrap_or_else(|| panic!("no knee inside a {limit}-byte cgroup: {rec}"));
    assert!(
        (limit as f64 * 0.5..=limit as f64 * 2.0).contains(&knee),
        "knee {knee} not within 0.5x..2x of the cgroup limit {limit}: {rec}"
    );
    // The evidence: the size at the knee did not stay resident, the one below it did.
    let above = metric_value(&rec, "resident_fraction").expect("resident_fraction");
    let below = metric_value(&rec, "below_knee_resident_fraction").expect("below the knee");
    assert!(
        above < 0.9 && below >= 0.9,
        "resident {below} below, {above} at the knee"
    );
    assert_eq!(metric_value(&rec, "below_knee_bytes"), Some(knee / 2.0));
    assert_eq!(cg.oom_kills().unwrap_or(0), 0, "the reader was OOM-killed");
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0, "files removed");

    // The terminal says the same, with the evidence.
    let text = cg
        .command(
            &bin(),
            &[
                "micro",
                "fs",
                "--variant",
                "cache_read",
                "--samples",
                "1",
                "--cache-time",
                "10m",
                "--dir",
                d,
            ],
        )
        .output()
        .expect("run iopath in the cgroup");
    let s = stdout(&text);
    assert!(text.status.success(), "{s}{}", stderr(&text));
    assert!(s.contains("file cache: about "), "{s}");
    assert!(s.contains("resident"), "{s}");
}

/// Without a cgroup (this machine has far more memory than the bound), the run ends within its
/// time budget with a size or "no knee up to X (stopped by: ...)", and removes its files.
#[test]
fn without_a_cgroup_the_run_is_bounded_and_says_why_it_stopped() {
    let dir = disk_dir();
    let d = dir.path().to_str().expect("utf-8 path");
    let started = std::time::Instant::now();
    let out = iopath()
        .args([
            "micro",
            "fs",
            "--variant",
            "cache_read",
            "--samples",
            "1",
            "--cache-time",
            "3s",
            "--dir",
            d,
            "--json",
        ])
        .output()
        .expect("run iopath");
    let took = started.elapsed();
    let rec = cache_record(&out);
    let knee = metric(&rec, "file_cache_bytes").expect("file_cache_bytes is always recorded");
    let largest = metric_value(&rec, "largest_tried_bytes").expect("largest_tried_bytes");
    match knee["value"].as_f64() {
        Some(bytes) => assert!(bytes <= largest, "{rec}"),
        None => {
            let source = knee["source"].to_string();
            assert!(source.contains("no knee up to"), "{source}");
            assert!(
                ["time", "disk", "memory"]
                    .iter()
                    .any(|w| source.contains(&format!("(stopped by: {w})"))),
                "{source}"
            );
        }
    }
    // The budget is checked every MiB: 3 s plus one fsync of the last MiB written and the
    // start-up; 60 s is far past any of it and far short of an unbounded run.
    assert!(took < std::time::Duration::from_secs(60), "took {took:?}");
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0, "files removed");
}

/// The figure is stored with the run and the report shows it: the knee's size, or why there
/// is none ("no knee up to X (stopped by: ...)").
#[test]
fn the_report_shows_the_file_cache_figure() {
    let dir = disk_dir();
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).expect("scratch folder");
    let db = dir.path().join("r.db");
    let html = dir.path().join("r.html");
    let out = iopath()
        .args(["micro", "fs", "--variant", "cache_read", "--samples", "1"])
        .args(["--cache-max", "2M", "--dir"])
        .arg(&scratch)
        .arg("--db")
        .arg(&db)
        .output()
        .expect("run iopath");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("file cache: no knee up to 2MiB (stopped by: --cache-max)"),
        "{}",
        stdout(&out)
    );
    let out = iopath()
        .arg("report")
        .arg("--db")
        .arg(&db)
        .arg("-o")
        .arg(&html)
        .output()
        .expect("run iopath report");
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&html).expect("the report");
    assert!(page.contains("file_cache_bytes"), "the report lists the figure");
    assert!(
        page.contains("no knee up to 2MiB (stopped by: --cache-max)"),
        "the report says why there is no knee"
    );
}
