//! `curl:W`: libcurl's multi interface with at most W transfers at once, the engine of
//! tornado's curl client. One thread drives every transfer; finished easy handles are reused
//! for the next URL, so their connections are kept alive (unless `--no-keepalive`).
//!
//! libcurl is built here with its rustls backend (rustls-ffi), so it needs no system TLS
//! library. It verifies against the system's CA bundle (the file rustls-native-certs also
//! reads), plus `--cacert` through one file written for the run.
//!
//! Connects that fail while the server is known to be there (it has answered in this run)
//! are retried after a short, growing pause until the request timeout: a client that opens
//! connections faster than the server accepts them must pace itself, and such a request is
//! not a failure of the server. Measured here (W = 2,000 against `concur serve`, whose
//! backlog `net.core.somaxconn` caps at 4,096): about half the connects failed after
//! 180–400 ms with no socket error (libcurl's "peer closed"), none with ECONNREFUSED. So a
//! connect refused (ECONNREFUSED) before the server ever answered is final: a closed port
//! still fails at once.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

use curl::easy::{Easy2, Handler, List, WriteError};
use curl::multi::{Easy2Handle, Multi};

use super::{Entry, Model, ModelOutcome, RunCtx};
use crate::measure::conn::ConnSample;
use crate::measure::{mono_ns, TaskError, TaskRecord};
use crate::workload::{HttpRequest, Workload};

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
    } else if e.is_ssl_connect_error()
        || e.is_peer_failed_verification()
        || e.is_ssl_cacert()
        || e.is_ssl_cacert_badfile()
        || e.is_ssl_certproblem()
    {
        crate::tls::KIND
    } else {
        "read"
    }
}

struct Slot {
    handle: Easy2Handle<Counter>,
    index: usize,
    /// When the task first started (a retried connect keeps it: its latency is the whole wait).
    start_ns: u64,
    /// Connect attempts so far.
    attempts: u32,
    https: bool,
}

/// A task whose connect failed at once, waiting to try again.
struct Retry {
    index: usize,
    start_ns: u64,
    attempts: u32,
    due_ns: u64,
}

/// The CA file of a run with `--cacert`: the system's bundle and the extra certificates, in
/// one file libcurl reads (its rustls backend takes one file or one blob, and a blob is copied
/// into every easy handle). Removed when the run ends.
struct CaFile(PathBuf);

impl CaFile {
    fn write(extra: &str) -> Result<CaFile, String> {
        let system = crate::tls::system_ca_file()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        let path = std::env::temp_dir().join(format!("concur-ca-{}.pem", std::process::id()));
        std::fs::write(&path, format!("{system}\n{extra}\n"))
            .map_err(|e| format!("cannot write the CA file {}: {e}", path.display()))?;
        Ok(CaFile(path))
    }
}

impl Drop for CaFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// How every transfer of a run connects, from the run's options.
struct Connection<'a> {
    timeout: Duration,
    keepalive: bool,
    insecure: bool,
    /// The CA file of a run with `--cacert`.
    ca_file: Option<&'a PathBuf>,
}

/// The first retry's pause; each further one doubles it up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(5);
/// The longest pause between connect attempts.
const RETRY_MAX: Duration = Duration::from_millis(200);

