//! Matching cells over the runs of two sides and deciding each cell and the whole run
//! (docs/methodology.md, "Comparing two runs"). Two ways, by what is known of the spread
//! between runs:
//!
//! - run level (several runs a side, or one run a side and earlier runs of the same plan): each
//!   run gives each cell the log of its median; Student's t on those values, against the spread
//!   between runs pooled over A, B and the history (`runs::run_test`). The whole run is the
//!   same test on each run's mean log median over the cells, so a shift of the whole machine
//!   between runs is noise of one run, not a confident change of every cell.
//! - within the runs (one run a side, nothing known of the spread): the repetitions of one run
//!   against the other's (Mann-Whitney U, bootstrap interval; the whole run a geometric mean
//!   and a sign test over cells). These see only the noise inside a run, so a change they find
//!   is decided only beyond `runs::MACHINE_DRIFT_MAX`; below it the verdict is held back.

use super::runs::{self, Spread};
use super::*;

/// One matched cell: its metric in every run of each side that has it.
struct Matched<'a> {
    label: String,
    label_b: String,
    a: Vec<&'a MetricCell>,
    b: Vec<&'a MetricCell>,
    history: Vec<&'a MetricCell>,
    higher: bool,
}

use super::super::cells::MetricCell;

#[derive(Clone, Copy)]
enum Which {
    A,
    B,
    History,
}

impl<'a> Matched<'a> {
    fn side(&self, which: Which) -> &[&'a MetricCell] {
        match which {
            Which::A => &self.a,
            Which::B => &self.b,
            Which::History => &self.history,
        }
    }
}

/// A cell's estimate and test before the correction.
struct CellTest {
    median_a: f64,
    median_b: f64,
    ci: Option<(f64, f64)>,
    p: f64,
    /// The bootstrap resamples of B/A (within the runs only), for the whole run's interval.
    resampled: Option<Vec<f64>>,
}

/// Compare one run a side: `compare_runs` with no history.
pub fn compare_cells(
    a: &[CellSummary],
    b: &[CellSummary],
    metric: Option<(Role, &str)>,
    options: &CompareOptions,
) -> Comparison {
    compare_runs(&[a], &[b], &[], metric, options)
}

/// The metric compared in a cell: `metric`, or the headline of A's first run's cell.
fn pick<'a>(
    cell: &'a CellSummary,
    metric: Option<(Role, &str)>,
    headline: Option<&MetricCell>,
) -> Option<&'a MetricCell> {
    let m = match (metric, headline) {
        (Some((role, name)), _) => cell.metric(name, role),
        (None, Some(h)) => cell.metric(&h.name, h.role),
        (None, None) => cell.headline_metric(),
    }?;
    m.summary.as_ref().map(|_| m)
}

