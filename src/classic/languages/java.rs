//! Java: platform threads and (with a JDK of 21 or later) virtual threads in the tasks study
//! (`Tasks.java`), HttpClient's sendAsync with a semaphore of C in the crawl (`Crawl.java`),
//! concur's multiply loop plain or in K platform threads in the gil study (`Gil.java`). Each
//! program is compiled with the `javac` on `PATH` into the study's folder and run by `java`.

use std::process::Command;

use super::{Classic, Language, Part, Program, Programs, Row, Sizes, Study};
use crate::classic::toolchain::{on_path, output, quoted};
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

const GIL_ROWS: &[&str] = &["java:plain", "java:threads"];
const TASKS_ROWS: &[&str] = &["java:threads", "java:virtual"];

/// A Java program compiled into the study's folder: how to start its JVM there, and the
/// JDK's version.
struct JavaBuilt {
    /// `java -cp FOLDER`, quoted for `sh -c`; the class name and its arguments follow.
    command: String,
    /// `javac -version`'s answer (`javac 17.0.21`).
    version: String,
}

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

/// Compiles the Java program `file` of the study's folder with the `javac` on `PATH`, or
/// notes why `labels` are left out (no JDK, or a failed compile). The version is a note.
fn java_build(c: &mut Classic, labels: &str, file: &str) -> Option<JavaBuilt> {
    let (Some(javac), Some(java)) = (on_path("javac"), on_path("java")) else {
        c.missing(labels, "java or javac", "openjdk-17-jdk-headless");
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

/// `tasks`: N platform threads up to [`super::THREADS_MAX`] tasks, and N virtual threads
/// where the JDK has them.
fn tasks(c: &mut Classic, s: &Sizes) {
    let Some(java) = java_build(c, &TASKS_ROWS.join(", "), "Tasks.java") else {
        return;
    };
    let cmd = format!("{} Tasks {}", java.command, s.tasks_args());
    c.tasks_row("java:threads", cmd.clone(), &s.thread_counts(), s);
    if jdk_feature(&java.version).is_some_and(|v| v >= 21) {
        c.tasks_row(
            "java:virtual",
            format!("{cmd} --virtual"),
            s.task_counts(),
            s,
        );
    } else {
        c.notes.push(format!(
            "runtimes: java:virtual left out: virtual threads need a JDK of 21 or later, and this one is {}",
            java.version
        ));
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
    fn the_jdk_feature_version_is_read_from_javac() {
        assert_eq!(jdk_feature("javac 17.0.21"), Some(17));
        assert_eq!(jdk_feature("javac 21"), Some(21));
        assert_eq!(jdk_feature("javac 1.8.0_392"), Some(8));
        assert_eq!(jdk_feature("nonsense"), None);
    }
}
