//! The floor of concur's own runtime in the `tasks` study: a bare tokio program that only
//! spawns N tasks that each wait and awaits them, as tokio's users write it
//! (`#[tokio::main]`'s multi-thread runtime, `tokio::spawn`, `tokio::time::sleep`), with no
//! model, recorder or pipe of concur's around it. `concur classic tokio-tasks` runs it and
//! prints the same `CONCUR` line as the other runtimes' programs. Its bounds, counter page
//! and line are [`super::bare_tasks`]'s, shared with smol's ([`super::smol_tasks`]).

use std::time::Instant;

use super::bare_tasks::{self, Waited};
use crate::base::error::{Error, Result};

/// Runs `n` tasks that each wait `wait_ms` and returns the `CONCUR` line's JSON: the tasks
/// that finished (each joined with its result), those whose join failed, and their wake-ups.
pub fn run(n: usize, wait_ms: u64) -> Result<String> {
    let wait = bare_tasks::begin(n, wait_ms)?;
    // As `#[tokio::main]` builds it: a worker a core.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
        .map_err(|e| Error::io("building the tokio runtime", e))?;
    let t0 = Instant::now();
    let ended: Vec<Option<Waited>> = rt.block_on(async move {
        let handles: Vec<_> = (0..n)
            .map(|_| tokio::spawn(bare_tasks::wait_one(move || tokio::time::sleep(wait))))
            .collect();
        let mut ended = Vec::with_capacity(n);
        for h in handles {
            ended.push(h.await.ok());
        }
        ended
    });
    Ok(bare_tasks::end(
        t0,
        wait,
        ended,
        "tokio (concur's own build)",
    ))
}
