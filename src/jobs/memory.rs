//! The `memory` backend: queues in this process (Sucker Punch). Fast, and not durable: every
//! queued, retrying or in-flight job is lost when the process ends.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{now, Backend, Claimed, FailedSet, Job, Stats, DEAD_MAX_JOBS};
use crate::base::error::Result;

#[derive(Default)]
struct State {
    queues: BTreeMap<String, VecDeque<String>>,
    /// token → (worker, claimed job)
    busy: HashMap<i64, (String, Claimed)>,
    next_token: i64,
    /// (due, payload)
    retry: Vec<(f64, String)>,
    dead: VecDeque<(f64, String)>,
    processed: u64,
    failed: u64,
    workers: HashMap<String, Instant>,
}

/// An in-process job queue.
#[derive(Default)]
pub struct Memory {
    state: Mutex<State>,
    ready: Condvar,
}

impl Memory {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent data (every update is one step).
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn queue_of(payload: &str) -> String {
    Job::parse(payload)
        .map(|j| j.queue)
        .unwrap_or_else(|_| super::DEFAULT_QUEUE.into())
}

impl Backend for Memory {
    fn describe(&self) -> String {
        "memory".into()
    }

    fn enqueue(&self, queue: &str, payloads: &[String]) -> Result<()> {
        let mut s = self.lock();
        s.queues
            .entry(queue.to_string())
            .or_default()
            .extend(payloads.iter().cloned());
        drop(s);
        self.ready.notify_all();
        Ok(())
    }

    fn fetch(&self, worker: &str, queues: &[String], wait: Duration) -> Result<Option<Claimed>> {
        let deadline = Instant::now() + wait;
        let mut s = self.lock();
        loop {
            for q in queues {
                if let Some(raw) = s.queues.get_mut(q).and_then(|d| d.pop_front()) {
                    s.next_token += 1;
                    let c = Claimed {
                        queue: q.clone(),
                        raw,
                        token: s.next_token,
                        refused: None,
                    };
                    s.busy.insert(c.token, (worker.to_string(), c.clone()));
                    return Ok(Some(c));
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            s = self
                .ready
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn ack(&self, _worker: &str, job: &Claimed) -> Result<()> {
        let mut s = self.lock();
        if s.busy.remove(&job.token).is_some() {
            s.processed += 1;
        }
        Ok(())
    }

    fn retry(&self, _worker: &str, job: &Claimed, payload: &str, at: f64) -> Result<()> {
        let mut s = self.lock();
        s.busy.remove(&job.token);
        s.failed += 1;
        s.retry.push((at, payload.to_string()));
        Ok(())
    }

    fn kill(&self, _worker: &str, job: &Claimed, payload: Option<&str>) -> Result<()> {
        let mut s = self.lock();
        s.busy.remove(&job.token);
        s.failed += 1;
        if let Some(p) = payload {
            s.dead.push_back((now(), p.to_string()));
            while s.dead.len() > DEAD_MAX_JOBS {
                s.dead.pop_front();
            }
        }
        Ok(())
    }

    fn heartbeat(&self, worker: &str, _lease: Duration) -> Result<()> {
        self.lock().workers.insert(worker.into(), Instant::now());
        Ok(())
    }

    fn reap(&self) -> Result<usize> {
        // Workers live in this process: none can die while it lives.
        Ok(0)
    }

    fn promote(&self) -> Result<usize> {
        let t = now();
        let mut s = self.lock();
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut s.retry)
            .into_iter()
            .partition(|(at, _)| *at <= t);
        s.retry = later;
        let n = due.len();
        for (_, p) in due {
            let q = queue_of(&p);
            s.queues.entry(q).or_default().push_back(p);
        }
        drop(s);
        if n > 0 {
            self.ready.notify_all();
        }
        Ok(n)
    }

    fn claimed_by(&self, worker: &str) -> Result<Vec<Claimed>> {
        let s = self.lock();
        let mut held: Vec<Claimed> = s
            .busy
            .values()
            .filter(|(w, _)| w == worker)
            .map(|(_, c)| c.clone())
            .collect();
        held.sort_by_key(|c| c.token);
        Ok(held)
    }

    fn release(&self, worker: &str) -> Result<usize> {
        let mut s = self.lock();
        let mine: Vec<i64> = s
            .busy
            .iter()
            .filter(|(_, (w, _))| w == worker)
            .map(|(t, _)| *t)
            .collect();
        for t in &mine {
            if let Some((_, c)) = s.busy.remove(t) {
                s.queues.entry(c.queue).or_default().push_front(c.raw);
            }
        }
        s.workers.remove(worker);
        drop(s);
        self.ready.notify_all();
        Ok(mine.len())
    }

    fn stats(&self) -> Result<Stats> {
        let s = self.lock();
        Ok(Stats {
            enqueued: s.queues.values().map(|q| q.len() as u64).sum(),
            busy: s.busy.len() as u64,
            processed: s.processed,
            failed: s.failed,
            retry: s.retry.len() as u64,
            dead: s.dead.len() as u64,
            workers_alive: s.workers.len() as u64,
        })
    }

    fn list(&self, set: FailedSet, limit: usize) -> Result<Vec<String>> {
        let s = self.lock();
        Ok(match set {
            FailedSet::Retry => {
                let mut r = s.retry.clone();
                r.sort_by(|a, b| a.0.total_cmp(&b.0));
                r.into_iter().take(limit).map(|(_, p)| p).collect()
            }
            FailedSet::Dead => s.dead.iter().take(limit).map(|(_, p)| p.clone()).collect(),
        })
    }

    fn requeue(&self, set: FailedSet) -> Result<usize> {
        let mut s = self.lock();
        let items: Vec<String> = match set {
            FailedSet::Retry => std::mem::take(&mut s.retry)
                .into_iter()
                .map(|(_, p)| p)
                .collect(),
            FailedSet::Dead => std::mem::take(&mut s.dead)
                .into_iter()
                .map(|(_, p)| p)
                .collect(),
        };
        let n = items.len();
        for p in items {
            let q = queue_of(&p);
            s.queues.entry(q).or_default().push_back(p);
        }
        drop(s);
        self.ready.notify_all();
        Ok(n)
    }
}
