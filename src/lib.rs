//! concur: run one workload under many concurrency models — sequential, OS threads,
//! processes, thread pools, work stealing, async event loops, green threads, actors, job
//! queues — and see, side by side, what each costs: wall and CPU time, memory, latency, and the
//! distance to the ideal the hardware allows.
//!
//! As a library, [`Lab`] puts a function of yours under the models you name, with the same
//! statistics, advice and reports as the `concur` command line:
//!
//! ```
//! use concur::Lab;
//!
//! // A CPU-bound function of yours: task i's result counts as its bytes (the checksum).
//! fn work(i: usize) -> u64 {
//!     (0..50_000u64).fold(i as u64, |a, x| a.rotate_left(3) ^ x) % 10
//! }
//!
//! fn main() -> Result<(), concur::Error> {
//!     // First in main: every run then happens in a fresh process of this binary.
//!     concur::init();
//!     let report = Lab::new("work")
//!         .task(work)
//!         .models(["seq", "pool:2", "rayon:2", "async:4"])
//!         .tasks([8])
//!         .repeat(3)
//!         .run()?;
//!     let pool = report.cell("pool:2", 8).expect("the pool's cell");
//!     println!("pool:2 ran {:.2}× as fast as seq", pool.speedup.unwrap_or(0.0));
//!     report.print()?; // the tables and the advice; .write("html", "work.html") for a report
//!     Ok(())
//! }
//! ```
//!
//! (This example runs as a doctest: the doctest's binary is started again for each run.)
//! Without [`init`], every run happens inside the calling process: the lab warns once and
//! records `"isolation": "in-process"` in the results.
//!
//! Workloads come as a blocking closure ([`Lab::task`]), an async closure ([`Lab::async_task`],
//! which the async models run natively) or any type implementing [`Workload`]
//! ([`Lab::workload`]). What a [`LabReport`] holds is the [`analysis`]: cells with the median
//! and its 95% CI, speedup, efficiency, the ideal and the distance to it, memory and latency,
//! the [`analysis::advice`], and the comparison with a baseline.
//!
//! The pipeline behind it (and behind the command line), one module a step:
//! [`study::plan`] validates specs and options into a plan once; [`study::execute`] runs
//! every repetition of every cell through an [`study::Executor`] (a fresh child process per
//! run); [`analysis`] turns run lines into cells and advice; [`publish`] and [`report`] write
//! them out. `docs/architecture.md` in the repository draws it.

#![warn(missing_docs)]

pub mod analysis;
pub mod bind;
pub mod classic;
#[doc(hidden)]
pub mod cli;
pub mod error;
pub(crate) mod gil;
pub(crate) mod interrupt;
pub mod jobs;
pub mod lab;
pub mod measure;
pub mod model;
pub mod options;
pub(crate) mod process;
pub mod publish;
pub mod report;
pub(crate) mod secret;
#[doc(hidden)]
pub mod selfcall;
pub mod server;
pub(crate) mod stats;
pub mod study;
pub mod tls;
pub mod units;
pub mod workload;

pub use analysis::results::{CellResult, Isolation, RunResult};
pub use error::Error;
pub use lab::{init, Lab, LabReport};
pub use model::Model;
pub use options::StudyOptions;
pub use publish::Outputs;
pub use workload::custom::TaskOutput;
pub use workload::{Nature, TaskError, Workload};

/// The version written into every results file.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

use std::path::{Path, PathBuf};

use analysis::results::{read_results, ResultsWriter};

