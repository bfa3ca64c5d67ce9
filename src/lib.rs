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
pub(crate) mod app;
pub(crate) mod bind;
pub(crate) mod clap_defaults;
pub mod classic;
#[doc(hidden)]
pub mod cli;
pub mod error;
pub(crate) mod files;
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod gil;
pub mod hub;
pub(crate) mod interrupt;
pub mod jobs;
pub mod lab;
pub mod measure;
pub mod model;
pub mod options;
pub(crate) mod output;
pub(crate) mod process;
pub mod publish;
pub mod report;
pub(crate) mod secret;
pub(crate) mod selfcall;
pub mod server;
pub(crate) mod stats;
pub mod study;
pub mod tls;
pub mod units;
pub(crate) mod usage_error;
pub mod workload;

pub use analysis::results::{CellResult, Isolation, RunResult};
pub use app::{advise, report_file, run};
pub use error::{Error, Input};
pub use lab::{init, Lab, LabReport};
pub use model::Model;
pub use options::StudyOptions;
pub use publish::Outputs;
pub use workload::custom::TaskOutput;
pub use workload::{Nature, TaskError, Workload};

/// The version written into every results file.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

static ALLOCATOR: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Names the process's global allocator for the results' meta line (`allocator`). The `concur`
/// binary calls it before anything else with `jemalloc`, `mimalloc` or `system` (the C
/// library's malloc). A program of the user's that runs concur as a library may name its own
/// (`tcmalloc`, say); its files otherwise say nothing of the allocator, which concur cannot see
/// from inside. The first name given stays.
pub fn set_allocator(name: &'static str) {
    let _ = ALLOCATOR.set(name);
}

/// The process's global allocator as [`set_allocator`] named it.
pub fn allocator() -> Option<&'static str> {
    ALLOCATOR.get().copied()
}
