//! concur as a library, through a binary of its own (this test's `main`, which calls
//! `concur::init()` first and is started again for every run): a closure gives the same
//! checksum under every model, each run is a fresh process, and a closure's panic or `Err`
//! becomes a failed task with its message.

use std::collections::BTreeSet;

use concur::Lab;

/// Task i's bytes: known, so every model's checksum can be checked exactly.
fn bytes(i: usize) -> u64 {
    (i % 5 + 1) as u64
}

fn every_model_gives_the_same_checksum_in_fresh_processes(
    report: &concur::LabReport,
    models: &[String],
) {
    let n = N;
    let want: u64 = (0..n).map(bytes).sum();
    assert_eq!(report.runs.len(), 2 * models.len());
    let mut pids = BTreeSet::new();
    for r in &report.runs {
        let what = r.key.label();
        assert_eq!(
            r.status,
            concur::analysis::results::RunStatus::Ok,
            "{what}: {:?}",
            r.error
        );
        assert_eq!(r.bytes, want, "{what}");
        assert_eq!(r.tasks_ok, n, "{what}");
        assert_eq!(
            r.isolation,
            concur::analysis::results::Isolation::FreshProcess,
            "{what}"
        );
        let pid = r.pid.expect("a run records its process id");
        assert_ne!(
            pid,
            std::process::id(),
            "{what} ran in the lab's own process"
        );
        assert!(
            pids.insert(pid),
            "{what}: pid {pid} reused: not a fresh process"
        );
    }
    for m in models {
        assert!(report.cells().iter().any(|c| &c.key.model == m), "{m}");
    }
    assert_eq!(report.failed_runs(), 0);
    println!(
        "ok: {} models, {} fresh processes, checksum {want}",
        models.len(),
        pids.len()
    );
}

fn panics_and_errors_are_failed_tasks_with_their_message(
    report: &concur::LabReport,
    async_report: &concur::LabReport,
    build_panic_report: &concur::LabReport,
) {
    assert_eq!(report.runs.len(), 3, "seq, pool:2 and async:2");
    for r in &report.runs {
        let what = r.key.label();
        assert_eq!(
            r.status,
            concur::analysis::results::RunStatus::Failed,
            "{what}: {:?}",
            r.error
        );
        assert_eq!(r.tasks_ok, 2, "{what}");
        assert_eq!(
            r.failures.get("panic"),
            Some(&1),
            "{what}: {:?}",
            r.failures
        );
        assert_eq!(
            r.failures.get("error"),
            Some(&1),
            "{what}: {:?}",
            r.failures
        );
        let e = r.error.as_deref().unwrap_or_default();
        assert!(e.contains("2 of 4 tasks failed"), "{what}: {e}");
        // The first failure in finishing order: either task's message.
        assert!(
            e.contains("closure 0 panicked") || e.contains("closure 1 said no"),
            "{what}: {e}"
        );
    }
    assert_eq!(report.failed_runs(), 3);
    // An async closure's panic is a failed task too.
    assert_eq!(async_report.runs.len(), 2, "async:2 and seq");
    for r in &async_report.runs {
        assert_eq!(r.tasks_ok, 2, "{}: {:?}", r.key.label(), r.error);
        assert_eq!(r.failures.get("panic"), Some(&1), "{}", r.key.label());
    }
    // So is one raised while the closure builds its future: that task alone fails, the worker
    // loop that ran it goes on to the next ones.
    assert_eq!(build_panic_report.runs.len(), 3);
    for r in &build_panic_report.runs {
        let what = r.key.label();
        assert_eq!(r.tasks_ok, 19, "{what}: {:?}", r.error);
        assert_eq!(r.bytes, 19, "{what}");
        assert_eq!(
            r.failures.get("panic"),
            Some(&1),
            "{what}: {:?}",
            r.failures
        );
        let e = r.error.as_deref().unwrap_or_default();
        assert!(e.contains("future 7 not built"), "{what}: {e}");
    }
    println!("ok: panics and errors are failed tasks");
}

