//! A matrix drawn as a heat map with plotters (the report's chart code: its font, SVG and PNG
//! backends): a square per pair coloured from worst (dark) to best (light) on the viridis
//! scale, grey where a planned pair is missing, white where no pair was planned; flagged hosts
//! marked red beside their row and column, flagged links outlined red; the values written in
//! the squares when they are large enough, and a colour bar with the range.

use super::Matrix;
use crate::report::charts::{draw_err, png_error, register_font};
use crate::report::fmt_num;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// Above this many hosts only the PNG is drawn: an SVG of 10,000+ squares is too heavy for a page.
pub const MAX_SVG_HOSTS: usize = 100;

/// Viridis at five stops (colour-blind safe, monotonic in lightness).
const VIRIDIS: [(f64, f64, f64); 5] = [
    (68.0, 1.0, 84.0),
    (59.0, 82.0, 139.0),
    (33.0, 145.0, 140.0),
    (94.0, 201.0, 98.0),
    (253.0, 231.0, 37.0),
];
const MISSING: RGBColor = RGBColor(190, 190, 190);
const FLAG: RGBColor = RGBColor(210, 20, 20);

/// The colour of `t` in [0, 1] (0 worst, 1 best).
fn colour(t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0) * (VIRIDIS.len() - 1) as f64;
    let i = (t.floor() as usize).min(VIRIDIS.len() - 2);
    let f = t - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let mix = |x: f64, y: f64| (x + (y - x) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Pixel sizes at scale 1.
struct Layout {
    cell: i32,
    left: i32,
    top: i32,
    width: u32,
    height: u32,
}

fn layout(n: usize) -> Layout {
    let cell = (720 / n.max(1) as i32).clamp(1, 48);
    let (left, top, right, bottom) = (64, 64, 150, 40);
    let grid = cell * n as i32;
    Layout {
        cell,
        left,
        top,
        width: ((left + grid + right) as u32).max(640),
        height: (top + grid + bottom) as u32,
    }
}

/// 1, 2, 5, 10, 20, 50 … : the step between numbered rows so that about 20 are numbered.
fn label_step(n: usize) -> usize {
    let mut step = 1;
    for s in [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000] {
        step = s;
        if n / s <= 40 {
            break;
        }
    }
    step
}

/// The range of the values, worst and best ends.
fn range(m: &Matrix) -> Option<(f64, f64)> {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for v in m.values.iter().flatten() {
        lo = lo.min(*v);
        hi = hi.max(*v);
    }
    (lo <= hi).then_some((lo, hi))
}

/// 0 (worst) to 1 (best) for a value.
fn goodness(m: &Matrix, v: f64, (lo, hi): (f64, f64)) -> f64 {
    let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
    if m.metric.higher_is_better {
        t
    } else {
        1.0 - t
    }
}

/// Where a heat map's grid stands at scale `k`: its squares' side and its top-left corner in
/// pixels, with the layout at scale 1 (`unscaled_cell`: what decides what fits in a square).
#[derive(Clone, Copy)]
struct Grid {
    n: usize,
    k: i32,
    cell: i32,
    unscaled_cell: i32,
    left: i32,
    top: i32,
}

impl Grid {
    fn font(self, size: i32) -> FontDesc<'static> {
        ("sans-serif", (size * self.k) as f64).into_font()
    }
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    m: &Matrix,
    planned: &[bool],
    title: &str,
    k: i32,
) -> anyhow::Result<()> {
    register_font();
    root.fill(&WHITE).map_err(draw_err)?;
    let n = m.n;
    let l = layout(n);
    let g = Grid {
        n,
        k,
        cell: l.cell * k,
        unscaled_cell: l.cell,
        left: l.left * k,
        top: l.top * k,
    };
    root.draw(&Text::new(title.to_string(), (12 * k, 8 * k), g.font(15).color(&BLACK)))
        .map_err(draw_err)?;
    let range = range(m);
    draw_squares(root, m, planned, range, g)?;
    draw_host_numbers(root, m, g)?;
    let grid = g.cell * n as i32;
    root.draw(&Text::new(
        "rows: source (client) · columns: destination (server) · red: flagged".to_string(),
        (g.left, g.top + grid + 10 * k),
        g.font(11).color(&BLACK),
    ))
    .map_err(draw_err)?;
    draw_colour_bar(root, m, range, g)
}

