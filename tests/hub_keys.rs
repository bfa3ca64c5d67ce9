//! A key per party (issue 42, rows 3 and 4): the review's three demonstrations, each played
//! by the test with only what the attacker held (an agent's own key), and each refused in
//! one line: (a) a `cmd:` share signed by an agent's key, to another agent started with
//! `--allow-commands`; (b) a stop signed by an agent's key; (c) an answer signed by agent Y
//! for agent X's share, which the study refuses and does not exit 0 for. And replay: a share
//! signed for an agent, sent again after that agent restarted, is refused by the epoch it
//! names. The hub is a `redis-server` of the test's own on loopback: full-tier tests.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::hub::{announce, hub_now_ns, keygen, Hub};
use common::{concur, wait_for, wait_for_agents, Need};
use concur::hub::seal::{self, OpenKey, SealKey};
use concur::hub::{self as chub, HubUrl, KeyFiles, Role, Trust};
use serde_json::{json, Value};

/// Writes the list `lines` to DIR/NAME.
fn list(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// A party played by the test, holding the key in `key` and nothing else: what it signs is
/// signed with that key, as concur signs.
fn party(hub: &Hub, key: &Path) -> chub::Hub {
    let files = KeyFiles {
        signing_key: Some(key.to_path_buf()),
        listed: None,
    };
    let trust = Trust::load(Role::Study, &files).unwrap();
    chub::Hub::new_with(&HubUrl::parse(&hub.url()).unwrap(), trust).unwrap()
}

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `concur agent --name NAME` with its own key and the study keys listed, `extra`
/// flags added, its stderr in `log`.
fn agent(hub: &Hub, name: &str, key: &Path, studies: &Path, extra: &[&str], log: &Path) -> Killed {
    Killed(
        Command::new(env!("CARGO_BIN_EXE_concur"))
            .args([
                "agent",
                "--name",
                name,
                "--hub",
                &hub.url(),
                "--signing-key",
            ])
            .arg(key)
            .arg("--study-keys")
            .arg(studies)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    )
}

fn read(path: &Path) -> String {
    let mut s = String::new();
    std::fs::File::open(path)
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
    s
}

/// The heartbeat of agent `name`, as `concur agents --format json` shows it.
fn heartbeat(hub: &Hub, name: &str) -> Value {
    common::hub_agents(&hub.url())
        .into_iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("agent {name} is not on the hub"))
}

/// A share of run `run`: `workload` under `seq`, one task, starting in 200 ms.
fn share(c: &mut redis::Connection, run: &str, workload: &str) -> String {
    json!({
        "work": "part", "run": run, "part": 0, "of": 1,
        "version": env!("CARGO_PKG_VERSION"),
        "request": {
            "recipe": {
                "workload": workload,
                "options": {"mail_sink": "discard"},
                "gil": false,
                "settings": {"switch_interval": {"secs": 0, "nanos": 5_000_000}, "stack_size": 2 << 20},
                "jobs_backend": null
            },
            "model": "seq", "tasks": 1,
            "part": {"segment": {"index": 0, "of": 1, "whole_tasks": 1}, "start_mono_ns": 0}
        },
        "start_hub_ns": hub_now_ns(c) + 200_000_000,
        "timeout_s": 30.0
    })
    .to_string()
}

/// The share `body` (of run `scope`) sealed, as a study seals it, to the key agent `to`'s
/// heartbeat publishes, at `epoch`.
fn sealed(c: &mut redis::Connection, to: &str, scope: &str, epoch: &str, body: &str) -> String {
    let beat: String = redis::cmd("GET")
        .arg(format!("concur:hub:agent:{to}"))
        .query(c)
        .unwrap();
    let beat: Value = serde_json::from_str(&beat).unwrap();
    let key = SealKey::parse(beat["seal_key"].as_str().unwrap()).unwrap();
    let part = serde_json::from_str::<Value>(body).unwrap()["part"]
        .as_u64()
        .unwrap() as usize;
    let ad = seal::share_ad(to, epoch, scope, part);
    let blob = seal::seal_to(&key, &ad, body.as_bytes()).unwrap();
    json!({"work": "sealed", "part": part, "blob": blob}).to_string()
}

