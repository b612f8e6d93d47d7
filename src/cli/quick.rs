//! `iopath quick`: a preset plan of `net stream` and `net rr` cases, stored like every run,
//! then the report written and its headline tables and findings printed.

use super::error::usage;
use super::run::{self, Destination};
use super::stored::store_error;
use super::summary::{print_crossovers, print_findings};
use crate::observation::names;
use crate::report::{self, fmt_num};
use crate::store::Store;
use crate::sweep::Plan;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct QuickArgs {
    /// Results database.
    #[arg(long, default_value_os_t = crate::store::default_db_path())]
    pub db: PathBuf,
    /// Where to write the HTML report (default: report-<run>.html beside the database).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// A name for the run.
    #[arg(long, default_value = "quick")]
    pub name: String,
    /// Print the crossover table too (every pair of send modes), after the headline tables.
    #[arg(long)]
    pub wide: bool,
}

/// The grid `iopath quick` runs: six send modes x 5 sizes, one thread, 6 repetitions (the
/// fewest for which the 95% interval of the median exists, so every chart of the main job has
/// error bars, and enough for a crossover to reach p < 0.05), short cells; then the 64 B
/// ping-pong of `net rr` (QUICK_RR), 6 repetitions each. Client and server are pinned to two
/// different CPUs when there are two (`quick_cpus`). The sizes span the copy/zero-copy thresholds
/// others quote (about 3 KB for io_uring, about 10 KB for MSG_ZEROCOPY). To stay within a minute
/// on 2 CPUs (`QUICK_BUDGET_S` of windows and warm-ups) one send mode is left out: `QUICK_LEFT_OUT`.
pub const QUICK_MODES: &str = "two-copy,one-copy,zero-copy,uring,sendfile,splice";
pub const QUICK_SIZES: &str = "1K,4K,16K,64K,256K";
pub const QUICK_THREADS: &str = "1";
pub const QUICK_REPS: u32 = 6;
pub const QUICK_DURATION: &str = "200ms";
pub const QUICK_WARMUP: &str = "50ms";
/// The most seconds of measured windows and warm-ups quick may plan (cells + the warm-up cell):
/// with set-up between cells it then finishes within 60 s on a 2-CPU machine (190 cells of
/// 200 + 50 ms ran in 50 s there).
pub const QUICK_BUDGET_S: f64 = 52.0;
/// The `net load` flags of quick's latency-under-load line: the ping-pong's 64 B probe, idle
/// and then beside one one-copy flow of 64 KiB sends (quick's stream), 6 repetitions; a short
/// idle pass so the line costs about 2 s of the minute.
pub const QUICK_LOAD: [&str; 17] = [
    "--direction",
    "up",
    "--flows",
    "1",
    "--mode",
    "one-copy",
    "--size",
    "64K",
    "--probe-size",
    "64",
    "--idle",
    "100ms",
    "--warmup",
    QUICK_WARMUP,
    "--duration",
    QUICK_DURATION,
    "--no-perf",
];
/// What quick leaves out to fit the minute, and the command that measures it.
pub const QUICK_LEFT_OUT: &str = "left out to fit a minute: uring-zc (io_uring SENDMSG_ZC; over loopback the kernel \
     copies it as it copies zero-copy) and sizes above 256KiB; `iopath net stream --mode \
     two-copy,one-copy,zero-copy,uring,uring-zc,sendfile,splice --size 1K..16M --reps 6` measures them; \
     the ping-pong's perf counters (`iopath net rr --mode two-copy,one-copy,zero-copy --request-size 64 \
     --response-size 64` counts them in a second pass)";
/// The `net rr` flags of quick's request/response cases. `--no-perf`: latency without per-thread
/// counters is what the headline shows; a counting pass would double these cells' time.
pub const QUICK_RR: [&str; 9] = [
    "--mode",
    "two-copy,one-copy,zero-copy",
    "--request-size",
    "64",
    "--response-size",
    "64",
    "--inflight",
    "1",
    "--no-perf",
];

