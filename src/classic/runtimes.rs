//! The `tasks` study's programs in other runtimes, shipped in the binary beside the classic
//! ones and run by the user's own toolchains found on `PATH`: Go's goroutines, Node.js's
//! promises, Java's threads (and virtual threads with a JDK of 21 or later), Elixir's
//! processes, CPython's asyncio and threads, MRI's threads, and the floor of concur's own
//! runtime (a bare tokio program, [`super::tokio_tasks`]). Each prints the `CONCUR` line of
//! an external cell with its own wall, start and wake-ups, so its rows carry the same columns
//! as concur's. A missing toolchain leaves its rows out with a note naming the Debian package
//! (`concur classic install` installs them all).

use std::path::Path;
use std::process::Command;

use super::{on_path, output, python, quoted, Classic, INSTALL};
use crate::study::plan::PeerRequest;
use crate::study::presets;

/// The Debian packages of the other runtimes.
pub const APT_PACKAGES: &[&str] = &["golang-go", "nodejs", "openjdk-17-jdk-headless", "elixir"];

/// Task counts past which a thread-per-task program is not tried (a thread each: this
/// machine's limit is about 32,000, and concur's own `thread` row shows how it fails).
const THREADS_MAX: usize = 10_000;

/// The JDK feature version from `javac -version`'s `javac 17.0.21` (or `javac 1.8.0_392`).
fn jdk_feature(version: &str) -> Option<u32> {
    let v = version.split_whitespace().nth(1)?;
    let mut parts = v.split(['.', '_', '-', '+']);
    let first: u32 = parts.next()?.parse().ok()?;
    if first == 1 {
        parts.next()?.parse().ok()
    } else {
        Some(first)
    }
}

