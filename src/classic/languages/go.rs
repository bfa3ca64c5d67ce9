//! Go: goroutines in the tasks study (`tasks.go`), net/http with a goroutine per request in
//! the crawl (`crawl.go`), concur's multiply loop plain or in K goroutines in the gil study
//! (`gil.go`). Each program is built with the `go` on `PATH` into the study's folder.

use std::path::PathBuf;
use std::process::Command;

use super::{Classic, Language, Part, Program, Programs, Row, Sizes, Study};
use crate::classic::toolchain::{on_path, output, quoted};
use crate::plan::presets;

/// The language.
pub(super) const LANGUAGE: Language = Language {
    name: "go",
    apt: &["golang-go"],
    parts: &[
        Part {
            study: Study::Crawl,
            place: 20,
            programs: Programs::Shipped(&[Program {
                name: "crawl-go",
                file: "crawl.go",
                help: "Go: N GETs of the delay server, C goroutines at a time, net/http (the crawl study)",
                text: include_str!("../crawl.go"),
            }]),
            rows: &["go:goroutines:100"],
            classic: false,
            threads: &[],
            add: crawl,
        },
        Part {
            study: Study::Gil,
            place: 20,
            programs: Programs::Shipped(&[Program {
                name: "gil-go",
                file: "gil.go",
                help: "Go: the multiply loop K times, plain or in K goroutines (the gil study's CPU body)",
                text: include_str!("../gil.go"),
            }]),
            rows: GIL_ROWS,
            classic: false,
            threads: &[],
            add: gil,
        },
        Part {
            study: Study::Tasks,
            place: 20,
            programs: Programs::Shipped(&[Program {
                name: "tasks-go",
                file: "tasks.go",
                help: "Go: N goroutines that each sleep (the tasks study)",
                text: include_str!("../tasks.go"),
            }]),
            rows: &["go:goroutines"],
            classic: false,
            threads: &[],
            add: tasks,
        },
    ],
};

const GIL_ROWS: &[&str] = &["go:plain", "go:goroutines"];

/// Builds the Go program `file` of the study's folder with the `go` on `PATH`: its binary, or
/// a note saying why `labels` are left out (no Go, or a failed build). The version is a note.
fn go_build(c: &mut Classic, labels: &str, file: &str) -> Option<PathBuf> {
    let Some(go) = on_path("go") else {
        c.missing(labels, "go", "golang-go");
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
            c.version_note(labels, &go, Command::new(&go).arg("version"));
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

/// `tasks`: N goroutines that each sleep.
fn tasks(c: &mut Classic, s: &Sizes) {
    if let Some(bin) = go_build(c, "go:goroutines", "tasks.go") {
        let command = format!("{} {}", quoted(&bin), s.tasks_args());
        c.tasks_row("go:goroutines", command, s.task_counts(), s);
    }
}

/// `crawl`: net/http, C goroutines at a time; the CA to trust is a flag.
fn crawl(c: &mut Classic, s: &Sizes) {
    let (n, _) = presets::crawl_sizes(s.quick, s.full);
    if let Some(bin) = go_build(c, "go:goroutines:100", "crawl.go") {
        let command = format!(
            "{} --url {{url}} -n {{tasks}} -c {{workers}}{}",
            quoted(&bin),
            s.cafile()
        );
        c.row(
            "go:goroutines:100",
            command,
            Row::of(presets::CRAWL_WORKLOAD, s.gil),
            &[n],
        );
    }
}

/// `gil`: concur's own loop for the same iterations, plain or in K goroutines on every core,
/// in the tables without the lock.
fn gil(c: &mut Classic, s: &Sizes) {
    let spin_n = s.spin_n();
    if let Some(bin) = go_build(c, &GIL_ROWS.join(", "), "gil.go") {
        let base = format!("{} --tasks {{tasks}} --iterations {spin_n}", quoted(&bin));
        let spin = format!("spin:{spin_n}");
        for (label, mode) in [("go:plain", "plain"), ("go:goroutines", "goroutines")] {
            let command = format!("{base} --mode {mode}");
            c.row(label, command, Row::spin(&spin, false), presets::GIL_TASKS);
        }
    }
}
