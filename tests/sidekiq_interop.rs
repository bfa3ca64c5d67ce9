//! Sidekiq interop on one Redis, with the real Sidekiq (Debian's `ruby-sidekiq` 6.4.1, which
//! `.ci/run` installs): jobs pushed by Sidekiq's own client run on `concur jobs work`, and jobs
//! pushed by `concur jobs enqueue` run on `sidekiq`, each exactly once. `bench/jobs/interop.py`
//! does the same by hand with more jobs.

mod common;

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::hub::Hub;
use common::{concur, concur_process, require, succeeds, wait_exit, wait_for, Need};
use serde_json::Value;

/// Jobs each way: enough for several worker threads to take some, few enough for seconds.
const N: usize = 20;
/// What each job runs (`Concur::Task`'s args are `[spec, index]`).
const SPEC: &str = "fib:5";

/// A Redis reply as an integer, a missing key as 0.
fn int(c: &mut redis::Connection, cmd: &str, key: &str) -> i64 {
    let v: Option<i64> = redis::cmd(cmd).arg(key).query(c).expect("redis answers");
    v.unwrap_or(0)
}

/// What is left in the queue, the retry and dead sets and concur's private lists, and the
/// counters, which a clean run leaves at `[0, 0, 0, 0, N, 0]`.
fn leftovers(c: &mut redis::Connection) -> [i64; 6] {
    let inflight: Vec<String> = redis::cmd("KEYS")
        .arg("concur:inflight:*")
        .query(c)
        .expect("redis answers");
    [
        int(c, "LLEN", "queue:default"),
        int(c, "ZCARD", "retry"),
        int(c, "ZCARD", "dead"),
        inflight.len() as i64,
        int(c, "GET", "stat:processed"),
        int(c, "GET", "stat:failed"),
    ]
}