/// The squares in their colours, the values in them when they fit ("missing" where a planned
/// pair has none), and the flagged links outlined.
fn draw_squares<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    m: &Matrix,
    planned: &[bool],
    range: Option<(f64, f64)>,
    g: Grid,
) -> anyhow::Result<()> {
    let Grid {
        n, k, cell, left, top, ..
    } = g;
    for s in 0..n {
        for d in 0..n {
            let i = s * n + d;
            let fill = match (m.values[i], planned[i]) {
                (Some(v), _) => colour(range.map_or(0.5, |r| goodness(m, v, r))),
                (None, true) => MISSING,
                (None, false) => WHITE,
            };
            let (x, y) = (left + d as i32 * cell, top + s as i32 * cell);
            if cell == 1 {
                root.draw_pixel((x, y), &fill).map_err(draw_err)?;
            } else {
                root.draw(&Rectangle::new([(x, y), (x + cell, y + cell)], fill.filled()))
                    .map_err(draw_err)?;
            }
        }
    }
    // Values in the squares when they fit, and "missing" where a planned pair has none.
    if g.unscaled_cell >= 36 {
        for s in 0..n {
            for d in 0..n {
                let i = s * n + d;
                let text = match (m.values[i], planned[i]) {
                    (Some(v), _) => fmt_num(Some(v)),
                    (None, true) => "missing".to_string(),
                    (None, false) => continue,
                };
                let dark = m.values[i].is_some_and(|v| range.is_some_and(|r| goodness(m, v, r) < 0.5));
                let style = TextStyle::from(g.font(9))
                    .color(if dark { &WHITE } else { &BLACK })
                    .pos(Pos::new(HPos::Center, VPos::Center));
                let at = (left + d as i32 * cell + cell / 2, top + s as i32 * cell + cell / 2);
                root.draw(&Text::new(text, at, style)).map_err(draw_err)?;
            }
        }
    }
    // Flagged links outlined.
    if g.unscaled_cell >= 4 {
        for (s, d, _) in m.worse_links() {
            let (x, y) = (left + *d as i32 * cell, top + *s as i32 * cell);
            root.draw(&Rectangle::new(
                [(x, y), (x + cell - 1, y + cell - 1)],
                FLAG.stroke_width(2 * k as u32),
            ))
            .map_err(draw_err)?;
        }
    }
    Ok(())
}

/// Host numbers (rows: sources, columns: destinations) and flagged hosts' marks.
fn draw_host_numbers<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, m: &Matrix, g: Grid) -> anyhow::Result<()> {
    let Grid {
        n, k, cell, left, top, ..
    } = g;
    let step = label_step(n);
    for h in 0..n {
        // Red marks only the worse side: a host better than the rest is not flagged.
        let flagged = m.host_flag(h).filter(|f| f.is_worse(m.metric));
        // Every `step`-th host is numbered, and every flagged one, whose number wins over a
        // regular one too close to it to read.
        let near_flag = step > 1 && m.worse_hosts().any(|f| f.host != h && f.host.abs_diff(h) <= step / 2);
        let number = flagged.is_some() || ((h == 0 || (h + 1) % step == 0) && !near_flag);
        let centre = h as i32 * cell + cell / 2;
        if number {
            let color = if flagged.is_some() { &FLAG } else { &BLACK };
            root.draw(&Text::new(
                (h + 1).to_string(),
                (left - 10 * k, top + centre),
                TextStyle::from(g.font(10))
                    .color(color)
                    .pos(Pos::new(HPos::Right, VPos::Center)),
            ))
            .map_err(draw_err)?;
            root.draw(&Text::new(
                (h + 1).to_string(),
                (left + centre, top - 10 * k),
                TextStyle::from(g.font(10))
                    .color(color)
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            ))
            .map_err(draw_err)?;
        }
        if let Some(f) = flagged {
            let span = (h as i32 * cell, h as i32 * cell + cell.max(2 * k));
            if f.as_source.is_some_and(|side| side.is_worse(m.metric)) {
                root.draw(&Rectangle::new(
                    [(left - 7 * k, top + span.0), (left - 3 * k, top + span.1)],
                    FLAG.filled(),
                ))
                .map_err(draw_err)?;
            }
            if f.as_destination.is_some_and(|side| side.is_worse(m.metric)) {
                root.draw(&Rectangle::new(
                    [(left + span.0, top - 7 * k), (left + span.1, top - 3 * k)],
                    FLAG.filled(),
                ))
                .map_err(draw_err)?;
            }
        }
    }
    Ok(())
}

