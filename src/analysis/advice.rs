//! Advice: from a group's cells, classify the workload (CPU-bound, mostly waiting, on a known
//! delay or otherwise, or mixed), say which model won, by how much and why, in plain
//! sentences, and fit Amdahl's law to the speedup curve where there are enough points.

use std::collections::BTreeMap;

use super::{groups, Group};
use crate::analysis::results::{CellResult, Nature};
use crate::analysis::{Analysis, TOO_SHORT_S};
use crate::base::units::{fmt_kib, fmt_secs};

/// Effective cores of one task at a time above which a workload is CPU-bound.
pub const CPU_BOUND: f64 = 0.7;
/// Effective cores of one task at a time below which a workload mostly waits.
pub const WAIT_BOUND: f64 = 0.3;

/// What bounds a workload, as measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Keeps a core busy: only more cores make it faster.
    Cpu,
    /// Mostly waits, on anything but a declared delay (blocking I/O, the network, a timer or
    /// another process: `waits_on` says which, where the nature tells): more tasks in flight
    /// make it faster.
    Io,
    /// Mostly waits on a fixed delay (sleep, a remote server).
    Delay,
    /// Neither clearly.
    Mixed,
    /// No run of the group succeeded: nothing was measured.
    Failed,
}

/// Amdahl's law fitted to one model's speedups: `S(p) = 1 / (s + (1 - s) / p)`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AmdahlFit {
    /// The model.
    pub model: String,
    /// The fitted serial fraction `s`, 0..1.
    pub serial_fraction: f64,
    /// How many cells the fit used.
    pub points: usize,
}

/// The advice for one group of cells.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Advice {
    /// The group's title (as in the tables).
    pub group: String,
    /// What bounds the workload.
    pub class: Class,
    /// The winning model at the largest task count, if any cell was measured.
    pub winner: Option<String>,
    /// Two or three plain sentences.
    pub text: String,
    /// Amdahl fits, for CPU-bound groups with at least 3 points per model.
    pub amdahl: Vec<AmdahlFit>,
}

/// Fits the serial fraction by least squares on `1/S - 1/p = s (1 - 1/p)`; `None` with fewer
/// than 3 points or none with p > 1.
pub fn amdahl_fit(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 3 {
        return None;
    }
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for &(p, s) in points {
        if p <= 0.0 || s <= 0.0 {
            continue;
        }
        let x = 1.0 - 1.0 / p;
        let y = 1.0 / s - 1.0 / p;
        sxy += x * y;
        sxx += x * x;
    }
    (sxx > 0.0).then(|| (sxy / sxx).clamp(0.0, 1.0))
}

/// Classifies a workload from its cells (every cell of that workload, both lock settings):
/// the seq cells' effective cores, lock-free ones first, tell what one task needs. Between the
/// thresholds, the workload's declared nature decides (a busy machine lowers the measure), and
/// so it does where every cell's runs are too short for their CPU time to mean anything
/// (below [`TOO_SHORT_S`], the process's start-up alone can read as 5 cores or as 0.2). Work
/// declared CPU-only stays CPU-bound however low it reads: it can only have waited for a core.
fn classify(cells: &[&CellResult], nature: Nature, cores: usize) -> (Class, Option<f64>) {
    let cells: Vec<&CellResult> = cells
        .iter()
        .copied()
        .filter(|c| c.wall_median_s.is_some_and(|w| w >= TOO_SHORT_S))
        .collect();
    let seq = |gil: bool| {
        let v: Vec<f64> = cells
            .iter()
            .filter(|c| c.traits.baseline && c.key.gil == gil)
            .filter_map(|c| c.effective_cores)
            .collect();
        crate::base::stats::median(&v)
    };
    let e = seq(false).or_else(|| seq(true)).or_else(|| {
        let per_slot: Vec<f64> = cells
            .iter()
            .filter_map(|c| {
                let p = c.parallelism.min(c.key.tasks).min(cores).max(1) as f64;
                c.effective_cores.map(|e| e / p)
            })
            .collect();
        crate::base::stats::median(&per_slot)
    });
    let declared = match nature {
        Nature::Cpu => Some(Class::Cpu),
        Nature::Delay(_) => Some(Class::Delay),
        Nature::BlockingIo => Some(Class::Io),
        Nature::Network | Nature::Measured => None,
    };
    let class = match e {
        Some(e) if e >= CPU_BOUND => Class::Cpu,
        // Work declared CPU-only cannot wait: kept below a core, it waited for one (another
        // process had it), which says the machine was busy, not that the work waits.
        Some(_) if nature == Nature::Cpu => Class::Cpu,
        Some(e) if e <= WAIT_BOUND => {
            if matches!(nature, Nature::Delay(_)) {
                Class::Delay
            } else {
                Class::Io
            }
        }
        _ => declared.unwrap_or(Class::Mixed),
    };
    (class, e)
}

