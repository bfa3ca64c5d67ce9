//! The command line: the subcommands and their flags (the option groups themselves are
//! defined once, in [`crate::plan::options`]), the help lists filled from the registries, and the
//! one call each subcommand makes into the library. The binary is `main() { cli::main() }`.

pub(crate) mod agent;
mod agents;
mod classic;
pub(crate) mod help;
mod hub;
mod jobs;
mod serve;
pub(crate) mod usage_error;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Args, FromArgMatches, Parser, Subcommand};

use crate::base::error::Error;
use crate::plan::options::{
    CmdOptions, HubOptions, OpenOptions, OutputOptions, PeerOptions, RepeatArg, RequestOptions,
    StudyOptions,
};
use crate::report::{Export, Target};

#[derive(Parser)]
#[command(
    name = "concur",
    version,
    about = "Run one workload under many concurrency models and see what each costs",
    long_about = "Run one workload under many concurrency models (sequential, OS threads, processes, \
pools, work stealing, async event loops) and compare wall and CPU time, memory, latency and the \
distance to the ideal the hardware allows. Every run happens in a fresh process.\n\n\
Start with `concur run` (a quick tour of every study), then `concur run gil` or `concur run mailer`, \
or your own matrix: `concur run --workload fib:30 --model seq --model pool:4 --tasks 100`.\n\
`concur list` shows every workload, model and study."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a built-in study (default: the quick tour) or a free-form matrix of cells
    Run(RunArgs),
    /// Render a results file (.jsonl) again
    Report(ReportArgs),
    /// List the workloads, models and studies, with their spec grammar
    List,
    /// Crawl one URL: N GETs, C at a time, under one model (a one-cell study)
    Crawl(CrawlArgs),
    /// Run the delay HTTP server (GET /add?delay=MS, /delay/DURATION, /bytes/N, /status/CODE, /stats)
    Serve(serve::ServeArgs),
    /// Run the few cells that show what bounds a workload, and advise which model to use
    Advise(AdviseArgs),
    /// Background jobs: enqueue, work, stats, retry and dead sets (SQLite or Redis)
    #[command(subcommand)]
    Jobs(jobs::JobsCommand),
    /// The programs --classic runs (CPython, MRI, Go, Node.js, Java, Elixir, C++, C# on Mono): install, show
    #[command(subcommand)]
    Classic(classic::ClassicCommand),
    /// Join a hub (a Redis) as an agent: run the shares of studies sent from other hosts until told to leave or Ctrl-C
    Agent(crate::cli::agent::AgentArgs),
    /// List a hub's agents (name, address, cores, clock offset, last heartbeat, what each does), or tell them to leave
    Agents(agents::AgentsArgs),
    /// The keys of a hub's parties: a signing key of a study's or an agent's own (keygen), its public key (pubkey)
    #[command(subcommand)]
    Hub(hub::HubCommand),
    /// Print a shell completion script: concur completions bash > /etc/bash_completion.d/concur
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// One run of one cell, started by `concur run` (its request comes on fd 4, never argv)
    #[command(name = crate::model::selfcall::SelfCall::RUN, hide = true)]
    InternalRun(InternalArgs),
    /// One task of the spawn model, started by a run (its request comes on fd 4)
    #[command(name = crate::model::selfcall::SelfCall::TASK, hide = true)]
    InternalTask(InternalArgs),
    /// One worker process of the jobs-procs model, started by a run (its request comes on fd 4)
    #[command(name = crate::model::selfcall::SelfCall::WORKER, hide = true)]
    InternalWorker(InternalArgs),
    /// The worker process of `concur jobs work`, started by it (its request comes on fd 4)
    #[command(name = crate::model::selfcall::SelfCall::QUEUE_WORKER, hide = true)]
    InternalQueueWorker(InternalArgs),
}

