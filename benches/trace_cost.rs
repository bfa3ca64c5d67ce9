//! What seeing the schedule costs a task, in ns, timed: the live counter page (a task's
//! `started` and `ended`), a task outside any trace (`phases::task` with no book installed),
//! and a traced task (its place in the book and its phase events), on one thread and on two at
//! once (the shared lines' cost shows only there). Each figure is the median of 9 rounds of
//! 2,000,000 tasks a thread. `bench/trace-cost.sh` runs it; docs/benchmarks.md has the figures.
//!
//! Usage: trace_cost [ROUNDS]

use std::hint::black_box;
use std::sync::Barrier;
use std::time::Instant;

use concur::measure::phases::{self, Book, PhaseKind, Sample};
use concur::measure::{live, TaskRecord};

const TASKS: usize = 2_000_000;

/// Runs `one(i)` for `TASKS` indices on each of `threads` threads started together; ns a task
/// (each thread's own time, the slowest thread's).
fn timed(threads: usize, one: &(dyn Fn(usize) + Sync)) -> f64 {
    let barrier = Barrier::new(threads);
    let worst = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let t0 = Instant::now();
                    for i in 0..TASKS {
                        one(black_box(t * TASKS + i));
                    }
                    t0.elapsed().as_nanos() as f64
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(f64::NAN))
            .fold(0.0, f64::max)
    });
    worst / TASKS as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .map(|a| {
            a.parse().unwrap_or_else(|_| {
                eprintln!("trace_cost: ROUNDS '{a}' is not a whole number");
                std::process::exit(2)
            })
        })
        .unwrap_or(9);
    let counters = |i: usize| {
        live::started();
        live::ended(!i.is_multiple_of(1024));
    };
    // With no book installed: a task outside any trace; with one: a traced task's place.
    let lookup = |i: usize| {
        black_box(phases::task(i));
    };
    let traced = |i: usize| {
        if let Some(t) = phases::task(i) {
            let at = i as u64 * 1_000;
            t.record(PhaseKind::Connect, at, at + 100);
            t.record(PhaseKind::Wait, at + 100, at + 600);
            t.record(PhaseKind::Read, at + 600, at + 900);
        }
    };
    let per_task = phases::HTTP_PHASES_PER_TASK;
    let book = || {
        Book::new(
            Sample {
                tasks: 2 * TASKS,
                cap: 2 * TASKS,
            },
            per_task,
        )
    };
    println!("ns a task, median of {rounds} rounds of {TASKS} tasks a thread");
    for threads in [1, 2] {
        let mut rows: Vec<(&str, Vec<f64>)> = vec![
            ("counter page (started + ended)", vec![]),
            ("outside a trace (no book)", vec![]),
            ("traced: its place in the book", vec![]),
            ("traced: place + 3 phase events", vec![]),
        ];
        for _ in 0..rounds {
            live::begin(threads * TASKS);
            rows[0].1.push(timed(threads, &counters));
            rows[1].1.push(timed(threads, &lookup));
            phases::install(book());
            rows[2].1.push(timed(threads, &lookup));
            phases::uninstall();
            phases::install(book());
            rows[3].1.push(timed(threads, &traced));
            phases::uninstall();
        }
        for (name, v) in rows {
            println!("{threads} thread(s)  {name:32} {:8.1}", median(v));
        }
    }
    println!(
        "bytes a traced task: {} (its record) + 4 (its event count) + 16 a phase event kept (up to {per_task} for HTTP, {} under --gil)",
        std::mem::size_of::<TaskRecord>(),
        phases::LOCK_PHASES_PER_TASK
    );
}
