//! Starting a run's child and watching it until it ends: reap it with `wait4` (for its
//! rusage), kill its process group at the timeout or on interrupt, sample the tree's PSS, and
//! collect what it said (the report on fd 3, the tail of stderr). A `__run` child gets a
//! counter page (fd 5) that the live view reads while it runs ([`run_watched`]).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{ChildStderr, ChildStdout, Command, Stdio};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::measure::live::CounterPage;
use crate::measure::memory::{TreeNow, TreePss, TreeSampler};
use crate::measure::rusage::{self, ChildUsage};
use crate::model::selfcall::{RunRequest, SelfCall};
use crate::runner::child::{ChildReport, LiveLine, LIVE_PREFIX};

/// The last lines a child wrote on stderr, for crash reasons.
const STDERR_TAIL: usize = 20;

/// How often the supervisor looks at the clock and the interrupt flag while it waits.
const POLL: Duration = Duration::from_millis(50);

/// Why the parent killed a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Kill {
    /// It ran past the plan's timeout.
    Timeout,
    /// The user asked to stop.
    Interrupt,
}

/// A run child that has started, with the pipes the parent reads: concur's own report on
/// fd 3, or an external program's stdout (for its `CONCUR {json}` line).
pub(crate) struct Started {
    pid: i32,
    /// The counter page a `__run` child counts its tasks into.
    counters: Option<Arc<CounterPage>>,
    report: Option<File>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
}

/// The prefix of the line on which an external program reports the work's own measurement.
pub(crate) const CONCUR_PREFIX: &str = "CONCUR ";

/// Everything the parent saw of a run, before it is judged ([`crate::runner::convert::classify`]).
#[derive(Debug)]
pub(crate) struct Ended {
    /// How the child ended and what it used, or why waiting for it failed.
    pub waited: std::io::Result<ChildUsage>,
    /// Whether, and why, the parent killed it.
    pub killed_for: Option<Kill>,
    /// Wall time seen by the parent, from before the spawn to the reap.
    pub wall_s: f64,
    /// The run's process tree's PSS: the peak, when at least one sample was taken, and the
    /// samples at the run's moments.
    pub pss: TreePss,
    /// The child's report, when it wrote one that decodes.
    pub report: Option<ChildReport>,
    /// An external program's last `CONCUR {json}` line (the JSON only).
    pub concur_line: Option<String>,
    /// The last lines of the child's stderr.
    pub stderr_tail: Vec<String>,
}

/// What a supervised process is.
pub(crate) enum Launch<'a> {
    /// `concur __run` for `request`: our own binary `exe` again, reporting on fd 3.
    Own {
        /// Our own binary (a library user's, for a lab).
        exe: &'a Path,
        /// The run it performs.
        request: Box<RunRequest>,
    },
    /// An external program, `sh -c command`, the study's jobs backend in its environment.
    External {
        /// The command line, its placeholders filled in.
        command: &'a str,
        /// The study's jobs backend.
        backend: Option<&'a crate::jobs::BackendUrl>,
    },
}

/// The one path from a launch to its end, for the study's runs, its hooks and an agent's
/// shares: starts the process and [`supervise`]s it until it ends, `limit` after now passes
/// or `stop` says so; the start's failure when it could not start.
pub(crate) fn run(
    launch: Launch<'_>,
    limit: Duration,
    stop: &dyn Fn() -> bool,
    live: &dyn Fn(&LiveLine),
) -> std::io::Result<Ended> {
    run_watched(launch, limit, stop, live, None)
}

/// A watcher of the run under way (the live view): handed a probe as the run starts, `None`
/// once it has ended.
pub(crate) type Watch<'a> = &'a dyn Fn(Option<Arc<dyn crate::os::live::RunProbe>>);

