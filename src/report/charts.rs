//! SVG charts for the HTML report, drawn with plotters' SVG backend: horizontal bars (wall,
//! CPU, memory, latency), speedup curves with the ideal line and CI bands, and task timelines.
//! Every chart is a string of SVG without external references, or an error message.

use plotters::prelude::*;

/// A colour.
pub type Rgb = RGBColor;

/// A chart, or why it could not be drawn.
pub type Chart = std::result::Result<String, String>;

/// Colours for series, in order (colour-blind friendly: Okabe-Ito and Tableau).
pub const PALETTE: &[RGBColor] = &[
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(120, 120, 120),
    RGBColor(240, 228, 66),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// The colour of series `i`.
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Inline SVG needs no namespace declaration; dropping it keeps the page free of URLs.
fn finish(svg: String) -> String {
    svg.replace(" xmlns=\"http://www.w3.org/2000/svg\"", "")
}

const WIDTH: u32 = 760;

/// One bar of a row: from..to on the x axis, in one of the row's slots.
#[derive(Debug, Clone)]
pub struct Bar {
    /// Where it starts.
    pub from: f64,
    /// Where it ends.
    pub to: f64,
    /// Its colour.
    pub color: RGBColor,
    /// Which sub-row (0 on top).
    pub slot: usize,
}

/// One row of a horizontal bar chart: a cell.
#[derive(Debug, Clone, Default)]
pub struct HRow {
    /// The row's label (left of the axis).
    pub label: String,
    /// Its bars.
    pub bars: Vec<Bar>,
    /// An interval drawn as a whisker on a slot: (lo, hi, slot).
    pub whisker: Option<(f64, f64, usize)>,
    /// A tick mark on a slot, e.g. the ideal time: (x, slot).
    pub mark: Option<(f64, usize)>,
    /// Text right of the row's bars.
    pub note: Option<String>,
}

/// Horizontal bars, one row per cell, `slots` bars per row (the legend is the page's).
pub fn hbars(x_desc: &str, fmt: &dyn Fn(f64) -> String, rows: &[HRow], slots: usize) -> Chart {
    let n = rows.len().max(1);
    let slots = slots.max(1);
    let row_h = 10 + 9 * slots as u32;
    let height = 70 + row_h * n as u32;
    let xmax = rows
        .iter()
        .flat_map(|r| {
            r.bars
                .iter()
                .map(|b| b.to)
                .chain(r.whisker.map(|w| w.1))
                .chain(r.mark.map(|m| m.0))
        })
        .fold(0.0f64, f64::max);
    let xmax = if xmax > 0.0 { xmax * 1.22 } else { 1.0 };
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let label_w = rows
            .iter()
            .map(|r| r.label.chars().count())
            .max()
            .unwrap_or(4) as u32
            * 7
            + 12;
        // The right margin holds half the last tick's label, which is centred on the edge.
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .margin_right(36)
            .x_label_area_size(34)
            .y_label_area_size(label_w.clamp(50, 260))
            .build_cartesian_2d(0f64..xmax, -0.5f64..(n as f64 - 0.5))
            .map_err(err)?;
        let labels: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
        let ylab = move |v: &f64| {
            let i = v.round();
            if (v - i).abs() > 1e-6 || i < 0.0 {
                return String::new();
            }
            // Row 0 is drawn on top.
            labels
                .get(n.saturating_sub(1 + i as usize))
                .cloned()
                .unwrap_or_default()
        };
        let xlab = |v: &f64| fmt(*v);
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n + 1)
            .y_label_formatter(&ylab)
            .x_label_formatter(&xlab)
            .x_labels(6)
            .x_desc(x_desc)
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(err)?;
        let band = 0.8 / slots as f64;
        let slot_y = |row: usize, slot: usize| {
            let center = (n - 1 - row) as f64;
            let top = center + 0.4 - band * slot as f64;
            (top - band * 0.9, top)
        };
        for (i, r) in rows.iter().enumerate() {
            chart
                .draw_series(r.bars.iter().map(|b| {
                    let (lo, hi) = slot_y(i, b.slot.min(slots - 1));
                    Rectangle::new([(b.from, lo), (b.to.max(b.from), hi)], b.color.filled())
                }))
                .map_err(err)?;
            if let Some((lo, hi, s)) = r.whisker {
                let (y0, y1) = slot_y(i, s.min(slots - 1));
                let y = (y0 + y1) / 2.0;
                let h = (y1 - y0) / 3.0;
                chart
                    .draw_series([
                        PathElement::new(vec![(lo, y), (hi, y)], BLACK.stroke_width(1)),
                        PathElement::new(vec![(lo, y - h), (lo, y + h)], BLACK.stroke_width(1)),
                        PathElement::new(vec![(hi, y - h), (hi, y + h)], BLACK.stroke_width(1)),
                    ])
                    .map_err(err)?;
            }
            if let Some((x, s)) = r.mark {
                let (y0, y1) = slot_y(i, s.min(slots - 1));
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(x, y0 - 0.05), (x, y1 + 0.05)],
                        RGBColor(200, 0, 0).stroke_width(2),
                    )))
                    .map_err(err)?;
            }
            if let Some(note) = &r.note {
                let end = r
                    .bars
                    .iter()
                    .map(|b| b.to)
                    .chain(r.whisker.map(|w| w.1))
                    .fold(0.0f64, f64::max);
                let (y0, _) = slot_y(i, 0);
                chart
                    .draw_series(std::iter::once(Text::new(
                        note.clone(),
                        (end + xmax * 0.01, y0 + band * 0.85),
                        ("sans-serif", 11).into_font(),
                    )))
                    .map_err(err)?;
            }
        }
        root.present().map_err(err)?;
    }
    Ok(finish(buf))
}

