//! concur as a library: put a function of your own under every concurrency model, each run in
//! a fresh process of your own binary, with the statistics, the advice and the reports of the
//! command line.
//!
//! Your `main` calls [`init`] first. When concur's runner starts your binary again for one run
//! (or one task of the `spawn` model), [`Lab::run`] then performs that run and ends the
//! process; in the first process it runs the study and returns its [`LabReport`]. Without
//! [`init`], every run happens inside the calling process: the lab warns once and records
//! `"isolation": "in-process"`.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::analysis::advice::Advice;
use crate::analysis::compare::Comparison;
use crate::analysis::results::{CellResult, Meta, RunResult};
use crate::analysis::Analysis;
use crate::base::error::{Error, Result};
use crate::model::selfcall::SelfCall;
use crate::plan::options::OutputOptions;
use crate::report::{self, Report};
use crate::study::conduct::{command_line, conduct, Conduct, Isolation};
use crate::study::{self, StudyOptions};
use crate::workload::custom::{self, FnWorkload, TaskOutput};
use crate::workload::{Nature, Workload};

static INIT: AtomicBool = AtomicBool::new(false);
static WARNED: AtomicBool = AtomicBool::new(false);

/// Call first in `main`: it lets every run of a [`Lab`] happen in a fresh process of this
/// binary. It returns at once; in a process that concur's runner started for one run, the
/// next [`Lab::run`] performs that run and ends the process.
pub fn init() {
    INIT.store(true, Ordering::SeqCst);
}

/// A study of workloads of your own under the models you name, built step by step.
///
/// ```no_run
/// let report = concur::Lab::new("sum")
///     .task(|i| (0..100_000u64).map(|x| x ^ i as u64).sum::<u64>() % 7)
///     .models(["seq", "pool:2", "rayon:2", "async:4"])
///     .tasks([10, 100])
///     .repeat(3)
///     .run()?;
/// report.print()?;
/// # Ok::<(), concur::Error>(())
/// ```
#[derive(Clone)]
pub struct Lab {
    name: String,
    workloads: Vec<Arc<dyn Workload>>,
    nature: Nature,
    options: StudyOptions,
    /// The command line's output group: a lab sets its baseline flags, shows nothing on
    /// stdout and is quiet (its report is returned, not printed).
    output: OutputOptions,
    results: Option<PathBuf>,
}

impl Lab {
    /// A lab named `name`: the study's name, and the name of its first closure workload.
    pub fn new(name: &str) -> Lab {
        Lab {
            name: name.to_string(),
            workloads: Vec::new(),
            nature: Nature::Measured,
            options: StudyOptions {
                name: Some(name.to_string()),
                ..StudyOptions::default()
            },
            output: OutputOptions {
                format: None,
                quiet: true,
                ..OutputOptions::default()
            },
            results: None,
        }
    }

    fn next_name(&self) -> String {
        match self.workloads.len() {
            0 => self.name.clone(),
            n => format!("{}-{}", self.name, n + 1),
        }
    }

    /// What bounds the closures added after this call. Undeclared, it is measured: the `seq`
    /// cell's effective cores tell CPU-bound from waiting work, and the ideal follows. Declared
    /// (`Nature::Cpu`, `Nature::BlockingIo`, `Nature::Delay(d)`), the ideal uses it, and the
    /// async models run blocking closures on their blocking pool.
    pub fn nature(mut self, nature: Nature) -> Lab {
        self.nature = nature;
        self
    }

    /// Adds a blocking closure: task `i` runs `f(i)`, which returns nothing, a byte count (the
    /// checksum's share), or a `Result` whose error fails that task with its message. A panic
    /// fails the task too. Named after the lab (`NAME`, then `NAME-2`, ...).
    pub fn task<F, T>(mut self, f: F) -> Lab
    where
        F: Fn(usize) -> T + Send + Sync + 'static,
        T: TaskOutput,
    {
        let name = self.next_name();
        self.workloads
            .push(Arc::new(FnWorkload::blocking(&name, self.nature, f)));
        self
    }

