//! Our own binary started again for part of the work, as one typed value: a run of a cell
//! (`__run`, started by the study runner), one task (`__task`, by the `spawn` model) or a
//! queue worker (`__worker`, by `jobs-procs:W`). [`SelfCall::spawn`] is the one place that
//! builds these command lines, and [`SelfCall::receive`] the one place a child decodes its
//! request: each call carries the whole [`WorkloadRecipe`] (workload, its options, lock settings,
//! jobs backend), so no option reaches a child any other way.
//!
//! Requests travel on file descriptor 4, never on argv or in the environment: the request
//! holds the workload spec, the options (headers may hold tokens) and the jobs backend URL,
//! which may carry a password, and every local user can read any process's argv with `ps`.
//! Every child dies with the thread that started it (`process::die_with_parent`), so nothing
//! outlives a killed study.
//!
//! This module sits below the models (which start `__task` and `__worker` children) and the
//! study runner (`__run`); it knows nothing of plans or results.

use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};
use crate::os::process;
use crate::workload::gil;
use crate::workload::{self, MailSink, Workload, WorkloadOptions};

/// The smallest `--stack-size`.
pub const STACK_MIN: usize = 16 << 10;

/// The largest `--stack-size`.
pub const STACK_MAX: usize = 1 << 30;

/// What every run of a study shares besides its workload and its model: the flags a child
/// process reads. Each is a field with its flag here, its check in [`RunSettings::check`] and
/// its use where a model or the lock reads it: `concur run` flattens this group, the plan
/// checks it once, every request carries it whole, and an agent checks what it is sent with
/// the same code.
#[derive(clap::Args, Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// The emulated lock's switch interval
    #[arg(long, value_name = "DURATION", default_value = "5ms", value_parser = crate::base::units::parse_duration)]
    pub switch_interval: Duration,
    /// Stack size of the threads that models create (thread, pool, rayon, async)
    #[arg(long, value_name = "SIZE", default_value = "2M", value_parser = parse_bytes)]
    pub stack_size: usize,
    /// The most tasks each run's timeline and trace keep (1 to 1,000,000), sampled evenly by task index when a run has more
    #[arg(long, value_name = "N", default_value = "10000", value_parser = parse_trace_tasks)]
    #[serde(default = "trace_tasks_default")]
    pub trace_tasks: usize,
}

fn trace_tasks_default() -> usize {
    crate::measure::TRACE_TASKS_DEFAULT
}

/// `--trace-tasks N`: a whole number; its range is [`RunSettings::check`]'s.
pub fn parse_trace_tasks(s: &str) -> std::result::Result<usize, String> {
    s.trim().parse::<usize>().map_err(|_| {
        format!(
            "'{s}' is not a number of tasks (allowed: a whole number from 1 to {})",
            crate::base::units::thousands(crate::measure::TRACE_TASKS_MAX as u64)
        )
    })
}

impl Default for RunSettings {
    fn default() -> Self {
        crate::base::clap_defaults::defaults()
    }
}

impl RunSettings {
    /// Whether each setting is within what a run can use: a usage error naming the flag and
    /// its range otherwise.
    pub fn check(&self) -> Result<()> {
        if self.switch_interval < Duration::from_micros(1)
            || self.switch_interval > Duration::from_secs(1)
        {
            return Err(Error::flag(
                "--switch-interval",
                format!(
                    "--switch-interval '{}' must be from 1us to 1s",
                    crate::base::units::fmt_duration_spec(self.switch_interval)
                ),
            ));
        }
        if !(STACK_MIN..=STACK_MAX).contains(&self.stack_size) {
            return Err(Error::flag(
                "--stack-size",
                format!("--stack-size '{}' must be from 16k to 1G", self.stack_size),
            ));
        }
        if !(1..=crate::measure::TRACE_TASKS_MAX).contains(&self.trace_tasks) {
            return Err(Error::flag(
                "--trace-tasks",
                format!(
                    "--trace-tasks '{}' must be from 1 to {} (tasks kept in each run's timeline and trace)",
                    self.trace_tasks,
                    crate::base::units::thousands(crate::measure::TRACE_TASKS_MAX as u64)
                ),
            ));
        }
        Ok(())
    }
}

/// Parses a size flag (`2M`, `64k`) into bytes.
fn parse_bytes(s: &str) -> std::result::Result<usize, String> {
    let n = crate::base::units::parse_size(s)?;
    usize::try_from(n).map_err(|_| format!("size '{s}' is too large for this machine"))
}

/// Everything a task needs to be re-created in another process: the workload, its options,
/// the lock settings and the jobs backend (every call below carries one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadRecipe {
    /// The workload spec.
    pub workload: String,
    /// Run-wide workload options.
    pub options: WorkloadOptions,
    /// Whether the interpreter-lock emulation is on (the cell's: the gil study runs both).
    pub gil: bool,
    /// The run's settings (the lock's switch interval, the threads' stack size).
    pub settings: RunSettings,
    /// The jobs models' backend: `sqlite:PATH` for `jobs:W` (`None`: a fresh file per run),
    /// `redis://...` for `jobs-redis:W`. Serialized whole (password included) for the child.
    #[serde(default)]
    pub jobs_backend: Option<crate::jobs::BackendUrl>,
}

