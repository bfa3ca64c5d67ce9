//! A run's task timeline: what the run kept of its tasks, each span with its lane, task and
//! outcome ([`read`], which the trace file reads too), and its drawing for the HTML report
//! ([`draw`]): lanes down, time across on an axis a workload's cells share, a bar per task,
//! or the share of time busy per pixel column where bars would be thinner than a pixel or
//! lanes are too many for a row each. The SVG is written by hand: plotters puts neither data
//! attributes nor a `<title>` per lane on what it draws, and readers and tests use both.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::charts;
use crate::analysis::results::RunResult;
use crate::measure::lanes::{colour, Lanes};
use crate::measure::phases::PhaseKind;

/// One task of a run's timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSpan {
    /// Start, µs from the run's start.
    pub start: u64,
    /// End, µs from the run's start.
    pub end: u64,
    /// The task's index, where the run recorded it.
    pub task: Option<usize>,
    /// The lane that ran it (worker, thread, process or slot number).
    pub lane: u32,
    /// The bytes it produced, where recorded.
    pub bytes: Option<u64>,
    /// Its failure's kind; none when it succeeded.
    pub error: Option<String>,
    /// When it was due (an open run) or enqueued (a closed queue run), µs from the run's start.
    pub sched: Option<u64>,
    /// A run over several hosts: its host's position in the run's parts.
    pub host: Option<u32>,
    /// The phases seen of it, in time order: kind, start and end in µs from the run's start.
    pub phases: Vec<(PhaseKind, u64, u64)>,
}

impl TaskSpan {
    /// Where the task's drawing ends, µs: its end, or a phase's after it (a process's exit, a
    /// job's acknowledgement).
    pub fn last_us(&self) -> u64 {
        self.phases.iter().map(|p| p.2).fold(self.end, u64::max)
    }
}

/// What one run kept of its tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct RunTimeline {
    /// What a lane is.
    pub lanes: Lanes,
    /// Whether the run recorded its lanes; false for a file from before lanes were recorded
    /// and for a run merged over hosts, whose spans are coloured into slots here.
    pub recorded: bool,
    /// Tasks the run had (the timeline keeps at most `--trace-tasks` of them, evenly sampled).
    pub tasks: usize,
    /// The most a task's phases keep, where the run recorded phases, and how many it did not
    /// keep past that.
    pub phases_per_task: Option<(usize, u64)>,
    /// The kept tasks, in start order.
    pub spans: Vec<TaskSpan>,
    /// A run over several hosts: each host's agent, by its position in the run's parts.
    pub hosts: Vec<String>,
    /// Once [`hosts_apart`] put each host's lanes apart: the lanes a host takes (host h's
    /// lane l is lane h·L + l).
    pub host_stride: Option<u32>,
}

impl RunTimeline {
    /// Host `h` (a position in the run's parts) as its agent is named; its position where
    /// the run does not say.
    pub fn host_name(&self, h: u32) -> String {
        self.hosts
            .get(h as usize)
            .cloned()
            .unwrap_or_else(|| h.to_string())
    }

    /// The host of `lane` and its lane there, once hosts are apart.
    fn host_of(&self, lane: u32) -> Option<(u32, u32)> {
        self.host_stride.map(|l| (lane / l.max(1), lane % l.max(1)))
    }

    /// What lane `lane` is called: `worker 3`, or `host NAME worker 3` once hosts are apart.
    pub fn lane_name(&self, lane: u32) -> String {
        match self.host_of(lane) {
            Some((h, l)) => format!("host {} {} {l}", self.host_name(h), self.lanes.word()),
            None => format!("{} {lane}", self.lanes.word()),
        }
    }

    /// What the neighbouring lanes `first` to `last` are called together.
    fn band_name(&self, first: u32, last: u32) -> String {
        match (self.host_of(first), self.host_of(last)) {
            (Some((h, a)), Some((k, z))) if h == k => {
                format!("host {} {} {a}–{z}", self.host_name(h), self.lanes.word())
            }
            (Some(_), Some(_)) => format!("{} – {}", self.lane_name(first), self.lane_name(last)),
            _ => format!("{} {first}–{last}", self.lanes.word()),
        }
    }
}

