//! The built-in studies: the three classic experiments' cells (`crawl` joins with the HTTP
//! work), sized for this kind of machine, and the quick tour that `concur run` runs.

use crate::base::error::{Error, Result};
use crate::plan::options::StudyOptions;

/// The default study: every built-in study, scaled down (`--quick`).
pub const TOUR: &str = "tour";

/// A cell as a preset or the user names it, before validation.
#[derive(Debug, Clone)]
pub struct CellRequest {
    /// Study name.
    pub study: String,
    /// Workload spec.
    pub workload: String,
    /// Model spec.
    pub model: String,
    /// Task count.
    pub tasks: usize,
    /// Interpreter-lock emulation.
    pub gil: bool,
    /// Speak HTTP/2 (`--http2` on a free-form study; the crawl study's `h2` rows).
    pub http2: bool,
    /// Speak HTTP/3 (`--http3` on a free-form study; the crawl study's `h3` rows).
    pub http3: bool,
    /// The study plans this cell to fail (it shows an OS limit): failures do not count.
    pub expected_failure: bool,
}

/// A built-in study: its name, a line of help, and its cells for the user's options.
pub struct Study {
    /// What `concur run NAME` calls it.
    pub name: &'static str,
    /// What it runs, in one line (`--help`, `concur list`).
    pub help: &'static str,
    /// Its cells and default sizes for these options (`redis`: whether `--jobs-backend`
    /// names a Redis); a flag it cannot take is a usage error.
    pub build: fn(&StudyOptions, bool) -> Result<Preset>,
    /// Whether `--classic` adds the classic programs' rows to it (`classic::prepare`).
    pub classic: bool,
}

/// Every built-in study. A new study is one function here plus one entry.
pub const STUDIES: &[Study] = &[
    Study {
        name: TOUR,
        help: "the gil, mailer and crawl studies in quick form, in under a minute (the default)",
        build: tour,
        classic: true,
    },
    Study {
        name: "gil",
        help: "CPU work (spin) and blocking reads under seq, thread, spawn, fork; 1, 2, 6, 10 tasks; with and without --gil",
        build: gil,
        classic: true,
    },
    Study {
        name: "crawl",
        help: "1000 GETs of a 100 ms delay under seq (50, --full: 1000), thread, pool:100, async:100, async-local:100, curl:100, green:100, async:1000, against concur's own server (or --url); --http2 adds the HTTP/2 rows of async, async-local and curl, --http3 the HTTP/3 rows of async and async-local (its server then over TLS)",
        build: |o, _| Ok(crawl_study(o.quick, o.full, o.lock.gil, o.request.http2, o.request.http3)),
        classic: true,
    },
    Study {
        name: "mailer",
        help: "100 mail deliveries (build + fib(30) + render) under seq, fork, spawn, thread, pool:10, rayon:10, async:10, actor:10, jobs:10 (SQLite), jobs-memory:10, jobs-redis:10 (with --jobs-backend redis://...), plus 10,000 threads",
        build: |o, redis| Ok(mailer_study(o.quick, o.stress, o.lock.gil, redis)),
        classic: true,
    },
    Study {
        name: "tasks",
        help: "N tasks that each wait 10 s (--quick: 1 s), N = 1, 10,000, 100,000, 1,000,000 (--quick: 1, 1,000, 10,000), under thread, async, async-local, green, actor, fork and spawn: the time to start them all, how late they wake, CPU and memory per task; --classic adds Go, Node.js, Java, Elixir, C++ on asio, C# on Mono, CPython and MRI doing the same",
        build: tasks,
        classic: true,
    },
];

/// The built-in studies' names, for help texts and errors.
pub fn study_names() -> Vec<&'static str> {
    STUDIES.iter().map(|s| s.name).collect()
}

/// `spin` iterations of the full `gil` study's CPU task: about 60 ms here (the classic's
/// `math1` took about 50 ms in CPython 3.11 on this machine), so start-up costs cannot hide
/// the effect.
pub const GIL_SPIN_FULL: u64 = 60_000_000;
/// `spin` iterations with `--quick`: about 20 ms.
pub const GIL_SPIN_QUICK: u64 = 20_000_000;
/// The full `gil` study's I/O task: 100 reads of 64 KiB from /dev/urandom, about 12 ms here
/// (the classic's 100 × 1 KiB take 0.2 ms on today's kernels, too short to show anything).
pub const GIL_READ_FULL: &str = "read:/dev/urandom:65536x100";
/// The I/O task with `--quick`: 100 × 32 KiB, about 6 ms.
pub const GIL_READ_QUICK: &str = "read:/dev/urandom:32768x100";
/// Task counts of the `gil` study (the classic's K).
pub const GIL_TASKS: &[usize] = &[1, 2, 6, 10];

