//! Workloads: what one task does. Each built-in workload is one file here plus one line in
//! [`REGISTRY`]; the spec grammar is `NAME[:ARG[:ARG...]]`.
//!
//! A workload never knows which model runs it: it offers a blocking entry point ([`Workload::task`])
//! and an async one ([`Workload::task_async`]) whose default runs CPU work inline on the event
//! loop (as a naive async program does) and blocking I/O on the runtime's blocking pool.

mod block_heap;
mod cmd;
mod crash;
pub mod custom;
mod fib;
pub(crate) mod gil;
pub mod http;
mod mail;
mod nature;
pub mod outside;
mod read;
pub mod segmented;
mod sleep;
mod spin;
pub mod task_group;
pub mod timer;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Input};
pub use crate::measure::TaskError;
pub use http::HttpRequest;

/// A boxed future returned by [`Workload::task_async`].
pub type TaskFuture = Pin<Box<dyn Future<Output = Result<u64, TaskError>> + Send>>;

/// A task's future as an async model holds it ([`Workload::start_async`]): inside the model's
/// own task, with no allocation of its own where the workload's task is only a wait on the
/// precise timer, and [`Workload::task_async`]'s boxed future otherwise. 24 bytes.
pub struct AsyncTask(AsyncTaskKind);

/// What an [`AsyncTask`] is.
enum AsyncTaskKind {
    /// The workload's own future, boxed.
    Boxed(TaskFuture),
    /// A wait on the precise timer, held where the task is; it produces no bytes.
    Wait(timer::Sleep),
}

impl AsyncTask {
    /// The workload's own future ([`Workload::task_async`]'s).
    pub fn boxed(future: TaskFuture) -> Self {
        AsyncTask(AsyncTaskKind::Boxed(future))
    }

    /// A task that waits `d` on the precise timer ([`timer`]) and produces no bytes: what
    /// `sleep:D`'s task is, held by the model without a box (a million waiting tasks hold a
    /// million of these).
    pub fn wait(d: std::time::Duration) -> Self {
        AsyncTask(AsyncTaskKind::Wait(timer::sleep(d)))
    }
}

impl Future for AsyncTask {
    type Output = Result<u64, TaskError>;
    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.0 {
            AsyncTaskKind::Boxed(f) => f.as_mut().poll(cx),
            AsyncTaskKind::Wait(w) => Pin::new(w).poll(cx).map(|()| Ok(0)),
        }
    }
}

pub use nature::Nature;

/// Where the `mail` workload writes the mails it renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum MailSink {
    /// Render into a counting sink that discards (the default: measures the work, not a tty).
    #[default]
    Discard,
    /// Print every mail on standard output, like the classic experiment.
    Stdout,
}

/// Run-wide options that some workloads read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadOptions {
    /// Where `mail` writes.
    pub mail_sink: MailSink,
    /// The server that `http:/PATH` specs (a path without a host) go to: `--url`, or the
    /// in-process server a study starts.
    #[serde(default)]
    pub base_url: Option<String>,
    /// How long one HTTP request may take (connect to last body byte), milliseconds.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// `--shell`: `cmd:` commands run under `sh -c` instead of being split into words.
    #[serde(default)]
    pub cmd_shell: bool,
    /// `--cmd-output DIR`: `cmd:` tasks keep their stdout and stderr there as files.
    #[serde(default, with = "crate::os::files::path_bytes")]
    pub cmd_output: Option<std::path::PathBuf>,
    /// The task count of the cell being run, for `{n}` in `cmd:` (set for each run).
    #[serde(default)]
    pub cell_tasks: Option<usize>,
    /// The HTTP method (`--method`); `None` is GET.
    #[serde(default)]
    pub method: Option<String>,
    /// Request headers (`-H 'Name: value'`), checked: name and value, `{rand}` and `{i}` still
    /// in the value.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The request body (`--body FILE`), `{rand}` and `{i}` still in it.
    #[serde(default)]
    pub body: Option<Vec<u8>>,
    /// Certificates (PEM) trusted besides the system's roots (`--cacert`, or the study's own
    /// self-signed server).
    #[serde(default)]
    pub ca_pem: Option<String>,
    /// Skip certificate verification (`-k/--insecure`).
    #[serde(default)]
    pub insecure: bool,
    /// Reuse connections between requests (`--no-keepalive` turns it off).
    #[serde(default = "yes")]
    pub keepalive: bool,
    /// `--http2`: speak HTTP/2 (h2 by ALPN over TLS, h2c by prior knowledge over TCP).
    #[serde(default)]
    pub http2: bool,
    /// `--http3`: speak HTTP/3 (QUIC over UDP, `https://` only).
    #[serde(default)]
    pub http3: bool,
    /// `--connections C` with `--http2` or `--http3`: how many connections carry the streams
    /// (`None`: 1).
    #[serde(default)]
    pub connections: Option<usize>,
}

