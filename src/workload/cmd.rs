//! `cmd:COMMAND ARGS…`: one task is one run of the user's command. The text after `cmd:` is
//! split into words as a POSIX shell splits them (quotes, backslashes; no expansions), and no
//! shell runs unless `--shell` asks for `sh -c`. `{i}` becomes the task index and `{n}` the
//! task count. A task's bytes are what the command wrote on stdout; a non-zero exit is a
//! failure of kind `exit:CODE`, a signal `signal:NAME`, each with the first line of stderr.
//!
//! Every command is started from the thread that waits for it and dies with it
//! ([`crate::os::process::die_with_parent`]), and stays in the run's process group, so the
//! runner's kill at `--timeout` takes the commands' whole trees with the run.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, OnceLock};

use super::{Entry, Nature, TaskError, TaskFuture, Workload, WorkloadOptions};
use crate::measure::rusage::signal_name;

pub(super) const ENTRY: Entry = Entry {
    name: "cmd",
    usage: "cmd:COMMAND",
    help: "run COMMAND ARGS… once per task ({i} task index, {n} task count; --shell for sh -c); bytes = its stdout",
    parse,
};

/// How much of a failing command's stderr is kept to find its first line.
const STDERR_KEEP: usize = 4096;

fn parse(args: &str, opts: &WorkloadOptions) -> Result<Arc<dyn Workload>, String> {
    if args.trim().is_empty() {
        return Err("missing COMMAND".into());
    }
    let argv = if opts.cmd_shell {
        vec!["sh".to_string(), "-c".to_string(), args.to_string()]
    } else {
        let words = shlex::split(args)
            .ok_or_else(|| format!("'{args}' has an unclosed quote or a trailing backslash"))?;
        if words.is_empty() {
            return Err("missing COMMAND".into());
        }
        words
    };
    Ok(Arc::new(Cmd {
        text: args.to_string(),
        program: OnceLock::new(),
        argv,
        tasks: opts.cell_tasks.unwrap_or(0),
        output: opts.cmd_output.clone(),
    }))
}

/// The program's path: a name with a `/` as given, else the first executable of that name on
/// `PATH`; the reason when there is none, so the bind step refuses it before any run.
fn find_program(name: &str) -> Result<PathBuf, String> {
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        return match std::fs::metadata(&p) {
            Err(_) => Err(format!("program '{name}' does not exist")),
            Ok(_) if !executable(&p) => Err(format!("program '{name}' is not executable")),
            Ok(_) => Ok(p),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| executable(p))
        .ok_or_else(|| format!("program '{name}' is not found on PATH"))
}

/// One run of a command per task.
pub struct Cmd {
    /// The text after `cmd:`, exactly as the user typed it.
    text: String,
    /// The resolved program, or why there is none: looked up once, by the bind step's
    /// [`Workload::acquire`] or else by the first task.
    program: OnceLock<Result<PathBuf, String>>,
    /// The words, program first; `{i}` and `{n}` not yet substituted.
    argv: Vec<String>,
    /// The cell's task count, for `{n}`.
    tasks: usize,
    /// `--cmd-output DIR`: keep each task's stdout and stderr there.
    output: Option<PathBuf>,
}

/// Where a task's stdout and stderr go: pipes that the task reads, or files it keeps.
enum Sink {
    Pipes,
    Files { out: PathBuf, err: PathBuf },
}

impl Cmd {
    /// The program this command runs (see [`find_program`]), looked up once.
    fn program(&self) -> Result<&Path, String> {
        match self.program.get_or_init(|| find_program(&self.argv[0])) {
            Ok(p) => Ok(p),
            Err(why) => Err(why.clone()),
        }
    }

