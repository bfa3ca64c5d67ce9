//! Child processes of our own binary that report back over a pipe on file descriptor 3,
//! leaving their stdout and stderr free (the `mail` workload may print on stdout).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// The descriptor on which a child writes its report.
pub const REPORT_FD: i32 = 3;

/// Spawns `cmd` with a fresh pipe's write end as its fd 3; returns the child and the read end.
pub fn spawn_with_report(cmd: &mut Command) -> io::Result<(Child, File)> {
    let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let wfd = write_end.as_raw_fd();
    // SAFETY: the closure runs between fork and exec and only calls async-signal-safe
    // functions (dup2, fcntl) on descriptors that exist.
    unsafe {
        cmd.pre_exec(move || {
            if wfd != REPORT_FD && libc::dup2(wfd, REPORT_FD) < 0 {
                return Err(io::Error::last_os_error());
            }
            // dup2 clears close-on-exec on the copy; when the pipe already was fd 3 clear it.
            if libc::fcntl(REPORT_FD, libc::F_SETFD, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    drop(write_end);
    Ok((child, File::from(read_end)))
}

/// In a child started by [`spawn_with_report`]: the report pipe, or an error saying that this
/// hidden command is only for concur's own use.
pub fn report_pipe() -> io::Result<File> {
    // SAFETY: F_GETFD only inspects the descriptor table.
    if unsafe { libc::fcntl(REPORT_FD, libc::F_GETFD) } < 0 {
        return Err(io::Error::other(
            "no report pipe on fd 3: this command is run by concur itself, not by hand",
        ));
    }
    // SAFETY: fd 3 is open (checked above) and nothing else in this process owns it.
    let f = unsafe { File::from_raw_fd(REPORT_FD) };
    // Keep the pipe out of any grandchild we exec.
    // SAFETY: as above.
    unsafe { libc::fcntl(REPORT_FD, libc::F_SETFD, libc::FD_CLOEXEC) };
    Ok(f)
}

/// Raises the soft open-files limit to the hard one, so thousands of child pipes or
/// connections fit; returns the (soft, hard) limits in force afterwards.
pub fn raise_nofile_limit() -> (u64, u64) {
    // SAFETY: getrlimit/setrlimit read and write a struct we own.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return (0, 0);
        }
        if lim.rlim_cur < lim.rlim_max {
            let mut raised = lim;
            raised.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim = raised;
            }
        }
        (lim.rlim_cur, lim.rlim_max)
    }
}

/// The number of threads of this process, from `/proc/self/status`.
pub fn thread_count() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
}