/// The run's timeline with the lane of every span: as recorded in `timeline_tasks`, or, for
/// a run without them, coloured into slots that never overlap. None without `timeline_us`.
pub fn read(run: &RunResult) -> Option<RunTimeline> {
    let timeline = run.timeline_us.as_deref()?;
    let hosts: Vec<String> = run
        .hub
        .as_ref()
        .map(|h| h.parts.iter().map(|p| p.host.clone()).collect())
        .unwrap_or_default();
    Some(match &run.timeline_tasks {
        Some(t) if t.index.len() == timeline.len() && t.worker.len() == timeline.len() => {
            let mut spans: Vec<TaskSpan> = timeline
                .iter()
                .enumerate()
                .map(|(i, &[start, end])| TaskSpan {
                    start,
                    end,
                    task: Some(t.index[i]),
                    lane: t.worker[i],
                    bytes: t.bytes.get(i).copied(),
                    error: t.error.get(i).cloned().flatten(),
                    sched: t.sched_us.get(i).copied(),
                    host: t.host.get(i).copied(),
                    phases: Vec::new(),
                })
                .collect();
            if let Some(p) = &t.phases {
                for ((&span, &kind), &[a, z]) in p.span.iter().zip(&p.kind).zip(&p.us) {
                    if let Some(s) = spans.get_mut(span as usize) {
                        s.phases.push((kind, a, z.max(a)));
                    }
                }
            }
            RunTimeline {
                lanes: t.lanes,
                recorded: true,
                tasks: t.tasks.max(timeline.len()),
                phases_per_task: t.phases.as_ref().map(|p| (p.per_task, p.dropped)),
                spans,
                hosts,
                host_stride: None,
            }
        }
        _ => {
            let lanes = colour(timeline.iter().map(|s| (s[0], s[1])));
            RunTimeline {
                lanes: Lanes::Slot,
                recorded: false,
                tasks: run.key.tasks.max(timeline.len()),
                phases_per_task: None,
                spans: timeline
                    .iter()
                    .zip(lanes)
                    .map(|(&[start, end], lane)| TaskSpan {
                        start,
                        end,
                        task: None,
                        lane,
                        bytes: None,
                        error: None,
                        sched: None,
                        host: None,
                        phases: Vec::new(),
                    })
                    .collect(),
                hosts,
                host_stride: None,
            }
        }
    })
}

/// A run over several hosts with each host's lanes apart: host `h`'s lane `l` becomes lane
/// `h·L + l`, L one more than the highest lane of any host, so no two hosts share a row; each
/// row is then named by its host's agent ([`RunTimeline::lane_name`]).
pub fn hosts_apart(t: &RunTimeline) -> RunTimeline {
    let mut t = t.clone();
    if t.spans.iter().all(|s| s.host.is_none()) {
        return t;
    }
    let stride = t
        .spans
        .iter()
        .map(|s| s.lane)
        .max()
        .unwrap_or(0)
        .saturating_add(1);
    for s in &mut t.spans {
        let h = s.host.unwrap_or(0);
        s.lane = h.saturating_mul(stride).saturating_add(s.lane);
    }
    t.host_stride = Some(stride);
    t
}

/// The most rows a timeline draws: past it, neighbouring lanes are grouped into bands.
pub const MAX_ROWS: usize = 64;

/// A time axis several timelines share: its end, its tick step, and the unit its ticks are
/// written in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Axis {
    /// The axis's end, µs: a whole number of steps.
    pub end_us: u64,
    /// The distance between ticks, µs.
    pub step_us: u64,
    /// `ms` or `s`.
    pub unit: &'static str,
}

impl Axis {
    /// An axis from 0 to at least `last_us` in about six round steps (1, 2 or 5 × 10^k µs),
    /// written in seconds from 2 s on and in milliseconds below.
    pub fn to(last_us: u64) -> Axis {
        let raw = (last_us.max(1) as f64 / 6.0).max(1.0);
        let mut mag = 1u64;
        while (mag as f64) * 10.0 <= raw {
            mag *= 10;
        }
        let step_us = [1, 2, 5, 10]
            .iter()
            .map(|m| m * mag)
            .find(|&s| s as f64 >= raw)
            .unwrap_or(10 * mag);
        let end_us = last_us.max(1).div_ceil(step_us) * step_us;
        let unit = if end_us >= 2_000_000 { "s" } else { "ms" };
        Axis {
            end_us,
            step_us,
            unit,
        }
    }

