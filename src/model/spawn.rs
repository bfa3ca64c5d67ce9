//! `spawn`: one process per task by re-executing our own binary (`concur __task`, a
//! [`SelfCall::Task`]), the way a language without fork (or `multiprocessing`'s spawn start
//! method) does it. Each child reads its task on fd 4, reports its record on its own pipe, and
//! dies with this process.

use std::io::Read;

use super::{never_started, Entry, Model, ModelOutcome, RunCtx};
use crate::measure::{describe_exit, rusage, TaskError, TaskRecord};
use crate::process;
use crate::selfcall::SelfCall;

pub(super) const ENTRY: Entry = Entry {
    name: "spawn",
    takes_workers: false,
    help: "one process per task by re-executing concur itself (a fresh process, no copy-on-write)",
    build: |_| Box::new(Spawn),
};

/// One fresh process per task.
pub struct Spawn;

impl Model for Spawn {
    fn spec(&self) -> String {
        "spawn".into()
    }
    fn workers(&self) -> Option<usize> {
        None
    }
    fn parallelism(&self, tasks: usize) -> usize {
        tasks
    }
    fn task_processes(&self) -> bool {
        true
    }
    fn run(&self, ctx: &RunCtx) -> ModelOutcome {
        let fail = |e: String| ModelOutcome {
            error: Some(e),
            ..Default::default()
        };
        let exe = match std::env::current_exe() {
            Ok(p) => p,
            Err(e) => return fail(format!("cannot find our own binary: {e}")),
        };
        process::raise_nofile_limit();
        // This thread spawns every child and waits for every one below: it outlives them, as
        // their death-with-parent signal requires.
        let mut children = Vec::with_capacity(ctx.tasks);
        let mut error = None;
        let mut spawn_one = |i: usize| -> bool {
            let call = SelfCall::Task {
                env: ctx.env.clone(),
                index: i,
            };
            match call.spawn(&exe) {
                Ok((child, Some(pipe))) => {
                    children.push((i, (child, pipe)));
                    true
                }
                Ok((_, None)) => {
                    error = Some("a task child has no report pipe".to_string());
                    false
                }
                Err(e) => {
                    error = Some(format!("could create {i} of {} processes: {e}", ctx.tasks));
                    false
                }
            }
        };
        match &ctx.arrivals {
            // Open model: one process per arrival, started when the task is due.
            Some(a) => a.dispatch(spawn_one),
            None => {
                for i in 0..ctx.tasks {
                    if !spawn_one(i) {
                        break;
                    }
                }
            }
        }
        let created = children.len();
        let mut records = Vec::with_capacity(ctx.tasks);
        for (i, (child, mut pipe)) in children {
            let mut text = String::new();
            let read = pipe.read_to_string(&mut text);
            let ended = rusage::wait_child(child.id() as i32);
            let rec = match (read, TaskRecord::from_line(&text)) {
                (Ok(_), Some(rec)) => rec,
                _ => {
                    let why = match ended {
                        Ok(u) => describe_exit(&u),
                        Err(e) => format!("could not wait: {e}"),
                    };
                    TaskRecord::not_started(i, TaskError::new("crash", why))
                }
            };
            records.push(rec);
        }
        let reason = error.clone().unwrap_or_default();
        records.extend(never_started(created..ctx.tasks, &reason));
        ModelOutcome {
            records,
            threads_created: 0,
            processes_created: created,
            error,
        }
    }
}