impl CurlMulti {
    /// Sets `easy` up for `req` from a clean state (options of the previous request gone, its
    /// connection kept). libcurl sends the builder's headers as they are: a header given
    /// replaces libcurl's own of that name (`Host`, `Accept`, `Content-Length`), and the two
    /// it would add besides (`Content-Type` for a body, `Expect: 100-continue` for one over
    /// 1 KiB) are switched off unless the request has them.
    fn configure(
        easy: &mut Easy2<Counter>,
        req: &HttpRequest,
        conn: &Connection<'_>,
    ) -> Result<(), curl::Error> {
        easy.reset();
        easy.get_mut().bytes = 0;
        easy.url(&req.url)?;
        easy.timeout(conn.timeout)?;
        if req.is_head() {
            easy.nobody(true)?;
        } else if req.method != "GET" || req.body.is_some() {
            // Also for a POST: `CURLOPT_POST` without a body would send one, chunked.
            easy.custom_request(&req.method)?;
        }
        if let Some(body) = &req.body {
            easy.post_fields_copy(body)?;
        }
        let mut list = List::new();
        for (name, value) in &req.headers {
            list.append(&format!("{name}: {value}"))?;
        }
        for own in ["Content-Type", "Expect"] {
            if !req.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(own)) {
                list.append(&format!("{own}:"))?;
            }
        }
        easy.http_headers(list)?;
        if !conn.keepalive {
            easy.forbid_reuse(true)?;
            easy.fresh_connect(true)?;
        }
        if conn.insecure {
            easy.ssl_verify_peer(false)?;
            easy.ssl_verify_host(false)?;
        } else if let Some(ca) = conn.ca_file.cloned().or_else(crate::tls::system_ca_file) {
            easy.cainfo(ca)?;
        }
        Ok(())
    }

    fn start(
        multi: &Multi,
        mut easy: Easy2<Counter>,
        req: &HttpRequest,
        conn: &Connection<'_>,
        (index, start_ns, attempts): (usize, u64, u32),
    ) -> Result<Slot, (TaskError, Easy2<Counter>)> {
        if let Err(e) = Self::configure(&mut easy, req, conn) {
            return Err((TaskError::new("request", e.to_string()), easy));
        }
        let handle = match multi.add2(easy) {
            Ok(h) => h,
            Err(e) => {
                return Err((
                    TaskError::new("request", e.to_string()),
                    Easy2::new(Counter { bytes: 0 }),
                ))
            }
        };
        Ok(Slot {
            handle,
            index,
            start_ns,
            attempts,
            https: req.url.starts_with("https:"),
        })
    }
}