    /// Adds an async closure: task `i` awaits `f(i)`. The async models run it on their event
    /// loop natively; the others on a small runtime of the worker's own.
    pub fn async_task<F, Fut, T>(mut self, f: F) -> Lab
    where
        F: Fn(usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = T> + Send + 'static,
        T: TaskOutput,
    {
        let name = self.next_name();
        self.workloads
            .push(Arc::new(FnWorkload::future(&name, self.nature, f)));
        self
    }

    /// Adds a workload of your own type (its `spec` names it) or a built-in one by spec
    /// (`"fib:30"`), to compare against.
    pub fn workload(mut self, w: impl Workload) -> Lab {
        self.workloads.push(Arc::new(w));
        self
    }

    /// Adds a built-in workload by spec (`"fib:0"`, `"sleep:10ms"`), e.g. as a reference.
    pub fn builtin(mut self, spec: &str) -> Lab {
        self.options.workloads.push(spec.to_string());
        self
    }

    /// The models, as on the command line (`seq`, `thread`, `pool:4`, `rayon:4`, `async:16`,
    /// `fork`, ...).
    pub fn models<I, S>(mut self, models: I) -> Lab
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.options.models = models.into_iter().map(Into::into).collect();
        self
    }

    /// The task counts: one cell per model and count.
    pub fn tasks<I: IntoIterator<Item = usize>>(mut self, tasks: I) -> Lab {
        self.options.tasks = tasks.into_iter().collect();
        self
    }

    /// Counted runs per cell (5 by default).
    pub fn repeat(mut self, n: usize) -> Lab {
        self.options.repeat.repeat = Some(n);
        self
    }

    /// Uncounted warm-up runs per cell (1 by default).
    pub fn warmup(mut self, n: usize) -> Lab {
        self.options.warmup = Some(n);
        self
    }

    /// Kills a run that takes longer (fresh processes only; 300 s by default).
    pub fn timeout(mut self, d: Duration) -> Lab {
        self.options.timeout = d;
        self
    }

    /// Runs every cell under the emulated interpreter lock (`--gil`).
    pub fn gil(mut self, on: bool) -> Lab {
        self.options.lock.gil = on;
        self
    }

    /// The emulated lock's switch interval (`--switch-interval`, 5 ms by default).
    pub fn switch_interval(mut self, d: Duration) -> Lab {
        self.options.run.switch_interval = d;
        self
    }

    /// Stack size of the threads the models create (`--stack-size`).
    pub fn stack_size(mut self, bytes: usize) -> Lab {
        self.options.run.stack_size = bytes;
        self
    }

    /// The most tasks each run's timeline (and trace) keeps, sampled evenly by task index
    /// above it (`--trace-tasks`, 10,000 by default; 1 to 1,000,000).
    pub fn trace_tasks(mut self, n: usize) -> Lab {
        self.options.run.trace_tasks = n;
        self
    }

    /// Open-model runs (`--rate`): tasks released at `rate` per second (`"500"`), a ramp
    /// (`"100..2000"`), or `"auto"` with [`Lab::slo`] (the highest rate each model sustains).
    /// Latency is then counted from each task's scheduled time.
    pub fn rate(mut self, rate: &str) -> Lab {
        self.options.open.rate = Some(rate.to_string());
        self
    }

    /// With [`Lab::rate`]: release tasks for this long instead of [`Lab::tasks`] of them.
    pub fn duration(mut self, d: Duration) -> Lab {
        self.options.open.duration = Some(d);
        self
    }

    /// With `rate("auto")`: the latency to keep, e.g. `"p99<100ms"`.
    pub fn slo(mut self, slo: &str) -> Lab {
        self.options.open.slo = Some(slo.to_string());
        self
    }

    /// Also writes the JSON Lines results file (`--json FILE`).
    pub fn results_file(mut self, path: impl Into<PathBuf>) -> Lab {
        self.results = Some(path.into());
        self
    }

    /// Compares with a baseline: a name saved with [`Lab::save_baseline`] or a results file.
    pub fn baseline(mut self, name_or_file: &str) -> Lab {
        self.output.baseline = Some(name_or_file.to_string());
        self
    }

