//! `fork`: one process per task with fork(2), from the single-threaded process of the run.
//! Each child runs its task, writes its record to a shared pipe in one atomic write, and
//! `_exit`s; the parent reads the records as they come and reaps each child whose record came
//! (it is exiting). A child dies with the run's process, so none outlives a killed study.
//!
//! A traced task's process exit is from its task's end in the child (its record's end, on
//! the machine's monotonic clock) to this process's `wait4` for it returning.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;

use nix::unistd::ForkResult;

use super::{run_task, Entry, Model, ModelOutcome, RunCtx};
use crate::measure::phases::PhaseKind;
use crate::measure::{describe_exit, rusage, TaskError, TaskRecord};
use crate::os::process;

pub(super) const ENTRY: Entry = Entry {
    name: "fork",
    takes_workers: false,
    help:
        "one process per task with fork(2) (copy-on-write memory; needs a single-threaded parent)",
    build: |_| Box::new(Fork),
};

/// One forked process per task.
pub struct Fork;

fn write_all_fd(fd: i32, bytes: &[u8]) {
    let mut done = 0;
    while done < bytes.len() {
        // SAFETY: writing from a live buffer to an open descriptor.
        let n = unsafe { libc::write(fd, bytes[done..].as_ptr().cast(), bytes.len() - done) };
        if n <= 0 {
            return;
        }
        done += n as usize;
    }
}

/// Reads whatever the pipe holds now (it is non-blocking) onto `buf`.
fn drain(fd: i32, buf: &mut Vec<u8>) {
    let mut chunk = [0u8; 16 << 10];
    loop {
        // SAFETY: reading into a live stack buffer of the length given, from our pipe.
        let n = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
        if n <= 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n as usize]);
    }
}

/// Moves every complete line of `buf` into `records` (by task index), keeping a partial one.
fn take_lines(buf: &mut Vec<u8>, records: &mut [Option<TaskRecord>]) {
    let Some(last) = buf.iter().rposition(|&b| b == b'\n') else {
        return;
    };
    let text = String::from_utf8_lossy(&buf[..=last]).into_owned();
    buf.drain(..=last);
    for line in text.lines() {
        if let Some(rec) = TaskRecord::from_line(line) {
            if let Some(slot) = records.get_mut(rec.index()) {
                *slot = Some(rec);
            }
        }
    }
}

/// Reaps each child whose record has come (it is exiting: the wait is short), recording a
/// traced task's process exit, and keeps the others.
fn reap_reported(children: &mut Vec<(libc::pid_t, usize)>, records: &[Option<TaskRecord>]) {
    children.retain(|&(pid, k)| {
        let Some(rec) = &records[k] else {
            return true;
        };
        let _ = rusage::wait_child(pid);
        if let Some(task) = crate::measure::phases::task(k) {
            task.record(
                PhaseKind::ProcessExit,
                rec.end_ns,
                crate::measure::mono_ns(),
            );
        }
        false
    });
}

/// Sets or clears `O_NONBLOCK` on `fd`.
fn set_nonblocking(fd: i32, on: bool) {
    // SAFETY: F_GETFL/F_SETFL on our own open pipe descriptor.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            let flags = if on {
                flags | libc::O_NONBLOCK
            } else {
                flags & !libc::O_NONBLOCK
            };
            libc::fcntl(fd, libc::F_SETFL, flags);
        }
    }
}

