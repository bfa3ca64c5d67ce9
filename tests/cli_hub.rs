//! Studies over a hub's agents, on loopback: what is refused before anything starts, an agent
//! killed in the middle of a run, and `concur agents`. (Agents on hosts of their own, in
//! network namespaces, are tests/hub_netns.rs.) Full tier: each test starts a redis-server.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::hub::Hub;
use common::{concur, free_port, hub_agents, run_lines, wait_for, wait_for_agents, Need};
use serde_json::Value;

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Runs `concur ARGS` expecting exit 2 with one line on stderr, and no results file.
fn refused(args: &[&str], results: &Path) -> String {
    let out = concur().args(args).output().expect("concur runs");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    assert!(!results.exists(), "{args:?} wrote {}", results.display());
    err
}

#[test]
#[ignore = "full tier: needs redis-server and redis-cli"]
fn what_cannot_work_is_refused_in_one_line_before_anything_starts() {
    common::require(&[Need::Redis, Need::RedisCli]);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r.jsonl");
    let json = results.to_str().unwrap();
    let study = |hub: &str| -> Vec<String> {
        [
            "run", "-w", "fib:5", "-m", "seq", "-n", "2", "--hub", hub, "--json", json,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };

    // A hub that does not answer.
    let nobody = format!("redis://127.0.0.1:{}/0", free_port());
    let err = refused(&args(&study(&nobody)), &results);
    assert!(
        err.contains("--hub") && err.contains("does not answer"),
        "{err}"
    );
    // Not a Redis URL.
    let err = refused(&args(&study("http://127.0.0.1:1/")), &results);
    assert!(err.contains("redis://"), "{err}");
    // --hosts without a hub.
    let err = refused(
        &[
            "run", "-w", "fib:5", "-m", "seq", "--hosts", "2", "--json", json,
        ],
        &results,
    );
    assert!(err.contains("--hosts") && err.contains("--hub"), "{err}");

    // A wrong password: refused, and never shown.
    let locked = Hub::start(Some("s3cret-hub"));
    let wrong = format!("redis://:wrong-pass@127.0.0.1:{}/0", locked.port);
    let err = refused(&args(&study(&wrong)), &results);
    assert!(
        !err.contains("wrong-pass") && err.contains("--hub"),
        "{err}"
    );

    let mut hub = Hub::start(None);
    let url = hub.url();
    // No agent yet.
    let err = refused(&args(&study(&url)), &results);
    assert!(err.contains("0 agents alive"), "{err}");
    hub.agent("plain", &[]);
    wait_for_agents(&url, &["plain"]);
    // More hosts than agents.
    let mut more = study(&url);
    more.extend(["--hosts".into(), "1,2".into()]);
    let err = refused(&args(&more), &results);
    assert!(err.contains("--hosts 2") && err.contains("plain"), "{err}");
    // A command of others on an agent started without --allow-commands.
    let err = refused(
        &[
            "run", "-w", "cmd:true", "-m", "seq", "-n", "2", "--hub", &url, "--json", json,
        ],
        &results,
    );
    assert!(
        err.contains("--allow-commands") && err.contains("plain"),
        "{err}"
    );
    // A server on an agent that is not there, and one for a study that starts none.
    let mut named = study(&url);
    named.extend(["--server-host".into(), "ghost".into()]);
    named[2] = "http:/delay/1ms".into();
    let err = refused(&args(&named), &results);
    assert!(
        err.contains("--server-host 'ghost'") && err.contains("plain"),
        "{err}"
    );
    let mut needless = study(&url);
    needless.extend(["--server-host".into(), "plain".into()]);
    let err = refused(&args(&needless), &results);
    assert!(err.contains("starts no delay server"), "{err}");
    // The agent commands' own bad input: exit 2, one line naming the value.
    for (argv, says) in [
        (vec!["agent"], "--hub"),
        (vec!["agents", "--hub", &url, "--format", "xml"], "'xml'"),
        (
            vec!["agent", "--hub", &url, "--name", "a b"],
            "--name 'a b'",
        ),
    ] {
        let out = concur()
            .args(&argv)
            .env_remove("CONCUR_HUB")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{argv:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{argv:?}: {err}");
        assert!(err.contains(says), "{argv:?}: {err}");
    }
    let mut zero = study(&url);
    zero.extend(["--hosts".into(), "0".into()]);
    let err = refused(&args(&zero), &results);
    assert!(err.contains("--hosts"), "{err}");
    // A second agent of the same name.
    let out = concur()
        .args(["agent", "--hub", &url, "--name", "plain"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--name 'plain'"), "{err}");
    // An agent of another version (its heartbeat written as an older concur would).
    let old = serde_json::json!({
        "name": "old", "host": "h", "addr": null, "cores": 1, "mem_total_kib": null,
        "version": "0.0.1", "pid": 1, "allow_commands": false,
        "clock_offset_ns": 0, "clock_uncertainty_ns": 0, "mono_offset_ns": 0,
        "beat_hub_ns": 0, "doing": "idle"
    });
    hub.redis_cli(&["SET", "concur:hub:agent:old", &old.to_string(), "EX", "60"]);
    hub.redis_cli(&["SADD", "concur:hub:agents", "old"]);
    let err = refused(&args(&study(&url)), &results);
    assert!(
        err.contains("0.0.1") && err.contains(env!("CARGO_PKG_VERSION")),
        "{err}"
    );
}

/// The pids whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let after = &stat[stat.rfind(')').unwrap_or(0) + 2..];
        let ppid: u32 = after
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if ppid == pid {
            out.push(p);
        }
    }
    out
}

#[test]
#[ignore = "full tier: needs redis-server"]
fn an_agent_killed_mid_run_is_lost_within_its_heartbeats_life_and_the_study_goes_on() {
    common::require(&[Need::Redis]);
    let _alone = common::alone();
    let mut hub = Hub::start(None);
    let url = hub.url();
    hub.agent("a1", &[]);
    let victim = hub.agent("a2", &[]);
    wait_for_agents(&url, &["a1", "a2"]);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r.jsonl");
    // 40 one-second tasks, 10 at a time on each host: 2 s over two hosts; then the same over
    // the one host left.
    let share_wall = Duration::from_secs(2);
    let mut study = Command::new(env!("CARGO_BIN_EXE_concur"))
        .args([
            "run", "-w", "sleep:1s", "-m", "async:10", "-n", "40", "-r", "1",
        ])
        .args(["--warmup", "0", "--hub", &url, "--hosts", "2,1", "--json"])
        .arg(&results)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once a2 has its share running, kill it.
    let mut runs = Vec::new();
    wait_for("a2 to run its share", Duration::from_secs(30), || {
        runs = children_of(victim);
        !runs.is_empty()
    });
    unsafe { libc::kill(victim as i32, libc::SIGKILL) };
    let killed = Instant::now();
    let bound = common::hub::loss_bound(share_wall);
    wait_for("the first run line", 3 * bound, || {
        !run_lines(&results).is_empty()
    });
    let took = killed.elapsed();
    assert!(took < bound, "the loss took {took:?} (bound {bound:?})");
    // Nothing of a2's is left running.
    wait_for("a2's run to die with it", Duration::from_secs(5), || {
        runs.iter()
            .all(|p| !Path::new(&format!("/proc/{p}")).exists())
    });
    let status = study.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(study.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    let runs = run_lines(&results);
    assert_eq!(runs.len(), 2, "{runs:?}");
    let over2 = &runs[0];
    assert_eq!(over2["hosts"], 2);
    assert_eq!(over2["status"], "failed");
    let hubrun = &over2["hub"];
    assert_eq!(hubrun["covered"], 0.5);
    assert_eq!(hubrun["lost_tasks"], 20);
    let parts = hubrun["parts"].as_array().unwrap();
    let lost: Vec<&Value> = parts.iter().filter(|p| p["status"] == "lost").collect();
    assert_eq!(lost.len(), 1, "{parts:?}");
    assert_eq!(lost[0]["host"], "a2");
    assert_eq!(over2["tasks_ok"], 20);
    assert_eq!(over2["tasks_failed"], 20);
    assert!(over2["error"].as_str().unwrap().contains("a2"), "{over2}");
    // a1's share of the sleeps recorded its wake-ups, as a run on one host does.
    let late = &over2["wakeups"]["late_us"];
    assert!(late["p50"].as_u64().is_some(), "{over2}");
    // The next cell ran on the agent left.
    let over1 = &runs[1];
    assert_eq!(
        (over1["hosts"].as_u64(), over1["status"].as_str()),
        (Some(1), Some("ok"))
    );
    assert_eq!(over1["hub"]["parts"][0]["host"], "a1");
    assert_eq!(over1["tasks_ok"], 40);
}

#[test]
#[ignore = "full tier: needs redis-server"]
fn agents_are_listed_and_told_to_leave() {
    common::require(&[Need::Redis]);
    let mut hub = Hub::start(None);
    let url = hub.url();
    hub.agent("n1", &["--allow-commands"]);
    hub.agent("n2", &[]);
    wait_for_agents(&url, &["n1", "n2"]);
    let list = hub_agents(&url);
    assert_eq!(list[0]["allow_commands"], true);
    assert_eq!(list[1]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(list[1]["doing"], "idle");
    assert!(list[1]["clock_uncertainty_ns"].as_u64().unwrap() > 0);
    let table = concur().args(["agents", "--hub", &url]).output().unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("n1") && text.contains("2 agents alive"),
        "{text}"
    );
    let out = concur()
        .args(["agents", "--hub", &url, "--stop", "nobody"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    concur()
        .args(["agents", "--hub", &url, "--stop", "n1"])
        .assert()
        .success();
    let (_, n1) = &mut hub.agents[0];
    let mut code = None;
    wait_for("n1 to leave", Duration::from_secs(10), || {
        code = n1.try_wait().unwrap().map(|s| s.code());
        code.is_some()
    });
    assert_eq!(code, Some(Some(0)));
    wait_for_agents(&url, &["n2"]);
}

#[test]
#[ignore = "full tier: needs redis-server"]
fn the_hub_password_shows_nowhere() {
    common::require(&[Need::Redis]);
    let mut hub = Hub::start(Some("hub-secret-9"));
    let url = hub.url();
    let agent = hub.agent("p1", &[]);
    wait_for_agents(&url, &["p1"]);
    // The agent took the URL from CONCUR_HUB: its command line does not hold it.
    let argv = std::fs::read(format!("/proc/{agent}/cmdline")).unwrap();
    assert!(!String::from_utf8_lossy(&argv).contains("hub-secret-9"));
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r.jsonl");
    let out = concur()
        .args([
            "run", "-w", "fib:5", "-m", "seq", "-n", "2", "-r", "1", "--warmup", "0",
        ])
        .args(["--hub", &url, "--json"])
        .arg(&results)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("hub-secret-9"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("hub-secret-9"));
    let text = std::fs::read_to_string(&results).unwrap();
    assert!(!text.contains("hub-secret-9"));
    assert!(text.contains("\"hosts\":1"), "{text}");
}

/// A hub reached over TLS (`rediss://`): a `redis-server` with a TLS port only, its
/// certificate made by openssl for the test (`#insecure`: the client does not check a
/// self-signed certificate).
#[test]
#[ignore = "full tier: needs redis-server"]
fn a_hub_over_tls() {
    common::require(&[Need::Redis]);
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let port = free_port();
    let mut redis = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .arg("--tls-cert-file")
        .arg(&cert)
        .arg("--tls-key-file")
        .arg(&key)
        .args([
            "--tls-auth-clients",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server with TLS");
    wait_for("redis over TLS to listen", Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let url = format!("rediss://127.0.0.1:{port}/0#insecure");
    let mut agent = Command::new(env!("CARGO_BIN_EXE_concur"))
        .args(["agent", "--quiet", "--name", "tls1", "--hub", &url])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_agents(&url, &["tls1"]);
    let results = dir.path().join("r.jsonl");
    let out = concur()
        .args([
            "run", "-w", "fib:5", "-m", "seq", "-n", "4", "-r", "1", "--warmup", "0",
        ])
        .args(["--hub", &url, "--json"])
        .arg(&results)
        .output()
        .unwrap();
    let _ = agent.kill();
    let _ = agent.wait();
    let _ = redis.kill();
    let _ = redis.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = run_lines(&results);
    assert_eq!(runs[0]["hub"]["parts"][0]["host"], "tls1");
    assert_eq!(runs[0]["tasks_ok"], 4);
}
