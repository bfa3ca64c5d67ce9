//! Child processes of our own binary: they read their request from file descriptor 4 (never
//! from argv, which every local user can read with `ps`) and report back over a pipe on file
//! descriptor 3, leaving their stdout and stderr free (the `mail` workload may print on
//! stdout). And every process we start dies with the thread that started it.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// The descriptor on which a child writes its report.
pub const REPORT_FD: i32 = 3;

/// The descriptor from which a child reads its request.
pub const REQUEST_FD: i32 = 4;

/// The descriptor on which a child finds the memory it shares with its parent (a memfd the
/// parent maps too): a `__run` child its counter page, when its request says it has one
/// (`measure::live::CounterPage`); the worker of `concur jobs work` its job slots
/// (`jobs::slots`).
pub const PAGE_FD: i32 = 5;

/// Set in the environment of an external program (a study's `--peer` or `--classic` row) to
/// [`PAGE_FD`], where it finds a counter page as a `__run` child does: concur's own floor
/// program (`concur classic tokio-tasks`) counts its tasks into it, so that the study samples
/// its tree at the moments it samples a model's; other programs ignore the variable and the
/// descriptor.
pub const COUNTER_FD_ENV: &str = "CONCUR_COUNTER_FD";

/// Hands `counters` to the program `cmd` starts, on its [`PAGE_FD`], and says so in its
/// environment ([`COUNTER_FD_ENV`]).
pub fn pass_counters(cmd: &mut Command, counters: BorrowedFd<'_>) {
    let cfd = counters.as_raw_fd();
    cmd.env(COUNTER_FD_ENV, PAGE_FD.to_string());
    // SAFETY: the closure runs between fork and exec and only calls async-signal-safe
    // functions (fcntl, dup2) on a descriptor that exists in the child.
    unsafe {
        cmd.pre_exec(move || place(lift(cfd)?, PAGE_FD));
    }
}

/// Descriptors below this are left alone while [`spawn_with_report`] moves descriptors into
/// place (stdio, fd 3, 4 and 5).
const FIRST_FREE_FD: i32 = 10;

/// A file holding `bytes`, positioned at its start, that no other process can open by name:
/// a memfd, or where memfds are missing an unlinked file of mode 0600 in the temporary
/// directory. A file rather than a pipe, so the whole request is there before the child
/// starts, whatever its size, and the parent never blocks writing it.
pub fn request_file(bytes: &[u8]) -> io::Result<File> {
    let mut f = memfd().or_else(|_| unlinked_temp_file())?;
    f.write_all(bytes)?;
    f.rewind()?;
    Ok(f)
}