/// The share `body` sealed to agent `to` and signed by `by` for it at `epoch`, pushed on that
/// agent's work list; the text pushed.
fn send(
    by: &chub::Hub,
    c: &mut redis::Connection,
    to: &str,
    scope: &str,
    epoch: &str,
    body: String,
) -> String {
    let body = sealed(c, to, scope, epoch, &body);
    push_signed(by, c, to, scope, epoch, body)
}

/// `body` as it is, signed by `by` for agent `to` at `epoch`, pushed on that agent's work
/// list; the text pushed.
fn push_signed(
    by: &chub::Hub,
    c: &mut redis::Connection,
    to: &str,
    scope: &str,
    epoch: &str,
    body: String,
) -> String {
    let text = by.seal(c, to, scope, epoch, body).unwrap();
    let _: i64 = redis::cmd("RPUSH")
        .arg(format!("concur:hub:agent:{to}:work"))
        .arg(&text)
        .query(c)
        .unwrap();
    text
}

/// The answer on run `run`'s list within 30 s.
fn answered(c: &mut redis::Connection, run: &str) -> String {
    let (_, text): (String, String) = redis::cmd("BLPOP")
        .arg(format!("concur:hub:run:{run}:done"))
        .arg(30.0)
        .query(c)
        .unwrap_or_else(|e| panic!("run {run} was not answered within 30 s: {e}"));
    text
}

/// How many answers run `run`'s list holds.
fn answers(c: &mut redis::Connection, run: &str) -> i64 {
    redis::cmd("LLEN")
        .arg(format!("concur:hub:run:{run}:done"))
        .query(c)
        .unwrap()
}

/// The lines of `log` that say work was refused.
fn refusals(log: &Path) -> Vec<String> {
    read(log)
        .lines()
        .filter(|l| l.contains("work refused"))
        .map(str::to_string)
        .collect()
}

/// Demonstration (a): a party holding only an agent's key sends a signed `cmd:` share to
/// another agent started with `--allow-commands`. (Before: with the one hub key every party
/// held, that agent ran `id` as root.)
#[test]
#[ignore = "full tier: needs redis-server"]
fn a_share_signed_by_an_agents_key_is_refused_by_another_agent() {
    common::require(&[Need::Redis]);
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(None);
    let (study_key, study_pub) = keygen(dir.path(), "study");
    let (a1_key, a1_pub) = keygen(dir.path(), "a1");
    let (a2_key, a2_pub) = keygen(dir.path(), "a2");
    let studies = list(dir.path(), "studies", &[format!("{study_pub} laptop")]);
    let log = dir.path().join("a2.log");
    let _a2 = agent(&hub, "a2", &a2_key, &studies, &["--allow-commands"], &log);
    wait_for_agents(&hub.url(), &["a2"]);
    let beat = heartbeat(&hub, "a2");
    assert_eq!(beat["key"], json!(a2_pub), "{beat}");
    let epoch = beat["epoch"].as_str().unwrap().to_string();
    let mut c = hub.connect();

    // a1's key, a2's current epoch, a share that would run a command.
    let marker = dir.path().join("ran");
    let attacker = party(&hub, &a1_key);
    let cmd = share(&mut c, "forged", &format!("cmd:touch {}", marker.display()));
    send(&attacker, &mut c, "a2", "forged", &epoch, cmd);
    // Then the study's own share: once it is answered, the forged one was judged.
    let study = party(&hub, &study_key);
    let fib = share(&mut c, "honest", "fib:1");
    send(&study, &mut c, "a2", "honest", &epoch, fib);
    let answer = answered(&mut c, "honest");
    // The answer is a2's, signed with its key: it opens for a study that pinned that key.
    let signed: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(signed["from"], json!(a2_pub), "{signed}");
    let done: Value = serde_json::from_str(signed["body"].as_str().unwrap()).unwrap();
    assert!(done["refused"].is_null(), "{done}");

    assert!(!marker.exists(), "the forged command ran");
    assert_eq!(answers(&mut c, "forged"), 0);
    let refused = refusals(&log);
    assert_eq!(refused.len(), 1, "{}", read(&log));
    assert!(
        refused[0].contains("not a listed study key") && refused[0].contains(&a1_pub[..23]),
        "{}",
        refused[0]
    );
}

