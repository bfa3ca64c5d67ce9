//! MRI: the classic mailer experiment's own program (`mailer.rb`: sequential, fork, threads, a
//! pool, Celluloid, Sidekiq) and the tasks study's threads and fibers on the async gem
//! (`tasks.rb`), with the `ruby` on `PATH`.

use std::path::Path;
use std::process::{Command, Stdio};

use super::{Classic, Language, Part, Program, Programs, Row, Sizes, Study, INSTALL};
use crate::classic::toolchain::{on_path, output, quoted};
use crate::plan::presets;

/// The language.
pub(super) const LANGUAGE: Language = Language {
    name: "ruby",
    apt: &["ruby", "ruby-celluloid", "ruby-sidekiq", "ruby-async"],
    parts: &[
        Part {
            study: Study::Mailer,
            place: 10,
            programs: Programs::Shipped(&[Program {
                name: "mailer",
                file: "mailer.rb",
                help: "MRI: N deliveries (mail + fib) sequentially, forked, in threads, a thread pool, Celluloid or Sidekiq; bm: the classic's Benchmark.bm table",
                text: include_str!("../mailer.rb"),
            }]),
            rows: &[
                "rb:seq",
                "rb:fork",
                "rb:threads",
                "rb:pool:10",
                "rb:celluloid:10",
                "rb:sidekiq:10",
            ],
            classic: true,
            threads: &[],
            add: mailer,
        },
        Part {
            study: Study::Tasks,
            place: 70,
            programs: Programs::Shipped(&[Program {
                name: "tasks-ruby",
                file: "tasks.rb",
                help: "MRI: N threads, or N fibers under the async gem's reactor, that each sleep (the tasks study)",
                text: include_str!("../tasks.rb"),
            }]),
            rows: &["rb:threads", "rb:fibers"],
            classic: false,
            threads: &["rb:threads"],
            add: tasks,
        },
    ],
};

