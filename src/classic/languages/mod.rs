//! The languages of `--classic`, as a registry: one file per language and one line in
//! [`LANGUAGES`]. A language names its Debian packages and, for each study it takes part in
//! (its [`Part`]s), the programs it ships, the rows it adds and where they stand in the
//! study's table, and a function that finds or builds its toolchain and makes each row's
//! command line from the study's [`Sizes`]. The gil, mailer, crawl and tasks studies walk the
//! registry ([`add_rows`]); `PROGRAMS`, `APT_PACKAGES` and `prepare` are read from it.
//!
//! A missing toolchain leaves its rows out with a note naming what to install, never a
//! failure. The programs print the `CONCUR` line of an external cell with their own wall (and
//! in the tasks study, their start and wake-ups), so their rows carry concur's columns.

mod cpp;
mod csharp;
mod elixir;
mod go;
mod java;
mod node;
pub mod python;
mod ruby;
mod rust;

pub use java::PIP_JDK;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use super::toolchain::output;
use crate::plan::{presets, ClassicSizes, PeerRequest};

/// Every language. A new language is one file here plus one line in this list (the file's
/// name is the language's [`Language::name`]; `tests` below checks both).
pub const LANGUAGES: &[Language] = &[
    ruby::LANGUAGE,
    python::LANGUAGE,
    go::LANGUAGE,
    node::LANGUAGE,
    java::LANGUAGE,
    elixir::LANGUAGE,
    rust::LANGUAGE,
    cpp::LANGUAGE,
    csharp::LANGUAGE,
];

/// One language: what `concur classic install` installs for it and its part in each study.
pub struct Language {
    /// Its name, which is its file's (`go` for `go.rs`).
    pub name: &'static str,
    /// The Debian packages of its toolchain (and of its programs' libraries).
    pub apt: &'static [&'static str],
    /// The studies it takes part in.
    pub parts: &'static [Part],
}

/// The studies that take rows in other languages (the tour takes gil's, mailer's and crawl's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Study {
    /// The interpreter-lock study.
    Gil,
    /// The crawl of the delay server.
    Crawl,
    /// The deliveries of mails.
    Mailer,
    /// The waiting tasks.
    Tasks,
}

impl Study {
    /// Every study, in the order `concur classic list` lists their programs.
    pub const ALL: [Study; 4] = [Study::Gil, Study::Crawl, Study::Mailer, Study::Tasks];
}

/// A language's part in one study.
pub struct Part {
    /// The study.
    pub study: Study,
    /// Where its rows stand in the study's table: the lowest first (no two parts of one
    /// study share a place).
    pub place: u8,
    /// Its programs for the study.
    pub programs: Programs,
    /// The rows it adds when its toolchain is there (`go:goroutines`).
    pub rows: &'static [&'static str],
    /// Whether it is the classic experiment's own program (CPython's in gil and crawl, MRI's
    /// in mailer): its notes begin `classic:` and say themselves what `-k` does to it; the
    /// other parts' begin `runtimes:`.
    pub classic: bool,
    /// Its rows that make an OS thread a task: they stop at [`THREADS_MAX`] tasks.
    pub threads: &'static [&'static str],
    /// Finds its toolchain, adds its rows and notes.
    pub add: fn(&mut Classic, &Sizes),
}

