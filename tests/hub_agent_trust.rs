//! An agent and a queue worker hold what reaches them through a shared Redis to the plan's
//! own checks and to what their operator allows: a writer of the hub or of the queue may
//! choose the load, never a command, a file, a backend or a local target; and an agent
//! outlives its hub's restarts. Each case is sent as a study from elsewhere would send it:
//! JSON pushed on the agent's work list by the test itself. The tests that start a
//! redis-server are full-tier ones.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::hub::{hub_now_ns, Hub};
use common::{concur, free_port, wait_for, wait_for_agents, Need};
use serde_json::{json, Value};

/// An honest share of run `run`: `workload` under `model`, one task, starting in 200 ms.
fn share(c: &mut redis::Connection, run: &str, workload: &str, model: &str) -> Value {
    json!({
        "work": "part",
        "run": run,
        "part": 0,
        "of": 1,
        "version": env!("CARGO_PKG_VERSION"),
        "request": {
            "recipe": {
                "workload": workload,
                "options": {"mail_sink": "discard"},
                "gil": false,
                "settings": {"switch_interval": {"secs": 0, "nanos": 5_000_000}, "stack_size": 2 << 20},
                "jobs_backend": null
            },
            "model": model,
            "tasks": 1,
            "part": {
                "segment": {"index": 0, "of": 1, "whole_tasks": 1},
                "start_mono_ns": 0
            }
        },
        "start_hub_ns": hub_now_ns(c) + 200_000_000,
        "timeout_s": 30.0
    })
}

/// Puts `work` on agent `name`'s list and returns its answer on the run's list.
fn send(c: &mut redis::Connection, name: &str, work: &Value) -> Value {
    let run = work["run"].as_str().unwrap();
    let _: i64 = redis::cmd("RPUSH")
        .arg(format!("concur:hub:agent:{name}:work"))
        .arg(work.to_string())
        .query(c)
        .unwrap();
    let (_, text): (String, String) = redis::cmd("BLPOP")
        .arg(format!("concur:hub:run:{run}:done"))
        .arg(30.0)
        .query(c)
        .expect("the agent answers within 30 s");
    serde_json::from_str(&text).unwrap()
}

/// The reason an answer gives for refusing, or a failure naming what came instead.
fn refusal(answer: &Value) -> String {
    answer["refused"]
        .as_str()
        .unwrap_or_else(|| panic!("the share was not refused: {answer}"))
        .to_string()
}