/// The CPUs quick pins the client and the server to: the first allowed CPU for the client and,
/// for the server, the first other allowed CPU on another core (`core_of`: a CPU's package and
/// core, when the machine says), else the next allowed CPU. None with fewer than two CPUs.
pub fn quick_cpus(allowed: &[usize], core_of: impl Fn(usize) -> Option<(u32, u32)>) -> Option<(usize, usize)> {
    let (&client, others) = allowed.split_first()?;
    let own_core = core_of(client);
    let other_core = others
        .iter()
        .copied()
        .find(|&c| own_core.is_some() && core_of(c).is_some_and(|core| Some(core) != own_core));
    Some((client, other_core.or_else(|| others.first().copied())?))
}

/// A CPU's (package, core) from sysfs.
fn sysfs_core(cpu: usize) -> Option<(u32, u32)> {
    let read = |name: &str| {
        std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/{name}"))
            .ok()?
            .trim()
            .parse::<u32>()
            .ok()
    };
    Some((read("physical_package_id")?, read("core_id")?))
}

/// The preset plan of `iopath quick`: the `net stream` and `net rr` flags a user would type for
/// it, pinned to two CPUs of this machine when it has them.
pub fn quick_plan(name: &str) -> anyhow::Result<Plan> {
    quick_plan_on(name, quick_pins())
}

/// The (client, server) CPUs quick pins to on this machine (`quick_cpus` over the CPUs this
/// process may use); None with fewer than two. The launcher proposes the same.
pub fn quick_pins() -> Option<(usize, usize)> {
    let allowed = crate::sys::affinity::allowed_cpus().unwrap_or_default();
    quick_cpus(&allowed, sysfs_core)
}

/// The preset plan with the client and server pinned to `cpus` (None: not pinned).
pub fn quick_plan_on(name: &str, cpus: Option<(usize, usize)>) -> anyhow::Result<Plan> {
    use clap::Parser;
    let reps = QUICK_REPS.to_string();
    let pin: Vec<String> = cpus
        .map(|(c, s)| {
            vec![
                "--client-cpus".into(),
                c.to_string(),
                "--server-cpus".into(),
                s.to_string(),
            ]
        })
        .unwrap_or_default();
    let argv = [
        "stream",
        "--mode",
        QUICK_MODES,
        "--size",
        QUICK_SIZES,
        "--threads",
        QUICK_THREADS,
        "--duration",
        QUICK_DURATION,
        "--warmup",
        QUICK_WARMUP,
        "--reps",
        &reps,
        "--warmup-cell",
        "--name",
        name,
    ];
    #[derive(Parser)]
    struct Preset {
        #[command(subcommand)]
        net: super::net::NetCommand,
    }
    let preset = Preset::try_parse_from(
        std::iter::once("quick")
            .chain(argv)
            .chain(pin.iter().map(String::as_str)),
    )
    .map_err(|e| usage(e.to_string()))?;
    let mut plan = match preset.net {
        super::net::NetCommand::Stream(args) => Plan::try_from(args.as_ref())?,
        _ => unreachable!("the preset names net stream"),
    };
    // The same run measures latency too: 64 B ping-pong, parsed by `net rr`'s own flags.
    let rr_argv = ["rr"]
        .into_iter()
        .chain(QUICK_RR)
        .chain(["--duration", QUICK_DURATION, "--warmup", QUICK_WARMUP])
        .chain(pin.iter().map(String::as_str));
    let rr = Preset::try_parse_from(std::iter::once("quick").chain(rr_argv)).map_err(|e| usage(e.to_string()))?;
    match rr.net {
        super::net::NetCommand::Rr(args) => plan.cases.extend(Plan::try_from(args.as_ref())?.cases),
        _ => unreachable!("the preset names net rr"),
    }
    // And the same probe while the stream runs beside it: latency under load.
    let load_argv = ["load"]
        .into_iter()
        .chain(QUICK_LOAD)
        .chain(pin.iter().map(String::as_str));
    let load = Preset::try_parse_from(std::iter::once("quick").chain(load_argv)).map_err(|e| usage(e.to_string()))?;
    match load.net {
        super::net::NetCommand::Load(args) => plan.cases.extend(Plan::try_from(args.as_ref())?.cases),
        _ => unreachable!("the preset names net load"),
    }
    Ok(plan)
}

