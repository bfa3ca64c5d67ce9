//! The `concur jobs` commands: enqueue, work, stats, retry and dead.

use crate::base::error::{Error, Result};
use crate::jobs::process::{check_queue, open_shared};
use crate::jobs::{BackendUrl, FailedSet, Job, DEFAULT_QUEUE, NOOP_CLASS};
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
