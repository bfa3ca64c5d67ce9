//! Studies across machines, with hosts built from network namespaces (tests/common/netns.rs):
//! Redis in one, an agent in each of three others, and the study — with its delay server — in
//! the root namespace, a host of its own. Full tier: root (namespaces) and redis-server; each
//! test fails, never passes, without them.

mod common;

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;

use common::netns::NetLab;
use common::{
    assert_merged_latency_is_the_hosts_added, only_run, read_lines, wait_for_agents, Need,
};
use serde_json::Value;

const CONCUR: &str = env!("CARGO_BIN_EXE_concur");

/// A lab of four hosts: Redis on host 0, agents `h1`, `h2`, `h3` on hosts 1 to 3 (with
/// `wrap` before the agent's command on host 3, e.g. `faketime`), and the hub's URL.
fn lab(tag: &str, wrap: &[&str]) -> (NetLab, String) {
    lab_with(tag, wrap, |_| Vec::new())
}

/// [`lab`], with `own(i)` added to agent `hi`'s flags (its key, the study keys it takes).
fn lab_with(tag: &str, wrap: &[&str], own: impl Fn(usize) -> Vec<OsString>) -> (NetLab, String) {
    let mut lab = NetLab::new(tag, 4);
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
            .args(own(i))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        lab.spawn(cmd);
    }
    wait_for_agents(&url, &["h1", "h2", "h3"]);
    (lab, url)
}

/// What every test here needs.
const NEEDS: &[Need] = &[Need::Netns, Need::Redis];

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
#[ignore = "full tier: needs root (network namespaces) and redis-server"]
fn the_crawl_over_1_2_and_3_hosts_with_the_server_on_a_host_of_its_own() {
    common::require(NEEDS);
    let _alone = common::alone();
    let (lab, url) = lab("crawl", &[]);
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
    // The study's server delay, as its note states it: one round of requests takes one.
    let delay_ms: f64 = meta["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| {
            n.as_str()?
                .split(" ms server delay")
                .next()?
                .rsplit(' ')
                .next()
        })
        .find_map(|d| d.parse().ok())
        .unwrap_or_else(|| panic!("no server delay in the notes: {meta}"));
    let runs = runs(&lines);
    let mut by_model: std::collections::BTreeMap<String, Vec<&Value>> = Default::default();
    for r in &runs {
        by_model
            .entry(r["model"].as_str().unwrap().to_string())
            .or_default()
            .push(r);
    }
    // The crawl's models (src/plan/presets.rs), each over 1, 2 and 3 hosts.
    let mut models = [
        "seq",
        "thread",
        "pool:100",
        "async:100",
        "async-local:100",
        "curl:100",
        "green:100",
        "async:1000",
    ];
    models.sort_unstable();
    assert_eq!(
        by_model.keys().map(String::as_str).collect::<Vec<_>>(),
        models,
        "{by_model:?}"
    );
    assert_eq!(runs.len(), 3 * models.len());
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
            assert_starts_within_their_clocks(hub);
        }
        // The checksum is the same over 1, 2 and 3 hosts.
        let bytes: Vec<&Value> = rs.iter().map(|r| &r["bytes"]).collect();
        assert!(bytes.iter().all(|b| *b == bytes[0]), "{model}: {bytes:?}");
    }
    // Three hosts' async:100 keep 300 in flight: the 200 requests take one round of the
    // delay; a second round would take at least two.
    let async3 = by_model["async:100"][2];
    assert_eq!(async3["parallelism"], 300);
    assert_eq!(async3["tasks"], 200);
    let wall_ms = async3["wall_s"].as_f64().unwrap() * 1e3;
    assert!(wall_ms < 2.0 * delay_ms, "{wall_ms} ms: {async3}");
}

