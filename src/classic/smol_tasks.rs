//! A bare smol program in the `tasks` study, beside tokio's floor ([`super::tokio_tasks`]):
//! it only spawns N tasks that each wait and awaits them, as smol's documentation writes a
//! multi-threaded executor (an `Executor` run by executor threads until a shutdown channel
//! closes, the main future `block_on` on the calling thread; `Executor::spawn`,
//! `Timer::after`). smol's `Executor`, `Timer` and `block_on` are re-exports of the crates it
//! is made of (async-executor, async-io), which concur depends on directly. It runs as many
//! executor threads as tokio's floor runs workers (a core each), so that the two rows compare
//! runtimes, not thread counts. `concur classic smol-tasks` runs it; its bounds, counter page
//! and `CONCUR` line are [`super::bare_tasks`]'s, shared with tokio's.

use std::time::Instant;

use async_executor::Executor;

use super::bare_tasks::{self, Waited};
use crate::base::error::{Error, Result};

/// Runs `n` tasks that each wait `wait_ms` and returns the `CONCUR` line's JSON: the tasks
/// that finished (each joined with its result), those whose join failed (a task cancelled),
/// and their wake-ups.
pub fn run(n: usize, wait_ms: u64) -> Result<String> {
    let wait = bare_tasks::begin(n, wait_ms)?;
    // tokio's multi-thread runtime runs a worker a core; smol's executor as many threads.
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let ex = Executor::new();
    let (signal, shutdown) = async_channel::unbounded::<()>();
    let t0 = Instant::now();
    let ended: Vec<Option<Waited>> = std::thread::scope(|s| {
        let started = (1..=threads).try_for_each(|i| {
            let (ex, shutdown) = (&ex, shutdown.clone());
            std::thread::Builder::new()
                .name(format!("smol-{i}"))
                .spawn_scoped(s, move || async_io::block_on(ex.run(shutdown.recv())))
                .map(|_| ())
        });
        if let Err(e) = started {
            // The threads that did start end when the channel closes.
            drop(signal);
            return Err(Error::io("starting smol's executor threads", e));
        }
        let ended = async_io::block_on(async {
            let tasks: Vec<_> = (0..n)
                .map(|_| {
                    ex.spawn(bare_tasks::wait_one(move || async_io::Timer::after(wait)))
                        .fallible()
                })
                .collect();
            let mut ended = Vec::with_capacity(n);
            for t in tasks {
                ended.push(t.await);
            }
            ended
        });
        drop(signal);
        Ok(ended)
    })?;
    Ok(bare_tasks::end(
        t0,
        wait,
        ended,
        "smol (async-executor 1.14, async-io 2.6)",
    ))
}
