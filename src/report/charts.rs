//! Drawing charts with plotters: one `ChartSpec` (series of points with 95% CI error bars)
//! rendered to SVG text or a PNG file, or several on one summary sheet. Log axes are drawn as
//! log2(x) / log10(y) on a linear axis with labels converted back, so every chart has one
//! coordinate type.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;
use std::sync::Once;

/// DejaVu Sans (Bitstream Vera licence, see assets/README.md): the PNG backend cannot draw text
/// without a registered font, and SVG layout needs its metrics.
static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

pub(crate) fn register_font() {
    REGISTER.call_once(|| {
        // The font is compiled in and known to parse; a failure would show as missing text.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// One point: x, and the median with its 95% CI.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub x: f64,
    /// The median of the repetitions, the headline everywhere.
    pub median: f64,
    /// The 95% interval of the median; equal to the median when there are too few values.
    pub low: f64,
    pub high: f64,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    pub name: String,
    pub color: (u8, u8, u8),
    pub points: Vec<Point>,
    /// The small multiple this series is drawn in (e.g. `1 thread`); empty: one panel.
    pub panel: String,
    /// Marker and dash pattern: 0 circle solid, 1 triangle dashed, 2 square dotted, 3 cross.
    pub style: usize,
}

impl Series {
    /// The series of `points` in its colour and style, or None when there are no points: no
    /// chart draws, or names in its legend, a line with nothing on it.
    pub fn of_points(
        name: impl Into<String>,
        (color, style): ((u8, u8, u8), usize),
        panel: String,
        points: Vec<Point>,
    ) -> Option<Series> {
        (!points.is_empty()).then(|| Series {
            name: name.into(),
            color,
            points,
            panel,
            style,
        })
    }
}

/// The Okabe-Ito palette (colour-blind safe), black last.
pub const OKABE_ITO: [(u8, u8, u8); 8] = [
    (0, 114, 178),   // blue
    (213, 94, 0),    // vermillion
    (0, 158, 115),   // bluish green
    (230, 159, 0),   // orange
    (204, 121, 167), // reddish purple
    (86, 180, 233),  // sky blue
    (240, 228, 66),  // yellow
    (0, 0, 0),       // black
];

/// How the x axis is labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XAxis {
    /// Bytes on a log2 axis.
    LogBytes,
    /// Plain whole numbers (threads, clients).
    #[default]
    Count,
    /// Percentiles on a tail axis: x is -log10(1 - q) (p50 0.3, p90 1, p99 2, p99.9 3; max 4).
    Tail,
    /// Names (copy modes): a name's tick at each of `x_labels`, its points near it; points are
    /// not joined, as nothing lies between two names.
    Category,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChartSpec {
    /// File name without extension, e.g. `throughput_vs_size`.
    pub stem: String,
    pub title: String,
    pub x_desc: String,
    pub x_axis: XAxis,
    pub y_desc: String,
    pub series: Vec<Series>,
    /// Where the numbers come from; shown once, under the chart in the report.
    pub caption: String,
    /// Vertical markers (x, label) in every panel, e.g. cache level boundaries.
    pub markers: Vec<(f64, String)>,
    /// Vertical markers in one panel: (panel, x, label), e.g. a crossover at 1 thread.
    pub panel_markers: Vec<(String, f64, String)>,
    /// The key of the panel markers' letters, one line each, drawn under the chart (so a
    /// chart on the summary sheet, without its caption, still says what `a` means).
    pub marker_key: Vec<String>,
    /// Why there is nothing to draw (e.g. `unavailable: no hardware PMU`).
    pub empty_reason: Option<String>,
    /// A fixed y range (e.g. 0..1 for fractions) instead of one fitted to the data.
    pub y_range: Option<(f64, f64)>,
    /// Force a log y axis (latencies that span levels); otherwise log when > 100x.
    pub log_y: bool,
    /// Rows of a table shown beside the chart (first row: headings), e.g. memlat's levels.
    pub table: Vec<Vec<String>>,
    /// Series of a panel stacked in order as filled bands (CPU user + system per role); no
    /// error bars, linear y.
    pub stacked: bool,
    /// Tail and category axes: the x ticks and their labels (`p99` at 2, `max` one step past
    /// the last percentile; a mode's name); a tail axis without them: [`TAIL_POINTS`].
    pub x_labels: Vec<(f64, String)>,
}

impl ChartSpec {
    pub fn has_points(&self) -> bool {
        self.series.iter().any(|s| !s.points.is_empty())
    }

    /// The panels in order of first appearance.
    pub fn panels(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for s in &self.series {
            if !out.contains(&s.panel.as_str()) {
                out.push(&s.panel);
            }
        }
        out
    }

    /// Whether the panels get a y scale each (`panel_axes`: their heights differ more than
    /// threefold); the chart's title and caption then say so, since heights compare only within
    /// a panel.
    pub fn y_per_panel(&self) -> bool {
        let panels = self.panels();
        let tops: Vec<f64> = panels
            .iter()
            .map(|p| {
                self.series
                    .iter()
                    .filter(|s| s.panel == *p)
                    .flat_map(|s| s.points.iter().map(|q| q.high.max(q.median).abs()))
                    .fold(0.0, f64::max)
            })
            .collect();
        let (lo, hi) = tops
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), t| (lo.min(*t), hi.max(*t)));
        panels.len() > 1 && self.y_range.is_none() && lo > 0.0 && hi / lo > 3.0
    }

    /// Log2 x for bytes, and for counts spanning more than a factor of 16 (1, 10, 100 clients).
    fn log_x(&self) -> bool {
        if matches!(self.x_axis, XAxis::Tail | XAxis::Category) {
            return false;
        }
        let xs: Vec<f64> = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.x)).collect();
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        self.x_axis == XAxis::LogBytes || (min >= 1.0 && max / min > 16.0)
    }

    /// Each series' points with the medians stacked on those before it in its panel:
    /// (x, bottom, top), in the series' order.
    pub fn stacked_bands(&self) -> Vec<Vec<(f64, f64, f64)>> {
        let mut out: Vec<Vec<(f64, f64, f64)>> = Vec::new();
        for (i, s) in self.series.iter().enumerate() {
            let mut band = Vec::new();
            for p in &s.points {
                let below: f64 = self.series[..i]
                    .iter()
                    .filter(|o| o.panel == s.panel)
                    .filter_map(|o| o.points.iter().find(|q| q.x == p.x).map(|q| q.median))
                    .sum();
                band.push((p.x, below, below + p.median));
            }
            band.sort_by(|a, b| a.0.total_cmp(&b.0));
            out.push(band);
        }
        out
    }

    /// Log y when forced, or when all values are positive and span more than two decades.
    fn log_y(&self) -> bool {
        if self.stacked {
            return false;
        }
        let values: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.median))
            .collect();
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        min > 0.0 && (self.log_y || max / min > 100.0)
    }
}

