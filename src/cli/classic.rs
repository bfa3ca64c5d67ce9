//! The `jobs` and `classic` subcommands: their flags and the one library call each makes.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::base::error::Error;
use crate::plan::options::parse_duration;

/// `--jobs-backend`, which `concur jobs` also takes under its old name, `--backend` (hidden:
/// one name in the help, and the commands written before keep working).
#[derive(Args)]
#[command(mut_arg("jobs_backend", |a| a.alias("backend")))]
pub(super) struct BackendArg {
    #[command(flatten)]
    b: crate::plan::options::JobsBackendArg,
}

impl BackendArg {
    /// The queue: the one named, else `sqlite` (concur-results/jobs.sqlite).
    fn url(&self) -> Result<crate::jobs::BackendUrl, Error> {
        self.b.or_default()
    }
}

#[derive(Subcommand)]
pub(super) enum JobsCommand {
    /// Enqueue N jobs, each running one task of a workload (class Concur::Task)
    Enqueue {
        /// The workload spec each job runs (e.g. fib:30, mail, sleep:10ms)
        #[arg(
            long,
            short = 'w',
            value_name = "SPEC",
            required_unless_present = "noop"
        )]
        workload: Option<String>,
        /// Enqueue jobs that do nothing (class Concur::Noop), for throughput measurements
        #[arg(long, conflicts_with = "workload")]
        noop: bool,
        /// How many jobs
        #[arg(short = 'n', value_name = "N")]
        n: usize,
        /// The queue
        #[arg(long, short = 'q', default_value = "default")]
        queue: String,
        /// Retries before the dead set (Sidekiq's default: 25)
        #[arg(long, value_name = "N")]
        retry: Option<u32>,
        #[command(flatten)]
        b: BackendArg,
    },
    /// Work on queues until SIGTERM or Ctrl-C (run it on as many machines as share one Redis)
    Work {
        /// Worker threads
        #[arg(short = 'c', long, default_value = "10")]
        concurrency: usize,
        /// Queues in priority order (repeatable; default: default)
        #[arg(long = "queue", short = 'q', value_name = "Q")]
        queues: Vec<String>,
        /// Lease (SQLite) or heartbeat TTL (Redis): a dead worker's jobs return after this
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
        lease: std::time::Duration,
        /// After SIGTERM, how long running jobs may finish before they are returned to their queue
        #[arg(long, value_name = "DURATION", default_value = "25s", value_parser = parse_duration)]
        shutdown_timeout: std::time::Duration,
        /// A fixed delay before each retry instead of Sidekiq's backoff (count^4 + 15 + jitter s)
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        retry_delay: Option<std::time::Duration>,
        /// Append each job id to FILE after it ran, before its acknowledgement (duplicate audits)
        #[arg(long, value_name = "FILE")]
        done_log: Option<PathBuf>,
        /// Exit once the queues, in-flight jobs and retries are empty
        #[arg(long)]
        until_empty: bool,
        /// A job running longer fails (retried as any failure): its worker process is stopped and the other jobs it ran go back to their queues
        #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = parse_duration)]
        job_timeout: std::time::Duration,
        /// Append each task job's record (JSON line) to FILE once acknowledged (for jobs-procs:W)
        #[arg(long, value_name = "FILE", hide = true)]
        records: Option<PathBuf>,
        #[command(flatten)]
        allow: crate::plan::options::AllowOptions,
        #[command(flatten)]
        b: BackendArg,
    },
    /// Counts: enqueued, busy, processed, failed, retry, dead, workers alive
    Stats {
        /// One JSON object instead of a table
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        b: BackendArg,
    },
    /// List the retry set (one JSON job a line), or requeue it all now
    Retry(FailedSetArgs),
    /// List the dead set (one JSON job a line), or requeue it all
    Dead(FailedSetArgs),
}