/// What a waiting workload waits on, as far as its declared nature says: blocking I/O only
/// where it declares blocking reads; an undeclared wait may as well be an async timer, a
/// future or another process, so it is only a wait.
fn waits_on(nature: Nature) -> &'static str {
    match nature {
        Nature::BlockingIo => " on blocking I/O",
        Nature::Network => " on the network",
        Nature::Delay(_) => " on a delay",
        Nature::Cpu | Nature::Measured => "",
    }
}

/// The task count to judge a group at: the one with the most measured cells, the larger on a tie.
fn judged_tasks(cells: &[&CellResult]) -> Option<usize> {
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for c in cells.iter().filter(|c| c.wall_median_s.is_some()) {
        *counts.entry(c.key.tasks).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|&(n, k)| (k, n))
        .map(|(n, _)| n)
}

fn spread(c: &CellResult) -> (f64, f64) {
    let m = c.wall_median_s.unwrap_or(f64::INFINITY);
    c.wall_ci95_s.map_or((m, m), |[lo, hi]| (lo, hi))
}

/// The advice for a group none of whose runs succeeded: that they failed, and the first
/// reason, rather than a guess at what bounds the workload from failed runs.
fn failed_group(g: &Group, workload: &str) -> Advice {
    let runs: usize = g.cells.iter().map(|c| c.runs).sum();
    let first = g.cells.iter().find_map(|c| c.error.clone());
    Advice {
        group: g.title.clone(),
        class: Class::Failed,
        winner: None,
        text: format!(
            "No run of {workload} succeeded ({runs} run{} in {} cell{} failed), so nothing was measured: neither what bounds it nor which model suits it can be told. {}",
            if runs == 1 { "" } else { "s" },
            g.cells.len(),
            if g.cells.len() == 1 { "" } else { "s" },
            match first {
                Some(e) => format!("The first error: {e}."),
                None => "No error was recorded.".into(),
            }
        ),
        amdahl: Vec::new(),
    }
}

fn us(v: u64) -> String {
    fmt_secs(v as f64 / 1e6)
}

/// The advice for a group of open-model cells (`--rate`): which model sustained the rate
/// with the lowest p99 latency and which fell behind (its queue grew); under `--rate auto`,
/// which sustained the most.
fn open_advice(g: &Group, class: Class) -> Advice {
    let measured: Vec<&CellResult> = g
        .cells
        .iter()
        .copied()
        .filter(|c| c.open.is_some() && c.runs_failed < c.runs)
        .collect();
    let p99 = |c: &CellResult| c.latency_us.map_or(u64::MAX, |l| l.p99);
    let mut s = Vec::new();
    let winner;
    if measured.iter().any(|c| c.rate_search.is_some()) {
        let mut found: Vec<(&CellResult, f64)> = measured
            .iter()
            .filter_map(|c| Some((*c, c.rate_search.as_ref()?.sustained?)))
            .collect();
        found.sort_by(|a, b| b.1.total_cmp(&a.1));
        let slo = measured
            .iter()
            .find_map(|c| c.rate_search.as_ref().map(|r| r.slo.clone()))
            .unwrap_or_default();
        winner = found.first().map(|(c, _)| c.key.model_label());
        match found.first() {
            Some((_, r)) => {
                let top: Vec<String> = found
                    .iter()
                    .take_while(|(_, x)| x == r)
                    .map(|(c, _)| c.key.model_label())
                    .collect();
                s.push(format!(
                    "The highest rate that kept {slo} (and 99% of the asked rate): {} at {r:.1}/s{}.",
                    top.join(", "),
                    if top.len() > 1 { ", a tie at the search's 3% precision" } else { "" }
                ));
                let rest: Vec<String> = found[top.len()..]
                    .iter()
                    .map(|(c, r)| format!("{} {r:.1}/s", c.key.model_label()))
                    .collect();
                if !rest.is_empty() {
                    s.push(format!("Then {}.", rest.join(", ")));
                }
            }
            None => s.push(format!(
                "No model kept {slo} even at the lowest rate tried."
            )),
        }
        let none: Vec<String> = measured
            .iter()
            .filter(|c| {
                c.rate_search
                    .as_ref()
                    .is_some_and(|r| r.sustained.is_none())
            })
            .map(|c| c.key.model_label())
            .collect();
        if !none.is_empty() {
            s.push(format!("{} kept it at no rate tried.", none.join(", ")));
        }
    } else {
        let mut kept: Vec<&CellResult> = measured
            .iter()
            .copied()
            .filter(|c| {
                c.open
                    .as_ref()
                    .is_some_and(|o| !o.behind && o.rate_achieved.is_some())
            })
            .collect();
        kept.sort_by_key(|c| p99(c));
        let asked = measured
            .first()
            .and_then(|c| c.open.as_ref())
            .map(|o| match o.rate_ramp {
                Some([a, b]) => format!("a rate rising from {a:.0}/s to {b:.0}/s"),
                None => format!("{:.1}/s", o.rate_asked),
            })
            .unwrap_or_default();
        winner = kept.first().map(|c| c.key.model_label());
        match kept.first() {
            Some(w) => {
                let service = w
                    .open
                    .as_ref()
                    .and_then(|o| o.service_us)
                    .map(|l| format!(", of which service p99 {}", us(l.p99)))
                    .unwrap_or_default();
                s.push(format!(
                    "At {asked}, {} kept up with the lowest p99 latency, {} from each task's scheduled time{service}.",
                    w.key.model_label(),
                    us(p99(w))
                ));
            }
            None => s.push(format!("At {asked}, no model kept up.")),
        }
        for c in measured
            .iter()
            .filter(|c| c.open.as_ref().is_some_and(|o| o.behind))
        {
            let Some(o) = &c.open else { continue };
            s.push(format!(
                "{} fell behind: it achieved {} of {:.1}/s, so its queue grew (queue p99 {}) and callers waited p99 {}.",
                c.key.model_label(),
                o.rate_achieved.map_or("-".into(), |a| format!("{a:.1}/s")),
                o.rate_asked,
                o.queue_us.map_or("-".into(), |q| us(q.p99)),
                us(p99(c))
            ));
        }
    }
    Advice {
        group: g.title.clone(),
        class,
        winner,
        text: s.join(" "),
        amdahl: vec![],
    }
}