    /// Saves the results as a baseline under `concur-results/baselines/NAME.jsonl`.
    pub fn save_baseline(mut self, name: &str) -> Lab {
        self.output.save_baseline = Some(name.to_string());
        self
    }

    /// Runs every cell's work on agents of the hub at `url` (a Redis URL), split over every
    /// agent alive or over each count of [`Lab::hosts`]. Each agent is this same binary,
    /// started on its host as `my-binary agent --hub URL` (its `main` calls [`init`] and then
    /// a lab's `run`, which becomes the agent): the closures run there as they would here.
    pub fn hub(mut self, url: &str) -> Lab {
        self.options.hub.set_url(url);
        self
    }

    /// With [`Lab::hub`]: split each cell's work over each of these host counts
    /// (`--hosts 1,2,3`).
    pub fn hosts<I: IntoIterator<Item = usize>>(mut self, counts: I) -> Lab {
        self.options.hub.hosts = counts.into_iter().collect();
        self
    }

    /// Runs the study and returns its report; in a process concur's runner started for one
    /// run, performs that run and ends the process instead. Bad input (an unknown model, a
    /// workload name taken by a built-in one) is an [`Error::Usage`] before any run.
    pub fn run(self) -> Result<LabReport> {
        let mut opts = self.options.clone();
        for w in &self.workloads {
            custom::register(w.clone()).map_err(Error::usage)?;
            opts.workloads.push(w.spec());
        }
        // `my-binary agent --hub URL`: this binary joins a hub as an agent, and the runs it
        // is sent start this binary again, so this lab's closures run on this host.
        if let Some(args) = crate::cli::agent::command_line() {
            if !INIT.load(Ordering::SeqCst) {
                return Err(Error::usage(
                    "an agent runs each share in a fresh process of this binary: call concur::init() first in main",
                ));
            }
            let code = match crate::cli::agent::run(args) {
                Ok(code) => code,
                Err(e) => {
                    crate::os::terminal::fatal(&e);
                    e.exit_code()
                }
            };
            std::process::exit(code);
        }
        if SelfCall::started_as_child() {
            // In a run's process: the lab whose workload the request names performs it and
            // ends the process; the binary's other labs step aside with an empty report.
            let ours = SelfCall::peek()?
                .workload()
                .is_some_and(|spec| opts.workloads.iter().any(|w| w == spec));
            if ours {
                serve_child();
            }
            return Ok(LabReport::empty());
        }
        if opts.models.is_empty() {
            return Err(Error::usage(format!(
                "lab '{}' has no models: add .models([\"seq\", \"pool:4\", ...])",
                self.name
            )));
        }
        if opts.workloads.is_empty() {
            return Err(Error::usage(format!(
                "lab '{}' has no workload: add .task(|i| ...), .async_task(...) or .workload(...)",
                self.name
            )));
        }
        let isolation = if INIT.load(Ordering::SeqCst) {
            Isolation::FreshProcess
        } else {
            if !WARNED.swap(true, Ordering::SeqCst) {
                crate::os::terminal::warn_always(format_args!(
                    "concur::init() was not called first in main, so every run of lab '{}' happens inside this process (runtimes, pools and the allocator carry over; --timeout cannot stop a run); results say \"isolation\": \"in-process\"",
                    self.name
                ));
            }
            Isolation::InProcess
        };
        // A lab's failed runs are in its report, for the caller to judge.
        let out = self.output.clone().outputs(self.results.clone(), true);
        let done = conduct(
            &opts,
            &out,
            Conduct {
                isolation,
                feedback: study::Feedback::Quiet,
                default_results: false,
                command: command_line(),
            },
        )?;
        Ok(LabReport {
            meta: done.outcome.meta,
            runs: done.outcome.runs,
            analysis: done.outcome.analysis,
            advice: done.conclusion.advice,
            comparison: done.conclusion.comparison,
        })
    }
}