#[derive(Subcommand)]
pub(super) enum ClassicCommand {
    /// Install Ruby, Celluloid, Sidekiq, Go, Node.js, a JDK, Elixir (apt-get) and the Python clients (a venv with pip)
    Install,
    /// Print a classic program's source (gil, crawl, mailer, tasks-go, ...: see list)
    Show {
        /// The program
        name: String,
    },
    /// List the classic programs
    List,
    /// The tasks study's floor of concur's own runtime: a bare tokio program that spawns N tasks that each wait, and prints their CONCUR line
    TokioTasks {
        /// How many tasks
        #[arg(long, default_value_t = 1)]
        tasks: usize,
        /// How long each waits, milliseconds
        #[arg(long, default_value_t = 10_000)]
        wait_ms: u64,
    },
}

pub(super) fn classic(c: ClassicCommand) -> Result<i32, Error> {
    match c {
        ClassicCommand::Install => crate::classic::install(),
        ClassicCommand::Show { name } => {
            print!("{}", crate::classic::show(&name)?);
            Ok(0)
        }
        ClassicCommand::List => {
            for p in crate::classic::PROGRAMS {
                println!("  {:12} {:10} {}", p.name, p.file, p.help);
            }
            Ok(0)
        }
        ClassicCommand::TokioTasks { tasks, wait_ms } => {
            let line = crate::classic::tokio_tasks::run(tasks, wait_ms)?;
            println!("{}{line}", crate::runner::supervise::CONCUR_PREFIX);
            Ok(0)
        }
    }
}

#[derive(Args)]
pub(super) struct FailedSetArgs {
    /// Move every job of the set back onto its queue
    #[arg(long)]
    requeue: bool,
    /// List at most this many
    #[arg(long, default_value = "100")]
    limit: usize,
    #[command(flatten)]
    b: BackendArg,
}

pub(super) fn jobs(c: JobsCommand) -> Result<i32, Error> {
    use super::jobs;
    use crate::jobs::supervisor::ChildRequest;
    use crate::jobs::FailedSet;
    use crate::model::selfcall::SelfCall;
    match c {
        JobsCommand::Enqueue {
            workload,
            noop: _,
            n,
            queue,
            retry,
            b,
        } => jobs::enqueue(&b.url()?, workload.as_deref(), n, &queue, retry),
        JobsCommand::Work {
            concurrency,
            queues,
            lease,
            shutdown_timeout,
            retry_delay,
            done_log,
            until_empty,
            job_timeout,
            records,
            allow,
            b,
        } => {
            let queues = jobs::queues_or_default(queues);
            crate::jobs::process::check_work(&queues, concurrency)?;
            // Checked here, so a bad list is one line before any child starts.
            allow.allowed()?;
            let template = ChildRequest {
                backend: b.url()?,
                concurrency,
                queues,
                lease,
                retry_delay,
                shutdown_deadline: shutdown_timeout,
                done_log,
                until_empty,
                records,
                allow_commands: allow.allow_commands,
                allow_targets: allow.allow_targets,
                worker: String::new(),
                alone: None,
                job_timeout,
            };
            let exe = std::env::current_exe()
                .map_err(|e| Error::Internal(format!("finding our own binary: {e}")))?;
            // Started and waited for on this thread, as the children's death-with-parent
            // signal requires.
            crate::jobs::supervisor::supervise(template, &|req: &ChildRequest| {
                let (child, pipe) = SelfCall::QueueWorker(req.clone()).spawn(&exe)?;
                let pipe = pipe.ok_or_else(|| std::io::Error::other("no progress pipe"))?;
                Ok((child, pipe))
            })
        }
        JobsCommand::Stats { json, b } => jobs::stats(&b.url()?, json),
        JobsCommand::Retry(a) => {
            jobs::failed_set(&a.b.url()?, FailedSet::Retry, a.requeue, a.limit)
        }
        JobsCommand::Dead(a) => jobs::failed_set(&a.b.url()?, FailedSet::Dead, a.requeue, a.limit),
    }
}