/// What a finished transfer's connection was, from libcurl's own timers.
fn conn_sample(easy: &Easy2<Counter>, https: bool) -> ConnSample {
    let opened = easy.num_connects().unwrap_or(0) > 0;
    if !opened {
        return ConnSample::default();
    }
    let us = |d: Duration| d.as_micros() as u64;
    let lookup = easy.namelookup_time().unwrap_or_default();
    let connect = easy.connect_time().unwrap_or_default();
    let app = easy.appconnect_time().unwrap_or_default();
    ConnSample {
        opened,
        connect_us: Some(us(connect.saturating_sub(lookup))),
        tls_us: (https && app > connect).then(|| us(app - connect)),
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
        let ca_file = match ctx.env.options.ca_pem.as_deref() {
            Some(pem) if !ctx.env.options.insecure => match CaFile::write(pem) {
                Ok(f) => Some(f),
                Err(e) => return fail(e),
            },
            _ => None,
        };
        let conn = Connection {
            timeout,
            keepalive: ctx.env.options.keepalive,
            insecure: ctx.env.options.insecure,
            ca_file: ca_file.as_ref().map(|f| &f.0),
        };
        let n = ctx.tasks;
        let mut records = Vec::with_capacity(n);
        let mut free: Vec<Easy2<Counter>> = (0..self.workers.min(n))
            .map(|_| Easy2::new(Counter { bytes: 0 }))
            .collect();
        // Transfers in flight in a slab: libcurl hands back each finished transfer's token (its
        // index here). Scanning every transfer for every message instead cost O(W) per
        // finished request: at W = 10,000 it took most of a 54 s run of 100,000 requests.
        let mut active: Vec<Option<Slot>> = Vec::with_capacity(self.workers);
        let mut vacant: Vec<usize> = Vec::new();
        let mut live = 0usize;
        let mut retries: VecDeque<Retry> = VecDeque::new();
        let mut server_seen = false;
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
            let now = mono_ns();
            while !free.is_empty() {
                // Due retries first (they are the oldest tasks), then new tasks.
                let task = match retries.front() {
                    Some(r) if r.due_ns <= now => retries
                        .pop_front()
                        .map(|r| (r.index, r.start_ns, r.attempts)),
                    _ if next < due => {
                        next += 1;
                        Some((next - 1, mono_ns(), 0))
                    }
                    _ => None,
                };
                let Some(task) = task else { break };
                let Some(easy) = free.pop() else { break };
                let Some(req) = ctx.workload.http_request(task.0) else {
                    return fail(
                        "the workload has no URL (curl runs http workloads only, with a server)"
                            .into(),
                    );
                };
                match Self::start(&multi, easy, &req, &conn, task) {
                    Ok(mut slot) => {
                        let id = vacant.pop().unwrap_or(active.len());
                        if let Err(e) = slot.handle.set_token(id) {
                            return fail(format!("libcurl multi failed: {e}"));
                        }
                        if id == active.len() {
                            active.push(Some(slot));
                        } else {
                            active[id] = Some(slot);
                        }
                        live += 1;
                    }
                    Err((e, easy)) => {
                        records.push(TaskRecord::not_started(task.0, e));
                        free.push(easy);
                    }
                }
            }
            if live == 0 && retries.is_empty() {
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
                let Ok(id) = m.token() else { return };
                if let Some(Some(slot)) = active.get(id) {
                    if let Some(result) = m.result_for2(&slot.handle) {
                        done.push((id, result));
                    }
                }
            });
            let finished = done.len();
            for (id, result) in done {
                let Some(slot) = active.get_mut(id).and_then(Option::take) else {
                    continue;
                };
                vacant.push(id);
                live -= 1;
                let end_ns = mono_ns();
                let easy = match multi.remove2(slot.handle) {
                    Ok(e) => e,
                    Err(e) => return fail(format!("libcurl multi failed: {e}")),
                };
                // A connect refused at once, within the request's time: pace and try again.
                if let Err(e) = &result {
                    let waited = Duration::from_nanos(end_ns.saturating_sub(slot.start_ns));
                    let refused = easy.os_errno().ok() == Some(libc::ECONNREFUSED);
                    if e.is_couldnt_connect() && (server_seen || !refused) && waited < timeout {
                        let pause = RETRY_FIRST
                            .saturating_mul(1 << slot.attempts.min(6))
                            .min(RETRY_MAX);
                        retries.push_back(Retry {
                            index: slot.index,
                            start_ns: slot.start_ns,
                            attempts: slot.attempts + 1,
                            due_ns: end_ns + pause.as_nanos() as u64,
                        });
                        free.push(easy);
                        continue;
                    }
                }
                // A response proves the server is there: from then on a refused connect means
                // it is overloaded, not absent.
                server_seen |= result.is_ok();
                ctx.workload
                    .record_connection(conn_sample(&easy, slot.https));
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
            // curl_multi_wait returns on socket activity; its timeout caps how late libcurl's
            // own timers (connects, retries) and our connect retries are served.
            let mut cap = Duration::from_millis(10);
            if let Some(r) = retries.front() {
                cap = cap.min(Duration::from_nanos(r.due_ns.saturating_sub(mono_ns())));
            }
            if let Some(a) = ctx.arrivals.as_ref().filter(|_| due < n) {
                let until = Duration::from_nanos(a.due_ns(due).saturating_sub(mono_ns()));
                // curl_multi_wait counts in whole milliseconds: a shorter wait would be 0 and
                // the loop would spin until the release. Sleep to it instead; socket events
                // wait less than a millisecond.
                if until < Duration::from_millis(1) {
                    super::arrivals::sleep_until(a.due_ns(due));
                    continue;
                }
                cap = cap.min(until);
            }
            if live == 0 {
                std::thread::sleep(cap);
            } else {
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
