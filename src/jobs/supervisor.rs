//! The supervisor of `concur jobs work`: a small parent that runs the real worker as a child
//! process of our own binary, so that no job can take the worker down for good.
//!
//! A job whose run kills its process (abort, segfault, stack overflow, an OOM kill) used to kill
//! `concur jobs work` itself; its lease expired, it went back to the front of the queue and
//! killed the next worker, and so on. Sidekiq Pro's `super_fetch` is the anchor: a job that
//! kills its process three times is a poison pill and goes to the dead set, and the rest of
//! the queue runs. Seeing the signal needs a process that outlives the one that died: this one.
//!
//! The child tells the parent which jobs it runs through memory they share, one slot per
//! worker thread holding the key of its running job ([`super::slots`]: plain stores, no
//! system call a job), so the normal path keeps its rate (no process per job, and nothing
//! the parent must read as it comes). The parent reads the slots when the child has died, and
//! for `--job-timeout` every so often while it lives. The rule when the child dies by a
//! signal:
//!
//! 1. The jobs it was running (started, not ended) are the suspects; those it held but had not
//!    started are innocent and go back to their queues unchanged.
//! 2. A death counts against a job only when it was the one job running in the process that
//!    died: with several running, the signal cannot say whose run it was, so none is blamed.
//!    A lone suspect's death is counted at once.
//! 3. Each suspect then runs alone, in start order, in a child of its own (that job only,
//!    under the dead worker's claim, so no other worker can take it meanwhile; the parent
//!    keeps the claim's heartbeat). A job that finishes alone is acknowledged, retried or
//!    buried as any job is. A job that kills its lone child has a death counted and runs
//!    alone again, until it finishes or reaches [`CRASH_LIMIT`] deaths.
//! 4. At [`CRASH_LIMIT`] deaths the job goes to the dead set (whatever its `retry`: an
//!    operator must see a poison pill), its payload carrying `crash_count`, `crash_signal`,
//!    `error_class` `Concur::WorkerKilled` and `error_message` "killed its worker 3 times
//!    (signal SIGABRT)", and a line says so on stderr.
//! 5. Then the normal worker starts again.
//!
//! `--job-timeout`: a job that runs longer (timed by this parent's clock from the first look
//! at the slots that saw it running; it looks every 1/100 of the timeout, at most every 20 ms
//! and at least every second) fails like any failure (`Concur::Timeout`, retried or buried by
//! its `retry`); the child is killed to free its slot, and the other jobs it held go back to
//! their queues unchanged, then the worker starts again.
//!
//! The count lives in this parent while it runs a suspect alone and is written into the job
//! when it goes to the dead set; a supervisor killed in between loses it (the job goes back
//! to its queue when the claim's lease expires, as any held job does).
//!
//! The command's exit status is the child's: 0 once the queues drained (`--until-empty`) or
//! after a graceful stop, even when jobs went to the dead set (Sidekiq's too: a job's failure
//! is the job's, recorded with it, not the worker's); 1 when the shutdown deadline passed;
//! 2 for bad input. A child that dies [`CRASH_LIMIT`] times in a row with no job running is
//! the worker's own failure: the command stops with exit 1.

use std::collections::HashMap;
use std::os::fd::BorrowedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ExitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::slots::JobSlots;
use super::worker::{
    fail, handle, job_key, new_worker_id, persist, refused_line, Performed, Performer,
};
use super::worker::{WorkOptions, PATIENCE};
use super::{now, Backend, BackendUrl, Claimed, Job, RetrySchedule};
use crate::base::error::{Error, Result};
use crate::measure::rusage::signal_name;
use crate::os::interrupt::{install_interrupt_handler, interrupted};

/// Deaths after which a job is a poison pill and goes to the dead set (Sidekiq Pro's 3).
pub const CRASH_LIMIT: u32 = 3;

/// The `error_class` of a job that killed its worker [`CRASH_LIMIT`] times.
pub const KILLED_CLASS: &str = "Concur::WorkerKilled";

/// What the supervisor asks a worker child to do (the request on its fd 4): work the queues
/// as `concur jobs work` does, or run one held job alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildRequest {
    /// The queue's backend.
    pub backend: BackendUrl,
    /// Worker threads.
    pub concurrency: usize,
    /// Queues, in priority order.
    pub queues: Vec<String>,
    /// Lease / heartbeat TTL.
    pub lease: Duration,
    /// A fixed delay before retries (`None`: Sidekiq's backoff).
    pub retry_delay: Option<Duration>,
    /// How long running jobs may finish after a stop request.
    pub shutdown_deadline: Duration,
    /// `--done-log`.
    pub done_log: Option<PathBuf>,
    /// `--until-empty`.
    pub until_empty: bool,
    /// `--records`.
    pub records: Option<PathBuf>,
    /// `--allow-commands`.
    pub allow_commands: bool,
    /// `--allow-targets`, as given (the child checks them with the same parser).
    pub allow_targets: Vec<String>,
    /// The worker id the child claims under.
    pub worker: String,
    /// Run only this job (held under `worker`), then exit.
    pub alone: Option<Claimed>,
    /// `--job-timeout`: a job running longer has its worker stopped (SIGKILL) and fails.
    pub job_timeout: Duration,
}

