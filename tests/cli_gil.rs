//! The interpreter-lock emulation, end to end. A timing test: alone in its own test binary so
//! no other test competes for the two cores while it measures.

mod common;

use common::*;

#[test]
fn the_gil_serialises_threads_but_not_processes() {
    // 2 tasks of ~40 ms CPU each, under the lock: threads take turns, processes do not.
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
    // What the runs record, not wall-clock speedups (a busy machine stretches any wall, and
    // one shared by other sessions may give this test well under a core in all):
    // - threads waiting for the lock sleep, so the thread cell never keeps much more than one
    //   core busy, (user + sys) / wall, however loaded the machine (load only lowers it), and
    //   each hand-over of the lock puts a waiting thread to sleep: a voluntary context switch;
    // - forked processes each have their own lock and never wait for it: a few voluntary
    //   switches (the parent waiting for its children), fewer than any thread run's.
    let threads = runs_of(&lines, "thread");
    let forks = runs_of(&lines, "fork");
    let num = |r: &serde_json::Value, f: &str| r[f].as_f64().unwrap();
    for r in &threads {
        let busy = (num(r, "user_s") + num(r, "sys_s")) / num(r, "wall_s");
        assert!(
            busy < 1.25,
            "threads ran at once under the GIL: {busy:.2} cores: {r}"
        );
        assert!(
            num(r, "ctx_voluntary") >= num(r, "gil_switches"),
            "every hand-over puts a waiting thread to sleep: {r}"
        );
    }
    let fewest_thread_waits = threads
        .iter()
        .map(|r| num(r, "ctx_voluntary"))
        .fold(f64::INFINITY, f64::min);
    for r in &forks {
        assert_eq!(r["processes_created"], 2, "{r}");
        assert!(
            num(r, "ctx_voluntary") < fewest_thread_waits,
            "processes waited as often as threads for the lock: {r}"
        );
    }
    // That processes also ran in parallel shows in effective cores only when the machine had
    // a core to spare: checked when the study started on a machine less than half busy (as
    // recorded in its meta line), as a ratio between cells run in the same rounds.
    let cores = |m: &str| {
        of_type(&lines, "cell")
            .into_iter()
            .find(|c| c["model"] == m)
            .unwrap()["effective_cores"]
            .as_f64()
            .unwrap()
    };
    let (thread, fork) = (cores("thread"), cores("fork"));
    // A meta line without `cpu_busy` is a failure, not a reason to skip the check.
    let busy = lines[0]["machine"]["cpu_busy"]
        .as_f64()
        .unwrap_or_else(|| panic!("no machine.cpu_busy in the meta line: {}", lines[0]));
    if busy < 0.5 {
        assert!(
            fork > 1.2 * thread,
            "processes were serialised like threads: {fork:.2} cores against threads' {thread:.2}"
        );
    } else {
        eprintln!(
            "parallelism of processes not checked: the machine was {:.0}% busy at the start \
             (processes {fork:.2} cores, threads {thread:.2})",
            busy * 100.0
        );
    }
    assert!(threads.iter().all(|r| r["gil"] == true));
    assert!(threads.iter().any(|r| num(r, "gil_switches") > 0.0));
}