/// One speedup curve: (x, speedup, CI low, CI high) points.
#[derive(Debug, Clone)]
pub struct Curve {
    /// The series name (a model).
    pub name: String,
    /// Its colour.
    pub color: RGBColor,
    /// Points in x order.
    pub points: Vec<(f64, f64, f64, f64)>,
}

/// Speedup curves with their CI bands and the dashed ideal line; `log_x` spaces x by decade.
pub fn speedup(curves: &[Curve], ideal: &[(f64, f64)], log_x: bool, x_desc: &str) -> Chart {
    let tx = |x: f64| if log_x { x.max(1e-9).log10() } else { x };
    let xs = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .chain(ideal.iter().map(|p| p.0));
    let (xmin, xmax) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(tx(x)), b.max(tx(x)))
    });
    if !xmin.is_finite() {
        return Err("no speedup to draw".into());
    }
    let pad = ((xmax - xmin) * 0.05).max(0.5);
    let ymax = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.3.max(p.1)))
        .chain(ideal.iter().map(|p| p.1))
        .fold(1.0f64, f64::max)
        * 1.15;
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH, 360)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d((xmin - pad)..(xmax + pad), 0f64..ymax)
            .map_err(err)?;
        let xlab = |v: &f64| {
            let x = if log_x { 10f64.powf(*v) } else { *v };
            if x >= 10.0 || (x - x.round()).abs() < 1e-6 {
                format!("{}", x.round())
            } else {
                format!("{x:.1}")
            }
        };
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc("speedup over seq (×)")
            .x_label_formatter(&xlab)
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(DashedLineSeries::new(
                ideal.iter().map(|&(x, y)| (tx(x), y)),
                6,
                4,
                BLACK.stroke_width(1),
            ))
            .map_err(err)?
            .label("ideal")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
        for c in curves {
            let col = c.color;
            if c.points.len() > 1 {
                let band: Vec<(f64, f64)> = c
                    .points
                    .iter()
                    .map(|p| (tx(p.0), p.3))
                    .chain(c.points.iter().rev().map(|p| (tx(p.0), p.2)))
                    .collect();
                chart
                    .draw_series(std::iter::once(Polygon::new(band, col.mix(0.18).filled())))
                    .map_err(err)?;
            } else {
                chart
                    .draw_series(c.points.iter().map(|p| {
                        PathElement::new(vec![(tx(p.0), p.2), (tx(p.0), p.3)], col.stroke_width(1))
                    }))
                    .map_err(err)?;
            }
            chart
                .draw_series(LineSeries::new(
                    c.points.iter().map(|p| (tx(p.0), p.1)),
                    col.stroke_width(2),
                ))
                .map_err(err)?
                .label(c.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], col.stroke_width(2))
                });
            chart
                .draw_series(
                    c.points
                        .iter()
                        .map(|p| Circle::new((tx(p.0), p.1), 3, col.filled())),
                )
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font(("sans-serif", 11))
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(finish(buf))
}