pub const WIDTH: u32 = 900;
pub const HEIGHT: u32 = 520;
/// PNGs are drawn at twice the size, for sharp text on high-density screens.
pub const PNG_SCALE: u32 = 2;

/// A tick value as a reader writes it: 1, 2, 5, 10, 200, 5k, 2M, 0.5, 0.02 (never 316.2 or
/// 3.16e-3).
pub fn tick_text(v: f64) -> String {
    let a = v.abs();
    let trim = |x: f64| {
        let t = format!("{:.3}", x);
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    if a == 0.0 {
        "0".into()
    } else if a >= 1e9 {
        format!("{}G", trim(v / 1e9))
    } else if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else if a >= 1.0 {
        trim(v)
    } else {
        // Enough decimals to show the first significant digit and one more.
        let digits = (-a.log10()).ceil() as usize + 1;
        let t = format!("{v:.digits$}");
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Ticks at 1-2-5 of every decade in [lo, hi] (values, not logs); only 1 per decade when the
/// range spans more than five decades, and 1-2-3-5 when it spans less than one.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi >= lo) {
        return Vec::new();
    }
    let (d0, d1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let mantissas: &[f64] = match d1 - d0 {
        n if n > 5 => &[1.0],
        1 => &[1.0, 2.0, 3.0, 5.0],
        _ => &[1.0, 2.0, 5.0],
    };
    let mut out = Vec::new();
    for d in d0..=d1 {
        for m in mantissas {
            let v = m * 10f64.powi(d);
            if v >= lo * 0.999 && v <= hi * 1.001 {
                out.push(v);
            }
        }
    }
    out
}

/// Linear ticks at a 1-2-5 step, about six of them, covering [lo, hi].
pub fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return vec![lo];
    }
    let raw = (hi - lo) / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// The tail axis: percentile name and x (-log10(1 - q); max at 4).
pub const TAIL_POINTS: [(&str, f64); 5] = [
    ("p50", std::f64::consts::LOG10_2),
    ("p90", 1.0),
    ("p99", 2.0),
    ("p99.9", 3.0),
    ("max", 4.0),
];

pub(crate) fn draw_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart failed: {e:?}")
}

/// The axes every panel of a chart shares (in drawing coordinates: log2 x, log10 y when log).
struct Axes {
    log_x: bool,
    log_y: bool,
    x: (f64, f64),
    y: (f64, f64),
    x_ticks: Vec<f64>,
    y_ticks: Vec<f64>,
    non_negative: bool,
}

#[cfg(test)]
fn axes(spec: &ChartSpec) -> Axes {
    axes_with(spec, spec.log_x(), spec.log_y())
}

/// The panels of a chart with more than one: (columns, rows), at most three panels a row so a
/// panel keeps room for its ticks and caption.
pub fn grid(panels: usize) -> (usize, usize) {
    let columns = panels.clamp(1, 3);
    (columns, panels.max(1).div_ceil(columns))
}

/// The size a chart is drawn at: taller when its panels take more than one row.
pub fn chart_size(spec: &ChartSpec) -> (u32, u32) {
    let (_, rows) = grid(spec.panels().len());
    let key = KEY_LINE * spec.marker_key.len() as u32;
    if rows <= 1 {
        (WIDTH, HEIGHT + key)
    } else {
        (WIDTH, 60 + 360 * rows as u32 + key)
    }
}