impl ChildRequest {
    /// When failed jobs are retried.
    fn schedule(&self) -> RetrySchedule {
        self.retry_delay
            .map_or(RetrySchedule::Sidekiq, RetrySchedule::Fixed)
    }

    /// The worker's options, its jobs told in `slots`.
    fn options(&self, slots: Option<Arc<JobSlots>>) -> Result<WorkOptions> {
        let mut targets = crate::workload::outside::Targets::default();
        for list in &self.allow_targets {
            targets.extend(crate::workload::outside::Targets::parse(list).map_err(Error::usage)?);
        }
        Ok(WorkOptions {
            concurrency: self.concurrency,
            queues: self.queues.clone(),
            lease: self.lease,
            schedule: self
                .retry_delay
                .map_or(RetrySchedule::Sidekiq, RetrySchedule::Fixed),
            shutdown_deadline: self.shutdown_deadline,
            done_log: self.done_log.clone(),
            until_empty: self.until_empty,
            records: self.records.clone(),
            workload_options: Default::default(),
            allowed: crate::workload::outside::Allowed {
                commands: self.allow_commands,
                targets,
            },
            only: None,
            worker_id: Some(self.worker.clone()),
            slots,
        })
    }
}

/// In the worker child: serves the supervisor's request (the normal worker, or one job alone),
/// telling it which jobs run in the job slots on fd 5.
pub fn child_main(req: ChildRequest) -> Result<i32> {
    let need = if req.alone.is_some() {
        1
    } else {
        req.concurrency
    };
    let slots = JobSlots::attach(crate::os::process::PAGE_FD, need)
        .map_err(|e| Error::usage(format!("the job slots from the supervisor: {e}")))?;
    let opts = req.options(Some(Arc::new(slots)))?;
    match &req.alone {
        None => super::process::work_main(&req.backend, &opts),
        Some(claimed) => {
            let backend = super::process::open_shared(&req.backend)?;
            run_alone(&*backend, &req.worker, claimed, &opts)?;
            Ok(0)
        }
    }
}

/// Runs one held job to its end in this process: performed, then acknowledged, retried or
/// buried as the worker does.
pub fn run_alone(
    backend: &dyn Backend,
    worker: &str,
    claimed: &Claimed,
    opts: &WorkOptions,
) -> Result<()> {
    let performer = Performer::new(&opts.workload_options, &opts.allowed, opts.only.as_deref());
    let mut ran = Vec::new();
    let outcome = handle(
        backend,
        worker,
        claimed,
        opts.schedule,
        &|j: &Job| {
            // Told like the normal worker's jobs, so that the parent can time it.
            if let Some(slot) = opts.slots.as_deref().and_then(|s| s.slot(0)) {
                slot.start(job_key(&j.jid), crate::measure::mono_ns());
            }
            performer.perform(j)
        },
        &|_| {},
        &mut ran,
    )?;
    if let Performed::Malformed(why) = &outcome {
        eprintln!("{}", refused_line(&claimed.raw, why));
    }
    persist(PATIENCE, || backend.ack_batch(worker, &ran))
}

/// Starts a worker child for a request, handing it the job slots' descriptor (its fd 5).
pub type Spawn<'a> = dyn Fn(&ChildRequest, BorrowedFd<'_>) -> std::io::Result<Child> + 'a;

/// `concur jobs work`: runs the worker as a child (`spawn`) and keeps it running through any
/// job that kills it, by the rule in this module's doc. Returns the exit code.
pub fn supervise(template: ChildRequest, spawn: &Spawn) -> Result<i32> {
    let backend = super::process::open_shared(&template.backend)?;
    install_interrupt_handler();
    let mut empty_deaths = 0;
    loop {
        let req = ChildRequest {
            worker: new_worker_id(),
            alone: None,
            ..template.clone()
        };
        let (status, running, late) = run_child(&req, spawn, None)?;
        if !late.is_empty() {
            time_out(&*backend, &req, &late, true)?;
            continue;
        }
        let Some(sig) = status.signal() else {
            return Ok(status.code().unwrap_or(1));
        };
        if interrupted() {
            let _ = backend.release(&req.worker);
            return Ok(1);
        }
        if running.is_empty() {
            empty_deaths += 1;
            let _ = persist(PATIENCE, || backend.release(&req.worker));
            if empty_deaths >= CRASH_LIMIT {
                return Err(Error::Internal(format!(
                    "the worker died {empty_deaths} times in a row with no job running (last: {})",
                    signal_name(sig)
                )));
            }
            eprintln!(
                "concur jobs work: the worker died (signal {}) with no job running; starting it again",
                signal_name(sig)
            );
            continue;
        }
        empty_deaths = 0;
        recover(&*backend, &req, &running, sig, spawn)?;
        // Stopped while a job ran alone: it went back to its queue unfinished.
        if interrupted() {
            return Ok(1);
        }
    }
}