/// A study's cells and defaults, before validation.
#[derive(Debug, Clone)]
pub struct Preset {
    /// Study name.
    pub name: String,
    /// Cells in run order.
    pub cells: Vec<CellRequest>,
    /// Default counted runs per cell.
    pub repeat: usize,
    /// Default warm-up runs per cell.
    pub warmup: usize,
    /// What the reader should know about the choices.
    pub notes: Vec<String>,
}

fn cell(study: &str, workload: &str, model: &str, tasks: usize, gil: bool) -> CellRequest {
    CellRequest {
        study: study.into(),
        workload: workload.into(),
        model: model.into(),
        tasks,
        gil,
        http2: false,
        http3: false,
        expected_failure: false,
    }
}

fn gil_study(quick: bool) -> Preset {
    let spin = format!(
        "spin:{}",
        if quick { GIL_SPIN_QUICK } else { GIL_SPIN_FULL }
    );
    let read = if quick { GIL_READ_QUICK } else { GIL_READ_FULL };
    let mut cells = Vec::new();
    for w in [spin.as_str(), read] {
        for gil in [false, true] {
            for m in ["seq", "thread", "spawn", "fork"] {
                for &n in GIL_TASKS {
                    cells.push(cell("gil", w, m, n, gil));
                }
            }
        }
    }
    Preset {
        name: "gil".into(),
        cells,
        repeat: if quick { 3 } else { 5 },
        warmup: if quick { 0 } else { 1 },
        notes: vec![format!(
            "gil: CPU task {spin} (≈{} ms here), I/O task {read} (≈{} ms here); --gil switch interval as CPython's",
            if quick { 20 } else { 60 },
            if quick { 6 } else { 12 }
        )],
    }
}

/// Deliveries of the `mailer` study's main cells (the classic's 100).
pub const MAILER_TASKS: usize = 100;

/// The `mailer` study's task and the `fib` it computes: `mail` (fib(30)), or `mail:25` with
/// `--quick`.
pub fn mailer_task(quick: bool) -> (&'static str, u32) {
    if quick {
        ("mail:25", 25)
    } else {
        ("mail", 30)
    }
}

fn mailer_study(quick: bool, stress: bool, gil: bool, redis: bool) -> Preset {
    let (mail, _) = mailer_task(quick);
    let mut cells: Vec<CellRequest> = [
        "seq",
        "fork",
        "spawn",
        "thread",
        "pool:10",
        "rayon:10",
        "async:10",
        "actor:10",
        "jobs:10",
        "jobs-memory:10",
    ]
    .iter()
    .map(|m| cell("mailer", mail, m, MAILER_TASKS, gil))
    .collect();
    if redis {
        cells.push(cell("mailer", mail, "jobs-redis:10", 100, gil));
    }
    cells.push(cell("mailer", mail, "thread", 10_000, gil));
    if stress {
        // Past what some machines allow: the study shows the OS's limit, so a failure here is
        // expected and does not fail the study.
        cells.push(CellRequest {
            expected_failure: true,
            ..cell("mailer", mail, "thread", 30_000, gil)
        });
    }
    let mut notes = vec![format!(
        "mailer: task {mail} ({}); thread ×10,000 is the classic's thread-exhaustion cell{}",
        if quick {
            "fib(25) instead of fib(30) for --quick"
        } else {
            "fib(30), ≈4 ms here"
        },
        if stress {
            ", thread ×30,000 (--stress) approaches this machine's limit of about 32,000 threads"
        } else {
            ""
        }
    )];
    if gil {
        notes.push("mailer: --gil on, as MRI's GVL".into());
    }
    Preset {
        name: "mailer".into(),
        cells,
        repeat: 3,
        warmup: 0,
        notes,
    }
}

/// The crawl study's request: the classic's `/add` with a 100 ms delay, on the run's server.
/// The URL is fetched as given, so the classic's 10 random letters per request (its cache
/// busting) are asked for with `{rand}`, inside `name` where the server ignores them.
pub const CRAWL_WORKLOAD: &str = "http:/add?name=crawl{rand}&delay=100";