/// Where a part's program comes from.
pub enum Programs {
    /// Files shipped in the binary, written to the study's folder before it runs.
    Shipped(&'static [Program]),
    /// A subcommand of concur's own binary (`classic tokio-tasks`).
    InBinary(&'static str),
}

impl Programs {
    /// The shipped programs (none for a subcommand).
    pub const fn shipped(&self) -> &'static [Program] {
        match self {
            Programs::Shipped(p) => p,
            Programs::InBinary(_) => &[],
        }
    }
}

/// One classic program shipped in the binary.
#[derive(Clone, Copy)]
pub struct Program {
    /// The name `concur classic show` takes.
    pub name: &'static str,
    /// Its file name.
    pub file: &'static str,
    /// What it runs, in one line.
    pub help: &'static str,
    /// Its source.
    pub text: &'static str,
}

/// Task counts past which a thread-per-task program is not tried (a thread each: this
/// machine's limit is about 32,000, and concur's own `thread` row shows how it fails).
pub const THREADS_MAX: usize = 10_000;

/// What `concur classic install` is called in the notes.
const INSTALL: &str = "concur classic install";

/// The study's sizes as the parts read them.
#[derive(Clone, Copy)]
pub struct Sizes<'a> {
    /// `--quick` (always, in the tour).
    pub quick: bool,
    /// `--gil`: the rows join the tables with the lock (never in the tour).
    pub gil: bool,
    /// `--full`: the crawl's full sizes.
    pub full: bool,
    /// `--cacert`: the CA the crawl clients trust too.
    pub cacert: Option<&'a Path>,
    /// `-k`, which does not reach the programs (a note says so).
    pub insecure: bool,
    /// Whether the study has a Redis (`--jobs-backend redis://...`), for `rb:sidekiq:10`.
    pub redis: bool,
}

impl<'a> Sizes<'a> {
    /// The plan's sizes.
    pub fn new(o: &'a ClassicSizes, redis: bool) -> Sizes<'a> {
        Sizes {
            quick: o.quick,
            gil: o.gil,
            full: o.full,
            cacert: o.cacert.as_deref(),
            insecure: o.insecure,
            redis,
        }
    }

    /// The tour's: quick, and without the lock.
    pub fn tour(self) -> Sizes<'a> {
        Sizes {
            quick: true,
            gil: false,
            ..self
        }
    }

    /// The gil study's CPU body's iterations (`spin:N`).
    fn spin_n(&self) -> u64 {
        if self.quick {
            presets::GIL_SPIN_QUICK
        } else {
            presets::GIL_SPIN_FULL
        }
    }

    /// ` --cafile CA` for the crawl clients that take the CA to trust as a flag, or nothing.
    fn cafile(&self) -> String {
        self.cacert
            .map(|ca| format!(" --cafile {}", super::toolchain::quoted(ca)))
            .unwrap_or_default()
    }

    /// The tasks study's task counts.
    fn task_counts(&self) -> &'static [usize] {
        presets::tasks_sizes(self.quick).1
    }

    /// The tasks study's task counts a thread-per-task program runs at.
    fn thread_counts(&self) -> Vec<usize> {
        let counts = self.task_counts().iter().copied();
        counts.filter(|&n| n <= THREADS_MAX).collect()
    }

    /// The tasks programs' arguments: `--tasks {tasks} --wait-ms MS`.
    fn tasks_args(&self) -> String {
        let wait = presets::tasks_sizes(self.quick).0;
        format!("--tasks {{tasks}} --wait-ms {}", wait.as_millis())
    }
}

/// The table a row joins and what its runs are held to.
#[derive(Clone, Copy)]
struct Row<'a> {
    /// The workload of the table it joins.
    workload: &'a str,
    /// Whether it joins the table with the lock.
    gil: bool,
    /// The bytes each of its tasks produces, when the work fixes them (its runs must then
    /// count their tasks and report those bytes, summed); `None` where they are not concur's
    /// to know (a crawl's replies come from the server, a Ruby mail is Ruby's).
    each: Option<u64>,
}

