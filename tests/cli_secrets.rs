//! Secrets and hostile text kept off what concur shows: credential headers masked in the
//! results file's command line, the HTML report and every printed line (while still sent);
//! a Redis password bound for the network in clear text warned of; and an agent's or a
//! results file's control characters escaped on the terminal and in the exports.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::hub::Hub;
use common::{concur, of_type, read_lines, recording_server, results_path, succeeds, Serve};
use serde_json::Value;

/// The secrets the study's headers carry; none may be shown or stored.
const SECRETS: [&str; 3] = ["s3cr3t-bearer", "s3cr3t-key", "s3cr3t-cookie"];

fn no_secret_in(what: &str, text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{what} shows '{s}':\n{text}");
    }
}

#[test]
fn credential_headers_are_sent_but_never_shown_or_stored() {
    let (url, seen) = recording_server();
    let (dir, results) = results_path();
    let html = dir.path().join("report.html");
    let markdown = dir.path().join("report.md");
    let out = concur()
        .args(["run", "-w", &format!("http:{url}"), "-m", "seq", "-n", "2"])
        .args(["--warmup", "0", "-r", "1"])
        .args(["-H", "Authorization: Bearer s3cr3t-bearer"])
        .arg("-HX-Api-Key: s3cr3t-key")
        .arg("--header=Cookie: session=s3cr3t-cookie")
        .args(["-H", "Accept-Language: fr"])
        .arg("--json")
        .arg(&results)
        .arg("--html")
        .arg(&html)
        .arg("--markdown")
        .arg(&markdown)
        .output()
        .expect("concur runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");

    // Sent as given.
    let requests = seen.lock().unwrap().join("\n");
    for header in [
        "authorization: Bearer s3cr3t-bearer",
        "x-api-key: s3cr3t-key",
        "cookie: session=s3cr3t-cookie",
    ] {
        assert!(
            requests
                .to_ascii_lowercase()
                .contains(&header.to_ascii_lowercase()),
            "the server did not receive '{header}': {requests}"
        );
    }

    // Stored masked: the scheme kept, the credential gone, other headers whole.
    let lines = read_lines(&results);
    let meta = of_type(&lines, "meta")[0];
    let command: Vec<&str> = meta["command"]
        .as_array()
        .expect("meta.command")
        .iter()
        .map(|a| a.as_str().unwrap_or_default())
        .collect();
    no_secret_in("meta.command", &command.join(" "));
    for shown in [
        "Authorization: Bearer ***",
        "-HX-Api-Key: ***",
        "--header=Cookie: ***",
        "Accept-Language: fr",
    ] {
        assert!(command.contains(&shown), "{shown} not in {command:?}");
    }
    no_secret_in(
        "the results file",
        &std::fs::read_to_string(&results).unwrap(),
    );
    let page = std::fs::read_to_string(&html).expect("html written");
    no_secret_in("the HTML report", &page);
    assert!(page.contains("Authorization: Bearer ***"), "{page}");
    no_secret_in(
        "the Markdown report",
        &std::fs::read_to_string(&markdown).unwrap(),
    );
    no_secret_in("stdout", &stdout);
    no_secret_in("stderr", &stderr);
}

#[test]
fn the_reports_of_a_results_file_that_kept_a_credential_mask_it() {
    let (url, _seen) = recording_server();
    let (dir, results) = results_path();
    succeeds(
        concur()
            .args(["run", "-w", &format!("http:{url}"), "-m", "seq", "-n", "1"])
            .args(["--warmup", "0", "-r", "1", "-q"])
            .args(["-H", "Authorization: Bearer s3cr3t-bearer"])
            .arg("--json")
            .arg(&results),
    );
    // As an older concur wrote it: the header whole in meta.command.
    let old = std::fs::read_to_string(&results)
        .unwrap()
        .replace("Bearer ***", "Bearer s3cr3t-bearer");
    assert!(old.contains("s3cr3t-bearer"));
    std::fs::write(&results, old).unwrap();
    let html = dir.path().join("again.html");
    let out = succeeds(
        concur()
            .arg("report")
            .arg(&results)
            .arg("--html")
            .arg(&html)
            .args(["--format", "json"]),
    );
    let json = String::from_utf8_lossy(&out.stdout);
    no_secret_in("the JSON report", &json);
    assert!(json.contains("Authorization: Bearer ***"), "{json}");
    let page = std::fs::read_to_string(&html).expect("html written");
    no_secret_in("the HTML report", &page);
    assert!(page.contains("Authorization: Bearer ***"));
}

