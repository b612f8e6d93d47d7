//! The terminal tables of every measuring command: the default table fits 100 columns, every
//! line of it; `--wide` prints every column (the titles docs/output.md lists) and the sources
//! line. Short real runs on loopback (150 ms windows), or the fake workload.

mod common;

use common::{iopath, stderr, stdout, temp_db};
use std::time::Duration;

/// One run at a time: the machine is small and shared.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn run(args: &[&str]) -> String {
    let out = iopath().args(args).timeout(Duration::from_secs(120)).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

/// The column titles of a table's header line (columns are at least two spaces apart).
fn titles(header: &str) -> Vec<String> {
    header
        .split("  ")
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect()
}

fn assert_fits(text: &str, what: &str) {
    for line in text.lines() {
        assert!(
            line.chars().count() <= 100,
            "{what}: a line of {} characters:\n{line}\n\n{text}",
            line.chars().count()
        );
    }
}

/// The default output of `args` fits 100 columns; with `--wide` the header is exactly
/// `wide_titles` and a `sources:` line follows the table. Returns (default, wide) outputs.
fn check_family(args: &[&str], default_titles: &[&str], wide_titles: &[&str]) -> (String, String) {
    let narrow = run(args);
    assert_fits(&narrow, &args.join(" "));
    let header = narrow.lines().next().unwrap_or_default();
    assert_eq!(titles(header), default_titles, "default columns of {args:?}:\n{narrow}");
    let mut wide_args = args.to_vec();
    wide_args.push("--wide");
    let wide = run(&wide_args);
    let header = wide.lines().next().unwrap_or_default();
    assert_eq!(titles(header), wide_titles, "--wide columns of {args:?}:\n{wide}");
    assert!(wide.contains("\nsources: "), "--wide has the sources line:\n{wide}");
    assert!(!wide.contains("with --wide"), "--wide leaves nothing out:\n{wide}");
    (narrow, wide)
}

const WINDOW: [&str; 4] = ["--duration", "150ms", "--warmup", "0"];

#[test]
fn net_stream_default_fits_100_columns_and_wide_has_every_column() {
    let _one = one_at_a_time();
    let mut args = vec![
        "net",
        "stream",
        "--mode",
        "two-copy,zero-copy",
        "--size",
        "4K",
        "--reps",
        "2",
    ];
    args.extend(WINDOW);
    let (narrow, _) = check_family(
        &args,
        &[
            "mode",
            "size",
            "thr",
            "reps",
            "Gbit/s",
            "us/msg",
            "cli ns/B",
            "srv ns/B",
            "zc not copied",
        ],
        &[
            "mode",
            "size",
            "thr",
            "reps",
            "Gbit/s",
            "us/msg",
            "cli ns/B",
            "srv ns/B",
            "zc not copied",
            "msg/s",
            "cli usr s",
            "cli sys s",
            "srv usr s",
            "srv sys s",
            "cli cyc/B",
            "srv cyc/B",
            "cli miss/KiB",
            "cli cs/msg",
            "srv cs/msg",
            "cli sirq",
            "srv sirq",
            "cli sc/msg",
            "srv sc/msg",
            "cli faults",
            "srv faults",
            "zc compl",
            "ur sub/msg",
            "ur cqe/msg",
        ],
    );
    assert!(narrow.contains("more columns with --wide: msg/s,"), "{narrow}");
    // CPU per byte is rusage's, and says so.
    assert!(narrow.contains("rusage: cli ns/B, srv ns/B"), "{narrow}");
    // Warnings are grouped: at most one note line per kind, with its count of cases.
    let notes: Vec<&str> = narrow.lines().filter(|l| l.starts_with("note: ")).collect();
    assert!(notes.iter().any(|l| l.contains(" of 2 cases)")), "{narrow}");
    let mut kinds: Vec<&str> = notes.iter().map(|l| l.split(" (").next().unwrap()).collect();
    let all = kinds.len();
    kinds.dedup();
    assert_eq!(kinds.len(), all, "one line per kind: {notes:?}");
    // The zero-copy row's not-copied share is a number, the two-copy row's a dash.
    let row = |mode: &str| titles(narrow.lines().find(|l| l.starts_with(mode)).unwrap());
    assert_eq!(row("two-copy")[8], "-", "{narrow}");
    assert!(row("zero-copy")[8].parse::<f64>().is_ok(), "{narrow}");
}