/// The height of one line of a marker key under a chart.
const KEY_LINE: u32 = 17;

/// Each panel's axes: the chart's shared axes, or, when the panels' data differ by more than a
/// factor of three in height (a 1 KiB panel near 10 beside a 64 KiB one at 130), each panel's
/// own y range and ticks near its data, on the chart's scale type (log or linear). x ticks are
/// always each panel's own data points.
fn panel_axes(spec: &ChartSpec, panels: &[&str]) -> Vec<Axes> {
    let (log_x, log_y) = (spec.log_x(), spec.log_y());
    let own: Vec<Axes> = panels
        .iter()
        .map(|p| {
            let sub = ChartSpec {
                series: spec.series.iter().filter(|s| s.panel == *p).cloned().collect(),
                ..spec.clone()
            };
            axes_with(&sub, log_x, log_y)
        })
        .collect();
    let free = spec.y_per_panel();
    let shared = axes_with(spec, log_x, log_y);
    own.into_iter()
        .map(|a| {
            if free {
                a
            } else {
                Axes {
                    y: shared.y,
                    y_ticks: shared.y_ticks.clone(),
                    x: shared.x,
                    ..a
                }
            }
        })
        .collect()
}

fn axes_with(spec: &ChartSpec, log_x: bool, log_y: bool) -> Axes {
    let tx = |v: f64| if log_x { v.max(1.0).log2() } else { v };
    let ty = |v: f64| if log_y { v.max(f64::MIN_POSITIVE).log10() } else { v };
    let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
    let mut xs: Vec<f64> = Vec::new();
    for p in spec.series.iter().flat_map(|s| &s.points) {
        x0 = x0.min(tx(p.x));
        x1 = x1.max(tx(p.x));
        if !xs.iter().any(|x| (*x - p.x).abs() < 1e-9) {
            xs.push(p.x);
        }
        for y in [p.low, p.high, p.median] {
            if y.is_finite() && (!log_y || y > 0.0) {
                y0 = y0.min(y);
                y1 = y1.max(y);
            }
        }
    }
    xs.sort_by(f64::total_cmp);
    if spec.stacked {
        y0 = 0.0;
        y1 = spec.stacked_bands().iter().flatten().map(|b| b.2).fold(0.0, f64::max);
    }
    let non_negative = spec.series.iter().flat_map(|s| &s.points).all(|p| p.median >= 0.0);
    if !log_y {
        y0 = if non_negative { 0.0 } else { y0.min(0.0) };
    }
    if let Some((lo, hi)) = spec.y_range {
        (y0, y1) = (lo, hi);
    }
    // y ticks in values, then the range widened to whole ticks on a log axis.
    let y_ticks: Vec<f64> = if log_y {
        let lo = 10f64.powf(y0.log10().floor());
        let hi = 10f64.powf(y1.log10().ceil());
        let all = log_ticks(lo, hi);
        // Keep the ticks inside the data range plus the one just below and above.
        let below = all.iter().copied().filter(|t| *t <= y0).fold(lo, f64::max);
        let above = all.iter().copied().filter(|t| *t >= y1).fold(hi, f64::min);
        (y0, y1) = (below, above);
        all.into_iter().filter(|t| *t >= below && *t <= above).collect()
    } else {
        let pad = (y1 - y0).abs() * 0.06 + 1e-12;
        y1 += pad;
        if !non_negative {
            y0 -= pad;
        }
        linear_ticks(y0, y1)
    };
    let x_ticks: Vec<f64> = match spec.x_axis {
        XAxis::Tail | XAxis::Category if !spec.x_labels.is_empty() => spec.x_labels.iter().map(|(x, _)| *x).collect(),
        XAxis::Tail => TAIL_POINTS.iter().map(|(_, x)| *x).collect(),
        // Ticks at the data points when there are few; else at powers of 2 (bytes) or 1-2-5.
        _ if xs.len() <= 12 => xs.clone(),
        XAxis::LogBytes => {
            let (a, b) = (x0.floor() as i64, x1.ceil() as i64);
            let step = ((b - a) / 10).max(1);
            (a..=b).step_by(step as usize).map(|e| (e as f64).exp2()).collect()
        }
        XAxis::Count if log_x => log_ticks(xs[0], xs[xs.len() - 1]),
        XAxis::Count => linear_ticks(xs[0], xs[xs.len() - 1]),
        XAxis::Category => xs.clone(),
    };
    let pad_x = ((x1 - x0) * 0.05).max(0.25);
    Axes {
        log_x,
        log_y,
        x: (x0 - pad_x, x1 + pad_x),
        y: (ty(y0), ty(y1)),
        x_ticks: x_ticks.into_iter().map(tx).collect(),
        y_ticks: y_ticks.into_iter().map(ty).collect(),
        non_negative,
    }
}