#[test]
#[ignore = "full tier: needs redis-server"]
fn a_share_from_the_hub_is_held_to_the_plans_checks_and_the_operators_limits() {
    common::require(&[Need::Redis]);
    let mut hub = Hub::start(None);
    hub.agent_with("a1", &[]);
    wait_for_agents(&hub.url(), &["a1"]);
    let mut c = hub.connect();
    let dir = tempfile::tempdir().unwrap();

    // The honest share runs: the way the cases below are sent works.
    let w = share(&mut c, "r0", "fib:1", "seq");
    let ok = send(&mut c, "a1", &w);
    assert!(ok["refused"].is_null(), "{ok}");
    assert!(ok["ended"]["report"].is_object(), "{ok}");

    // A command, on an agent started without --allow-commands.
    let marker = dir.path().join("ran");
    let w = share(
        &mut c,
        "r1",
        &format!("cmd:touch {}", marker.display()),
        "seq",
    );
    assert!(refusal(&send(&mut c, "a1", &w)).contains("--allow-commands"));
    assert!(!marker.exists());

    // A queue of the hub's choosing: an SQLite file anywhere (a planted database with a
    // trigger, a folder created, another program's database switched to WAL).
    let db = dir.path().join("made/here/q.sqlite");
    let mut w = share(&mut c, "r2", "fib:1", "jobs-procs:1");
    w["request"]["recipe"]["jobs_backend"] = json!(format!("sqlite:{}", db.display()));
    let why = refusal(&send(&mut c, "a1", &w));
    assert!(why.contains("jobs backend"), "{why}");
    assert!(!dir.path().join("made").exists());
    let mut w = share(&mut c, "r3", "fib:1", "jobs-redis:1");
    w["request"]["recipe"]["jobs_backend"] = json!("redis://10.0.0.1:6379/0");
    assert!(refusal(&send(&mut c, "a1", &w)).contains("jobs backend"));

    // A file of the host's as an oracle.
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "s3cr3t").unwrap();
    let w = share(
        &mut c,
        "r4",
        &format!("read:{}:1x1", secret.display()),
        "seq",
    );
    let why = refusal(&send(&mut c, "a1", &w));
    assert!(why.contains("/dev/urandom"), "{why}");

    // A second request smuggled in a header value, to a target of the test's own.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let target = format!("http:http://{}/", listener.local_addr().unwrap());
    let mut w = share(&mut c, "r5", &target, "seq");
    w["request"]["recipe"]["options"]["headers"] =
        json!([["X-A", "v\r\n\r\nDELETE /x HTTP/1.1\r\nHost: h"]]);
    let why = refusal(&send(&mut c, "a1", &w));
    assert!(why.contains("-H"), "{why}");
    // A loopback target, not listed in --allow-targets.
    let w = share(&mut c, "r6", &target, "seq");
    let why = refusal(&send(&mut c, "a1", &w));
    assert!(why.contains("--allow-targets"), "{why}");
    assert!(
        listener.accept().is_err(),
        "nothing connected to the test's listener"
    );

    // Bounds: a timeout that would panic the agent, a start ten years ahead, a task count
    // above the plan's, a model the plan refuses.
    let mut w = share(&mut c, "r7", "fib:1", "seq");
    w["timeout_s"] = json!(1e300);
    assert!(refusal(&send(&mut c, "a1", &w)).contains("timeout"));
    let mut w = share(&mut c, "r8", "fib:1", "seq");
    w["start_hub_ns"] = json!(hub_now_ns(&mut c) + 10 * 365 * 86_400 * 1_000_000_000);
    assert!(refusal(&send(&mut c, "a1", &w)).contains("start"));
    let mut w = share(&mut c, "r9", "fib:1", "seq");
    w["request"]["tasks"] = json!(2_000_000);
    assert!(refusal(&send(&mut c, "a1", &w)).contains("tasks"));
    let w = share(&mut c, "r10", "fib:1", "nosuchmodel:3");
    assert!(refusal(&send(&mut c, "a1", &w)).contains("nosuchmodel"));
    // Run settings outside the plan's ranges, refused in the plan's own words.
    let mut w = share(&mut c, "r12", "fib:1", "seq");
    w["request"]["recipe"]["settings"]["stack_size"] = json!(1024);
    let why = refusal(&send(&mut c, "a1", &w));
    assert!(
        why.contains("--stack-size '1024' must be from 16k to 1G"),
        "{why}"
    );
    let mut w = share(&mut c, "r13", "fib:1", "seq");
    w["request"]["recipe"]["settings"]["switch_interval"] = json!({"secs": 2, "nanos": 0});
    let why = refusal(&send(&mut c, "a1", &w));
    assert!(
        why.contains("--switch-interval '2s' must be from 1us to 1s"),
        "{why}"
    );

    // Thirty servers asked for: at most four studies served at once.
    let mut started = 0;
    for i in 0..30 {
        let reply = format!("concur:hub:serve:s{i}:ready");
        let work = json!({"work": "serve", "study": format!("s{i}"), "tls": false, "reply": reply});
        let _: i64 = redis::cmd("RPUSH")
            .arg("concur:hub:agent:a1:work")
            .arg(work.to_string())
            .query(&mut c)
            .unwrap();
        let (_, text): (String, String) = redis::cmd("BLPOP")
            .arg(&reply)
            .arg(30.0)
            .query(&mut c)
            .expect("the agent answers");
        let ready: Value = serde_json::from_str(&text).unwrap();
        if ready["base_url"]["Ok"].is_string() {
            started += 1;
        }
    }
    assert_eq!(started, 4);

    // Junk on the work list is dropped; the agent is still there and still works.
    let _: i64 = redis::cmd("RPUSH")
        .arg("concur:hub:agent:a1:work")
        .arg("{\"work\":\"part\",\"run\":1e999}")
        .query(&mut c)
        .unwrap();
    let w = share(&mut c, "r11", "fib:1", "seq");
    let ok = send(&mut c, "a1", &w);
    assert!(ok["refused"].is_null(), "{ok}");
    let (_, agent) = &mut hub.agents[0];
    assert!(agent.try_wait().unwrap().is_none(), "the agent is alive");
}

