//! The interpreter-lock emulation, end to end. A timing test: it holds `common::alone()`, so
//! no other heavy or timing test competes for the two cores while it measures, and what it
//! checks holds on a machine loaded by anything else.

mod common;

use common::*;

#[test]
fn the_gil_serialises_threads_but_not_processes() {
    let _alone = alone();
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
        "5",
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
    assert_eq!(
        (threads.len(), forks.len()),
        (5, 5),
        "a run of each per round"
    );
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
    // That processes also ran in parallel shows in effective cores, (user + sys) / wall, as a
    // ratio between cells run in the same rounds (so under the same load). Load lowers both,
    // not their ratio much: on two cores the scheduler shares each core between the runnable
    // groups of tasks (this session's, and one per other busy session: autogroups), so with
    // k other CPU-bound groups on both cores the two forked processes get 2/(1+k) cores and
    // the one thread that holds the lock 2/(2+k); their ratio (2+k)/(1+k) is 2 on an idle
    // machine and still 1.2 with four busy groups beside this test.
    assert!(
        std::thread::available_parallelism().map_or(0, |n| n.get()) >= 2,
        "processes can only run in parallel on two cores or more"
    );
    let cores = |m: &str| {
        let cells = of_type(&lines, "cell");
        let found: Vec<&&serde_json::Value> = cells.iter().filter(|c| c["model"] == m).collect();
        assert_eq!(found.len(), 1, "one {m} cell: {cells:?}");
        found[0]["effective_cores"]
            .as_f64()
            .unwrap_or_else(|| panic!("no effective_cores: {}", found[0]))
    };
    let (thread, fork) = (cores("thread"), cores("fork"));
    assert!(
        fork > 1.2 * thread,
        "processes were serialised like threads: {fork:.2} cores against threads' {thread:.2}"
    );
    assert!(threads.iter().all(|r| r["gil"] == true));
    assert!(threads.iter().any(|r| num(r, "gil_switches") > 0.0));
}