fn format_x(axis: XAxis, log: bool, v: f64) -> String {
    match axis {
        XAxis::LogBytes => crate::case::format_bytes(v.exp2().round().max(1.0) as u64),
        XAxis::Tail => TAIL_POINTS
            .iter()
            .find(|(_, x)| (x - v).abs() < 1e-6)
            .map(|(n, _)| n.to_string())
            .unwrap_or_default(),
        XAxis::Count if log => tick_text(v.exp2()),
        XAxis::Count => tick_text(v),
        XAxis::Category => String::new(),
    }
}

/// Draw one chart into an area of any backend, at 1x.
pub fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, spec: &ChartSpec) -> anyhow::Result<()> {
    draw_scaled(root, spec, 1.0)
}

/// Draw one chart, every size (fonts, strokes, margins) multiplied by `k`.
pub fn draw_scaled<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, spec: &ChartSpec, k: f64) -> anyhow::Result<()> {
    register_font();
    root.fill(&WHITE).map_err(draw_err)?;
    let px = |v: f64| (v * k).round() as i32;
    let font = |size: f64| ("sans-serif", size * k).into_font();
    let (title_area, body) = root.split_vertically(px(32.0));
    let title = if spec.has_points() && spec.y_per_panel() {
        format!("{} (y scale per panel)", spec.title)
    } else {
        spec.title.clone()
    };
    title_area
        .draw_text(&title, &font(19.0).color(&BLACK), (px(12.0), px(8.0)))
        .map_err(draw_err)?;
    if !spec.has_points() {
        let reason = spec
            .empty_reason
            .clone()
            .unwrap_or_else(|| "no data in this run".into());
        body.draw_text(
            &format!("nothing to plot: {reason}"),
            &font(15.0).color(&RGBColor(160, 30, 30)),
            (px(12.0), px(8.0)),
        )
        .map_err(draw_err)?;
        return Ok(());
    }
    // The markers' key under everything, one small line each.
    let body = if spec.marker_key.is_empty() {
        body
    } else {
        let key_height = px(f64::from(KEY_LINE) * spec.marker_key.len() as f64 + 4.0);
        let (body, foot) = body.split_vertically(body.dim_in_pixel().1 as i32 - key_height);
        for (i, line) in spec.marker_key.iter().enumerate() {
            foot.draw_text(
                line,
                &font(12.0).color(&RGBColor(60, 60, 60)),
                (px(12.0), px(2.0 + f64::from(KEY_LINE) * i as f64)),
            )
            .map_err(draw_err)?;
        }
        body
    };
    let panels = spec.panels();
    let axes = panel_axes(spec, &panels);
    let (columns, rows) = grid(panels.len());
    // Several panels: the x title once under them all, never one per narrow panel that runs
    // into its neighbour's.
    let body = if panels.len() > 1 {
        let (body, foot) = body.split_vertically(body.dim_in_pixel().1 as i32 - px(24.0));
        let (w, _) = foot.dim_in_pixel();
        foot.draw(&Text::new(
            spec.x_desc.clone(),
            (w as i32 / 2, px(2.0)),
            TextStyle::from(font(14.0)).pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(draw_err)?;
        body
    } else {
        body
    };
    let areas = body.split_evenly((rows, columns));
    // One legend when every panel holds the same series; else one per panel.
    let names = |p: &str| -> Vec<&str> {
        spec.series
            .iter()
            .filter(|s| s.panel == p)
            .map(|s| s.name.as_str())
            .collect()
    };
    let same = panels.iter().all(|p| names(p) == names(panels[0]));
    let several = panels.len() > 1;
    for (i, ((area, panel), axes)) in areas.iter().zip(&panels).zip(&axes).enumerate() {
        let first = i % columns == 0;
        draw_panel(area, spec, panel, (first, several), i == 0 || !same, axes, k)?;
    }
    Ok(())
}

/// A panel's caption at a size that fits its width: 15 px, down to 11, then cut with an
/// ellipsis (DejaVu Sans averages about 0.6 em a character).
fn fitted_caption(text: &str, width_px: f64, k: f64) -> (String, f64) {
    let fits = |size: f64, n: usize| n as f64 * size * 0.6 * k <= width_px;
    let n = text.chars().count();
    for size in [15.0, 13.0, 11.0] {
        if fits(size, n) {
            return (text.to_string(), size);
        }
    }
    let keep = ((width_px / (11.0 * 0.6 * k)) as usize).saturating_sub(1).max(1);
    (format!("{}…", text.chars().take(keep).collect::<String>()), 11.0)
}

/// A panel's chart: two f64 axes (already log-transformed where the axis is logarithmic).
type PanelChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A panel's pixels at the image's scale `k`, and its axes' transforms of data values.
#[derive(Clone, Copy)]
struct PanelScale {
    k: f64,
    log_x: bool,
    log_y: bool,
}

impl PanelScale {
    fn px(self, v: f64) -> i32 {
        (v * self.k).round() as i32
    }
    fn size(self, v: f64) -> u32 {
        (v * self.k).round() as u32
    }
    fn font(self, s: f64) -> (&'static str, f64) {
        ("sans-serif", s * self.k)
    }
    fn tx(self, v: f64) -> f64 {
        if self.log_x {
            v.max(1.0).log2()
        } else {
            v
        }
    }
    fn ty(self, v: f64) -> f64 {
        if self.log_y {
            v.max(f64::MIN_POSITIVE).log10()
        } else {
            v
        }
    }
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    spec: &ChartSpec,
    panel: &str,
    (first, several): (bool, bool),
    legend: bool,
    axes: &Axes,
    k: f64,
) -> anyhow::Result<()> {
    let sc = PanelScale {
        k,
        log_x: axes.log_x,
        log_y: axes.log_y,
    };
    let (x0, x1) = axes.x;
    let (y0, y1) = axes.y;
    let mut builder = ChartBuilder::on(area);
    builder
        .margin(sc.px(8.0))
        .margin_right(sc.px(14.0))
        .x_label_area_size(sc.px(if several { 26.0 } else { 44.0 }))
        .y_label_area_size(sc.px(if first { 62.0 } else { 44.0 }));
    if !panel.is_empty() {
        let (text, size) = fitted_caption(panel, area.dim_in_pixel().0 as f64 - 16.0 * k, k);
        builder.caption(text, sc.font(size));
    }
    let mut chart = builder.build_cartesian_2d(x0..x1, y0..y1).map_err(draw_err)?;
    let y_desc = if sc.log_y {
        format!("{} (log)", spec.y_desc)
    } else {
        spec.y_desc.clone()
    };
    // Ticks, labels and grid drawn here at our 1-2-5 / data-point positions (plotters would
    // pick its own key points).
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(0)
        .y_labels(0)
        .x_desc(if several { "" } else { spec.x_desc.as_str() })
        .y_desc(if first { y_desc.as_str() } else { "" })
        .axis_desc_style(sc.font(14.0))
        .axis_style(RGBColor(120, 120, 120).stroke_width(sc.size(1.0)))
        .draw()
        .map_err(draw_err)?;
    draw_ticks(area, &mut chart, spec, axes, sc)?;
    draw_markers(&mut chart, spec, panel, axes, sc)?;
    if spec.stacked {
        draw_stacked_bands(&mut chart, spec, panel, sc)?;
        if !legend {
            return Ok(());
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(200, 200, 200))
            .label_font(sc.font(12.0))
            .draw()
            .map_err(draw_err)?;
        return Ok(());
    }
    for series in spec.series.iter().filter(|s| s.panel == panel) {
        draw_series_line(&mut chart, series, (axes, spec.x_axis != XAxis::Category), sc)?;
    }
    if legend {
        // The corner the panel's data leaves free, so the legend never hides a point.
        let points: Vec<(f64, f64)> = spec
            .series
            .iter()
            .filter(|s| s.panel == panel)
            .flat_map(|s| s.points.iter())
            .map(|p| {
                (
                    (sc.tx(p.x) - x0) / (x1 - x0),
                    (sc.ty(p.median.max(if sc.log_y { f64::MIN_POSITIVE } else { f64::MIN })) - y0) / (y1 - y0),
                )
            })
            .collect();
        chart
            .configure_series_labels()
            .position(legend_corner(&points))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(200, 200, 200))
            .label_font(sc.font(12.0))
            .legend_area_size(sc.px(26.0))
            .draw()
            .map_err(draw_err)?;
    }
    Ok(())
}

/// The grid lines, tick marks and tick labels of both axes; an x label that would overlap the
/// previous one is skipped.
fn draw_ticks<'a, DB: DrawingBackend + 'a>(
    area: &DrawingArea<DB, Shift>,
    chart: &mut PanelChart<'a, DB>,
    spec: &ChartSpec,
    axes: &Axes,
    sc: PanelScale,
) -> anyhow::Result<()> {
    let (x0, x1) = axes.x;
    let (y0, y1) = axes.y;
    let x_axis = spec.x_axis;
    let x_fmt = |v: &f64| match spec.x_labels.iter().find(|(x, _)| (x - v).abs() < 1e-6) {
        Some((_, label)) => label.clone(),
        None => format_x(x_axis, sc.log_x, *v),
    };
    let y_fmt = move |v: &f64| {
        if sc.log_y {
            tick_text(10f64.powf(*v))
        } else {
            tick_text(*v)
        }
    };
    let grid = RGBColor(225, 225, 225).stroke_width(sc.size(1.0));
    let tick = RGBColor(120, 120, 120).stroke_width(sc.size(1.0));
    let base = area.get_base_pixel();
    let label_style = |h: HPos, v: VPos| TextStyle::from(sc.font(13.0).into_font()).pos(Pos::new(h, v));
    for &t in axes.y_ticks.iter().filter(|t| **t >= y0 - 1e-9 && **t <= y1 + 1e-9) {
        chart
            .draw_series(std::iter::once(PathElement::new(vec![(x0, t), (x1, t)], grid)))
            .map_err(draw_err)?;
        let (bx, by) = chart.backend_coord(&(x0, t));
        let (rx, ry) = (bx - base.0, by - base.1);
        area.draw(&PathElement::new(vec![(rx - sc.px(5.0), ry), (rx, ry)], tick))
            .map_err(draw_err)?;
        area.draw(&Text::new(
            y_fmt(&t),
            (rx - sc.px(7.0), ry),
            label_style(HPos::Right, VPos::Center),
        ))
        .map_err(draw_err)?;
    }
    let mut last_right = i32::MIN;
    for &t in axes.x_ticks.iter().filter(|t| **t >= x0 && **t <= x1) {
        chart
            .draw_series(std::iter::once(PathElement::new(vec![(t, y0), (t, y1)], grid)))
            .map_err(draw_err)?;
        let (bx, by) = chart.backend_coord(&(t, y0));
        let (rx, ry) = (bx - base.0, by - base.1);
        area.draw(&PathElement::new(vec![(rx, ry), (rx, ry + sc.px(5.0))], tick))
            .map_err(draw_err)?;
        // Skip a label that would overlap the previous one.
        let text = x_fmt(&t);
        let half = (text.len() as f64 * 3.8 * sc.k) as i32;
        if rx - half > last_right {
            area.draw(&Text::new(
                text,
                (rx, ry + sc.px(7.0)),
                label_style(HPos::Center, VPos::Top),
            ))
            .map_err(draw_err)?;
            last_right = rx + half;
        }
    }
    Ok(())
}

/// Markers: a line at x with its label ending at the line; labels alternate between two
/// heights so neighbours do not overwrite each other.
fn draw_markers<'a, DB: DrawingBackend + 'a>(
    chart: &mut PanelChart<'a, DB>,
    spec: &ChartSpec,
    panel: &str,
    axes: &Axes,
    sc: PanelScale,
) -> anyhow::Result<()> {
    let (y0, y1) = axes.y;
    let markers = spec.markers.iter().map(|(x, l)| (*x, l)).chain(
        spec.panel_markers
            .iter()
            .filter(|(p, _, _)| p == panel)
            .map(|(_, x, l)| (*x, l)),
    );
    for (i, (x, label)) in markers.enumerate() {
        let x = sc.tx(x);
        let label_y = y1 - (y1 - y0) * if i % 2 == 0 { 0.01 } else { 0.07 };
        chart
            .draw_series(std::iter::once(DashedPathElement::new(
                vec![(x, y0), (x, y1)],
                sc.size(4.0),
                sc.size(3.0),
                RGBColor(110, 110, 110).stroke_width(sc.size(1.0)),
            )))
            .map_err(draw_err)?;
        let style = TextStyle::from(sc.font(12.0).into_font()).pos(Pos::new(HPos::Right, VPos::Top));
        chart
            .draw_series(std::iter::once(Text::new(format!("{label} "), (x, label_y), style)))
            .map_err(draw_err)?;
    }
    Ok(())
}

/// A stacked chart's bands of the panel: each series filled between its floor and its top,
/// the top drawn as a line.
fn draw_stacked_bands<'a, DB: DrawingBackend + 'a>(
    chart: &mut PanelChart<'a, DB>,
    spec: &ChartSpec,
    panel: &str,
    sc: PanelScale,
) -> anyhow::Result<()> {
    let bands = spec.stacked_bands();
    for (series, band) in spec.series.iter().zip(&bands).filter(|(s, _)| s.panel == panel) {
        let color = RGBColor(series.color.0, series.color.1, series.color.2);
        let mut outline: Vec<(f64, f64)> = band.iter().map(|b| (sc.tx(b.0), b.2)).collect();
        outline.extend(band.iter().rev().map(|b| (sc.tx(b.0), b.1)));
        chart
            .draw_series(std::iter::once(Polygon::new(outline, color.mix(0.75).filled())))
            .map_err(draw_err)?
            .label(series.name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], color.mix(0.75).filled()));
        let top: Vec<(f64, f64)> = band.iter().map(|b| (sc.tx(b.0), b.2)).collect();
        chart
            .draw_series(LineSeries::new(top, color.stroke_width(sc.size(1.0))))
            .map_err(draw_err)?;
    }
    Ok(())
}