#[test]
fn jobs_work_runs_no_command_of_a_queue_writer_without_allow_commands() {
    let dir = tempfile::tempdir().unwrap();
    let backend = format!("sqlite:{}", dir.path().join("q.sqlite").display());
    let marker = dir.path().join("ran");
    let enqueue = |n: &str| {
        let out = concur()
            .args(["jobs", "enqueue", "--jobs-backend", &backend, "-n", n, "-w"])
            .arg(format!("cmd:touch {}", marker.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    enqueue("1");
    let work = |extra: &[&str]| {
        let out = concur()
            .args(["jobs", "work", "--jobs-backend", &backend, "--until-empty"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    work(&[]);
    assert!(!marker.exists(), "the queued command ran");
    let dead = concur()
        .args(["jobs", "dead", "--jobs-backend", &backend])
        .output()
        .unwrap();
    let dead = String::from_utf8_lossy(&dead.stdout);
    assert!(
        dead.contains("--allow-commands") && dead.contains("cmd:touch"),
        "{dead}"
    );
    // The operator who allows commands gets them run.
    enqueue("1");
    work(&["--allow-commands"]);
    assert!(marker.exists());
}

/// Starts `concur agent` on `url` with its stderr in `log`.
fn agent_logging(url: &str, name: &str, log: &Path) -> Killed {
    Killed(
        Command::new(env!("CARGO_BIN_EXE_concur"))
            .args(["agent", "--name", name, "--hub", url])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    )
}

/// A child process killed when dropped, so that a failing test leaves nothing behind.
struct Killed(std::process::Child);

impl std::ops::Deref for Killed {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Killed {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        // The group too, for a child started as a group's leader (faketime starts the agent
        // as its own child).
        // SAFETY: kill takes a process group id and a signal; a group that is not there is
        // ESRCH, nothing else.
        unsafe {
            libc::kill(-(self.0.id() as i32), libc::SIGKILL);
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn read(path: &Path) -> String {
    let mut s = String::new();
    std::fs::File::open(path)
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
    s
}

#[test]
#[ignore = "full tier: needs redis-server"]
fn an_agent_waits_for_its_hub_and_survives_two_restarts() {
    common::require(&[Need::Redis]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("agent.log");
    // Started before its hub answers: it waits, saying so, instead of exiting.
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}/0");
    let mut agent = agent_logging(&url, "early", &log);
    wait_for("a line per attempt", Duration::from_secs(20), || {
        read(&log).contains("does not answer")
    });
    assert!(agent.try_wait().unwrap().is_none(), "{}", read(&log));
    let mut hub = Hub::start_on(port).expect("the chosen port is still free");
    wait_for_agents(&hub.url(), &["early"]);
    for _ in 0..2 {
        hub.restart();
        wait_for_agents(&hub.url(), &["early"]);
    }
    assert!(agent.try_wait().unwrap().is_none(), "{}", read(&log));
    // The next study uses it.
    let (_tmp, results) = common::results_path();
    let out = concur()
        .args(["run", "-w", "fib:5", "-m", "seq", "-n", "2", "--hub", &url])
        .arg("--json")
        .arg(&results)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}\n{}", read(&log));
    let runs = common::run_lines(&results);
    assert!(!runs.is_empty());
    for r in &runs {
        assert_eq!(r["tasks_ok"], 2, "{r}");
        assert_eq!(r["hub"]["parts"][0]["host"], "early", "{r}");
    }
    let _ = agent.kill();
    let _ = agent.wait();
    let text = read(&log);
    assert!(
        text.contains("joined the hub") && text.contains("again"),
        "{text}"
    );
}

#[test]
#[ignore = "full tier: needs redis-server"]
fn a_keyed_agent_takes_only_work_signed_with_the_hub_key() {
    common::require(&[Need::Redis]);
    use concur::hub::sign::{seal_with, Address, HubKey, Sealer};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("agent.log");
    let hub = Hub::start(None);
    let key_text = "a hub key of the test's own, 32 b";
    let mut agent = Killed(
        Command::new(env!("CARGO_BIN_EXE_concur"))
            .args(["agent", "--name", "k1", "--hub", &hub.url()])
            .env("CONCUR_HUB_KEY", key_text)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for_agents(&hub.url(), &["k1"]);
    let mut c = hub.connect();
    // What a study signs names the epoch the agent published at join.
    let epoch = epoch_of(&hub, "k1");
    let seal = |key: Option<&HubKey>, to: &str, scope: &str, at_ns: u64, body: String| {
        let a = Address {
            to,
            scope,
            epoch: &epoch,
            at_ns,
        };
        seal_with(key.map_or(Sealer::Bare, Sealer::Shared), &a, body)
    };
    let push = |c: &mut redis::Connection, text: String| {
        let _: i64 = redis::cmd("RPUSH")
            .arg("concur:hub:agent:k1:work")
            .arg(text)
            .query(c)
            .unwrap();
    };
    let key = HubKey::new(key_text).unwrap();
    let wrong = HubKey::new("somebody else's key, long enough").unwrap();
    // Unsigned, signed with another key, signed for another agent, and signed long ago.
    let b = share(&mut c, "u1", "fib:1", "seq").to_string();
    push(&mut c, b);
    let now = hub_now_ns(&mut c);
    let body = |c: &mut redis::Connection, run: &str| share(c, run, "fib:1", "seq").to_string();
    let b = body(&mut c, "u2");
    push(&mut c, seal(Some(&wrong), "k1", "u2", now, b));
    let b = body(&mut c, "u3");
    push(&mut c, seal(Some(&key), "k2", "u3", now, b));
    let b = body(&mut c, "u4");
    push(
        &mut c,
        seal(Some(&key), "k1", "u4", now - 3_600_000_000_000, b),
    );
    // Then one signed as a study with the key signs it, and the same again (a replay).
    let b = body(&mut c, "s1");
    let signed = seal(Some(&key), "k1", "s1", now, b);
    push(&mut c, signed.clone());
    let (_, answer): (String, String) = redis::cmd("BLPOP")
        .arg("concur:hub:run:s1:done")
        .arg(30.0)
        .query(&mut c)
        .expect("the signed share is answered");
    // The answer is signed too: it opens with the key, for the study, in the run's scope.
    let mut seen = concur::hub::sign::Seen::default();
    let body = concur::hub::sign::open(
        Some(&key),
        "study",
        Some("s1"),
        &answer,
        hub_now_ns(&mut c),
        &mut seen,
    )
    .expect("a signed answer");
    let done: Value = serde_json::from_str(&body).unwrap();
    assert!(done["refused"].is_null(), "{done}");
    push(&mut c, signed);
    let ok = {
        let b = share(&mut c, "s2", "fib:1", "seq").to_string();
        let now = hub_now_ns(&mut c);
        seal(Some(&key), "k1", "s2", now, b)
    };
    push(&mut c, ok);
    let _: (String, String) = redis::cmd("BLPOP")
        .arg("concur:hub:run:s2:done")
        .arg(30.0)
        .query(&mut c)
        .expect("the next signed share is answered");
    // Nothing was answered for the refused items, each refused in one line.
    for run in ["u1", "u2", "u3", "u4"] {
        let n: i64 = redis::cmd("LLEN")
            .arg(format!("concur:hub:run:{run}:done"))
            .query(&mut c)
            .unwrap();
        assert_eq!(n, 0, "{run} was answered");
    }
    let n: i64 = redis::cmd("LLEN")
        .arg("concur:hub:run:s1:done")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 0, "the replay was answered");
    let _ = agent.kill();
    let _ = agent.wait();
    let text = read(&log);
    let refused: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("work refused"))
        .collect();
    assert_eq!(refused.len(), 5, "{text}");
    for why in [
        "not signed",
        "does not match",
        "not for 'k1'",
        "from the hub's clock",
        "replay",
    ] {
        assert!(refused.iter().any(|l| l.contains(why)), "{why}: {text}");
    }
}

/// The epoch agent `name` published in its heartbeat.
fn epoch_of(hub: &Hub, name: &str) -> String {
    common::hub_agents(&hub.url())
        .iter()
        .find(|a| a["name"] == name)
        .and_then(|a| a["epoch"].as_str())
        .unwrap_or_else(|| panic!("agent {name} publishes no epoch"))
        .to_string()
}

/// Runs `concur jobs work` on the SQLite queue `path`, which must be refused (exit 2) saying
/// `says`.
fn queue_refused(path: &Path, says: &str) {
    let out = concur()
        .args(["jobs", "work", "--until-empty", "--jobs-backend"])
        .arg(format!("sqlite:{}", path.display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(says), "{says}: {err}");
}

/// A queue file of another user's (only root can hand one over).
#[test]
#[ignore = "full tier: needs root"]
fn a_queue_file_of_another_user_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    common::require(&[Need::Root]);
    let dir = tempfile::tempdir().unwrap();
    let theirs = dir.path().join("theirs.sqlite");
    std::fs::write(&theirs, b"").unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).expect("root hands it over");
    queue_refused(&theirs, "belongs to user 65534");
}

#[test]
fn a_queue_file_with_triggers_or_writable_by_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let refused = |path: &Path, says: &str| queue_refused(path, says);
    // A database planted with a trigger that rewrites every job into a command.
    let planted = dir.path().join("planted.sqlite");
    let c = rusqlite::Connection::open(&planted).unwrap();
    c.execute_batch(
        "CREATE TABLE jobs(id INTEGER PRIMARY KEY, payload TEXT);
         CREATE TRIGGER rewrite AFTER INSERT ON jobs BEGIN
           UPDATE jobs SET payload = 'cmd:touch /tmp/x' WHERE id = new.id; END;",
    )
    .unwrap();
    drop(c);
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o600)).unwrap();
    refused(&planted, "trigger");
    // A queue file that anyone may write.
    let open = dir.path().join("open.sqlite");
    std::fs::write(&open, b"").unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
    refused(&open, "written by other users");
    // A queue of this user's own, as concur makes it, is used.
    let own = dir.path().join("own.sqlite");
    let out = concur()
        .args(["jobs", "work", "--until-empty", "--jobs-backend"])
        .arg(format!("sqlite:{}", own.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
#[ignore = "full tier: needs redis-server and redis-cli"]
fn a_share_carries_headers_and_a_queue_only_when_its_cell_needs_them() {
    common::require(&[Need::Redis, Need::RedisCli]);
    let hub = Hub::start(None);
    let mut c = hub.connect();
    // An agent played by the test: a heartbeat that says idle; it reads what it is sent.
    let me = json!({
        "name": "fake", "host": "h", "addr": null, "cores": 2, "mem_total_kib": null,
        "version": env!("CARGO_PKG_VERSION"), "pid": 1, "allow_commands": false,
        "clock_offset_ns": 0, "clock_uncertainty_ns": 0, "mono_offset_ns": 0,
        "beat_hub_ns": hub_now_ns(&mut c), "doing": "idle"
    });
    hub.redis_cli(&["SET", "concur:hub:agent:fake", &me.to_string(), "EX", "60"]);
    hub.redis_cli(&["SADD", "concur:hub:agents", "fake"]);
    let (_tmp, results) = common::results_path();
    let mut study = Killed(
        Command::new(env!("CARGO_BIN_EXE_concur"))
            .args(["run", "-w", "fib:1", "-m", "seq", "-n", "1", "-r", "1"])
            .args(["--warmup", "0", "--timeout", "10s", "--hub", &hub.url()])
            .args(["-H", "Authorization: Bearer s3cr3t-token"])
            .args(["--jobs-backend", "redis://:hunter2@127.0.0.1:1/0"])
            .arg("--json")
            .arg(&results)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (_, work): (String, String) = redis::cmd("BLPOP")
        .arg("concur:hub:agent:fake:work")
        .arg(30.0)
        .query(&mut c)
        .expect("the study sends its share");
    let _ = study.kill();
    let _ = study.wait();
    assert!(work.contains("fib:1"), "{work}");
    assert!(
        !work.contains("s3cr3t") && !work.contains("hunter2"),
        "a share of fib:1 carries the study's secrets: {work}"
    );
}

#[test]
#[ignore = "full tier: needs redis-server"]
fn a_study_and_its_agents_with_the_hub_key_run_together() {
    common::require(&[Need::Redis]);
    let hub = Hub::start(None);
    let key = "the study's and the agents' key, 0123456789";
    let _agent = Killed(
        Command::new(env!("CARGO_BIN_EXE_concur"))
            .args(["agent", "--name", "ka", "--quiet", "--hub", &hub.url()])
            .env("CONCUR_HUB_KEY", key)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_agents(&hub.url(), &["ka"]);
    let (_tmp, results) = common::results_path();
    let out = concur()
        .args(["run", "-w", "fib:5", "-m", "seq", "-n", "2", "-r", "2"])
        .args(["--hub", &hub.url(), "--json"])
        .arg(&results)
        .env("CONCUR_HUB_KEY", key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let runs = common::run_lines(&results);
    assert!(runs.len() >= 2, "{runs:?}");
    for r in &runs {
        assert_eq!(r["tasks_ok"], 2, "{r}");
        assert_eq!(r["hub"]["parts"][0]["host"], "ka", "{r}");
    }
}

#[test]
#[ignore = "full tier: needs redis-server"]
fn a_share_that_does_not_end_is_killed_at_its_deadline_and_the_study_ends_soon_after() {
    common::require(&[Need::Redis]);
    // Timed: alone.
    let _alone = common::alone();
    let mut hub = Hub::start(None);
    hub.agent("slow", &[]);
    wait_for_agents(&hub.url(), &["slow"]);
    let (_tmp, results) = common::results_path();
    let started = std::time::Instant::now();
    let out = concur()
        .args(["run", "-w", "sleep:60s", "-m", "seq", "-n", "1", "-r", "1"])
        .args([
            "--warmup",
            "0",
            "--timeout",
            "2s",
            "--hub",
            &hub.url(),
            "--json",
        ])
        .arg(&results)
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // The share's deadline is 2 s after the common start (LEAD from now); the agent kills it
    // then and answers, and the study ends within a loaded machine's margin of it.
    let bound =
        concur::hub::executor::LEAD + Duration::from_secs(2) + 2 * common::hub::LOADED_MARGIN;
    assert!(took < bound, "the study took {took:?} (bound {bound:?})");
    let runs = common::run_lines(&results);
    assert_eq!(runs.len(), 1, "{runs:?}");
    let r = &runs[0];
    assert_eq!(r["tasks_ok"], 0, "{r}");
    // The part ended by the agent's answer (its run failed), not by the study giving up at
    // the answer's own deadline (2.5 s later, within the bound above on a loaded machine):
    // that part would be "lost", "did not answer within the run's timeout".
    let part = &r["hub"]["parts"][0];
    assert_eq!(part["status"], "failed", "{r}");
    // The agent is idle again, and its share's process is gone.
    wait_for("the agent idle", Duration::from_secs(10), || {
        common::hub_agents(&hub.url())
            .iter()
            .any(|a| a["name"] == "slow" && a["doing"] == "idle")
    });
    let agent_pid = hub.agents[0].1.id() as i32;
    wait_for("no share left running", Duration::from_secs(10), || {
        common::descendants(agent_pid).is_empty()
    });
}

#[test]
#[ignore = "full tier: needs redis-server and faketime"]
fn an_agent_under_libfaketime_finishes_an_open_model_share() {
    common::require(&[Need::Redis, Need::Faketime]);
    // libfaketime rewrites CLOCK_MONOTONIC in user space (to about the epoch's seconds, even
    // with +0s): a timer armed at an absolute time from that clock never fired, and the
    // agent's async share of an open run never ended.
    let hub = Hub::start(None);
    let _agent = Killed(
        Command::new("faketime")
            .process_group(0)
            .args(["-f", "+0s", env!("CARGO_BIN_EXE_concur")])
            .args(["agent", "--name", "faked", "--quiet", "--hub", &hub.url()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_agents(&hub.url(), &["faked"]);
    let (_tmp, results) = common::results_path();
    let out = concur()
        .args([
            "run",
            "-w",
            "sleep:1ms",
            "-m",
            "async:4",
            "--rate",
            "100",
            "-n",
            "20",
        ])
        .args(["-r", "1", "--warmup", "0", "--timeout", "20s"])
        .args(["--hub", &hub.url(), "--json"])
        .arg(&results)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let runs = common::run_lines(&results);
    assert_eq!(runs[0]["tasks_ok"], 20, "{}", runs[0]);
}

#[test]
#[ignore = "full tier: needs redis-server"]
fn an_agents_bad_key_or_allow_list_is_one_line_and_exit_2() {
    common::require(&[Need::Redis]);
    let hub = Hub::start(None);
    for (env, args, says) in [
        (Some("short"), vec![], "CONCUR_HUB_KEY"),
        (
            None,
            vec!["--allow-targets", "10.0.0.0/33"],
            "--allow-targets '10.0.0.0/33'",
        ),
        (
            None,
            vec!["--allow-targets", "a b"],
            "--allow-targets 'a b'",
        ),
    ] {
        let mut cmd = concur();
        cmd.args(["agent", "--name", "bad", "--hub", &hub.url()])
            .args(&args);
        if let Some(k) = env {
            cmd.env("CONCUR_HUB_KEY", k);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