impl<'a> Row<'a> {
    /// A row whose tasks' bytes are the program's own.
    fn of(workload: &'a str, gil: bool) -> Row<'a> {
        Row {
            workload,
            gil,
            each: None,
        }
    }

    /// A gil study's row of the CPU body: each task produces its result's 8 bytes, as
    /// concur's `spin`.
    fn spin(workload: &'a str, gil: bool) -> Row<'a> {
        Row {
            workload,
            gil,
            each: Some(SPIN_BYTES),
        }
    }
}

/// The bytes of one `spin` task: its `u64` result's size.
const SPIN_BYTES: u64 = std::mem::size_of::<u64>() as u64;

/// The classic programs of a study: the folder they were written to (removed when dropped),
/// the external cells, and the notes (sizes chosen, what is missing and how to install it).
pub struct Classic {
    /// The programs' folder, alive while the study runs.
    pub dir: tempfile::TempDir,
    /// The external cells.
    pub peers: Vec<PeerRequest>,
    /// What the reader should know.
    pub notes: Vec<String>,
}

impl Classic {
    /// The program `file` in the study's folder.
    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    /// A row run at `tasks` counts in the table `row` names.
    fn row(&mut self, label: &str, command: String, row: Row, tasks: &[usize]) {
        self.peers.push(PeerRequest {
            label: label.into(),
            command,
            workload: Some(row.workload.into()),
            gil: row.gil,
            tasks: Some(tasks.to_vec()),
            workers: None,
            bytes_per_task: row.each,
            wait_primitive: None,
        });
    }

    /// A row of a program that runs one task at a time: its ideal is seq's.
    fn serial_row(&mut self, label: &str, command: String, row: Row, n: &[usize]) {
        self.row(label, command, row, n);
        if let Some(p) = self.peers.last_mut() {
            p.workers = Some(1);
        }
    }

    /// A tasks-study row: the study's waiting task (no bytes), without the lock.
    fn tasks_row(&mut self, label: &str, command: String, tasks: &[usize], s: &Sizes) {
        let workload = presets::tasks_workload(presets::tasks_sizes(s.quick).0);
        let row = Row {
            workload: &workload,
            gil: false,
            each: Some(0),
        };
        self.row(label, command, row, tasks);
        if let Some(p) = self.peers.last_mut() {
            p.wait_primitive = crate::measure::slack::of_program(label).map(|w| w.primitive);
        }
    }

    /// The note for rows left out because their toolchain `tool` is not on `PATH`, naming
    /// the Debian `package` that brings it.
    fn missing(&mut self, labels: &str, tool: &str, package: &str) {
        self.notes.push(format!(
            "runtimes: {labels} left out: {tool} is not on PATH (apt-get install {package}, or {INSTALL})"
        ));
    }

    /// A note naming the toolchain's version (the meta line keeps the notes).
    fn version_note(&mut self, labels: &str, tool: &Path, cmd: &mut Command) {
        let v = output(cmd).unwrap_or_else(|why| format!("version unknown: {why}"));
        let v = v.lines().last().unwrap_or("").trim();
        self.notes
            .push(format!("runtimes: {labels}: {v} ({})", tool.display()));
    }
}

/// Adds the rows of every language that takes part in `study`, in their places, and the
/// study's notes about them all.
pub fn add_rows(c: &mut Classic, study: Study, s: &Sizes) {
    let mut parts: Vec<&Part> = LANGUAGES
        .iter()
        .flat_map(|l| l.parts)
        .filter(|p| p.study == study)
        .collect();
    parts.sort_by_key(|p| p.place);
    // The languages whose crawl clients `-k` does not reach, by their rows' prefix.
    let mut verifying = Vec::new();
    for p in &parts {
        let before = c.peers.len();
        (p.add)(c, s);
        debug_assert!(
            c.peers[before..]
                .iter()
                .all(|r| p.rows.contains(&&*r.label)),
            "a row not among {:?}",
            p.rows
        );
        if !p.classic && c.peers.len() > before {
            verifying.extend(p.rows.first().and_then(|r| r.split_once(':')).map(|r| r.0));
        }
    }
    if study == Study::Crawl && s.insecure && !verifying.is_empty() {
        c.notes.push(format!(
            "runtimes: the {} crawl clients verify the server's certificate: -k does not reach them (give its CA with --cacert)",
            english_list(&verifying.iter().map(|l| format!("{l}:")).collect::<Vec<_>>())
        ));
    }
    if study == Study::Tasks && s.thread_counts().len() < s.task_counts().len() {
        let threads: Vec<&str> = parts.iter().flat_map(|p| p.threads).copied().collect();
        c.notes.push(format!(
            "runtimes: the thread-per-task programs ({}) stop at {THREADS_MAX} tasks; concur's thread row shows where threads run out",
            threads.join(", ")
        ));
    }
}

/// `a`, `a and b`, `a, b and c`.
fn english_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The time of one run of concur's `spin:N` in this process, best of three.
fn spin_time(n: u64) -> Option<f64> {
    let w = crate::workload::parse(&format!("spin:{n}"), &Default::default()).ok()?;
    (0..3)
        .map(|_| {
            let t = Instant::now();
            let _ = w.task(0);
            t.elapsed().as_secs_f64()
        })
        .min_by(f64::total_cmp)
}

/// Runs `PROGRAM SCRIPT --calibrate PROBE` (the gil programs' timing of their loop): its
/// JSON (`seconds`, `version`), or why it failed.
fn calibrate(program: &Path, script: &Path, probe: u64) -> Result<serde_json::Value, String> {
    output(
        Command::new(program)
            .arg(script)
            .arg("--calibrate")
            .arg(probe.to_string()),
    )
    .and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of this folder is a language of the registry, and every language is a file.
    #[test]
    fn every_language_file_is_in_the_registry() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/classic/languages");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter_map(|f| f.strip_suffix(".rs").map(str::to_string))
            .filter(|f| f != "mod")
            .collect();
        files.sort();
        let mut names: Vec<String> = LANGUAGES.iter().map(|l| l.name.to_string()).collect();
        names.sort();
        assert_eq!(files, names, "the files of {dir:?} against LANGUAGES");
    }

    /// A language that claims a study ships a program for it (or names concur's subcommand)
    /// and the rows it adds; a study's parts stand in places of their own.
    #[test]
    fn every_part_has_its_program_rows_and_place() {
        for l in LANGUAGES {
            let in_binary = l
                .parts
                .iter()
                .all(|p| matches!(p.programs, Programs::InBinary(_)));
            assert!(
                in_binary || !l.apt.is_empty(),
                "{}: no apt packages",
                l.name
            );
            for p in l.parts {
                let what = format!("{} in {:?}", l.name, p.study);
                match p.programs {
                    Programs::Shipped(programs) => {
                        assert!(!programs.is_empty(), "{what}: no program");
                        for prog in programs {
                            assert!(
                                !prog.text.trim().is_empty(),
                                "{what}: {} is empty",
                                prog.file
                            );
                            assert!(!prog.name.is_empty() && !prog.help.is_empty(), "{what}");
                        }
                    }
                    Programs::InBinary(cmd) => assert!(!cmd.is_empty(), "{what}"),
                }
                assert!(!p.rows.is_empty(), "{what}: no rows");
                assert!(p.threads.iter().all(|t| p.rows.contains(t)), "{what}");
                let shared: Vec<&str> = LANGUAGES
                    .iter()
                    .flat_map(|o| o.parts.iter().map(move |q| (o.name, q)))
                    .filter(|(o, q)| *o != l.name && q.study == p.study && q.place == p.place)
                    .map(|(o, _)| o)
                    .collect();
                assert!(
                    shared.is_empty(),
                    "{what}: place {} shared with {shared:?}",
                    p.place
                );
            }
        }
    }

    /// Every row of the tasks study has the wait strace saw it sleep in
    /// (`measure::slack::PROGRAMS`), and that table names no row the registry lacks.
    #[test]
    fn every_tasks_row_has_its_traced_wait() {
        let rows: Vec<&str> = LANGUAGES
            .iter()
            .flat_map(|l| l.parts)
            .filter(|p| p.study == Study::Tasks)
            .flat_map(|p| p.rows.iter().copied())
            .collect();
        for row in &rows {
            assert!(
                crate::measure::slack::of_program(row).is_some(),
                "{row}: no primitive in measure::slack::PROGRAMS"
            );
        }
        for w in crate::measure::slack::PROGRAMS {
            assert!(rows.contains(&w.row), "{}: not a tasks row", w.row);
        }
    }

    #[test]
    fn lists_read_as_english() {
        let l = |v: &[&str]| english_list(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(l(&["go:"]), "go:");
        assert_eq!(l(&["go:", "java:"]), "go: and java:");
        assert_eq!(l(&["go:", "java:", "node:"]), "go:, java: and node:");
    }
}