/// The `crawl` study's request count and its `seq` cell's (scaled down unless `--full`).
pub fn crawl_sizes(quick: bool, full: bool) -> (usize, usize) {
    let n = if quick { 200 } else { 1000 };
    let seq_n = if full {
        n
    } else if quick {
        10
    } else {
        50
    };
    (n, seq_n)
}

/// The crawl study's models, in row order.
const CRAWL_MODELS: &[&str] = &[
    "thread",
    "pool:100",
    "async:100",
    "async-local:100",
    "curl:100",
    "green:100",
    "async:1000",
];

/// The crawl study's cells; `http2` (`--http2`) adds, after the HTTP/1.1 rows, one `h2` row
/// for each model that speaks HTTP/2, its requests in flight as streams over one connection;
/// `http3` (`--http3`) one `h3` row for each model that speaks HTTP/3, the same over one QUIC
/// connection.
fn crawl_study(quick: bool, full: bool, gil: bool, http2: bool, http3: bool) -> Preset {
    let (n, seq_n) = crawl_sizes(quick, full);
    let mut cells = vec![cell("crawl", CRAWL_WORKLOAD, "seq", seq_n, gil)];
    for m in CRAWL_MODELS {
        if gil && m.starts_with("green") {
            continue;
        }
        cells.push(cell("crawl", CRAWL_WORKLOAD, m, n, gil));
    }
    let family = |m: &str| m.split(':').next().unwrap_or(m).to_string();
    if http2 {
        for m in CRAWL_MODELS
            .iter()
            .filter(|m| crate::model::HTTP2_MODELS.contains(&family(m).as_str()))
        {
            cells.push(CellRequest {
                http2: true,
                ..cell("crawl", CRAWL_WORKLOAD, m, n, gil)
            });
        }
    }
    if http3 {
        for m in CRAWL_MODELS
            .iter()
            .filter(|m| crate::model::HTTP3_MODELS.contains(&family(m).as_str()))
        {
            cells.push(CellRequest {
                http3: true,
                ..cell("crawl", CRAWL_WORKLOAD, m, n, gil)
            });
        }
    }
    let mut notes = vec![format!(
        "crawl: {n} GETs of /add with a 100 ms server delay; the ideal with C in flight is ceil({n}/C) × 100 ms"
    )];
    if http2 {
        notes.push(
            "crawl: the h2 rows speak HTTP/2, every request in flight a stream over one connection (h2c over TCP, h2 by ALPN over TLS); the others HTTP/1.1, one connection per request in flight".into(),
        );
    }
    if http3 {
        notes.push(
            "crawl: the h3 rows speak HTTP/3, every request in flight a stream over one QUIC connection (UDP, TLS 1.3)".into(),
        );
    }
    if seq_n < n {
        notes.push(format!(
            "crawl: seq runs {seq_n} requests, scaled ({n} would take {} s; --full runs all); speedups use its per-request time",
            n / 10
        ));
    }
    Preset {
        name: "crawl".into(),
        cells,
        repeat: if quick { 3 } else { 5 },
        warmup: if quick { 0 } else { 1 },
        notes,
    }
}

/// The `tasks` study's wait and task counts: 10 s and 1 to 1,000,000, or 1 s and 1 to 10,000
/// with `--quick`.
pub fn tasks_sizes(quick: bool) -> (std::time::Duration, &'static [usize]) {
    if quick {
        (std::time::Duration::from_secs(1), &[1, 1_000, 10_000])
    } else {
        (
            std::time::Duration::from_secs(10),
            &[1, 10_000, 100_000, 1_000_000],
        )
    }
}

/// The `tasks` study's workload: `sleep:` its wait.
pub fn tasks_workload(wait: std::time::Duration) -> String {
    format!("sleep:{}", crate::base::units::fmt_duration_spec(wait))
}

/// Task counts past which a process per task is not tried: fork's and spawn's processes
/// would reach `pid_max` (32,768 here) only after taking gigabytes, which tells nothing the
/// smaller cells do not (`--quick`: 1,000, as spawning 10,000 takes 20 s here).
fn tasks_process_max(quick: bool) -> usize {
    if quick {
        1_000
    } else {
        10_000
    }
}