/// Performs the one run, task or worker this process was started for, then ends it.
fn serve_child() -> ! {
    match crate::runner::child::serve() {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            crate::os::terminal::fatal(&e);
            std::process::exit(e.exit_code());
        }
    }
}

/// What a [`Lab`] measured: every run, the cells (median and CI, speedup, efficiency, ideal,
/// memory, latency), the advice, and the comparison with a baseline if one was named.
#[derive(Debug, Clone)]
pub struct LabReport {
    /// The meta line: machine, time, command.
    pub meta: Meta,
    /// Every counted run.
    pub runs: Vec<RunResult>,
    /// The cells and the warnings.
    pub analysis: Analysis,
    /// The advice per group of cells.
    pub advice: Vec<Advice>,
    /// The comparison with the baseline, if one was named.
    pub comparison: Option<Comparison>,
}

impl LabReport {
    /// The report of a lab that stepped aside in a run's process.
    fn empty() -> LabReport {
        LabReport {
            meta: study::meta(
                crate::runner::machine::machine(),
                &[],
                Vec::new(),
                Vec::new(),
            ),
            runs: Vec::new(),
            analysis: Analysis::default(),
            advice: Vec::new(),
            comparison: None,
        }
    }

    /// Every cell, in run order.
    pub fn cells(&self) -> &[CellResult] {
        &self.analysis.cells
    }

    /// The cell of `model` (its canonical spec, e.g. `pool:4`) at `tasks` tasks, of the
    /// first workload that has one.
    pub fn cell(&self, model: &str, tasks: usize) -> Option<&CellResult> {
        self.analysis
            .cells
            .iter()
            .find(|c| c.key.model == model && c.key.tasks == tasks)
    }

    /// Counted runs that failed (a failed task, a crash, a timeout).
    pub fn failed_runs(&self) -> usize {
        crate::report::publish::failed_runs(&self.runs).len()
    }

    /// The report in one of the command line's formats (`table`, `markdown`, `csv`, `ruby`,
    /// `json`, `html`).
    pub fn render(&self, format: &str) -> Result<String> {
        let f = report::export::format(format)?;
        Ok(f.exporter.render(&Report {
            analysis: &self.analysis,
            meta: &self.meta,
            runs: &self.runs,
            comparison: self.comparison.as_ref(),
            advice: &self.advice,
        }))
    }

    /// Prints the tables and the advice on stdout, as `concur run` does.
    pub fn print(&self) -> Result<()> {
        use std::io::Write;
        let text = self.render("table")?;
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes()).map_err(Error::stdout)?;
        out.flush().map_err(Error::stdout)
    }

    /// Writes the report in `format` to `path` (an HTML file, a CSV...).
    pub fn write(&self, format: &str, path: impl AsRef<std::path::Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.render(format)?)
            .map_err(|e| Error::io(format!("writing '{}'", path.display()), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::results::{Isolation, RunStatus};

    #[test]
    fn without_init_runs_happen_in_process_and_say_so() {
        // The test harness never calls init(): the lab falls back to this process.
        let report = Lab::new("lab-in-process")
            .task(|i| i as u64 + 1)
            .models(["seq", "pool:2", "async:2"])
            .tasks([5])
            .repeat(2)
            .warmup(0)
            .run()
            .unwrap();
        assert!(WARNED.load(Ordering::SeqCst));
        assert_eq!(report.runs.len(), 6);
        for r in &report.runs {
            assert_eq!(r.status, RunStatus::Ok, "{:?}", r.error);
            assert_eq!(r.isolation, Isolation::InProcess);
            assert_eq!(r.pid, Some(std::process::id()));
            assert_eq!(r.bytes, 15);
        }
        for c in report.cells() {
            assert_eq!(c.isolation, Isolation::InProcess);
        }
        let seq = report.cell("seq", 5).unwrap();
        assert!(seq.traits.baseline && seq.speedup == Some(1.0));
        let json: serde_json::Value =
            serde_json::from_str(&report.render("json").unwrap()).unwrap();
        assert_eq!(json["cells"][0]["isolation"], "in-process");
        assert!(report.render("yaml").is_err());
    }
}