/// What a child left: its status, the jobs it was running when it ended (key → start
/// order), and those that ran past `--job-timeout` (the child was killed for them).
type ChildEnd = (ExitStatus, HashMap<u64, usize>, Vec<u64>);

/// Runs a child to its end; stops it (SIGKILL) when a job of it runs past the job timeout.
fn run_child(req: &ChildRequest, spawn: &Spawn, beat: Option<&dyn Backend>) -> Result<ChildEnd> {
    let slots = JobSlots::create(if req.alone.is_some() {
        1
    } else {
        req.concurrency
    })
    .map_err(|e| Error::Internal(format!("making the worker's job slots: {e}")))?;
    let fd = slots
        .fd()
        .ok_or_else(|| Error::Internal("the job slots have no descriptor".into()))?;
    let mut child =
        spawn(req, fd).map_err(|e| Error::Internal(format!("starting the worker process: {e}")))?;
    let beat_every = (req.lease / 3).max(Duration::from_millis(50));
    let mut last_beat = Instant::now();
    let mut forwarded = false;
    let mut timer = JobTimer::new(req.job_timeout);
    let mut late = Vec::new();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(Error::Internal(format!("waiting for the worker: {e}"))),
        }
        // Ctrl-C reaches the child with ours (one process group); SIGTERM is passed on.
        if interrupted() && !forwarded {
            forwarded = true;
            // SAFETY: kill only sends a signal to our own child, which we have not reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        }
        if late.is_empty() {
            late = timer.late(&slots);
            if !late.is_empty() {
                let _ = child.kill();
            }
        }
        if let Some(b) = beat {
            if last_beat.elapsed() >= beat_every && b.heartbeat(&req.worker, req.lease).is_ok() {
                last_beat = Instant::now();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The child is gone: what its slots hold now is what it was running when it ended.
    let running = slots
        .running()
        .iter()
        .enumerate()
        .map(|(order, r)| (r.key, order + 1))
        .collect();
    Ok((status, running, late))
}

/// `--job-timeout` over a live child's slots: when each job the slots show running was first
/// seen, looked at every 1/100 of the timeout (at most every 20 ms, at least every second).
/// Timed by the supervisor's own clock from that first look, never by what the child wrote.
struct JobTimer {
    timeout: Duration,
    every: Duration,
    last: Option<Instant>,
    /// (slot, generation) of each job seen running → when it was first seen.
    seen: HashMap<(usize, u64), Instant>,
}

impl JobTimer {
    fn new(timeout: Duration) -> JobTimer {
        JobTimer {
            timeout,
            every: (timeout / 100).clamp(Duration::from_millis(20), Duration::from_secs(1)),
            last: None,
            seen: HashMap::new(),
        }
    }

    /// The keys of the jobs running past the timeout, when it is time to look.
    fn late(&mut self, slots: &JobSlots) -> Vec<u64> {
        if self.last.is_some_and(|t| t.elapsed() < self.every) {
            return Vec::new();
        }
        let now = Instant::now();
        self.last = Some(now);
        let mut late = Vec::new();
        let mut seen = HashMap::new();
        for r in slots.running() {
            let first = self.seen.get(&(r.slot, r.generation)).copied();
            let first = first.unwrap_or(now);
            if now.duration_since(first) > self.timeout {
                late.push(r.key);
            }
            seen.insert((r.slot, r.generation), first);
        }
        // Jobs no longer running are forgotten.
        self.seen = seen;
        late
    }
}

/// After a child was stopped for jobs that ran past `--job-timeout` (`late`): those fail (a
/// retry, as Sidekiq counts failures), every other job it held goes back to its queue
/// unchanged (innocent: it runs again) when `release` (a lone run's suspects wait their turn).
fn time_out(backend: &dyn Backend, dead: &ChildRequest, late: &[u64], release: bool) -> Result<()> {
    let _ = backend.heartbeat(&dead.worker, dead.lease);
    let held = persist(PATIENCE, || backend.claimed_by(&dead.worker))?;
    let limit = crate::base::units::fmt_duration_spec(dead.job_timeout);
    for c in &held {
        let Ok(job) = Job::parse(&c.raw) else {
            continue;
        };
        if !late.contains(&job_key(&job.jid)) {
            continue;
        }
        let why = format!("ran longer than --job-timeout {limit}; its worker was stopped");
        fail(
            backend,
            &dead.worker,
            c,
            &job,
            "Concur::Timeout",
            &why,
            dead.schedule(),
        )?;
        eprintln!(
            "{}",
            crate::os::terminal::escape_controls(&format!(
                "concur jobs work: job {} {why} (failed)",
                job.jid
            ))
        );
    }
    if release {
        persist(PATIENCE, || backend.release(&dead.worker))?;
    }
    Ok(())
}

/// After the normal worker died by signal `sig` with `running` jobs running: counts, runs
/// suspects alone, buries poison pills and returns the rest of what it held to the queues.
fn recover(
    backend: &dyn Backend,
    dead: &ChildRequest,
    running: &HashMap<u64, usize>,
    sig: i32,
    spawn: &Spawn,
) -> Result<()> {
    let _ = backend.heartbeat(&dead.worker, dead.lease);
    let held = persist(PATIENCE, || backend.claimed_by(&dead.worker))?;
    let mut suspects: Vec<(usize, Claimed, String)> = held
        .into_iter()
        .filter_map(|c| {
            let jid = Job::parse(&c.raw).ok()?.jid;
            let seq = *running.get(&job_key(&jid))?;
            Some((seq, c, jid))
        })
        .collect();
    suspects.sort_by_key(|(seq, _, _)| *seq);
    eprintln!(
        "concur jobs work: the worker died (signal {}) running {} job(s); running {} alone",
        signal_name(sig),
        running.len(),
        if suspects.len() == 1 { "it" } else { "each" }
    );
    let lone = suspects.len() == 1;
    for (_, claimed, jid) in suspects {
        let mut deaths = u32::from(lone);
        let mut last = sig;
        loop {
            if deaths >= CRASH_LIMIT {
                bury(backend, &dead.worker, &claimed, deaths, last)?;
                eprintln!(
                    "{}",
                    crate::os::terminal::escape_controls(&format!(
                        "concur jobs work: job {jid} killed its worker {deaths} times (signal {}) (moved to the dead set)",
                        signal_name(last)
                    ))
                );
                break;
            }
            let alone = ChildRequest {
                alone: Some(claimed.clone()),
                ..dead.clone()
            };
            let (status, _, late) = run_child(&alone, spawn, Some(backend))?;
            if !late.is_empty() {
                time_out(backend, dead, &late, false)?;
                break;
            }
            match status.signal() {
                Some(s) if !interrupted() => {
                    deaths += 1;
                    last = s;
                }
                // Finished (acknowledged, retried or buried by the child), or stopped: what
                // is still held goes back with the rest below.
                _ => break,
            }
        }
        if interrupted() {
            break;
        }
    }
    persist(PATIENCE, || backend.release(&dead.worker)).map(|_| ())
}

/// The job's dead-set entry after `deaths` deaths, the last by signal `sig`.
pub fn killed_entry(raw: &str, deaths: u32, sig: i32) -> String {
    let Ok(mut job) = Job::parse(raw) else {
        return super::malformed_entry(raw, super::DEFAULT_QUEUE, "unparsable after it ran");
    };
    let t = now();
    let signal = signal_name(sig);
    job.error_class = Some(KILLED_CLASS.into());
    job.error_message = Some(format!(
        "killed its worker {deaths} times (signal {signal})"
    ));
    if job.failed_at.is_none() {
        job.failed_at = Some(t);
    } else {
        job.retried_at = Some(t);
    }
    job.extra.insert("crash_count".into(), deaths.into());
    job.extra.insert("crash_signal".into(), signal.into());
    job.to_json()
}

fn bury(backend: &dyn Backend, worker: &str, c: &Claimed, deaths: u32, sig: i32) -> Result<()> {
    let entry = killed_entry(&c.raw, deaths, sig);
    persist(PATIENCE, || backend.kill(worker, c, Some(&entry)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poison_pill_names_its_deaths_and_signal() {
        let job = Job::task("crash:abort", 0, "q");
        let e: serde_json::Value =
            serde_json::from_str(&killed_entry(&job.to_json(), 3, libc::SIGABRT)).unwrap();
        assert_eq!(e["error_class"], KILLED_CLASS);
        assert_eq!(
            e["error_message"],
            "killed its worker 3 times (signal SIGABRT)"
        );
        assert_eq!(e["crash_count"], 3);
        assert_eq!(e["crash_signal"], "SIGABRT");
        assert_eq!(e["jid"], job.jid.as_str());
    }
}