/// Cells matched over the sides' runs (keyed on A's first run), the counts of unmatched cells
/// and the warnings.
fn match_cells<'a>(
    sides: [&[&'a [CellSummary]]; 3],
    metric: Option<(Role, &str)>,
    options: &CompareOptions,
) -> (Vec<Matched<'a>>, usize, usize, Vec<String>) {
    let [a, b, history] = sides;
    let keyed = |cells: &'a [CellSummary]| -> HashMap<String, &'a CellSummary> {
        run_keys(cells, &options.ignore).into_iter().zip(cells).collect()
    };
    let (ka, kb, kh): (Vec<_>, Vec<_>, Vec<_>) = (
        a.iter().map(|c| keyed(c)).collect(),
        b.iter().map(|c| keyed(c)).collect(),
        history.iter().map(|c| keyed(c)).collect(),
    );
    let first_a = a.first().copied().unwrap_or(&[]);
    let keys_a = run_keys(first_a, &options.ignore);
    let (mut matched, mut warnings, mut only_in_a) = (Vec::new(), Vec::new(), 0);
    for (key, ca) in keys_a.iter().zip(first_a) {
        let Some(cb) = kb.first().and_then(|m| m.get(key)) else {
            only_in_a += 1;
            continue;
        };
        let Some(head) = pick(ca, metric, None) else {
            warnings.push(format!("{}: the metric has no values in run A; not compared", ca.label));
            continue;
        };
        let side = |runs: &[HashMap<String, &'a CellSummary>]| -> Vec<&'a MetricCell> {
            runs.iter()
                .filter_map(|m| m.get(key).and_then(|c| pick(c, Some((head.role, &head.name)), None)))
                .collect()
        };
        let (ma, mb) = (side(&ka), side(&kb));
        if mb.is_empty() {
            warnings.push(format!(
                "{}: {}.{} is not in run B, or has no values there; not compared",
                ca.label, head.role, head.name
            ));
            continue;
        }
        matched.push(Matched {
            label: ca.label.clone(),
            label_b: cb.label.clone(),
            higher: higher_is_better(&ca.case, head.role, &head.name),
            a: ma,
            b: mb,
            history: side(&kh),
        });
    }
    let first_b = b.first().copied().unwrap_or(&[]);
    let only_in_b = run_keys(first_b, &options.ignore)
        .iter()
        .filter(|k| !ka.first().is_some_and(|m| m.contains_key(*k)))
        .count();
    (matched, only_in_a, only_in_b, warnings)
}

/// The log of each run's median; None when a median is not positive.
fn log_medians(cells: &[&MetricCell]) -> Option<Vec<f64>> {
    cells
        .iter()
        .map(|c| c.summary.as_ref().map(|s| s.median).filter(|m| *m > 0.0).map(f64::ln))
        .collect()
}

/// One cell within the runs: the repetitions of A's run against B's.
fn within_cell(m: &Matched) -> Option<CellTest> {
    let (ma, mb) = (m.a[0], m.b[0]);
    let test = mann_whitney(&ma.values, &mb.values)?;
    Some(CellTest {
        median_a: ma.summary.as_ref()?.median,
        median_b: mb.summary.as_ref()?.median,
        resampled: bootstrap_ratios(&ma.values, &mb.values, cell_seed(&m.label)),
        ci: None,
        p: test.p,
    })
    .map(|mut t| {
        t.ci = t.resampled.clone().map(|mut r| percentile_interval(&mut r));
        t
    })
}

/// One cell at the run level: Student's t on the runs' log medians.
fn run_cell(m: &Matched) -> Option<CellTest> {
    let (xa, xb) = (log_medians(&m.a)?, log_medians(&m.b)?);
    let xh = log_medians(&m.history).unwrap_or_default();
    let mean = |v: &[f64]| (v.iter().sum::<f64>() / v.len() as f64).exp();
    let test = runs::run_test(&xa, &xb, &xh);
    Some(CellTest {
        median_a: mean(&xa),
        median_b: mean(&xb),
        ci: test.map(|t| t.ci),
        p: test.map_or(1.0, |t| t.p),
        resampled: None,
    })
}

/// The spread between runs that the comparison can use.
fn spread_of(runs_a: usize, runs_b: usize, history: usize) -> Spread {
    let history = if runs_a == 1 && runs_b == 1 { history } else { 0 };
    Spread {
        runs_a,
        runs_b,
        history_runs: history,
        df: (runs_a - 1) + (runs_b - 1) + history.saturating_sub(1),
        run_sd: None,
    }
}

/// Match cells by case (every parameter but `options.ignore` and the schedule's), over one or
/// more runs a side and earlier runs of the same plan (`history`, read only when each side has
/// one run); compare `metric` (role, name) or each workload's headline metric; add the
/// whole-run verdict and the design.
pub fn compare_runs(
    a: &[&[CellSummary]],
    b: &[&[CellSummary]],
    history: &[&[CellSummary]],
    metric: Option<(Role, &str)>,
    options: &CompareOptions,
) -> Comparison {
    let mut spread = spread_of(a.len().max(1), b.len().max(1), history.len());
    let history = if spread.history_runs > 0 { history } else { &[] };
    let (matched, only_in_a, only_in_b, mut warnings) = match_cells([a, b, history], metric, options);
    let run_level = spread.df > 0;
    let tests: Vec<Option<CellTest>> = matched
        .iter()
        .map(|m| if run_level { run_cell(m) } else { within_cell(m) })
        .collect();
    let (matched, tests): (Vec<Matched>, Vec<CellTest>) = matched
        .into_iter()
        .zip(tests)
        .filter_map(|(m, t)| t.map(|t| (m, t)))
        .unzip();
    let mut design = design_of(&matched, run_level, options);
    let adjusted = options
        .correction
        .adjust(&tests.iter().map(|t| t.p).collect::<Vec<_>>());
    let mixed = matched.iter().any(|m| m.higher) && matched.iter().any(|m| !m.higher);
    let whole_run = if run_level {
        let w = whole_run_of_runs(&matched, mixed, options);
        spread.run_sd = w.as_ref().and_then(|(_, sd)| *sd);
        w.map(|(w, _)| w)
    } else {
        whole_run_within(&matched, &tests, mixed, options)
    };
    design.spread = spread;
    if run_level {
        design.detectable_run = design
            .spread
            .run_sd
            .map(|sd| detectable_between_runs(&design.spread, sd, options));
    }
    let rows: Vec<CompareRow> = matched
        .iter()
        .zip(tests)
        .zip(adjusted)
        .map(|((m, t), p_adj)| row(m, t, p_adj, run_level, &design, options))
        .collect();
    if let Some(r) = rows
        .iter()
        .find(|r| !run_level && r.n_a.min(r.n_b) < MIN_REPS_TO_DECIDE)
    {
        warnings.insert(
            0,
            format!(
                "too few repetitions to decide: {} and {} repetitions (e.g. {}); no difference can reach \
                 p < {} with fewer than {MIN_REPS_TO_DECIDE} a side - use --reps 6 or more",
                r.n_a, r.n_b, r.label, options.alpha
            ),
        );
    }
    let cases = |runs: &[&[CellSummary]]| {
        runs.first()
            .map(|cells| cells.iter().map(|c| c.case.clone()).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let differences = parameter_differences(&cases(a), &cases(b));
    let (ignored, others): (Vec<Difference>, Vec<Difference>) =
        differences.into_iter().partition(|d| options.ignore.contains(&d.name));
    Comparison {
        threshold: options.threshold,
        alpha: options.alpha,
        correction: options.correction,
        ignored,
        rows,
        whole_run,
        design,
        only_in_a,
        only_in_b,
        parameter_differences: if only_in_a + only_in_b > 0 { others } else { Vec::new() },
        warnings,
        contention: None,
    }
}

/// The row of one cell, its verdict decided after the correction.
fn row(m: &Matched, t: CellTest, p_adj: f64, run_level: bool, design: &Design, options: &CompareOptions) -> CompareRow {
    let n = |cells: &[&MetricCell]| cells.iter().map(|c| c.values.len()).sum::<usize>();
    let (n_a, n_b) = (n(&m.a), n(&m.b));
    let p_name = match options.correction {
        Correction::None => "p".to_string(),
        Correction::Holm => "Holm p".to_string(),
        Correction::Bh => "BH p".to_string(),
    };
    let ratio = (t.median_a != 0.0).then(|| t.median_b / t.median_a);
    let (mut verdict, mut reason) = if run_level {
        match t.ci {
            Some(_) => decide(
                t.ci,
                p_adj,
                &p_name,
                (MIN_REPS_TO_DECIDE, MIN_REPS_TO_DECIDE),
                m.higher,
                options,
            ),
            None => (
                Verdict::Inconclusive,
                "no spread between runs for this cell (it is missing from runs)".into(),
            ),
        }
    } else {
        decide(t.ci, p_adj, &p_name, (n_a, n_b), m.higher, options)
    };
    let mut held_back = None;
    if !run_level && matches!(verdict, Verdict::Faster | Verdict::Slower) && !t.ci.is_some_and(runs::beyond_drift) {
        held_back = Some(verdict);
        reason = format!(
            "{reason} within the runs, but with one run a side a shift of the machine explains it (within ×{:.1}..×{:.0})",
            1.0 / runs::MACHINE_DRIFT_MAX,
            runs::MACHINE_DRIFT_MAX
        );
        verdict = Verdict::Inconclusive;
    }
    let stat = |cells: &[&MetricCell]| cells.first().and_then(|c| c.summary.as_ref()).and_then(|s| s.cv);
    let first = m.a[0];
    CompareRow {
        label: m.label.clone(),
        label_b: (m.label_b != m.label).then(|| m.label_b.clone()),
        metric: format!("{}.{}", first.role, first.name),
        unit: first.unit.clone(),
        higher_is_better: m.higher,
        median_a: t.median_a,
        median_b: t.median_b,
        change: if t.median_a != 0.0 {
            (t.median_b - t.median_a) / t.median_a.abs()
        } else {
            0.0
        },
        ratio,
        ratio_ci95: t.ci,
        p: t.p,
        p_adjusted: p_adj,
        smallest_possible_p: if run_level {
            0.0
        } else {
            let p0 = smallest_possible_p(n_a, n_b);
            options.correction.best_adjusted(p0, design.smallest_p, design.cells)
        },
        significant: p_adj < options.alpha,
        verdict,
        held_back,
        reason,
        runs_a: m.a.len(),
        runs_b: m.b.len(),
        n_a,
        n_b,
        cv_a: stat(&m.a),
        cv_b: stat(&m.b),
    }
}

/// The whole run within one run a side: the geometric mean of the cells' ratios with the
/// summed bootstrap resamples and a sign test over the cells; a change it finds is held back
/// unless it is beyond what a machine drift explains.
fn whole_run_within(
    matched: &[Matched],
    tests: &[CellTest],
    mixed: bool,
    options: &CompareOptions,
) -> Option<WholeRun> {
    let run_higher = matched.first().is_none_or(|m| m.higher) || mixed;
    let mut sums = vec![0.0f64; BOOTSTRAP_RESAMPLES];
    let mut logs = Vec::new();
    for (m, t) in matched.iter().zip(tests) {
        let ratio = (t.median_a != 0.0).then(|| t.median_b / t.median_a);
        let reps = m.a[0].values.len().min(m.b[0].values.len());
        if let (Some(ratios), Some(r)) = (&t.resampled, ratio) {
            if reps >= MIN_REPS_TO_DECIDE && r > 0.0 && ratios.iter().all(|&x| x > 0.0) {
                let sign = if mixed && !m.higher { -1.0 } else { 1.0 };
                logs.push(sign * r.ln());
                sums.iter_mut().zip(ratios).for_each(|(s, x)| *s += sign * x.ln());
            }
        }
    }
    let mut w = whole_run(&logs, sums, run_higher, mixed, options)?;
    if matches!(w.verdict, Verdict::Faster | Verdict::Slower) {
        if w.ratio_ci95.is_some_and(runs::beyond_drift) {
            w.reason.push_str(&format!(
                " - decided with one run a side: beyond ×{:.1}..×{:.0}, more than a machine drift explains (assumed)",
                1.0 / runs::MACHINE_DRIFT_MAX,
                runs::MACHINE_DRIFT_MAX
            ));
        } else {
            w.held_back = Some(w.verdict);
            w.verdict = Verdict::Inconclusive;
            w.reason = format!("{} within the runs; held back: {}", w.reason, runs::no_spread_line());
        }
    }
    Some(w)
}

/// The whole run at the run level: each run's mean log median over the cells every run of A
/// and B has (a history run only when it has them all), Student's t against the spread between
/// runs. Also the spread's standard deviation (log scale).
fn whole_run_of_runs(matched: &[Matched], mixed: bool, options: &CompareOptions) -> Option<(WholeRun, Option<f64>)> {
    let (runs_a, runs_b) = (matched.first()?.a.len(), matched.first()?.b.len());
    let full: Vec<&Matched> = matched
        .iter()
        .filter(|m| m.a.len() == runs_a && m.b.len() == runs_b)
        .filter(|m| log_medians(&m.a).is_some() && log_medians(&m.b).is_some())
        .collect();
    if full.is_empty() {
        return None;
    }
    let sign = |m: &Matched| if mixed && !m.higher { -1.0 } else { 1.0 };
    let level = |which: Which, runs: usize| -> Option<Vec<f64>> {
        (0..runs)
            .map(|r| {
                let logs: Option<Vec<f64>> = full
                    .iter()
                    .map(|m| log_medians(m.side(which)).and_then(|l| l.get(r).map(|x| x * sign(m))))
                    .collect();
                logs.map(|l| l.iter().sum::<f64>() / l.len() as f64)
            })
            .collect()
    };
    let la = level(Which::A, runs_a)?;
    let lb = level(Which::B, runs_b)?;
    let runs_h = full.iter().map(|m| m.history.len()).min().unwrap_or(0);
    let lh = level(Which::History, runs_h).unwrap_or_default();
    let test = runs::run_test(&la, &lb, &lh);
    let (mut up, mut down) = (0, 0);
    for m in &full {
        let mean = |v: Vec<f64>| v.iter().sum::<f64>() / v.len() as f64;
        let d = sign(m) * (mean(log_medians(&m.b)?) - mean(log_medians(&m.a)?));
        up += usize::from(d > 0.0);
        down += usize::from(d < 0.0);
    }
    let higher = full[0].higher || mixed;
    let (verdict, reason) = match test {
        Some(t) => {
            let (v, why) = decide(
                Some(t.ci),
                t.p,
                "t test p",
                (MIN_REPS_TO_DECIDE, MIN_REPS_TO_DECIDE),
                higher,
                options,
            );
            (v, why.replace("interval of B/A", "interval of the geometric mean"))
        }
        None => (Verdict::Inconclusive, "no spread between runs".to_string()),
    };
    let w = WholeRun {
        cells: full.len(),
        basis: if mixed {
            "B/A, lower-is-better metrics inverted".into()
        } else {
            "B/A".into()
        },
        higher_is_better: higher,
        geomean_ratio: test.map(|t| t.ratio),
        ratio_ci95: test.map(|t| t.ci),
        cells_up: up,
        cells_down: down,
        cells_equal: full.len() - up - down,
        p: test.map_or(1.0, |t| t.p),
        smallest_possible_p: 0.0,
        test: "t test on the runs' levels".into(),
        held_back: None,
        verdict,
        reason,
    };
    Some((w, test.map(|t| t.sd.exp_m1())))
}

/// The uniform change over the whole run detected with 80% power at the run level:
/// band + (t(df, alpha/2) + z(0.8)) · sd · sqrt(1/runs_a + 1/runs_b).
fn detectable_between_runs(spread: &Spread, sd: f64, options: &CompareOptions) -> f64 {
    let se = sd.ln_1p() * (1.0 / spread.runs_a as f64 + 1.0 / spread.runs_b as f64).sqrt();
    (options.threshold + (runs::t_quantile_upper(options.alpha / 2.0, spread.df) + POWER_Z) * se).exp_m1()
}

/// The design of the matched cells: what they can reach, what is detectable at their CV.
fn design_of(matched: &[Matched], run_level: bool, options: &CompareOptions) -> Design {
    let m = matched.len();
    let reps = |c: &Matched| c.a[0].values.len().min(c.b[0].values.len());
    let p0: Vec<f64> = matched
        .iter()
        .map(|c| smallest_possible_p(c.a[0].values.len(), c.b[0].values.len()))
        .collect();
    let min_p0 = p0.iter().copied().fold(1.0, f64::min);
    let smallest_adjusted_p = p0
        .iter()
        .map(|&p| options.correction.best_adjusted(p, min_p0, m))
        .fold(1.0, f64::min);
    let min_reps = matched.iter().map(reps).min().unwrap_or(0);
    // Within the runs a cell decides when it has the repetitions `decide` asks for and its
    // smallest p clears alpha after the correction; at the run level, when there is a spread.
    let cells_decidable = run_level
        || matched.iter().zip(&p0).any(|(c, &p)| {
            reps(c) >= MIN_REPS_TO_DECIDE && options.correction.best_adjusted(p, min_p0, m) < options.alpha
        });
    let mut cvs: Vec<f64> = matched
        .iter()
        .filter_map(|c| {
            let cv = |s: &Option<crate::measure::stats::Summary>| s.as_ref().and_then(|s| s.cv);
            match (cv(&c.a[0].summary), cv(&c.b[0].summary)) {
                (Some(x), Some(y)) => Some(x.max(y)),
                (x, y) => x.or(y),
            }
        })
        .collect();
    let median_cv = (!cvs.is_empty()).then(|| crate::measure::stats::median(&mut cvs));
    let d = detectable_effect(
        min_reps,
        m.max(1),
        options.correction,
        options.alpha,
        options.threshold,
        median_cv.unwrap_or(0.0),
    );
    let reps_suggested = median_cv.and_then(|cv| {
        (MIN_REPS_TO_DECIDE..=MAX_REPS).find(|&n| {
            detectable_effect(n, m.max(1), options.correction, options.alpha, options.threshold, cv)
                .cell
                .is_some_and(|v| v <= 2.0 * options.threshold)
        })
    });
    Design {
        cells: m,
        min_reps,
        smallest_p: if run_level { 0.0 } else { min_p0 },
        smallest_adjusted_p: if run_level { 0.0 } else { smallest_adjusted_p },
        cells_decidable,
        reps_to_decide: d.reps_to_decide,
        median_cv,
        detectable_cell: (!run_level).then_some(median_cv.and(d.cell)).flatten(),
        detectable_run: median_cv.and(d.run),
        reps_suggested,
        spread: spread_of(1, 1, 0),
    }
}

/// The whole-run verdict from the cells' log ratios (oriented) and the summed log ratios of
/// each bootstrap resample. None without cells.
fn whole_run(
    logs: &[f64],
    mut sums: Vec<f64>,
    higher_is_better: bool,
    mixed: bool,
    options: &CompareOptions,
) -> Option<WholeRun> {
    let m = logs.len();
    if m == 0 {
        return None;
    }
    let geomean = (logs.iter().sum::<f64>() / m as f64).exp();
    sums.iter_mut().for_each(|s| *s = (*s / m as f64).exp());
    let ci = percentile_interval(&mut sums);
    let up = logs.iter().filter(|&&l| l > 0.0).count();
    let down = logs.iter().filter(|&&l| l < 0.0).count();
    let p = sign_test(up, down);
    let smallest = sign_test_smallest_p(m);
    let (verdict, reason) = if smallest >= options.alpha {
        (
            Verdict::Inconclusive,
            format!(
                "too few cells for the sign test across cells ({m}; it reaches p < {} from 6)",
                options.alpha
            ),
        )
    } else {
        let (v, why) = decide(
            Some(ci),
            p,
            "sign test p",
            (MIN_REPS_TO_DECIDE, MIN_REPS_TO_DECIDE),
            higher_is_better,
            options,
        );
        (v, why.replace("interval of B/A", "interval of the geometric mean"))
    };
    Some(WholeRun {
        cells: m,
        basis: if mixed {
            "B/A, lower-is-better metrics inverted".into()
        } else {
            "B/A".into()
        },
        higher_is_better,
        geomean_ratio: Some(geomean),
        ratio_ci95: Some(ci),
        cells_up: up,
        cells_down: down,
        cells_equal: m - up - down,
        p,
        smallest_possible_p: smallest,
        test: "sign test across cells".into(),
        held_back: None,
        verdict,
        reason,
    })
}