/// Advice for every group of `a`, on the machine the runs were made on.
pub fn advise(a: &Analysis) -> Vec<Advice> {
    let cores = a.cores;
    groups(a)
        .into_iter()
        .filter_map(|g| {
            let workload = g.cells.first()?.key.workload.clone();
            let gil = g.cells.first()?.key.gil;
            if g.cells.iter().all(|c| c.runs_failed == c.runs) {
                return Some(failed_group(&g, &workload));
            }
            let nature = g.cells.first()?.traits.nature;
            let same_workload: Vec<&CellResult> = a
                .cells
                .iter()
                .filter(|c| c.key.study == g.cells[0].key.study && c.key.workload == workload)
                .collect();
            let (class, e) = classify(&same_workload, nature, cores);
            if g.cells.iter().any(|c| c.open.is_some()) {
                return Some(open_advice(&g, class));
            }
            let n = judged_tasks(&g.cells)?;
            let mut at_n: Vec<&CellResult> = g
                .cells
                .iter()
                .copied()
                .filter(|c| c.key.tasks == n && c.wall_median_s.is_some() && c.runs_failed < c.runs)
                .collect();
            at_n.sort_by(|x, y| {
                x.wall_median_s
                    .unwrap_or(f64::INFINITY)
                    .total_cmp(&y.wall_median_s.unwrap_or(f64::INFINITY))
            });
            let mut s = Vec::new();
            // One task at a time cannot keep more than one core busy; more means the process's
            // own start-up dominated a short run.
            let kernel: Vec<f64> = same_workload
                .iter()
                .filter(|c| c.traits.baseline)
                .filter_map(|c| {
                    let (u, s) = (c.user_median_s?, c.sys_median_s?);
                    (u + s > 0.0).then(|| s / (u + s))
                })
                .collect();
            let kernel = crate::base::stats::median(&kernel);
            // Blocking "I/O" that keeps the kernel busy (reading /dev/urandom) is CPU work.
            let class = match (class, e, kernel) {
                (Class::Io, Some(e), Some(k)) if e >= 0.5 && k >= 0.5 => Class::Cpu,
                _ => class,
            };
            // What one task at a time was measured to keep busy, or that its runs were too
            // short to tell (the class is then the declared one).
            let one_task = |only: &str| match e {
                Some(e) => format!(
                    "one task at a time keeps {only}{:.2} cores busy{}",
                    e.min(1.0),
                    kernel
                        .filter(|k| *k >= 0.3)
                        .map(|k| format!(" ({:.0}% of it in the kernel)", k * 100.0))
                        .unwrap_or_default()
                ),
                None => "its runs are too short to measure how busy one task at a time keeps the cores, so this is what it declares".to_string(),
            };
            // CPU-only work measured below a core waited for one.
            let starved = match e {
                Some(e) if e < CPU_BOUND && nature == Nature::Cpu => {
                    " (it only computes, so the rest of the time it waited for a core: the machine was busy, and the figures below are slower than this machine can do)"
                }
                _ => "",
            };
            s.push(match class {
                Class::Cpu => format!(
                    "{workload} is CPU-bound: {}{starved}, so no model can run it more than {cores}× faster on this {cores}-core machine.",
                    one_task("")
                ),
                Class::Io => format!(
                    "{workload} mostly waits{}: {}, so running more tasks at once helps beyond the {cores} cores.",
                    waits_on(nature),
                    one_task("only ")
                ),
                Class::Delay => format!(
                    "{workload} mostly waits: {}, so the more tasks in flight the better, up to the ideal ceil(N / workers) × delay.",
                    one_task("only ")
                ),
                Class::Mixed | Class::Failed => format!(
                    "{workload} is mixed: {}, so both cores and overlap matter.",
                    one_task("")
                ),
            });
            let winner = at_n.first().copied();
            if let Some(w) = winner {
                let wm = w.wall_median_s.unwrap_or(0.0);
                let speed = w
                    .speedup
                    .map(|x| format!(", {x:.2}× the speed of seq"))
                    .unwrap_or_default();
                let ideal = w
                    .vs_ideal
                    .map(|v| format!(", {v:.2}× the ideal"))
                    .unwrap_or_default();
                let mut line = if at_n.len() == 1 {
                    format!(
                        "With {n} tasks{}, {} took {}{ideal}",
                        if gil { " under the interpreter lock" } else { "" },
                        w.key.model_label(),
                        fmt_secs(wm)
                    )
                } else if w.traits.baseline {
                    format!(
                        "With {n} tasks{}, seq won in {}: no model beat running the tasks one after another",
                        if gil { " under the interpreter lock" } else { "" },
                        fmt_secs(wm)
                    )
                } else {
                    format!(
                        "With {n} tasks{}, {} won in {}{speed}{ideal}",
                        if gil { " under the interpreter lock" } else { "" },
                        w.key.model_label(),
                        fmt_secs(wm)
                    )
                };
                match at_n.get(1) {
                    Some(r) => {
                        let rm = r.wall_median_s.unwrap_or(0.0);
                        let (_, whi) = spread(w);
                        let (rlo, _) = spread(r);
                        if rlo <= whi || rm < wm * 1.05 {
                            line.push_str(&format!(
                                "; {} ({}) is within noise of it (less than 5% apart, or their 95% intervals overlap).",
                                r.key.model_label(),
                                fmt_secs(rm)
                            ));
                        } else {
                            line.push_str(&format!(
                                "; the next best, {}, took {} ({:.0}% longer).",
                                r.key.model_label(),
                                fmt_secs(rm),
                                100.0 * (rm / wm - 1.0)
                            ));
                        }
                    }
                    None => line.push('.'),
                }
                s.push(line);
                s.push(why(class, gil, w, &at_n, cores));
                if wm < TOO_SHORT_S {
                    s.push(format!(
                        "(Runs this short, {}, are dominated by start-up costs: take the advice as tentative and use more tasks or a bigger task.)",
                        fmt_secs(wm)
                    ));
                }
            } else {
                s.push("No cell was measured, so no model can be recommended.".into());
            }
            s.extend(multiplexing(&g, false));
            s.extend(multiplexing(&g, true));
            let amdahl = if class == Class::Cpu {
                fits(&g.cells, cores)
            } else {
                Vec::new()
            };
            Some(Advice {
                group: g.title.clone(),
                class,
                winner: winner.map(|w| w.key.model_label()),
                text: s.join(" "),
                amdahl,
            })
        })
        .collect()
}

