//! Drawing charts with plotters: one `ChartSpec` (series of points with 95% CI error bars)
//! rendered to SVG text or a PNG file, or several on one summary sheet. Log axes are drawn as
//! log2(x) / log10(y) on a linear axis with labels converted back, so every chart has one
//! coordinate type.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;
use std::sync::Once;

/// DejaVu Sans (Bitstream Vera licence, see assets/README.md): the PNG backend cannot draw text
/// without a registered font, and SVG layout needs its metrics.
static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

fn register_font() {
    REGISTER.call_once(|| {
        // The font is compiled in and known to parse; a failure would show as missing text.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// One point: x, and the mean with its 95% CI.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub x: f64,
    /// The median of the repetitions, the headline everywhere.
    pub median: f64,
    /// The 95% interval of the median; equal to the median when there are too few values.
    pub low: f64,
    pub high: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub color: (u8, u8, u8),
    pub points: Vec<Point>,
}

/// How the x axis is labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    /// Bytes on a log2 axis.
    LogBytes,
    /// Plain whole numbers (threads, clients).
    Count,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChartSpec {
    /// File name without extension, e.g. `throughput_vs_size`.
    pub stem: String,
    pub title: String,
    pub x_desc: String,
    pub x_axis: XAxis,
    pub y_desc: String,
    pub series: Vec<Series>,
    /// Where the numbers come from; drawn under the chart.
    pub caption: String,
    /// Vertical markers (x, label), e.g. cache level boundaries.
    pub markers: Vec<(f64, String)>,
    /// Why there is nothing to draw (e.g. `unavailable: no hardware PMU`).
    pub empty_reason: Option<String>,
    /// A fixed y range (e.g. 0..1 for fractions) instead of one fitted to the data.
    pub y_range: Option<(f64, f64)>,
}

impl ChartSpec {
    pub fn has_points(&self) -> bool {
        self.series.iter().any(|s| !s.points.is_empty())
    }

    /// Log2 x for bytes, and for counts spanning more than a factor of 16 (1, 10, 100 clients).
    fn log_x(&self) -> bool {
        let xs: Vec<f64> = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.x)).collect();
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        self.x_axis == XAxis::LogBytes || (min >= 1.0 && max / min > 16.0)
    }

    /// Log y when all values are positive and span more than two decades.
    fn log_y(&self) -> bool {
        let values: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.median))
            .collect();
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        min > 0.0 && max / min > 100.0
    }
}

pub const WIDTH: u32 = 900;
pub const HEIGHT: u32 = 560;

fn format_x(axis: XAxis, log: bool, v: f64) -> String {
    match axis {
        XAxis::LogBytes => crate::case::format_bytes(v.exp2().round().max(1.0) as u64),
        XAxis::Count if log => format!("{}", v.exp2().round() as u64),
        XAxis::Count => {
            if (v - v.round()).abs() < 1e-9 {
                format!("{}", v.round() as i64)
            } else {
                String::new()
            }
        }
    }
}

fn format_y(v: f64) -> String {
    super::fmt_num(Some(v))
}

fn draw_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart failed: {e:?}")
}