#[test]
fn net_rr_and_crr_default_fits_100_columns_and_wide_has_every_column() {
    let _one = one_at_a_time();
    let mut args = vec!["net", "rr", "--mode", "two-copy,one-copy"];
    args.extend(WINDOW);
    check_family(
        &args,
        &[
            "kind",
            "mode",
            "req",
            "resp",
            "n",
            "thr",
            "rate",
            "txn/s",
            "p50 us",
            "p99 us",
            "cli us/txn",
            "srv us/txn",
        ],
        &[
            "kind",
            "mode",
            "req",
            "resp",
            "n",
            "thr",
            "rate",
            "txn/s",
            "p50 us",
            "p99 us",
            "cli us/txn",
            "srv us/txn",
            "p90 us",
            "p99.9 us",
            "max us",
            "cli sc/txn",
            "srv sc/txn",
            "cli sirq",
            "srv sirq",
        ],
    );
    let mut args = vec!["net", "crr", "--mode", "two-copy"];
    args.extend(WINDOW);
    let (narrow, _) = check_family(
        &args,
        &[
            "kind",
            "mode",
            "req",
            "resp",
            "n",
            "thr",
            "rate",
            "txn/s",
            "p50 us",
            "p99 us",
            "conn p50",
            "xchg p50",
            "close p50",
        ],
        &[
            "kind",
            "mode",
            "req",
            "resp",
            "n",
            "thr",
            "rate",
            "txn/s",
            "p50 us",
            "p99 us",
            "conn p50",
            "xchg p50",
            "close p50",
            "cli us/txn",
            "srv us/txn",
            "p90 us",
            "p99.9 us",
            "max us",
            "cli sc/txn",
            "srv sc/txn",
            "cli sirq",
            "srv sirq",
        ],
    );
    assert!(
        narrow.contains("more columns with --wide: cli us/txn, srv us/txn,"),
        "{narrow}"
    );
}

/// Issue 19 E14: "copied B/B" counted user-space copies only, so gather and zero copy read 0
/// while the kernel copied every byte of both here. The header says what it counts and the
/// kernel's share stands beside it.
#[test]
fn net_records_says_user_copies_and_shows_the_kernel_copied_fraction() {
    let _one = one_at_a_time();
    let mut args = vec![
        "net",
        "records",
        "--mode",
        "copy-out,gather,zero-copy",
        "--record-size",
        "1K",
        "--records",
        "4",
        "--table",
        "2M",
        "--no-perf",
    ];
    args.extend(WINDOW);
    let (narrow, wide) = check_family(
        &args,
        // One record size and count, one pick: the key columns that hold one value are said
        // once, under the table, so every figure fits.
        &[
            "mode",
            "resp/s",
            "Gbit/s",
            "p50 us",
            "p99 us",
            "srv us/resp",
            "user copies B/B",
            "kernel copied",
            "DRAM B/B",
        ],
        &[
            "mode",
            "R",
            "N",
            "pick",
            "out",
            "thr",
            "resp/s",
            "Gbit/s",
            "p50 us",
            "p99 us",
            "srv us/resp",
            "user copies B/B",
            "kernel copied",
            "DRAM B/B",
            "p99.9 us",
            "cli us/resp",
            "srv sc/resp",
            "srv cs/resp",
            "zc copied",
        ],
    );
    assert!(
        !narrow.contains("copied B/B") || narrow.contains("user copies B/B"),
        "{narrow}"
    );
    for text in [&narrow, &wide] {
        let header = titles(text.lines().next().unwrap());
        let user = header.iter().position(|t| t == "user copies B/B").unwrap();
        let kernel = header.iter().position(|t| t == "kernel copied").unwrap();
        assert_eq!(kernel, user + 1, "side by side: {header:?}");
        let row = |mode: &str| titles(text.lines().find(|l| l.starts_with(mode)).unwrap());
        // copy-out: iopath's memcpy of every byte, then send's copy of every byte.
        assert_eq!(
            (row("copy-out")[user].as_str(), row("copy-out")[kernel].as_str()),
            ("1.00", "1.00"),
            "{text}"
        );
        // gather: no user copy, but send still copies every byte into the socket's buffers.
        assert_eq!(
            (row("gather")[user].as_str(), row("gather")[kernel].as_str()),
            ("0", "1.00"),
            "{text}"
        );
        // zero copy over loopback: the kernel says it copied (zerocopy_copied_fraction).
        assert_eq!(row("zero-copy")[user], "0", "{text}");
        assert_eq!(row("zero-copy")[kernel], "1.00", "loopback copies: {text}");
    }
}

