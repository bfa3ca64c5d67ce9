//! `actor:W`: a pool of W actors with mailboxes, the classic's Celluloid `pool(size: 10)` with
//! `pool.async.send_email(i)`: every task is sent asynchronously as a message to one actor's
//! mailbox (round-robin), each actor handles its mailbox one message at a time, and the caller
//! awaits each task's completion through a one-shot reply.
//!
//! Hand-written on tokio rather than ractor's factory (the DESIGN's first choice): the factory
//! wants a worker type, a builder, job keys, a routing and a queueing strategy and its own
//! supervision tree for what is here a mailbox per actor and a reply per message; its cost
//! would then be ractor's machinery rather than the actor pattern's, and it adds a dependency
//! tree to compile. Here an actor is a tokio task that owns the receiving end of an unbounded
//! `mpsc` channel (its mailbox); the runtime has min(W, cores) worker threads, so W actors
//! share the cores as Celluloid's threads share them. CPU work runs inline in the actor (it
//! occupies the actor, which is the point), blocking I/O goes to tokio's blocking pool.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::async_mt::build_counted;
use super::{cores, never_started, run_task_async, Entry, Model, ModelOutcome, RunCtx};
use crate::measure::lanes::Lanes;
use crate::measure::{TaskError, TaskRecord};
use crate::workload::Workload;

pub(super) const ENTRY: Entry = Entry {
    name: "actor",
    takes_workers: true,
    help: "a pool of W actors with mailboxes; tasks sent as messages, completion awaited (Celluloid's pool)",
    build: |w| {
        Box::new(ActorPool {
            actors: w.unwrap_or(1),
        })
    },
};

/// A pool of actors with mailboxes on a tokio runtime.
pub struct ActorPool {
    actors: usize,
}

/// One message: run task `index` and reply with what it did.
struct Deliver {
    index: usize,
    reply: oneshot::Sender<Done>,
}

/// An actor's reply: the task's record less what the caller knows already (its index, and its
/// actor, which the round-robin chose). A reply lives from its send to the run's end, one per
/// task, in a cell shared by two cores: 32 bytes rather than the whole record's 56 keep that
/// cell in a smaller allocation (96 bytes, not 112 or 128; a larger one cost `actor:2` about
/// 60 ns a task, docs/benchmarks.md §25).
struct Done {
    start_ns: u64,
    end_ns: u64,
    bytes: u64,
    error: Option<Box<TaskError>>,
}

/// An actor's life: take messages from its mailbox one at a time until every sender is gone.
async fn actor(w: Arc<dyn Workload>, mut mailbox: mpsc::UnboundedReceiver<Deliver>) {
    while let Some(Deliver { index, reply }) = mailbox.recv().await {
        let rec = run_task_async(w.clone(), index).await;
        // The caller may have stopped waiting; the task ran either way.
        let _ = reply.send(Done {
            start_ns: rec.start_ns,
            end_ns: rec.end_ns,
            bytes: rec.bytes,
            error: rec.error,
        });
    }
}

impl Model for ActorPool {
    fn spec(&self) -> String {
        format!("actor:{}", self.actors)
    }
    fn workers(&self) -> Option<usize> {
        Some(self.actors)
    }
    fn parallelism(&self, tasks: usize) -> usize {
        self.actors.min(tasks)
    }
    fn lanes(&self) -> Lanes {
        Lanes::Worker
    }
    fn run(&self, ctx: &RunCtx) -> ModelOutcome {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(self.actors.min(cores()));
        let (rt, started) = match build_counted(&mut builder, ctx) {
            Ok(x) => x,
            Err(why) => {
                return ModelOutcome {
                    records: never_started(0..ctx.tasks, &why),
                    error: Some(why),
                    ..Default::default()
                };
            }
        };
        let feed = ctx.arrivals.as_ref().map(|a| a.feed());
        let (feeder, rx) = match feed {
            Some((f, rx)) => (Some(f), Some(rx)),
            None => (None, None),
        };
        let records = rt.block_on(async {
            let mailboxes: Vec<_> = (0..self.actors)
                .map(|_| {
                    let (tx, rx) = mpsc::unbounded_channel();
                    tokio::spawn(actor(ctx.workload.clone(), rx));
                    tx
                })
                .collect();
            // `pool.async.send_email(i)`: send every message first, then await the replies.
            let send = |i: usize| {
                let (reply, done) = oneshot::channel();
                // The actor holds its mailbox until every sender is dropped, so this send
                // only fails if the actor panicked; the reply then reports it.
                let _ = mailboxes[i % self.actors].send(Deliver { index: i, reply });
                (i, done)
            };
            let replies: Vec<_> = match rx {
                // Open model: each message is sent when its task is due.
                Some(mut rx) => {
                    let mut rs = Vec::with_capacity(ctx.tasks);
                    while let Some(i) = rx.recv().await {
                        rs.push(send(i));
                    }
                    rs
                }
                None => (0..ctx.tasks).map(send).collect(),
            };
            drop(mailboxes);
            let mut out = Vec::with_capacity(ctx.tasks);
            for (i, done) in replies {
                out.push(match done.await {
                    Ok(d) => TaskRecord {
                        index: crate::measure::task_index(i),
                        start_ns: d.start_ns,
                        end_ns: d.end_ns,
                        bytes: d.bytes,
                        error: d.error,
                        sched_ns: None,
                        worker: (i % self.actors) as u32,
                    },
                    Err(_) => TaskRecord::not_started(i, TaskError::new("panic", "the actor died")),
                });
            }
            out
        });
        drop(rt);
        if let Some(f) = feeder {
            let _ = f.join();
        }
        ModelOutcome {
            records,
            threads_created: started.load(Ordering::Relaxed),
            processes_created: 0,
            error: None,
        }
    }
}
