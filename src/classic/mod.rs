//! The programs of `--classic`, shipped in the binary: the classic experiments' own, in
//! CPython and MRI, and the same work in other languages (Go, Node.js, Java, Elixir, C++ on
//! asio, C# on Mono, and the floor of concur's own runtime). `--classic` writes them to a temporary folder and adds them
//! to the `gil`, `mailer`, `crawl` and `tasks` studies (and the tour) as external cells
//! labelled `py:…`, `rb:…`, `go:…` and so on, measured like concur's own runs. Each language is
//! one file of [`languages`] and one line of its registry; each uses the toolchain found (a
//! missing one becomes a note naming what to install, never a failure). `concur classic
//! install` installs them on Debian/Ubuntu and `concur classic show NAME` prints a program.

pub mod bare_tasks;
pub mod languages;
pub mod smol_tasks;
pub mod tokio_tasks;
mod toolchain;

use std::process::Command;

use crate::base::error::{Error, Result};
use crate::plan::{presets, ClassicSizes};
use languages::{Sizes, Study, LANGUAGES};

pub use languages::python::{PIP_PACKAGES, TASKS_PIP_PACKAGES};
pub use languages::PIP_JDK;
pub use languages::{Classic, Program};
pub use toolchain::home;

/// Every classic program, read from [`LANGUAGES`]: by study (gil, crawl, mailer, tasks), each
/// study's in the order of its rows.
pub const PROGRAMS: &[Program] = &ALL_PROGRAMS;

/// The Debian packages of every language, read from [`LANGUAGES`] (`concur classic install`).
pub const APT_PACKAGES: &[&str] = &ALL_APT;

const ALL_PROGRAMS: [Program; count_programs()] = collect_programs();
const ALL_APT: [&str; count_apt()] = collect_apt();

const fn count_programs() -> usize {
    let (mut n, mut i) = (0, 0);
    while i < LANGUAGES.len() {
        let mut j = 0;
        while j < LANGUAGES[i].parts.len() {
            n += LANGUAGES[i].parts[j].programs.shipped().len();
            j += 1;
        }
        i += 1;
    }
    n
}

/// The programs of the part of `study` at `place`, if a language has one there.
const fn programs_at(study: Study, place: u8) -> &'static [Program] {
    let mut i = 0;
    while i < LANGUAGES.len() {
        let mut j = 0;
        while j < LANGUAGES[i].parts.len() {
            let p = &LANGUAGES[i].parts[j];
            if p.study as u8 == study as u8 && p.place == place {
                return p.programs.shipped();
            }
            j += 1;
        }
        i += 1;
    }
    &[]
}

const fn collect_programs() -> [Program; count_programs()] {
    let empty = Program {
        name: "",
        file: "",
        help: "",
        text: "",
    };
    let mut out = [empty; count_programs()];
    let (mut n, mut s) = (0, 0);
    while s < Study::ALL.len() {
        let mut place = 0u16;
        while place <= u8::MAX as u16 {
            let found = programs_at(Study::ALL[s], place as u8);
            let mut k = 0;
            while k < found.len() {
                out[n] = found[k];
                n += 1;
                k += 1;
            }
            place += 1;
        }
        s += 1;
    }
    out
}

const fn count_apt() -> usize {
    let (mut n, mut i) = (0, 0);
    while i < LANGUAGES.len() {
        n += LANGUAGES[i].apt.len();
        i += 1;
    }
    n
}

const fn collect_apt() -> [&'static str; count_apt()] {
    let mut out = [""; count_apt()];
    let (mut n, mut i) = (0, 0);
    while i < LANGUAGES.len() {
        let mut j = 0;
        while j < LANGUAGES[i].apt.len() {
            out[n] = LANGUAGES[i].apt[j];
            n += 1;
            j += 1;
        }
        i += 1;
    }
    out
}