/// One series as a line of medians in its style, with its legend entry, its error bars (the
/// CI as a vertical line with caps) and its markers.
fn draw_series_line<'a, DB: DrawingBackend + 'a>(
    chart: &mut PanelChart<'a, DB>,
    series: &Series,
    (axes, joined): (&Axes, bool),
    sc: PanelScale,
) -> anyhow::Result<()> {
    let (x0, x1) = axes.x;
    let clip = |v: f64| if axes.non_negative && !sc.log_y { v.max(0.0) } else { v };
    let color = RGBColor(series.color.0, series.color.1, series.color.2);
    let mut pts = series.points.clone();
    pts.sort_by(|a, b| a.x.total_cmp(&b.x));
    let line: Vec<(f64, f64)> = pts.iter().map(|p| (sc.tx(p.x), sc.ty(p.median))).collect();
    // Points not joined (a category axis) still draw an empty line, which carries the legend.
    let path = if joined { line.clone() } else { Vec::new() };
    let stroke = color.stroke_width(sc.size(2.0));
    let style = series.style % 4;
    let annotated = match style {
        1 => chart.draw_series(DashedLineSeries::new(path, sc.size(9.0), sc.size(5.0), stroke)),
        2 => chart.draw_series(DashedLineSeries::new(path, sc.size(3.0), sc.size(4.0), stroke)),
        _ => chart.draw_series(LineSeries::new(path, stroke)),
    }
    .map_err(draw_err)?;
    let r = sc.size(4.0) as i32;
    let legend_stroke = color.stroke_width(sc.size(2.0));
    let filled = color.filled();
    annotated.label(series.name.clone()).legend(move |(x, y)| {
        EmptyElement::at((x, y))
            + PathElement::new(vec![(0, 0), (4 * r + 4, 0)], legend_stroke)
            + marker_shape(style, (2 * r + 2, 0), r, filled)
    });
    // Error bars: the CI as a vertical line with caps.
    let cap = (x1 - x0) * 0.006;
    for p in pts.iter().filter(|p| p.high > p.low && (!sc.log_y || p.low > 0.0)) {
        let (x, lo, hi) = (sc.tx(p.x), sc.ty(clip(p.low)), sc.ty(p.high));
        let bar = [
            vec![(x, lo), (x, hi)],
            vec![(x - cap, lo), (x + cap, lo)],
            vec![(x - cap, hi), (x + cap, hi)],
        ];
        chart
            .draw_series(
                bar.into_iter()
                    .map(|path| PathElement::new(path, color.stroke_width(sc.size(1.0)))),
            )
            .map_err(draw_err)?;
    }
    chart
        .draw_series(
            line.iter()
                .map(|&(x, y)| EmptyElement::at((x, y)) + marker_shape(style, (0, 0), r, filled)),
        )
        .map_err(draw_err)?;
    Ok(())
}