/// Where a bad lab's task would leave its mark if it ever ran: named by the first process of
/// this test (runs are this binary started again, with the same environment).
fn ran_marker() -> std::path::PathBuf {
    std::path::PathBuf::from(std::env::var_os(MARKER_VAR).expect("set by main"))
}

const MARKER_VAR: &str = "CONCUR_LAB_TEST_RAN_MARKER";

/// A task that leaves the marker, then returns one byte.
fn marking(_i: usize) -> u64 {
    let _ = std::fs::write(ran_marker(), b"ran");
    1
}

fn bad_input_is_refused_before_any_run() {
    for (lab, needle) in [
        (
            Lab::new("fib").task(marking).models(["seq"]),
            "taken by the built-in workload 'fib'",
        ),
        (
            Lab::new("lab-procs").task(marking).models(["jobs-procs:2"]),
            "cannot re-create 'lab-procs'",
        ),
        (Lab::new("lab-none").models(["seq"]), "has no workload"),
        (Lab::new("lab-nomodel").task(marking), "has no models"),
        (
            Lab::new("lab-badmodel").task(marking).models(["pool:0"]),
            "bad model 'pool:0'",
        ),
    ] {
        match lab.run() {
            Err(concur::Error::Usage { message: e, .. }) => assert!(e.contains(needle), "{e}"),
            Err(e) => panic!("not a usage error: {e}"),
            Ok(_) => panic!("accepted; wanted an error with {needle:?}"),
        }
    }
    // A library user tells a bad model from a bad workload without reading the line.
    let e = Lab::new("lab-badmodel2")
        .task(marking)
        .models(["pool:0"])
        .run()
        .map(|_| ())
        .expect_err("pool:0 refused");
    assert_eq!(e.input(), Some(&concur::Input::Model), "{e}");
    assert!(!ran_marker().exists(), "a refused lab ran a task");
    println!("ok: bad input refused");
}

const N: usize = 12;

/// The two tests of this binary, as a test runner lists them: the labs in fresh processes
/// (fast tier), and the same binary as an agent of a hub (full tier: it starts redis-server).
const TESTS: [(&str, Option<&str>); 2] = [
    ("labs_in_fresh_processes", None),
    (
        "the_closure_runs_on_the_binary_as_an_agent",
        Some("full tier: needs redis-server"),
    ),
];

/// Which of [`TESTS`] this process runs ("0", "1" or "01"): chosen by the first process from
/// its arguments and inherited by every run's process and by the agent, which must create the
/// same labs in the same order as the first process did.
const CHOSEN_VAR: &str = "CONCUR_LAB_TEST_CHOSEN";

/// What libtest's command line asks of this binary (the part cargo test and cargo nextest
/// use): `--list [--ignored]`, name filters with `--exact`, `--skip NAME`, `--ignored` and
/// `--include-ignored`; the other flags (`--nocapture`, `--format X`, `--test-threads N`...)
/// change nothing here.
fn chosen_by_arguments() -> Option<String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut list, mut ignored, mut include_ignored, mut exact) = (false, false, false, false);
    let (mut filters, mut skips) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--list" => list = true,
            "--ignored" => ignored = true,
            "--include-ignored" => include_ignored = true,
            "--exact" => exact = true,
            "--skip" => skips.extend(it.next().cloned()),
            "--format" | "--test-threads" | "--color" | "--logfile" | "-Z" | "--report-time" => {
                it.next();
            }
            f if f.starts_with('-') => {}
            f => filters.push(f.to_string()),
        }
    }
    let matches = |name: &str, pat: &str| {
        if exact {
            name == pat
        } else {
            name.contains(pat)
        }
    };
    let picked: Vec<usize> = (0..TESTS.len())
        .filter(|&k| {
            let (name, _) = TESTS[k];
            (filters.is_empty() || filters.iter().any(|f| matches(name, f)))
                && !skips.iter().any(|s| matches(name, s))
        })
        .collect();
    if list {
        for &k in &picked {
            if !ignored || TESTS[k].1.is_some() {
                println!("{}: test", TESTS[k].0);
            }
        }
        return None;
    }
    let mut chosen = String::new();
    println!("\nrunning {} tests", picked.len());
    for &k in &picked {
        let (name, why) = TESTS[k];
        let runs = match why {
            None => !ignored,
            Some(_) => ignored || include_ignored,
        };
        if runs {
            chosen.push_str(&k.to_string());
        } else if let Some(why) = why {
            println!("test {name} ... ignored, {why}");
        }
    }
    Some(chosen)
}

