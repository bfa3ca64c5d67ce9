//! What the bare Rust runtimes' programs of the `tasks` study share (`concur classic
//! tokio-tasks`, [`super::tokio_tasks`]; `concur classic smol-tasks`, [`super::smol_tasks`]):
//! their bounds and refusals, the counter page they count their tasks into, the one waiting
//! task they spawn N of, and the `CONCUR` line they print. Only the runtime differs between
//! them: how a task is spawned, slept and joined.
//!
//! As a study's row such a program counts its tasks into the counter page the study hands an
//! external program (`os::process::COUNTER_FD_ENV`), as concur's models do (a store into a
//! cache line of its thread's as a task starts and ends; no allocation), and says when they are
//! over: the study then samples its tree when every task has started and at its end, as it
//! samples a model's. Sampled on the sampler's tick alone, the floor's end (its results
//! written, while its tasks' freed memory is still the process's) came and went unseen:
//! 276-293 MiB in a study at a million tasks, where its end reaches about 305
//! (docs/benchmarks.md §31).

use std::future::Future;
use std::time::{Duration, Instant};

use crate::base::error::{Error, Result};
use crate::measure::latency::LatencySummary;
use crate::measure::live;
use crate::measure::wakeups::Wakeups;
use crate::os::process;

/// The most tasks a program takes (ten times the study's largest cell).
pub const TASKS_MAX: usize = 10_000_000;
/// The longest wait it takes, ms (an hour, as `sleep:D`).
pub const WAIT_MS_MAX: u64 = 3_600_000;

/// What one waiting task returns: when it started and how long its wait took.
pub type Waited = (Instant, Duration);

/// Checks `--tasks` and `--wait-ms`, makes this process's allocator a measured run's (so that
/// the programs and concur's models compare runtimes only), attaches the study's counter page
/// when it hands one, and says `n` tasks are to start. Returns the wait.
pub fn begin(n: usize, wait_ms: u64) -> Result<Duration> {
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
    crate::base::allocator::as_a_measured_process();
    if std::env::var_os(process::COUNTER_FD_ENV).is_some() {
        // A page that does not map leaves the counts in this process, unseen, as for a run.
        if let Ok(page) = live::CounterPage::attach(process::PAGE_FD) {
            page.install();
        }
    }
    live::begin(n);
    Ok(Duration::from_millis(wait_ms))
}

/// One waiting task: counts itself started, waits in `sleep` (the runtime's sleep of the
/// wait, made after the start is taken), counts itself ended.
pub async fn wait_one<S: Future>(sleep: impl FnOnce() -> S) -> Waited {
    live::started();
    let start = Instant::now();
    sleep().await;
    live::ended(true);
    (start, start.elapsed())
}

/// Ends the run that started at `t0`, its tasks' joins in `ended` (`None` for one whose join
/// failed): tells the study to sample the tree now, with every result in hand and nothing
/// freed yet, and returns the `CONCUR` line's JSON: the tasks that finished, those whose join
/// failed, their wake-ups, and the `runtime` that ran them.
pub fn end(t0: Instant, wait: Duration, ended: Vec<Option<Waited>>, runtime: &str) -> String {
    let wall_s = t0.elapsed().as_secs_f64();
    live::run_ended(live::RUN_END_SAMPLE_WAIT);
    let n = ended.len();
    let mut late = Vec::with_capacity(n);
    let mut last_start = Duration::ZERO;
    for (start, took) in ended.into_iter().flatten() {
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
        "tasks_failed": n - finished,
        // A waiting task produces no bytes (concur's sleep task neither).
        "bytes": 0,
        "runtime": runtime,
        "wakeups": wakeups,
    });
    line.to_string()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Checks a program's line: every task waited, none failed, wake-ups that hold together.
    pub(crate) fn assert_line(line: &str, n: u64, wait_s: f64) {
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        assert_eq!(v["tasks_ok"], n, "{line}");
        assert_eq!(v["tasks_failed"], 0, "{line}");
        assert!(v["wall_s"].as_f64().expect("wall") >= wait_s, "{line}");
        let w: Wakeups = serde_json::from_value(v["wakeups"].clone()).expect("wakeups");
        assert_eq!(w.check(), Ok(()));
    }

    #[test]
    fn sizes_out_of_range_are_refused_by_name() {
        let e = begin(0, 10).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("--tasks 0") && text.contains("1 to 10000000"),
            "{text}"
        );
        assert_eq!(e.exit_code(), 2, "{text}");
        let e = begin(TASKS_MAX + 1, 10).unwrap_err().to_string();
        assert!(e.contains("--tasks 10000001"), "{e}");
        let e = begin(1, WAIT_MS_MAX + 1).unwrap_err();
        assert!(e.to_string().contains("--wait-ms 3600001"), "{e}");
        assert_eq!(e.exit_code(), 2, "{e}");
    }

    #[test]
    fn a_failed_join_is_counted_and_left_out_of_the_wake_ups() {
        let t0 = Instant::now();
        let wait = Duration::from_millis(5);
        let ok = (t0, Duration::from_millis(7));
        let line = end(t0, wait, vec![Some(ok), None, Some(ok)], "test");
        let v: serde_json::Value = serde_json::from_str(&line).expect("json");
        assert_eq!(v["tasks_ok"], 2, "{line}");
        assert_eq!(v["tasks_failed"], 1, "{line}");
        assert_eq!(v["wakeups"]["late_us"]["max"], 2000, "{line}");
        assert_eq!(v["runtime"], "test", "{line}");
    }
}