/// The `tasks` study: N waiting tasks under every model that can hold them, each task its own
/// worker (`async:N` has N in flight), the models past their limits kept as expected failures.
fn tasks(o: &StudyOptions, _redis: bool) -> Result<Preset> {
    if o.lock.gil {
        return Err(Error::flag(
            "--gil",
            "the tasks study waits, and an interpreter lock is released while waiting; drop --gil",
        ));
    }
    let (wait, counts) = tasks_sizes(o.quick);
    let wait = tasks_workload(wait);
    let wait = wait.as_str();
    let process_max = tasks_process_max(o.quick);
    let mut cells = Vec::new();
    for m in [
        "thread",
        "async",
        "async-local",
        "green",
        "actor",
        "fork",
        "spawn",
    ] {
        for &n in counts {
            let process = m == "fork" || m == "spawn";
            if process && n > process_max {
                continue;
            }
            let model = if matches!(m, "thread" | "fork" | "spawn") {
                m.to_string()
            } else {
                format!("{m}:{n}")
            };
            // Past this machine's thread limit (about 32,000) and green's stacks past
            // vm.max_map_count (about 32,000 coroutines): failures the study shows.
            let limited = (m == "thread" || m == "green") && n > 30_000;
            cells.push(CellRequest {
                expected_failure: limited,
                ..cell("tasks", wait, &model, n, false)
            });
        }
    }
    Ok(Preset {
        name: "tasks".into(),
        cells,
        repeat: 3,
        warmup: 0,
        notes: vec![
            format!("tasks: each task waits ({wait}); every task is its own worker (async:N has N in flight); late = each task's end after its start plus the wait; PSS/task = tree PSS above the same row's 1-task cell, per extra task"),
            format!("tasks: fork and spawn stop at {process_max} tasks (a process each, pid_max 32,768); thread and green fail past about 32,000 (the thread limit, vm.max_map_count) and show how"),
        ],
    })
}

fn gil(o: &StudyOptions, _redis: bool) -> Result<Preset> {
    if o.lock.gil {
        return Err(Error::flag(
            "--gil",
            "the gil study runs every cell with and without the lock already; drop --gil",
        ));
    }
    Ok(gil_study(o.quick))
}

fn tour(o: &StudyOptions, redis: bool) -> Result<Preset> {
    if o.lock.gil {
        return Err(Error::flag(
            "--gil",
            "the tour runs the gil study, which runs with and without the lock already; drop --gil",
        ));
    }
    let g = gil_study(true);
    let m = mailer_study(true, o.stress, false, redis);
    let c = crawl_study(true, o.full, false, o.request.http2, o.request.http3);
    Ok(Preset {
        name: TOUR.into(),
        cells: g.cells.into_iter().chain(m.cells).chain(c.cells).collect(),
        repeat: 3,
        warmup: 0,
        notes: g.notes.into_iter().chain(m.notes).chain(c.notes).collect(),
    })
}

/// The named study's cells for these options.
/// `redis` says whether `--jobs-backend` names a Redis (the plan parsed it), so that `mailer`
/// adds its `jobs-redis:10` cell.
pub fn preset(name: &str, o: &StudyOptions, redis: bool) -> Result<Preset> {
    if o.full && name != "crawl" && name != TOUR {
        return Err(Error::flag(
            "--full",
            "--full runs the crawl study's seq cell at full size; it applies to crawl only",
        ));
    }
    if o.stress && (name == "gil" || name == "crawl" || name == "tasks") {
        return Err(Error::flag(
            "--stress",
            format!(
            "--stress adds the 30,000-thread cell to the mailer study; the {name} study has none"
        ),
        ));
    }
    if o.request.http2 && (name == "gil" || name == "mailer" || name == "tasks") {
        return Err(Error::flag("--http2", format!(
            "--http2 adds HTTP/2 rows to the crawl study (and the tour's crawl); the {name} study makes no HTTP requests"
        )));
    }
    if o.request.http3 && (name == "gil" || name == "mailer" || name == "tasks") {
        return Err(Error::flag("--http3", format!(
            "--http3 adds HTTP/3 rows to the crawl study (and the tour's crawl); the {name} study makes no HTTP requests"
        )));
    }
    let study = STUDIES.iter().find(|s| s.name == name).ok_or_else(|| {
        Error::usage(format!(
            "unknown study '{name}' (allowed: {})",
            study_names().join(", ")
        ))
    })?;
    (study.build)(o, redis)
}