impl Default for WorkloadOptions {
    fn default() -> Self {
        WorkloadOptions {
            mail_sink: MailSink::default(),
            base_url: None,
            request_timeout_ms: default_request_timeout_ms(),
            method: None,
            headers: Vec::new(),
            body: None,
            ca_pem: None,
            insecure: false,
            keepalive: true,
            cmd_shell: false,
            cmd_output: None,
            cell_tasks: None,
            http2: false,
            http3: false,
            connections: None,
        }
    }
}

fn yes() -> bool {
    true
}

/// `--request-timeout`'s default, in the unit the options carry.
fn default_request_timeout_ms() -> u64 {
    DEFAULT_REQUEST_TIMEOUT.as_millis() as u64
}

/// `--request-timeout`'s default (plan/options.rs's flag says the same, which its test holds).
pub const DEFAULT_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What one task does.
pub trait Workload: Send + Sync + 'static {
    /// The canonical spec, which parses back to the same workload.
    fn spec(&self) -> String;
    /// What bounds its time.
    fn nature(&self) -> Nature;
    /// Runs task `index` to completion on the calling thread and returns the bytes produced.
    fn task(&self, index: usize) -> Result<u64, TaskError>;
    /// Runs task `index` on a tokio runtime. The default runs CPU work inline (it blocks the
    /// event loop, which is the point) and blocking I/O on the runtime's blocking pool.
    fn task_async(self: Arc<Self>, index: usize) -> TaskFuture {
        match self.nature() {
            Nature::Cpu => Box::pin(async move { guarded_run(&*self, index) }),
            Nature::BlockingIo | Nature::Delay(_) | Nature::Network | Nature::Measured => {
                Box::pin(async move {
                    tokio::task::spawn_blocking(move || guarded_run(&*self, index))
                        .await
                        .map_err(|e| TaskError::new("panic", e.to_string()))?
                })
            }
        }
    }
    /// Starts task `index` for an async model, which holds the returned future inside its
    /// own task: by default [`Workload::task_async`]'s future, boxed. A workload whose task
    /// only waits a fixed time returns [`AsyncTask::wait`] instead, which needs no allocation
    /// (`sleep:D` does). A wrapper that delegates [`Workload::task_async`] delegates this too.
    fn start_async(self: Arc<Self>, index: usize) -> AsyncTask {
        AsyncTask::boxed(self.task_async(index))
    }
    /// Runs task `index` inside a `may` coroutine (the `green` model). The default runs CPU
    /// work inline; workloads that block must override it with coroutine-aware I/O.
    fn task_green(&self, index: usize) -> Result<u64, TaskError> {
        match self.nature() {
            Nature::Cpu => self.task(index),
            _ => Err(TaskError::new(
                "unsupported",
                format!("{} cannot run in a coroutine", self.spec()),
            )),
        }
    }
    /// A task that only waits a fixed time (`sleep:D`): the wait, so that a closed run can
    /// tell how late each wake-up came ([`crate::measure::wakeups`]). `None` for work that
    /// does anything else, a server's delay included (its time is the network's too).
    fn wait(&self) -> Option<std::time::Duration> {
        None
    }
    /// Whether [`Workload::task_green`] is safe: no blocking std I/O inside a coroutine.
    fn supports_green(&self) -> bool {
        self.nature() == Nature::Cpu
    }
    /// What the workload needs from the world, checked once before any run by the bind step
    /// (a file that opens, a program on `PATH`): the reason when it is missing. Parsing a
    /// spec only checks its syntax, so the plan stays pure; a task checks again what it uses.
    fn acquire(&self) -> Result<(), String> {
        Ok(())
    }
    /// Whether the interpreter-lock emulation can govern this workload's work: false for work
    /// done by other processes, which a lock inside concur cannot hold back (`--gil` is then
    /// refused).
    fn gil_governs(&self) -> bool {
        true
    }
    /// What only an HTTP workload has (its requests, its connections): `Some` when each task
    /// is one HTTP request, so that a model may make the request itself (`curl`).
    fn http(&self) -> Option<&dyn HttpTasks> {
        None
    }
    /// Whether another process of any concur binary can re-create this workload from its spec
    /// (built-in workloads can; a closure registered by a library user exists only in that
    /// user's binary, so `jobs-procs`' worker processes cannot run it).
    fn portable(&self) -> bool {
        true
    }
}

