//! Ctrl-C (SIGINT) once a study is under way: a free-form open run (`--rate`), a crawl against
//! a delay server, a study over a hub, and an agent serving one. Each is interrupted while a
//! run is observably in progress (its `--prepare` hook ran, its tasks are on the server or the
//! agent), and then: the exit status (130 for a study, 0 for an agent, which leaves the hub),
//! a results file of valid JSON Lines that keeps every finished run and drops the interrupted
//! one (docs/results-schema.md: `concur run` drops an interrupted run instead of writing it),
//! and no process of the run left alive.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::hub::Hub;
use common::{descendants, of_type, read_lines, run_lines, stat, wait_for, Serve};
use serde_json::Value;

/// How long a stopped study may take to exit: a local run is killed at once; a hub study
/// gives its agents the executor's 5 s (`CANCEL_GRACE`) to stop the run; the rest is margin
/// for a loaded machine.
const EXIT_LIMIT: Duration = Duration::from_secs(15);

/// Whether the process `pid` that started at `start` still runs (a zombie has ended).
fn alive(pid: i32, start: u64) -> bool {
    stat(pid).is_some_and(|s| s.start == start && s.state != 'Z')
}

/// The number of lines in `path` (the `--prepare` hook's account of the runs begun).
fn count_lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Sends SIGINT to `child` and waits for it to exit, at most [`EXIT_LIMIT`]; its exit code
/// and how long it took.
fn interrupt(child: &mut Child) -> (Option<i32>, Duration) {
    // SAFETY: signalling a child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let sent = Instant::now();
    let mut status = None;
    wait_for("the interrupted process to exit", EXIT_LIMIT, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    (status.and_then(|s| s.code()), sent.elapsed())
}

/// Waits until every process of `tree` has ended.
fn all_gone(what: &str, tree: &[(i32, u64)]) {
    wait_for(what, Duration::from_secs(10), || {
        tree.iter().all(|&(pid, start)| !alive(pid, start))
    });
}

/// `GET /stats` of the delay server at `addr`, over a connection of its own.
fn server_stats(addr: std::net::SocketAddr) -> Value {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("the server answers");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /stats HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").expect("a response").1;
    serde_json::from_str(body).unwrap_or_else(|e| panic!("/stats: {e}: {text}"))
}

/// The `--prepare` hook that appends a line to `dir/prepared` before every run.
fn prepare_hook(dir: &Path) -> (String, std::path::PathBuf) {
    let path = dir.join("prepared");
    (format!("echo run >> '{}'", path.display()), path)
}

/// Checks what an interrupted study left: every line valid JSON (read_lines parses each), a
/// meta line first, `kept` run lines all `ok` (the finished runs, the interrupted one absent)
/// and one cell summarising them.
fn finished_runs_kept(results: &Path, kept: usize) -> Vec<Value> {
    let lines = read_lines(results);
    assert_eq!(lines[0]["type"], "meta", "{:?}", lines[0]);
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), kept, "the finished runs: {runs:?}");
    assert!(runs.iter().all(|r| r["status"] == "ok"), "{runs:?}");
    assert_eq!(of_type(&lines, "cell").len(), 1, "{lines:?}");
    lines
}

/// A `concur` child of `args`, its output discarded.
fn spawn(args: &[&str]) -> Child {
    common::concur_process()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("concur starts")
}

/// Waits until one run is recorded and the next has begun (its `--prepare` hook ran: the
/// hook count is one more than the run lines); then `tree` (the processes of the run under
/// way, which must be at least one) is taken. Each run lasts at least `run_s` seconds by its
/// schedule, so the run begun cannot finish before the signal that follows.
fn under_way(results: &Path, prepared: &Path, root: i32) -> (usize, Vec<(i32, u64)>) {
    let mut recorded = 0;
    wait_for(
        "one run recorded and the next begun",
        Duration::from_secs(60),
        || {
            recorded = run_lines(results).len();
            recorded >= 1 && count_lines(prepared) == recorded + 1
        },
    );
    let mut tree = Vec::new();
    wait_for("the run's processes", Duration::from_secs(10), || {
        tree = descendants(root);
        !tree.is_empty()
    });
    (recorded, tree)
}

