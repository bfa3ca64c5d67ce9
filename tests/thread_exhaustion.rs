//! A run that asks for far more threads than the machine allows ends with a clean reason.
//! Alone in its own test binary: tens of thousands of threads (and the memory maps they take)
//! must not run beside tests that fork or time their runs.

mod common;

use common::*;

#[test]
fn thread_exhaustion_ends_cleanly() {
    // Alone: tens of thousands of threads starve every timing test beside it (load averages of
    // hundreds were seen under nextest, which runs other binaries' tests at the same time).
    let _alone = alone();
    // Far more threads than this kind of machine allows at once (about 32,000 raw pthreads:
    // vm.max_map_count and pid_max). Either it succeeds, or the run ends with a clean reason;
    // -i accepts the failure (exit 0).
    let (_, lines) = run_study(&[
        "-w",
        "sleep:0",
        "-m",
        "thread",
        "-n",
        "60000",
        "-r",
        "1",
        "--stack-size",
        "64k",
        "-i",
    ]);
    let r = of_type(&lines, "run")[0];
    let ok = r["tasks_ok"].as_u64().unwrap();
    let created = r["threads_created"].as_u64().unwrap();
    if r["status"] == "ok" {
        assert_eq!(ok, 60000);
    } else {
        assert_eq!(r["status"], "failed", "{r}");
        let err = r["error"].as_str().unwrap();
        assert!(
            err.starts_with(&format!("could create {created} of 60000 threads: ")),
            "{err}"
        );
        assert!(created > 1000, "only {created} threads");
        assert_eq!(
            ok, created,
            "every created thread ran its task and was joined"
        );
        assert_eq!(r["failures"]["spawn"].as_u64().unwrap(), 60000 - created);
    }
}