    fn per_unit(&self) -> f64 {
        if self.unit == "s" {
            1e6
        } else {
            1e3
        }
    }

    /// A tick's label in the axis's unit, with as many decimals as the step needs.
    pub fn label(&self, us: u64) -> String {
        let step = self.step_us as f64 / self.per_unit();
        let mut decimals = 0usize;
        while decimals < 6 && ((step * 10f64.powi(decimals as i32)).fract()).abs() > 1e-6 {
            decimals += 1;
        }
        format!("{:.*}", decimals, us as f64 / self.per_unit())
    }
}

/// A drawn timeline: the SVG and the sentence that says what it holds.
#[derive(Debug, Clone)]
pub struct Drawn {
    /// The SVG element.
    pub svg: String,
    /// What the timeline holds, as plain text ("2,000 of 10,000 tasks, sampled evenly · …").
    pub caption: String,
    /// Whether it shows the share of time busy instead of bars.
    pub occupancy: bool,
    /// The phases its bars are coloured by, in the legend's order.
    pub phases: Vec<PhaseKind>,
}

/// The colour a phase is drawn in (none of them the task's blue or the failure's vermillion).
pub fn phase_colour(kind: PhaseKind) -> charts::Rgb {
    use plotters::style::RGBColor;
    match kind {
        PhaseKind::Connect => RGBColor(230, 159, 0),
        PhaseKind::Tls => RGBColor(204, 121, 167),
        PhaseKind::Send => RGBColor(240, 228, 66),
        PhaseKind::Wait => RGBColor(86, 180, 233),
        PhaseKind::Read => RGBColor(0, 158, 115),
        PhaseKind::LockWait => RGBColor(150, 150, 150),
        PhaseKind::LockHeld => RGBColor(148, 103, 189),
        PhaseKind::ProcessStart => RGBColor(140, 86, 75),
        PhaseKind::ProcessExit => RGBColor(196, 156, 148),
        PhaseKind::Queued => RGBColor(188, 189, 34),
        PhaseKind::Ack => RGBColor(23, 190, 207),
    }
}

/// What a phase is called in the legend.
pub fn phase_label(kind: PhaseKind) -> &'static str {
    match kind {
        PhaseKind::Connect => "connect",
        PhaseKind::Tls => "TLS handshake",
        PhaseKind::Send => "request sent",
        PhaseKind::Wait => "waiting for the first byte",
        PhaseKind::Read => "body read",
        PhaseKind::LockWait => "waiting for the lock",
        PhaseKind::LockHeld => "holding the lock",
        PhaseKind::ProcessStart => "process start",
        PhaseKind::ProcessExit => "process exit (until reaped)",
        PhaseKind::Queued => "waiting in the queue",
        PhaseKind::Ack => "acknowledgement",
    }
}

/// The width of every timeline, in SVG units (pixels at the report's width).
const WIDTH: f64 = 760.0;
/// The height of the rows together, at most.
const ROWS_HEIGHT: usize = 256;
/// The height of the axis under the rows.
const AXIS_HEIGHT: f64 = 34.0;
/// Shades of occupancy: a column's share of time busy is drawn as one of these opacities,
/// from 0.3 (any work at all: a band of 150 threads busy 1% of a column stays visible) to 1.
const SHADES: f64 = 8.0;

/// `12345` as `12,345`.
fn thousands(n: usize) -> String {
    crate::base::units::thousands(n as u64)
}

/// The plural of a lane's word.
fn plural(lanes: Lanes, n: usize) -> String {
    let word = lanes.word();
    match (n, word) {
        (1, w) => w.to_string(),
        (_, "process") => "processes".to_string(),
        (_, w) => format!("{w}s"),
    }
}

/// One row of the drawing: a lane, or a band of neighbouring lanes.
struct Row {
    /// The lanes it holds, in order.
    first: u32,
    last: u32,
    count: usize,
    /// Indexes into the spans.
    spans: Vec<usize>,
}