/// What HTTP/2's multiplexing (HTTP/3's with `http3`) saved and what it cost, for each model
/// of the group measured over it and over HTTP/1.1 (the crawl study's `h2` and `h3` rows
/// beside its HTTP/1.1 rows): connections and handshakes, memory (tree PSS, as the tables),
/// CPU, wall and tail latency, one clause per model, then what it cost.
fn multiplexing(g: &Group, http3: bool) -> Option<String> {
    let version = if http3 { "HTTP/3" } else { "HTTP/2" };
    let multiplexed = |c: &CellResult| if http3 { c.key.http3 } else { c.key.http2 };
    let measured = |c: &CellResult| c.runs_failed < c.runs && c.wall_median_s.is_some();
    let mut saved = Vec::new();
    let mut fell_back = Vec::new();
    let mut slower = Vec::new();
    for h2 in g.cells.iter().filter(|c| multiplexed(c) && measured(c)) {
        let Some(h1) = g.cells.iter().find(|c| {
            !c.key.http2
                && !c.key.http3
                && c.key.model == h2.key.model
                && c.key.tasks == h2.key.tasks
                && measured(c)
        }) else {
            continue;
        };
        let model = h2.key.model.clone();
        if h2.conn.http_version == Some(crate::measure::conn::HttpVersion::Http1) {
            fell_back.push(model);
            continue;
        }
        let mut parts = Vec::new();
        if let (Some(c2), Some(c1)) = (h2.conn.connections_opened, h1.conn.connections_opened) {
            parts.push(format!(
                "{c2} connection{} instead of {c1} ({} fewer {} handshakes)",
                if c2 == 1 { "" } else { "s" },
                c1.saturating_sub(c2),
                if http3 {
                    // A QUIC handshake is its TLS handshake: each stands for a TCP and a TLS one.
                    "TCP and TLS"
                } else if h1.conn.tls_us.is_some() {
                    "TCP and TLS"
                } else {
                    "TCP"
                }
            ));
        }
        let mem = |c: &CellResult| c.tree_pss_kib.or(c.max_rss_kib);
        if let (Some(m2), Some(m1)) = (mem(h2), mem(h1)) {
            parts.push(format!("{} of memory against {}", fmt_kib(m2), fmt_kib(m1)));
        }
        let cpu = |c: &CellResult| Some(c.user_median_s? + c.sys_median_s?);
        if let (Some(c2), Some(c1)) = (cpu(h2), cpu(h1)) {
            parts.push(format!("{} of CPU against {}", fmt_secs(c2), fmt_secs(c1)));
        }
        let (w2, w1) = (
            h2.wall_median_s.unwrap_or(0.0),
            h1.wall_median_s.unwrap_or(0.0),
        );
        let mut time = format!("{} against {}", fmt_secs(w2), fmt_secs(w1));
        if let (Some(l2), Some(l1)) = (h2.latency_us, h1.latency_us) {
            time.push_str(&format!(" (p99 {} against {})", us(l2.p99), us(l1.p99)));
        }
        parts.push(time);
        saved.push(format!("{model} {}", parts.join(", ")));
        let (lo2, _) = spread(h2);
        let (_, hi1) = spread(h1);
        if lo2 > hi1 && w2 > w1 * 1.05 {
            slower.push(format!("{model} ({:.0}% slower)", 100.0 * (w2 / w1 - 1.0)));
        }
    }
    let mut s = Vec::new();
    if !saved.is_empty() && http3 {
        s.push(format!(
            "Over HTTP/3, every request in flight a stream of one QUIC connection: {}.",
            saved.join("; ")
        ));
        s.push(if slower.is_empty() {
            "QUIC cost no time here; its streams are ordered each on its own, so a lost packet stalls only its stream, which shows under packet loss only (bench/h3-loss.sh).".to_string()
        } else {
            format!(
                "HTTP/3 was slower for {}: QUIC encrypts, acknowledges and paces every packet in user space, in the client's own process.",
                slower.join(", ")
            )
        });
    } else if !saved.is_empty() {
        s.push(format!(
            "Over {version}, every request in flight a stream of one connection: {}.",
            saved.join("; ")
        ));
        s.push(if slower.is_empty() {
            "Multiplexing cost no time here; what it can cost, head-of-line blocking (one lost packet stalls every stream of the connection), shows only under packet loss, which this network did not have.".to_string()
        } else {
            format!(
                "HTTP/2 was slower for {}: the streams share one connection's socket and its one task, so they queue behind each other.",
                slower.join(", ")
            )
        });
    }
    if !fell_back.is_empty() {
        s.push(format!(
            "{} asked for HTTP/2, but the server answered in HTTP/1.1, so nothing was multiplexed.",
            fell_back.join(", ")
        ));
    }
    (!s.is_empty()).then(|| s.join(" "))
}