#[test]
fn a_refused_credential_header_is_named_masked() {
    let out = concur()
        .args([
            "run",
            "-w",
            "http:http://127.0.0.1:1/",
            "-m",
            "seq",
            "-n",
            "1",
        ])
        .args(["-H", "Authorization: Bearer s3cr3t-bearer\u{1}"])
        .output()
        .expect("concur runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("Authorization: Bearer ***"), "{stderr}");
    no_secret_in("stderr", &stderr);
    assert!(!stderr.contains('\u{1}'), "{stderr:?}");
}

/// Starts `concur ARGS`, returns its first stderr line (within 20 s), and kills it: the
/// commands below go on to reach a host that may not answer for seconds.
fn first_stderr_line(args: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_concur"))
        .args(args)
        .env_remove("CONCUR_JOBS_BACKEND")
        .env_remove("CONCUR_HUB")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("concur starts");
    let stderr = child.stderr.take().expect("stderr piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stderr).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(20));
    let _ = child.kill();
    let _ = child.wait();
    line.unwrap_or_else(|_| panic!("concur {args:?} printed no line within 20 s"))
}

#[test]
fn a_redis_password_bound_off_loopback_in_clear_text_is_warned_of() {
    // 192.0.2.1 is TEST-NET-1: never this machine.
    let remote = "redis://:hunter2@192.0.2.1:6379/0";
    for (args, flag) in [
        (vec!["agents", "--hub", remote], "--hub"),
        (vec!["agent", "--hub", remote, "--name", "a1"], "--hub"),
        (
            vec!["jobs", "stats", "--jobs-backend", remote],
            "--jobs-backend",
        ),
        (
            vec![
                "run", "-w", "fib:1", "-m", "seq", "-n", "1", "--hub", remote,
            ],
            "--hub",
        ),
        (
            vec![
                "run",
                "-w",
                "fib:1",
                "-m",
                "jobs-redis:1",
                "-n",
                "1",
                "--jobs-backend",
                remote,
            ],
            "--jobs-backend",
        ),
    ] {
        let line = first_stderr_line(&args);
        assert_eq!(
            line.trim_end(),
            format!("warning: {flag} 'redis://:***@192.0.2.1:6379/0': the password crosses the network in clear text; use rediss:// (TLS)"),
            "{args:?}"
        );
    }
}

#[test]
#[ignore = "full tier: needs redis-server"]
fn a_redis_password_on_loopback_or_over_tls_is_not_warned_of() {
    common::require(&[common::Need::Redis]);
    let hub = Hub::start(Some("hunter2"));
    for url in [
        hub.url(),
        format!("redis://:hunter2@localhost:{}/0", hub.port),
    ] {
        let out = succeeds(concur().args(["agents", "--hub", &url]));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("clear text"), "{url}: {stderr}");
        let out = succeeds(concur().args(["jobs", "stats", "--jobs-backend", &url]));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("clear text"), "{url}: {stderr}");
    }
    let out = succeeds(concur().args([
        "run",
        "-w",
        "fib:1",
        "-m",
        "jobs-redis:1",
        "-n",
        "1",
        "--warmup",
        "0",
        "-r",
        "1",
        "--jobs-backend",
        &hub.url(),
        "--json",
        "-",
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("clear text"), "{stderr}");
    // Over TLS the password is not in clear text (the first line is whatever comes next).
    let line = first_stderr_line(&["agents", "--hub", "rediss://:hunter2@192.0.2.1:6379/0"]);
    assert!(!line.contains("clear text"), "{line}");
}

/// The bytes no terminal output may hold: ESC, BEL, CSI (C1, as UTF-8) and the other C0s.
fn assert_no_controls(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| c.is_control() && c != '\n')
        .collect();
    assert!(bad.is_empty(), "{what} holds controls {bad:?}:\n{text}");
}

#[test]
#[ignore = "full tier: needs redis-server and redis-cli"]
fn an_agents_escape_sequences_are_shown_escaped_by_concur_agents() {
    common::require(&[common::Need::Redis, common::Need::RedisCli]);
    let hub = Hub::start(None);
    let planted = serde_json::json!({
        "name": "evil", "host": "\u{1b}]0;pwned\u{7}\u{1b}[2J",
        "addr": "10.0.0.9\u{1b}[1A", "cores": 1, "mem_total_kib": null,
        "version": env!("CARGO_PKG_VERSION"), "pid": 1, "allow_commands": false,
        "clock_offset_ns": 0, "clock_uncertainty_ns": 0, "mono_offset_ns": 0,
        "beat_hub_ns": 0, "doing": "idle\u{9b}2J\r\n0 agents alive"
    });
    hub.redis_cli(&[
        "SET",
        "concur:hub:agent:evil",
        &planted.to_string(),
        "EX",
        "60",
    ]);
    hub.redis_cli(&["SADD", "concur:hub:agents", "evil"]);
    let out = succeeds(concur().args(["agents", "--hub", &hub.url()]));
    assert_no_controls("concur agents", &out.stdout);
    assert_no_controls("concur agents' stderr", &out.stderr);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("\\x1b]0;pwned\\x07\\x1b[2J"), "{shown}");
    assert!(
        shown.contains("idle\\u{9b}2J\\r\\n0 agents alive"),
        "{shown}"
    );
    assert!(shown.contains("1 agent alive"), "{shown}");
    // JSON escapes them its own way.
    let out = succeeds(concur().args(["agents", "--hub", &hub.url(), "--format", "json"]));
    assert_no_controls("concur agents --format json", &out.stdout);
    let info: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(info["host"], "\u{1b}]0;pwned\u{7}\u{1b}[2J");
}

