//! The chart of an A/B run (`iopath ab`): each case's headline under variant A and under
//! variant B side by side, the median of its repetitions with the 95% interval of the median,
//! case by case (x: the case's number, named in the caption). The cells of an A/B run carry
//! their variant in their label (`report::ab::variant_label`).

use super::ab::split_variant;
use super::cells::{headline, CellSummary};
use super::charts::{ChartSpec, Point, Series, XAxis, OKABE_ITO};
use crate::store::ab::Variant;

pub fn ab_figures(cells: &[CellSummary]) -> Vec<ChartSpec> {
    // The cases in their order, each with its A and B cell.
    let mut cases: Vec<(&str, Option<&CellSummary>, Option<&CellSummary>)> = Vec::new();
    for cell in cells {
        let Some((base, variant)) = split_variant(&cell.label) else {
            continue;
        };
        let index = match cases.iter().position(|c| c.0 == base) {
            Some(i) => i,
            None => {
                cases.push((base, None, None));
                cases.len() - 1
            }
        };
        match variant {
            Variant::A => cases[index].1 = Some(cell),
            Variant::B => cases[index].2 = Some(cell),
        }
    }
    let Some(first) = cases.iter().find_map(|c| c.1.or(c.2)) else {
        return Vec::new();
    };
    let (name, role, higher) = headline(&first.case);
    let point = |x: usize, cell: Option<&CellSummary>| {
        let summary = cell?.summary(name, role)?;
        let (low, high) = summary.ci95.unwrap_or((summary.median, summary.median));
        Some(Point {
            x: x as f64,
            median: summary.median,
            low,
            high,
        })
    };
    let series = |variant: &str, color: usize, style: usize, b: bool| Series {
        name: format!("variant {variant}"),
        color: OKABE_ITO[color],
        points: cases
            .iter()
            .enumerate()
            .filter_map(|(i, c)| point(i + 1, if b { c.2 } else { c.1 }))
            .collect(),
        panel: String::new(),
        style,
    };
    let unit = first.metric(name, role).map(|m| m.unit.clone()).unwrap_or_default();
    let legend: Vec<String> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{}: {}", i + 1, c.0))
        .collect();
    vec![ChartSpec {
        stem: "ab_variants".into(),
        title: format!("A/B: {role} {name} under variant A and variant B"),
        x_desc: "case".into(),
        x_axis: XAxis::Count,
        y_desc: format!("{name} ({unit})"),
        series: vec![series("A", 0, 0, false), series("B", 1, 1, true)],
        caption: format!(
            "y: {role} {name}, median of the repetitions and the 95% interval of the median ({}); A: the system as it was, B: with the run's settings, each pair run back to back. Cases: {}",
            if higher { "higher is better" } else { "lower is better" },
            legend.join("; ")
        ),
        ..Default::default()
    }]
}

#[cfg(test)]
mod tests {
    use super::super::cells::summarize_run;
    use super::super::cells::tests::{run_data, stream_case};
    use super::*;
    use crate::case::CopyMode;
    use crate::store::ab::AbRun;

    #[test]
    fn an_ab_run_draws_a_and_b_per_case_and_any_other_run_nothing() {
        let case = stream_case(CopyMode::TwoCopy, 4096, 1);
        let mut data = run_data(vec![
            (case.clone(), vec![10.0, 11.0, 12.0]),
            (case, vec![5.0, 6.0, 7.0]),
        ]);
        assert!(ab_figures(&summarize_run(&data)).is_empty());
        data.ab = Some(AbRun {
            settings: vec!["dev:client:gro=off".into()],
            pair_order: "abba".into(),
            scope: "topology".into(),
            variants: vec![Variant::A, Variant::B],
        });
        let figures = ab_figures(&summarize_run(&data));
        assert_eq!(figures.len(), 1);
        let medians: Vec<Vec<f64>> = figures[0]
            .series
            .iter()
            .map(|s| s.points.iter().map(|p| p.median).collect())
            .collect();
        assert_eq!(medians, vec![vec![11.0], vec![6.0]]);
    }
}