#[test]
fn ctrl_c_during_an_open_run_keeps_the_finished_runs_and_leaves_no_process() {
    let _alone = common::alone();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r.jsonl");
    let (hook, prepared) = prepare_hook(dir.path());
    // 40 arrivals at 20/s: every run lasts at least 2 s by its schedule.
    let mut study = spawn(&[
        "run",
        "-w",
        "sleep:10ms",
        "-m",
        "pool:4",
        "-n",
        "40",
        "--rate",
        "20",
        "-r",
        "5",
        "--warmup",
        "0",
        "-q",
        "--prepare",
        &hook,
        "--json",
        results.to_str().unwrap(),
    ]);
    let (recorded, tree) = under_way(&results, &prepared, study.id() as i32);
    let (code, _) = interrupt(&mut study);
    assert_eq!(code, Some(130));
    all_gone("the open run's processes", &tree);
    let lines = finished_runs_kept(&results, recorded);
    for r in of_type(&lines, "run") {
        assert_eq!(r["tasks_ok"], 40, "{r}");
        assert_eq!(r["rate_asked"], 20.0, "an open run's line: {r}");
    }
}

#[test]
fn ctrl_c_during_a_crawl_keeps_the_finished_runs_and_frees_the_server() {
    let _alone = common::alone();
    let server = Serve::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r.jsonl");
    let (hook, prepared) = prepare_hook(dir.path());
    // 40 requests of 200 ms, 4 at a time: every run lasts at least 2 s.
    let url = format!("{}/add?delay=200", server.url);
    let mut crawl = spawn(&[
        "crawl",
        &url,
        "-n",
        "40",
        "-c",
        "4",
        "-r",
        "5",
        "-q",
        "--prepare",
        &hook,
        "--json",
        results.to_str().unwrap(),
    ]);
    let (recorded, tree) = under_way(&results, &prepared, crawl.id() as i32);
    // The run under way has its requests on the server.
    wait_for("requests in flight", Duration::from_secs(10), || {
        server_stats(server.addr)["in_flight"].as_i64() > Some(0)
    });
    let (code, _) = interrupt(&mut crawl);
    assert_eq!(code, Some(130));
    all_gone("the crawl's processes", &tree);
    let lines = finished_runs_kept(&results, recorded);
    for r in of_type(&lines, "run") {
        assert_eq!(r["tasks_ok"], 40, "{r}");
    }
    // The killed run's requests and connections are gone from the server (the only
    // connection left is this probe's own).
    wait_for(
        "the server to see the crawl's connections close",
        Duration::from_secs(10),
        || {
            let st = server_stats(server.addr);
            st["in_flight"] == 0 && st["open_connections"] == 1
        },
    );
}

/// The agents' share processes (the agent's children).
fn agent_tree(pid: u32) -> Vec<(i32, u64)> {
    descendants(pid as i32)
}

/// `concur run` of 5 runs of 16 half-second sleeps 4 at a time (2 s a run) over the one agent
/// of `hub`, each run preceded by the `--prepare` hook.
fn hub_study(hub: &Hub, dir: &Path, results: &Path) -> Child {
    let (hook, _) = prepare_hook(dir);
    common::concur_process()
        .args([
            "run",
            "-w",
            "sleep:500ms",
            "-m",
            "async:4",
            "-n",
            "16",
            "-r",
            "5",
        ])
        .args(["--warmup", "0", "-q", "--hub", &hub.url(), "--hosts", "1"])
        .args(["--prepare", &hook, "--json"])
        .arg(results)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("concur starts")
}