/// The corner of a panel holding the fewest data points (positions as fractions of the axes,
/// y up), upper left first on a tie: where a legend hides nothing.
fn legend_corner(points: &[(f64, f64)]) -> SeriesLabelPosition {
    let corners = [
        (SeriesLabelPosition::UpperLeft, 0.0, 0.4, 0.6, 1.01),
        (SeriesLabelPosition::UpperRight, 0.6, 1.01, 0.6, 1.01),
        (SeriesLabelPosition::LowerRight, 0.6, 1.01, -0.01, 0.4),
        (SeriesLabelPosition::LowerLeft, 0.0, 0.4, -0.01, 0.4),
    ];
    let inside = |(xa, xb, ya, yb): (f64, f64, f64, f64)| {
        points
            .iter()
            .filter(|(x, y)| *x >= xa && *x <= xb && *y >= ya && *y <= yb)
            .count()
    };
    let mut best = (usize::MAX, SeriesLabelPosition::UpperLeft);
    for (corner, xa, xb, ya, yb) in corners {
        let n = inside((xa, xb, ya, yb));
        if n < best.0 {
            best = (n, corner);
        }
    }
    best.1
}

/// A marker of one of four shapes centred at `at` (backend pixels relative to the anchor).
fn marker_shape<DB: DrawingBackend>(
    style: usize,
    at: (i32, i32),
    r: i32,
    filled: ShapeStyle,
) -> DynElement<'static, DB, (i32, i32)> {
    let (x, y) = at;
    match style % 4 {
        1 => Polygon::new(vec![(x, y - r - 1), (x - r - 1, y + r), (x + r + 1, y + r)], filled).into_dyn(),
        2 => Rectangle::new([(x - r, y - r), (x + r, y + r)], filled).into_dyn(),
        3 => PathElement::new(
            vec![(x - r, y - r), (x + r, y + r), (x, y), (x - r, y + r), (x + r, y - r)],
            filled.stroke_width(2),
        )
        .into_dyn(),
        _ => Circle::new((x, y), r, filled).into_dyn(),
    }
}

