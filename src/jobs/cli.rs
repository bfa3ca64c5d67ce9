//! The `concur jobs` commands: enqueue, work, stats, retry and dead.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::worker::{work, WorkOptions};
use super::{open, Backend, BackendUrl, FailedSet, Job, DEFAULT_QUEUE, NOOP_CLASS};
use crate::error::{Error, Result};
use crate::interrupt::{install_interrupt_handler, interrupted};
use crate::workload::{self, WorkloadOptions};

/// Opens the backend a command shares with other processes: `memory` lives and dies with one
/// process, so it is refused here (the `jobs-memory:W` model uses it); a Redis password that
/// would cross the network in clear text is warned of on stderr.
fn open_shared(url: &BackendUrl) -> Result<Arc<dyn Backend>> {
    if *url == BackendUrl::Memory {
        return Err(Error::usage(
            "backend 'memory' lives inside one process, so separate `concur jobs` commands cannot share it; use sqlite, sqlite:PATH or redis://HOST:PORT/DB (or the jobs-memory:W model)",
        ));
    }
    if let Some(w) = url.cleartext_password_warning("--jobs-backend") {
        crate::output::Terminal::new(crate::output::Feedback::Lines).warning(w);
    }
    open(url)
}

/// Checks a queue name (Redis keys embed it after a `:`).
pub fn check_queue(q: &str) -> Result<()> {
    if q.is_empty() || q.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::usage(format!(
            "bad queue '{q}': a queue name is non-empty and has no spaces"
        )));
    }
    Ok(())
}

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
        return Err(Error::usage(format!("-n '{n}' must be from 1 to 10000000")));
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

/// `concur jobs work`: runs until SIGTERM or Ctrl-C (or the queues drain, with
/// `until_empty`), then stops gracefully.
pub fn work_main(url: &BackendUrl, opts: &WorkOptions) -> Result<i32> {
    for q in &opts.queues {
        check_queue(q)?;
    }
    if opts.concurrency == 0 || opts.concurrency > 10_000 {
        return Err(Error::usage(format!(
            "-c '{}' must be from 1 to 10000",
            opts.concurrency
        )));
    }
    let backend = open_shared(url)?;
    install_interrupt_handler();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || loop {
        if interrupted() {
            flag.store(true, Ordering::SeqCst);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    });
    eprintln!(
        "concur jobs work: {} threads on {} ({})",
        opts.concurrency,
        opts.queues.join(", "),
        backend.describe()
    );
    let s = work(backend, opts, &stop)?;
    eprintln!(
        "concur jobs work: stopped: {} processed, {} failed, {} returned to their queues",
        s.processed, s.failed, s.returned
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
            let p = crate::output::escape_json_controls(&p);
            println!("{}", crate::output::escape_controls(&p));
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