/// Demonstration (b): a stop signed by an agent's key, through `concur agents --stop` with
/// that key. (Before: the agent left the hub.) A stop signed by a listed study key is obeyed.
#[test]
#[ignore = "full tier: needs redis-server"]
fn a_stop_signed_by_a_key_that_is_not_a_studys_is_refused() {
    common::require(&[Need::Redis]);
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(None);
    let (study_key, study_pub) = keygen(dir.path(), "study");
    let (a1_key, _) = keygen(dir.path(), "a1");
    let (a2_key, _) = keygen(dir.path(), "a2");
    let studies = list(dir.path(), "studies", &[study_pub]);
    let log = dir.path().join("a2.log");
    let mut a2 = agent(&hub, "a2", &a2_key, &studies, &[], &log);
    wait_for_agents(&hub.url(), &["a2"]);
    let stop = |key: &Path| {
        let out = concur()
            .args([
                "agents",
                "--hub",
                &hub.url(),
                "--stop",
                "a2",
                "--signing-key",
            ])
            .arg(key)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    stop(&a1_key);
    // The study's share after it: once it is answered, the stop was judged.
    let mut c = hub.connect();
    let epoch = heartbeat(&hub, "a2")["epoch"].as_str().unwrap().to_string();
    let fib = share(&mut c, "after", "fib:1");
    send(&party(&hub, &study_key), &mut c, "a2", "after", &epoch, fib);
    answered(&mut c, "after");
    assert!(a2.0.try_wait().unwrap().is_none(), "{}", read(&log));
    let refused = refusals(&log);
    assert_eq!(refused.len(), 1, "{}", read(&log));
    assert!(
        refused[0].contains("not a listed study key"),
        "{}",
        refused[0]
    );

    // The study key's holder stops it.
    stop(&study_key);
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = a2.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "a2 did not leave: {}",
            read(&log)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{}", read(&log));
    assert!(
        read(&log).contains("left the hub (told to)"),
        "{}",
        read(&log)
    );
}

/// The epoch a planted agent publishes: hexadecimal, its own.
fn epoch_of(name: &str) -> String {
    format!("{:x}-0123456789abcdef", name.as_bytes()[0])
}

/// The sealing key of a planted agent `name` (a fixed one, its name's first byte).
fn sealing(name: &str) -> OpenKey {
    OpenKey::from_seed(&[name.as_bytes()[0]; 32]).unwrap()
}

/// Agent `name`'s heartbeat, idle, as an agent holding `key` signs it, planted on the hub.
fn plant(hub: &Hub, c: &mut redis::Connection, name: &str, key: &Path) {
    plant_with(hub, c, name, key, Some(sealing(name).public().to_string()));
}

/// [`plant`], publishing `seal_key` (or none) as its key to seal shares to.
fn plant_with(
    hub: &Hub,
    c: &mut redis::Connection,
    name: &str,
    key: &Path,
    seal_key: Option<String>,
) {
    let info: chub::AgentInfo = serde_json::from_value(json!({
        "name": name, "host": "forger", "addr": "127.0.0.1", "cores": 2,
        "mem_total_kib": 1_000_000, "version": env!("CARGO_PKG_VERSION"), "pid": 1,
        "allow_commands": false, "clock_offset_ns": 0, "clock_uncertainty_ns": 1000,
        "mono_offset_ns": 0, "beat_hub_ns": 0, "doing": "idle",
        "epoch": epoch_of(name), "seal_key": seal_key
    }))
    .unwrap();
    announce(c, name, &party(hub, key).beat_text(&info));
}

/// The share the study signed for agent `name`: its body, opened without a check.
fn take(c: &mut redis::Connection, name: &str) -> Value {
    let (_, text): (String, String) = redis::cmd("BLPOP")
        .arg(format!("concur:hub:agent:{name}:work"))
        .arg(30.0)
        .query(c)
        .unwrap_or_else(|e| panic!("no work for {name} within 30 s: {e}"));
    let envelope: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(envelope["epoch"], json!(epoch_of(name)));
    let body: Value = serde_json::from_str(envelope["body"].as_str().unwrap()).unwrap();
    // A share comes sealed to the key the planted heartbeat published.
    assert_eq!(body["work"], "sealed", "{body}");
    let part = body["part"].as_u64().unwrap() as usize;
    let run = envelope["scope"].as_str().unwrap();
    let ad = seal::share_ad(name, &epoch_of(name), run, part);
    let plain = sealing(name)
        .open(&ad, body["blob"].as_str().unwrap())
        .unwrap();
    serde_json::from_slice(&plain).unwrap()
}

/// What an honest agent `agent` answers for `work`: its tasks all succeeded.
fn honest(work: &Value, agent: &str) -> String {
    let tasks = work["request"]["tasks"].as_u64().unwrap();
    json!({
        "run": work["run"], "part": work["part"], "agent": agent,
        "ended": {
            "waited": {"Ok": {
                "exit_code": 0, "signal": null, "user_s": 0.01, "sys_s": 0.01,
                "max_rss_kib": 5000, "ctx_voluntary": 1, "ctx_involuntary": 1
            }},
            "killed_for": null, "wall_s": 0.05, "tree_pss_kib": 5000,
            "report": {
                "wall_s": 1e-6, "tasks_ok": tasks, "tasks_failed": 0, "failures": {},
                "bytes": 0, "error": null, "latency_us": null, "threads_created": 0,
                "processes_created": 0, "pid": 1, "gil_switches": 0
            },
            "stderr_tail": []
        },
        "clock": {"offset_ns": 0, "uncertainty_ns": 1000, "mono_offset_ns": 0}
    })
    .to_string()
}

/// Demonstration (c): agent Y signs, with its own key, an answer for agent X's share. (Before:
/// with the one hub key, the study exited 0 and recorded X's part with `wall_s` 1e-06.) The
/// study refuses it and exits 1, though `-i` accepts failed runs.
#[test]
#[ignore = "full tier: needs redis-server"]
fn an_answer_signed_by_another_agent_is_refused_and_the_study_fails() {
    common::require(&[Need::Redis]);
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(None);
    let (study_key, _) = keygen(dir.path(), "study");
    let (x_key, x_pub) = keygen(dir.path(), "x");
    let (y_key, _) = keygen(dir.path(), "y");
    let mut c = hub.connect();
    plant(&hub, &mut c, "x", &x_key);
    plant(&hub, &mut c, "y", &y_key);
    let results = dir.path().join("r.jsonl");
    let mut study = Killed(
        Command::new(env!("CARGO_BIN_EXE_concur"))
            .args(["run", "-w", "fib:5", "-m", "seq", "-n", "4", "-r", "1"])
            .args(["--warmup", "0", "--hub", &hub.url(), "--hosts", "2"])
            // -i accepts failed runs, not a refused answer.
            .arg("-i")
            .arg("--signing-key")
            .arg(&study_key)
            .arg("--json")
            .arg(&results)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let for_x = take(&mut c, "x");
    let for_y = take(&mut c, "y");
    let run = for_x["run"].as_str().unwrap().to_string();
    // Y answers X's share in X's name, then each answers its own.
    let y = party(&hub, &y_key);
    let x = party(&hub, &x_key);
    let push = |c: &mut redis::Connection, by: &chub::Hub, body: String| {
        let text = by.seal(c, "study", &run, "", body).unwrap();
        let _: i64 = redis::cmd("RPUSH")
            .arg(format!("concur:hub:run:{run}:done"))
            .arg(text)
            .query(c)
            .unwrap();
    };
    push(&mut c, &y, honest(&for_x, "x"));
    push(&mut c, &x, honest(&for_x, "x"));
    push(&mut c, &y, honest(&for_y, "y"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = study.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the study did not end within 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    study
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("trusted agent 'x''s key on first sight: {x_pub}")),
        "{stderr}"
    );
    let refused: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("an item on its answer list was refused"))
        .collect();
    assert_eq!(refused.len(), 1, "{stderr}");
    assert!(
        stderr.contains("1 answer from the hub was refused") && stderr.contains("-i does not"),
        "{stderr}"
    );
    assert!(
        refused[0].contains("which went to agent 'x', signed by agent 'y''s key"),
        "{stderr}"
    );
    let runs = common::run_lines(&results);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["status"], "failed", "{}", runs[0]);
}