    /// The command of task `index`, with its stdio set up, dying with the calling thread.
    fn command(&self, index: usize) -> io::Result<(Command, Sink)> {
        let subst = |w: &str| {
            w.replace("{i}", &index.to_string())
                .replace("{n}", &self.tasks.to_string())
        };
        let program = self
            .program()
            .map_err(|why| io::Error::new(io::ErrorKind::NotFound, why))?;
        let mut cmd = Command::new(program);
        cmd.arg0(&self.argv[0]);
        cmd.args(self.argv[1..].iter().map(|w| subst(w)));
        cmd.stdin(Stdio::null());
        for secret in crate::base::secret::CHILD_ENV_SECRETS {
            cmd.env_remove(secret);
        }
        let sink = match &self.output {
            None => {
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
                Sink::Pipes
            }
            Some(dir) => {
                let out = dir.join(format!("task-{index}.out"));
                let err = dir.join(format!("task-{index}.err"));
                cmd.stdout(File::create(&out)?).stderr(File::create(&err)?);
                Sink::Files { out, err }
            }
        };
        crate::os::process::die_with_parent(&mut cmd);
        Ok((cmd, sink))
    }
}

/// The task's result from how the command ended, its stdout bytes and its stderr.
fn verdict(status: ExitStatus, bytes: u64, stderr: &[u8]) -> Result<u64, TaskError> {
    let first = String::from_utf8_lossy(stderr)
        .lines()
        .find(|l| !l.trim().is_empty())
        .map(str::to_string);
    let (kind, how) = match (status.code(), status.signal()) {
        (Some(0), _) => return Ok(bytes),
        (Some(code), _) => (format!("exit:{code}"), format!("exited with code {code}")),
        (None, Some(sig)) => {
            let name = signal_name(sig);
            (format!("signal:{name}"), format!("killed by {name}"))
        }
        (None, None) => ("exit".to_string(), "ended without a status".to_string()),
    };
    Err(TaskError::new(&kind, first.unwrap_or(how)))
}

fn spawn_error(e: io::Error) -> TaskError {
    TaskError::new("spawn", format!("could not start the command: {e}"))
}

/// What a task kept in files: its stdout's size and the head of its stderr.
fn from_files(out: &Path, err: &Path) -> (u64, Vec<u8>) {
    let bytes = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    let mut head = Vec::new();
    if let Ok(f) = File::open(err) {
        let _ = f.take(STDERR_KEEP as u64).read_to_end(&mut head);
    }
    (bytes, head)
}

