//! C++: C++20 coroutines on asio in the tasks study (`tasks.cpp`): `asio::co_spawn` of N
//! coroutines that each await an `asio::steady_timer` with `asio::use_awaitable`, on one
//! `io_context` run by one thread per core. Built by the `g++` on `PATH` against Debian's
//! header-only asio (libasio-dev) into the study's folder.

use std::path::PathBuf;
use std::process::Command;

use super::{Classic, Language, Part, Program, Programs, Sizes, Study, INSTALL};
use crate::classic::toolchain::{on_path, output, quoted};

/// The language.
pub(super) const LANGUAGE: Language = Language {
    name: "cpp",
    apt: APT,
    parts: &[Part {
        study: Study::Tasks,
        place: 15,
        programs: Programs::Shipped(&[Program {
            name: "tasks-cpp",
            file: "tasks.cpp",
            help: "C++20: N coroutines on asio (co_spawn, a steady_timer awaited with use_awaitable), one io_context on a thread per core (the tasks study)",
            text: include_str!("../tasks.cpp"),
        }]),
        rows: &[ROW],
        classic: false,
        threads: &[],
        add: tasks,
    }],
};

const ROW: &str = "cpp:asio";
/// The compiler and asio's headers.
const APT: &[&str] = &["g++", "libasio-dev"];

/// asio's version as its header defines it (`#define ASIO_VERSION 102201`: 1.22.1).
fn asio_version(macros: &str) -> Option<String> {
    let v: u32 = macros
        .lines()
        .find_map(|l| l.strip_prefix("#define ASIO_VERSION "))?
        .trim()
        .parse()
        .ok()?;
    Some(format!("{}.{}.{}", v / 100_000, v / 100 % 1000, v % 100))
}

/// Builds tasks.cpp with the `g++` on `PATH`: its binary, or a note saying why the row is left
/// out (no g++, no asio headers, or a failed build). The versions are a note.
fn build(c: &mut Classic) -> Option<PathBuf> {
    let Some(gxx) = on_path("g++") else {
        c.missing(ROW, "g++", &APT.join(" "));
        return None;
    };
    let dir = c.dir.path().to_path_buf();
    // asio is header-only: its version header, preprocessed, says whether it is there.
    let probe = dir.join("asio-version.cpp");
    if let Err(e) = std::fs::write(&probe, "#include <asio/version.hpp>\n") {
        c.notes.push(format!(
            "runtimes: {ROW} left out: {} could not be written ({e})",
            probe.display()
        ));
        return None;
    }
    let asio = output(
        Command::new(&gxx)
            .args(["-std=c++20", "-dM", "-E"])
            .arg(&probe),
    )
    .ok()
    .and_then(|m| asio_version(&m));
    let Some(asio) = asio else {
        c.notes.push(format!(
            "runtimes: {ROW} left out: g++ finds no asio headers (apt-get install libasio-dev, or {INSTALL})"
        ));
        return None;
    };
    let bin = dir.join("tasks-cpp");
    let built = output(
        Command::new(&gxx)
            .args(["-std=c++20", "-O2", "-pthread", "-o"])
            .arg(&bin)
            .arg(dir.join("tasks.cpp")),
    );
    if let Err(why) = built {
        c.notes
            .push(format!("runtimes: {ROW} left out: g++ failed ({why})"));
        return None;
    }
    let version = output(Command::new(&gxx).arg("--version")).unwrap_or_default();
    let version = version.lines().next().unwrap_or("version unknown");
    c.notes.push(format!(
        "runtimes: {ROW}: {version} ({}), asio {asio}; one io_context run by a thread per core, as tokio's and Go's rows use every core",
        gxx.display()
    ));
    Some(bin)
}

/// `tasks`: N coroutines that each await a timer.
fn tasks(c: &mut Classic, s: &Sizes) {
    if let Some(bin) = build(c) {
        let command = format!("{} {}", quoted(&bin), s.tasks_args());
        c.tasks_row(ROW, command, s.task_counts(), s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asios_version_is_read_from_its_macro() {
        let macros = "#define ASIO_ASIO_VERSION_HPP \n#define ASIO_VERSION 102201\n";
        assert_eq!(asio_version(macros).as_deref(), Some("1.22.1"));
        assert_eq!(asio_version("#define OTHER 1\n"), None);
    }
}