/// With keys per party every share is sealed to its agent: an agent whose signed heartbeat
/// publishes no key to seal to is left out before anything runs, and the study says so in one
/// line and exits 2 (no agent it can use), within seconds rather than at its timeout.
#[test]
#[ignore = "full tier: needs redis-server"]
fn a_study_refuses_an_agent_that_publishes_no_key_to_seal_to_and_exits_2() {
    common::require(&[Need::Redis]);
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(None);
    let (study_key, _) = keygen(dir.path(), "study");
    let (x_key, _) = keygen(dir.path(), "x");
    let mut c = hub.connect();
    plant_with(&hub, &mut c, "x", &x_key, None);
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_concur"))
        .args(["run", "-w", "fib:5", "-m", "seq", "-n", "2", "-r", "1"])
        .args(["--warmup", "0", "--hub", &hub.url(), "--hosts", "1"])
        .arg("--signing-key")
        .arg(&study_key)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(60), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("has 0 agents alive")
            && lines[0]
                .contains("left out: 'x': its heartbeat publishes no key to seal its shares to"),
        "{stderr}"
    );
    let work: i64 = redis::cmd("LLEN")
        .arg("concur:hub:agent:x:work")
        .query(&mut c)
        .unwrap();
    assert_eq!(work, 0, "nothing was sent to x");
}