/// The hidden commands take nothing on argv (their request comes on fd 4). Whatever is given
/// there anyway is accepted and ignored, so that every hand-made invocation, old-style
/// request argument included, gets the same one-line "run by concur itself" refusal.
#[derive(Args)]
struct InternalArgs {
    #[arg(hide = true, trailing_var_arg = true, allow_hyphen_values = true)]
    _ignored: Vec<String>,
}

/// Whether failed runs and tasks still exit 0 (`-i`).
#[derive(Args)]
struct FailureArgs {
    /// Exit 0 even when runs or tasks failed (they are still counted and shown)
    #[arg(long, short = 'i')]
    ignore_failures: bool,
}

/// `concur run`: a study's options, its results file, its outputs.
#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    study: StudyOptions,
    /// The JSON Lines results file, written as runs finish ('-' for stdout; default concur-results/STUDY-TIME.jsonl)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    #[command(flatten)]
    out: OutputOptions,
    #[command(flatten)]
    failures: FailureArgs,
}

/// `concur crawl`'s counted runs when `-r` is not given (and `--rate` is not `auto`).
const CRAWL_REPEAT: usize = 1;

/// `concur crawl`: one URL under one model.
#[derive(Args)]
struct CrawlArgs {
    /// The URL to GET, fetched as given (http://HOST:PORT/PATH); every {rand} becomes 10 random letters
    url: String,
    /// How many requests (default 1000; with --rate --duration, as many as the duration holds)
    #[arg(short = 'n', long)]
    requests: Option<usize>,
    /// How many at once (the model's W)
    #[arg(short = 'c', long, default_value_t = 100)]
    concurrency: usize,
    /// The model (MODELS); -c is its W
    #[arg(long, default_value = "async")]
    model: String,
    #[command(flatten)]
    repeat: RepeatArg,
    #[command(flatten)]
    request: RequestOptions,
    /// The JSON Lines results file ('-' for stdout)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    #[command(flatten)]
    peers: PeerOptions,
    #[command(flatten)]
    open: OpenOptions,
    #[command(flatten)]
    hub: HubOptions,
    #[command(flatten)]
    out: OutputOptions,
    #[command(flatten)]
    failures: FailureArgs,
    /// The most tasks each run's timeline and trace keep (1 to 1,000,000), sampled evenly by task index when a run has more
    #[arg(long, value_name = "N", default_value = "10000", value_parser = crate::model::selfcall::parse_trace_tasks)]
    trace_tasks: usize,
}

#[derive(Args)]
struct AdviseArgs {
    /// The workload spec to advise on, e.g. fib:30 or sleep:100ms
    #[arg(long = "workload", short = 'w', value_name = "SPEC")]
    workload: String,
    /// Tasks per cell (default 10; with --rate, --duration sizes the cells instead)
    #[arg(long = "tasks", short = 'n', value_name = "N")]
    tasks: Option<usize>,
    #[command(flatten)]
    repeat: RepeatArg,
    /// Write the advice, the cells and the warnings as one JSON document to FILE ('-' for stdout)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// The JSON Lines results file of the runs (default concur-results/custom-TIME.jsonl)
    #[arg(long, value_name = "FILE")]
    results: Option<PathBuf>,
    #[command(flatten)]
    cmd: CmdOptions,
    #[command(flatten)]
    open: OpenOptions,
    #[command(flatten)]
    out: OutputOptions,
    #[command(flatten)]
    failures: FailureArgs,
}

#[derive(Args)]
struct ReportArgs {
    /// A results file written by `concur run`
    file: PathBuf,
    #[command(flatten)]
    out: OutputOptions,
}