fn why(class: Class, gil: bool, w: &CellResult, cells: &[&CellResult], cores: usize) -> String {
    if cells.len() == 1 && !w.traits.baseline {
        return format!(
            "Why: only {} ran, so there is nothing to compare it with: add -m seq (the baseline every speedup is measured against) and other models to see what it gains and what it costs.",
            w.key.model_label()
        );
    }
    if cells.iter().all(|c| c.traits.baseline) {
        return format!(
            "Why: only {} ran, one task after another, so nothing overlapped and there is no other model to compare with: add models (-m thread -m pool:W -m async:W) to see what running these tasks at once gains.",
            w.key.model_label()
        );
    }
    // The slowest concurrent model, when clearly slower than the winner (10%, CIs apart).
    let worst = cells
        .iter()
        .rev()
        .copied()
        .find(|c| !c.traits.baseline)
        .filter(|c| {
            let (_, whi) = spread(w);
            let (clo, _) = spread(c);
            let (cm, wm) = (
                c.wall_median_s.unwrap_or(0.0),
                w.wall_median_s.unwrap_or(0.0),
            );
            clo > whi && cm > wm * 1.1
        })
        // The runner-up was already named.
        .filter(|c| !matches!(cells.get(1), Some(r) if r.key == c.key));
    match class {
        Class::Cpu if gil => {
            if w.traits.task_processes {
                "Why: the interpreter lock lets one thread compute at a time, so only separate processes, each with its own lock, use the other cores.".into()
            } else {
                "Why: the interpreter lock lets one thread compute at a time; with more tasks than one, processes (fork, spawn) would use the other cores.".into()
            }
        }
        Class::Cpu => format!(
            "Why: every model that runs at least {cores} tasks at once keeps the cores busy; what separates them is what each task costs to start (a process more than a thread, a thread more than a pool's slot){}.",
            worst
                .filter(|x| x.key != w.key)
                .and_then(|x| Some(format!(", which is why {} was slowest ({})", x.key.model_label(), fmt_secs(x.wall_median_s?))))
                .unwrap_or_default()
        ),
        Class::Io | Class::Delay | Class::Mixed | Class::Failed => {
            let mem = |c: &CellResult| c.tree_pss_kib.or(c.max_rss_kib);
            let heaviest = cells
                .iter()
                .copied()
                .filter(|c| c.key != w.key)
                .max_by_key(|c| mem(c).unwrap_or(0));
            let mut t: String = format!(
                "Why: waiting costs no CPU, so what counts is how many tasks are in flight at once ({} ran {} at a time)",
                w.key.model_label(),
                w.parallelism.min(w.key.tasks)
            );
            if w.traits.baseline {
                return "Why: overlapping these tasks gained nothing measurable here: between waits they keep a core (or the kernel) busy, and starting threads or processes costs more than the overlap saves.".into();
            }
            if let (Some(h), Some(wm), Some(hm)) = (heaviest, mem(w), heaviest.and_then(mem)) {
                if hm > wm {
                    t.push_str(&format!(
                        ", and what each in-flight task costs: {} used {} of memory, {} {}",
                        w.key.model_label(),
                        fmt_kib(wm),
                        h.key.model_label(),
                        fmt_kib(hm)
                    ));
                }
            }
            t.push('.');
            t
        }
    }
}

