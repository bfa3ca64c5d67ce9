//! One self-contained HTML file: per group, the cell table, the advice, and inline SVG charts
//! (speedup with the ideal and CI bands; wall with its CI, CPU user/sys and the ideal; memory;
//! latency, with histograms where tasks wait; one timeline per cell), then the machine, the command, the warnings, the baseline
//! comparison and the raw results embedded as JSON. No scripts, fonts or styles are fetched.

use std::collections::BTreeMap;

use super::charts::{self, Bar, Chart, Curve, HRow};
use super::timeline;
use super::{columns, groups, machine_line, FormatEntry, Group, Report};
use crate::analysis::compare;
use crate::analysis::results::{CellKey, CellResult, RunResult};
use crate::base::units::{fmt_kib, fmt_secs};
use crate::measure::series::SeriesPoint;

pub use crate::base::escape::html as escape;

const CSS: &str = "
:root { color-scheme: light; }
body { font: 15px/1.45 system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; margin: 0 auto;
  max-width: 1120px; padding: 12px 16px 48px; color: #1d1d1f; background: #fff; }
h1 { font-size: 1.6em; margin: .4em 0; } h2 { font-size: 1.25em; margin-top: 2em;
  border-bottom: 2px solid #e5e5e5; padding-bottom: .2em; } h3 { font-size: 1.05em; }
code, pre { font: 13px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { white-space: pre-wrap; word-break: break-all; background: #f6f6f6; padding: 8px; }
.meta dt { font-weight: 600; } .meta dd { margin: 0 0 .4em 0; }
.scroll { overflow-x: auto; } table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; } th { background: #f3f3f3; }
figure { margin: 1em 0; } figcaption { font-size: 13px; color: #555; margin-bottom: 4px; }
svg { max-width: 100%; height: auto; display: block; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(330px, 1fr)); gap: 8px; }
.advice { background: #f2f7fd; border-left: 4px solid #0072b2; padding: 6px 12px; margin: .6em 0; }
.warn { background: #fff7e6; border-left: 4px solid #e69f00; padding: 6px 12px; }
.improved { color: #007a4d; font-weight: 600; } .regressed { color: #c0392b; font-weight: 600; }
nav a { margin-right: 1em; } .err { color: #c0392b; }
.note { font-size: 13px; color: #555; }
.tl-cap { font-size: 13px; margin: .9em 0 2px; }
.sw { display: inline-block; width: 10px; height: 10px; margin: 0 3px 0 10px; }
@media (max-width: 600px) { body { font-size: 14px; padding: 8px; } }
";

fn figure(kind: &str, caption: &str, chart: Chart) -> String {
    figure_with_legend(kind, caption, &[], chart)
}

/// A chart legend's colour swatches, each followed by its name.
fn swatches(legend: &[(&str, charts::Rgb)]) -> String {
    legend
        .iter()
        .map(|(name, c)| {
            format!(
                " <span class=\"sw\" style=\"background:{}\"></span>{}",
                charts::css(*c),
                escape(name)
            )
        })
        .collect()
}

/// A chart in a figure, its caption followed by colour swatches for `legend`.
fn figure_with_legend(
    kind: &str,
    caption: &str,
    legend: &[(&str, charts::Rgb)],
    chart: Chart,
) -> String {
    let body = match chart {
        Ok(svg) => svg,
        Err(e) => format!("<p class=\"err\">chart not drawn: {}</p>", escape(&e)),
    };
    let swatches = swatches(legend);
    format!(
        "<figure class=\"chart\" data-kind=\"{kind}\"><figcaption>{}{swatches}</figcaption>\n{body}</figure>\n",
        escape(caption)
    )
}

/// The colour of each model of a group, in order of first appearance.
fn model_colors(g: &Group) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for c in &g.cells {
        let n = m.len();
        m.entry(c.key.model_label()).or_insert(n);
    }
    m
}

fn speedup_chart(g: &Group, cores: usize) -> Option<String> {
    let cells: Vec<&CellResult> = g
        .cells
        .iter()
        .copied()
        .filter(|c| c.speedup.is_some())
        .collect();
    if cells.is_empty() {
        return None;
    }
    let mut tasks: Vec<usize> = cells.iter().map(|c| c.key.tasks).collect();
    tasks.sort_unstable();
    tasks.dedup();
    // A worker scan (one family at several W, e.g. pool:1,2,4,8) is drawn against W, one
    // curve per family and task count; otherwise several task counts are drawn against N.
    let scan = {
        let mut seen: std::collections::BTreeMap<&str, std::collections::BTreeSet<usize>> =
            Default::default();
        for c in &cells {
            if let Some(w) = c.workers {
                seen.entry(c.traits.family.as_str()).or_default().insert(w);
            }
        }
        seen.values().any(|ws| ws.len() > 1)
    };
    let by_tasks = tasks.len() > 1 && !scan;
    let per_tasks = tasks.len() > 1 && scan;
    let colors = model_colors(g);
    let mut curves: Vec<Curve> = Vec::new();
    let mut xs: Vec<f64> = Vec::new();
    for c in &cells {
        let name = if by_tasks {
            c.key.model_label()
        } else if per_tasks {
            format!("{} ×{}", c.traits.family, c.key.tasks)
        } else {
            c.traits.family.clone()
        };
        let x = if by_tasks {
            c.key.tasks as f64
        } else {
            c.parallelism.min(c.key.tasks).max(1) as f64
        };
        let s = c.speedup.unwrap_or(0.0);
        let (lo, hi) = match (c.wall_ci95_s, c.wall_median_s) {
            (Some([lo, hi]), Some(m)) if lo > 0.0 && hi > 0.0 => (s * m / hi, s * m / lo),
            _ => (s, s),
        };
        xs.push(x);
        let i = if by_tasks {
            colors.get(&c.key.model_label()).copied().unwrap_or(0)
        } else {
            curves
                .iter()
                .position(|k| k.name == name)
                .unwrap_or(curves.len())
        };
        match curves.iter_mut().find(|k| k.name == name) {
            Some(k) => k.points.push((x, s, lo, hi)),
            None => curves.push(Curve {
                name,
                color: charts::color(i),
                points: vec![(x, s, lo, hi)],
            }),
        }
    }
    for k in curves.iter_mut() {
        k.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    // Waiting (a delay, the network) overlaps without cores: its ideal speedup is the
    // concurrency itself, CPU work's is capped by the cores.
    let waits = g.cells.iter().any(|c| c.traits.waits);
    let cap = if waits { f64::INFINITY } else { cores as f64 };
    let ideal: Vec<(f64, f64)> = xs.iter().map(|&x| (x, x.min(cap))).collect();
    let (lo, hi) = (
        xs.first().copied().unwrap_or(1.0),
        xs.last().copied().unwrap_or(1.0),
    );
    let log_x = lo > 0.0 && hi / lo > 20.0;
    let x_desc = if by_tasks {
        "tasks N"
    } else {
        "tasks at once (workers)"
    };
    Some(figure(
        "speedup",
        &format!(
            "Speedup over seq against {x_desc}, per model, with the 95% CI band; dashed: the ideal {}.",
            if waits { "(the concurrency: waiting needs no cores)".to_string() } else { format!("min(parallelism, {cores} cores)") }
        ),
        charts::speedup(&curves, &ideal, log_x, x_desc),
    ))
}

/// Job cells are read as throughput: ` · 123 jobs/s`.
fn throughput(c: &CellResult) -> String {
    match c.wall_median_s {
        Some(w) if w > 0.0 && c.traits.queue => {
            format!(" · {:.0} jobs/s", c.key.tasks as f64 / w)
        }
        _ => String::new(),
    }
}

/// How far a row of a bar chart reaches: its longest bar, whisker or mark.
fn extent(r: &HRow) -> f64 {
    r.bars
        .iter()
        .map(|b| b.to)
        .chain(r.whisker.map(|w| w.1))
        .chain(r.mark.map(|m| m.0))
        .fold(0.0f64, f64::max)
}

/// The rows one bar chart's axis would flatten the others with: the longest rows, at most a
/// third of them, when they reach 5× or more the longest of the rest (which would then be
/// under a fifth of the axis). None when no such gap exists.
fn flattening(rows: &[HRow]) -> Option<(Vec<bool>, f64)> {
    flattening_of(&rows.iter().map(extent).collect::<Vec<_>>())
}

/// [`flattening`] of any lengths drawn on one axis: which would flatten the others (at most
/// a third of them, 5× or more the longest of the rest), and by how much.
fn flattening_of(extents: &[f64]) -> Option<(Vec<bool>, f64)> {
    let mut e = extents.to_vec();
    e.sort_by(|a, b| b.total_cmp(a));
    let best = (1..=e.len() / 3)
        .filter(|&k| e[k] > 0.0)
        .map(|k| (k, e[k - 1] / e[k]))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    if best.1 < 5.0 {
        return None;
    }
    let cut = e[best.0 - 1];
    Some((extents.iter().map(|&x| x >= cut).collect(), best.1))
}

/// Horizontal bars, with the rows that would flatten the rest in a panel of their own below,
/// on their own scale; the second value is what the caption adds to say so. Chosen over a
/// log axis: CPU time is drawn stacked (user, then sys), and stacked lengths do not add on
/// a log axis; a log axis also shrinks a 2× difference to a few pixels within a decade.
fn hbars_panels(
    x_desc: &str,
    fmt: &dyn Fn(f64) -> String,
    rows: Vec<HRow>,
    slots: usize,
) -> (Chart, String) {
    let Some((big, ratio)) = flattening(&rows) else {
        return (charts::hbars(x_desc, fmt, &rows, slots), String::new());
    };
    let (mut large, mut small) = (Vec::new(), Vec::new());
    for (r, b) in rows.into_iter().zip(big) {
        if b {
            large.push(r);
        } else {
            small.push(r);
        }
    }
    let names: Vec<String> = large.iter().map(|r| r.label.clone()).collect();
    let one = names.len() == 1;
    let note = format!(
        " {} {} at least {ratio:.0}× the rest, so {} drawn below in a panel of {} own, on {} own scale.",
        names.join(", "),
        if one { "is" } else { "are" },
        if one { "it is" } else { "they are" },
        if one { "its" } else { "their" },
        if one { "its" } else { "their" },
    );
    let chart = charts::hbars(x_desc, fmt, &small, slots).and_then(|a| {
        charts::hbars(x_desc, fmt, &large, slots).map(|b| {
            format!(
                "{a}\n<p class=\"note\" data-panel=\"own-scale\">On a scale of {}:</p>\n{b}",
                if one { "its own" } else { "their own" }
            )
        })
    });
    (chart, note)
}

fn wall_chart(g: &Group) -> String {
    let rows: Vec<HRow> = g
        .cells
        .iter()
        .map(|c| {
            let wall = c.wall_median_s.unwrap_or(0.0);
            let user = c.user_median_s.unwrap_or(0.0);
            let sys = c.sys_median_s.unwrap_or(0.0);
            HRow {
                label: c.key.label(),
                bars: vec![
                    Bar {
                        from: 0.0,
                        to: wall,
                        color: charts::color(0),
                        slot: 0,
                    },
                    Bar {
                        from: 0.0,
                        to: user,
                        color: charts::color(1),
                        slot: 1,
                    },
                    Bar {
                        from: user,
                        to: user + sys,
                        color: charts::color(5),
                        slot: 1,
                    },
                ],
                whisker: c.wall_ci95_s.map(|[lo, hi]| (lo, hi, 0)),
                mark: c.ideal_s.map(|i| (i, 0)),
                note: Some(
                    match (c.vs_ideal, c.wall_median_s) {
                        (Some(v), Some(w)) => format!("{} · {v:.2}× ideal", fmt_secs(w)),
                        (None, Some(w)) => fmt_secs(w),
                        _ => "no measured run".into(),
                    } + &throughput(c),
                ),
            }
        })
        .collect();
    // The ticks carry their unit (250.0 ms, 1.50 s), as the memory and latency charts' do.
    let (chart, note) = hbars_panels("wall time", &|v| fmt_secs(v), rows, 2);
    figure_with_legend(
        "wall",
        &format!("Wall time per cell (median, whisker: 95% CI; red tick: the ideal), and CPU time below it (user, then sys stacked).{note}"),
        &[
            ("wall", charts::color(0)),
            ("user CPU", charts::color(1)),
            ("sys CPU", charts::color(5)),
        ],
        chart,
    )
}

fn memory_chart(g: &Group) -> String {
    let rows: Vec<HRow> = g
        .cells
        .iter()
        .map(|c| {
            let rss = c.max_rss_kib.unwrap_or(0) as f64;
            let pss = c.tree_pss_kib.unwrap_or(0) as f64;
            HRow {
                label: c.key.label(),
                bars: vec![
                    Bar {
                        from: 0.0,
                        to: rss,
                        color: charts::color(4),
                        slot: 0,
                    },
                    Bar {
                        from: 0.0,
                        to: pss,
                        color: charts::color(2),
                        slot: 1,
                    },
                ],
                note: Some(format!(
                    "{} / {}{}{}",
                    c.max_rss_kib.map(fmt_kib).unwrap_or_else(|| "-".into()),
                    c.tree_pss_kib.map(fmt_kib).unwrap_or_else(|| "-".into()),
                    c.tree_pss_all_started_kib
                        .map(|k| format!(" · {} all started", fmt_kib(k)))
                        .unwrap_or_default(),
                    c.pss_per_task_b
                        .map(|b| format!(" · {} a task", crate::base::units::fmt_bytes_signed(b)))
                        .unwrap_or_default()
                )),
                ..Default::default()
            }
        })
        .collect();
    let (chart, note) = hbars_panels("memory", &|v| fmt_kib(v.max(0.0) as u64), rows, 2);
    figure_with_legend(
        "memory",
        &format!("Peak memory per cell (medians): RSS of the largest single process, and PSS of the whole process tree (shared pages counted once); beside them the tree's PSS when every task had started, and the memory a task adds over the 1-task cell, where measured.{note}"),
        &[
            ("largest process RSS", charts::color(4)),
            ("process tree PSS", charts::color(2)),
        ],
        chart,
    )
}

fn latency_section(
    g: &Group,
    spans: &BTreeMap<&CellKey, &Vec<[u64; 2]>>,
    waits: bool,
) -> Option<String> {
    let cells: Vec<&CellResult> = g
        .cells
        .iter()
        .copied()
        .filter(|c| c.latency_us.is_some())
        .collect();
    if cells.is_empty() {
        return None;
    }
    let rows: Vec<HRow> = cells
        .iter()
        .filter_map(|c| {
            let l = c.latency_us?;
            Some(HRow {
                label: c.key.label(),
                bars: vec![
                    Bar {
                        from: 0.0,
                        to: l.p50 as f64,
                        color: charts::color(0),
                        slot: 0,
                    },
                    Bar {
                        from: 0.0,
                        to: l.p99 as f64,
                        color: charts::color(3),
                        slot: 1,
                    },
                ],
                whisker: Some((l.p50 as f64, l.max as f64, 0)),
                note: Some(format!("max {}", fmt_secs(l.max as f64 / 1e6))),
                ..Default::default()
            })
        })
        .collect();
    let (chart, note) = hbars_panels("task latency", &|v| fmt_secs(v / 1e6), rows, 2);
    let mut out = figure_with_legend(
        "latency",
        &format!("Task latency (start to end of each task) in the median run: p50, p99, and a whisker from p50 to the slowest task.{note}"),
        &[("p50", charts::color(0)), ("p99", charts::color(3))],
        chart,
    );
    out.push_str("<div class=\"scroll\"><table><tr><th>cell</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>\n");
    for c in &cells {
        if let Some(l) = c.latency_us {
            let f = |us: u64| fmt_secs(us as f64 / 1e6);
            out.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                escape(&c.key.label()),
                f(l.p50),
                f(l.p90),
                f(l.p99),
                f(l.p999),
                f(l.max)
            ));
        }
    }
    out.push_str("</table></div>\n");
    // Where tasks wait (I/O, delays), the shape of the distribution matters: a histogram per
    // cell from its first run's timeline.
    if waits {
        let colors = model_colors(g);
        let mut grid = String::new();
        for c in &cells {
            let Some(v) = spans.get(&c.key) else { continue };
            let lat: Vec<u64> = v.iter().map(|s| s[1].saturating_sub(s[0])).collect();
            let i = colors.get(&c.key.model_label()).copied().unwrap_or(0);
            match charts::histogram(&c.key.label(), &lat, 30, charts::color(i)) {
                Ok(svg) => grid.push_str(&format!("<div>{svg}</div>\n")),
                Err(e) => grid.push_str(&format!("<p class=\"err\">{}</p>", escape(&e))),
            }
        }
        if !grid.is_empty() {
            out.push_str(&format!(
                "<p class=\"note\">Distribution of task latency in each cell's first run (from its timeline):</p>\n<div class=\"grid\">{grid}</div>\n"
            ));
        }
    }
    Some(out)
}

/// A traced cell's time axis, and whether it is one of the cells that would have flattened
/// the rest of its workload's timelines (drawn on an axis of their own).
#[derive(Clone, Copy)]
struct TimelineAxis {
    axis: timeline::Axis,
    own: bool,
}

/// One time axis per workload (study and workload spec, with and without `--gil`): the end
/// of the last task any of its traced runs kept. As in the bar charts ([`flattening`]), the
/// runs that would flatten the others (a `thread ×10000` of 8 s beside runs of 100 ms) get
/// an axis of their own, shared among them; the rest share the axis of their longest.
fn timeline_axes<'a>(
    runs: &BTreeMap<&'a CellKey, &RunResult>,
) -> BTreeMap<&'a CellKey, TimelineAxis> {
    let mut ends: BTreeMap<(&str, &str), Vec<(&CellKey, u64)>> = BTreeMap::new();
    for (key, run) in runs {
        // A phase after its task (a process's exit, a job's acknowledgement) may end last.
        let phases = run
            .timeline_tasks
            .iter()
            .filter_map(|t| t.phases.as_ref())
            .flat_map(|p| p.us.iter().map(|u| u[1]));
        let end = run
            .timeline_us
            .iter()
            .flatten()
            .map(|s| s[1])
            .chain(phases)
            .max()
            .unwrap_or(0);
        ends.entry((key.study.as_str(), key.workload.as_str()))
            .or_default()
            .push((key, end));
    }
    let mut out = BTreeMap::new();
    for cells in ends.values() {
        let lengths: Vec<f64> = cells.iter().map(|&(_, e)| e as f64).collect();
        let own = flattening_of(&lengths).map_or_else(|| vec![false; cells.len()], |(b, _)| b);
        for set in [false, true] {
            let end = cells
                .iter()
                .zip(&own)
                .filter(|(_, &o)| o == set)
                .map(|(&(_, e), _)| e)
                .max()
                .unwrap_or(0);
            let axis = timeline::Axis::to(end);
            for (&(key, _), _) in cells.iter().zip(&own).filter(|(_, &o)| o == set) {
                out.insert(key, TimelineAxis { axis, own: set });
            }
        }
    }
    out
}

fn timelines(
    g: &Group,
    runs: &BTreeMap<&CellKey, &RunResult>,
    axes: &BTreeMap<&CellKey, TimelineAxis>,
) -> String {
    let read: Vec<(&CellResult, &RunResult, timeline::RunTimeline)> = g
        .cells
        .iter()
        .filter_map(|c| {
            let run = runs.get(&c.key)?;
            Some((*c, *run, timeline::hosts_apart(&timeline::read(run)?)))
        })
        .collect();
    if read.is_empty() {
        return String::new();
    }
    // One time axis for the workload, with and without the lock: pool, async and fork, or
    // threads with and without --gil, are compared by the length of their rows at a glance;
    // the runs that would flatten the rest on an axis of their own ([`timeline_axes`]).
    let axis_of = |c: &CellResult, t: &timeline::RunTimeline| {
        axes.get(&c.key).copied().unwrap_or_else(|| TimelineAxis {
            axis: timeline::Axis::to(
                t.spans
                    .iter()
                    .map(timeline::TaskSpan::last_us)
                    .max()
                    .unwrap_or(0),
            ),
            own: false,
        })
    };
    let mut shared: Option<timeline::Axis> = None;
    let mut own: Vec<(String, timeline::Axis)> = Vec::new();
    let mut inner = String::new();
    let mut shaded = false;
    let mut phases: Vec<crate::measure::phases::PhaseKind> = Vec::new();
    for (c, run, t) in &read {
        let TimelineAxis { axis, own: apart } = axis_of(c, t);
        if apart {
            own.push((c.key.label(), axis));
        } else {
            shared.get_or_insert(axis);
        }
        let d = timeline::draw(t, run.workers, &axis);
        shaded |= d.occupancy;
        phases.extend(d.phases.iter().copied());
        let label = escape(&c.key.label());
        inner.push_str(&format!(
            "<div class=\"tl\" data-cell=\"{label}\"><p class=\"tl-cap\"><b>{label}</b> · {}</p>\n{}\n</div>\n",
            escape(&d.caption),
            d.svg
        ));
    }
    let mut legend = vec![
        ("task", charts::color(0)),
        ("failed task", charts::color(5)),
    ];
    if shaded {
        legend[0].0 = "task (shade: share of time busy)";
    }
    phases.sort_unstable();
    phases.dedup();
    legend.extend(
        phases
            .iter()
            .map(|&k| (timeline::phase_label(k), timeline::phase_colour(k))),
    );
    let span = |a: &timeline::Axis| format!("0 to {} {}", a.label(a.end_us), a.unit);
    let mut axes_said = match (&shared, own.first()) {
        (Some(a), _) => format!(
            "on one time axis for the workload, with and without --gil ({})",
            span(a)
        ),
        (None, Some((_, a))) => format!(
            "on an axis of their own ({}): they would flatten the workload's shorter runs",
            span(a)
        ),
        (None, None) => String::new(),
    };
    if let (Some(_), Some((_, a))) = (&shared, own.first()) {
        let names: Vec<&str> = own.iter().map(|(n, _)| n.as_str()).collect();
        let one = names.len() == 1;
        axes_said.push_str(&format!(
            "; {} would flatten the rest, so {} drawn on {} own axis ({})",
            names.join(", "),
            if one { "it is" } else { "they are" },
            if one { "its" } else { "their" },
            span(a)
        ));
    }
    format!(
        "<figure class=\"chart\" data-kind=\"timeline\"><figcaption>{}{}</figcaption>\n{inner}</figure>\n",
        escape(&format!(
            "Timeline of each cell's first run: a row per lane (the worker, thread, process or in-flight slot that ran the task), a bar per task from its start to its end, {axes_said}. Gaps in a row are a lane waiting; rows that end early are work that was not shared out evenly."
        )),
        swatches(&legend)
    )
}

/// Open-model cells: throughput against the asked rate and latency over time, one chart per
/// cell from its first run's series.
fn series_charts(g: &Group, series: &BTreeMap<&CellKey, &Vec<SeriesPoint>>) -> String {
    let mut inner = String::new();
    for c in &g.cells {
        let Some(s) = series.get(&c.key) else {
            continue;
        };
        let width = s.first().map_or(1.0, |p| p.t_s).max(1e-3);
        let points: Vec<_> = s
            .iter()
            .map(|p| {
                (
                    p.t_s,
                    p.done as f64 / width,
                    p.rate_asked,
                    p.p50_us.map(|v| v as f64 / 1000.0),
                    p.p99_us.map(|v| v as f64 / 1000.0),
                )
            })
            .collect();
        match charts::series(&c.key.label(), &points) {
            Ok(svg) => inner.push_str(&format!(
                "<div>{svg}</div>
"
            )),
            Err(e) => inner.push_str(&format!("<p class=\"err\">{}</p>", escape(&e))),
        }
    }
    if inner.is_empty() {
        return String::new();
    }
    let legend = [
        ("completed/s", charts::color(0)),
        ("asked/s (dashed)", charts::color(6)),
        ("p50", charts::color(2)),
        ("p99", charts::color(5)),
    ];
    let swatches = swatches(&legend);
    format!(
        "<figure class=\"chart\" data-kind=\"series\"><figcaption>Each cell's first run over time, per interval: tasks completed per second against the asked rate, and the latency (from each task's scheduled time) of the tasks completed in it. A model that falls behind completes below the asked line while its latency climbs.{swatches}</figcaption>\n<div class=\"grid\">{inner}</div></figure>\n"
    )
}

fn cell_table(g: &Group) -> String {
    let (headers, row) = columns(g);
    let mut t = String::from("<div class=\"scroll\"><table><tr>");
    for h in headers {
        t.push_str(&format!("<th>{}</th>", escape(h)));
    }
    t.push_str("</tr>\n");
    for c in &g.cells {
        t.push_str("<tr>");
        for v in row(c) {
            t.push_str(&format!("<td>{}</td>", escape(&v)));
        }
        t.push_str("</tr>\n");
    }
    t.push_str("</table></div>\n");
    t
}

fn comparison_section(c: &compare::Comparison) -> String {
    let mut out = format!(
        "<h2 id=\"baseline\">Against the baseline</h2>\n<p>{}</p>\n",
        escape(&compare::summary_line(c))
    );
    out.push_str("<div class=\"scroll\"><table><tr>");
    for h in compare::HEADERS {
        out.push_str(&format!("<th>{}</th>", escape(h)));
    }
    out.push_str("</tr>\n");
    for row in compare::rows(c) {
        out.push_str("<tr>");
        let verdict = row.last().cloned().unwrap_or_default();
        for (i, v) in row.iter().enumerate() {
            if i + 1 == row.len() && (verdict == "improved" || verdict == "regressed") {
                out.push_str(&format!("<td class=\"{verdict}\">{}</td>", escape(v)));
            } else {
                out.push_str(&format!("<td>{}</td>", escape(v)));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div>\n");
    for w in &c.warnings {
        out.push_str(&format!("<p class=\"warn\">{}</p>\n", escape(w)));
    }
    out
}

/// The raw data as JSON safe inside a `<script>` element (no `<` at all).
fn embedded_json(r: &Report) -> String {
    let value = serde_json::json!({
        "meta": r.meta,
        "runs": r.runs,
        "cells": r.analysis.cells,
        "warnings": r.analysis.warnings,
        "comparison": r.comparison,
        "advice": r.advice,
    });
    let json = serde_json::to_string(&value).unwrap_or_else(|_| "null".into());
    crate::os::terminal::escape_json_controls(&json).replace('<', "\\u003c")
}

/// Renders the whole report as one HTML document.
pub fn render(r: &Report) -> String {
    let meta = super::masked_meta(r.meta);
    let r = &Report { meta: &meta, ..*r };
    let cores = r.analysis.cores;
    let mut spans: BTreeMap<&CellKey, &Vec<[u64; 2]>> = BTreeMap::new();
    let mut traced: BTreeMap<&CellKey, &RunResult> = BTreeMap::new();
    let mut series: BTreeMap<&CellKey, &Vec<SeriesPoint>> = BTreeMap::new();
    for run in r.runs {
        if let Some(t) = &run.timeline_us {
            spans.entry(&run.key).or_insert(t);
            traced.entry(&run.key).or_insert(run);
        }
        if let Some(o) = run.open.as_ref().filter(|o| !o.series.is_empty()) {
            series.entry(&run.key).or_insert(&o.series);
        }
    }
    let axes = timeline_axes(&traced);
    let gs = groups(r.analysis);
    let mut h = String::from("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>concur report</title>\n");
    h.push_str(&format!(
        "<style>{CSS}</style>\n</head>\n<body>\n<h1>concur report</h1>\n"
    ));
    h.push_str("<dl class=\"meta\">\n");
    {
        let m = r.meta;
        h.push_str(&format!(
            "<dt>machine</dt><dd>{}</dd>\n<dt>started</dt><dd>{} (concur {})</dd>\n",
            escape(&machine_line(&m.machine)),
            escape(&m.started),
            escape(&m.concur)
        ));
        if !m.command.is_empty() {
            h.push_str(&format!(
                "<dt>command</dt><dd><code>{}</code></dd>\n",
                escape(&m.command.join(" "))
            ));
        }
        for n in &m.notes {
            h.push_str(&format!("<dt>note</dt><dd>{}</dd>\n", escape(n)));
        }
    }
    h.push_str(&format!(
        "<dt>contents</dt><dd>{} cells from {} runs in {} group{}</dd>\n</dl>\n",
        r.analysis.cells.len(),
        r.runs.len(),
        gs.len(),
        if gs.len() == 1 { "" } else { "s" }
    ));
    h.push_str("<nav>");
    if r.comparison.is_some() {
        h.push_str("<a href=\"#baseline\">baseline</a> ");
    }
    for (i, g) in gs.iter().enumerate() {
        h.push_str(&format!("<a href=\"#g{i}\">{}</a> ", escape(&g.title)));
    }
    h.push_str("<a href=\"#data\">raw data</a></nav>\n");
    if !r.analysis.warnings.is_empty() {
        let n = r.analysis.warnings.len();
        h.push_str(&format!(
            "<h2>Warnings</h2>\n<details{}><summary>{n} warning{}</summary>\n",
            if n <= 4 { " open" } else { "" },
            if n == 1 { "" } else { "s" }
        ));
        for w in &r.analysis.warnings {
            h.push_str(&format!(
                "<p class=\"warn\">{}</p>\n",
                escape(&w.to_string())
            ));
        }
        h.push_str("</details>\n");
    }
    if !r.advice.is_empty() {
        h.push_str("<h2>Advice</h2>\n");
        for a in r.advice {
            h.push_str(&format!(
                "<div class=\"advice\"><b>{}</b><br>{}",
                escape(&a.group),
                escape(&a.text)
            ));
            if let Some(l) = crate::analysis::advice::amdahl_line(&a.amdahl) {
                h.push_str(&format!("<br>{}", escape(&l)));
            }
            h.push_str("</div>\n");
        }
    }
    if let Some(c) = r.comparison {
        h.push_str(&comparison_section(c));
    }
    for (i, g) in gs.iter().enumerate() {
        h.push_str(&format!(
            "<section class=\"group\" id=\"g{i}\">\n<h2>{}</h2>\n",
            escape(&g.title)
        ));
        h.push_str(&cell_table(g));
        for f in super::footnotes(g) {
            h.push_str(&format!("<p class=\"warn\">{}</p>\n", escape(&f)));
        }
        if let Some(s) = speedup_chart(g, cores) {
            h.push_str(&s);
        }
        h.push_str(&wall_chart(g));
        h.push_str(&memory_chart(g));
        let waits = g.cells.iter().any(|c| c.traits.waits);
        if let Some(l) = latency_section(g, &spans, waits) {
            h.push_str(&l);
        }
        h.push_str(&series_charts(g, &series));
        h.push_str(&timelines(g, &traced, &axes));
        h.push_str("</section>\n");
    }
    h.push_str("<h2 id=\"data\">Raw data</h2>\n<p>The results (meta line, every run, the cells, the comparison and the advice) are embedded below as JSON in the element <code>#concur-data</code>; copy them out of the page source to re-use them.</p>\n");
    h.push_str(&format!(
        "<script type=\"application/json\" id=\"concur-data\">{}</script>\n",
        embedded_json(r)
    ));
    h.push_str("</body>\n</html>\n");
    h
}

/// The `html` format: one self-contained file with charts.
pub(super) const FORMAT: FormatEntry = FormatEntry {
    name: "html",
    help: "one self-contained HTML file with charts (a file, not stdout)",
    stdout: false,
    exporter: &HtmlExporter,
};

struct HtmlExporter;

impl super::Exporter for HtmlExporter {
    fn render(&self, r: &Report) -> String {
        render(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, to: f64) -> HRow {
        HRow {
            label: label.into(),
            bars: vec![Bar {
                from: 0.0,
                to,
                color: charts::color(0),
                slot: 0,
            }],
            ..Default::default()
        }
    }

    /// Issue 46: the wall chart's axis is named for what it shows, in the unit its ticks
    /// carry (it said "seconds" over "50.0 ms" ticks), and its last tick's label is drawn
    /// whole inside the picture (it was clipped to "250.0 r").
    #[test]
    fn the_wall_axis_says_what_its_ticks_say_and_every_label_fits() {
        let rows = vec![row("seq ×10", 0.25), row("thread ×10", 0.03)];
        let (chart, _) = hbars_panels("wall time", &|v| fmt_secs(v), rows, 1);
        let svg = chart.unwrap();
        let width: f64 = 760.0;
        let mut labels = Vec::new();
        for text in svg.split("<text").skip(1) {
            let (attrs, rest) = text.split_once('>').unwrap();
            let label = rest.split("</text>").next().unwrap().trim();
            let x: f64 = attrs
                .split("x=\"")
                .nth(1)
                .and_then(|v| v.split('"').next())
                .and_then(|v| v.parse().ok())
                .unwrap();
            labels.push((label.to_string(), x));
        }
        assert!(labels.iter().any(|(l, _)| l == "wall time"), "{labels:?}");
        assert!(!labels.iter().any(|(l, _)| l == "seconds"), "{labels:?}");
        let mut ticks = 0;
        for (label, x) in labels.iter().filter(|(l, _)| l.ends_with(" ms")) {
            ticks += 1;
            // 12 px sans-serif: at most 7 px a character; the label is centred on x.
            let half = 3.5 * label.chars().count() as f64;
            assert!(x + half <= width, "{label:?} at x={x} runs past {width}");
        }
        assert!(ticks >= 3, "{labels:?}");
    }

    /// A run merged over two hosts draws each host's workers on rows of their own, each
    /// named by its host's agent, and its caption names the hosts.
    #[test]
    fn a_run_over_two_hosts_labels_each_lane_with_its_agent() {
        use crate::analysis::results::{Meta, RunStatus};
        use crate::hub::merge::{merge, two_host_template, PartOutcome};
        use crate::measure::lanes::{Lanes, TimelineTasks};
        // Each host's share of 4 tasks on its 2 workers, 10 ms each.
        let share = || {
            let mut r = two_host_template(RunStatus::Ok, None);
            r.tasks_ok = 4;
            r.timeline_us = Some(vec![
                [0, 10_000],
                [0, 10_000],
                [10_000, 20_000],
                [10_000, 20_000],
            ]);
            r.timeline_tasks = Some(Box::new(TimelineTasks {
                tasks: 4,
                kept: 4,
                cap: Some(10_000),
                lanes: Lanes::Worker,
                index: (0..4).collect(),
                worker: vec![0, 1, 0, 1],
                bytes: vec![1; 4],
                ..Default::default()
            }));
            r
        };
        let part = |host: &str, i: usize| PartOutcome {
            host: host.into(),
            share: i,
            tasks: 4,
            run: Some(share()),
            lost: None,
            latency: None,
            queue_wait: None,
            clock: Default::default(),
            first_task_ns: None,
        };
        let run = merge(
            two_host_template(RunStatus::Ok, None),
            vec![part("alpha", 0), part("b<eta>", 1)],
            0.0,
        );
        let runs = vec![run];
        let machine = crate::runner::machine::machine();
        let analysis = crate::analysis::analyze(&runs, &machine);
        let meta = Meta {
            schema: 1,
            concur: "0".into(),
            started: "2026-01-01T00:00:00Z".into(),
            machine,
            command: Vec::new(),
            allocator: None,
            notes: Vec::new(),
            hosts: Vec::new(),
        };
        let html = render(&Report {
            analysis: &analysis,
            meta: &meta,
            runs: &runs,
            comparison: None,
            advice: &[],
        });
        let at = html.find("<svg class=\"timeline\"").expect("a timeline");
        let svg = &html[at..at + html[at..].find("</svg>").unwrap()];
        let titles: Vec<&str> = svg
            .split("<title>")
            .skip(1)
            .map(|t| t.split(':').next().unwrap())
            .collect();
        assert_eq!(
            titles,
            [
                "host alpha worker 0",
                "host alpha worker 1",
                "host b&lt;eta&gt; worker 0",
                "host b&lt;eta&gt; worker 1"
            ],
            "{svg}"
        );
        assert!(svg.contains(">host alpha worker 1</text>"), "{svg}");
        assert_eq!(svg.matches(" data-host=\"alpha\"").count(), 2, "{svg}");
        assert_eq!(
            svg.matches(" data-host=\"b&lt;eta&gt;\"").count(),
            2,
            "{svg}"
        );
        assert!(!svg.contains("b<eta>"), "{svg}");
        assert!(
            html.contains("8 tasks · 4 workers · over 2 hosts (alpha, b&lt;eta&gt;), each host&#39;s lanes apart"),
            "{html}"
        );
    }

    #[test]
    fn one_cell_far_past_the_rest_gets_a_panel_of_its_own() {
        // The mailer's shape: ten cells near a second, thread ×10000 at forty.
        let mut rows: Vec<HRow> = (0..10)
            .map(|i| row(&format!("m{i}"), 1.0 + 0.1 * i as f64))
            .collect();
        rows.insert(3, row("thread ×10000", 40.0));
        let (big, ratio) = flattening(&rows).expect("split");
        assert_eq!(big.iter().filter(|b| **b).count(), 1);
        assert!(big[3] && (ratio - 40.0 / 1.9).abs() < 1e-9);
        let (chart, note) = hbars_panels("wall time", &|v| fmt_secs(v), rows, 1);
        let svg = chart.unwrap();
        assert_eq!(svg.matches("<svg").count(), 2);
        assert!(
            note.contains("thread ×10000 is at least 21× the rest"),
            "{note}"
        );
        // Cells within 5× of each other share one axis.
        let rows: Vec<HRow> = (1..6).map(|i| row(&format!("m{i}"), i as f64)).collect();
        assert!(flattening(&rows).is_none());
    }
}