/// `concur classic show NAME`: the program's source.
pub fn show(name: &str) -> Result<&'static str> {
    PROGRAMS
        .iter()
        .find(|p| p.name == name || p.file == name)
        .map(|p| p.text)
        .ok_or_else(|| {
            Error::usage(format!(
                "unknown classic program '{name}' (allowed: {})",
                PROGRAMS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// Writes the programs and builds the external cells of study `study` (`gil`, `mailer`,
/// `crawl`, `tasks` or the tour) at the plan's `sizes`, walking [`LANGUAGES`]; calibrates the
/// interpreted CPU tasks on this machine. `redis`: whether the study has a Redis
/// (`--jobs-backend redis://...`), for `rb:sidekiq:10`.
pub fn prepare(study: &str, o: &ClassicSizes, redis: bool) -> Result<Classic> {
    let sizes = Sizes::new(o, redis);
    let (studies, sizes): (&[Study], Sizes) = match study {
        "gil" => (&[Study::Gil], sizes),
        "mailer" => (&[Study::Mailer], sizes),
        "crawl" => (&[Study::Crawl], sizes),
        "tasks" => (&[Study::Tasks], sizes),
        presets::TOUR => (&[Study::Gil, Study::Mailer, Study::Crawl], sizes.tour()),
        other => {
            return Err(Error::flag("--classic", format!(
                "--classic adds the classic programs to the gil, mailer, crawl and tasks studies and the tour, not to '{other}'"
            )))
        }
    };
    let dir = tempfile::Builder::new()
        .prefix("concur-classic-")
        .tempdir()
        .map_err(|e| Error::io("creating the classic programs' folder", e))?;
    for p in PROGRAMS {
        std::fs::write(dir.path().join(p.file), p.text)
            .map_err(|e| Error::io("writing the classic programs", e))?;
    }
    let mut c = Classic {
        dir,
        peers: vec![],
        notes: vec![],
    };
    for s in studies {
        languages::add_rows(&mut c, *s, &sizes);
    }
    Ok(c)
}

/// `concur classic install`: apt-get for Ruby, its gems and Python's venv, then a virtual
/// environment with pip for the Python clients, the tasks study's event loops and PyPI's JDK
/// (for Java's virtual threads); prints each step and returns the exit status
/// (1 when a step failed).
pub fn install() -> Result<i32> {
    let mut steps = Steps { failed: false };
    match apt_get() {
        Some(mut cmd) => steps.run(
            &format!("apt-get install -y {}", APT_PACKAGES.join(" ")),
            &mut cmd,
        ),
        None => eprintln!(
            "classic install: apt-get is not here; install {} with your package manager",
            APT_PACKAGES.join(", ")
        ),
    }
    let venv = home().join("venv");
    let Some(py) = toolchain::on_path("python3") else {
        eprintln!("classic install: python3 is not on PATH; install it and run this again");
        return Ok(1);
    };
    steps.run(
        &format!("python3 -m venv {}", venv.display()),
        Command::new(&py).args(["-m", "venv"]).arg(&venv),
    );
    let pip: Vec<&str> = PIP_PACKAGES
        .iter()
        .chain(TASKS_PIP_PACKAGES)
        .copied()
        .collect();
    steps.run(
        &format!("pip install {}", pip.join(" ")),
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet"])
            .args(&pip),
    );
    // Java's virtual threads need a JDK of 21 or later, which Debian 12 does not have.
    steps.run(
        &format!("pip install {PIP_JDK}"),
        Command::new(venv.join("bin/pip")).args(["install", "--quiet", PIP_JDK]),
    );
    if steps.failed {
        eprintln!(
            "classic install: some steps failed; --classic leaves out what is missing, with a note"
        );
        return Ok(1);
    }
    println!(
        "classic install: done; --classic now uses {}, its {PIP_JDK}'s Java for virtual threads, and ruby on PATH",
        venv.join("bin/python").display()
    );
    Ok(0)
}

/// `apt-get install -y` of [`APT_PACKAGES`] (under `sudo` unless root), if apt-get is here.
fn apt_get() -> Option<Command> {
    let apt = toolchain::on_path("apt-get")?;
    // SAFETY: geteuid only reads this process's credentials.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if root {
        Command::new(&apt)
    } else {
        let mut c = Command::new("sudo");
        c.arg(&apt);
        c
    };
    cmd.env("DEBIAN_FRONTEND", "noninteractive")
        .args(["install", "-y"])
        .args(APT_PACKAGES);
    Some(cmd)
}

/// The steps of `concur classic install`, each printed, and whether one failed.
struct Steps {
    failed: bool,
}

impl Steps {
    /// Runs one step, `what` its line on stderr.
    fn run(&mut self, what: &str, cmd: &mut Command) {
        eprintln!("classic install: {what}");
        match cmd.status() {
            Ok(s) if s.success() => {}
            Ok(s) => {
                eprintln!("classic install: {what} failed ({s})");
                self.failed = true;
            }
            Err(e) => {
                eprintln!("classic install: {what} could not start: {e}");
                self.failed = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// Each Rust floor (tokio's and smol's programs) waits every task and reports a line the
    /// study accepts; its sizes are checked by `bare_tasks`, whose tests cover the bounds.
    #[test]
    fn each_rust_floor_waits_every_task_and_refuses_bad_sizes_by_name() {
        for (name, run) in [
            (
                "tokio",
                super::tokio_tasks::run as fn(usize, u64) -> crate::base::error::Result<String>,
            ),
            ("smol", super::smol_tasks::run),
        ] {
            let line = run(200, 20).unwrap_or_else(|e| panic!("{name}: {e}"));
            super::bare_tasks::tests::assert_line(&line, 200, 0.02);
            let e = run(0, 10).unwrap_err();
            assert!(e.to_string().contains("--tasks 0"), "{name}: {e}");
            assert_eq!(e.exit_code(), 2, "{name}: {e}");
        }
    }

    use super::*;

    #[test]
    fn every_program_shows_by_name_or_file_and_unknown_ones_are_named() {
        for p in PROGRAMS {
            assert_eq!(show(p.name).unwrap(), p.text);
            assert_eq!(show(p.file).unwrap(), p.text);
        }
        let e = show("nope").unwrap_err().to_string();
        assert!(
            e.contains("'nope'") && e.contains("gil, gil-go, gil-java, gil-node, crawl, crawl-go"),
            "{e}"
        );
    }
}