/// The colour bar right of the grid, best at the top, with its two ends' values and the key
/// of a missing pair.
fn draw_colour_bar<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    m: &Matrix,
    range: Option<(f64, f64)>,
    g: Grid,
) -> anyhow::Result<()> {
    let Grid {
        n, k, cell, left, top, ..
    } = g;
    let grid = cell * n as i32;
    let bar_x = left + grid + 24 * k;
    let bar_h = grid.max(60 * k);
    for y in 0..bar_h {
        let t = 1.0 - y as f64 / (bar_h - 1).max(1) as f64;
        root.draw(&Rectangle::new(
            [(bar_x, top + y), (bar_x + 16 * k, top + y + 1)],
            colour(t).filled(),
        ))
        .map_err(draw_err)?;
    }
    if let Some((lo, hi)) = range {
        let (best, worst) = if m.metric.higher_is_better { (hi, lo) } else { (lo, hi) };
        let label = |v: f64, y: i32, v_pos: VPos| -> anyhow::Result<()> {
            root.draw(&Text::new(
                format!("{} {}", fmt_num(Some(v)), m.metric.unit),
                (bar_x + 20 * k, y),
                TextStyle::from(g.font(10))
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, v_pos)),
            ))
            .map_err(draw_err)
        };
        label(best, top, VPos::Top)?;
        label(worst, top + bar_h, VPos::Bottom)?;
    }
    let key_y = top + bar_h + 8 * k;
    root.draw(&Rectangle::new(
        [(bar_x, key_y), (bar_x + 16 * k, key_y + 10 * k)],
        MISSING.filled(),
    ))
    .map_err(draw_err)?;
    root.draw(&Text::new(
        "missing".to_string(),
        (bar_x + 20 * k, key_y),
        TextStyle::from(g.font(10))
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Top)),
    ))
    .map_err(draw_err)?;
    Ok(())
}

/// The heat map as SVG text.
pub fn svg(m: &Matrix, planned: &[bool], title: &str) -> anyhow::Result<String> {
    let l = layout(m.n);
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (l.width, l.height)).into_drawing_area();
        draw(&root, m, planned, title, 1)?;
        root.present().map_err(draw_err)?;
    }
    Ok(text)
}

/// The heat map as a PNG file: twice the size up to `MAX_SVG_HOSTS` hosts (sharp text), one
/// pixel a pair beyond.
pub fn png(m: &Matrix, planned: &[bool], title: &str, path: &Path) -> anyhow::Result<()> {
    let l = layout(m.n);
    let k = if m.n <= MAX_SVG_HOSTS { 2 } else { 1 };
    let root = BitMapBackend::new(path, (l.width * k as u32, l.height * k as u32)).into_drawing_area();
    draw(&root, m, planned, title, k)?;
    root.present().map_err(|e| png_error(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_run_from_dark_to_light_and_labels_thin_out() {
        assert_eq!(colour(0.0), RGBColor(68, 1, 84));
        assert_eq!(colour(1.0), RGBColor(253, 231, 37));
        assert_eq!(label_step(4), 1);
        assert_eq!(label_step(1000), 50);
        assert_eq!(layout(1000).cell, 1);
        assert_eq!(layout(4).cell, 48);
    }
}
