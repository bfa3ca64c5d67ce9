//! One worker process: what `concur jobs work` and a `jobs-procs` run's child run. The backend
//! opened for sharing with other processes, the queues checked, Ctrl-C and SIGTERM turned into
//! a graceful stop, and the lines it prints.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::worker::{work, WorkOptions};
use super::{open, Backend, BackendUrl};
use crate::base::error::{Error, Result};
use crate::os::interrupt::{install_interrupt_handler, interrupted};

/// Opens the backend a command shares with other processes: `memory` lives and dies with one
/// process, so it is refused here (the `jobs-memory:W` model uses it); a Redis password that
/// would cross the network in clear text is warned of on stderr.
pub fn open_shared(url: &BackendUrl) -> Result<Arc<dyn Backend>> {
    if *url == BackendUrl::Memory {
        return Err(Error::usage(
            "backend 'memory' lives inside one process, so separate `concur jobs` commands cannot share it; use sqlite, sqlite:PATH or redis://HOST:PORT/DB (or the jobs-memory:W model)",
        ));
    }
    if let Some(w) = url.cleartext_password_warning("--jobs-backend") {
        crate::os::terminal::Terminal::new(crate::os::terminal::Feedback::Lines).warning(w);
    }
    open(url)
}

/// Checks a queue name (Redis keys embed it after a `:`).
pub fn check_queue(q: &str) -> Result<()> {
    if q.is_empty() || q.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::flag(
            "--queue",
            format!("bad queue '{q}': a queue name is non-empty and has no spaces"),
        ));
    }
    Ok(())
}

/// Checks `concur jobs work`'s queues and `-c`.
pub fn check_work(queues: &[String], concurrency: usize) -> Result<()> {
    for q in queues {
        check_queue(q)?;
    }
    if concurrency == 0 || concurrency > 10_000 {
        return Err(Error::flag(
            "-c",
            format!("-c '{concurrency}' must be from 1 to 10000"),
        ));
    }
    Ok(())
}

/// `concur jobs work`'s worker: runs until SIGTERM or Ctrl-C (or the queues drain, with
/// `until_empty`), then stops gracefully.
pub fn work_main(url: &BackendUrl, opts: &WorkOptions) -> Result<i32> {
    check_work(&opts.queues, opts.concurrency)?;
    let backend = open_shared(url)?;
    install_interrupt_handler();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || loop {
        if interrupted() {
            flag.store(true, Ordering::SeqCst);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    });
    eprintln!(
        "concur jobs work: {} threads on {} ({})",
        opts.concurrency,
        opts.queues.join(", "),
        backend.describe()
    );
    let s = work(backend, opts, &stop)?;
    eprintln!(
        "concur jobs work: stopped: {} processed, {} failed, {} returned to their queues",
        s.processed, s.failed, s.returned
    );
    Ok(0)
}
