//! The interpreter-lock emulation, end to end. A timing test: alone in its own test binary so
//! no other test competes for the two cores while it measures.

mod common;

use common::*;

#[test]
fn the_gil_serialises_threads_but_not_processes() {
    // 2 tasks of ~40 ms CPU each. Ratios with generous bounds: on 2 cores threads without
    // the lock and processes with it overlap; threads with it do not.
    let (_, lines) = run_study(&[
        "-w",
        "spin:40000000",
        "-m",
        "seq",
        "-m",
        "thread",
        "-m",
        "fork",
        "-n",
        "2",
        "-r",
        "3",
        "--gil",
    ]);
    let speedup = |m: &str| {
        of_type(&lines, "cell")
            .into_iter()
            .find(|c| c["model"] == m)
            .unwrap()["speedup"]
            .as_f64()
            .unwrap()
    };
    assert!(
        speedup("thread") < 1.3,
        "threads sped up under the GIL: {}",
        speedup("thread")
    );
    assert!(
        speedup("fork") > 1.3,
        "processes did not: {}",
        speedup("fork")
    );
    let gil_runs = runs_of(&lines, "thread");
    assert!(gil_runs.iter().all(|r| r["gil"] == true));
    assert!(gil_runs
        .iter()
        .any(|r| r["gil_switches"].as_u64().unwrap() > 0));
}
