//! The `concur jobs` commands: enqueue, work, stats, retry and dead; their flags (clap) and
//! what each does.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::base::error::{Error, Result};
use crate::jobs::process::{check_queue, open_shared};
use crate::jobs::{BackendUrl, FailedSet, Job, DEFAULT_QUEUE, NOOP_CLASS};
use crate::plan::options::parse_duration;
use crate::workload::{self, WorkloadOptions};

/// `concur jobs enqueue`: pushes `n` task jobs of `workload` (indices 0..n) onto `queue`, or
/// `n` no-op jobs (class `Concur::Noop`) when `workload` is `None`; `retry` overrides
/// Sidekiq's default of 25 retries. Prints the number enqueued.
pub fn enqueue(
    url: &BackendUrl,
    workload_spec: Option<&str>,
    n: usize,
    queue: &str,
    retry: Option<u32>,
) -> Result<i32> {
    check_queue(queue)?;
    // Refuse a workload the workers could not parse, before anything is enqueued.
    let spec = match workload_spec {
        Some(s) => Some(workload::parse(s, &WorkloadOptions::default())?.spec()),
        None => None,
    };
    if n == 0 || n > 10_000_000 {
        return Err(Error::flag(
            "-n",
            format!("-n '{n}' must be from 1 to 10000000"),
        ));
    }
    let backend = open_shared(url)?;
    let mut batch = Vec::with_capacity(n.min(10_000));
    for i in 0..n {
        let mut j = match &spec {
            Some(spec) => Job::task(spec, i, queue),
            None => Job::new(NOOP_CLASS, vec![], queue),
        };
        if let Some(r) = retry {
            j.retry = r.into();
        }
        batch.push(j.to_json());
        if batch.len() == 10_000 {
            backend.enqueue(queue, &batch)?;
            batch.clear();
        }
    }
    if !batch.is_empty() {
        backend.enqueue(queue, &batch)?;
    }
    let what = spec.unwrap_or_else(|| NOOP_CLASS.to_string());
    println!(
        "enqueued {n} jobs of {what} on {queue} ({})",
        backend.describe()
    );
    Ok(0)
}

/// `concur jobs stats`: the counts, as a table or JSON.
pub fn stats(url: &BackendUrl, json: bool) -> Result<i32> {
    let s = open_shared(url)?.stats()?;
    if json {
        println!(
            "{}",
            serde_json::to_string(&s).map_err(|e| Error::Internal(e.to_string()))?
        );
    } else {
        println!("enqueued       {}", s.enqueued);
        println!("busy           {}", s.busy);
        println!("processed      {}", s.processed);
        println!("failed         {}", s.failed);
        println!("retry          {}", s.retry);
        println!("dead           {}", s.dead);
        println!("workers alive  {}", s.workers_alive);
    }
    Ok(0)
}

/// `concur jobs retry|dead`: lists the set (one JSON payload a line), or with `requeue` moves
/// all of it back onto its queues.
pub fn failed_set(url: &BackendUrl, set: FailedSet, requeue: bool, limit: usize) -> Result<i32> {
    let backend = open_shared(url)?;
    if requeue {
        let n = backend.requeue(set)?;
        println!("requeued {n} jobs from {}", set.name());
    } else {
        // A payload is whatever a writer of the queue put there: shown with no control
        // character a terminal would act on (C1 as JSON escapes, keeping JSON valid).
        for p in backend.list(set, limit)? {
            let p = crate::os::terminal::escape_json_controls(&p);
            println!("{}", crate::os::terminal::escape_controls(&p));
        }
    }
    Ok(0)
}

/// The queues to work on: the given ones, or `default`.
pub fn queues_or_default(q: Vec<String>) -> Vec<String> {
    if q.is_empty() {
        vec![DEFAULT_QUEUE.into()]
    } else {
        q
    }
}

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
    fn url(&self) -> Result<crate::jobs::BackendUrl> {
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
        /// Exit once the queues, in-flight jobs and retries are empty. A failing job is retried first (its `retry`, 25 by default: Sidekiq's backoff takes about 21 days over them; use --retry-delay, or `concur jobs retry --requeue`/`jobs dead` to look), and the worker says once in a while that it waits on retries
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

pub(super) fn jobs(c: JobsCommand) -> Result<i32> {
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
            crate::jobs::supervisor::supervise(template, &|req: &ChildRequest, slots| {
                let call = SelfCall::QueueWorker(req.clone());
                call.spawn_with_page(&exe, Some(slots))
                    .map(|(child, _)| child)
            })
        }
        JobsCommand::Stats { json, b } => jobs::stats(&b.url()?, json),
        JobsCommand::Retry(a) => {
            jobs::failed_set(&a.b.url()?, FailedSet::Retry, a.requeue, a.limit)
        }
        JobsCommand::Dead(a) => jobs::failed_set(&a.b.url()?, FailedSet::Dead, a.requeue, a.limit),
    }
}
