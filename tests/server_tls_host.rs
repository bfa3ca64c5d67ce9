//! `--server-host NAME` with `--tls`: the study's delay server runs on the agent named (not
//! the one the default would pick), over TLS with the certificate that agent made, and the
//! other agent's clients reach it over HTTPS; the run line says where the server ran and that
//! every request's connection was a TLS one.

mod common;

use std::process::Stdio;

use common::hub::Hub;
use common::{of_type, read_lines};

#[test]
#[ignore = "full tier: needs redis-server"]
fn a_tls_study_server_runs_on_the_agent_named_by_server_host() {
    common::require(&[common::Need::Redis]);
    let _alone = common::alone();
    let mut hub = Hub::start(None);
    let url = hub.url();
    // The default server host is the first agent no cell needs (by name: b-load with
    // --hosts 1); the test names the other.
    hub.agent("a-srv", &[]);
    hub.agent("b-load", &[]);
    common::wait_for_agents(&url, &["a-srv", "b-load"]);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r.jsonl");
    let out = common::concur_process()
        .args([
            "run",
            "-w",
            "http:/add?delay=5",
            "-m",
            "async:4",
            "-n",
            "20",
            "-r",
            "1",
        ])
        .args([
            "--warmup",
            "0",
            "--tls",
            "--no-keepalive",
            "--hub",
            &url,
            "--hosts",
            "1",
        ])
        .args(["--server-host", "a-srv", "--json"])
        .arg(&results)
        .stdin(Stdio::null())
        .output()
        .expect("concur runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let lines = read_lines(&results);
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 1, "{runs:?}");
    let r = runs[0];
    // The server ran on a-srv, over TLS; b-load alone generated the load.
    assert!(
        err.contains("concur's delay server on agent 'a-srv' at https://127.0.0.1:"),
        "{err}"
    );
    let hub_run = &r["hub"];
    assert_eq!(hub_run["server_host"], "a-srv", "{r}");
    assert!(hub_run["server_cpu_s"].as_f64().unwrap() > 0.0, "{r}");
    let hosts: Vec<&str> = hub_run["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["b-load"], "{r}");
    assert_eq!(
        (r["status"].as_str(), r["tasks_ok"].as_u64()),
        (Some("ok"), Some(20)),
        "{r}"
    );
    // Every request on a connection of its own (--no-keepalive), each a TLS handshake.
    assert_eq!(r["connections_opened"], 20, "{r}");
    assert!(r["tls_us"]["p50"].as_u64().unwrap() > 0, "{r}");
    assert!(
        r["tls_us"]["max"].as_u64() >= r["tls_us"]["p50"].as_u64(),
        "{r}"
    );
    let meta = &lines[0];
    let command: Vec<&str> = meta["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(command.contains(&"--tls"), "{command:?}");
}
