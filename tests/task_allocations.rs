//! The guard on what one waiting `async` task allocates (issue 44): the `async` and
//! `async-local` models run N tasks of `sleep` in this process, under a global allocator that
//! counts allocations and the bytes live at the peak, for N = 1,000 and N = 10,000. The
//! difference divided by 9,000 is what one more task costs (the runtime, its threads, the
//! timer's thread cancel out), and it must stay under the bounds below: a field, a box or an
//! `Arc` added to the waiting task's path fails this test instead of showing up months later
//! as the tasks study's PSS.
//!
//! Measured when the bounds were last set (release build, 2026-12-06, `docs/benchmarks.md`
//! §31), per task: 1 allocation (tokio's task cell, 256 bytes, with the wait on the precise
//! timer inside it) and 320-323 bytes at the peak for `async` (339-342 for `async-local`,
//! whose runtime queues every spawned task in a buffer that doubles): the cell, the run's
//! record (48) and the precise timer's entry (24, in blocks of 4,096); the bare tokio floor,
//! counted the same way, 1 allocation and 304 bytes (the cell, its `JoinHandle`, its result).
//! Before §31 a waiting `async` task took 2 allocations and 373 bytes (the workload's future
//! boxed, a 56-byte record, a 32-byte timer entry, a `JoinHandle` kept). The bounds leave about
//! 5% for the runtime's own amortised growth (a loaded machine's late timer thread holds more
//! woken entries at once: up to 12 bytes a task more with two builds beside it) and no room for
//! one more allocation of any size, the bytes §31 removed, or a larger size class of the task
//! cell (384 bytes, what 52e88b2 had brought); the record's and the timer entry's own sizes
//! are pinned by unit tests beside them (`measure`, `workload::timer`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use concur::workload::WorkloadOptions;

/// The system allocator, counting.
struct Counting;

/// Allocations made (`alloc`, `alloc_zeroed`, and each `realloc`).
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
/// Bytes live now.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The most bytes live since [`reset_peak`].
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Allocations by requested size, in 8-byte steps up to 2 KiB (the last slot: larger ones).
static BY_SIZE: [AtomicUsize; 258] = [const { AtomicUsize::new(0) }; 258];

fn added(size: usize) {
    ALLOCATIONS.fetch_add(1, Relaxed);
    BY_SIZE[(size.div_ceil(8)).min(257)].fetch_add(1, Relaxed);
    let live = LIVE.fetch_add(size, Relaxed) + size;
    PEAK.fetch_max(live, Relaxed);
}

// SAFETY: every call goes to the system allocator with the caller's own arguments; the
// counters are only atomics beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            added(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            added(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            added(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One run's counts.
struct Counts {
    allocations: usize,
    peak_bytes: usize,
    by_size: Vec<usize>,
}

/// How long each task waits: long enough that all of them are waiting at once (checked).
const WAIT: &str = "sleep:300ms";

/// The most allocations a waiting task may make.
const ALLOCATIONS_MAX: f64 = 1.2;
/// The most bytes a waiting task may hold at the peak, by model: `async-local`'s 18 more are
/// tokio's current-thread run queue (8 bytes a spawned task, in a buffer that doubles).
const BYTES_MAX: [(&str, f64); 2] = [("async", 340.0), ("async-local", 356.0)];