/// The hosts of one run started together, as far as their clocks can tell: each host's
/// first task at or after the common start on its own clock (`first_task_ms`, never early),
/// and any two hosts' true starts, each known to within its clock's uncertainty, apart by
/// less than the lead the study announces the start with (`concur::hub::executor::LEAD`,
/// the time it gives every agent to get ready). What lies between the instant and the first
/// task (the model's own start-up: a pool's threads, a runtime) and the scheduler's waking
/// three processes on two loaded cores is what makes them differ: tens of ms here on a busy
/// machine, against a host 5 s off or started at once that would be seconds apart.
fn assert_starts_within_their_clocks(hub: &Value) {
    let parts = hub["parts"].as_array().unwrap();
    let margin_ms = concur::hub::executor::LEAD.as_secs_f64() * 1e3;
    let starts: Vec<(f64, f64)> = parts
        .iter()
        .map(|p| {
            let first = p["first_task_ms"]
                .as_f64()
                .unwrap_or_else(|| panic!("no first_task_ms: {p}"));
            let u = p["clock_uncertainty_ns"].as_u64().unwrap() as f64 / 1e6;
            assert!(
                first >= 0.0,
                "a host started before the common start: {hub}"
            );
            (first, u)
        })
        .collect();
    assert_eq!(starts.len(), parts.len());
    for (i, a) in starts.iter().enumerate() {
        for b in &starts[i + 1..] {
            let apart = (a.0 - b.0).abs() + a.1 + b.1;
            assert!(
                apart < margin_ms,
                "two hosts started up to {apart:.3} ms apart: {hub}"
            );
        }
    }
    if parts.len() >= 2 {
        let spread = hub["start_spread_ms"].as_f64().expect("a start spread");
        let firsts: Vec<f64> = starts.iter().map(|s| s.0).collect();
        let max = firsts.iter().cloned().fold(f64::MIN, f64::max);
        let min = firsts.iter().cloned().fold(f64::MAX, f64::min);
        assert!((spread - (max - min)).abs() < 1e-6, "{hub}");
    }
}

