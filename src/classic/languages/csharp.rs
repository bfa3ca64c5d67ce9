//! C# on Mono (not .NET): N async methods that each await `Task.Delay`, waited for with
//! `Task.WhenAll`, in the tasks study (`tasks.cs`). Compiled by the `mcs` on `PATH` (Debian's
//! mono-mcs, which brings the Mono runtime) into the study's folder and run by `mono`.
//! Debian 12 has no .NET: the posts' C# figures are .NET's, this row is Mono's.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Classic, Language, Part, Program, Programs, Sizes, Study};
use crate::classic::toolchain::{on_path, output, quoted};

/// The language.
pub(super) const LANGUAGE: Language = Language {
    name: "csharp",
    apt: &[APT],
    parts: &[Part {
        study: Study::Tasks,
        place: 45,
        programs: Programs::Shipped(&[Program {
            name: "tasks-csharp",
            file: "tasks.cs",
            help: "C# on Mono (not .NET): N async methods that each await Task.Delay, Task.WhenAll (the tasks study)",
            text: include_str!("../tasks.cs"),
        }]),
        rows: &[ROW],
        classic: false,
        threads: &[],
        add: tasks,
    }],
};

const ROW: &str = "csharp:mono";
/// Mono's C# compiler; it depends on the Mono runtime and the class libraries the program
/// uses (mono-runtime, libmono-corlib4.5-cil, libmono-system4.0-cil).
const APT: &str = "mono-mcs";

/// Compiles tasks.cs with the `mcs` on `PATH`: the `mono` that runs it and the program, or a
/// note saying why the row is left out (no mcs or mono, or a failed compile).
fn build(c: &mut Classic) -> Option<(PathBuf, PathBuf)> {
    let Some(mcs) = on_path("mcs") else {
        c.missing(ROW, "mcs", APT);
        return None;
    };
    let Some(mono) = on_path("mono") else {
        c.missing(ROW, "mono", APT);
        return None;
    };
    let dir = c.dir.path().to_path_buf();
    let exe = dir.join("tasks-cs.exe");
    let built = output(
        Command::new(&mcs)
            .arg("-optimize+")
            .arg(format!("-out:{}", exe.display()))
            .arg(dir.join("tasks.cs")),
    );
    if let Err(why) = built {
        c.notes
            .push(format!("runtimes: {ROW} left out: mcs failed ({why})"));
        return None;
    }
    Some((mono, exe))
}

/// `mono --version`'s first line (`Mono JIT compiler version 6.8.0.105 (Debian …)`).
fn mono_version(mono: &Path) -> String {
    output(Command::new(mono).arg("--version"))
        .ok()
        .and_then(|v| v.lines().next().map(str::to_string))
        .unwrap_or_else(|| "version unknown".into())
}

/// `tasks`: N async methods that each await `Task.Delay`.
fn tasks(c: &mut Classic, s: &Sizes) {
    if let Some((mono, exe)) = build(c) {
        let command = format!("{} {} {}", quoted(&mono), quoted(&exe), s.tasks_args());
        c.tasks_row(ROW, command, s.task_counts(), s);
        c.notes.push(format!(
            "runtimes: {ROW}: C# on Mono, not .NET (Debian has no .NET): {} ({})",
            mono_version(&mono),
            mono.display()
        ));
    }
}