/// Runs `MODEL:n` (`async`, `async-local`) on `n` tasks of [`WAIT`] in this process and counts
/// what it allocated.
fn run(model: &str, n: usize) -> Counts {
    let opts = WorkloadOptions::default();
    let workload = concur::workload::parse(WAIT, &opts).unwrap();
    let model = concur::model::parse(&format!("{model}:{n}")).unwrap();
    let ctx = concur::model::RunCtx {
        workload: Arc::clone(&workload),
        tasks: n,
        recipe: concur::model::WorkloadRecipe {
            workload: WAIT.into(),
            options: opts,
            gil: false,
            settings: concur::plan::options::RunSettings::default(),
            jobs_backend: None,
        },
        arrivals: None,
    };
    let (out, counts) = counted(|| model.run(&ctx));
    assert_eq!(out.error, None);
    assert_eq!(out.records.len(), n);
    assert!(out.records.iter().all(|r| r.error.is_none()));
    // The peak counts every task only if every task was waiting at once.
    let last_start = out.records.iter().map(|r| r.start_ns).max().unwrap();
    let first_end = out.records.iter().map(|r| r.end_ns).min().unwrap();
    assert!(
        last_start < first_end,
        "a task ended before the last one started: {WAIT} is too short for {n} tasks here"
    );
    counts
}

/// Counts what the floor (`rust:tokio-bare`, a bare tokio program) allocates for `n` tasks
/// waiting 300 ms, for the comparison printed beside the model's figures.
fn floor(n: usize) -> Counts {
    let (out, counts) = counted(|| concur::classic::tokio_tasks::run(n, 300));
    out.unwrap();
    counts
}

/// Runs `f` and counts what it allocated: allocations, the live bytes' peak over the start,
/// allocations by size class.
fn counted<T>(f: impl FnOnce() -> T) -> (T, Counts) {
    let sizes_before: Vec<usize> = BY_SIZE.iter().map(|c| c.load(Relaxed)).collect();
    let allocations_before = ALLOCATIONS.load(Relaxed);
    let live_before = LIVE.load(Relaxed);
    PEAK.store(live_before, Relaxed);
    let out = f();
    let counts = Counts {
        allocations: ALLOCATIONS.load(Relaxed) - allocations_before,
        peak_bytes: PEAK.load(Relaxed).saturating_sub(live_before),
        by_size: BY_SIZE
            .iter()
            .zip(sizes_before)
            .map(|(c, b)| c.load(Relaxed) - b)
            .collect(),
    };
    (out, counts)
}

/// One line per task: allocations, bytes at the peak and allocations by size, from the
/// difference between a run of 10,000 and one of 1,000.
fn per_task(small: &Counts, large: &Counts) -> (f64, f64, String) {
    let extra = (10_000 - 1_000) as f64;
    let allocations = (large.allocations as f64 - small.allocations as f64) / extra;
    let bytes = (large.peak_bytes as f64 - small.peak_bytes as f64) / extra;
    let sizes: Vec<String> = large
        .by_size
        .iter()
        .zip(&small.by_size)
        .enumerate()
        .filter_map(|(i, (l, s))| {
            let per_task = (*l as f64 - *s as f64) / extra;
            let label = if i == 257 {
                ">2048".to_string()
            } else {
                format!("{}-{}", (i * 8).saturating_sub(7), i * 8)
            };
            (per_task.abs() >= 0.05).then(|| format!("{label} B: {per_task:.2}"))
        })
        .collect();
    let line = format!(
        "{allocations:.2} allocations, {bytes:.0} bytes at the peak; by size: {}",
        sizes.join(", ")
    );
    (allocations, bytes, line)
}

#[test]
fn a_waiting_async_task_allocates_no_more_than_it_did() {
    // The process-wide parts (the precise timer's thread, the live counters) start here.
    run("async", 100);
    let (floor_small, floor_large) = (floor(1_000), floor(10_000));
    let (_, _, floor_line) = per_task(&floor_small, &floor_large);
    for (model, bytes_max) in BYTES_MAX {
        let small = run(model, 1_000);
        let large = run(model, 10_000);
        let (allocations, bytes, line) = per_task(&small, &large);
        let report = format!("per task: {model} {line}; the bare tokio floor {floor_line}");
        eprintln!("{report}");
        assert!(
            allocations <= ALLOCATIONS_MAX,
            "more allocations per task than {ALLOCATIONS_MAX}: {report}"
        );
        assert!(
            bytes <= bytes_max,
            "more bytes per task than {bytes_max}: {report}"
        );
    }
}