/// The lanes a timeline shows: those its spans ran on, and, for a model with a fixed number
/// of workers or slots, the idle ones among the first `min(workers, tasks)` too.
fn lane_ids(t: &RunTimeline, workers: Option<usize>) -> Vec<u32> {
    let mut ids: Vec<u32> = t.spans.iter().map(|s| s.lane).collect();
    if t.recorded && matches!(t.lanes, Lanes::Worker | Lanes::Slot) {
        if let Some(w) = workers {
            let n = w.min(t.tasks).min(1 << 20);
            if ids.iter().all(|&l| (l as usize) < n) {
                ids.extend(0..n as u32);
            }
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Draws a run's timeline on `axis`. `workers` is the model's worker count, where it has one.
pub fn draw(t: &RunTimeline, workers: Option<usize>, axis: &Axis) -> Drawn {
    let ids = lane_ids(t, workers);
    let lanes = ids.len();
    let nrows = lanes.clamp(1, MAX_ROWS);
    let banded = lanes > MAX_ROWS;
    // Lane i of L (in order) is on row ⌊i·R/L⌋ of R: bands of neighbouring lanes.
    let row_of: BTreeMap<u32, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, &l)| (l, (i * nrows / lanes.max(1)).min(nrows - 1)))
        .collect();
    let mut rows: Vec<Row> = (0..nrows)
        .map(|_| Row {
            first: u32::MAX,
            last: 0,
            count: 0,
            spans: Vec::new(),
        })
        .collect();
    for (&l, &r) in &row_of {
        let row = &mut rows[r];
        row.first = row.first.min(l);
        row.last = row.last.max(l);
        row.count += 1;
    }
    for row in rows.iter_mut().filter(|r| r.count == 0) {
        (row.first, row.count) = (0, 1);
    }
    for (i, s) in t.spans.iter().enumerate() {
        if let Some(&r) = row_of.get(&s.lane) {
            rows[r].spans.push(i);
        }
    }

    let label = |r: &Row| {
        if r.count == 1 {
            t.lane_name(r.first)
        } else {
            t.band_name(r.first, r.last)
        }
    };
    let label_chars = rows
        .iter()
        .map(|r| label(r).chars().count())
        .max()
        .unwrap_or(8);
    let x0 = (label_chars as f64 * 5.6 + 10.0).clamp(48.0, 150.0);
    let x1 = WIDTH - 14.0;
    let pw = x1 - x0;
    let end = axis.end_us.max(1) as f64;
    let scale = pw / end;
    let row_h = (ROWS_HEIGHT / nrows).clamp(3, 18) as f64;
    let top = 4.0;
    let rows_h = row_h * nrows as f64;
    let height = top + rows_h + AXIS_HEIGHT;

    // Bars thinner than a pixel say nothing of their length: the median decides.
    let mut widths: Vec<f64> = t
        .spans
        .iter()
        .map(|s| s.end.saturating_sub(s.start) as f64 * scale)
        .collect();
    widths.sort_by(f64::total_cmp);
    let median = widths.get(widths.len() / 2).copied().unwrap_or(0.0);
    let occupancy = banded || median < 1.0;

    let failed = t.spans.iter().filter(|s| s.error.is_some()).count();
    let mut drawn_phases: Vec<PhaseKind> = Vec::new();
    let run_end = t.spans.iter().map(|s| s.end).max().unwrap_or(0).max(1) as f64;
    let ok = charts::css(charts::color(0));
    let bad = charts::css(charts::color(5));

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg class=\"timeline\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"10\" data-lane-kind=\"{kind}\" data-lanes-recorded=\"{rec}\" data-lanes=\"{lanes}\" data-rows=\"{nrows}\" data-tasks=\"{kept}\" data-of=\"{of}\" data-failed=\"{failed}\" data-mode=\"{mode}\" data-axis-end-us=\"{end_us}\">",
        w = WIDTH,
        h = height,
        kind = t.lanes.word(),
        rec = t.recorded,
        kept = t.spans.len(),
        of = t.tasks,
        mode = if occupancy { "occupancy" } else { "bars" },
        end_us = axis.end_us,
    );
    let _ = writeln!(
        svg,
        "<rect x=\"{x0:.1}\" y=\"{top}\" width=\"{pw:.1}\" height=\"{rows_h}\" fill=\"#f7f7f7\"/>"
    );
    // Stripes on every other row where rows are tall enough to tell apart.
    if row_h >= 6.0 {
        for r in (1..nrows).step_by(2) {
            let _ = writeln!(
                svg,
                "<rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{pw:.1}\" height=\"{row_h}\" fill=\"#ececec\"/>",
                top + r as f64 * row_h
            );
        }
    }
    // Ticks: a light line across the rows, a label under them.
    let mut tick = 0u64;
    while tick <= axis.end_us {
        let x = x0 + tick as f64 * scale;
        let _ = writeln!(
            svg,
            "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#d0d0d0\" stroke-width=\"0.6\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#444\">{}</text>",
            top + rows_h + 3.0,
            top + rows_h + 13.0,
            axis.label(tick)
        );
        tick += axis.step_us.max(1);
    }
    let _ = writeln!(
        svg,
        "<text x=\"{x1:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#444\">{} since the run's start</text>",
        top + rows_h + 27.0,
        axis.unit
    );

    let every = (10.0 / row_h).ceil().max(1.0) as usize;
    for (r, row) in rows.iter().enumerate() {
        let y = top + r as f64 * row_h;
        let n = row.spans.len();
        let row_failed = row
            .spans
            .iter()
            .filter(|&&i| t.spans[i].error.is_some())
            .count();
        let busy: u64 = row
            .spans
            .iter()
            .map(|&i| t.spans[i].end.saturating_sub(t.spans[i].start))
            .sum();
        let busy = busy as f64 / (run_end * row.count as f64);
        // An agent's name is outside input: escaped wherever the SVG holds it.
        let name = crate::base::escape::html(&label(row));
        let title = format!(
            "{name}{}: {} task{}{}, busy {:.0}% of the run",
            if row.count > 1 {
                format!(" ({} lanes)", row.count)
            } else {
                String::new()
            },
            thousands(n),
            if n == 1 { "" } else { "s" },
            if row_failed > 0 {
                format!(" ({row_failed} failed)")
            } else {
                String::new()
            },
            busy.min(1.0) * 100.0
        );
        let lane_attr = if row.count == 1 {
            row.first.to_string()
        } else {
            format!("{}-{}", row.first, row.last)
        };
        // A row of one host's lanes says which host.
        let host_attr = match (t.host_of(row.first), t.host_of(row.last)) {
            (Some((h, _)), Some((k, _))) if h == k => {
                format!(
                    " data-host=\"{}\"",
                    crate::base::escape::html(&t.host_name(h))
                )
            }
            _ => String::new(),
        };
        let _ = writeln!(
            svg,
            "<g class=\"lane\" data-lane=\"{lane_attr}\"{host_attr} data-lanes=\"{}\" data-tasks=\"{n}\" data-failed=\"{row_failed}\"><title>{title}</title>",
            row.count
        );
        let _ = writeln!(
            svg,
            "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{pw:.1}\" height=\"{row_h}\" fill=\"#000\" fill-opacity=\"0\"/>"
        );
        if r % every == 0 {
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#333\" font-size=\"{}\">{name}</text>",
                x0 - 4.0,
                y + row_h / 2.0 + 3.5,
                if row_h >= 9.0 { 10 } else { 9 }
            );
        }
        let pad = if row_h >= 6.0 { 1.0 } else { 0.0 };
        if occupancy {
            // The share of each pixel column a row's lanes were busy, and failing.
            let cols = pw.floor().max(1.0) as usize;
            let col_us = end / cols as f64;
            let mut all = vec![0f64; cols];
            let mut fail = vec![0f64; cols];
            for &i in &row.spans {
                let s = &t.spans[i];
                let (a, b) = (s.start as f64 / col_us, s.end as f64 / col_us);
                let mut c = a.floor() as usize;
                while c < cols && (c as f64) < b.max(a + 1e-9) {
                    let over = (b.min(c as f64 + 1.0) - a.max(c as f64)).max(0.0);
                    // A task too short to cover any of its column still ran in it.
                    let over = if b <= a { 1e-3 } else { over };
                    all[c] += over;
                    if s.error.is_some() {
                        fail[c] += over;
                    }
                    c += 1;
                }
            }
            for (layer, colour) in [(&all, &ok), (&fail, &bad)] {
                let shade = |v: f64| {
                    let f = (v / row.count as f64).min(1.0);
                    if f <= 0.0 {
                        0
                    } else {
                        ((f * SHADES).ceil() as usize).max(1)
                    }
                };
                let mut c = 0;
                while c < cols {
                    let level = shade(layer[c]);
                    let mut d = c + 1;
                    while d < cols && shade(layer[d]) == level {
                        d += 1;
                    }
                    if level > 0 {
                        let _ = writeln!(
                            svg,
                            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{}\" height=\"{:.1}\" fill=\"{colour}\" fill-opacity=\"{:.3}\"/>",
                            x0 + c as f64,
                            y + pad,
                            d - c,
                            row_h - 2.0 * pad,
                            0.2 + 0.8 * level as f64 / SHADES
                        );
                    }
                    c = d;
                }
            }
        } else {
            for &i in &row.spans {
                let s = &t.spans[i];
                let x = x0 + s.start as f64 * scale;
                let w = (s.end.saturating_sub(s.start) as f64 * scale).max(1.0);
                // A pixel's gap after each bar wide enough to spare one: back-to-back tasks
                // on one lane stay two bars.
                let w = if w >= 3.0 { w - 1.0 } else { w };
                let failed_attr = if s.error.is_some() {
                    format!(" class=\"failed\" fill=\"{bad}\"")
                } else {
                    format!(" fill=\"{ok}\"")
                };
                let id = s.task.unwrap_or(i);
                let _ = writeln!(
                    svg,
                    "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\"{failed_attr} data-task=\"{id}\"/>",
                    y + pad,
                    row_h - 2.0 * pad
                );
                // The task's phases over its bar, in their colours (a process's start or a job's wait
                // in the queue before it, a process's exit or a job's acknowledgement after it).
                for &(kind, a, z) in &s.phases {
                    let px = x0 + a as f64 * scale;
                    let pw = (z.saturating_sub(a) as f64 * scale).max(0.5);
                    let _ = writeln!(
                        svg,
                        "<rect class=\"phase\" data-phase=\"{}\" data-phase-of=\"{id}\" x=\"{px:.1}\" y=\"{:.1}\" width=\"{pw:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
                        kind.name(),
                        y + pad,
                        row_h - 2.0 * pad,
                        charts::css(phase_colour(kind))
                    );
                    if !drawn_phases.contains(&kind) {
                        drawn_phases.push(kind);
                    }
                }
            }
        }
        svg.push_str("</g>\n");
    }
    svg.push_str("</svg>");

    let mut caption = Vec::new();
    caption.push(if t.spans.len() < t.tasks {
        format!(
            "{} of {} tasks, sampled evenly",
            thousands(t.spans.len()),
            thousands(t.tasks)
        )
    } else {
        format!(
            "{} task{}",
            thousands(t.tasks),
            if t.tasks == 1 { "" } else { "s" }
        )
    });
    if failed > 0 {
        caption.push(format!("{} failed", thousands(failed)));
    }
    caption.push(format!("{} {}", thousands(lanes), plural(t.lanes, lanes)));
    if t.host_stride.is_some() {
        let mut hosts: Vec<u32> = t.spans.iter().filter_map(|s| s.host).collect();
        hosts.sort_unstable();
        hosts.dedup();
        caption.push(format!(
            "over {} host{} ({}), each host's lanes apart",
            hosts.len(),
            if hosts.len() == 1 { "" } else { "s" },
            hosts
                .iter()
                .map(|&h| t.host_name(h))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if banded {
        caption.push(format!(
            "grouped into {nrows} bands of about {} neighbouring {} (shade: the share of the band's time busy, the palest any work at all)",
            lanes.div_ceil(nrows),
            plural(t.lanes, 2)
        ));
    } else if occupancy {
        caption.push("bars would be thinner than a pixel: shade is the share of each lane's time busy, the palest any work at all".into());
    }
    if !t.recorded {
        caption.push("lanes are slots by interval colouring (the run recorded no lanes)".into());
    }
    if let Some((per_task, dropped)) = t.phases_per_task.filter(|_| !drawn_phases.is_empty()) {
        if dropped > 0 {
            caption.push(format!(
                "phases: the first {per_task} of each task ({} more not kept)",
                thousands(dropped as usize)
            ));
        }
    }
    drawn_phases.sort_unstable();
    Drawn {
        svg,
        caption: caption.join(" · "),
        occupancy,
        phases: drawn_phases,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: u64, end: u64, lane: u32, task: usize) -> TaskSpan {
        TaskSpan {
            start,
            end,
            task: Some(task),
            lane,
            bytes: Some(1),
            error: None,
            sched: None,
            host: None,
            phases: Vec::new(),
        }
    }

    #[test]
    fn the_axis_ends_on_a_round_step_in_the_unit_of_its_ticks() {
        let a = Axis::to(1_234);
        assert_eq!((a.step_us, a.end_us, a.unit), (500, 1_500, "ms"));
        assert_eq!(a.label(500), "0.5");
        let a = Axis::to(7_300_000);
        assert_eq!((a.step_us, a.end_us, a.unit), (2_000_000, 8_000_000, "s"));
        assert_eq!(a.label(4_000_000), "4");
        let a = Axis::to(0);
        assert_eq!((a.step_us, a.end_us), (1, 1));
    }

    #[test]
    fn four_workers_are_four_rows_holding_every_task_once() {
        let spans: Vec<TaskSpan> = (0..40)
            .map(|i| {
                span(
                    i as u64 / 4 * 1000,
                    i as u64 / 4 * 1000 + 900,
                    (i % 4) as u32,
                    i,
                )
            })
            .collect();
        let t = RunTimeline {
            lanes: Lanes::Worker,
            recorded: true,
            tasks: 40,
            phases_per_task: None,
            spans,
            hosts: Vec::new(),
            host_stride: None,
        };
        let d = draw(&t, Some(4), &Axis::to(10_000));
        assert!(!d.occupancy);
        assert!(d
            .svg
            .contains("data-lanes=\"4\" data-rows=\"4\" data-tasks=\"40\""));
        assert_eq!(d.svg.matches("class=\"lane\"").count(), 4);
        let mut seen: Vec<usize> = d
            .svg
            .split("data-task=\"")
            .skip(1)
            .map(|s| s.split('"').next().unwrap().parse().unwrap())
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..40).collect::<Vec<_>>());
        assert_eq!(d.caption, "40 tasks · 4 workers");
    }

    #[test]
    fn an_idle_worker_keeps_its_row() {
        let t = RunTimeline {
            lanes: Lanes::Worker,
            recorded: true,
            tasks: 3,
            phases_per_task: None,
            spans: (0..3)
                .map(|i| span(i * 10, i * 10 + 10, 0, i as usize))
                .collect(),
            hosts: Vec::new(),
            host_stride: None,
        };
        let d = draw(&t, Some(2), &Axis::to(30));
        assert!(d.svg.contains("data-lanes=\"2\""));
        assert!(d
            .svg
            .contains("<title>worker 1: 0 tasks, busy 0% of the run</title>"));
    }

    #[test]
    fn ten_thousand_threads_are_banded_and_shaded() {
        let spans: Vec<TaskSpan> = (0..2000)
            .map(|i| span(i as u64 * 5, i as u64 * 5 + 4, (i * 5) as u32, i * 5))
            .collect();
        let t = RunTimeline {
            lanes: Lanes::Thread,
            recorded: true,
            tasks: 10_000,
            phases_per_task: None,
            spans,
            hosts: Vec::new(),
            host_stride: None,
        };
        let d = draw(&t, None, &Axis::to(10_000));
        assert!(d.occupancy);
        assert!(d.svg.contains("data-lanes=\"2000\" data-rows=\"64\""));
        assert_eq!(d.svg.matches("class=\"lane\"").count(), 64);
        let tasks: usize = d
            .svg
            .split("class=\"lane\"")
            .skip(1)
            .map(|s| {
                s.split("data-tasks=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .parse::<usize>()
                    .unwrap()
            })
            .sum();
        assert_eq!(tasks, 2000);
        assert!(
            d.caption.starts_with(
                "2,000 of 10,000 tasks, sampled evenly · 2,000 threads · grouped into 64 bands"
            ),
            "{}",
            d.caption
        );
    }

    #[test]
    fn failed_tasks_are_drawn_apart() {
        let mut spans: Vec<TaskSpan> = (0..4).map(|i| span(0, 1000, i, i as usize)).collect();
        spans[2].error = Some("panic".into());
        let t = RunTimeline {
            lanes: Lanes::Thread,
            recorded: true,
            tasks: 4,
            phases_per_task: None,
            spans,
            hosts: Vec::new(),
            host_stride: None,
        };
        let d = draw(&t, None, &Axis::to(1000));
        assert_eq!(d.svg.matches("class=\"failed\"").count(), 1);
        assert!(d.svg.contains("data-failed=\"1\" data-mode=\"bars\""));
        assert!(d.caption.contains("1 failed"));
    }
}
