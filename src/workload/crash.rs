//! `crash:KIND`: a task that fails on purpose, to see (and test) how each model and the runner
//! deal with failure: `panic` (a task error), `abort` and `segv` (the whole run crashes).

use std::sync::Arc;

use super::{Entry, Nature, TaskError, Workload, WorkloadOptions};

pub(super) const ENTRY: Entry = Entry {
    name: "crash",
    usage: "crash:panic|abort|segv",
    help: "fail on purpose: panic (the task fails), abort or segv (the run's process dies)",
    parse,
};

#[derive(Clone, Copy)]
enum Kind {
    Panic,
    Abort,
    Segv,
}

fn parse(args: &str, _: &WorkloadOptions) -> Result<Arc<dyn Workload>, String> {
    let kind = match args {
        "panic" => Kind::Panic,
        "abort" => Kind::Abort,
        "segv" => Kind::Segv,
        _ => {
            return Err(format!(
                "unknown kind '{args}' (allowed: panic, abort, segv)"
            ))
        }
    };
    Ok(Arc::new(Crash { kind }))
}

/// A task that fails.
pub struct Crash {
    kind: Kind,
}

impl Workload for Crash {
    fn spec(&self) -> String {
        let k = match self.kind {
            Kind::Panic => "panic",
            Kind::Abort => "abort",
            Kind::Segv => "segv",
        };
        format!("crash:{k}")
    }
    fn nature(&self) -> Nature {
        Nature::Cpu
    }
    fn task(&self, index: usize) -> Result<u64, TaskError> {
        match self.kind {
            Kind::Panic => panic!("task {index} panicked on purpose"),
            Kind::Abort => std::process::abort(),
            Kind::Segv => {
                // Rust's own SIGSEGV handler ignores a raised (non-fault) signal once and resets
                // the action to the default, so the second one kills the process.
                // SAFETY: raising a signal is always allowed.
                unsafe {
                    libc::raise(libc::SIGSEGV);
                    libc::raise(libc::SIGSEGV);
                }
                Err(TaskError::new("crash", "SIGSEGV was ignored"))
            }
        }
    }
}
