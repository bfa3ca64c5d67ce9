//! Live counters of the run's process (tasks ended, failed), read by the open-model ticker
//! that prints one line per interval while a run goes on. Models whose tasks run in other
//! processes (`fork`, `spawn`, `jobs-procs`) have no live lines: nothing here counts them.

use std::sync::atomic::{AtomicU64, Ordering};

static ENDED: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);

/// Counts one ended task.
pub fn ended(ok: bool) {
    ENDED.fetch_add(1, Ordering::Relaxed);
    if !ok {
        FAILED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Tasks ended so far, and how many of them failed.
pub fn counts() -> (u64, u64) {
    (
        ENDED.load(Ordering::Relaxed),
        FAILED.load(Ordering::Relaxed),
    )
}