impl WorkloadRecipe {
    /// Applies the lock settings to this process and parses the workload.
    pub fn install(&self) -> Result<Arc<dyn Workload>> {
        gil::configure(self.gil, self.settings.switch_interval);
        workload::parse(&self.workload, &self.options)
    }
}

/// What the runner asks a `__run` child to do: one repetition of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    /// The workload and lock settings.
    pub recipe: WorkloadRecipe,
    /// The model spec, canonical (`pool:4`, a `ModelSpec`'s text): the child decodes it with
    /// the parser the plan checked it with.
    pub model: String,
    /// How many tasks.
    pub tasks: usize,
    /// Open-model runs (`--rate`): the schedule the tasks are released on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<crate::measure::schedule::OpenRun>,
    /// A run over several hosts: this host's share of the cell and when it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<PartRequest>,
    /// Whether the child finds a counter page on fd 5 (`process::PAGE_FD`) to count its
    /// tasks into. Set by the spawn that puts one there ([`SelfCall::spawn_with_page`]),
    /// whatever the request said before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub counter_page: bool,
    /// Whether the run's timeline is kept (a cell's first counted run): its traced tasks'
    /// phases are then recorded. Other runs record none and pay nothing for them.
    #[serde(default)]
    pub trace: bool,
}

/// One host's share of a run over several hosts (`--hosts K`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PartRequest {
    /// Which share of the cell's tasks (or of its arrivals: the open schedule carries the
    /// same segment).
    pub segment: crate::measure::schedule::Segment,
    /// The common start, on this machine's monotonic clock (`measure::mono_ns`): the hub's
    /// announced instant, translated through this host's measured clock offset.
    pub start_mono_ns: u64,
}

/// A process of our own binary that concur starts for part of its work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "lowercase")]
pub enum SelfCall {
    /// `concur __run`: one repetition of one cell, in a process group of its own; it reports
    /// a [`crate::runner::child::ChildReport`] on fd 3.
    Run(RunRequest),
    /// `concur __task`: task `index` of the workload in `env`; it reports the task's record on
    /// fd 3.
    Task {
        /// The workload and lock settings.
        recipe: WorkloadRecipe,
        /// Which task.
        index: usize,
    },
    /// `concur __worker`: one worker process of `jobs-procs:W`, one thread working the run's
    /// queue on `env.jobs_backend` and appending each acknowledged task's record to `records`.
    JobsWorker {
        /// The workload and lock settings, and the queue's backend (`jobs_backend`).
        recipe: WorkloadRecipe,
        /// The run's own queue.
        queue: String,
        /// The file the records go to.
        records: PathBuf,
    },
    /// `concur __jobs-work`: the worker of `concur jobs work`, run by its supervisor
    /// ([`crate::jobs::supervisor`]), telling it which jobs it runs in the job slots on fd 5
    /// ([`crate::jobs::slots`]).
    QueueWorker(crate::jobs::supervisor::ChildRequest),
}