/// Seconds of measured windows and warm-ups a plan asks for: every cell's, plus the warm-up
/// cell's (set-up between cells comes on top).
pub fn window_seconds(plan: &Plan) -> f64 {
    let of = |case: &crate::case::Case| case.as_workload().window_seconds();
    let cells: f64 = plan.cases.iter().map(of).sum::<f64>() * plan.repetitions as f64;
    cells
        + if plan.warmup_cell {
            plan.cases.first().map_or(0.0, of)
        } else {
            0.0
        }
}

/// What quick says before it starts, beside its first line: where the two ends are pinned (it
/// is recorded with every case), and what it left out and how to get it.
pub fn quick_notes(plan: &Plan) -> Vec<String> {
    let pinned = plan
        .cases
        .iter()
        .find_map(|c| c.get::<crate::case::StreamCase>())
        .map(|s| (s.net.client_cpus.clone(), s.net.server_cpus.clone()));
    let pin = match pinned {
        Some((Some(c), Some(s))) => format!(
            "pinned: client on CPU {c}, server on CPU {s} (--client-cpus {c} --server-cpus {s}, stored with every case)"
        ),
        _ => "not pinned: fewer than two CPUs are available to this process".into(),
    };
    vec![
        pin,
        format!(
            "planned: {:.0} s of windows and warm-ups ({} repetitions: the fewest with a 95% interval of the median, so every chart has error bars)",
            window_seconds(plan),
            plan.repetitions
        ),
        QUICK_LEFT_OUT.to_string(),
    ]
}

/// The default report path, beside the database: `report-<run>.html` for the default
/// `iopath.db`, `<db name>-report-<run>.html` for any other, so two databases in one folder
/// never overwrite each other's reports.
pub(super) fn default_report_path(db: &Path, run_id: i64) -> PathBuf {
    let stem = db.file_stem().and_then(|s| s.to_str()).unwrap_or("iopath");
    let name = if stem == "iopath" {
        format!("report-{run_id}.html")
    } else {
        format!("{stem}-report-{run_id}.html")
    };
    db.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join(name)
}

/// The median of a cell's metric, as the tables print it.
fn median_text(cell: &report::cells::CellSummary, name: &str, role: crate::observation::Role) -> String {
    fmt_num(cell.summary(name, role).map(|s| s.median))
}