/// The lines of `path`, sorted (a missing file has none).
fn sorted_lines(path: &Path) -> Vec<String> {
    let mut lines: Vec<String> = std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// Sidekiq's client (`Sidekiq::Client.push`, Sidekiq's default `retry: true`) pushes N
/// `Concur::Task` jobs; `concur jobs work --until-empty` runs each exactly once: its done log
/// holds every jid Sidekiq returned once and no other, it says so, and the queue, the retry and
/// dead sets and its private lists are empty with `stat:processed` at N.
#[test]
#[ignore = "full tier: needs redis-server and ruby-sidekiq"]
fn concur_works_the_jobs_sidekiqs_client_pushed() {
    require(&[Need::Redis, Need::Sidekiq]);
    let hub = Hub::start(None);
    let url = hub.url();
    let dir = tempfile::tempdir().expect("tempdir");
    let push = format!(
        "require 'sidekiq'\n{N}.times {{ |i| puts Sidekiq::Client.push('class' => 'Concur::Task', 'args' => ['{SPEC}', i]) }}"
    );
    let out = Command::new("ruby")
        .args(["-W0", "-e", &push])
        .env("REDIS_URL", &url)
        .output()
        .expect("ruby runs");
    assert!(out.status.success(), "Sidekiq::Client.push: {out:?}");
    let mut pushed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    pushed.sort();
    assert_eq!(pushed.len(), N, "jids Sidekiq returned: {pushed:?}");
    let mut c = hub.connect();
    assert_eq!(int(&mut c, "LLEN", "queue:default"), N as i64);

    let done = dir.path().join("done.log");
    let errors = dir.path().join("work.err");
    // A job concur cannot run is retried: --retry-delay makes its retries and its end in the
    // dead set take milliseconds, so such a defect fails below with the counts, not at the
    // deadline.
    let mut work = concur_process()
        .args([
            "jobs",
            "work",
            "-c",
            "4",
            "--until-empty",
            "--retry-delay",
            "1ms",
        ])
        .args(["--jobs-backend", &url, "--done-log"])
        .arg(&done)
        .stdout(Stdio::null())
        .stderr(File::create(&errors).expect("stderr file"))
        .spawn()
        .expect("concur jobs work starts");
    let status = wait_exit(&mut work, Duration::from_secs(60));
    let said = std::fs::read_to_string(&errors).unwrap_or_default();
    assert!(status.success(), "concur jobs work: {status}: {said}");
    assert_eq!(sorted_lines(&done), pushed, "jobs run, by jid: {said}");
    assert!(
        said.contains(&format!(
            "stopped: {N} processed, 0 failed, 0 returned to their queues"
        )),
        "{said}"
    );
    assert_eq!(leftovers(&mut c), [0, 0, 0, 0, N as i64, 0], "{said}");
}

/// The worker `sidekiq -r` loads for `Concur::Task`: it checks the arguments' shape and
/// appends `JID INDEX SPEC` to the file `$INTEROP_DONE`.
const WORKER_RB: &str = r##"require 'sidekiq'
module Concur
  class Task
    include Sidekiq::Worker
    LOCK = Mutex.new
    def perform(spec, index)
      unless spec.is_a?(String) && index.is_a?(Integer)
        raise ArgumentError, "not [spec, index]: #{[spec, index].inspect}"
      end
      LOCK.synchronize { File.open(ENV.fetch('INTEROP_DONE'), 'a') { |f| f.puts("#{jid} #{index} #{spec}") } }
    end
  end
end
"##;

/// `concur jobs enqueue` pushes N jobs; real `sidekiq` (five threads) runs each exactly once:
/// its worker's lines are exactly the enqueued jobs' (jid, index, spec), and once it stopped
/// on TERM the queue and the retry and dead sets are empty with `stat:processed` at N.
#[test]
#[ignore = "full tier: needs redis-server and ruby-sidekiq"]
fn sidekiq_works_the_jobs_concur_enqueued() {
    require(&[Need::Redis, Need::Sidekiq]);
    let hub = Hub::start(None);
    let url = hub.url();
    let dir = tempfile::tempdir().expect("tempdir");
    succeeds(concur().args([
        "jobs",
        "enqueue",
        "-w",
        SPEC,
        "-n",
        &N.to_string(),
        "--jobs-backend",
        &url,
    ]));
    let mut c = hub.connect();
    let payloads: Vec<String> = redis::cmd("LRANGE")
        .arg("queue:default")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .expect("redis answers");
    // Each job's line as the worker writes it, from its jid and the task index it was asked
    // for: 0 to N-1, each once.
    let mut indices = Vec::new();
    let mut expected: Vec<String> = payloads
        .iter()
        .map(|p| {
            let j: Value = serde_json::from_str(p).expect("a JSON job");
            let index = j["args"][1].as_u64().unwrap_or(u64::MAX);
            indices.push(index);
            format!("{} {index} {SPEC}", j["jid"].as_str().unwrap_or("?"))
        })
        .collect();
    expected.sort();
    indices.sort();
    assert_eq!(indices, (0..N as u64).collect::<Vec<_>>(), "{payloads:?}");

    let worker = dir.path().join("worker.rb");
    std::fs::write(&worker, WORKER_RB).expect("worker file");
    let done = dir.path().join("done.log");
    let log = dir.path().join("sidekiq.log");
    let log_file = File::create(&log).expect("log file");
    let mut sidekiq = Command::new("sidekiq")
        .arg("-r")
        .arg(&worker)
        .args(["-c", "5", "-t", "5"])
        .env("REDIS_URL", &url)
        .env("INTEROP_DONE", &done)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().expect("log file"))
        .stderr(log_file)
        .spawn()
        .expect("sidekiq starts");
    // Until every job ran, or one failed (Sidekiq then retries it later), or Sidekiq ended.
    wait_for(
        "Sidekiq to run concur's jobs",
        Duration::from_secs(60),
        || {
            let ran = std::fs::read_to_string(&done).map_or(0, |s| s.lines().count());
            ran >= N
                || int(&mut c, "ZCARD", "retry") + int(&mut c, "ZCARD", "dead") > 0
                || sidekiq.try_wait().ok().flatten().is_some()
        },
    );
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(sidekiq.id() as i32, libc::SIGTERM) };
    let status = wait_exit(&mut sidekiq, Duration::from_secs(30));
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "sidekiq: {status}: {said}");
    assert_eq!(sorted_lines(&done), expected, "jobs run: {said}");
    // Sidekiq adds its processed count to `stat:processed` when it stops.
    assert_eq!(leftovers(&mut c), [0, 0, 0, 0, N as i64, 0], "{said}");
}