impl SelfCall {
    /// The hidden subcommand that receives a `Run`.
    pub const RUN: &'static str = "__run";
    /// The hidden subcommand that receives a `Task`.
    pub const TASK: &'static str = "__task";
    /// The hidden subcommand that receives a `JobsWorker`.
    pub const WORKER: &'static str = "__worker";
    /// The hidden subcommand that receives a `QueueWorker`.
    pub const QUEUE_WORKER: &'static str = "__jobs-work";
    /// Every hidden subcommand: a process started with one of them serves its request.
    pub const NAMES: [&'static str; 4] = [Self::RUN, Self::TASK, Self::WORKER, Self::QUEUE_WORKER];

    /// Starts this call as a child of `exe` (our own binary), its request on fd 4. `Run` and
    /// `Task` report on a pipe at fd 3, whose read end is returned; a `JobsWorker` reports
    /// through its records file and a `QueueWorker` through its job slots, and return none.
    /// The child dies with the calling thread, which must outlive it (see
    /// `process::die_with_parent`).
    pub fn spawn(&self, exe: &Path) -> io::Result<(Child, Option<File>)> {
        self.spawn_with_page(exe, None)
    }

    /// [`SelfCall::spawn`], with `page` (memory shared with the child) as its fd 5: a `Run`'s
    /// counter page, its request then saying it is there (and that it is not when `page` is
    /// `None`); a `QueueWorker`'s job slots. Other calls get no page.
    pub fn spawn_with_page(
        &self,
        exe: &Path,
        page: Option<std::os::fd::BorrowedFd<'_>>,
    ) -> io::Result<(Child, Option<File>)> {
        let mut call = std::borrow::Cow::Borrowed(self);
        if let SelfCall::Run(req) = self {
            if req.counter_page != page.is_some() {
                let mut req = req.clone();
                req.counter_page = page.is_some();
                call = std::borrow::Cow::Owned(SelfCall::Run(req));
            }
        }
        let page = page.filter(|_| matches!(self, SelfCall::Run(_) | SelfCall::QueueWorker(_)));
        let mut cmd = Command::new(exe);
        cmd.stdin(Stdio::null());
        match self {
            SelfCall::Run(req) => {
                cmd.arg(Self::RUN)
                    .stdout(stdout_for(req.recipe.options.mail_sink))
                    .stderr(Stdio::piped());
                // SAFETY: setpgid is async-signal-safe; a group of its own lets the runner
                // kill the run's whole tree (forked and spawned tasks included) on timeout,
                // and keeps Ctrl-C the runner's to handle.
                unsafe {
                    cmd.pre_exec(|| {
                        if libc::setpgid(0, 0) < 0 {
                            return Err(io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
            }
            SelfCall::Task { recipe, .. } => {
                cmd.arg(Self::TASK)
                    .stdout(stdout_for(recipe.options.mail_sink));
            }
            // Workers run with the mail workload's default sink and report nothing but their
            // records, so every standard stream is closed.
            SelfCall::JobsWorker { .. } => {
                cmd.arg(Self::WORKER)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
            }
            // The worker of `concur jobs work` keeps the command's stdout and stderr (its lines
            // are the command's) and its process group (Ctrl-C reaches both).
            SelfCall::QueueWorker(_) => {
                cmd.arg(Self::QUEUE_WORKER);
            }
        }
        process::die_with_parent(&mut cmd);
        let request = serde_json::to_vec(&*call).map_err(io::Error::other)?;
        let request = process::request_file(&request)?;
        let (child, report) = process::spawn_with_report(&mut cmd, Some(&request), page)?;
        // A worker reports through its records file, a queue worker through its job slots:
        // their pipe is not read.
        let report = matches!(self, SelfCall::Run(_) | SelfCall::Task { .. }).then_some(report);
        Ok((child, report))
    }

    /// Whether this process was started by concur for part of a study's work: its first
    /// argument is one of the hidden subcommands.
    pub fn started_as_child() -> bool {
        std::env::args_os()
            .nth(1)
            .is_some_and(|a| Self::NAMES.iter().any(|n| a == *n))
    }

    /// The request on fd 4, left in place for [`SelfCall::receive`].
    pub fn peek() -> Result<SelfCall> {
        let text = process::peek_request().map_err(|e| Error::usage(e.to_string()))?;
        serde_json::from_str(&text).map_err(|e| Error::usage(format!("bad request on fd 4: {e}")))
    }

    /// The workload spec the request is about (runs and tasks), if any.
    pub fn workload(&self) -> Option<&str> {
        match self {
            SelfCall::Run(req) => Some(&req.recipe.workload),
            SelfCall::Task { recipe, .. } | SelfCall::JobsWorker { recipe, .. } => {
                Some(&recipe.workload)
            }
            SelfCall::QueueWorker(_) => None,
        }
    }

    /// In a child of ours: the request on fd 4, or the one-line error that this
    /// command is run by concur itself when it is missing (someone typed the hidden command).
    pub fn receive() -> Result<SelfCall> {
        let text = process::take_request().map_err(|e| Error::usage(e.to_string()))?;
        serde_json::from_str(&text).map_err(|e| Error::usage(format!("bad request on fd 4: {e}")))
    }
}

/// A child's stdout: the terminal's when the mail workload prints there, else nowhere.
fn stdout_for(sink: MailSink) -> Stdio {
    if sink == MailSink::Stdout {
        Stdio::inherit()
    } else {
        Stdio::null()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::WorkloadOptions;

    fn env() -> WorkloadRecipe {
        WorkloadRecipe {
            workload: "sleep:1ms".into(),
            options: WorkloadOptions::default(),
            gil: false,
            settings: RunSettings::default(),
            jobs_backend: Some("redis://:hunter2@localhost:6379/0".parse().unwrap()),
        }
    }

    #[test]
    fn requests_round_trip_through_json() {
        let calls = [
            SelfCall::Run(RunRequest {
                recipe: env(),
                model: "pool:2".into(),
                tasks: 3,
                open: Some(crate::measure::schedule::OpenRun {
                    schedule: crate::measure::schedule::Schedule::fixed(10.0, 3),
                    interval_us: 1_000_000,
                    grain_us: 1000,
                }),
                part: None,
                counter_page: false,
                trace: true,
            }),
            SelfCall::Task {
                recipe: env(),
                index: 7,
            },
            SelfCall::JobsWorker {
                recipe: env(),
                queue: "q".into(),
                records: "/tmp/r.jsonl".into(),
            },
        ];
        for c in calls {
            let text = serde_json::to_string(&c).unwrap();
            assert!(text.contains("hunter2"), "{text}");
            assert_eq!(serde_json::from_str::<SelfCall>(&text).unwrap(), c);
        }
    }

    #[test]
    fn a_request_file_reads_back_from_its_start() {
        use std::io::Read;
        let mut f = process::request_file(b"{\"call\":\"task\"}").unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "{\"call\":\"task\"}");
    }
}
