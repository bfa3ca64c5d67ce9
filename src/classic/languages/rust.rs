//! Rust: the floor of concur's own runtime in the tasks study, a bare tokio program in
//! concur's binary (`concur classic tokio-tasks`, [`crate::classic::tokio_tasks`]), and the
//! same program on smol's executor beside it (`concur classic smol-tasks`,
//! [`crate::classic::smol_tasks`]): nothing to find or build, and no apt package beyond the
//! compiler concur was built with.

use super::{Classic, Language, Part, Programs, Sizes, Study};
use crate::classic::toolchain::quoted;

/// The language.
pub(super) const LANGUAGE: Language = Language {
    name: "rust",
    apt: &[],
    parts: &[
        Part {
            study: Study::Tasks,
            place: 10,
            programs: Programs::InBinary("classic tokio-tasks"),
            rows: &["rust:tokio-bare"],
            classic: false,
            threads: &[],
            add: tasks,
        },
        Part {
            study: Study::Tasks,
            place: 11,
            programs: Programs::InBinary("classic smol-tasks"),
            rows: &["rust:smol-bare"],
            classic: false,
            threads: &[],
            add: smol_tasks,
        },
    ],
};

/// `tasks`: this binary's `classic tokio-tasks`.
fn tasks(c: &mut Classic, s: &Sizes) {
    match std::env::current_exe() {
        Ok(exe) => {
            let command = format!("{} classic tokio-tasks {}", quoted(&exe), s.tasks_args());
            c.tasks_row("rust:tokio-bare", command, s.task_counts(), s);
            c.notes.push(
                "runtimes: rust:tokio-bare is the floor of concur's own runtime: a bare tokio program (tokio::spawn, tokio::time::sleep) in concur's binary, without its models or recorders".into(),
            );
        }
        Err(e) => c.notes.push(format!(
            "runtimes: rust:tokio-bare left out: this binary's path is unknown ({e})"
        )),
    }
}

/// `tasks`: this binary's `classic smol-tasks`.
fn smol_tasks(c: &mut Classic, s: &Sizes) {
    match std::env::current_exe() {
        Ok(exe) => {
            let command = format!("{} classic smol-tasks {}", quoted(&exe), s.tasks_args());
            c.tasks_row("rust:smol-bare", command, s.task_counts(), s);
            c.notes.push(
                "runtimes: rust:smol-bare is the same bare program on smol's multi-threaded executor (async-executor's Executor::spawn, async-io's Timer::after) in concur's binary, on as many executor threads as tokio's workers".into(),
            );
        }
        Err(e) => c.notes.push(format!(
            "runtimes: rust:smol-bare left out: this binary's path is unknown ({e})"
        )),
    }
}
