//! Reports: per-cell statistics, crossover analysis and run comparison (pure functions over
//! stored runs), charts (plotters, SVG + PNG) and the self-contained HTML report. Reads only
//! what the store gives it.

pub mod cells;
pub mod charts;
pub mod compare;
pub mod crossover;

/// A number with about four significant digits, or "n/a".
pub fn fmt_num(value: Option<f64>) -> String {
    match value {
        Some(v) if !v.is_finite() => "n/a".into(),
        None => "n/a".into(),
        Some(0.0) => "0".into(),
        Some(v) if v.abs() >= 1000.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 100.0 => format!("{v:.1}"),
        Some(v) if v.abs() >= 1.0 => format!("{v:.2}"),
        Some(v) if v.abs() >= 0.01 => format!("{v:.3}"),
        Some(v) => format!("{v:.2e}"),
    }
}
