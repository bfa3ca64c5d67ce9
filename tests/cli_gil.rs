//! The interpreter-lock emulation, end to end. It holds `common::alone()`, so no other heavy
//! or timing test competes for the cores while it runs, and it checks only what load cannot
//! change: CPU time and the waits the lock causes, never wall-clock speed-ups.

mod common;

use common::*;

/// The lock's switch interval the study is given, s.
const INTERVAL_S: f64 = 0.005;

#[test]
fn the_gil_serialises_threads_but_not_processes() {
    let _alone = alone();
    // 2 tasks of ~100 ms CPU each, under the lock: threads take turns, processes do not.
    let (_, lines) = run_study(&[
        "-w",
        "spin:100000000",
        "-m",
        "seq",
        "-m",
        "thread",
        "-m",
        "fork",
        "-n",
        "2",
        "-r",
        "5",
        "--gil",
        "--switch-interval",
        "5ms",
    ]);
    // What the runs record, not wall-clock speed-ups (a busy machine stretches any wall, and
    // one shared by other sessions may give this test well under a core in all):
    // - a thread holds the lock at most one interval while the other waits, so it needs at
    //   least (its CPU time) / interval turns, and each turn it hands over puts the waiting
    //   thread to sleep: a voluntary context switch. CPU time is the work's, whatever the
    //   load; load only shortens what a turn computes, making more turns, never fewer;
    // - threads waiting for the lock sleep, so the thread cell never keeps much more than one
    //   core busy, (user + sys) / wall, however loaded the machine (load only lowers it);
    // - forked processes each have their own lock and never wait for it: a few voluntary
    //   switches (the parent waiting for its children), however long they compute, and
    //   fewer than sharing one lock would have cost them.
    let threads = runs_of(&lines, "thread");
    let forks = runs_of(&lines, "fork");
    assert_eq!(
        (threads.len(), forks.len()),
        (5, 5),
        "a run of each per round"
    );
    let num = |r: &serde_json::Value, f: &str| r[f].as_f64().unwrap();
    // The turns two equal tasks sharing one lock take at the least: the one that finishes
    // first computed half the CPU (within 20%) in turns of at most one interval, each
    // followed by a hand-over but the last.
    let least_turns = |r: &serde_json::Value| {
        let cpu = num(r, "user_s") + num(r, "sys_s");
        (0.4 * cpu / INTERVAL_S).floor() - 1.0
    };
    for r in &threads {
        assert_eq!(r["gil"], true, "{r}");
        let busy = (num(r, "user_s") + num(r, "sys_s")) / num(r, "wall_s");
        assert!(
            busy < 1.25,
            "threads ran at once under the GIL: {busy:.2} cores: {r}"
        );
        assert!(least_turns(r) >= 10.0, "too little CPU to tell: {r}");
        assert!(
            num(r, "gil_switches") >= least_turns(r),
            "the lock changed hands fewer times than its interval allows: {r}"
        );
        assert!(
            num(r, "ctx_voluntary") >= num(r, "gil_switches"),
            "every hand-over puts a waiting thread to sleep: {r}"
        );
    }
    // What a run's tree sleeps for without any lock to share (starting, reading its
    // children's records, the parent's end sample): `seq`'s two tasks in one process, whose
    // lock never has a waiter. A loaded machine adds such sleeps to every model alike, and on
    // a fast one 100 ms of CPU allows few turns, so the processes are judged beside it.
    let seqs = runs_of(&lines, "seq");
    assert_eq!(seqs.len(), 5, "a seq run per round");
    let background = seqs
        .iter()
        .map(|r| num(r, "ctx_voluntary"))
        .fold(0.0, f64::max);
    for r in &forks {
        assert_eq!(r["processes_created"], 2, "{r}");
        assert!(
            num(r, "ctx_voluntary") < least_turns(r) + background,
            "processes slept as often as sharing one lock would have made them (beside seq's {background} sleeps): {r}"
        );
    }
}