/// Draw one chart into an area of any backend.
pub fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, spec: &ChartSpec) -> anyhow::Result<()> {
    register_font();
    root.fill(&WHITE).map_err(draw_err)?;
    let (_, height) = root.dim_in_pixel();
    let caption_lines = spec.caption.lines().count().max(1) as u32;
    let (plot_area, caption_area) = root.split_vertically(height.saturating_sub(16 * caption_lines + 10));
    for (i, line) in spec.caption.lines().enumerate() {
        caption_area
            .draw_text(
                line,
                &("sans-serif", 13).into_font().color(&RGBColor(80, 80, 80)),
                (12, 2 + 16 * i as i32),
            )
            .map_err(draw_err)?;
    }
    if !spec.has_points() {
        let reason = spec
            .empty_reason
            .clone()
            .unwrap_or_else(|| "no data in this run".into());
        plot_area
            .draw_text(&spec.title, &("sans-serif", 20).into_font().color(&BLACK), (12, 10))
            .map_err(draw_err)?;
        plot_area
            .draw_text(
                &format!("nothing to plot: {reason}"),
                &("sans-serif", 16).into_font().color(&RED),
                (12, 60),
            )
            .map_err(draw_err)?;
        return Ok(());
    }
    let log_y = spec.log_y();
    let ty = |v: f64| if log_y { v.max(f64::MIN_POSITIVE).log10() } else { v };
    let log_x = spec.log_x();
    let tx = |v: f64| {
        if log_x {
            v.max(1.0).log2()
        } else {
            v
        }
    };
    let points = spec.series.iter().flat_map(|s| &s.points);
    let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
    for p in points {
        x0 = x0.min(tx(p.x));
        x1 = x1.max(tx(p.x));
        for y in [p.low, p.high, p.median] {
            if y.is_finite() && (!log_y || y > 0.0) {
                y0 = y0.min(ty(y));
                y1 = y1.max(ty(y));
            }
        }
    }
    // A quantity that cannot be negative keeps its axis at 0 even when a wide CI dips below.
    let non_negative = spec.series.iter().flat_map(|s| &s.points).all(|p| p.median >= 0.0);
    if !log_y {
        y0 = if non_negative { 0.0 } else { y0.min(0.0) };
    }
    if let Some((lo, hi)) = spec.y_range {
        (y0, y1) = (lo, hi);
    }
    let clip = |v: f64| if non_negative && !log_y { v.max(0.0) } else { v };
    let pad_x = ((x1 - x0) * 0.05).max(0.25);
    let pad_y = ((y1 - y0) * 0.08).max(if log_y { 0.1 } else { y1.abs() * 0.05 + 1e-9 });
    let y_desc = if log_y {
        format!("{} (log scale)", spec.y_desc)
    } else {
        spec.y_desc.clone()
    };
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(&spec.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(72)
        .build_cartesian_2d(
            (x0 - pad_x)..(x1 + pad_x),
            (y0 - if log_y { pad_y } else { 0.0 })..(y1 + pad_y),
        )
        .map_err(draw_err)?;
    let x_axis = spec.x_axis;
    let x_fmt = move |v: &f64| format_x(x_axis, log_x, *v);
    let y_fmt = move |v: &f64| if log_y { format_y(10f64.powf(*v)) } else { format_y(*v) };
    let x_labels = if log_x {
        ((x1 - x0).round() as usize + 1).clamp(2, 24)
    } else {
        10
    };
    chart
        .configure_mesh()
        .x_desc(&spec.x_desc)
        .y_desc(&y_desc)
        .x_labels(x_labels)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 15))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(draw_err)?;
    // A marker is a line at x with its label ending at the line (over what lies left of it);
    // labels alternate between two heights so neighbours do not overwrite each other.
    for (i, (x, label)) in spec.markers.iter().enumerate() {
        let x = tx(*x);
        let top = y1 + pad_y * 0.5;
        let label_y = top - (y1 - y0) * if i % 2 == 0 { 0.0 } else { 0.06 };
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x, y0), (x, top)],
                RGBColor(150, 150, 150).stroke_width(1),
            )))
            .map_err(draw_err)?;
        let style = TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Right, VPos::Top));
        chart
            .draw_series(std::iter::once(Text::new(format!("{label} "), (x, label_y), style)))
            .map_err(draw_err)?;
    }
    for series in &spec.series {
        let color = RGBColor(series.color.0, series.color.1, series.color.2);
        let mut pts = series.points.clone();
        pts.sort_by(|a, b| a.x.total_cmp(&b.x));
        let line: Vec<(f64, f64)> = pts.iter().map(|p| (tx(p.x), ty(p.median))).collect();
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
            .map_err(draw_err)?
            .label(series.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3)));
        // Error bars: the CI as a vertical line with caps (plotters' ErrorBar needs an extra feature).
        let cap = (x1 - x0 + 2.0 * pad_x) * 0.006;
        for p in pts.iter().filter(|p| p.high > p.low && (!log_y || p.low > 0.0)) {
            let (x, lo, hi) = (tx(p.x), ty(clip(p.low)), ty(p.high));
            let bar = [
                vec![(x, lo), (x, hi)],
                vec![(x - cap, lo), (x + cap, lo)],
                vec![(x - cap, hi), (x + cap, hi)],
            ];
            chart
                .draw_series(
                    bar.into_iter()
                        .map(|path| PathElement::new(path, color.stroke_width(1))),
                )
                .map_err(draw_err)?;
        }
        chart
            .draw_series(line.iter().map(|&(x, y)| Circle::new((x, y), 3, color.filled())))
            .map_err(draw_err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(draw_err)?;
    Ok(())
}