/// The chart as SVG text.
pub fn render_svg(spec: &ChartSpec) -> anyhow::Result<String> {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, chart_size(spec)).into_drawing_area();
        draw(&root, spec)?;
        root.present().map_err(draw_err)?;
    }
    Ok(text)
}

/// Why a PNG could not be written, as one line: plotters formats an io error with Debug
/// (`ImageError(IoError(Custom { kind: Other, error: "No space left on device (os error 28)" }))`);
/// keep its message.
pub(crate) fn png_error(path: &Path, e: impl std::fmt::Display) -> anyhow::Error {
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
    let (w, h) = chart_size(spec);
    let root = BitMapBackend::new(path, (w * PNG_SCALE, h * PNG_SCALE)).into_drawing_area();
    draw_scaled(&root, spec, PNG_SCALE as f64)?;
    root.present().map_err(|e| png_error(path, e))
}

/// Several charts on one sheet, `columns` wide.
fn draw_sheet<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    specs: &[ChartSpec],
    columns: usize,
    k: f64,
) -> anyhow::Result<()> {
    root.fill(&WHITE).map_err(draw_err)?;
    let rows = specs.len().div_ceil(columns.max(1));
    let areas = root.split_evenly((rows.max(1), columns.max(1)));
    for (area, spec) in areas.iter().zip(specs) {
        draw_scaled(area, spec, k)?;
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
        draw_sheet(&root, specs, columns, 1.0)?;
        root.present().map_err(draw_err)?;
    }
    Ok(text)
}