/// The numbers of a quick run before its findings, each table within 100 columns: the median
/// Gbit/s of every stream case as send mode (rows) × message size (columns), one block per
/// thread count, and the request/response cases' transactions/s with p50 and p99 latency. A
/// headline median within the noise of the best at its point carries `~`, as the findings
/// ranked it, so the table and the sentences under it agree.
pub(super) fn headline_tables(cells: &[report::cells::CellSummary], findings: &report::findings::Findings) -> String {
    use super::output::Show;
    use crate::case::{format_bytes, LoadCase, RrCase, StreamCase};
    use crate::observation::Role;
    let mut out = String::new();
    let mut marked = false;
    let mut median_text = |c: &report::cells::CellSummary, name: &str, role: Role| {
        let (headline, headline_role, _) = report::cells::headline(&c.case);
        let mark = if (headline, headline_role) == (name, role) {
            findings.standing(c).map_or("", |s| s.mark())
        } else {
            ""
        };
        marked |= !mark.is_empty();
        format!("{mark}{}", median_text(c, name, role))
    };
    let streams: Vec<(&report::cells::CellSummary, &crate::case::StreamCase)> = cells
        .iter()
        .filter_map(|c| c.case.get::<StreamCase>().map(|s| (c, s)))
        .collect();
    let mut threads: Vec<usize> = streams.iter().map(|(_, s)| s.net.threads).collect();
    threads.sort();
    threads.dedup();
    for t in threads {
        let these: Vec<_> = streams.iter().filter(|(_, s)| s.net.threads == t).collect();
        let mut sizes: Vec<u64> = these.iter().map(|(_, s)| s.size).collect();
        sizes.sort();
        sizes.dedup();
        let mut modes: Vec<String> = Vec::new();
        for (_, s) in &these {
            if !modes.contains(&s.path(false)) {
                modes.push(s.path(false));
            }
        }
        let size_titles: Vec<String> = sizes.iter().map(|b| format_bytes(*b)).collect();
        let title = format!("Gbit/s t{t}");
        let mut header: Vec<(&str, Show)> = vec![(title.as_str(), Show::Key)];
        header.extend(size_titles.iter().map(|s| (s.as_str(), Show::Default)));
        let mut table = super::output::Table::with_columns(&header);
        for mode in &modes {
            let mut row = vec![mode.clone()];
            for size in &sizes {
                row.push(
                    these
                        .iter()
                        .find(|(_, s)| &s.path(false) == mode && s.size == *size)
                        .map_or("-".into(), |(c, _)| {
                            median_text(c, names::THROUGHPUT_GBPS, Role::System)
                        }),
                );
            }
            table.row(row);
        }
        let (text, left_out) = table.render_view(super::output::View::default());
        out.push_str(&text);
        out.push_str(&super::output::left_out_line(&left_out));
    }
    let rr: Vec<_> = cells
        .iter()
        .filter_map(|c| c.case.get::<RrCase>().map(|r| (c, r)))
        .collect();
    if !rr.is_empty() {
        let mut table = super::output::Table::new(&["latency", "req/resp", "txn/s", "p50 us", "p99 us"]);
        for (c, r) in rr {
            table.row(vec![
                format!("{} {}", r.kind.as_str(), r.path()),
                format!("{}/{}", format_bytes(r.request_size), format_bytes(r.response_size)),
                median_text(c, names::TRANSACTIONS_PER_S, Role::System),
                median_text(c, names::LATENCY_P50_US, Role::Client),
                median_text(c, names::LATENCY_P99_US, Role::Client),
            ]);
        }
        out.push_str(&table.render());
    }
    let loaded: Vec<_> = cells
        .iter()
        .filter_map(|c| c.case.get::<LoadCase>().map(|l| (c, l)))
        .collect();
    if !loaded.is_empty() {
        let mut table =
            super::output::Table::new(&["under load", "idle p50 us", "load p50 us", "load p99 us", "x p50"]);
        for (c, l) in loaded {
            table.row(vec![
                format!(
                    "probe {} + {} {}×{} {}",
                    format_bytes(l.probe_size),
                    l.direction,
                    l.flows,
                    l.path(),
                    format_bytes(l.size)
                ),
                median_text(c, names::LATENCY_IDLE_P50_US, Role::System),
                median_text(c, names::LATENCY_LOADED_P50_US, Role::System),
                median_text(c, names::LATENCY_LOADED_P99_US, Role::System),
                median_text(c, names::LATENCY_INFLATION_P50, Role::System),
            ]);
        }
        out.push_str(&table.render());
    }
    if !out.is_empty() {
        out.push_str("medians of the repetitions; the report has every figure with its interval\n");
    }
    if marked {
        out.push_str(report::findings::WITHIN_NOISE_KEY);
        out.push('\n');
    }
    out
}

pub fn run_quick(args: QuickArgs) -> anyhow::Result<()> {
    let plan = quick_plan(&args.name)?;
    if let Some(out) = &args.output {
        super::results::check_report_path(out, &args.db)?;
    }
    let started = std::time::Instant::now();
    crate::tell!(
        "iopath quick: {} cases x {QUICK_REPS} repetitions ({} cells of {QUICK_DURATION}) into {}",
        plan.cases.len(),
        plan.cases.len() * QUICK_REPS as usize,
        args.db.display()
    );
    for note in quick_notes(&plan) {
        crate::tell_part!("{}", super::output::wrap(&format!("  {note}"), 4));
    }
    let (output, wide) = (args.output.clone(), args.wide);
    let report = move |stored: &run::StoredRun| -> anyhow::Result<()> {
        let store = Store::open_existing(stored.db).map_err(store_error)?;
        let data = store.load_run(stored.run_id)?;
        let html = output.unwrap_or_else(|| default_report_path(stored.db, stored.run_id));
        let files = report::write_report(&data, &html, stored.db)?;
        let analysis = report::analyze(&data, stored.db);
        super::output::out(headline_tables(&analysis.cells, &analysis.findings))?;
        if wide {
            print_crossovers(&analysis.crossovers, super::output::View { wide: true })?;
        }
        print_findings(&analysis, false)?;
        crate::say!(
            "{} cells in {:.0} s{}. Report: {} (charts in {})",
            data.cells.len(),
            started.elapsed().as_secs_f64(),
            if stored.end.interrupted { " (interrupted)" } else { "" },
            files.html.display(),
            files.charts_dir.display()
        )?;
        Ok(())
    };
    let outputs = run::Outputs {
        detectable: true,
        print: run::Print::Stored(Box::new(report)),
        ..Default::default()
    };
    run::run_workload(&plan, Destination::NewRun(&args.db), outputs)
}