fn fits(cells: &[&CellResult], cores: usize) -> Vec<AmdahlFit> {
    let mut by_model: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for c in cells {
        if c.traits.baseline {
            continue;
        }
        let Some(s) = c.speedup else { continue };
        let p = c.parallelism.min(cores).min(c.key.tasks).max(1) as f64;
        match by_model.iter_mut().find(|(m, _)| *m == c.key.model_label()) {
            Some((_, v)) => v.push((p, s)),
            None => by_model.push((c.key.model_label(), vec![(p, s)])),
        }
    }
    by_model
        .into_iter()
        // Nothing to fit where no point ran faster than seq.
        .filter(|(_, pts)| pts.iter().any(|&(p, s)| p > 1.0 && s > 1.05))
        .filter_map(|(model, pts)| {
            Some(AmdahlFit {
                serial_fraction: amdahl_fit(&pts)?,
                points: pts.len(),
                model,
            })
        })
        .collect()
}

/// The Amdahl fits as one line, e.g. `Amdahl fit (serial fraction): thread 3.1%, fork 5.0%`.
pub fn amdahl_line(fits: &[AmdahlFit]) -> Option<String> {
    if fits.is_empty() {
        return None;
    }
    Some(format!(
        "Amdahl fit (serial fraction, from the speedups at each task count): {}",
        fits.iter()
            .map(|f| format!("{} {:.1}%", f.model, f.serial_fraction * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::results::{CellKey, Traits};

    fn cell(workload: &str, model: &str, par: usize, wall: f64, user: f64, sys: f64) -> CellResult {
        CellResult {
            key: CellKey {
                study: "custom".into(),
                workload: workload.into(),
                model: model.into(),
                tasks: 8,
                gil: false,
                http2: false,
                http3: false,
                hosts: None,
            },
            workers: None,
            parallelism: par,
            runs: 5,
            runs_failed: 0,
            wall_median_s: Some(wall),
            wall_ci95_s: Some([wall * 0.99, wall * 1.01]),
            wall_min_s: Some(wall),
            wall_max_s: Some(wall),
            wall_mean_s: Some(wall),
            wall_sd_s: Some(0.0),
            user_median_s: Some(user),
            sys_median_s: Some(sys),
            max_rss_kib: Some(4000 * par as u64),
            tree_pss_kib: Some(1500 * par as u64),
            tree_pss_all_started_kib: None,
            tree_pss_end_kib: None,
            speedup: None,
            efficiency: None,
            effective_cores: Some((user + sys) / wall),
            ideal_s: None,
            vs_ideal: None,
            bytes: Some(8),
            bytes_consistent: true,
            latency_us: None,
            error: None,
            tasks_failed: 0,
            failures: Default::default(),
            tasks_per_s: None,
            server_peak_in_flight: None,
            isolation: Default::default(),
            startup_median_s: None,
            conn: Default::default(),
            traits: Traits {
                family: model.split(':').next().unwrap_or_default().into(),
                baseline: model == "seq",
                ..Traits::default()
            },
            open: None,
            rate_search: None,
            wakeups: None,
            pss_per_task_b: None,
        }
    }

    fn advice_for(mut cells: Vec<CellResult>, nature: &str) -> Advice {
        let nature: Nature =
            serde_json::from_value(serde_json::json!({ "nature": nature, "delay_s": 0.1 }))
                .unwrap();
        for c in &mut cells {
            c.traits.nature = nature;
            c.traits.waits = nature.waits();
        }
        let a = Analysis {
            cells,
            warnings: vec![],
            cores: 2,
        };
        advise(&a).remove(0)
    }

    #[test]
    fn a_group_that_only_failed_says_so_and_why() {
        let mut cells = vec![
            cell("http:http://127.0.0.1:1/x", "seq", 1, 0.01, 0.01, 0.0),
            cell("http:http://127.0.0.1:1/x", "pool:2", 2, 0.01, 0.01, 0.0),
        ];
        for c in &mut cells {
            c.runs_failed = c.runs;
            c.error = Some("8 of 8 tasks failed (first: connect: refused)".into());
        }
        let a = advice_for(cells, "net");
        assert_eq!(a.class, Class::Failed);
        assert_eq!(a.winner, None);
        assert!(
            a.text.contains(
                "No run of http:http://127.0.0.1:1/x succeeded (10 runs in 2 cells failed)"
            ),
            "{}",
            a.text
        );
        assert!(
            a.text
                .contains("The first error: 8 of 8 tasks failed (first: connect: refused)."),
            "{}",
            a.text
        );
        assert!(!a.text.contains("CPU-bound"), "{}", a.text);
    }

    #[test]
    fn classifies_and_names_the_winner() {
        let cpu = advice_for(
            vec![
                cell("fib:30", "seq", 1, 0.8, 0.79, 0.01),
                cell("fib:30", "thread", 8, 0.45, 0.8, 0.02),
                cell("fib:30", "pool:2", 2, 0.41, 0.8, 0.01),
            ],
            "cpu",
        );
        assert_eq!(cpu.class, Class::Cpu);
        assert_eq!(cpu.winner.as_deref(), Some("pool:2"));
        assert!(cpu.text.contains("pool:2 won in 410.0 ms"), "{}", cpu.text);
        assert!(cpu.text.contains("thread (450.0 ms)") || cpu.text.contains("thread, took"));

        let delay = advice_for(
            vec![
                cell("sleep:100ms", "seq", 1, 0.8, 0.001, 0.001),
                cell("sleep:100ms", "thread", 8, 0.1, 0.002, 0.002),
                cell("sleep:100ms", "pool:2", 2, 0.4, 0.001, 0.001),
            ],
            "delay",
        );
        assert_eq!(delay.class, Class::Delay);
        assert_eq!(delay.winner.as_deref(), Some("thread"));
        assert!(delay.text.contains("mostly waits"), "{}", delay.text);
        assert!(delay.text.contains("300% longer"), "{}", delay.text);

        // Reading /dev/urandom is declared I/O but keeps the kernel busy: CPU work.
        let kernel = advice_for(
            vec![
                cell("read", "seq", 1, 0.5, 0.01, 0.29),
                cell("read", "thread", 8, 0.3, 0.02, 0.5),
            ],
            "io",
        );
        assert_eq!(kernel.class, Class::Cpu);
        assert!(kernel.text.contains("in the kernel"), "{}", kernel.text);
    }

    #[test]
    fn runs_too_short_to_measure_follow_the_declared_nature() {
        // CI's busy machine: 0.8 ms runs of fib whose CPU time read as 0.2 cores.
        let short = advice_for(
            vec![
                cell("fib:22", "seq", 1, 0.0008, 0.0001, 0.00006),
                cell("fib:22", "pool:2", 2, 0.0012, 0.0003, 0.0),
            ],
            "cpu",
        );
        assert_eq!(short.class, Class::Cpu, "{}", short.text);
        assert!(
            short.text.starts_with(
                "fib:22 is CPU-bound: its runs are too short to measure how busy one task at a time keeps the cores, so this is what it declares,"
            ),
            "{}",
            short.text
        );
        // CI's other case: runs long enough, 0.2 cores for work that only computes. It
        // waited for a core (the machine was busy), so it stays CPU-bound and says why.
        let busy = advice_for(
            vec![
                cell("fib:22", "seq", 1, 0.8, 0.16, 0.0),
                cell("fib:22", "pool:2", 2, 1.2, 0.3, 0.0),
            ],
            "cpu",
        );
        assert_eq!(busy.class, Class::Cpu, "{}", busy.text);
        assert!(
            busy.text.contains("keeps 0.20 cores busy (it only computes, so the rest of the time it waited for a core: the machine was busy"),
            "{}",
            busy.text
        );
        // The same measure from undeclared work is believed: it waits.
        let waits = advice_for(
            vec![
                cell("cmd", "seq", 1, 0.8, 0.16, 0.0),
                cell("cmd", "pool:2", 2, 1.2, 0.3, 0.0),
            ],
            "measured",
        );
        assert_eq!(waits.class, Class::Io, "{}", waits.text);
        assert!(
            waits.text.contains("keeps only 0.20 cores busy"),
            "{}",
            waits.text
        );
    }

    #[test]
    fn a_wait_is_called_blocking_io_only_where_the_workload_declares_it() {
        // An async closure awaiting a timer, its nature not declared: a wait, not blocking I/O.
        let timer = advice_for(
            vec![
                cell("timer", "seq", 1, 0.8, 0.001, 0.001),
                cell("timer", "async:8", 8, 0.1, 0.002, 0.002),
            ],
            "measured",
        );
        assert_eq!(timer.class, Class::Io);
        assert!(
            timer
                .text
                .starts_with("timer mostly waits: one task at a time"),
            "{}",
            timer.text
        );
        assert!(!timer.text.contains("blocking I/O"), "{}", timer.text);
        let reads = advice_for(
            vec![
                cell("reads", "seq", 1, 0.8, 0.001, 0.001),
                cell("reads", "thread", 8, 0.1, 0.002, 0.002),
            ],
            "io",
        );
        assert!(
            reads
                .text
                .starts_with("reads mostly waits on blocking I/O:"),
            "{}",
            reads.text
        );
    }

    #[test]
    fn amdahl_recovers_a_known_serial_fraction() {
        let s = 0.1;
        let pts: Vec<(f64, f64)> = [1.0, 2.0, 4.0, 8.0]
            .iter()
            .map(|&p| (p, 1.0 / (s + (1.0 - s) / p)))
            .collect();
        assert!((amdahl_fit(&pts).unwrap() - s).abs() < 1e-9);
        assert!(amdahl_fit(&pts[..2]).is_none());
        assert!(amdahl_fit(&[(1.0, 1.0), (1.0, 1.0), (1.0, 1.0)]).is_none());
    }
}

#[cfg(test)]
mod mock_tests {
    use super::*;
    use crate::analysis::analyze;
    use crate::runner::mock::{mock_plan, MockEnd, MockExecutor};
    use crate::runner::Executor;

    fn advice_for(
        workloads: &[&str],
        models: &[&str],
        tasks: &[usize],
        mock: MockExecutor,
    ) -> Vec<Advice> {
        let plan = mock_plan(workloads, models, tasks, 3);
        let runs = mock.runs(&plan);
        let a = analyze(&runs, &mock.machine());
        advise(&a)
    }

    #[test]
    fn cpu_bound_work_names_the_fastest_model_and_fits_amdahl() {
        let mock = MockExecutor::new(4)
            .task_time("fib:20", 0.1)
            .overhead("thread", 0.02)
            .overhead("fork", 0.04);
        let adv = advice_for(
            &["fib:20"],
            &["seq", "pool:4", "thread", "fork"],
            &[2, 4, 8],
            mock,
        );
        assert_eq!(adv.len(), 1);
        let a = &adv[0];
        assert_eq!(a.class, Class::Cpu);
        assert_eq!(a.winner.as_deref(), Some("pool:4"));
        assert_eq!(
            a.text,
            "fib:20 is CPU-bound: one task at a time keeps 1.00 cores busy, so no model can run it more than 4× faster on this 4-core machine. \
With 8 tasks, pool:4 won in 200.0 ms, 4.00× the speed of seq, 1.00× the ideal; the next best, thread, took 220.0 ms (10% longer). \
Why: every model that runs at least 4 tasks at once keeps the cores busy; what separates them is what each task costs to start \
(a process more than a thread, a thread more than a pool's slot), which is why fork was slowest (240.0 ms)."
        );
        // pool:4 scales perfectly: no serial fraction. fork's 40 ms of start-up per run is
        // one: least squares over (p, S) = (2, 0.2/0.14), (4, 0.4/0.14), (4, 0.8/0.24).
        let fit = |m: &str| {
            a.amdahl
                .iter()
                .find(|f| f.model == m)
                .map(|f| (f.serial_fraction, f.points))
        };
        let (pool, n) = fit("pool:4").unwrap();
        assert!(pool.abs() < 1e-9 && n == 3, "{pool} {n}");
        let (fork, _) = fit("fork").unwrap();
        assert!((fork - 0.2125 / 1.375).abs() < 1e-9, "{fork}");
    }

    #[test]
    fn waiting_work_is_told_to_overlap() {
        let adv = advice_for(
            &["sleep:100ms"],
            &["seq", "pool:4", "async:10"],
            &[10],
            MockExecutor::new(4),
        );
        let a = &adv[0];
        assert_eq!(a.class, Class::Delay);
        assert_eq!(a.winner.as_deref(), Some("async:10"));
        assert!(a.amdahl.is_empty());
        assert!(
            a.text.starts_with(
                "sleep:100ms mostly waits: one task at a time keeps only 0.00 cores busy"
            ),
            "{}",
            a.text
        );
        assert!(
            a.text.contains("With 10 tasks, async:10 won in 100.0 ms, 10.00× the speed of seq, 1.00× the ideal; the next best, pool:4, took 300.0 ms (200% longer)."),
            "{}",
            a.text
        );
        assert!(a.text.contains("(async:10 ran 10 at a time)"), "{}", a.text);
    }

    /// Issue 46: a study of one model is told that nothing was compared, not that
    /// overlapping gained nothing or what separates models.
    #[test]
    fn one_model_alone_is_told_there_is_nothing_to_compare() {
        for (model, why) in [
            (
                "seq",
                "Why: only seq ran, one task after another, so nothing overlapped",
            ),
            (
                "pool:4",
                "Why: only pool:4 ran, so there is nothing to compare it with: add -m seq",
            ),
        ] {
            let adv = advice_for(&["sleep:100ms"], &[model], &[10], MockExecutor::new(4));
            let text = &adv[0].text;
            assert!(text.contains(why), "{text}");
            assert!(
                text.contains(&format!("With 10 tasks, {model} took ")),
                "{text}"
            );
            assert!(!text.contains(" won in "), "{text}");
            assert!(!text.contains("gained nothing measurable"), "{text}");
        }
    }

    #[test]
    fn a_failed_model_never_wins_and_a_group_with_no_measurement_has_no_winner() {
        let mock = MockExecutor::new(4)
            .task_time("fib:20", 0.1)
            .failing("pool:4", MockEnd::Crash);
        let adv = advice_for(&["fib:20"], &["seq", "pool:4", "thread"], &[8], mock);
        assert_eq!(adv[0].winner.as_deref(), Some("thread"));

        let mock = MockExecutor::new(4)
            .failing("seq", MockEnd::Timeout)
            .failing("pool:4", MockEnd::Crash);
        let adv = advice_for(&["fib:20"], &["seq", "pool:4"], &[8], mock);
        assert!(adv.iter().all(|a| a.winner.is_none()), "{adv:?}");
    }
}