/// [`run`], with `watch` told how to read the run while it goes on.
pub(crate) fn run_watched(
    launch: Launch<'_>,
    limit: Duration,
    stop: &dyn Fn() -> bool,
    live: &dyn Fn(&LiveLine),
    watch: Option<Watch<'_>>,
) -> std::io::Result<Ended> {
    let started = Instant::now();
    let child = match launch {
        Launch::Own { exe, request } => spawn(exe, *request)?,
        Launch::External { command, backend } => spawn_external(command, backend)?,
    };
    Ok(supervise(
        child,
        started,
        started + limit,
        stop,
        live,
        watch,
    ))
}

/// What the live view reads of a run: the child's counter page and the sampled tree.
struct Probe {
    counters: Option<Arc<CounterPage>>,
    tree: Arc<TreeNow>,
}

impl crate::os::live::RunProbe for Probe {
    fn read(&self) -> crate::os::live::RunReading {
        let c = self.counters.as_ref().map(|c| c.read()).unwrap_or_default();
        crate::os::live::RunReading {
            started: c.started,
            ended: c.ended,
            failed: c.failed,
            planned: c.planned,
            all_started: c.all_started,
            cpu_s: self.tree.cpu_s(),
            pss_kib: self.tree.pss_kib(),
        }
    }
}

/// Starts `concur __run` for `request`, in a process group of its own, tied to the calling
/// thread's life (which waits for it in [`supervise`]).
fn spawn(exe: &Path, request: RunRequest) -> std::io::Result<Started> {
    // Without a page (no memfd here) the run goes on uncounted: only the live view misses it.
    let counters = CounterPage::create().ok().map(Arc::new);
    let fd = counters.as_ref().and_then(|c| c.fd());
    let (mut child, report) = SelfCall::Run(request).spawn_with_page(exe, fd)?;
    let Some(report) = report else {
        return Err(std::io::Error::other("a run child has a report pipe"));
    };
    Ok(Started {
        pid: child.id() as i32,
        counters,
        report: Some(report),
        stdout: None,
        stderr: child.stderr.take(),
    })
}

/// Starts an external program (`sh -c COMMAND`) in a process group of its own, tied to the
/// calling thread's life, with its stdout read for a `CONCUR {json}` line. The study's jobs
/// backend, if any, is in its environment as `CONCUR_JOBS_BACKEND` (how the classic
/// `rb:sidekiq:10` finds the study's Redis without a password on its command line).
fn spawn_external(
    command: &str,
    backend: Option<&crate::jobs::BackendUrl>,
) -> std::io::Result<Started> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for secret in crate::base::secret::CHILD_ENV_SECRETS {
        cmd.env_remove(secret);
    }
    if let Some(b) = backend {
        cmd.env(crate::jobs::BACKEND_ENV, b.expose());
    }
    own_group(&mut cmd);
    crate::os::process::die_with_parent(&mut cmd);
    // A page as a `__run` child gets one: the program may count its tasks into it
    // (`os::process::COUNTER_FD_ENV`), and the sampler then takes the tree at the same
    // moments as a model's (every task started; the end, before anything is freed).
    let counters = CounterPage::create().ok().map(Arc::new);
    if let Some(fd) = counters.as_ref().and_then(|c| c.fd()) {
        crate::os::process::pass_counters(&mut cmd, fd);
    }
    let mut child = cmd.spawn()?;
    Ok(Started {
        pid: child.id() as i32,
        counters,
        report: None,
        stdout: child.stdout.take(),
        stderr: child.stderr.take(),
    })
}