/// What an HTTP workload offers beside its tasks ([`Workload::http`]).
pub trait HttpTasks: Send + Sync {
    /// Whether tasks go to the run's own server (`http:/PATH`), which the study must provide
    /// (`--url`, or a server started in-process) when none is configured yet.
    fn needs_server(&self) -> bool;
    /// The URL task `index` fetches, once the run's server is known.
    fn url(&self, index: usize) -> Option<String>;
    /// The whole request task `index` makes (method, URL, headers, body), as every client
    /// sends it, once the run's server is known; how to connect (TLS, keep-alive, timeout) is
    /// the run's [`WorkloadOptions`].
    fn http_request(&self, index: usize) -> Option<HttpRequest>;
    /// Whether every task's request is task 0's but for its URL (no placeholder in a header or
    /// the body): a client set up for one request sends the next by changing its URL alone.
    fn only_url_varies(&self) -> bool;
    /// With HTTP/2 over kept connections, how many connections carry the streams: a model on
    /// a multi-thread runtime drives each one's streams as one [`task_group`] (group `g` on
    /// connection `g`), so that a connection's streams run on one thread.
    fn connection_groups(&self) -> Option<usize>;
    /// The workload's account of its connections, for a model that makes the requests itself
    /// (`curl`): it records each request's connection, the HTTP version and the streams there.
    fn connection_recorder(&self) -> Option<&crate::measure::conn::ConnRecorder>;
    /// The connections this process's tasks opened and reused.
    fn connections(&self) -> Option<crate::measure::conn::Connections>;
}

/// Runs one task under the interpreter-lock emulation, turning a panic into a task error.
pub fn guarded_run<W: Workload + ?Sized>(w: &W, index: usize) -> Result<u64, TaskError> {
    let out = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let _held = gil::hold_task(index);
        w.task(index)
    }));
    out.unwrap_or_else(|payload| Err(TaskError::new("panic", panic_message(&*payload))))
}

/// A task future whose panic becomes a failed task (kind `panic`), as [`guarded_run`] does for
/// blocking tasks, instead of ending the task (or the worker loop) that polls it.
pub(crate) struct CatchPanic<F>(pub(crate) F);

impl<F: Future<Output = Result<u64, TaskError>> + Unpin> Future for CatchPanic<F> {
    type Output = Result<u64, TaskError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match std::panic::catch_unwind(AssertUnwindSafe(|| Pin::new(&mut self.0).poll(cx))) {
            Ok(p) => p,
            Err(payload) => Poll::Ready(Err(TaskError::new("panic", panic_message(&*payload)))),
        }
    }
}