#[cfg(test)]
mod tests {
    use super::default_report_path;
    use std::path::Path;

    /// Found in review: two databases in one folder wrote the same report-1.html.
    #[test]
    fn report_names_do_not_collide_across_databases() {
        assert_eq!(
            default_report_path(Path::new("r/iopath.db"), 1),
            Path::new("r/report-1.html")
        );
        assert_eq!(
            default_report_path(Path::new("r/f.db"), 1),
            Path::new("r/f-report-1.html")
        );
        assert_eq!(
            default_report_path(Path::new("q.db"), 2),
            Path::new("./q-report-2.html")
        );
    }

    use super::*;

    #[test]
    fn quick_grid_is_six_send_modes_at_five_sizes_and_three_ping_pongs() {
        let plan = quick_plan_on("quick", None).unwrap();
        assert_eq!(plan.cases.len(), 6 * 5 + 3 + 1);
        assert_eq!(plan.repetitions, QUICK_REPS);
        assert!(plan.warmup_cell);
        let labels: Vec<String> = plan.cases.iter().map(|c| c.label()).collect();
        assert!(labels.contains(&"two-copy 1KiB t1".to_string()), "{labels:?}");
        assert!(labels.contains(&"uring 256KiB t1".to_string()), "{labels:?}");
        assert!(labels.contains(&"splice 4KiB t1".to_string()), "{labels:?}");
        assert!(labels.contains(&"rr one-copy 64B/64B n1 t1".to_string()), "{labels:?}");
        assert!(
            labels.contains(&"load up 1×one-copy 64KiB probe 64B".to_string()),
            "{labels:?}"
        );
        assert!(!labels.iter().any(|l| l.starts_with("uring-zc")), "{labels:?}");
        assert!(QUICK_LEFT_OUT.contains("uring-zc"));
        assert_eq!(plan.cases[0].workload(), "net-stream", "the warm-up cell is a stream's");
    }

    /// Issue 18 C: every chart of the main job has error bars (the interval needs 6 values),
    /// within a minute on 2 CPUs: the windows and warm-ups planned stay within the budget.
    #[test]
    fn quick_has_the_repetitions_for_error_bars_within_its_budget() {
        let plan = quick_plan_on("quick", None).unwrap();
        assert!(plan.repetitions as usize >= crate::measure::stats::MIN_VALUES_FOR_CI);
        // 33 cases x 6 + the warm-up cell, 250 ms each, and the loaded probe's 6 of 350 ms.
        assert!((window_seconds(&plan) - (199.0 * 0.25 + 6.0 * 0.35)).abs() < 1e-9);
        assert!(window_seconds(&plan) <= QUICK_BUDGET_S);
        let notes = quick_notes(&plan);
        assert!(
            notes[1].starts_with("planned: 52 s of windows and warm-ups (6 repetitions"),
            "{notes:?}"
        );
        assert!(notes[2].starts_with("left out to fit a minute: uring-zc"), "{notes:?}");
    }

