//! A task group: futures driven together as one tokio task, so that they run on one worker
//! thread at a time and wake each other without a hand-off between threads.
//!
//! `async` groups its worker loops this way when the workload's requests are streams over a few
//! HTTP/2 connections ([`crate::workload::HttpTasks::connection_groups`]): group `g` sends its
//! streams over connection `g` only, and that connection's driver (h2's connection future) joins
//! the group through [`spawn`]. One connection's streams and its driver then run on one thread,
//! and the connections spread over the runtime's workers. Left as separate tasks, the driver
//! and the streams would wake each other from both workers: context switches, and h2's stream
//! store's lock contended between them.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;

type Spawned = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What a future polled inside a group sees of it.
struct Group {
    index: usize,
    spawner: mpsc::UnboundedSender<Spawned>,
}

tokio::task_local! {
    static GROUP: Group;
}

/// The index of the group the calling future runs in, if it runs in one.
pub fn current() -> Option<usize> {
    GROUP.try_with(|g| g.index).ok()
}

/// Runs `fut` beside the calling future: inside its group when it runs in one (ended with the
/// group), else (or when the group has ended) as a task of its own on the current runtime.
pub fn spawn(fut: impl Future<Output = ()> + Send + 'static) {
    let mut fut: Option<Spawned> = Some(Box::pin(fut));
    let _ = GROUP.try_with(|g| {
        if let Some(f) = fut.take() {
            if let Err(mpsc::error::SendError(f)) = g.spawner.send(f) {
                fut = Some(f);
            }
        }
    });
    if let Some(f) = fut {
        tokio::spawn(f);
    }
}

/// Drives `members` as group `index` until every one of them has ended; what they [`spawn`]
/// meanwhile runs beside them and is dropped with the group.
pub async fn run<F>(index: usize, members: Vec<F>)
where
    F: Future<Output = ()> + Send,
{
    let (spawner, mut inbox) = mpsc::unbounded_channel::<Spawned>();
    let mut members: FuturesUnordered<F> = members.into_iter().collect();
    let mut spawned: FuturesUnordered<Spawned> = FuturesUnordered::new();
    // Only a future polled here can send (the sender is reachable only inside the scope), so
    // the inbox is emptied with `try_recv` after each round and needs no waker; `poll_recv`
    // would also take from tokio's cooperative budget, and once that ran out it would return
    // nothing for a message that is there, and this loop would spin.
    let drive = std::future::poll_fn(move |cx: &mut Context<'_>| loop {
        while let Ok(f) = inbox.try_recv() {
            spawned.push(f);
        }
        while let Poll::Ready(Some(())) = spawned.poll_next_unpin(cx) {}
        loop {
            match members.poll_next_unpin(cx) {
                Poll::Ready(Some(())) => continue,
                Poll::Ready(None) => return Poll::Ready(()),
                Poll::Pending => break,
            }
        }
        // A member may have spawned while it was polled: drive that too before sleeping.
        if inbox.is_empty() {
            return Poll::Pending;
        }
    });
    GROUP.scope(Group { index, spawner }, drive).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn members_know_their_group_and_what_they_spawn_runs_in_their_task() {
        let rt = runtime();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        rt.block_on(async {
            let handles: Vec<_> = (0..3)
                .map(|g| {
                    let seen = seen.clone();
                    let members: Vec<_> = (0..4)
                        .map(|_| {
                            let seen = seen.clone();
                            async move {
                                let group = current();
                                let here = tokio::task::id();
                                let (tx, rx) = tokio::sync::oneshot::channel();
                                spawn(async move {
                                    let _ = tx.send((current(), tokio::task::id()));
                                });
                                let (their_group, there) = rx.await.unwrap();
                                seen.lock()
                                    .unwrap()
                                    .push((group, their_group, here == there));
                            }
                        })
                        .collect();
                    tokio::spawn(run(g, members))
                })
                .collect();
            for h in handles {
                h.await.unwrap();
            }
        });
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 12);
        for g in 0..3 {
            assert_eq!(
                seen.iter()
                    .filter(|(a, b, same)| *a == Some(g) && *b == Some(g) && *same)
                    .count(),
                4,
                "group {g}: {seen:?}"
            );
        }
        assert_eq!(current(), None, "outside any group");
    }

    /// One member uses up the task's cooperative budget, the next spawns: the group still takes
    /// in and drives what was spawned (a receiver polled through the budget once returned
    /// nothing for it, and the group spun in one poll forever).
    #[test]
    fn a_spawn_after_the_budget_ran_out_is_still_driven() {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = runtime();
            rt.block_on(async {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
                for _ in 0..1000 {
                    tx.send(()).unwrap();
                }
                let spend = async move {
                    for _ in 0..1000 {
                        rx.recv().await.unwrap();
                    }
                };
                let spawn_one = async {
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    spawn(async move {
                        let _ = tx.send(());
                    });
                    rx.await.unwrap();
                };
                let members: Vec<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>> =
                    vec![Box::pin(spend), Box::pin(spawn_one)];
                run(0, members).await;
            });
            let _ = done_tx.send(());
        });
        assert!(
            done_rx
                .recv_timeout(std::time::Duration::from_secs(20))
                .is_ok(),
            "the group never ended"
        );
    }

    #[test]
    fn outside_a_group_spawn_makes_a_task_and_a_group_ends_with_its_members() {
        let rt = runtime();
        let ran = Arc::new(AtomicUsize::new(0));
        rt.block_on(async {
            // block_on's future is no task; what `spawn` starts from it is one.
            assert_eq!(tokio::task::try_id(), None);
            let (tx, rx) = tokio::sync::oneshot::channel();
            let r = ran.clone();
            spawn(async move {
                r.fetch_add(1, Ordering::SeqCst);
                let _ = tx.send((tokio::task::try_id(), current()));
            });
            let (task, group) = rx.await.unwrap();
            assert!(task.is_some(), "ran as a task of its own");
            assert_eq!(group, None);
            // A member that spawns a future that never ends: the group still ends with its
            // members, and drops it.
            run(
                7,
                vec![async {
                    spawn(std::future::pending());
                }],
            )
            .await;
        });
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }
}