/// Replay across a restart: a share the study signed for agent a1 ran once; sent again after
/// a1 restarted (a new process, with no memory of it), within the minute its instant is
/// accepted, it is refused by the epoch it names. (Before: it ran again.)
#[test]
#[ignore = "full tier: needs redis-server"]
fn a_share_sent_again_after_its_agent_restarted_is_refused() {
    common::require(&[Need::Redis]);
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(None);
    let (study_key, study_pub) = keygen(dir.path(), "study");
    let (a1_key, _) = keygen(dir.path(), "a1");
    let studies = list(dir.path(), "studies", &[study_pub]);
    let first_log = dir.path().join("first.log");
    let mut first = agent(&hub, "a1", &a1_key, &studies, &[], &first_log);
    wait_for_agents(&hub.url(), &["a1"]);
    let before = heartbeat(&hub, "a1")["epoch"].as_str().unwrap().to_string();
    let mut c = hub.connect();
    let study = party(&hub, &study_key);
    let body = share(&mut c, "once", "fib:1");
    let captured = send(&study, &mut c, "a1", "once", &before, body);
    answered(&mut c, "once");

    // a1 leaves (SIGTERM, as a service manager stops it) and starts again.
    // SAFETY: kill sends a signal to our own child.
    unsafe { libc::kill(first.0.id() as i32, libc::SIGTERM) };
    let _ = first.0.wait();
    let again_log = dir.path().join("again.log");
    let _again = agent(&hub, "a1", &a1_key, &studies, &[], &again_log);
    wait_for("a1 back with a new epoch", Duration::from_secs(20), || {
        common::hub_agents(&hub.url())
            .iter()
            .any(|a| a["name"] == "a1" && a["epoch"].as_str().is_some_and(|e| e != before))
    });
    let now = heartbeat(&hub, "a1")["epoch"].as_str().unwrap().to_string();
    let _: i64 = redis::cmd("RPUSH")
        .arg("concur:hub:agent:a1:work")
        .arg(&captured)
        .query(&mut c)
        .unwrap();
    let body = share(&mut c, "after", "fib:1");
    send(&study, &mut c, "a1", "after", &now, body);
    answered(&mut c, "after");
    assert_eq!(answers(&mut c, "once"), 0, "the captured share ran again");
    let refused = refusals(&again_log);
    assert_eq!(refused.len(), 1, "{}", read(&again_log));
    assert!(
        refused[0].contains(&format!(
            "for epoch '{before}', not this agent's current one"
        )),
        "{}",
        refused[0]
    );
}