pub fn render_sheet_png(specs: &[ChartSpec], columns: usize, path: &Path) -> anyhow::Result<()> {
    let (w, h) = sheet_size(specs.len(), columns);
    let root = BitMapBackend::new(path, (w * PNG_SCALE, h * PNG_SCALE)).into_drawing_area();
    draw_sheet(&root, specs, columns, PNG_SCALE as f64)?;
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
                ..Default::default()
            }],
            caption: "source: tool".into(),
            markers: vec![(32768.0, "L1".into())],
            ..Default::default()
        }
    }

    /// Issue 32 B: the summary sheet showed crossover letters without their key. The key is
    /// drawn under the chart itself (so on the sheet too), which grows by a line per entry.
    #[test]
    fn a_markers_key_is_drawn_under_the_chart_and_on_the_sheet() {
        let pt = |x: f64, median: f64| Point {
            x,
            median,
            low: median,
            high: median,
        };
        let plain = spec(vec![pt(1024.0, 1.0), pt(65536.0, 8.0)]);
        let keyed = ChartSpec {
            marker_key: vec!["a (16KiB, 1 thread): one-copy > two-copy".into()],
            ..plain.clone()
        };
        assert_eq!(chart_size(&keyed).1, chart_size(&plain).1 + KEY_LINE);
        for svg in [
            render_svg(&keyed).unwrap(),
            render_sheet_svg(&[keyed.clone(), plain], 2).unwrap(),
        ] {
            assert!(svg.contains("a (16KiB, 1 thread): one-copy &gt; two-copy"), "{svg}");
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

    /// Found in review: log axes were labelled 316.2, 31.62, 3.16e-3.
    #[test]
    fn log_ticks_are_1_2_5_with_readable_labels() {
        assert_eq!(log_ticks(0.3, 40.0), vec![0.5, 1.0, 2.0, 5.0, 10.0, 20.0]);
        let labels: Vec<String> = log_ticks(0.001, 10.0).into_iter().map(tick_text).collect();
        assert_eq!(
            labels,
            ["0.001", "0.002", "0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10"]
        );
        // More than five decades: one tick per decade.
        assert_eq!(log_ticks(0.001, 1e4).len(), 8);
        assert_eq!(tick_text(20000.0), "20k");
        assert_eq!(tick_text(2_000_000.0), "2M");
        assert_eq!(linear_ticks(0.0, 163.0), vec![0.0, 50.0, 100.0, 150.0]);
    }

    /// Found in review: servers data at 1, 10, 100 clients was ticked 1, 2, 4, ..., 64.
    #[test]
    fn count_axes_are_ticked_at_the_data_points() {
        let mut s = spec(
            [1.0, 10.0, 100.0]
                .map(|x| Point {
                    x,
                    median: x,
                    low: x,
                    high: x,
                })
                .to_vec(),
        );
        s.x_axis = XAxis::Count;
        s.markers.clear();
        let a = axes(&s);
        assert!(a.log_x);
        let labels: Vec<String> = a.x_ticks.iter().map(|t| format_x(XAxis::Count, true, *t)).collect();
        assert_eq!(labels, ["1", "10", "100"]);
        let svg = render_svg(&s).unwrap();
        assert!(svg.contains("\n100\n") && !svg.contains("\n64\n"), "{svg}");
    }

    #[test]
    fn series_in_panels_draw_side_by_side() {
        let pt = |x: f64| Point {
            x,
            median: 1.0,
            low: 1.0,
            high: 1.0,
        };
        let mut s = spec(vec![pt(1024.0), pt(4096.0)]);
        let mut second = s.series[0].clone();
        second.panel = "2 threads".into();
        s.series[0].panel = "1 thread".into();
        s.series.push(second);
        assert_eq!(s.panels(), vec!["1 thread", "2 threads"]);
        let svg = render_svg(&s).unwrap();
        assert!(svg.contains("1 thread") && svg.contains("2 threads"));
    }

    /// Found looking at the summary sheet: the legend sat on the first point of a falling line.
    #[test]
    fn the_legend_takes_the_corner_the_data_leaves_free() {
        let falling = [(0.05, 0.95), (0.5, 0.5), (0.95, 0.1)];
        assert!(matches!(legend_corner(&falling), SeriesLabelPosition::UpperRight));
        let rising = [(0.05, 0.05), (0.5, 0.5), (0.95, 0.95)];
        assert!(matches!(legend_corner(&rising), SeriesLabelPosition::UpperLeft));
        let high = [(0.05, 0.9), (0.95, 0.9)];
        assert!(matches!(legend_corner(&high), SeriesLabelPosition::LowerRight));
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
