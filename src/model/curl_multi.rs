//! `curl:W`: libcurl's multi interface with at most W transfers at once, the engine of
//! tornado's curl client. One thread drives every transfer; finished easy handles are reused
//! for the next URL, so their connections are kept alive.

use std::time::Duration;

use curl::easy::{Easy2, Handler, WriteError};
use curl::multi::{Easy2Handle, Multi};

use super::{Entry, Model, ModelOutcome, RunCtx};
use crate::measure::{mono_ns, TaskError, TaskRecord};
use crate::workload::Workload;

pub(super) const ENTRY: Entry = Entry {
    name: "curl",
    takes_workers: true,
    help:
        "libcurl multi with at most W transfers at once (tornado's curl client's engine; http only)",
    build: |w| {
        Box::new(CurlMulti {
            workers: w.unwrap_or(1),
        })
    },
};

/// libcurl multi.
pub struct CurlMulti {
    workers: usize,
}

/// Counts body bytes as they arrive.
struct Counter {
    bytes: u64,
}

impl Handler for Counter {
    fn write(&mut self, data: &[u8]) -> Result<usize, WriteError> {
        self.bytes += data.len() as u64;
        Ok(data.len())
    }
}

fn curl_kind(e: &curl::Error) -> &'static str {
    if e.is_couldnt_connect() || e.is_couldnt_resolve_host() {
        "connect"
    } else if e.is_operation_timedout() {
        "timeout"
    } else {
        "read"
    }
}

struct Slot {
    handle: Easy2Handle<Counter>,
    index: usize,
    start_ns: u64,
}

impl CurlMulti {
    fn start(
        &self,
        multi: &Multi,
        mut easy: Easy2<Counter>,
        url: &str,
        index: usize,
        timeout: Duration,
    ) -> Result<Slot, (usize, TaskError)> {
        let fail = |e: curl::Error| (index, TaskError::new("request", e.to_string()));
        easy.get_mut().bytes = 0;
        easy.url(url).map_err(fail)?;
        easy.timeout(timeout).map_err(fail)?;
        let start_ns = mono_ns();
        let handle = multi
            .add2(easy)
            .map_err(|e| (index, TaskError::new("request", e.to_string())))?;
        Ok(Slot {
            handle,
            index,
            start_ns,
        })
    }
}

impl Model for CurlMulti {
    fn spec(&self) -> String {
        format!("curl:{}", self.workers)
    }
    fn workers(&self) -> Option<usize> {
        Some(self.workers)
    }
    fn parallelism(&self, tasks: usize) -> usize {
        self.workers.min(tasks)
    }
    fn check(&self, w: &dyn Workload, _gil: bool) -> Result<(), String> {
        if w.is_http() {
            Ok(())
        } else {
            Err("curl runs http workloads only".into())
        }
    }
    fn run(&self, ctx: &RunCtx) -> ModelOutcome {
        let fail = |e: String| ModelOutcome {
            error: Some(e),
            ..Default::default()
        };
        let mut multi = Multi::new();
        if let Err(e) = multi
            .set_max_total_connections(self.workers)
            .and_then(|_| multi.set_max_host_connections(self.workers))
        {
            return fail(format!("cannot configure libcurl multi: {e}"));
        }
        let timeout = Duration::from_millis(ctx.env.options.request_timeout_ms.max(1));
        let n = ctx.tasks;
        let mut records = Vec::with_capacity(n);
        let mut free: Vec<Easy2<Counter>> = (0..self.workers.min(n))
            .map(|_| Easy2::new(Counter { bytes: 0 }))
            .collect();
        let mut active: Vec<Slot> = Vec::with_capacity(self.workers);
        let mut next = 0usize;
        // Open model: `due` counts the tasks released so far; a transfer is added for each
        // released one as soon as a handle is free (at most W at once).
        let mut due = if ctx.arrivals.is_some() { 0 } else { n };
        loop {
            if let Some(a) = &ctx.arrivals {
                let now = mono_ns();
                while due < n && a.due_ns(due) <= now {
                    a.released(due);
                    due += 1;
                }
            }
            while next < due {
                let Some(easy) = free.pop() else { break };
                let Some(url) = ctx.workload.url(next) else {
                    return fail(
                        "the workload has no URL (curl runs http workloads only, with a server)"
                            .into(),
                    );
                };
                match self.start(&multi, easy, &url, next, timeout) {
                    Ok(slot) => active.push(slot),
                    Err((i, e)) => {
                        records.push(TaskRecord::not_started(i, e));
                        free.push(Easy2::new(Counter { bytes: 0 }));
                    }
                }
                next += 1;
            }
            if active.is_empty() {
                match &ctx.arrivals {
                    Some(a) if due < n => {
                        super::arrivals::sleep_until(a.due_ns(due));
                        continue;
                    }
                    _ => break,
                }
            }
            if let Err(e) = multi.perform() {
                return fail(format!("libcurl multi failed: {e}"));
            }
            let mut done: Vec<(usize, Result<(), curl::Error>)> = Vec::new();
            multi.messages(|m| {
                for (k, slot) in active.iter().enumerate() {
                    if let Some(result) = m.result_for2(&slot.handle) {
                        done.push((k, result));
                    }
                }
            });
            done.sort_by_key(|d| std::cmp::Reverse(d.0));
            let finished = done.len();
            for (k, result) in done {
                let slot = active.swap_remove(k);
                let end_ns = mono_ns();
                let easy = match multi.remove2(slot.handle) {
                    Ok(e) => e,
                    Err(e) => return fail(format!("libcurl multi failed: {e}")),
                };
                let code = easy.response_code().unwrap_or(0);
                let bytes = easy.get_ref().bytes;
                let error = match result {
                    Err(e) => Some(TaskError::new(curl_kind(&e), e.to_string())),
                    Ok(()) if code >= 500 => {
                        Some(TaskError::new("http_5xx", format!("HTTP {code}")))
                    }
                    Ok(()) if code >= 400 => {
                        Some(TaskError::new("http_4xx", format!("HTTP {code}")))
                    }
                    Ok(()) => None,
                };
                let ok = error.is_none();
                records.push(TaskRecord {
                    index: slot.index,
                    start_ns: slot.start_ns,
                    end_ns,
                    bytes: if ok { bytes } else { 0 },
                    error,
                    sched_ns: None,
                });
                crate::measure::live::ended(ok);
                free.push(easy);
            }
            // A transfer finished: start the next ones before waiting again.
            if finished > 0 {
                continue;
            }
            if !active.is_empty() {
                // curl_multi_wait returns on socket activity; its timeout caps how late
                // libcurl's own timers (connects, retries) are served.
                let mut cap = Duration::from_millis(10);
                if let Some(a) = ctx.arrivals.as_ref().filter(|_| due < n) {
                    let until = Duration::from_nanos(a.due_ns(due).saturating_sub(mono_ns()));
                    // curl_multi_wait counts in whole milliseconds: a shorter wait would be 0
                    // and the loop would spin until the release. Sleep to it instead; socket
                    // events wait less than a millisecond.
                    if until < Duration::from_millis(1) {
                        super::arrivals::sleep_until(a.due_ns(due));
                        continue;
                    }
                    cap = cap.min(until);
                }
                let wait = multi
                    .get_timeout()
                    .ok()
                    .flatten()
                    .map_or(cap, |t| t.min(cap));
                let _ = multi.wait(&mut [], wait);
            }
        }
        ModelOutcome {
            records,
            threads_created: 0,
            processes_created: 0,
            error: None,
        }
    }
}