/// `concur run`: validates the options into a plan, runs it, saves and shows the results.
/// Returns the exit code: 0 when every counted run succeeded (or `-i`), 1 when some failed,
/// 130 when interrupted (every finished run is kept).
pub fn run(opts: &study::StudyOptions, out: &Outputs, command: Vec<String>) -> Result<i32, Error> {
    let plan = study::plan::build(opts)?;
    let prepared = publish::prepare(out)?;
    let bound = bind::bind(plan, opts)?;
    let plan = &bound.plan;
    let json_path = out.results.clone().unwrap_or_else(|| {
        let stamp = study::machine::now_rfc3339().replace([':', '-'], "");
        PathBuf::from("concur-results").join(format!("{}-{stamp}.jsonl", plan.name))
    });
    let mut writer = ResultsWriter::create(&json_path)?;
    if !out.quiet {
        let runs = match plan.open.as_ref().filter(|o| o.is_auto()) {
            Some(o) if o.remeasure > 0 => format!(
                ", a rate search each, then {} runs at the rate found",
                o.remeasure
            ),
            Some(_) => ", a rate search each".to_string(),
            None if plan.warmup > 0 => {
                format!(" × {} runs (+{} warm-up)", plan.repeat, plan.warmup)
            }
            None => format!(" × {} runs", plan.repeat),
        };
        eprintln!(
            "concur {}: study '{}', {} cells{runs}",
            VERSION,
            plan.name,
            plan.cells.len(),
        );
        for n in &plan.notes {
            eprintln!("note: {n}");
        }
    }
    let feedback = if out.quiet {
        study::Feedback::Quiet
    } else if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        study::Feedback::Bar
    } else {
        study::Feedback::Lines
    };
    if let (Some(s), false) = (&bound.server, out.quiet) {
        eprintln!(
            "server: concur's delay server in-process at {}",
            s.base_url()
        );
    }
    let executor = study::ProcessExecutor::new(bound.run_server())?;
    let outcome = study::execute(plan, &executor, &mut writer, command, feedback)?;
    // The server stops (and the classic programs' folder goes) before the reports are made.
    drop(executor);
    drop(bound);
    publish::publish(
        &outcome.analysis,
        &outcome.meta,
        &outcome.runs,
        prepared,
        out,
    )?;
    if !out.quiet {
        if let Some(p) = writer.path() {
            eprintln!(
                "results: {} (render again with: concur report {})",
                p.display(),
                p.display()
            );
        }
    }
    if outcome.interrupted {
        eprintln!("interrupted: {} finished runs kept", outcome.runs.len());
        return Ok(130);
    }
    Ok(publish::exit_status(&outcome.runs, out))
}

/// `concur report FILE`: renders a results file again (cells are recomputed from its runs, on
/// the machine the file records). Rendering succeeded: 0, whatever the runs were.
pub fn report_file(path: &Path, out: &Outputs) -> Result<i32, Error> {
    if out.results.is_some() {
        return Err(Error::usage(
            "report reads a results file; --json does not apply",
        ));
    }
    let prepared = publish::prepare(out)?;
    let results = read_results(path)?;
    let meta = results
        .meta
        .ok_or_else(|| Error::usage(format!("'{}' has no meta line", path.display())))?;
    let analysis = analysis::analyze(&results.runs, &meta.machine);
    publish::publish(&analysis, &meta, &results.runs, prepared, out)?;
    Ok(0)
}

/// `concur advise`: runs the few cells that tell what bounds `workload` and which model suits
/// it (seq, thread, a pool of one thread per core, async with every task in flight, fork), a
/// few times each, and shows them with the advice. Returns the exit code as [`run`] does.
/// `base` carries the flags that still apply (`--shell`, `--cmd-output`). `repeat`: `-r`, 3
/// by default (with `--rate auto`: none, each search's probe is its cell's run).
pub fn advise(
    workload: &str,
    tasks: Option<usize>,
    repeat: Option<usize>,
    base: study::StudyOptions,
    out: &Outputs,
    command: Vec<String>,
) -> Result<i32, Error> {
    let cores = model::cores();
    // An open run without -n is sized by its --duration; async then gets a generous W.
    let w = tasks.unwrap_or(if base.open.rate.is_some() { 1000 } else { 10 });
    let opts = study::StudyOptions {
        workloads: vec![workload.to_string()],
        models: vec![
            "seq".into(),
            "thread".into(),
            format!("pool:{cores}"),
            format!("async:{}", w.max(1)),
            "fork".into(),
        ],
        tasks: tasks.into_iter().collect(),
        repeat: repeat.or(base.open.default_repeat(3)),
        warmup: Some(0),
        ..base
    };
    run(&opts, out, command)
}
