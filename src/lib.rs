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
//! [`plan`] validates specs and options into a plan once; [`study::execute`] runs
//! every repetition of every cell through an [`study::Executor`] (a fresh child process per
//! run); [`analysis`] turns run lines into cells and advice; [`report::publish`] and [`report`] write
//! them out. `docs/architecture.md` in the repository draws it.

#![warn(missing_docs)]

pub mod analysis;
pub mod base;
pub mod classic;
#[doc(hidden)]
pub mod cli;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod hub;
pub mod jobs;
pub mod lab;
pub mod measure;
pub mod model;
pub mod os;
pub mod plan;
pub mod report;
pub(crate) mod runner;
pub mod server;
pub mod study;
pub mod workload;

pub use analysis::results::{CellResult, Isolation, RunResult};
pub use base::error::{Error, Input};
pub use lab::{init, Lab, LabReport};
pub use model::Model;
pub use plan::options::StudyOptions;
pub use report::publish::Outputs;
pub use study::conduct::{advise, report_file, run};
pub use workload::custom::TaskOutput;
pub use workload::{Nature, TaskError, Workload};

pub use base::allocator::{set_allocator, set_allocator_for_measured_processes};
pub use base::version::VERSION;

/// docs/library.md's examples, compiled and (but for those marked `no_run`) run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/library.md")]
pub struct LibraryDocs;