/// The text of a panic's payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic with a non-text payload".into())
}

/// Parses a workload's arguments (the text after `NAME:`) into the workload, or a reason.
pub type ParseFn = fn(&str, &WorkloadOptions) -> Result<Arc<dyn Workload>, String>;

/// One built-in workload: its name, grammar, a line of help, and its parser.
pub struct Entry {
    /// The name before the first `:`.
    pub name: &'static str,
    /// The grammar, e.g. `fib:N`.
    pub usage: &'static str,
    /// What it does, in one line.
    pub help: &'static str,
    /// Parses the arguments after `NAME:` (empty when there were none).
    pub parse: ParseFn,
}

/// Every built-in workload. A new workload is one file plus one line here.
pub const REGISTRY: &[Entry] = &[
    fib::ENTRY,
    spin::ENTRY,
    read::ENTRY,
    sleep::ENTRY,
    mail::ENTRY,
    http::ENTRY,
    crash::ENTRY,
    cmd::ENTRY,
];

/// Parses a workload spec such as `fib:30` or `read:/dev/urandom:1024x100`.
pub fn parse(spec: &str, opts: &WorkloadOptions) -> Result<Arc<dyn Workload>, Error> {
    if let Some(w) = custom::find(spec) {
        return Ok(w);
    }
    let (name, args) = spec.split_once(':').unwrap_or((spec, ""));
    let entry = REGISTRY.iter().find(|e| e.name == name).ok_or_else(|| {
        Error::bad(
            Input::Workload,
            format!(
                "unknown workload '{name}' in '{spec}' (allowed: {})",
                REGISTRY
                    .iter()
                    .map(|e| e.usage)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    (entry.parse)(args, opts).map_err(|why| {
        Error::bad(
            Input::Workload,
            format!("bad workload '{spec}': {why} (usage: {})", entry.usage),
        )
    })
}

/// [`Workload::acquire`] of a parsed workload, its refusal worded as a bad spec's (the value
/// and its usage), as [`parse`] words one.
pub fn acquire(w: &dyn Workload) -> Result<(), Error> {
    w.acquire().map_err(|why| {
        let spec = w.spec();
        let name = spec.split_once(':').map_or(spec.as_str(), |(n, _)| n);
        let usage = REGISTRY
            .iter()
            .find(|e| e.name == name)
            .map_or(String::new(), |e| format!(" (usage: {})", e.usage));
        Error::bad(
            Input::Workload,
            format!("bad workload '{spec}': {why}{usage}"),
        )
    })
}

/// Parses a whole number argument, naming it in the error.
pub(crate) fn parse_count(what: &str, text: &str, max: u64) -> Result<u64, String> {
    let n: u64 = text
        .parse()
        .map_err(|_| format!("{what} '{text}' is not a whole number"))?;
    if n > max {
        return Err(format!("{what} {n} is above the maximum {max}"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_canonical_spec_prints_back_as_given() {
        // Compared with the input, not with a second parse: a parser that read `fib:20` as
        // `fib:2` would print and re-read `fib:2` consistently.
        let o = WorkloadOptions::default();
        for spec in [
            "fib:20",
            "fib:0",
            "fib:50",
            "spin:1000",
            "spin:1099511627776",
            "read:/dev/urandom:1024x100",
            "read:/dev/zero:1x7",
            "sleep:5ms",
            "sleep:250us",
            "sleep:2s",
            "mail",
            "mail:20",
            "crash:panic",
            "crash:abort",
            "crash:segv",
            "http:/add?name={rand}&delay=100",
            "http:/add?name=c&delay=100",
            "http:http://127.0.0.1:8080/delay/10ms",
            "http:http://h:1/{rand}/x?a=b&c={rand}",
            "http:http://[::1]:9/bytes/5",
        ] {
            let w = parse(spec, &o).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert_eq!(w.spec(), spec);
        }
    }

    #[test]
    fn other_spellings_print_their_canonical_spec() {
        let o = WorkloadOptions::default();
        for (spec, canonical) in [
            ("read", "read:/dev/urandom:1024x100"),
            ("sleep:1000ms", "sleep:1s"),
            ("sleep:0.5ms", "sleep:500us"),
            ("fib:007", "fib:7"),
            ("mail:30", "mail"),
        ] {
            let w = parse(spec, &o).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert_eq!(w.spec(), canonical, "{spec}");
        }
    }

    #[test]
    fn parsed_values_are_the_ones_given() {
        let o = WorkloadOptions::default();
        let nature = |spec: &str| parse(spec, &o).unwrap().nature();
        assert_eq!(nature("sleep:5ms"), Nature::Delay(Duration::from_millis(5)));
        assert_eq!(
            nature("http:/add?delay=100"),
            Nature::Delay(Duration::from_millis(100))
        );
        assert_eq!(nature("fib:20"), Nature::Cpu);
        let bytes = parse("read:/dev/zero:10x3", &o).unwrap().task(0).unwrap();
        assert_eq!(bytes, 30, "10 bytes read 3 times");
    }

    #[test]
    fn bad_specs_name_the_value() {
        let o = WorkloadOptions::default();
        for (spec, needle) in [
            ("nope", "unknown workload 'nope'"),
            ("fib:abc", "'abc'"),
            ("sleep:-1", "'-1'"),
            ("read:/nonexistent:1xabc", "COUNT 'abc'"),
            ("spin", "spin:N"),
        ] {
            let e = parse(spec, &o).err().unwrap().to_string();
            assert!(e.contains(needle), "{spec}: {e}");
        }
    }

    #[test]
    fn parsing_looks_at_no_file_and_acquire_names_the_spec() {
        let o = WorkloadOptions::default();
        for (spec, needle) in [
            ("read:/nonexistent:1x1", "cannot open '/nonexistent'"),
            (
                "cmd:/nonexistent/prog",
                "'/nonexistent/prog' does not exist",
            ),
        ] {
            let w = parse(spec, &o).unwrap();
            let e = acquire(&*w).unwrap_err().to_string();
            assert!(e.contains(&format!("bad workload '{spec}'")), "{e}");
            assert!(e.contains(needle) && e.contains("(usage: "), "{e}");
        }
        assert!(acquire(&*parse("read:/dev/zero:1x1", &o).unwrap()).is_ok());
    }

    #[test]
    fn a_wait_is_held_inline_in_no_more_than_a_boxed_future_and_a_word() {
        // An async model holds this inside every waiting task (tokio's cell steps by 128
        // bytes: tests/task_allocations.rs sees a step).
        assert_eq!(std::mem::size_of::<AsyncTask>(), 24);
    }

    #[test]
    fn a_sleep_starts_as_a_wait_that_ends_after_its_time_with_no_bytes() {
        let w = parse("sleep:20ms", &WorkloadOptions::default()).unwrap();
        let task = w.clone().start_async(0);
        assert!(matches!(task.0, AsyncTaskKind::Wait(_)));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let t0 = std::time::Instant::now();
        assert_eq!(rt.block_on(task), Ok(0));
        assert!(t0.elapsed() >= Duration::from_millis(20));
        // Every other workload keeps its own future, boxed (not polled here: a task through
        // `guarded_run` would take the interpreter lock that the gil test turns on meanwhile).
        let fib = parse("fib:5", &WorkloadOptions::default()).unwrap();
        assert!(matches!(fib.start_async(0).0, AsyncTaskKind::Boxed(_)));
    }

    #[test]
    fn panics_become_task_errors() {
        let w = parse("crash:panic", &WorkloadOptions::default()).unwrap();
        let e = guarded_run(&*w, 0).unwrap_err();
        assert_eq!(e.kind, "panic");
    }
}