/// Adds the rows of every runtime found, and a note for each one missing.
pub(super) fn tasks(c: &mut Classic, quick: bool) {
    let (wait, counts) = presets::tasks_sizes(quick);
    let workload = presets::tasks_workload(wait);
    let wait_ms = wait.as_millis();
    let threads: Vec<usize> = counts
        .iter()
        .copied()
        .filter(|&n| n <= THREADS_MAX)
        .collect();
    let dir = c.dir.path().to_path_buf();
    let mut rows: Vec<(&str, String, &[usize])> = Vec::new();
    let args = format!("--tasks {{tasks}} --wait-ms {wait_ms}");
    let missing = |c: &mut Classic, labels: &str, tool: &str, package: &str| {
        c.notes.push(format!(
            "runtimes: {labels} left out: {tool} is not on PATH (apt-get install {package}, or {INSTALL})"
        ));
    };

    match std::env::current_exe() {
        Ok(exe) => {
            rows.push((
                "rust:tokio-bare",
                format!("{} classic tokio-tasks {args}", quoted(&exe)),
                counts,
            ));
            c.notes.push(
                "runtimes: rust:tokio-bare is the floor of concur's own runtime: a bare tokio program (tokio::spawn, tokio::time::sleep) in concur's binary, without its models or recorders".into(),
            );
        }
        Err(e) => c.notes.push(format!(
            "runtimes: rust:tokio-bare left out: this binary's path is unknown ({e})"
        )),
    }

    match on_path("go") {
        None => missing(c, "go:goroutines", "go", "golang-go"),
        Some(go) => {
            let bin = dir.join("tasks-go");
            let built = output(
                Command::new(&go)
                    .arg("build")
                    .arg("-o")
                    .arg(&bin)
                    .arg(dir.join("tasks.go"))
                    .current_dir(&dir),
            );
            match built {
                Ok(_) => {
                    rows.push(("go:goroutines", format!("{} {args}", quoted(&bin)), counts));
                    version_note(c, "go:goroutines", &go, Command::new(&go).arg("version"));
                }
                Err(why) => c.notes.push(format!(
                    "runtimes: go:goroutines left out: go build failed ({why})"
                )),
            }
        }
    }

    match on_path("node") {
        None => missing(c, "node:promises", "node", "nodejs"),
        Some(node) => {
            rows.push((
                "node:promises",
                format!("{} {} {args}", quoted(&node), quoted(&dir.join("tasks.js"))),
                counts,
            ));
            version_note(
                c,
                "node:promises",
                &node,
                Command::new(&node).arg("--version"),
            );
        }
    }

    match (on_path("javac"), on_path("java")) {
        (Some(javac), Some(java)) => {
            let built = output(
                Command::new(&javac)
                    .arg("-d")
                    .arg(&dir)
                    .arg(dir.join("Tasks.java")),
            );
            let version = output(Command::new(&javac).arg("-version")).unwrap_or_default();
            match built {
                Ok(_) => {
                    let cmd = format!("{} -cp {} Tasks {args}", quoted(&java), quoted(&dir));
                    rows.push(("java:threads", cmd.clone(), &threads));
                    if jdk_feature(&version).is_some_and(|v| v >= 21) {
                        rows.push(("java:virtual", format!("{cmd} --virtual"), counts));
                    } else {
                        c.notes.push(format!(
                            "runtimes: java:virtual left out: virtual threads need a JDK of 21 or later, and {} is {version}",
                            javac.display()
                        ));
                    }
                    c.notes
                        .push(format!("runtimes: java: {version} ({})", java.display()));
                }
                Err(why) => c.notes.push(format!(
                    "runtimes: java rows left out: javac failed ({why})"
                )),
            }
        }
        _ => missing(
            c,
            "java:threads, java:virtual",
            "java or javac",
            "openjdk-17-jdk-headless",
        ),
    }

    match on_path("elixir") {
        None => missing(c, "elixir:processes", "elixir", "elixir"),
        Some(elixir) => {
            // Erlang's default limit is 262,144 processes: raised past the study's largest N.
            rows.push((
                "elixir:processes",
                format!(
                    "{} --erl '+P 2000000' {} {args}",
                    quoted(&elixir),
                    quoted(&dir.join("tasks.exs"))
                ),
                counts,
            ));
            version_note(
                c,
                "elixir:processes",
                &elixir,
                Command::new(&elixir).arg("--version"),
            );
        }
    }

    match python() {
        None => missing(c, "py:asyncio, py:threads", "python3", "python3"),
        Some(py) => {
            let script = quoted(&dir.join("tasks.py"));
            let base = format!("{} {script}", quoted(&py));
            rows.push(("py:asyncio", format!("{base} asyncio {args}"), counts));
            rows.push(("py:threads", format!("{base} threads {args}"), &threads));
            version_note(
                c,
                "py:asyncio, py:threads",
                &py,
                Command::new(&py).arg("--version"),
            );
        }
    }

    match on_path("ruby") {
        None => missing(c, "rb:threads", "ruby", "ruby"),
        Some(ruby) => {
            rows.push((
                "rb:threads",
                format!("{} {} {args}", quoted(&ruby), quoted(&dir.join("tasks.rb"))),
                &threads,
            ));
            version_note(c, "rb:threads", &ruby, Command::new(&ruby).arg("--version"));
            c.notes.push(
                "runtimes: rb:fibers left out: MRI has no fiber scheduler of its own (the async gem brings one)".into(),
            );
        }
    }

    if threads.len() < counts.len() {
        c.notes.push(format!(
            "runtimes: the thread-per-task programs (java:threads, py:threads, rb:threads) stop at {THREADS_MAX} tasks; concur's thread row shows where threads run out"
        ));
    }
    c.peers
        .extend(rows.into_iter().map(|(label, command, tasks)| PeerRequest {
            label: label.into(),
            command,
            workload: Some(workload.clone()),
            gil: false,
            tasks: Some(tasks.to_vec()),
            workers: None,
        }));
}

/// A note naming the toolchain's version (the meta line keeps the notes).
fn version_note(c: &mut Classic, labels: &str, tool: &Path, cmd: &mut Command) {
    let v = output(cmd).unwrap_or_else(|why| format!("version unknown: {why}"));
    let v = v.lines().last().unwrap_or("").trim();
    c.notes
        .push(format!("runtimes: {labels}: {v} ({})", tool.display()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jdk_feature_version_is_read_from_javac() {
        assert_eq!(jdk_feature("javac 17.0.21"), Some(17));
        assert_eq!(jdk_feature("javac 21"), Some(21));
        assert_eq!(jdk_feature("javac 1.8.0_392"), Some(8));
        assert_eq!(jdk_feature("nonsense"), None);
    }
}
