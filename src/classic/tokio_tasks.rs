//! The floor of concur's own runtime in the `tasks` study: a bare tokio program that only
//! spawns N tasks that each wait and awaits them, as tokio's users write it
//! (`#[tokio::main]`'s multi-thread runtime, `tokio::spawn`, `tokio::time::sleep`), with no
//! model, recorder or pipe of concur's around it. `concur classic tokio-tasks` runs it and
//! prints the same `CONCUR` line as the other runtimes' programs.
//!
//! As a study's row it counts its tasks into the counter page the study hands an external
//! program (`os::process::COUNTER_FD_ENV`), as concur's models do (a store into a cache line of
//! its thread's as a task starts and ends; no allocation), and says when they are over: the
//! study then samples its tree when every task has started and at its end, as it samples a
//! model's. Sampled on the sampler's tick alone, the floor's end (its results written, while
//! its tasks' freed memory is still the process's) came and went unseen: 276-293 MiB in a
//! study at a million tasks, where its end reaches about 305 (docs/benchmarks.md §31).

use std::time::{Duration, Instant};

use crate::base::error::{Error, Result};
use crate::measure::latency::LatencySummary;
use crate::measure::live;
use crate::measure::wakeups::Wakeups;
use crate::os::process;

/// The most tasks it takes (ten times the study's largest cell).
pub const TASKS_MAX: usize = 10_000_000;
/// The longest wait it takes, ms (an hour, as `sleep:D`).
pub const WAIT_MS_MAX: u64 = 3_600_000;

/// Runs `n` tasks that each wait `wait_ms` and returns the `CONCUR` line's JSON: the tasks
/// that finished (each joined with its result), those whose join failed, and their wake-ups.
pub fn run(n: usize, wait_ms: u64) -> Result<String> {
    if n == 0 || n > TASKS_MAX {
        return Err(Error::flag(
            "--tasks",
            format!("--tasks {n} is out of range: 1 to {TASKS_MAX}"),
        ));
    }
    if wait_ms > WAIT_MS_MAX {
        return Err(Error::flag(
            "--wait-ms",
            format!("--wait-ms {wait_ms} is out of range: 0 to {WAIT_MS_MAX} (an hour)"),
        ));
    }
    // The floor's allocator as a measured run's, so that the two compare runtimes only.
    crate::base::allocator::as_a_measured_process();
    let wait = Duration::from_millis(wait_ms);
    if std::env::var_os(process::COUNTER_FD_ENV).is_some() {
        // A page that does not map leaves the counts in this process, unseen, as for a run.
        if let Ok(page) = live::CounterPage::attach(process::PAGE_FD) {
            page.install();
        }
    }
    live::begin(n);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
        .map_err(|e| Error::io("building the tokio runtime", e))?;
    let t0 = Instant::now();
    let ended = rt.block_on(async move {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                tokio::spawn(async move {
                    live::started();
                    let start = Instant::now();
                    tokio::time::sleep(wait).await;
                    live::ended(true);
                    (start, start.elapsed())
                })
            })
            .collect();
        let mut ended = Vec::with_capacity(n);
        for h in handles {
            ended.push(h.await);
        }
        ended
    });
    let wall_s = t0.elapsed().as_secs_f64();
    // The study samples the tree now, with every result in hand and nothing freed yet.
    live::run_ended(live::RUN_END_SAMPLE_WAIT);
    let mut late = Vec::with_capacity(n);
    let mut last_start = Duration::ZERO;
    let mut failed = 0usize;
    for e in ended {
        let Ok((start, took)) = e else {
            failed += 1;
            continue;
        };
        last_start = last_start.max(start.duration_since(t0));
        late.push(took.saturating_sub(wait).as_micros() as u64);
    }
    let finished = late.len();
    late.sort_unstable();
    let q = |p: f64| {
        let last = finished.saturating_sub(1);
        late.get((p * last as f64).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    let wakeups = Wakeups {
        start_all_s: last_start.as_secs_f64(),
        late_us: LatencySummary {
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            max: q(1.0),
        },
        // Its reader knows the primitive it waits in (`measure::slack`), not the program.
        slack: None,
    };
    let line = serde_json::json!({
        "wall_s": wall_s,
        "tasks_ok": finished,
        "tasks_failed": failed,
        // A waiting task produces no bytes (concur's sleep task neither).
        "bytes": 0,
        "runtime": "tokio (concur's own build)",
        "wakeups": wakeups,
    });
    Ok(line.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_waits_every_task_and_reports_a_line_the_study_accepts() {
        let line = run(200, 20).expect("runs");
        let v: serde_json::Value = serde_json::from_str(&line).expect("json");
        assert_eq!(v["tasks_ok"], 200);
        assert_eq!(v["tasks_failed"], 0);
        assert!(v["wall_s"].as_f64().expect("wall") >= 0.02, "{line}");
        let w: Wakeups = serde_json::from_value(v["wakeups"].clone()).expect("wakeups");
        assert_eq!(w.check(), Ok(()));
    }

    #[test]
    fn sizes_out_of_range_are_refused_by_name() {
        let e = run(0, 10).unwrap_err().to_string();
        assert!(
            e.contains("--tasks 0") && e.contains("1 to 10000000"),
            "{e}"
        );
        let e = run(1, WAIT_MS_MAX + 1).unwrap_err().to_string();
        assert!(e.contains("--wait-ms 3600001"), "{e}");
    }
}