/// Whether `ruby` can load the gem `name`.
fn has_gem(ruby: &Path, name: &str) -> bool {
    Command::new(ruby)
        .args(["-e", &format!("require '{name}'")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The mailer's rows (label, mode) that this Ruby can run: the four of the standard library,
/// Celluloid's and Sidekiq's where their gems are installed (Sidekiq on the study's Redis);
/// a note for each left out.
fn mailer_rows(c: &mut Classic, ruby: &Path, redis: bool) -> Vec<(&'static str, &'static str)> {
    let mut rows = vec![
        ("rb:seq", "seq"),
        ("rb:fork", "fork"),
        ("rb:threads", "threads"),
        ("rb:pool:10", "pool"),
    ];
    if has_gem(ruby, "celluloid") {
        rows.push(("rb:celluloid:10", "celluloid"));
    } else {
        c.notes.push(format!(
            "classic: rb:celluloid:10 left out: the celluloid gem is missing (apt-get install ruby-celluloid, or {INSTALL})"
        ));
    }
    match (has_gem(ruby, "sidekiq"), on_path("sidekiq"), redis) {
        (true, Some(_), true) => rows.push(("rb:sidekiq:10", "sidekiq")),
        (true, Some(_), false) => c.notes.push(
            "classic: rb:sidekiq:10 left out: it needs the study's Redis (--jobs-backend redis://HOST:PORT/DB)".into(),
        ),
        _ => c.notes.push(format!(
            "classic: rb:sidekiq:10 left out: the sidekiq gem or command is missing (apt-get install ruby-sidekiq, or {INSTALL})"
        )),
    }
    rows
}

/// `mailer`: MRI's sequential, fork, threads and pool of 10, plus Celluloid and Sidekiq
/// where their gems are installed.
fn mailer(c: &mut Classic, s: &Sizes) {
    let Some(ruby) = on_path("ruby") else {
        c.notes.push(format!(
            "classic: ruby is not on PATH, so the rb: cells of mailer are left out (apt-get install ruby, or {INSTALL})"
        ));
        return;
    };
    let (workload, fib) = presets::mailer_task(s.quick);
    let script = c.path("mailer.rb");
    let version =
        output(Command::new(&ruby).args(["-e", "print RUBY_VERSION"])).unwrap_or_default();
    for (label, mode) in mailer_rows(c, &ruby, s.redis) {
        // rb:sidekiq:10 finds the study's Redis in CONCUR_JOBS_BACKEND, which every external
        // cell gets: a password on its command line would show in `ps`.
        let cmd = format!(
            "{} {} {mode} --tasks {{tasks}} --fib {fib} --workers 10",
            quoted(&ruby),
            quoted(&script)
        );
        let tasks = [presets::MAILER_TASKS];
        if label == "rb:seq" {
            c.serial_row(label, cmd, Row::of(workload, s.gil), &tasks);
        } else {
            c.row(label, cmd, Row::of(workload, s.gil), &tasks);
        }
    }
    c.notes.push(format!(
        "classic: MRI {version} ({}), each delivery computes fib({fib}) like concur's {workload}",
        ruby.display()
    ));
}

/// `tasks`: N threads, up to [`super::THREADS_MAX`] tasks, and N fibers under the async
/// gem's reactor where the gem is installed (a note where not).
fn tasks(c: &mut Classic, s: &Sizes) {
    let Some(ruby) = on_path("ruby") else {
        return c.missing("rb:threads, rb:fibers", "ruby", "ruby");
    };
    let base = format!(
        "{} {} {}",
        quoted(&ruby),
        quoted(&c.path("tasks.rb")),
        s.tasks_args()
    );
    c.tasks_row("rb:threads", base.clone(), &s.thread_counts(), s);
    if has_gem(&ruby, "async") {
        let (counts, fit) = fiber_counts(s);
        if counts.len() < s.task_counts().len() {
            c.notes.push(format!(
                "runtimes: rb:fibers stops at {} tasks: each fiber's stack is a memory mapping with a guard page below it, and vm.max_map_count lets about {fit} fibers fit (past that MRI's FiberError \"can't set a guard page\"; sysctl vm.max_map_count raises the limit)",
                counts.last().copied().unwrap_or(0)
            ));
        }
        c.tasks_row("rb:fibers", format!("{base} --mode fibers"), &counts, s);
    } else {
        c.notes.push(format!(
            "runtimes: rb:fibers left out: the async gem is missing (apt-get install ruby-async, or {INSTALL})"
        ));
    }
    c.version_note(
        "rb:threads, rb:fibers",
        &ruby,
        Command::new(&ruby).arg("--version"),
    );
}

/// Memory mappings MRI takes for one fiber: its machine stack and the guard page below it
/// (its VM stack lies in the same mapping: MRI's fiber pool).
const MAPPINGS_PER_FIBER: usize = 2;

/// Mappings left for the rest of the Ruby process (its own are about 150; a run of 32,000
/// fibers failed where 30,000 fit under the default limit of 65,530).
const MAPPINGS_SPARE: usize = 4_000;

/// The tasks study's counts at which `rb:fibers` runs, those whose fibers' stacks fit under
/// `vm.max_map_count` (every count when it cannot be read), and how many fit.
fn fiber_counts(s: &Sizes) -> (Vec<usize>, usize) {
    let fit = crate::os::maps::max_map_count().map_or(usize::MAX, |l| {
        l.saturating_sub(MAPPINGS_SPARE) / MAPPINGS_PER_FIBER
    });
    let counts = s.task_counts().iter().copied().filter(|&n| n <= fit);
    (counts.collect(), fit)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full study's counts for rb:fibers are those whose stacks fit under this machine's
    /// vm.max_map_count: 1 and 10,000 always here, a million (two million mappings) only under
    /// a limit raised that far.
    #[test]
    fn fibers_stop_where_their_stacks_stop_fitting() {
        let s = Sizes {
            quick: false,
            gil: false,
            full: false,
            cacert: None,
            insecure: false,
            redis: false,
        };
        let (counts, fit) = fiber_counts(&s);
        let all = s.task_counts();
        assert_eq!(counts[..], all[..counts.len()], "a prefix of {all:?}");
        assert!(
            counts.contains(&1) && counts.contains(&10_000),
            "{counts:?}"
        );
        for &n in all {
            assert_eq!(counts.contains(&n), n <= fit, "{n} against {fit}");
        }
        if let Some(limit) = crate::os::maps::max_map_count() {
            assert_eq!(fit, (limit - MAPPINGS_SPARE) / MAPPINGS_PER_FIBER);
            assert_eq!(counts.contains(&1_000_000), limit >= 2_004_000, "{limit}");
        }
    }
}