fn memfd() -> io::Result<File> {
    // SAFETY: the name is a NUL-terminated literal; a non-negative result is a descriptor that
    // nothing else owns, so the File may take it.
    unsafe {
        let fd = libc::memfd_create(c"concur-request".as_ptr(), libc::MFD_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(File::from_raw_fd(fd))
    }
}

/// A new file of mode 0600 in the temporary directory, already unlinked: no other process
/// can open it by name.
pub(super) fn unlinked_temp_file() -> io::Result<File> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("concur-request-{}-{n}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

/// Spawns `cmd` with a fresh pipe's write end as its fd 3 and, when given, `request` as its
/// fd 4 and `page` (memory shared with it) as its fd 5; returns the child and the pipe's read
/// end.
pub fn spawn_with_report(
    cmd: &mut Command,
    request: Option<&File>,
    page: Option<BorrowedFd<'_>>,
) -> io::Result<(Child, File)> {
    let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let wfd = write_end.as_raw_fd();
    let rfd = request.map(|f| f.as_raw_fd());
    let pfd = page.map(|f| f.as_raw_fd());
    // SAFETY: the closure runs between fork and exec and only calls async-signal-safe
    // functions (fcntl, dup2) on descriptors that exist in the child.
    unsafe {
        cmd.pre_exec(move || {
            // Copy every source above the targets first: a source may itself sit on fd 3 or
            // 4, where moving the other one into place would clobber it.
            let report = lift(wfd)?;
            let request = rfd.map(lift).transpose()?;
            let page = pfd.map(lift).transpose()?;
            place(report, REPORT_FD)?;
            if let Some(r) = request {
                place(r, REQUEST_FD)?;
            }
            if let Some(p) = page {
                place(p, PAGE_FD)?;
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    drop(write_end);
    Ok((child, File::from(read_end)))
}

/// In a child between fork and exec: a close-on-exec copy of `fd` at or above
/// [`FIRST_FREE_FD`]. Async-signal-safe.
fn lift(fd: RawFd) -> io::Result<RawFd> {
    // SAFETY: F_DUPFD_CLOEXEC only creates a descriptor; `fd` is open in the child.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, FIRST_FREE_FD) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(copy)
}

/// In a child between fork and exec: `fd` copied onto `target`, open across exec. dup2
/// clears close-on-exec on the copy. Async-signal-safe.
fn place(fd: RawFd, target: RawFd) -> io::Result<()> {
    // SAFETY: both descriptors are plain integers in the child's table; dup2 replaces target.
    if unsafe { libc::dup2(fd, target) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The error a hidden command gives when it was not started by concur (no fd 3 or fd 4).
fn by_hand(what: &str, fd: i32) -> io::Error {
    io::Error::other(format!(
        "no {what} on fd {fd}: this command is run by concur itself, not by hand"
    ))
}

/// In a child started by [`spawn_with_report`]: reads the whole request from fd 4 and closes
/// it (so nothing the child starts inherits it), or an error saying that this hidden command
/// is only for concur's own use.
pub fn take_request() -> io::Result<String> {
    // SAFETY: F_GETFD only inspects the descriptor table.
    if unsafe { libc::fcntl(REQUEST_FD, libc::F_GETFD) } < 0 {
        return Err(by_hand("request", REQUEST_FD));
    }
    // SAFETY: fd 4 is open (checked above) and nothing else in this process owns it; the File
    // closes it when dropped.
    let mut f = unsafe { File::from_raw_fd(REQUEST_FD) };
    let mut text = String::new();
    f.read_to_string(&mut text)?;
    Ok(text)
}

/// In a child started by [`spawn_with_report`]: the request on fd 4, read from its start
/// without consuming or closing it (a library user's binary holds several labs, and only the
/// one that owns the request's workload takes it with [`take_request`]).
pub fn peek_request() -> io::Result<String> {
    // SAFETY: F_GETFD only inspects the descriptor table.
    if unsafe { libc::fcntl(REQUEST_FD, libc::F_GETFD) } < 0 {
        return Err(by_hand("request", REQUEST_FD));
    }
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        // SAFETY: pread writes at most buf.len() bytes into our buffer and leaves the
        // descriptor's offset alone; fd 4 is open (checked above).
        let n = unsafe {
            libc::pread(
                REQUEST_FD,
                buf.as_mut_ptr().cast(),
                buf.len(),
                bytes.len() as libc::off_t,
            )
        };
        match n {
            0 => break,
            n if n > 0 => bytes.extend_from_slice(&buf[..n as usize]),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    String::from_utf8(bytes).map_err(io::Error::other)
}

/// Makes the child that `cmd` starts die (SIGKILL) when the thread that spawns it ends, so
/// that no child outlives a killed parent (Linux's `PR_SET_PDEATHSIG`; elsewhere nothing).
/// The death signal follows the spawning *thread*, not the process: spawn from a thread
/// that outlives the child, and wait for the child on it.
pub fn die_with_parent(cmd: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and only calls prctl and getppid, which
    // are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if !tie_to(parent) {
                return Err(io::Error::other("the parent died before the child started"));
            }
            Ok(())
        });
    }
}

/// In a child just forked from process `parent` (no exec follows): dies with SIGKILL when
/// the forking thread ends; if the parent is gone already, exits at once. Async-signal-safe.
pub fn die_with_forking_parent(parent: libc::pid_t) {
    if !tie_to(parent) {
        // SAFETY: _exit ends this forked child without running the parent's destructors.
        unsafe { libc::_exit(1) }
    }
}

/// Asks for SIGKILL at the parent thread's end; false when the parent `parent` already died
/// (then we were re-parented before the request took effect, and it would never fire).
fn tie_to(parent: libc::pid_t) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and changes nothing else
        // (should it fail, the child merely runs untied, as it did before); getppid cannot fail.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            libc::getppid() == parent
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = parent;
        true
    }
}

/// In a child started by [`spawn_with_report`]: the report pipe, or an error saying that this
/// hidden command is only for concur's own use.
pub fn report_pipe() -> io::Result<File> {
    // SAFETY: F_GETFD only inspects the descriptor table.
    if unsafe { libc::fcntl(REPORT_FD, libc::F_GETFD) } < 0 {
        return Err(by_hand("report pipe", REPORT_FD));
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