fn dispatch(cli: Cli) -> Result<i32, Error> {
    match cli.command {
        Command::Run(mut a) => {
            a.study.hub = a.study.hub.from_env();
            crate::study::conduct::run(
                &a.study,
                &a.out.outputs(a.json, a.failures.ignore_failures),
                crate::study::conduct::command_line(),
            )
        }
        Command::Report(a) => {
            crate::study::conduct::report_file(&a.file, &a.out.outputs(None, false))
        }
        Command::Crawl(a) => {
            let takes_workers = crate::model::REGISTRY
                .iter()
                .any(|e| e.name == a.model && e.takes_workers);
            let model = if takes_workers {
                format!("{}:{}", a.model, a.concurrency)
            } else {
                a.model.clone()
            };
            // --rate auto sizes its probes itself; --duration sizes the run.
            let tasks = match a.requests {
                Some(n) => vec![n],
                None if a.open.is_auto() || a.open.duration.is_some() => vec![],
                None => vec![1000],
            };
            let opts = StudyOptions {
                workloads: vec![format!("http:{}", a.url)],
                models: vec![model],
                tasks,
                repeat: RepeatArg {
                    repeat: a.repeat.repeat.or(a.open.default_repeat(CRAWL_REPEAT)),
                },
                warmup: Some(0),
                request: a.request,
                peers: a.peers,
                open: a.open,
                hub: a.hub.from_env(),
                run: crate::plan::options::RunSettings {
                    trace_tasks: a.trace_tasks,
                    ..Default::default()
                },
                ..StudyOptions::default()
            };
            crate::study::conduct::run(
                &opts,
                &a.out.outputs(a.json, a.failures.ignore_failures),
                crate::study::conduct::command_line(),
            )
        }
        Command::Serve(a) => serve::run(a),
        Command::Advise(mut a) => {
            if let Some(file) = a.json.take() {
                a.out.export.push(Export {
                    format: "json".into(),
                    target: Target::from_arg(file),
                    flag: "--json",
                });
            }
            let base = StudyOptions {
                cmd: a.cmd,
                open: a.open,
                ..StudyOptions::default()
            };
            crate::study::conduct::advise(
                &a.workload,
                a.tasks,
                a.repeat.repeat,
                base,
                &a.out.outputs(a.results, a.failures.ignore_failures),
                crate::study::conduct::command_line(),
            )
        }
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut help::command(),
                "concur",
                &mut std::io::stdout(),
            );
            Ok(0)
        }
        Command::Jobs(c) => jobs::jobs(c),
        Command::Agent(a) => crate::cli::agent::agent(a),
        Command::Agents(a) => agents::agents(a),
        Command::Hub(c) => hub::hub(c),
        Command::Classic(c) => classic::classic(c),
        Command::List => {
            help::list();
            Ok(0)
        }
        // Served in `main` before parsing; listed so that `--help` and completions know
        // them as hidden commands.
        Command::InternalRun(_)
        | Command::InternalTask(_)
        | Command::InternalWorker(_)
        | Command::InternalQueueWorker(_) => crate::runner::child::serve().map(|_| 0),
    }
}

/// Parses the command line, runs the subcommand, and returns the exit code: the library's,
/// 2 for bad input (with one line on stderr), 0 when stdout was closed early (`| head`).
pub fn main() -> ExitCode {
    // A child of a study (a run, each task of `spawn`, a queue worker) takes nothing from
    // argv: it serves its fd-4 request without building the help texts, which a spawned task
    // would otherwise pay for on every start.
    let done = if crate::model::selfcall::SelfCall::started_as_child() {
        crate::runner::child::serve().map(|_| 0)
    } else {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        match help::command()
            .try_get_matches_from(&args)
            .and_then(|m| Cli::from_arg_matches(&m))
        {
            Ok(cli) => dispatch(cli),
            // --help and --version, and the help shown for a bare `concur jobs`.
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::DisplayHelp
                        | ErrorKind::DisplayVersion
                        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                ) =>
            {
                e.exit()
            }
            Err(e) => Err(crate::cli::usage_error::error(&e, &args)),
        }
    };
    match done {
        Ok(code) => ExitCode::from(code as u8),
        Err(Error::ClosedStdout) => ExitCode::SUCCESS,
        Err(e) => {
            crate::os::terminal::fatal(&e);
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