/// A key file or list that is not one, and keys that cannot work together: one line naming
/// the file (and line) or variable and what is expected, exit 2, before any hub is asked (the
/// hub here is a port nothing listens on).
#[test]
fn malformed_keys_and_lists_are_one_line_and_exit_2() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (key, public) = keygen(d, "own");
    let studies = list(d, "studies", std::slice::from_ref(&public));
    let bad_key = d.join("bad.key");
    std::fs::write(&bad_key, "not a key\n").unwrap();
    std::fs::set_permissions(&bad_key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let open_key = d.join("open.key");
    std::fs::copy(&key, &open_key).unwrap();
    std::fs::set_permissions(&open_key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let bad_list = list(
        d,
        "bad-list",
        &[public.clone(), "concur-ed25519:short".into()],
    );
    let unnamed = list(d, "unnamed", std::slice::from_ref(&public));
    let hub = "redis://127.0.0.1:1/0";
    let k = key.to_str().unwrap();
    fn with<'a>(head: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        head.iter().chain(extra).copied().collect()
    }
    let agent = ["agent", "--name", "a1", "--hub", hub];
    let run = ["run", "-w", "fib:1", "-m", "seq", "-n", "1", "--hub", hub];
    let s = studies.to_str().unwrap();
    /// The command line, a variable set for it, what its one line must say.
    type Case<'a> = (Vec<&'a str>, Option<(&'a str, &'a str)>, Vec<String>);
    let cases: Vec<Case> = vec![
        (
            with(
                &agent,
                &[
                    "--signing-key",
                    bad_key.to_str().unwrap(),
                    "--study-keys",
                    s,
                ],
            ),
            None,
            vec![bad_key.display().to_string(), "PKCS#8 PEM".into()],
        ),
        (
            with(
                &agent,
                &[
                    "--signing-key",
                    open_key.to_str().unwrap(),
                    "--study-keys",
                    s,
                ],
            ),
            None,
            vec!["chmod 600".into()],
        ),
        (
            with(
                &agent,
                &[
                    "--signing-key",
                    k,
                    "--study-keys",
                    bad_list.to_str().unwrap(),
                ],
            ),
            None,
            vec![
                format!("'{}', line 2", bad_list.display()),
                "expected".into(),
            ],
        ),
        (
            with(&agent, &["--signing-key", k]),
            None,
            vec!["--study-keys".into(), "CONCUR_STUDY_KEYS".into()],
        ),
        (
            with(&agent, &["--signing-key", k]),
            Some(("CONCUR_STUDY_KEYS", "concur-ed25519:nope")),
            vec!["CONCUR_STUDY_KEYS".into(), "not a public key".into()],
        ),
        (
            with(&agent, &["--study-keys", s]),
            None,
            vec!["--signing-key".into()],
        ),
        (
            with(&agent, &["--signing-key", k, "--study-keys", s]),
            Some(("CONCUR_HUB_KEY", "a shared key of the lab, 0123456789")),
            vec!["two ways to sign".into()],
        ),
        (
            with(
                &run,
                &[
                    "--signing-key",
                    k,
                    "--agent-keys",
                    unnamed.to_str().unwrap(),
                ],
            ),
            None,
            vec![unnamed.display().to_string(), "names no agent".into()],
        ),
        (
            with(&run, &["--agent-keys", unnamed.to_str().unwrap()]),
            None,
            vec!["--signing-key".into()],
        ),
    ];
    for (args, env, says) in cases {
        let mut cmd = concur();
        cmd.args(&args).env_remove("CONCUR_HUB_KEY");
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        for s in &says {
            assert!(err.contains(s.as_str()), "{args:?}: {s}: {err}");
        }
    }
}

/// A study and its agents, each with its own key, run together: the agents listed by name
/// (`--agent-keys`), the study's delay server on the second agent (its serve and usage
/// questions signed too); then a study without the list trusts each agent's key on first
/// sight and says so.
#[test]
#[ignore = "full tier: needs redis-server"]
fn a_study_and_its_agents_with_keys_of_their_own_run_together() {
    common::require(&[Need::Redis]);
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(None);
    let (study_key, study_pub) = keygen(dir.path(), "study");
    let (k1, p1) = keygen(dir.path(), "k1");
    let (k2, p2) = keygen(dir.path(), "k2");
    let studies = list(dir.path(), "studies", &[study_pub]);
    let agents = list(
        dir.path(),
        "agents",
        &[format!("{p1} k1"), format!("{p2} k2")],
    );
    let loopback = ["--allow-targets", "127.0.0.1"];
    let _a1 = agent(
        &hub,
        "k1",
        &k1,
        &studies,
        &loopback,
        &dir.path().join("k1.log"),
    );
    let _a2 = agent(
        &hub,
        "k2",
        &k2,
        &studies,
        &loopback,
        &dir.path().join("k2.log"),
    );
    wait_for_agents(&hub.url(), &["k1", "k2"]);
    let study = |extra: &[&str]| {
        let (_tmp, results) = common::results_path();
        let out = concur()
            .args([
                "run",
                "-w",
                "http:/delay/1ms",
                "-m",
                "pool:2",
                "-n",
                "4",
                "-r",
                "1",
            ])
            .args([
                "--warmup",
                "0",
                "--hub",
                &hub.url(),
                "--hosts",
                "1",
                "--server-host",
                "k2",
                "--json",
            ])
            .arg(&results)
            .arg("--signing-key")
            .arg(&study_key)
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        let runs = common::run_lines(&results);
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!(runs[0]["tasks_ok"], 4, "{}", runs[0]);
        assert_eq!(runs[0]["hub"]["server_host"], "k2", "{}", runs[0]);
        assert!(runs[0]["hub"]["server_cpu_s"].is_number(), "{}", runs[0]);
        err
    };
    let listed = study(&["--agent-keys", agents.to_str().unwrap()]);
    assert!(!listed.contains("first sight"), "{listed}");
    let first_sight = study(&[]);
    for (name, key) in [("k1", &p1), ("k2", &p2)] {
        assert!(
            first_sight.contains(&format!(
                "trusted agent '{name}''s key on first sight: {key}"
            )),
            "{first_sight}"
        );
    }
}