#[test]
#[ignore = "full tier: needs root (network namespaces) and redis-server"]
fn the_server_goes_to_the_agent_no_cell_needs_or_to_the_one_named() {
    common::require(NEEDS);
    let _alone = common::alone();
    let (_lab, url) = lab("server", &[]);
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
    let over = runs(&lines);
    assert_eq!(over.len(), 2, "a run over 1 host and one over 2: {lines:?}");
    for r in over {
        let hub = &r["hub"];
        assert_eq!(hub["server_host"], "h3", "{hub}");
        assert!(hub["server_cpu_s"].as_f64().unwrap() > 0.0, "{hub}");
        let hosts: Vec<&str> = hub["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["host"].as_str().unwrap())
            .collect();
        assert_eq!(Some(hosts.len() as u64), r["hosts"].as_u64(), "{hosts:?}");
        assert!(hosts.iter().all(|h| ["h1", "h2"].contains(h)), "{hosts:?}");
        assert_eq!(r["tasks_ok"], 100);
    }
    // The one named serves; the other two generate load.
    let mut args = cell.to_vec();
    args.extend(["--hosts", "2", "--server-host", "h1"]);
    let (code, err, lines) = study(&url, &args);
    assert_eq!(code, Some(0), "{err}");
    let r = only_run(&lines);
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
#[ignore = "full tier: needs root (network namespaces) and redis-server"]
fn a_host_killed_mid_run_is_lost_within_its_heartbeats_life_and_the_next_cell_runs_on_the_others() {
    common::require(NEEDS);
    let _alone = common::alone();
    let (mut lab, url) = lab("kill", &[]);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r.jsonl");
    // 60 one-second tasks, 10 at a time per host: 2 s over three hosts; then over two.
    let share_wall = std::time::Duration::from_secs(2);
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
    let bound = common::hub::loss_bound(share_wall);
    common::wait_for("the first run line", 3 * bound, || !lines().is_empty());
    let took = killed.elapsed();
    assert!(took < bound, "the loss took {took:?} (bound {bound:?})");
    let status = study.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let runs = lines();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["status"], "failed");
    assert_eq!(runs[0]["hub"]["lost_tasks"], 20);
    assert_eq!(runs[0]["tasks_ok"], 40);
    let lost: Vec<&Value> = runs[0]["hub"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["status"] == "lost")
        .collect();
    assert_eq!(lost.len(), 1, "{}", runs[0]);
    assert_eq!(lost[0]["host"], "h3");
    assert_eq!(runs[1]["status"], "ok", "{}", runs[1]);
    assert_eq!(runs[1]["tasks_ok"], 60);
}

#[test]
#[ignore = "full tier: needs root (network namespaces) and redis-server"]
fn queue_workers_on_1_2_and_3_hosts_against_one_redis_do_every_job_once() {
    common::require(NEEDS);
    let _alone = common::alone();
    let (_lab, url) = lab("jobs", &[]);
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
#[ignore = "full tier: needs root (network namespaces) and redis-server"]
fn an_open_cell_over_3_hosts_keeps_the_one_schedule_and_its_rate() {
    common::require(NEEDS);
    let _alone = common::alone();
    let (_lab, url) = lab("open", &[]);
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
#[ignore = "full tier: needs root (network namespaces), redis-server and faketime"]
fn a_host_whose_clock_is_seconds_off_still_starts_on_time() {
    common::require(&[Need::Netns, Need::Redis, Need::Faketime]);
    let _alone = common::alone();
    // Host 3's agent sees a wall clock 5 s ahead of everyone's.
    let (_lab, url) = lab("clock", &["faketime", "-f", "+5s"]);
    let started = std::time::Instant::now();
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
    let took = started.elapsed();
    assert_eq!(code, Some(0), "{err}");
    // What the clock measurement guarantees: the hub's TIME falls within the round trip, so
    // each measured offset is the true one (-5 s for h3, 0 for the others: one kernel's
    // clock) to within its stated uncertainty; 1 ms more for faketime's own reading.
    let off_by = |offset: i64, uncertainty: u64, truth: i64| {
        let err = (offset - truth).unsigned_abs();
        assert!(
            err <= uncertainty + 1_000_000,
            "offset {offset} ns is {err} ns from {truth} (uncertainty {uncertainty} ns)"
        );
    };
    let truth = |name: &Value| if name == "h3" { -5_000_000_000 } else { 0 };
    let hosts = lines[0]["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 3, "{}", lines[0]);
    for h in hosts {
        off_by(
            h["clock_offset_ns"].as_i64().unwrap(),
            h["clock_uncertainty_ns"].as_u64().unwrap(),
            truth(&h["name"]),
        );
    }
    let runs = runs(&lines);
    assert_eq!(runs.len(), 3, "{lines:?}");
    for r in runs {
        let hub = &r["hub"];
        let parts = hub["parts"].as_array().unwrap();
        assert_eq!(parts.len(), 3, "{hub}");
        for p in parts {
            off_by(
                p["clock_offset_ns"].as_i64().unwrap(),
                p["clock_uncertainty_ns"].as_u64().unwrap(),
                truth(&p["host"]),
            );
        }
        // The host 5 s off starts with the others, as far as the clocks can tell.
        assert_starts_within_their_clocks(hub);
    }
    // Starting on its own wall clock, h3 would start each run 5 s after the others (or
    // never wait), and the three runs would take 15 s more: an honest study takes about a
    // second.
    assert!(
        took < std::time::Duration::from_secs(10),
        "the study took {took:?}"
    );
}

/// Writes `lines` as the list DIR/NAME (one key, and for agents its name, a line).
fn key_list(dir: &Path, name: &str, lines: &[String]) -> OsString {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path.into_os_string()
}

/// The names of run `r`'s host parts, in share order.
fn part_hosts(r: &Value) -> Vec<&str> {
    r["hub"]["parts"]
        .as_array()
        .unwrap_or_else(|| panic!("no hub.parts: {r}"))
        .iter()
        .map(|p| p["host"].as_str().unwrap())
        .collect()
}

/// Keys per party across hosts (docs/security.md, "A key per party"): every agent in its own
/// namespace holds its own key and lists the study's key; the study holds its own and lists
/// two agents' keys by name (`--agent-keys`): h2 and h3, not h1. Over 2 hosts the shares go to
/// h2 and h3 (h1, first by name, would be picked were it trusted), each doing exactly its half
/// and answering under its own key; h1 is left out and said to be. Over 3 hosts there are not
/// enough agents the study trusts: exit 2 naming h1 and why. And a study signing with a key
/// no agent lists gets its share refused by the agent (exit 1, the part `refused`, the agent's
/// reason in the run's error), within a second rather than the run's timeout.
#[test]
#[ignore = "full tier: needs root (network namespaces) and redis-server"]
fn a_keyed_study_runs_only_on_the_agents_it_lists_and_an_agent_refuses_a_study_it_does_not() {
    common::require(NEEDS);
    let _alone = common::alone();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (study_key, study_pub) = common::hub::keygen(d, "study");
    let (stranger_key, stranger_pub) = common::hub::keygen(d, "stranger");
    let agent_keys: Vec<_> = (1..=3)
        .map(|i| common::hub::keygen(d, &format!("h{i}")))
        .collect();
    let studies = key_list(d, "studies", &[format!("{study_pub} study")]);
    let listed = key_list(
        d,
        "agents",
        &[
            format!("{} h2", agent_keys[1].1),
            format!("{} h3", agent_keys[2].1),
        ],
    );
    let (_lab, url) = lab_with("keys", &[], |i| {
        vec![
            "--signing-key".into(),
            agent_keys[i - 1].0.clone().into_os_string(),
            "--study-keys".into(),
            studies.clone(),
        ]
    });
    // Each agent's heartbeat carries its own key.
    for a in common::hub_agents(&url) {
        let i: usize = a["name"].as_str().unwrap()[1..].parse().unwrap();
        assert_eq!(a["key"], agent_keys[i - 1].1.as_str(), "{a}");
    }
    let study_key = study_key.to_str().unwrap();
    let listed = listed.to_str().unwrap();
    fn keyed<'a>(hosts: &'a str, key: &'a str, listed: &'a str) -> Vec<&'a str> {
        let mut args = vec!["run", "-w", "fib:5", "-m", "pool:2", "-n", "10", "-r", "1"];
        args.extend(["--warmup", "0", "--hosts", hosts, "--timeout", "60s"]);
        args.extend(["--signing-key", key, "--agent-keys", listed]);
        args
    }
    let cell = |hosts, key| keyed(hosts, key, listed);

    let (code, err, lines) = study(&url, &cell("2", study_key));
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("first sight"), "{err}");
    let notes = lines[0]["notes"].to_string();
    assert!(
        notes.contains("agent 'h1' is left out: it is not listed in"),
        "{notes}"
    );
    let r = only_run(&lines);
    assert_eq!(part_hosts(r), ["h2", "h3"], "{r}");
    for p in r["hub"]["parts"].as_array().unwrap() {
        assert_eq!(p["status"], "ok", "{p}");
        assert_eq!(p["tasks"], 5, "{p}");
        assert_eq!(p["run"]["tasks_ok"], 5, "{p}");
        assert_eq!(p["run"]["tasks_failed"], 0, "{p}");
    }
    assert_eq!(
        (&r["tasks_ok"], &r["tasks_failed"]),
        (&10.into(), &0.into()),
        "{r}"
    );
    let hosts: Vec<&str> = lines[0]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["h2", "h3"], "{}", lines[0]);

    // Three hosts: only two agents carry a key the study lists.
    let (code, err, lines) = study(&url, &cell("3", study_key));
    assert_eq!(code, Some(2), "{err}");
    assert!(lines.is_empty(), "{lines:?}");
    assert!(
        err.contains("--hosts 3")
            && err.contains("left out: 'h1': it is not listed in")
            && !err.contains("'h2':")
            && !err.contains("'h3':"),
        "{err}"
    );

    // A study key no agent lists: h2 refuses the share and says why.
    let started = std::time::Instant::now();
    let (code, err, lines) = study(&url, &cell("1", stranger_key.to_str().unwrap()));
    let took = started.elapsed();
    assert_eq!(code, Some(1), "{err}");
    let r = only_run(&lines);
    // (Its status is `crashed`, as for any run no host reported on; the part says why.)
    assert_ne!(r["status"], "ok", "{r}");
    assert_eq!(
        (&r["tasks_ok"], &r["tasks_failed"]),
        (&0.into(), &10.into()),
        "{r}"
    );
    assert_eq!(part_hosts(r), ["h2"], "{r}");
    assert_eq!(r["hub"]["parts"][0]["status"], "refused", "{r}");
    let error = r["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("host 'h2' refused the study's work")
            && error.contains(&stranger_pub[..23])
            && error.contains("which is not a listed study key"),
        "{r}"
    );
    // Ended by the refusal, not by the 60 s timeout.
    eprintln!("the study refused by h2 ended in {took:?}");
    assert!(took < std::time::Duration::from_secs(5), "{took:?}: {err}");
}
