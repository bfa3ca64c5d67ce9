//! One child's own resource usage from `wait4` (its waited-for descendants included).

use std::time::Duration;

/// How a child ended and what it used.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ChildUsage {
    /// Exit code when it exited normally.
    pub exit_code: Option<i32>,
    /// Signal number when a signal killed it.
    pub signal: Option<i32>,
    /// User CPU seconds.
    pub user_s: f64,
    /// System CPU seconds.
    pub sys_s: f64,
    /// Peak RSS of the largest process (the child or one of its reaped descendants), KiB.
    pub max_rss_kib: u64,
    /// Voluntary context switches.
    pub ctx_voluntary: u64,
    /// Involuntary context switches.
    pub ctx_involuntary: u64,
}

fn tv_secs(tv: libc::timeval) -> f64 {
    Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000).as_secs_f64()
}

/// Waits (blocking) for the child `pid` and returns its status and rusage.
pub fn wait_child(pid: i32) -> std::io::Result<ChildUsage> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; zeroed is a valid value that wait4 overwrites.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: we pass valid pointers to locals; pid names our own child.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    let (exit_code, signal) = if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    };
    Ok(ChildUsage {
        exit_code,
        signal,
        user_s: tv_secs(ru.ru_utime),
        sys_s: tv_secs(ru.ru_stime),
        // Linux reports ru_maxrss in KiB.
        max_rss_kib: ru.ru_maxrss.max(0) as u64,
        ctx_voluntary: ru.ru_nvcsw.max(0) as u64,
        ctx_involuntary: ru.ru_nivcsw.max(0) as u64,
    })
}

/// This process's usage so far (all its threads) plus that of its reaped children, as one
/// figure: what an in-process run is measured by, taken before and after it.
pub fn self_usage() -> ChildUsage {
    let get = |who: libc::c_int| {
        // SAFETY: rusage is plain old data that getrusage overwrites.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to a local; RUSAGE_SELF and RUSAGE_CHILDREN always exist.
        unsafe { libc::getrusage(who, &mut ru) };
        ru
    };
    let (me, kids) = (get(libc::RUSAGE_SELF), get(libc::RUSAGE_CHILDREN));
    ChildUsage {
        exit_code: Some(0),
        signal: None,
        user_s: tv_secs(me.ru_utime) + tv_secs(kids.ru_utime),
        sys_s: tv_secs(me.ru_stime) + tv_secs(kids.ru_stime),
        max_rss_kib: me.ru_maxrss.max(kids.ru_maxrss).max(0) as u64,
        ctx_voluntary: (me.ru_nvcsw + kids.ru_nvcsw).max(0) as u64,
        ctx_involuntary: (me.ru_nivcsw + kids.ru_nivcsw).max(0) as u64,
    }
}

/// What was used between two [`self_usage`] readings (the peak RSS is the later one's).
pub fn usage_between(before: &ChildUsage, after: &ChildUsage) -> ChildUsage {
    ChildUsage {
        exit_code: after.exit_code,
        signal: after.signal,
        user_s: (after.user_s - before.user_s).max(0.0),
        sys_s: (after.sys_s - before.sys_s).max(0.0),
        max_rss_kib: after.max_rss_kib,
        ctx_voluntary: after.ctx_voluntary.saturating_sub(before.ctx_voluntary),
        ctx_involuntary: after.ctx_involuntary.saturating_sub(before.ctx_involuntary),
    }
}

/// A signal's name (`SIGSEGV`), or its number when unknown.
pub fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}