#[test]
#[ignore = "full tier: needs redis-server"]
fn ctrl_c_during_a_hub_study_stops_the_agents_share_and_keeps_the_finished_runs() {
    common::require(&[common::Need::Redis]);
    let _alone = common::alone();
    let mut hub = Hub::start(None);
    let url = hub.url();
    let agent = hub.agent("i1", &[]);
    common::wait_for_agents(&url, &["i1"]);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r.jsonl");
    let prepared = dir.path().join("prepared");
    let mut study = hub_study(&hub, dir.path(), &results);
    let mut recorded = 0;
    let mut share = Vec::new();
    wait_for(
        "one run recorded and the agent running the next share",
        Duration::from_secs(60),
        || {
            recorded = run_lines(&results).len();
            share = agent_tree(agent);
            recorded >= 1 && count_lines(&prepared) == recorded + 1 && !share.is_empty()
        },
    );
    let (code, took) = interrupt(&mut study);
    let mut err = String::new();
    std::io::Read::read_to_string(study.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(code, Some(130), "{err}");
    // The agent stopped its share when asked: the study did not wait out CANCEL_GRACE.
    assert!(
        took < Duration::from_secs(5),
        "the study took {took:?} to stop"
    );
    all_gone("the agent's share", &share);
    let lines = finished_runs_kept(&results, recorded);
    for r in of_type(&lines, "run") {
        assert_eq!(r["tasks_ok"], 16, "{r}");
        assert_eq!(r["hub"]["parts"][0]["host"], "i1", "{r}");
    }
    // The agent outlives the study's Ctrl-C, idle again, ready for the next study.
    wait_for("the agent idle again", Duration::from_secs(10), || {
        let agents = common::hub_agents(&url);
        agents.len() == 1 && agents[0]["doing"] == "idle"
    });
    let (_, a) = &mut hub.agents[0];
    assert!(a.try_wait().unwrap().is_none(), "the agent exited");
}

#[test]
#[ignore = "full tier: needs redis-server"]
fn ctrl_c_to_an_agent_mid_share_leaves_the_hub_and_kills_its_share() {
    common::require(&[common::Need::Redis]);
    let _alone = common::alone();
    let mut hub = Hub::start(None);
    let url = hub.url();
    let agent = hub.agent("i2", &[]);
    common::wait_for_agents(&url, &["i2"]);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r.jsonl");
    let prepared = dir.path().join("prepared");
    let mut study = hub_study(&hub, dir.path(), &results);
    let mut recorded = 0;
    let mut share = Vec::new();
    wait_for(
        "one run recorded and the agent running the next share",
        Duration::from_secs(60),
        || {
            recorded = run_lines(&results).len();
            share = agent_tree(agent);
            recorded >= 1 && count_lines(&prepared) == recorded + 1 && !share.is_empty()
        },
    );
    let (_, child) = &mut hub.agents[0];
    let (code, _) = interrupt(child);
    // An agent stopped by a signal leaves the hub and exits 0 (src/hub/agent.rs: `run`).
    assert_eq!(code, Some(0));
    all_gone("the agent's share", &share);
    // It took its registration with it: gone at once, not when its heartbeat expires.
    assert_eq!(common::hub_agents(&url), Vec::<Value>::new());
    let members = std::process::Command::new("redis-cli")
        .args(["-p", &hub.port.to_string(), "SMEMBERS", "concur:hub:agents"])
        .output()
        .expect("redis-cli runs");
    assert_eq!(String::from_utf8_lossy(&members.stdout).trim(), "");
    let beat = std::process::Command::new("redis-cli")
        .args(["-p", &hub.port.to_string(), "EXISTS", "concur:hub:agent:i2"])
        .output()
        .expect("redis-cli runs");
    assert_eq!(String::from_utf8_lossy(&beat.stdout).trim(), "0");
    // The study records the share its agent gave up and ends (no agent is left for the runs
    // after it).
    let mut status = None;
    wait_for("the study to end", Duration::from_secs(30), || {
        status = study.try_wait().unwrap();
        status.is_some()
    });
    let mut err = String::new();
    std::io::Read::read_to_string(study.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.unwrap().code(), Some(1), "{err}");
    let lines = read_lines(&results);
    let runs = of_type(&lines, "run");
    assert!(
        runs.len() > recorded,
        "the interrupted share's run: {runs:?}"
    );
    assert!(
        runs[..recorded].iter().all(|r| r["status"] == "ok"),
        "{runs:?}"
    );
    let cut = runs[recorded];
    assert_eq!(cut["status"], "failed", "{cut}");
    assert_eq!(cut["hub"]["parts"][0]["host"], "i2", "{cut}");
}