fn main() {
    concur::init();
    let chosen = match std::env::var(CHOSEN_VAR) {
        Ok(c) => c,
        Err(_) => {
            // The first process, before any thread or run.
            let Some(c) = chosen_by_arguments() else {
                return;
            };
            std::env::set_var(CHOSEN_VAR, &c);
            c
        }
    };
    let first = std::env::var_os(MARKER_VAR).is_none();
    if first {
        // The first process: every run's process inherits the marker's path.
        let marker = std::env::temp_dir().join(format!("concur-lab-ran-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        std::env::set_var(MARKER_VAR, &marker);
    }
    if chosen.contains('0') {
        labs_in_fresh_processes(first);
        if first {
            println!("test {} ... ok", TESTS[0].0);
        }
    }
    if chosen.contains('1') {
        the_closure_runs_on_the_binary_as_an_agent();
        if first {
            println!("test {} ... ok", TESTS[1].0);
        }
    }
    if first {
        let ran = chosen.len();
        println!(
            "\ntest result: ok. {ran} passed; 0 failed; {} ignored; 0 measured; 0 filtered out\n",
            TESTS.len() - ran
        );
    }
}

/// Every model runs the same closures in fresh processes: checksums, failures, the marker.
/// Only the `first` process checks: a run's process passes through the labs before its own
/// with empty reports.
fn labs_in_fresh_processes(first: bool) {
    // Every lab runs before anything reads a report: in a run's process (this binary started
    // again), the labs before the one that owns the run return empty reports.
    // Every model that can run a closure here, written out (the registry under test does not
    // choose them): all but jobs-redis (it needs a Redis server), jobs-procs (its workers
    // re-create workloads by spec) and curl (HTTP only).
    let models: Vec<String> = [
        "seq",
        "thread",
        "spawn",
        "fork",
        "pool:3",
        "rayon:3",
        "async:3",
        "async-local:3",
        "green:3",
        "actor:3",
        "jobs:3",
        "jobs-memory:3",
    ]
    .map(str::to_string)
    .to_vec();
    // A model added to the registry must be added above or to the reasons left out.
    let left_out = ["jobs-redis", "jobs-procs", "curl"];
    for e in concur::model::REGISTRY {
        assert!(
            left_out.contains(&e.name)
                || models.iter().any(|m| m.split(':').next() == Some(e.name)),
            "model {} is neither run by this test nor left out with a reason",
            e.name
        );
    }
    // Declared CPU work: green runs only closures that cannot block (an undeclared nature is
    // measured from the seq cell, and green refuses it).
    let sum = Lab::new("lab-sum")
        .nature(concur::Nature::Cpu)
        .task(|i| {
            // Some work, so the models overlap.
            let x = (0..20_000u64).fold(i as u64, |a, b| a.wrapping_mul(31) ^ b);
            std::hint::black_box(x);
            bytes(i)
        })
        .models(models.clone())
        .tasks([N])
        .repeat(2)
        .warmup(0)
        .run()
        .expect("the lab runs");
    let bad = Lab::new("lab-bad")
        .task(|i| match i {
            0 => panic!("closure {i} panicked"),
            1 => Err(format!("closure {i} said no")),
            _ => Ok(1u64),
        })
        .models(["seq", "pool:2", "async:2"])
        .tasks([4])
        .repeat(1)
        .warmup(0)
        .run()
        .expect("the lab runs");
    let bad_async = Lab::new("lab-bad-async")
        .async_task(|i| async move {
            if i == 0 {
                panic!("async closure panicked");
            }
            1u64
        })
        .models(["async:2", "seq"])
        .tasks([3])
        .repeat(1)
        .warmup(0)
        .run()
        .expect("the lab runs");
    let build_panic = Lab::new("lab-build-panic")
        .async_task(|i| {
            if i == 7 {
                panic!("future {i} not built");
            }
            async move { 1u64 }
        })
        .models(["async:2", "async-local:2", "actor:2"])
        .tasks([20])
        .repeat(1)
        .warmup(0)
        .run()
        .expect("the lab runs");
    // The marker does show a run: a good lab with the task of the bad ones leaves it.
    let good = Lab::new("lab-marks")
        .task(marking)
        .models(["seq"])
        .tasks([1])
        .repeat(1)
        .warmup(0)
        .run()
        .expect("the lab runs");
    if !first {
        return;
    }
    let marked = std::fs::remove_file(ran_marker()).is_ok();
    every_model_gives_the_same_checksum_in_fresh_processes(&sum, &models);
    panics_and_errors_are_failed_tasks_with_their_message(&bad, &bad_async, &build_panic);
    assert_eq!(good.runs.len(), 1);
    assert!(marked, "the marking task left no marker");
    bad_input_is_refused_before_any_run();
}

/// The same binary as an agent of a hub: the closure runs in the agent's fresh processes.
fn the_closure_runs_on_the_binary_as_an_agent() {
    let hub = LabHub::start();
    let over_hub = Lab::new("lab-hub")
        .nature(concur::Nature::Cpu)
        .task(bytes)
        .models(["seq", "pool:2"])
        .tasks([N])
        .repeat(1)
        .warmup(0)
        .hub(&hub.url)
        .hosts([1])
        .run()
        .expect("the lab runs over the hub");
    drop(hub);
    the_closure_ran_on_the_agent(&over_hub);
}

/// The first process's Redis and this binary started as `agent` against it; in a run's
/// process (and in the agent's), only the URL, inherited.
struct LabHub {
    url: String,
    children: Vec<std::process::Child>,
}

const HUB_VAR: &str = "CONCUR_LAB_TEST_HUB";

impl LabHub {
    fn start() -> LabHub {
        if let Ok(url) = std::env::var(HUB_VAR) {
            return LabHub {
                url,
                children: Vec::new(),
            };
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let redis = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server must be installed (.ci/run installs it)");
        let url = format!("redis://127.0.0.1:{port}/0");
        std::env::set_var(HUB_VAR, &url);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "redis never listened");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let agent = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["agent", "--hub", &url, "--name", "lab-agent", "--quiet"])
            .spawn()
            .expect("this binary starts as an agent");
        let hub = concur::hub::Hub::open(&concur::hub::HubUrl::parse(&url).unwrap()).unwrap();
        let mut c = hub.connect().unwrap();
        while hub.agents(&mut c).unwrap().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the agent never joined"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        LabHub {
            url,
            children: vec![agent, redis],
        }
    }
}

impl Drop for LabHub {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn the_closure_ran_on_the_agent(report: &concur::LabReport) {
    let want: u64 = (0..N).map(bytes).sum();
    assert_eq!(report.runs.len(), 2);
    for r in &report.runs {
        assert_eq!(
            r.status,
            concur::analysis::results::RunStatus::Ok,
            "{:?}",
            r.error
        );
        assert_eq!((r.key.hosts, r.bytes), (Some(1), want));
        let hub = r.hub.as_ref().expect("a run over the hub");
        assert_eq!(hub.parts[0].host, "lab-agent");
    }
    assert_eq!(report.meta.hosts[0].name, "lab-agent");
    println!("ok: the closure ran on the lab's own binary as an agent");
}