/// Reads a child's stdout (counted) and stderr (its head kept) to their ends on the calling
/// thread, with poll(2), so a task needs no second thread and neither pipe can fill up.
fn drain(stdout: std::process::ChildStdout, stderr: std::process::ChildStderr) -> (u64, Vec<u8>) {
    let mut pipes = [
        Some(File::from(std::os::fd::OwnedFd::from(stdout))),
        Some(File::from(std::os::fd::OwnedFd::from(stderr))),
    ];
    let mut bytes = 0u64;
    let mut head = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while pipes.iter().any(Option::is_some) {
        let mut fds: Vec<libc::pollfd> = pipes
            .iter()
            .map(|p| libc::pollfd {
                fd: p.as_ref().map_or(-1, |f| f.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a valid array of pollfd of the given length; negative fds are
        // ignored by poll(2).
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        for (which, (slot, fd)) in pipes.iter_mut().zip(&fds).enumerate() {
            if fd.revents == 0 {
                continue;
            }
            let Some(f) = slot.as_mut() else { continue };
            match f.read(&mut buf) {
                Ok(0) | Err(_) => *slot = None,
                Ok(k) if which == 0 => bytes += k as u64,
                Ok(k) => {
                    let room = STDERR_KEEP.saturating_sub(head.len());
                    head.extend_from_slice(&buf[..k.min(room)]);
                }
            }
        }
    }
    (bytes, head)
}

impl Workload for Cmd {
    fn spec(&self) -> String {
        format!("cmd:{}", self.text)
    }
    fn nature(&self) -> Nature {
        Nature::Measured
    }
    fn gil_governs(&self) -> bool {
        false
    }
    fn acquire(&self) -> Result<(), String> {
        self.program().map(drop)
    }
    fn task(&self, index: usize) -> Result<u64, TaskError> {
        let (mut cmd, sink) = self.command(index).map_err(spawn_error)?;
        let mut child = cmd.spawn().map_err(spawn_error)?;
        let (bytes, stderr) = match (&sink, child.stdout.take(), child.stderr.take()) {
            (Sink::Pipes, Some(out), Some(err)) => drain(out, err),
            _ => (0, Vec::new()),
        };
        let status = child
            .wait()
            .map_err(|e| TaskError::new("wait", e.to_string()))?;
        let (bytes, stderr) = match &sink {
            Sink::Pipes => (bytes, stderr),
            Sink::Files { out, err } => from_files(out, err),
        };
        verdict(status, bytes, &stderr)
    }
    fn task_async(self: Arc<Self>, index: usize) -> TaskFuture {
        Box::pin(async move {
            use tokio::io::AsyncReadExt;
            let (cmd, sink) = self.command(index).map_err(spawn_error)?;
            // tokio waits for the exit on its own driver: no blocking-pool thread per child.
            let mut child = tokio::process::Command::from(cmd)
                .spawn()
                .map_err(spawn_error)?;
            let stdout = child.stdout.take();
            let stderr = child.stderr.take();
            let count = async move {
                let mut n = 0u64;
                if let Some(mut s) = stdout {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(k) = s.read(&mut buf).await {
                        if k == 0 {
                            break;
                        }
                        n += k as u64;
                    }
                }
                n
            };
            let head = async move {
                let mut h = Vec::new();
                if let Some(s) = stderr {
                    let _ = s.take(STDERR_KEEP as u64).read_to_end(&mut h).await;
                }
                h
            };
            let (bytes, stderr, status) = tokio::join!(count, head, child.wait());
            let status = status.map_err(|e| TaskError::new("wait", e.to_string()))?;
            let (bytes, stderr) = match &sink {
                Sink::Pipes => (bytes, stderr),
                Sink::Files { out, err } => from_files(out, err),
            };
            verdict(status, bytes, &stderr)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(text: &str) -> Result<Arc<dyn Workload>, String> {
        parse(
            text,
            &WorkloadOptions {
                cell_tasks: Some(7),
                ..Default::default()
            },
        )
    }

    /// Why `text` is refused: by its parse (syntax), else by acquire (the program).
    fn refused(text: &str) -> String {
        match cmd(text) {
            Err(e) => e,
            Ok(w) => w.acquire().err().unwrap_or_default(),
        }
    }

    #[test]
    fn words_split_like_a_shell_and_braces_are_substituted() {
        let w = cmd("printf '%s-%s' {i} \"{n}\"").unwrap();
        assert_eq!(w.spec(), "cmd:printf '%s-%s' {i} \"{n}\"");
        assert_eq!(w.task(3).unwrap(), "3-7".len() as u64);
    }

    #[test]
    fn failures_carry_the_code_or_signal_and_the_first_stderr_line() {
        let o = WorkloadOptions {
            cmd_shell: true,
            ..Default::default()
        };
        let w = parse("echo first >&2; echo second >&2; exit 3", &o).unwrap();
        let e = w.task(0).unwrap_err();
        assert_eq!((e.kind.as_str(), e.message.as_str()), ("exit:3", "first"));
        let w = parse("kill -TERM $$", &o).unwrap();
        assert_eq!(w.task(0).unwrap_err().kind, "signal:SIGTERM");
    }

    #[test]
    fn missing_programs_and_bad_quotes_are_refused() {
        assert!(refused("no-such-program-here x").contains("not found on PATH"));
        assert!(refused("/nonexistent/prog").contains("does not exist"));
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(refused(plain.to_str().unwrap()).contains("not executable"));
        assert!(refused("echo 'open").contains("unclosed quote"));
        assert!(refused("  ").contains("missing COMMAND"));
    }
}
