//! Studies across machines, with hosts built from network namespaces (tests/common/netns.rs):
//! Redis in one, an agent in each of three others, and the study — with its delay server — in
//! the root namespace, a host of its own. Skipped, with the reason, where namespaces cannot be
//! made; CI sets CONCUR_REQUIRE_NETNS=1, which makes that a failure.

mod common;

use std::process::Stdio;

use common::netns::NetLab;
use common::{assert_merged_latency_is_the_hosts_added, read_lines, wait_for_agents};
use serde_json::Value;

const CONCUR: &str = env!("CARGO_BIN_EXE_concur");

/// A lab of four hosts: Redis on host 0, agents `h1`, `h2`, `h3` on hosts 1 to 3 (with
/// `wrap` before the agent's command on host 3, e.g. `faketime`), and the hub's URL.
fn lab(tag: &str, wrap: &[&str]) -> Option<(NetLab, String)> {
    let mut lab = NetLab::new(tag, 4)?;
    let port = lab.start_redis(0, None);
    let url = format!("redis://{}:{port}/0", lab.host(0).addr);
    for i in 1..=3 {
        let name = format!("h{i}");
        let mut cmd = if i == 3 && !wrap.is_empty() {
            let mut c = lab.command(i, wrap[0]);
            c.args(&wrap[1..]).arg(CONCUR);
            c
        } else {
            lab.command(i, CONCUR)
        };
        // The lab's hosts are on 10.A.B.0/24, private addresses: load from the hub goes
        // there only because the agents' operator (this test) lists them.
        cmd.args(["agent", "--quiet", "--hub", &url, "--name", &name])
            .args(["--allow-targets", "10.0.0.0/8"])
            // Their jobs models' queue: the hub's Redis, database 1 (an agent's own choice;
            // a study's --jobs-backend never travels).
            .args(["--jobs-backend", &url.replace("/0", "/1")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        lab.spawn(cmd);
    }
    wait_for_agents(&url, &["h1", "h2", "h3"]);
    Some((lab, url))
}

/// Runs `concur ARGS --hub URL --json FILE` in the root namespace; its exit code and lines.
fn study(url: &str, args: &[&str]) -> (Option<i32>, String, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.jsonl");
    let out = common::concur()
        .args(args)
        .args(["--hub", url, "--json"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let lines = if path.exists() {
        read_lines(&path)
    } else {
        Vec::new()
    };
    (out.status.code(), err, lines)
}

fn runs(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|l| l["type"] == "run").collect()
}

#[test]
fn the_crawl_over_1_2_and_3_hosts_with_the_server_on_a_host_of_its_own() {
    let _alone = common::alone();
    let Some((lab, url)) = lab("crawl", &[]) else {
        return;
    };
    let (code, err, lines) = study(
        &url,
        &["run", "crawl", "--quick", "--hosts", "1,2,3", "-r", "1"],
    );
    assert_eq!(code, Some(0), "{err}");
    // The study's server listened on the root namespace's address, not loopback.
    let root = lab.root_addr().to_string();
    assert!(err.contains(&format!("http://{root}:")), "{err}");
    let meta = &lines[0];
    assert_eq!(meta["hosts"].as_array().unwrap().len(), 3, "{meta}");
    let runs = runs(&lines);
    let mut by_model: std::collections::BTreeMap<String, Vec<&Value>> = Default::default();
    for r in &runs {
        by_model
            .entry(r["model"].as_str().unwrap().to_string())
            .or_default()
            .push(r);
    }
    assert!(by_model.len() >= 5, "{by_model:?}");
    for (model, rs) in &by_model {
        let hosts: Vec<u64> = rs.iter().map(|r| r["hosts"].as_u64().unwrap()).collect();
        assert_eq!(hosts, [1, 2, 3], "{model}");
        for r in rs {
            assert_eq!(r["status"], "ok", "{r}");
            let k = r["hosts"].as_u64().unwrap() as usize;
            let hub = &r["hub"];
            let parts = hub["parts"].as_array().unwrap();
            assert_eq!(parts.len(), k, "{r}");
            // Each host ran its share, and the shares are the cell.
            let tasks: u64 = parts.iter().map(|p| p["tasks"].as_u64().unwrap()).sum();
            assert_eq!(tasks, r["tasks"].as_u64().unwrap(), "{r}");
            let names: std::collections::BTreeSet<&str> =
                parts.iter().map(|p| p["host"].as_str().unwrap()).collect();
            assert_eq!(names.len(), k, "{r}");
            for p in parts {
                assert_eq!(p["status"], "ok", "{p}");
                assert_eq!(p["run"]["tasks_ok"], p["tasks"], "{p}");
            }
            assert_merged_latency_is_the_hosts_added(r);
            assert!(
                hub["start_spread_ms"].as_f64().unwrap_or(0.0) < 50.0,
                "{hub}"
            );
        }
        // The checksum is the same over 1, 2 and 3 hosts.
        let bytes: Vec<&Value> = rs.iter().map(|r| &r["bytes"]).collect();
        assert!(bytes.iter().all(|b| *b == bytes[0]), "{model}: {bytes:?}");
    }
    // Three hosts' async:100 keep 300 in flight: the 200 requests take one delay.
    let async3 = by_model["async:100"][2];
    assert_eq!(async3["parallelism"], 300);
    assert!(async3["wall_s"].as_f64().unwrap() < 0.2, "{async3}");
}

#[test]
fn the_server_goes_to_the_agent_no_cell_needs_or_to_the_one_named() {
    let _alone = common::alone();
    let Some((_lab, url)) = lab("server", &[]) else {
        return;
    };
    let cell = [
        "run",
        "-w",
        "http:/delay/20ms",
        "-m",
        "async:20",
        "-n",
        "100",
        "-r",
        "1",
        "--warmup",
        "0",
    ];
    // Two hosts generate load: the third serves.
    let mut args = cell.to_vec();
    args.extend(["--hosts", "1,2"]);
    let (code, err, lines) = study(&url, &args);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("delay server on agent 'h3'"), "{err}");
    for r in runs(&lines) {
        let hub = &r["hub"];
        assert_eq!(hub["server_host"], "h3", "{hub}");
        assert!(hub["server_cpu_s"].as_f64().unwrap() > 0.0, "{hub}");
        let hosts: Vec<&str> = hub["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["host"].as_str().unwrap())
            .collect();
        assert!(!hosts.contains(&"h3"), "{hosts:?}");
        assert_eq!(r["tasks_ok"], 100);
    }
    // The one named serves; the other two generate load.
    let mut args = cell.to_vec();
    args.extend(["--hosts", "2", "--server-host", "h1"]);
    let (code, err, lines) = study(&url, &args);
    assert_eq!(code, Some(0), "{err}");
    let r = runs(&lines)[0];
    assert_eq!(r["hub"]["server_host"], "h1");
    let hosts: Vec<&str> = r["hub"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["h2", "h3"]);
}

#[test]
fn a_host_killed_mid_run_is_lost_within_3_s_and_the_next_cell_runs_on_the_others() {
    let _alone = common::alone();
    let Some((mut lab, url)) = lab("kill", &[]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r.jsonl");
    // 60 one-second tasks, 10 at a time per host: 2 s over three hosts; then over two.
    let mut study = std::process::Command::new(CONCUR)
        .args([
            "run", "-w", "sleep:1s", "-m", "async:10", "-n", "60", "-r", "1",
        ])
        .args(["--warmup", "0", "--hub", &url, "--hosts", "3,2", "--json"])
        .arg(&results)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let doing = |name: &str| {
        common::hub_agents(&url)
            .iter()
            .any(|a| a["name"] == name && a["doing"] != "idle")
    };
    common::wait_for(
        "h3 to run its share",
        std::time::Duration::from_secs(30),
        || doing("h3"),
    );
    let h3 = common::hub_agents(&url)
        .iter()
        .find(|a| a["name"] == "h3")
        .and_then(|a| a["pid"].as_u64())
        .unwrap() as u32;
    lab.kill(h3);
    let killed = std::time::Instant::now();
    let lines = || common::run_lines(&results);
    common::wait_for(
        "the first run line",
        std::time::Duration::from_secs(10),
        || !lines().is_empty(),
    );
    let took = killed.elapsed();
    assert!(
        took < std::time::Duration::from_secs(3),
        "the loss took {took:?}"
    );
    let status = study.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let runs = lines();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["status"], "failed");
    assert_eq!(runs[0]["hub"]["lost_tasks"], 20);
    assert_eq!(runs[0]["tasks_ok"], 40);
    assert_eq!(runs[1]["status"], "ok", "{}", runs[1]);
    assert_eq!(runs[1]["tasks_ok"], 60);
}

#[test]
fn queue_workers_on_1_2_and_3_hosts_against_one_redis_do_every_job_once() {
    let _alone = common::alone();
    let Some((_lab, url)) = lab("jobs", &[]) else {
        return;
    };
    // The jobs go to the hub's Redis, database 1.
    let backend = url.replace("/0", "/1");
    let (code, err, lines) = study(
        &url,
        &[
            "run",
            "-w",
            "fib:5",
            "-m",
            "jobs-redis:4",
            "-n",
            "3000",
            "-r",
            "1",
            "--warmup",
            "0",
            "--hosts",
            "1,2,3",
            "--jobs-backend",
            &backend,
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let runs = runs(&lines);
    assert_eq!(runs.len(), 3);
    for (r, k) in runs.iter().zip(1..) {
        assert_eq!(r["hosts"], k);
        assert_eq!(r["tasks_ok"], 3000, "{r}");
        assert_eq!(r["tasks_failed"], 0, "{r}");
        assert_eq!(r["bytes"], runs[0]["bytes"]);
        assert_eq!(r["hub"]["parts"].as_array().unwrap().len(), k as usize);
        // Each job's wait from its enqueue to its start, merged over the hosts.
        let q = &r["queue_wait_us"];
        assert!(
            q["p50"].as_u64().unwrap() <= q["p99"].as_u64().unwrap(),
            "{r}"
        );
        assert!(q["max"].as_u64().unwrap() > 0, "{r}");
    }
}

#[test]
fn an_open_cell_over_3_hosts_keeps_the_one_schedule_and_its_rate() {
    let _alone = common::alone();
    let Some((_lab, url)) = lab("open", &[]) else {
        return;
    };
    let (code, err, lines) = study(
        &url,
        &[
            "run",
            "-w",
            "sleep:1ms",
            "-m",
            "async:100",
            "--rate",
            "1500",
            "--duration",
            "2s",
            "-r",
            "1",
            "--warmup",
            "0",
            "--hosts",
            "3",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let runs = runs(&lines);
    assert_eq!(runs.len(), 1);
    let r = runs[0];
    assert_eq!(r["tasks"], 3000);
    assert_eq!(r["tasks_ok"], 3000);
    let asked = r["rate_asked"].as_f64().unwrap();
    assert!((asked - 1500.0).abs() < 1e-6, "{r}");
    let achieved = r["rate_achieved"].as_f64().unwrap();
    assert!(
        (achieved / 1500.0 - 1.0).abs() < 0.01,
        "achieved {achieved}/s"
    );
    // Every third arrival of the one schedule: shares of 1000.
    let parts = r["hub"]["parts"].as_array().unwrap();
    let shares: Vec<u64> = parts.iter().map(|p| p["tasks"].as_u64().unwrap()).collect();
    assert_eq!(shares, [1000, 1000, 1000]);
    assert_merged_latency_is_the_hosts_added(r);
}

#[test]
fn a_host_whose_clock_is_seconds_off_still_starts_on_time() {
    let _alone = common::alone();
    if !common::faketime_or_skip() {
        return;
    }
    // Host 3's agent sees a wall clock 5 s ahead of everyone's.
    let Some((_lab, url)) = lab("clock", &["faketime", "-f", "+5s"]) else {
        return;
    };
    let (code, err, lines) = study(
        &url,
        &[
            "run",
            "-w",
            "sleep:20ms",
            "-m",
            "async:10",
            "-n",
            "60",
            "-r",
            "3",
            "--warmup",
            "0",
            "--hosts",
            "3",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let hosts = lines[0]["hosts"].as_array().unwrap();
    let h3 = hosts.iter().find(|h| h["name"] == "h3").unwrap();
    let offset = h3["clock_offset_ns"].as_i64().unwrap();
    assert!(
        (offset + 5_000_000_000).abs() < 100_000_000,
        "h3's offset {offset} ns"
    );
    for h in hosts.iter().filter(|h| h["name"] != "h3") {
        assert!(
            h["clock_offset_ns"].as_i64().unwrap().abs() < 50_000_000,
            "{h}"
        );
    }
    for r in runs(&lines) {
        let hub = &r["hub"];
        let parts = hub["parts"].as_array().unwrap();
        let first = |p: &Value| p["first_task_ms"].as_f64().unwrap();
        let p3 = parts.iter().find(|p| p["host"] == "h3").unwrap();
        assert!((p3["clock_offset_ns"].as_i64().unwrap() + 5_000_000_000).abs() < 100_000_000);
        // The host 5 s off starts within 5 ms of the others (whose own spread is the two
        // shared cores' waking three processes at once).
        for p in parts.iter().filter(|p| p["host"] != "h3") {
            let gap = (first(p3) - first(p)).abs();
            assert!(gap < 5.0, "h3 started {gap} ms from {}: {hub}", p["host"]);
        }
    }
}