/// Puts the child that `cmd` starts in a process group of its own, so the runner can kill its
/// whole tree.
pub(super) fn own_group(cmd: &mut Command) {
    // SAFETY: setpgid is async-signal-safe and changes only the new child's group.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setpgid(0, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Watches a started child until it ends: kills its group when `deadline` passes or
/// `interrupted` says so, then kills whatever it left in its group, and gathers the rest.
fn supervise(
    run: Started,
    started: Instant,
    deadline: Instant,
    interrupted: &dyn Fn() -> bool,
    live: &dyn Fn(&LiveLine),
    watch: Option<Watch<'_>>,
) -> Ended {
    let pid = run.pid;
    let sampler = TreeSampler::start(pid, run.counters.clone());
    if let Some(w) = watch {
        w(Some(Arc::new(Probe {
            counters: run.counters.clone(),
            tree: sampler.now(),
        })));
    }
    let (live_tx, live_rx) = mpsc::channel();
    let stderr = read_tail(run.stderr, live_tx);
    let report = run.report.map(read_all);
    let concur_line = run.stdout.map(read_concur_line);
    let waiter = wait_in_thread(pid);
    let mut killed_for: Option<Kill> = None;
    let waited = loop {
        match waiter.recv_timeout(POLL) {
            Ok(r) => break r,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err(std::io::Error::other("the waiting thread died"))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                for line in live_rx.try_iter() {
                    live(&line);
                }
                if killed_for.is_none() {
                    killed_for = if interrupted() {
                        Some(Kill::Interrupt)
                    } else if Instant::now() >= deadline {
                        Some(Kill::Timeout)
                    } else {
                        None
                    };
                    if killed_for.is_some() {
                        kill_group(pid);
                    }
                }
            }
        }
    };
    let wall_s = started.elapsed().as_secs_f64();
    if let Some(w) = watch {
        w(None);
    }
    // Whatever the run left behind in its group goes with it.
    kill_group(pid);
    let pss = sampler.finish();
    let stderr_tail = stderr.join().map(Vec::from).unwrap_or_default();
    let report_text = report
        .map(|r| r.join().unwrap_or_default())
        .unwrap_or_default();
    let concur_line = concur_line.and_then(|r| r.join().ok().flatten());
    Ended {
        waited,
        killed_for,
        wall_s,
        pss,
        report: serde_json::from_str(report_text.trim()).ok(),
        concur_line,
        stderr_tail,
    }
}

/// Kills the process group that the run child leads (its pid is the group's id).
fn kill_group(pid: i32) {
    // SAFETY: kill(2) with a negative pid signals our own child's process group; ESRCH when
    // the group is already empty is harmless.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
}

/// Keeps the last [`STDERR_TAIL`] lines of the child's stderr, on a thread of its own so a
/// chatty child never blocks on a full pipe.
/// An open run's live lines ([`LIVE_PREFIX`]) go to `live` instead.
fn read_tail(
    stderr: Option<ChildStderr>,
    live: mpsc::Sender<LiveLine>,
) -> JoinHandle<VecDeque<String>> {
    std::thread::spawn(move || {
        let mut tail = VecDeque::with_capacity(STDERR_TAIL);
        if let Some(s) = stderr {
            for line in BufReader::new(s).lines().map_while(|l| l.ok()) {
                if let Some(json) = line.strip_prefix(LIVE_PREFIX) {
                    if let Ok(l) = serde_json::from_str(json) {
                        let _ = live.send(l);
                    }
                    continue;
                }
                if tail.len() == STDERR_TAIL {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        }
        tail
    })
}

/// Reads the report pipe to its end on a thread of its own.
fn read_all(mut pipe: File) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Reads an external program's stdout to its end on a thread of its own, keeping the JSON
/// of its last `CONCUR {json}` line.
fn read_concur_line(stdout: ChildStdout) -> JoinHandle<Option<String>> {
    std::thread::spawn(move || last_concur_line(BufReader::new(stdout)))
}

/// The JSON of the last `CONCUR {json}` line of `reader`, read to its end (the fuzz target
/// `concur_line` reads its input through this too).
pub(crate) fn last_concur_line(mut reader: impl BufRead) -> Option<String> {
    let mut last = None;
    let mut line = Vec::new();
    // Lines are read as bytes: a program may print anything else, in any encoding.
    while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
        if let Some(rest) = line.strip_prefix(CONCUR_PREFIX.as_bytes()) {
            last = Some(String::from_utf8_lossy(rest).trim().to_string());
        }
        line.clear();
    }
    last
}

/// Blocks in `wait4` on a thread of its own, so the supervisor can keep time meanwhile.
fn wait_in_thread(pid: i32) -> mpsc::Receiver<std::io::Result<ChildUsage>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(rusage::wait_child(pid));
    });
    rx
}
