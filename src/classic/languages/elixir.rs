//! Elixir: N processes (`Task.async`) that each sleep, in the tasks study (`tasks.exs`), run
//! by the `elixir` on `PATH`.

use std::process::Command;

use super::{Classic, Language, Part, Program, Programs, Sizes, Study};
use crate::classic::toolchain::{on_path, quoted};

/// The language.
pub(super) const LANGUAGE: Language = Language {
    name: "elixir",
    apt: &["elixir"],
    parts: &[Part {
        study: Study::Tasks,
        place: 50,
        programs: Programs::Shipped(&[Program {
            name: "tasks-elixir",
            file: "tasks.exs",
            help: "Elixir: N processes (Task.async) that each sleep (the tasks study)",
            text: include_str!("../tasks.exs"),
        }]),
        rows: &["elixir:processes"],
        classic: false,
        threads: &[],
        add: tasks,
    }],
};

/// `tasks`: N processes that each sleep.
fn tasks(c: &mut Classic, s: &Sizes) {
    let Some(elixir) = on_path("elixir") else {
        return c.missing("elixir:processes", "elixir", "elixir");
    };
    // Erlang's default limit is 262,144 processes: raised past the study's largest N.
    let command = format!(
        "{} --erl '+P 2000000' {} {}",
        quoted(&elixir),
        quoted(&c.path("tasks.exs")),
        s.tasks_args()
    );
    c.tasks_row("elixir:processes", command, s.task_counts(), s);
    c.version_note(
        "elixir:processes",
        &elixir,
        Command::new(&elixir).arg("--version"),
    );
}
