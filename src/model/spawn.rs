//! `spawn`: one process per task by re-executing our own binary (`concur __task`, a
//! [`SelfCall::Task`]), the way a language without fork (or `multiprocessing`'s spawn start
//! method) does it. Each child reads its task on fd 4, reports its record on its own pipe, and
//! dies with this process; each is collected as it exits.
//!
//! A traced task's process exit is from its task's end in the child (its record's end, on
//! the machine's monotonic clock) to this process's `wait4` for it returning.

use std::io::Read;

use super::{never_started, Entry, Model, ModelOutcome, RunCtx};
use crate::measure::phases::PhaseKind;
use crate::measure::{describe_exit, rusage, TaskError, TaskRecord};
use crate::model::selfcall::SelfCall;
use crate::os::process;

pub(super) const ENTRY: Entry = Entry {
    name: "spawn",
    takes_workers: false,
    help: "one process per task by re-executing concur itself (a fresh process, no copy-on-write)",
    build: |_| Box::new(Spawn),
};

/// One fresh process per task.
pub struct Spawn;

/// Whether child `pid` has exited, leaving it waitable (`WNOWAIT`) for [`finish`]'s `wait4`.
fn exited(pid: libc::pid_t) -> bool {
    // SAFETY: siginfo_t is plain old data; waitid writes into it and only peeks (WNOWAIT)
    // at our own child.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        r == 0 && info.si_pid() == pid
    }
}

/// One of this process's children that has exited, left waitable (`WNOWAIT`): blocks until
/// one has; none when there is none left or the wait failed.
fn any_exited() -> Option<libc::pid_t> {
    // SAFETY: as in `exited`, for any child, blocking.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        loop {
            let r = libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOWAIT);
            if r == 0 {
                return Some(info.si_pid());
            }
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return None;
            }
        }
    }
}

/// Reads a task child's record and reaps it; a child that wrote none crashed, and its exit
/// is the reason. A traced task's process exit ends here.
fn finish(i: usize, child: std::process::Child, mut pipe: std::fs::File) -> TaskRecord {
    let mut text = String::new();
    let read = pipe.read_to_string(&mut text);
    let ended = rusage::wait_child(child.id() as i32);
    let rec = match (read, TaskRecord::from_line(&text)) {
        (Ok(_), Some(rec)) => {
            if let Some(task) = crate::measure::phases::task(i) {
                task.record(
                    PhaseKind::ProcessExit,
                    rec.end_ns,
                    crate::measure::mono_ns(),
                );
            }
            rec
        }
        _ => {
            let why = match ended {
                Ok(u) => describe_exit(&u),
                Err(e) => format!("could not wait: {e}"),
            };
            TaskRecord::not_started(i, TaskError::new("crash", why))
        }
    };
    // The task's own process counted into a page of its own: the run counts it here.
    crate::measure::live::ended(rec.error.is_none());
    rec
}

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
    fn lanes(&self) -> super::Lanes {
        super::Lanes::Process
    }
    fn task_processes(&self) -> bool {
        true
    }
    fn process_start_phases(&self) -> bool {
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
        let mut children: Vec<(usize, (std::process::Child, std::fs::File))> =
            Vec::with_capacity(ctx.tasks);
        let mut records = Vec::with_capacity(ctx.tasks);
        let mut error = None;
        let mut created = 0;
        let spawn_one = |i: usize,
                         children: &mut Vec<(usize, (std::process::Child, std::fs::File))>,
                         error: &mut Option<String>|
         -> bool {
            let call = SelfCall::Task {
                recipe: ctx.recipe.clone(),
                index: i,
            };
            // A traced task's process starts here; the phase ends where its task starts.
            if let Some(task) = crate::measure::phases::task(i) {
                let now = crate::measure::mono_ns();
                task.record(PhaseKind::ProcessStart, now, now);
            }
            match call.spawn(&exe) {
                Ok((child, Some(pipe))) => {
                    crate::measure::live::started();
                    children.push((i, (child, pipe)));
                    true
                }
                Ok((_, None)) => {
                    *error = Some("a task child has no report pipe".to_string());
                    false
                }
                Err(e) => {
                    *error = Some(format!("could create {i} of {} processes: {e}", ctx.tasks));
                    false
                }
            }
        };
        match &ctx.arrivals {
            // Open model: one process per arrival, started when the task is due; the children
            // that have exited are collected before each release, so only the tasks in flight
            // hold a process and a pipe.
            Some(a) => a.dispatch(|i| {
                let mut k = 0;
                while k < children.len() {
                    if exited(children[k].1 .0.id() as libc::pid_t) {
                        let (i, (child, pipe)) = children.swap_remove(k);
                        records.push(finish(i, child, pipe));
                    } else {
                        k += 1;
                    }
                }
                let ok = spawn_one(i, &mut children, &mut error);
                created += usize::from(ok);
                ok
            }),
            None => {
                for i in 0..ctx.tasks {
                    if !spawn_one(i, &mut children, &mut error) {
                        break;
                    }
                    created += 1;
                }
            }
        }
        // Each child collected as it exits (its record is whole by then); a pid that is none
        // of these leaves the rest to be collected in order.
        while !children.is_empty() {
            let Some(pid) = any_exited() else { break };
            let Some(k) = children
                .iter()
                .position(|c| c.1 .0.id() as libc::pid_t == pid)
            else {
                break;
            };
            let (i, (child, pipe)) = children.swap_remove(k);
            records.push(finish(i, child, pipe));
        }
        for (i, (child, pipe)) in children {
            records.push(finish(i, child, pipe));
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