#[test]
fn a_hosts_escape_sequences_in_a_results_file_are_escaped_in_every_report() {
    let (dir, results) = results_path();
    succeeds(
        concur()
            .args(["run", "-w", "fib:1", "-m", "seq", "-n", "2"])
            .args(["--warmup", "0", "-r", "1", "-q", "--json"])
            .arg(&results),
    );
    // As a hub run whose agent named itself with escape sequences, and failed saying some.
    let evil = "\u{1b}]0;pwned\u{7}\u{1b}[2J";
    let mut text = String::new();
    for line in std::fs::read_to_string(&results).unwrap().lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        if v["type"] == "run" {
            v["hub"] = serde_json::json!({
                "hosts": 1, "covered": 1.0, "lost_tasks": 0,
                "server_host": format!("srv{evil}"),
                "parts": [{
                    "host": format!("a1{evil}"), "share": 0, "tasks": 2, "status": "ok",
                    "clock_offset_ns": 0, "clock_uncertainty_ns": 0
                }]
            });
            v["error"] = Value::String(format!("host 'a1{evil}': failed\u{9b}2J"));
        }
        text.push_str(&v.to_string());
        text.push('\n');
    }
    std::fs::write(&results, text).unwrap();
    let html = dir.path().join("r.html");
    for format in ["table", "markdown", "ruby", "json"] {
        let out = succeeds(
            concur()
                .arg("report")
                .arg(&results)
                .args(["--format", format])
                .arg("--html")
                .arg(&html),
        );
        assert_no_controls(format, &out.stdout);
        assert_no_controls(&format!("{format}'s stderr"), &out.stderr);
        if format == "table" || format == "markdown" {
            let shown = String::from_utf8_lossy(&out.stdout);
            assert!(shown.contains("a1\\x1b]0;pwned\\x07\\x1b[2J"), "{shown}");
        }
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert_no_controls("the HTML report", page.as_bytes());
}

#[test]
#[ignore = "full tier: needs redis-server and redis-cli"]
fn a_planted_dead_jobs_escape_sequences_are_listed_escaped() {
    common::require(&[common::Need::Redis, common::Need::RedisCli]);
    let redis = Hub::start(None);
    let payload =
        "{\"class\":\"Concur::Task\",\"error_message\":\"\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}2J\"}";
    redis.redis_cli(&["ZADD", "dead", "0", payload]);
    let out = succeeds(concur().args(["jobs", "dead", "--jobs-backend", &redis.url()]));
    assert_no_controls("concur jobs dead", &out.stdout);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("\\x1b]0;pwned\\x07\\x1b[2J\\u009b2J"),
        "{shown}"
    );
}

/// Review row 12: a credential in a workload's query string stayed in the results file and the
/// tables; the hub's key reached the environment of the programs concur starts.
#[test]
fn query_credentials_stay_out_of_results_and_hub_secrets_out_of_children() {
    let server = Serve::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r.jsonl");
    let env_file = dir.path().join("hook-env");
    let out = concur()
        .env("CONCUR_HUB_KEY", "sekrit-hub-key-0123456789abcdef")
        .args(["run", "-m", "seq", "-n", "2", "-r", "1", "--warmup", "0"])
        .arg("-w")
        .arg(format!("http:{}/add?access_token=sekrit-query", server.url))
        .arg("-w")
        .arg("cmd:sh -c 'echo \"x${CONCUR_HUB_KEY}${CONCUR_HUB}x\"'")
        .arg("--setup")
        .arg(format!("env > {}", env_file.display()))
        .arg("--json")
        .arg(&results)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let text = std::fs::read_to_string(&results).unwrap();
    for shown in [&text, &stdout.to_string(), &stderr.to_string()] {
        assert!(!shown.contains("sekrit-query"), "{shown}");
        assert!(!shown.contains("sekrit-hub-key"), "{shown}");
    }
    assert!(text.contains("access_token=***"), "{text}");
    // The cmd: task printed `xx` and a line end: 3 bytes, no key between the x's.
    let cmd_run = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["type"] == "run" && v["workload"].as_str().unwrap().starts_with("cmd:"))
        .unwrap();
    assert_eq!(cmd_run["bytes"], 6, "{cmd_run}");
    let env = std::fs::read_to_string(&env_file).unwrap();
    assert!(!env.contains("CONCUR_HUB_KEY"), "{env}");
}
