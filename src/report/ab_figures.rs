//! The chart of an A/B run (`iopath ab`): each case's headline under variant A and under
//! variant B, pair by pair (x: the repetition), a panel per case, so the drift both variants
//! share and the gap between them are seen apart. The cells of an A/B run carry their variant
//! in their label (`report::ab::variant_label`).

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
    // Each pair's two values in repetition order, a panel per case.
    let points = |cell: Option<&CellSummary>| -> Vec<Point> {
        let values = cell
            .and_then(|c| c.metric(name, role))
            .map(|m| m.values.clone())
            .unwrap_or_default();
        values
            .iter()
            .enumerate()
            .map(|(i, v)| Point {
                x: (i + 1) as f64,
                median: *v,
                low: *v,
                high: *v,
            })
            .collect()
    };
    let mut series = Vec::new();
    for (base, a, b) in &cases {
        for (variant, cell, color, style) in [("A", a, 0, 0), ("B", b, 1, 1)] {
            series.push(Series {
                name: format!("variant {variant}"),
                color: OKABE_ITO[color],
                points: points(*cell),
                panel: base.to_string(),
                style,
            });
        }
    }
    let unit = first.metric(name, role).map(|m| m.unit.clone()).unwrap_or_default();
    vec![ChartSpec {
        stem: "ab_variants".into(),
        title: format!("A/B: {role} {name}, variant A and variant B pair by pair"),
        x_desc: "pair (repetition)".into(),
        x_axis: XAxis::Count,
        y_desc: format!("{name} ({unit})"),
        series,
        caption: format!(
            "y: {role} {name} of each repetition ({}); A: the system as it was, B: with the run's settings, the two cells of a pair run back to back, so what the machine did moves both and the gap between them is the settings' effect (the paired verdict: `iopath ab --show RUN`)",
            if higher { "higher is better" } else { "lower is better" },
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
        let values: Vec<Vec<f64>> = figures[0]
            .series
            .iter()
            .map(|s| s.points.iter().map(|p| p.median).collect())
            .collect();
        assert_eq!(values, vec![vec![10.0, 11.0, 12.0], vec![5.0, 6.0, 7.0]]);
    }
}
