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
use crate::plan::{presets, ClassicSizes, PeerRequest};

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

    if let Some(bin) = go_build(c, "go:goroutines", "tasks.go") {
        rows.push(("go:goroutines", format!("{} {args}", quoted(&bin)), counts));
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

    if let Some(java) = java_build(c, "java:threads, java:virtual", "Tasks.java") {
        let cmd = format!("{} Tasks {args}", java.command);
        rows.push(("java:threads", cmd.clone(), &threads));
        if jdk_feature(&java.version).is_some_and(|v| v >= 21) {
            rows.push(("java:virtual", format!("{cmd} --virtual"), counts));
        } else {
            c.notes.push(format!(
                "runtimes: java:virtual left out: virtual threads need a JDK of 21 or later, and this one is {}",
                java.version
            ));
        }
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

/// Builds the Go program `file` of the classic folder with the `go` on `PATH`: its binary, or
/// a note saying why `labels` are left out (no Go, or a failed build). The version is a note.
fn go_build(c: &mut Classic, labels: &str, file: &str) -> Option<std::path::PathBuf> {
    let Some(go) = on_path("go") else {
        missing(c, labels, "go", "golang-go");
        return None;
    };
    let dir = c.dir.path().to_path_buf();
    let bin = dir.join(format!("{}-go", file.trim_end_matches(".go")));
    let built = output(
        Command::new(&go)
            .arg("build")
            .arg("-o")
            .arg(&bin)
            .arg(dir.join(file))
            .current_dir(&dir),
    );
    match built {
        Ok(_) => {
            version_note(c, labels, &go, Command::new(&go).arg("version"));
            Some(bin)
        }
        Err(why) => {
            c.notes.push(format!(
                "runtimes: {labels} left out: go build failed ({why})"
            ));
            None
        }
    }
}

/// A Java program compiled into the classic folder: how to start its JVM there, and the
/// JDK's version.
struct JavaBuilt {
    /// `java -cp FOLDER`, quoted for `sh -c`; the class name and its arguments follow.
    command: String,
    /// `javac -version`'s answer (`javac 17.0.21`).
    version: String,
}

/// Compiles the Java program `file` of the classic folder with the `javac` on `PATH`, or
/// notes why `labels` are left out (no JDK, or a failed compile). The version is a note.
fn java_build(c: &mut Classic, labels: &str, file: &str) -> Option<JavaBuilt> {
    let (Some(javac), Some(java)) = (on_path("javac"), on_path("java")) else {
        missing(c, labels, "java or javac", "openjdk-17-jdk-headless");
        return None;
    };
    let dir = c.dir.path().to_path_buf();
    let built = output(Command::new(&javac).arg("-d").arg(&dir).arg(dir.join(file)));
    if let Err(why) = built {
        c.notes
            .push(format!("runtimes: {labels} left out: javac failed ({why})"));
        return None;
    }
    let version = output(Command::new(&javac).arg("-version")).unwrap_or_default();
    c.notes.push(format!(
        "runtimes: {labels}: {version} ({})",
        java.display()
    ));
    Some(JavaBuilt {
        command: format!("{} -cp {}", quoted(&java), quoted(&dir)),
        version,
    })
}

/// `crawl --classic`: Go's net/http with a goroutine per request, Java's HttpClient with a
/// semaphore of C and Node.js's fetch with C async workers, beside CPython's clients, against
/// the study's server (trusting `--cacert`'s CA as concur's clients do; `-k` does not reach
/// them).
pub(super) fn crawl(c: &mut Classic, quick: bool, gil: bool, o: &ClassicSizes) {
    let (n, _) = presets::crawl_sizes(quick, o.full);
    let dir = c.dir.path().to_path_buf();
    let args = "--url {url} -n {tasks} -c {workers}";
    // Go's and Java's clients take the CA to trust as a flag.
    let cafile = o
        .cacert
        .as_deref()
        .map(|ca| format!(" --cafile {}", quoted(ca)))
        .unwrap_or_default();
    let mut rows = Vec::new();
    if let Some(bin) = go_build(c, "go:goroutines:100", "crawl.go") {
        rows.push((
            "go:goroutines:100",
            format!("{} {args}{cafile}", quoted(&bin)),
        ));
    }
    if let Some(java) = java_build(c, "java:httpclient:100", "Crawl.java") {
        rows.push((
            "java:httpclient:100",
            format!("{} Crawl {args}{cafile}", java.command),
        ));
    }
    match on_path("node") {
        None => missing(c, "node:fetch:100", "node", "nodejs"),
        Some(node) => {
            // Node reads the CA it trusts besides its own from its environment, at start-up.
            let ca = o
                .cacert
                .as_deref()
                .map(|ca| format!("NODE_EXTRA_CA_CERTS={} ", quoted(ca)))
                .unwrap_or_default();
            rows.push((
                "node:fetch:100",
                format!(
                    "{ca}{} {} {args}",
                    quoted(&node),
                    quoted(&dir.join("crawl.js"))
                ),
            ));
            version_note(
                c,
                "node:fetch:100",
                &node,
                Command::new(&node).arg("--version"),
            );
        }
    }
    if o.insecure && !rows.is_empty() {
        c.notes.push(
            "runtimes: the go:, java: and node: crawl clients verify the server's certificate: -k does not reach them (give its CA with --cacert)".into(),
        );
    }
    for (label, command) in rows {
        c.peers.push(super::peer(
            label,
            command,
            presets::CRAWL_WORKLOAD,
            gil,
            &[n],
        ));
    }
}

/// `gil --classic`: the CPU body in Go (K goroutines on every core) and Java (K platform
/// threads), both running concur's own loop for the same iterations, and Node.js (K
/// worker_threads; its 32-bit loop sized here to take as long as concur's task), plain and
/// concurrent, in the tables without the lock: languages with no interpreter lock beside
/// CPython's rows and concur's emulated one.
pub(super) fn gil(c: &mut Classic, quick: bool) {
    let spin_n = if quick {
        presets::GIL_SPIN_QUICK
    } else {
        presets::GIL_SPIN_FULL
    };
    let spin = format!("spin:{spin_n}");
    let mut rows: Vec<(&str, String)> = Vec::new();
    if let Some(bin) = go_build(c, "go:plain, go:goroutines", "gil.go") {
        let base = format!("{} --tasks {{tasks}} --iterations {spin_n}", quoted(&bin));
        rows.push(("go:plain", format!("{base} --mode plain")));
        rows.push(("go:goroutines", format!("{base} --mode goroutines")));
    }
    if let Some(java) = java_build(c, "java:plain, java:threads", "Gil.java") {
        let base = format!(
            "{} Gil --tasks {{tasks}} --iterations {spin_n}",
            java.command
        );
        rows.push(("java:plain", format!("{base} --mode plain")));
        rows.push(("java:threads", format!("{base} --mode threads")));
    }
    match on_path("node") {
        None => missing(c, "node:plain, node:workers", "node", "nodejs"),
        Some(node) => node_gil(c, &node, spin_n, &mut rows),
    }
    for (label, command) in rows {
        c.peers.push(super::peer(
            label,
            command,
            &spin,
            false,
            presets::GIL_TASKS,
        ));
    }
}

/// Node.js's gil rows: its loop timed here and sized to take as long as concur's task.
fn node_gil(c: &mut Classic, node: &Path, spin_n: u64, rows: &mut Vec<(&str, String)>) {
    const PROBE: u64 = 10_000_000;
    let script = c.dir.path().join("gil.js");
    let probe = output(
        Command::new(node)
            .arg(&script)
            .arg("--calibrate")
            .arg(PROBE.to_string()),
    )
    .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).map_err(|e| e.to_string()));
    let node_s = probe
        .as_ref()
        .ok()
        .and_then(|v| v["seconds"].as_f64())
        .filter(|s| *s > 0.0);
    let (Some(node_s), Some(rust_s)) = (node_s, super::spin_time(spin_n)) else {
        c.notes.push(format!(
            "runtimes: node:plain, node:workers left out: {} could not time gil.js ({})",
            node.display(),
            probe.err().unwrap_or_else(|| "no time".into())
        ));
        return;
    };
    let iterations = ((rust_s / (node_s / PROBE as f64)) as u64 / 1000).max(1) * 1000;
    let base = format!(
        "{} {} --tasks {{tasks}} --iterations {iterations}",
        quoted(node),
        quoted(&script)
    );
    rows.push(("node:plain", format!("{base} --mode plain")));
    rows.push(("node:workers", format!("{base} --mode workers")));
    let version = probe
        .as_ref()
        .ok()
        .and_then(|v| v["version"].as_str().map(str::to_string))
        .unwrap_or_default();
    c.notes.push(format!(
        "runtimes: node:plain, node:workers: Node.js {version}, {iterations} iterations of its 32-bit loop ≈ {:.0} ms a task, as long as concur's spin:{spin_n} (timed now); go: and java: run concur's loop itself, {spin_n} iterations; these rows sit in the tables without the lock",
        rust_s * 1000.0
    ));
}

/// The note for rows left out because their toolchain `tool` is not on `PATH`, naming the
/// Debian `package` that brings it.
fn missing(c: &mut Classic, labels: &str, tool: &str, package: &str) {
    c.notes.push(format!(
        "runtimes: {labels} left out: {tool} is not on PATH (apt-get install {package}, or {INSTALL})"
    ));
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