/// The frame of a small chart in a grid of them (a timeline, a histogram): a caption and
/// narrow label areas.
fn small_multiple<'a, DB: DrawingBackend + 'a>(
    root: &'a DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> std::result::Result<
    ChartContext<
        'a,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    String,
> {
    ChartBuilder::on(root)
        .margin(6)
        .caption(caption, ("sans-serif", 13))
        .x_label_area_size(28)
        .y_label_area_size(36)
        .build_cartesian_2d(x, y)
        .map_err(err)
}

/// A run's timeline: one thin bar per task from its start to its end, tasks top to bottom in
/// start order, on an x axis of `xmax_us` (shared by a group's cells so they compare).
pub fn timeline(caption: &str, spans: &[[u64; 2]], xmax_us: f64, col: RGBColor) -> Chart {
    let lanes = spans.len().max(1);
    let height = (70 + 3 * lanes as u32).clamp(110, 240);
    let xmax = (xmax_us / 1000.0).max(1e-3) * 1.02;
    let min_w = xmax / 400.0;
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH / 2, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = small_multiple(&root, caption, 0f64..xmax, 0f64..lanes as f64)?;
        let ylab = |v: &f64| {
            if (v - v.round()).abs() > 1e-6 {
                String::new()
            } else {
                format!("{}", v.round())
            }
        };
        let xlab = |v: &f64| {
            if v.abs() >= 10.0 || *v == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_label_formatter(&xlab)
            .y_labels(3)
            .y_label_formatter(&ylab)
            .y_desc("tasks")
            .x_labels(5)
            .x_desc("ms since the run's start")
            .label_style(("sans-serif", 10))
            .draw()
            .map_err(err)?;
        let h = if lanes > 60 { 1.0 } else { 0.75 };
        chart
            .draw_series(spans.iter().enumerate().map(|(i, s)| {
                let x0 = s[0] as f64 / 1000.0;
                let x1 = (s[1] as f64 / 1000.0).max(x0 + min_w);
                let y = (lanes - 1 - i) as f64;
                Rectangle::new([(x0, y), (x1, y + h)], col.filled())
            }))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(finish(buf))
}

/// The CSS colour of `c`, e.g. `#0072b2`.
pub fn css(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// A histogram of task latencies (µs) in `bins` equal bins from the smallest to the largest.
pub fn histogram(caption: &str, values_us: &[u64], bins: usize, col: RGBColor) -> Chart {
    let (Some(&lo), Some(&hi)) = (values_us.iter().min(), values_us.iter().max()) else {
        return Err("no task latencies".into());
    };
    let bins = bins.max(1);
    let (lo, hi) = (lo as f64 / 1000.0, hi as f64 / 1000.0);
    let width = ((hi - lo) / bins as f64).max(1e-3);
    let mut counts = vec![0usize; bins];
    for v in values_us {
        let i = ((*v as f64 / 1000.0 - lo) / width) as usize;
        counts[i.min(bins - 1)] += 1;
    }
    let ymax = counts.iter().copied().max().unwrap_or(1).max(1) as f64 * 1.1;
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH / 2, 180)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = small_multiple(&root, caption, lo..(lo + width * bins as f64), 0f64..ymax)?;
        let ylab = |v: &f64| format!("{v:.0}");
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(5)
            .y_labels(3)
            .y_label_formatter(&ylab)
            .y_desc("tasks")
            .x_desc("task latency, ms")
            .label_style(("sans-serif", 10))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(counts.iter().enumerate().map(|(i, &n)| {
                let x0 = lo + width * i as f64;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.92, n as f64)], col.filled())
            }))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(finish(buf))
}

/// One interval of a series chart: `(t_end_s, done_per_s, asked_per_s, p50_ms, p99_ms)`.
pub type SeriesRow = (f64, f64, f64, Option<f64>, Option<f64>);

/// An open-model run over time, in two panels on one time axis: above, completions per second
/// in each interval against the asked rate (dashed); below, the p50 and p99 latency of the
/// tasks that completed in it (from their scheduled times). Points are
/// `(t_end_s, done_per_s, asked_per_s, p50_ms, p99_ms)`.
pub fn series(caption: &str, points: &[SeriesRow]) -> Chart {
    if points.is_empty() {
        return Err("no intervals".into());
    }
    let tmax = points.iter().map(|p| p.0).fold(0.0, f64::max).max(1e-3);
    let rmax = points
        .iter()
        .map(|p| p.1.max(p.2))
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.1;
    let lmax = points
        .iter()
        .filter_map(|p| p.4.or(p.3))
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.1;
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH / 2, 300)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, bottom) = root.split_vertically(150);
        let xlab = |v: &f64| format!("{v:.0}");
        let ylab = |v: &f64| format!("{v:.0}");
        let mut chart = small_multiple(&top, caption, 0f64..tmax, 0f64..rmax)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(5)
            .x_label_formatter(&xlab)
            .y_labels(3)
            .y_label_formatter(&ylab)
            .y_desc("tasks/s")
            .label_style(("sans-serif", 10))
            .draw()
            .map_err(err)?;
        // Each interval's value is drawn at its middle.
        let mid = |p: &SeriesRow| {
            let first = points[0].0;
            p.0 - first / 2.0
        };
        chart
            .draw_series(DashedLineSeries::new(
                points.iter().map(|p| (mid(p), p.2)),
                4,
                3,
                color(6).stroke_width(1),
            ))
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                points.iter().map(|p| (mid(p), p.1)),
                color(0).stroke_width(2),
            ))
            .map_err(err)?;
        let mut lat = ChartBuilder::on(&bottom)
            .margin(6)
            .x_label_area_size(28)
            .y_label_area_size(36)
            .build_cartesian_2d(0f64..tmax, 0f64..lmax)
            .map_err(err)?;
        lat.configure_mesh()
            .disable_x_mesh()
            .x_labels(5)
            .x_label_formatter(&xlab)
            .y_labels(3)
            .y_label_formatter(&ylab)
            .y_desc("latency, ms")
            .x_desc("seconds since the first release")
            .label_style(("sans-serif", 10))
            .draw()
            .map_err(err)?;
        for (k, col) in [(3usize, color(2)), (4, color(5))] {
            let line: Vec<(f64, f64)> = points
                .iter()
                .filter_map(|p| {
                    let v = if k == 3 { p.3 } else { p.4 };
                    v.map(|v| (mid(p), v))
                })
                .collect();
            lat.draw_series(LineSeries::new(line, col.stroke_width(2)))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(finish(buf))
}