    /// Client and server on different CPUs, on different cores when the machine says which,
    /// and recorded with every case.
    #[test]
    fn quick_pins_client_and_server_to_different_cpus() {
        // CPUs 0 and 1 are SMT siblings of core 0; 2 is core 1.
        let core = |cpu: usize| Some((0, [0, 0, 1, 1][cpu]));
        assert_eq!(quick_cpus(&[0, 1, 2, 3], core), Some((0, 2)));
        assert_eq!(quick_cpus(&[0, 1], core), Some((0, 1)));
        assert_eq!(quick_cpus(&[3, 5], |_| None), Some((3, 5)));
        assert_eq!(quick_cpus(&[0], core), None);
        assert_eq!(quick_cpus(&[], core), None);

        // The plan checks the CPUs are online: this machine has at least two (CI's does).
        let Some((a, b)) = quick_cpus(&crate::sys::affinity::allowed_cpus().unwrap(), |_| None) else {
            return;
        };
        let plan = quick_plan_on("quick", Some((b, a))).unwrap();
        for case in &plan.cases {
            let (c, s) = match case {
                crate::case::Case::NetStream(s) => (&s.net.client_cpus, &s.net.server_cpus),
                crate::case::Case::NetRr(r) => (&r.net.client_cpus, &r.net.server_cpus),
                crate::case::Case::NetLoad(l) => (&l.net.client_cpus, &l.net.server_cpus),
                other => panic!("{other:?}"),
            };
            assert_eq!(
                (c.as_ref().map(|l| l.to_string()), s.as_ref().map(|l| l.to_string())),
                (Some(b.to_string()), Some(a.to_string())),
                "{}",
                case.label()
            );
        }
        assert!(quick_notes(&plan)[0].starts_with(&format!("pinned: client on CPU {b}, server on CPU {a}")));
        let alone = quick_plan_on("quick", None).unwrap();
        assert!(quick_notes(&alone)[0].starts_with("not pinned"));
    }

    /// Issue 18 C: quick's terminal shows the numbers first, in at most 100 columns: Gbit/s per
    /// send mode x size, and the ping-pong's p50 and p99.
    #[test]
    fn quick_headline_tables_fit_100_columns_with_every_mode_and_size() {
        use crate::case::Case;
        use crate::observation::Role;
        use report::cells::{CellSummary, MetricCell};
        let plan = quick_plan("quick").unwrap();
        let metric = |role, name: &str, v: f64| MetricCell {
            role,
            name: name.into(),
            unit: "u".into(),
            sources: vec!["tool".into()],
            values: vec![v; 6],
            summary: crate::measure::stats::summarize(&[v; 6]),
        };
        let cells: Vec<CellSummary> = plan
            .cases
            .iter()
            .enumerate()
            .map(|(position, case)| CellSummary {
                position,
                case: case.clone(),
                label: case.label(),
                ok: 6,
                failures: Vec::new(),
                metrics: match case {
                    Case::NetStream(_) => vec![metric(Role::System, "throughput_gbps", 12.345 + position as f64)],
                    _ => vec![
                        metric(Role::System, "transactions_per_s", 23456.0),
                        metric(Role::Client, "latency_p50_us", 41.5),
                        metric(Role::Client, "latency_p99_us", 1234.0),
                    ],
                },
                warnings: Vec::new(),
            })
            .collect();
        let text = headline_tables(&cells, &report::findings::findings(&cells, &[], &[]));
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        assert!(!text.contains("with --wide"), "nothing left out: {text}");
        let header = text.lines().next().unwrap();
        for size in ["1KiB", "4KiB", "16KiB", "64KiB", "256KiB"] {
            assert!(header.contains(size), "{header}");
        }
        for mode in QUICK_MODES.split(',') {
            assert!(
                text.lines().any(|l| l.starts_with(&format!("{mode} "))),
                "{mode}: {text}"
            );
        }
        let two_copy_1k = text.lines().find(|l| l.starts_with("two-copy ")).unwrap();
        assert!(two_copy_1k.contains("12.35"), "the first case's median: {two_copy_1k}");
        // Equal ping-pongs: the best unmarked, the others within its noise, and the key said.
        assert!(
            !text.lines().any(|l| l.starts_with("rr two-copy") && l.contains('~')),
            "{text}"
        );
        assert!(
            text.contains("~23456") && text.contains(report::findings::WITHIN_NOISE_KEY),
            "{text}"
        );
        // Stream medians 1 Gbit/s apart with no spread: each behind the best, unmarked.
        assert!(
            !text.lines().any(|l| l.starts_with("one-copy") && l.contains('~')),
            "{text}"
        );
        let rr = text.lines().find(|l| l.starts_with("rr one-copy")).unwrap();
        assert!(
            rr.contains("64B/64B") && rr.contains("41.50") && rr.contains("1234"),
            "{rr}"
        );
    }
}