impl Model for Fork {
    fn spec(&self) -> String {
        "fork".into()
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
        match process::thread_count() {
            Some(1) => {}
            other => {
                return ModelOutcome {
                    error: Some(format!(
                        "fork needs a single-threaded parent, this one has {} threads",
                        other.map_or("an unknown number of".into(), |n| n.to_string())
                    )),
                    ..Default::default()
                }
            }
        }
        let (read_end, write_end) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
            Ok(p) => p,
            Err(e) => {
                return ModelOutcome {
                    error: Some(format!("could not create a pipe: {e}")),
                    ..Default::default()
                }
            }
        };
        let mut children: Vec<(libc::pid_t, usize)> = Vec::with_capacity(ctx.tasks);
        let mut records: Vec<Option<TaskRecord>> = vec![None; ctx.tasks];
        let mut error = None;
        let mut created = 0;
        // The only thread forks every child and reaps every one below: it outlives them, as
        // their death-with-parent signal requires.
        let parent = std::process::id() as libc::pid_t;
        let fork_one = |i: usize,
                        children: &mut Vec<(libc::pid_t, usize)>,
                        error: &mut Option<String>|
         -> bool {
            // A traced task's process starts here; the phase ends where its task starts.
            if let Some(task) = crate::measure::phases::task(i) {
                let now = crate::measure::mono_ns();
                task.record(PhaseKind::ProcessStart, now, now);
            }
            // SAFETY: this process is single-threaded (checked above), so the child may run
            // ordinary Rust code; it leaves with _exit and never returns into our caller.
            match unsafe { nix::unistd::fork() } {
                Ok(ForkResult::Child) => {
                    process::die_with_forking_parent(parent);
                    let rec = run_task(&*ctx.workload, i);
                    let _ = std::io::stdout().flush();
                    write_all_fd(write_end.as_raw_fd(), rec.to_line().as_bytes());
                    // SAFETY: _exit skips the parent's destructors and atexit handlers.
                    unsafe { libc::_exit(0) }
                }
                Ok(ForkResult::Parent { child }) => {
                    children.push((child.as_raw(), i));
                    true
                }
                Err(e) => {
                    *error = Some(format!("could create {i} of {} processes: {e}", ctx.tasks));
                    false
                }
            }
        };
        let mut pending: Vec<u8> = Vec::new();
        match &ctx.arrivals {
            // Open model: one fork per arrival, from this (only) thread, when the task is due.
            // Before each fork the records that arrived are read (the pipe never fills) and
            // their children reaped, so only the tasks in flight hold a process.
            Some(a) => {
                set_nonblocking(read_end.as_raw_fd(), true);
                a.dispatch(|i| {
                    drain(read_end.as_raw_fd(), &mut pending);
                    take_lines(&mut pending, &mut records);
                    reap_reported(&mut children, &records);
                    let ok = fork_one(i, &mut children, &mut error);
                    created += usize::from(ok);
                    ok
                });
                set_nonblocking(read_end.as_raw_fd(), false);
            }
            None => {
                for i in 0..ctx.tasks {
                    if !fork_one(i, &mut children, &mut error) {
                        break;
                    }
                    created += 1;
                }
            }
        }
        drop(write_end);
        // The rest of the records as they come (the pipe ends when every child has exited),
        // each child reaped once its record is read.
        let mut rest = File::from(read_end);
        let mut chunk = vec![0u8; 16 << 10];
        loop {
            match rest.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    pending.extend_from_slice(&chunk[..n]);
                    take_lines(&mut pending, &mut records);
                    reap_reported(&mut children, &records);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        pending.push(b'\n');
        take_lines(&mut pending, &mut records);
        reap_reported(&mut children, &records);
        for (pid, i) in children {
            let ended = rusage::wait_child(pid);
            if records[i].is_none() {
                let why = match ended {
                    Ok(u) => describe_exit(&u),
                    Err(e) => format!("could not wait: {e}"),
                };
                records[i] = Some(TaskRecord::not_started(i, TaskError::new("crash", why)));
            }
        }
        let reason = error.clone().unwrap_or_default();
        let records = records
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                r.unwrap_or_else(|| {
                    TaskRecord::not_started(i, TaskError::new("spawn", reason.clone()))
                })
            })
            .collect();
        ModelOutcome {
            records,
            threads_created: 0,
            processes_created: created,
            error,
        }
    }
}