#[test]
fn servers_default_fits_100_columns_and_wide_has_every_column() {
    let _one = one_at_a_time();
    check_family(
        &[
            "servers",
            "--model",
            "epoll,threads",
            "--clients",
            "1,4",
            "--duration",
            "150ms",
            "--warmup",
            "0",
            "--reps",
            "2",
        ],
        &[
            "model",
            "request",
            "clients",
            "reps",
            "req/s",
            "p50 us",
            "p99 us",
            "errors",
            "served",
            "srv us/req",
            "srv cs/req",
        ],
        &[
            "model",
            "request",
            "clients",
            "reps",
            "req/s",
            "p50 us",
            "p99 us",
            "errors",
            "served",
            "srv us/req",
            "srv cs/req",
            "p90 us",
            "p99.9 us",
            "max us",
        ],
    );
}

#[test]
fn micro_default_fits_100_columns_and_wide_has_every_column() {
    let _one = one_at_a_time();
    let narrow = run(&["micro", "syscall", "--quick", "--reps", "2"]);
    assert_fits(&narrow, "micro syscall");
    assert_eq!(
        titles(narrow.lines().next().unwrap()),
        ["case", "figure", "median", "ci95", "n", "unit", "source"]
    );
    // Repetitions are numbered as the store and every export number them: from 0.
    assert!(narrow.contains("syscall variant=getppid rep 0 "), "{narrow}");
    assert!(narrow.contains("syscall variant=getppid rep 1 "), "{narrow}");
    let wide = run(&["micro", "syscall", "--quick", "--wide", "--variant", "getppid"]);
    assert_eq!(
        titles(wide.lines().next().unwrap()),
        ["case", "figure", "median", "ci95", "n", "unit", "source", "mean", "stddev", "min"]
    );
}

#[test]
fn fake_table_numbers_repetitions_from_0_like_the_store() {
    let (_dir, db) = temp_db("t.db");
    let out = iopath()
        .args(["fake", "--cells", "ok:3", "--reps", "2", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let reps: Vec<String> = text.lines().skip(1).map(|l| titles(l)[1].clone()).collect();
    assert_eq!(reps, ["0", "1"], "{text}");
    let csv = iopath()
        .args(["export", "--format", "csv", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let csv = stdout(&csv);
    let stored: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').nth(3).unwrap()).collect();
    assert_eq!(stored, ["0", "1"], "the export's repetition column: {csv}");
}

/// Issue 19 E13: `micro fs` headlined `fs_type_magic` (61267, the ext4 magic number) in the
/// sweep table, the report and compare. Its headline is the time per block read.
#[test]
fn micro_fs_headline_is_the_read_time_not_the_magic_number() {
    let _one = one_at_a_time();
    let (_dir, db) = temp_db("fs.db");
    let out = iopath()
        .args(["sweep", "micro", "fs", "--quick", "--variant", "seq_read", "--db"])
        .arg(&db)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let row = text
        .lines()
        .find(|l| l.starts_with("fs variant=seq_read"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("time_per_read_us"), "{text}");
    assert!(!text.contains("fs_type_magic"), "{text}");
    let summary = iopath()
        .args(["export", "1", "--format", "summary", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let summary = stdout(&summary);
    assert!(summary.contains("time_per_read_us"), "{summary}");
    let compare = iopath().args(["compare", "1", "1", "--db"]).arg(&db).output().unwrap();
    let compared = stdout(&compare);
    assert!(compared.contains("time_per_read_us"), "{compared}{}", stderr(&compare));
    assert!(!compared.contains("fs_type_magic"), "{compared}");
}

/// Issue 19 E13, the class: the headline of every micro bench and variant is a figure that
/// bench really measures (a time or a bandwidth with its `_n` companion), never a setting.
#[test]
fn every_micro_bench_headlines_a_figure_it_measures() {
    let _one = one_at_a_time();
    let out = iopath()
        .args(["micro", "all", "--quick", "--samples", "3", "--json"])
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let records = common::json_records(&out);
    let mut benches = std::collections::BTreeSet::new();
    for r in records.iter().filter(|r| r["error"].is_null()) {
        let case: iopath::case::Case = serde_json::from_value(r["case"].clone()).unwrap();
        let iopath::case::Case::Micro(micro) = &case else {
            panic!("not a micro case: {r}")
        };
        let (name, _) = micro.headline();
        let metrics = r["observation"]["metrics"].as_array().unwrap();
        let has = |n: &str| metrics.iter().any(|m| m["name"] == n && m["role"] == "system");
        assert!(has(name), "{}: no headline {name}", r["label"]);
        assert!(
            has(&format!("{name}_n")) || metrics.iter().any(|m| m["name"] == name && m["value"].is_null()),
            "{}: {name} is not a repeated figure",
            r["label"]
        );
        benches.insert(micro.bench.to_string());
    }
    assert!(benches.len() >= 10, "every bench ran: {benches:?}");
}