/// Issue 42, row 5: an answer for agent x's share signed by a key that is none of the
/// study's agents' (x holds another key than the one its heartbeat was pinned with): the
/// study refuses it and ends the share at once, naming the host and why, instead of waiting
/// for the run's timeout (here 60 s); exit 1. (Before: the share waited for its deadline.)
#[test]
#[ignore = "full tier: needs redis-server"]
fn an_answer_under_a_key_the_study_does_not_take_ends_its_share_within_5_s() {
    common::require(&[Need::Redis]);
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(None);
    let (study_key, _) = keygen(dir.path(), "study");
    let (x_key, _) = keygen(dir.path(), "x");
    let (other_key, _) = keygen(dir.path(), "other");
    let mut c = hub.connect();
    plant(&hub, &mut c, "x", &x_key);
    let results = dir.path().join("r.jsonl");
    let mut study = Killed(
        Command::new(env!("CARGO_BIN_EXE_concur"))
            .args(["run", "-w", "fib:5", "-m", "seq", "-n", "2", "-r", "1"])
            .args(["--warmup", "0", "--hub", &hub.url(), "--hosts", "1"])
            .args(["--timeout", "60s", "--signing-key"])
            .arg(&study_key)
            .arg("--json")
            .arg(&results)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let for_x = take(&mut c, "x");
    let run = for_x["run"].as_str().unwrap().to_string();
    let text = party(&hub, &other_key)
        .seal(&mut c, "study", &run, "", honest(&for_x, "x"))
        .unwrap();
    let pushed = Instant::now();
    let _: i64 = redis::cmd("RPUSH")
        .arg(format!("concur:hub:run:{run}:done"))
        .arg(text)
        .query(&mut c)
        .unwrap();
    let mut status = None;
    wait_for("the study to end", Duration::from_secs(70), || {
        status = study.0.try_wait().unwrap();
        status.is_some()
    });
    let took = pushed.elapsed();
    let mut stderr = String::new();
    study
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    eprintln!("the refused answer ended the study in {took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}: {stderr}");
    assert_eq!(status.unwrap().code(), Some(1), "{stderr}");
    let runs = common::run_lines(&results);
    assert_eq!(runs.len(), 1, "{runs:?}");
    let error = runs[0]["error"].as_str().unwrap();
    assert!(
        error.contains("host 'x' had its answer refused by the study")
            && error.contains("the key of none of this study's agents"),
        "{error}"
    );
    assert_eq!(
        runs[0]["hub"]["parts"][0]["status"], "refused",
        "{}",
        runs[0]
    );
}

/// Issue 42, row 12: with keys per party, a share's request travels sealed to its agent's
/// X25519 key (published in its signed heartbeat): a reader of the hub's Redis (here
/// `redis-cli monitor`, which sees every work item the study pushes) finds neither the
/// `Authorization` header's credential nor another header's value, while the agent opens the
/// share, runs it, and the server receives both headers as given. (Before: the work item
/// carried `Authorization: Bearer SECRET123` in clear.)
#[test]
#[ignore = "full tier: needs redis-server and redis-cli"]
fn a_shares_credentials_are_sealed_to_its_agent_and_still_sent() {
    common::require(&[Need::Redis, Need::RedisCli]);
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(None);
    let (study_key, study_pub) = keygen(dir.path(), "study");
    let (k1, _) = keygen(dir.path(), "k1");
    let studies = list(dir.path(), "studies", &[study_pub]);
    let log = dir.path().join("k1.log");
    let _a1 = agent(&hub, "k1", &k1, &studies, &Hub::LOOPBACK, &log);
    wait_for_agents(&hub.url(), &["k1"]);
    let sealing = heartbeat(&hub, "k1")["seal_key"]
        .as_str()
        .map(str::to_string);
    assert!(
        sealing.is_some_and(|k| k.starts_with("concur-x25519:")),
        "{}",
        heartbeat(&hub, "k1")
    );
    // Every command the hub is sent, as any reader of it with MONITOR sees it.
    let monitored = dir.path().join("monitor.txt");
    let port = hub
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let _monitor = Killed(
        Command::new("redis-cli")
            .args(["-p", &port, "monitor"])
            .stdout(std::fs::File::create(&monitored).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for(
        "redis-cli monitor to start",
        Duration::from_secs(10),
        || read(&monitored).starts_with("OK"),
    );
    let (url, seen) = common::recording_server();
    let (_tmp, results) = common::results_path();
    let out = concur()
        .args(["run", "-w", &format!("http:{url}"), "-m", "seq", "-n", "2"])
        .args([
            "-r",
            "1",
            "--warmup",
            "0",
            "--hub",
            &hub.url(),
            "--hosts",
            "1",
        ])
        .args(["-H", "Authorization: Bearer SECRET123"])
        .args(["-H", "X-Probe: probe-456"])
        .arg("--json")
        .arg(&results)
        .arg("--signing-key")
        .arg(&study_key)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}\nagent: {}", read(&log));
    let runs = common::run_lines(&results);
    assert_eq!(runs[0]["tasks_ok"], 2, "{}", runs[0]);
    // The server received the headers as given.
    let requests = seen.lock().unwrap().join("\n").to_ascii_lowercase();
    for header in ["authorization: bearer secret123", "x-probe: probe-456"] {
        assert!(
            requests.contains(header),
            "not received: {header}: {requests}"
        );
    }
    // The hub saw the share pushed, sealed: neither value in it, nor anywhere on the hub.
    let mut pushed = String::new();
    wait_for(
        "the share's push in the monitor",
        Duration::from_secs(10),
        || {
            pushed = read(&monitored);
            pushed.contains("concur:hub:agent:k1:work")
        },
    );
    for secret in ["SECRET123", "probe-456"] {
        assert!(
            !pushed.contains(secret),
            "'{secret}' crossed the hub in clear:\n{pushed}"
        );
    }
    assert!(
        pushed.contains("sealed") && pushed.contains("blob"),
        "{pushed}"
    );

    // A listed study's share in clear, and a sealed one moved to another run: each refused
    // with one line, neither run; a sealed share after them runs.
    let epoch = heartbeat(&hub, "k1")["epoch"].as_str().unwrap().to_string();
    let mut c = hub.connect();
    let study = party(&hub, &study_key);
    let clear = share(&mut c, "clear", "fib:1");
    push_signed(&study, &mut c, "k1", "clear", &epoch, clear);
    let body = share(&mut c, "moved", "fib:1");
    let moved = sealed(&mut c, "k1", "moved", &epoch, &body);
    push_signed(&study, &mut c, "k1", "elsewhere", &epoch, moved);
    let body = share(&mut c, "honest", "fib:1");
    send(&study, &mut c, "k1", "honest", &epoch, body);
    let done: Value = serde_json::from_str(&answered(&mut c, "honest")).unwrap();
    assert!(
        done["body"].as_str().unwrap().contains("tasks_ok"),
        "{done}"
    );
    assert_eq!(answers(&mut c, "clear") + answers(&mut c, "elsewhere"), 0);
    let refused = refusals(&log);
    assert_eq!(refused.len(), 2, "{}", read(&log));
    assert!(
        refused[0].contains("not sealed to this agent's key"),
        "{}",
        refused[0]
    );
    assert!(refused[1].contains("does not open"), "{}", refused[1]);
}