/// The chart as SVG text.
pub fn render_svg(spec: &ChartSpec) -> anyhow::Result<String> {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, spec)?;
        root.present().map_err(draw_err)?;
    }
    Ok(text)
}

/// Why a PNG could not be written, as one line: plotters formats an io error with Debug
/// (`ImageError(IoError(Custom { kind: Other, error: "No space left on device (os error 28)" }))`);
/// keep its message.
fn png_error(path: &Path, e: impl std::fmt::Display) -> anyhow::Error {
    let text = e.to_string();
    let reason = ["message: \"", "error: \""]
        .iter()
        .find_map(|key| text.split_once(key))
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(message, _)| message.to_string())
        .unwrap_or(text);
    anyhow::anyhow!("cannot write {}: {reason}", path.display())
}

/// The chart as a PNG file.
pub fn render_png(spec: &ChartSpec, path: &Path) -> anyhow::Result<()> {
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    draw(&root, spec)?;
    root.present().map_err(|e| png_error(path, e))
}

/// Several charts on one sheet, `columns` wide.
fn draw_sheet<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    specs: &[ChartSpec],
    columns: usize,
) -> anyhow::Result<()> {
    root.fill(&WHITE).map_err(draw_err)?;
    let rows = specs.len().div_ceil(columns.max(1));
    let areas = root.split_evenly((rows.max(1), columns.max(1)));
    for (area, spec) in areas.iter().zip(specs) {
        draw(area, spec)?;
    }
    Ok(())
}

fn sheet_size(count: usize, columns: usize) -> (u32, u32) {
    let rows = count.div_ceil(columns.max(1)).max(1) as u32;
    (WIDTH * columns as u32, HEIGHT * rows)
}

pub fn render_sheet_svg(specs: &[ChartSpec], columns: usize) -> anyhow::Result<String> {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, sheet_size(specs.len(), columns)).into_drawing_area();
        draw_sheet(&root, specs, columns)?;
        root.present().map_err(draw_err)?;
    }
    Ok(text)
}

pub fn render_sheet_png(specs: &[ChartSpec], columns: usize, path: &Path) -> anyhow::Result<()> {
    let root = BitMapBackend::new(path, sheet_size(specs.len(), columns)).into_drawing_area();
    draw_sheet(&root, specs, columns)?;
    root.present().map_err(|e| png_error(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(points: Vec<Point>) -> ChartSpec {
        ChartSpec {
            stem: "t".into(),
            title: "throughput vs size".into(),
            x_desc: "message size".into(),
            x_axis: XAxis::LogBytes,
            y_desc: "Gbit/s".into(),
            series: vec![Series {
                name: "one-copy t1".into(),
                color: (30, 90, 200),
                points,
            }],
            caption: "source: tool".into(),
            markers: vec![(32768.0, "L1".into())],
            empty_reason: None,
            y_range: None,
        }
    }

    #[test]
    fn svg_and_png_render_with_text_and_error_bars() {
        let pts = vec![
            Point {
                x: 1024.0,
                median: 1.0,
                low: 0.9,
                high: 1.1,
            },
            Point {
                x: 65536.0,
                median: 8.0,
                low: 7.5,
                high: 8.5,
            },
        ];
        let svg = render_svg(&spec(pts.clone())).unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("one-copy t1") && svg.contains("64KiB"),
            "{svg}"
        );
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("t.png");
        render_png(&spec(pts), &png).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
    }

    #[test]
    fn an_empty_chart_says_why() {
        let mut s = spec(vec![]);
        s.empty_reason = Some("unavailable: no hardware PMU".into());
        let svg = render_svg(&s).unwrap();
        assert!(svg.contains("no hardware PMU"));
        let sheet = render_sheet_svg(&[s.clone(), s], 2).unwrap();
        assert!(sheet.contains("<svg"));
    }
}
