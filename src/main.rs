//! The `concur` command line: parse flags with clap, call the library, set the exit code.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use concur::report::{Export, Target};
use concur::study::RunOptions;
use concur::workload::MailSink;
use concur::{units, Error, Outputs};

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
struct Cli {
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
    Serve(ServeArgs),
    /// Run the few cells that show what bounds a workload, and advise which model to use
    Advise(AdviseArgs),
    /// Background jobs: enqueue, work, stats, retry and dead sets (SQLite or Redis)
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// The classic experiments' programs in CPython and MRI that --classic runs: install, show
    #[command(subcommand)]
    Classic(ClassicCommand),
    /// Print a shell completion script: concur completions bash > /etc/bash_completion.d/concur
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// One run of one cell, started by `concur run` (its request comes on fd 4, never argv)
    #[command(name = concur::selfcall::SelfCall::RUN, hide = true)]
    InternalRun(InternalArgs),
    /// One task of the spawn model, started by a run (its request comes on fd 4)
    #[command(name = concur::selfcall::SelfCall::TASK, hide = true)]
    InternalTask(InternalArgs),
}

/// The hidden commands take nothing on argv (their request comes on fd 4). Whatever is given
/// there anyway is accepted and ignored, so that every hand-made invocation, old-style
/// request argument included, gets the same one-line "run by concur itself" refusal.
#[derive(Args)]
struct InternalArgs {
    #[arg(hide = true, trailing_var_arg = true, allow_hyphen_values = true)]
    _ignored: Vec<String>,
}

#[derive(Args)]
struct OutputArgs {
    /// Also write a CSV of the cells to FILE ('-' for stdout)
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Also write Markdown tables to FILE ('-' for stdout)
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Also write one self-contained HTML report with charts to FILE
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Compare with a baseline: a name saved with --save-baseline, or a results file
    #[arg(long, value_name = "NAME|FILE")]
    baseline: Option<String>,
    /// Save these results as a baseline under concur-results/baselines/NAME.jsonl
    #[arg(long, value_name = "NAME")]
    save_baseline: Option<String>,
    /// What stdout shows (FORMATS)
    #[arg(long, value_name = "FORMAT", default_value = "table")]
    format: String,
    /// Also write a rendering to a file, FORMAT=FILE ('-' for stdout), repeatable (FORMATS)
    #[arg(long, value_name = "FORMAT=FILE", value_parser = Export::parse)]
    export: Vec<Export>,
    /// No progress bar, notes or warnings on stderr
    #[arg(long, short)]
    quiet: bool,
}

/// Flags of the `cmd:` workload.
#[derive(Args)]
struct CmdArgs {
    /// Run cmd: workloads under sh -c (pipes, globs, variables) instead of splitting their words
    #[arg(long)]
    shell: bool,
    /// Keep each cmd: task's stdout and stderr, of every run, as DIR/MODEL-xN/rep-R/task-I.out and .err (R as the results' "rep"; warm-ups in warmup-K; with several -w, MODEL-xN starts with wK-, K the workload's place)
    #[arg(long, value_name = "DIR")]
    cmd_output: Option<PathBuf>,
}

/// External cells and hyperfine's hooks.
#[derive(Args)]
struct PeerArgs {
    /// An external program that brings its own concurrency, one more row per task count: LABEL=COMMAND, run with sh -c, {tasks} {workers} {url} replaced; a line `CONCUR {"wall_s":S}` on its stdout reports the work's own wall (repeatable)
    #[arg(long = "peer", value_name = "LABEL=COMMAND")]
    peers: Vec<String>,
    /// Command (sh -c) run once before each cell's first run
    #[arg(long, value_name = "CMD")]
    setup: Option<String>,
    /// Command (sh -c) run before every run
    #[arg(long, value_name = "CMD")]
    prepare: Option<String>,
    /// Command (sh -c) run after every run
    #[arg(long, value_name = "CMD")]
    conclude: Option<String>,
    /// Command (sh -c) run once after each cell's last run
    #[arg(long, value_name = "CMD")]
    cleanup: Option<String>,
}

impl PeerArgs {
    fn hooks(&self) -> concur::study::plan::Hooks {
        concur::study::plan::Hooks {
            setup: self.setup.clone(),
            prepare: self.prepare.clone(),
            conclude: self.conclude.clone(),
            cleanup: self.cleanup.clone(),
        }
    }

    /// The `--peer` values, parsed; a bad one is a one-line usage error.
    fn peers(&self) -> Result<Vec<concur::study::plan::PeerRequest>, Error> {
        self.peers
            .iter()
            .map(|p| concur::study::plan::PeerRequest::parse(p).map_err(Error::usage))
            .collect()
    }
}

/// Open-model runs: tasks arrive at a rate instead of all at once.
#[derive(Args)]
struct OpenArgs {
    /// Release tasks at R per second (open model; latency counted from each task's scheduled time), a ramp A..B rising over the run, or auto (with --slo: the highest rate each model sustains)
    #[arg(long, value_name = "R|A..B|auto", allow_hyphen_values = true)]
    rate: Option<String>,
    /// With --rate: release tasks for this long (instead of -n; default 5s, 2s per --rate auto probe)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<std::time::Duration>,
    /// With --rate: the time series' interval (and of the live line on stderr)
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    interval: std::time::Duration,
    /// With --rate auto: the latency to keep, PERCENTILE<DURATION (p50, p90, p99, p999, max), e.g. 'p99<100ms'
    #[arg(long, value_name = "SLO")]
    slo: Option<String>,
}

impl From<OpenArgs> for concur::study::plan::OpenOptions {
    fn from(a: OpenArgs) -> Self {
        concur::study::plan::OpenOptions {
            rate: a.rate,
            duration: a.duration,
            interval: a.interval,
            slo: a.slo,
        }
    }
}

#[derive(Args)]
struct FailureArgs {
    /// Exit 0 even when runs or tasks failed (they are still counted and shown)
    #[arg(long, short = 'i')]
    ignore_failures: bool,
}

/// What every HTTP request sends and how it connects (`run` and `crawl`).
#[derive(Args)]
struct RequestArgs {
    /// A request header 'Name: value', repeatable; {rand} and {i} work in the value
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    /// The request method (GET by default)
    #[arg(long, value_name = "METHOD")]
    method: Option<String>,
    /// The request body: a file, or @- for standard input; {rand} and {i} work in it
    #[arg(long, value_name = "FILE")]
    body: Option<String>,
    /// Trust the CA certificates in FILE (PEM) besides the system's roots
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// Do not verify server certificates (as curl's -k)
    #[arg(short = 'k', long)]
    insecure: bool,
    /// Open a new connection (and TLS session) for every request
    #[arg(long)]
    no_keepalive: bool,
}

/// The workload options a `jobs-procs` run hands its worker processes (see
/// [`concur::selfcall::WORKLOAD_OPTIONS_ENV`]); the defaults otherwise.
fn workload_options_from_env() -> Result<concur::workload::WorkloadOptions, Error> {
    match std::env::var(concur::selfcall::WORKLOAD_OPTIONS_ENV) {
        Err(_) => Ok(concur::workload::WorkloadOptions::default()),
        Ok(json) => serde_json::from_str(&json).map_err(|e| {
            Error::usage(format!(
                "{} is not the workload options concur writes: {e}",
                concur::selfcall::WORKLOAD_OPTIONS_ENV
            ))
        }),
    }
}

impl RequestArgs {
    fn apply(self, o: &mut RunOptions) {
        o.headers = self.headers;
        o.method = self.method;
        o.body = self.body;
        o.cacert = self.cacert;
        o.insecure = self.insecure;
        o.no_keepalive = self.no_keepalive;
    }
}

#[derive(Args)]
struct RunArgs {
    /// Built-in study (STUDIES)
    study: Option<String>,
    /// Workload spec for a free-form study, repeatable (WORKLOADS); an http URL is fetched as given, every {rand} in it becomes 10 random letters
    #[arg(long = "workload", short = 'w', value_name = "SPEC")]
    workloads: Vec<String>,
    /// Model spec for a free-form study, repeatable (MODELS)
    #[arg(long = "model", short = 'm', value_name = "SPEC")]
    models: Vec<String>,
    /// Task counts for a free-form study (repeatable or comma-separated; default 10)
    #[arg(long = "tasks", short = 'n', value_name = "N", value_delimiter = ',')]
    tasks: Vec<usize>,
    /// Counted runs per cell (default: 5 for gil and free-form, 3 for mailer and the tour); with --rate auto, fresh runs at each cell's rate found after its search (default: none, the probe that found it is the row)
    #[arg(long, short = 'r', value_name = "R")]
    repeat: Option<usize>,
    /// Uncounted warm-up runs per cell before the counted ones (not with --rate auto, whose search probes the cell first)
    #[arg(long, value_name = "N")]
    warmup: Option<usize>,
    /// Scale the built-in study down to seconds
    #[arg(long)]
    quick: bool,
    /// mailer: add a 30,000-thread cell, past this machine's thread limit
    #[arg(long)]
    stress: bool,
    /// Emulate an interpreter lock (CPython's GIL, MRI's GVL) in every run
    #[arg(long)]
    gil: bool,
    /// The emulated lock's switch interval
    #[arg(long, value_name = "DURATION", default_value = "5ms", value_parser = parse_duration)]
    switch_interval: std::time::Duration,
    /// Kill a run that takes longer than this and record it as timed out
    #[arg(long, value_name = "DURATION", default_value = "300s", value_parser = parse_duration)]
    timeout: std::time::Duration,
    /// Stack size of the threads that models create (thread, pool, rayon, async)
    #[arg(long, value_name = "SIZE", default_value = "2M", value_parser = parse_size)]
    stack_size: u64,
    /// Where the mail workload writes its mails
    #[arg(long, value_enum, default_value = "discard")]
    mail_sink: MailSink,
    /// The server that http:/PATH workloads (and the crawl study) fetch from; by default
    /// concur starts its own delay server in-process on a free loopback port
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// How long one HTTP request may take, connect to last byte
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    request_timeout: std::time::Duration,
    /// crawl: run the seq cell with all 1000 requests (100 s) instead of 50
    #[arg(long)]
    full: bool,
    /// Run the study's own server over TLS (a self-signed certificate its clients trust)
    #[arg(long)]
    tls: bool,
    #[command(flatten)]
    request: RequestArgs,
    /// Queue of the jobs models: sqlite:PATH for jobs:W (default: a fresh file per run), redis://[:PASSWORD@]HOST:PORT/DB for jobs-redis:W (mailer then adds it); with a password, set CONCUR_JOBS_BACKEND instead, which `ps` does not show
    #[arg(long, value_name = "URL", env = concur::jobs::BACKEND_ENV, hide_env_values = true)]
    jobs_backend: Option<String>,
    /// gil, mailer, crawl, tour: add the classic programs in CPython and MRI as external cells (py:…, rb:…); see `concur classic`
    #[arg(long)]
    classic: bool,
    /// The JSON Lines results file, written as runs finish ('-' for stdout; default concur-results/STUDY-TIME.jsonl)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    #[command(flatten)]
    cmd: CmdArgs,
    #[command(flatten)]
    peer: PeerArgs,
    #[command(flatten)]
    open: OpenArgs,
    #[command(flatten)]
    out: OutputArgs,
    #[command(flatten)]
    failures: FailureArgs,
}

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
    /// Counted runs (default 1); with --rate auto, fresh runs at the rate found after the search (default: none, the probe that found it is the row)
    #[arg(long, short = 'r', value_name = "R")]
    repeat: Option<usize>,
    /// How long one request may take
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    request_timeout: std::time::Duration,
    #[command(flatten)]
    request: RequestArgs,
    /// The JSON Lines results file ('-' for stdout)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    #[command(flatten)]
    peer: PeerArgs,
    #[command(flatten)]
    open: OpenArgs,
    #[command(flatten)]
    out: OutputArgs,
    #[command(flatten)]
    failures: FailureArgs,
}

#[derive(Args)]
struct AdviseArgs {
    /// The workload spec to advise on, e.g. fib:30 or sleep:100ms
    #[arg(long = "workload", short = 'w', value_name = "SPEC")]
    workload: String,
    /// Tasks per cell (default 10; with --rate, --duration sizes the cells instead)
    #[arg(long = "tasks", short = 'n', value_name = "N")]
    tasks: Option<usize>,
    /// Counted runs per cell (default 3); with --rate auto, fresh runs at each cell's rate found after its search (default: none, the probe that found it is the row)
    #[arg(long, short = 'r', value_name = "R")]
    repeat: Option<usize>,
    /// Write the advice, the cells and the warnings as one JSON document to FILE ('-' for stdout)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// The JSON Lines results file of the runs (default concur-results/custom-TIME.jsonl)
    #[arg(long, value_name = "FILE")]
    results: Option<PathBuf>,
    #[command(flatten)]
    cmd: CmdArgs,
    #[command(flatten)]
    open: OpenArgs,
    #[command(flatten)]
    out: OutputArgs,
    #[command(flatten)]
    failures: FailureArgs,
}

#[derive(Args)]
struct ServeArgs {
    /// Address to listen on (loopback by default)
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: std::net::SocketAddr,
    /// Longest delay a request may ask for; longer ones get a 400
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    max_delay: std::time::Duration,
    /// Largest body /bytes/N sends; larger ones get a 400
    #[arg(long, value_name = "SIZE", default_value = "10M", value_parser = parse_size)]
    max_bytes: u64,
    /// Close a connection whose client sends no complete request headers for this long
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    header_timeout: std::time::Duration,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_key",
        conflicts_with = "tls_self_signed"
    )]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve HTTPS with a new self-signed certificate for the listen address; its path and
    /// SHA-256 fingerprint are printed (trust it with --cacert)
    #[arg(long)]
    tls_self_signed: bool,
    /// Print nothing on stderr
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args)]
struct ReportArgs {
    /// A results file written by `concur run`
    file: PathBuf,
    #[command(flatten)]
    out: OutputArgs,
}

/// `--backend`: where the queue lives.
#[derive(Args)]
struct BackendArg {
    /// sqlite (concur-results/jobs.sqlite), sqlite:PATH, or redis://[:PASSWORD@]HOST:PORT/DB; with a password, set CONCUR_JOBS_BACKEND instead, which `ps` does not show
    #[arg(long, value_name = "URL", default_value = "sqlite", env = concur::jobs::BACKEND_ENV, hide_env_values = true)]
    backend: String,
}

#[derive(Subcommand)]
enum JobsCommand {
    /// Enqueue N jobs, each running one task of a workload (class Concur::Task)
    Enqueue {
        /// The workload spec each job runs (e.g. fib:30, mail, sleep:10ms)
        #[arg(
            long,
            short = 'w',
            value_name = "SPEC",
            required_unless_present = "noop"
        )]
        workload: Option<String>,
        /// Enqueue jobs that do nothing (class Concur::Noop), for throughput measurements
        #[arg(long, conflicts_with = "workload")]
        noop: bool,
        /// How many jobs
        #[arg(short = 'n', value_name = "N")]
        n: usize,
        /// The queue
        #[arg(long, short = 'q', default_value = "default")]
        queue: String,
        /// Retries before the dead set (Sidekiq's default: 25)
        #[arg(long, value_name = "N")]
        retry: Option<u32>,
        #[command(flatten)]
        b: BackendArg,
    },
    /// Work on queues until SIGTERM or Ctrl-C (run it on as many machines as share one Redis)
    Work {
        /// Worker threads
        #[arg(short = 'c', long, default_value = "10")]
        concurrency: usize,
        /// Queues in priority order (repeatable; default: default)
        #[arg(long = "queue", short = 'q', value_name = "Q")]
        queues: Vec<String>,
        /// Lease (SQLite) or heartbeat TTL (Redis): a dead worker's jobs return after this
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
        lease: std::time::Duration,
        /// After SIGTERM, how long running jobs may finish before they are returned to their queue
        #[arg(long, value_name = "DURATION", default_value = "25s", value_parser = parse_duration)]
        shutdown_timeout: std::time::Duration,
        /// A fixed delay before each retry instead of Sidekiq's backoff (count^4 + 15 + jitter s)
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        retry_delay: Option<std::time::Duration>,
        /// Append each job id to FILE after it ran, before its acknowledgement (duplicate audits)
        #[arg(long, value_name = "FILE")]
        done_log: Option<PathBuf>,
        /// Exit once the queues, in-flight jobs and retries are empty
        #[arg(long)]
        until_empty: bool,
        /// Append each task job's record (JSON line) to FILE once acknowledged (for jobs-procs:W)
        #[arg(long, value_name = "FILE", hide = true)]
        records: Option<PathBuf>,
        #[command(flatten)]
        b: BackendArg,
    },
    /// Counts: enqueued, busy, processed, failed, retry, dead, workers alive
    Stats {
        /// One JSON object instead of a table
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        b: BackendArg,
    },
    /// List the retry set (one JSON job a line), or requeue it all now
    Retry(FailedSetArgs),
    /// List the dead set (one JSON job a line), or requeue it all
    Dead(FailedSetArgs),
}

#[derive(Subcommand)]
enum ClassicCommand {
    /// Install Ruby, Celluloid, Sidekiq (apt-get) and the Python clients (a venv with pip)
    Install,
    /// Print a classic program's source (gil, crawl, mailer)
    Show {
        /// The program
        name: String,
    },
    /// List the classic programs
    List,
}

fn classic(c: ClassicCommand) -> Result<i32, Error> {
    match c {
        ClassicCommand::Install => concur::classic::install(),
        ClassicCommand::Show { name } => {
            print!("{}", concur::classic::show(&name)?);
            Ok(0)
        }
        ClassicCommand::List => {
            for p in concur::classic::PROGRAMS {
                println!("  {:8} {:10} {}", p.name, p.file, p.help);
            }
            Ok(0)
        }
    }
}

#[derive(Args)]
struct FailedSetArgs {
    /// Move every job of the set back onto its queue
    #[arg(long)]
    requeue: bool,
    /// List at most this many
    #[arg(long, default_value = "100")]
    limit: usize,
    #[command(flatten)]
    b: BackendArg,
}

fn jobs(c: JobsCommand) -> Result<i32, Error> {
    use concur::jobs::{cli, worker::WorkOptions, FailedSet, RetrySchedule};
    match c {
        JobsCommand::Enqueue {
            workload,
            noop: _,
            n,
            queue,
            retry,
            b,
        } => cli::enqueue(&b.backend.parse()?, workload.as_deref(), n, &queue, retry),
        JobsCommand::Work {
            concurrency,
            queues,
            lease,
            shutdown_timeout,
            retry_delay,
            done_log,
            until_empty,
            records,
            b,
        } => {
            let opts = WorkOptions {
                concurrency,
                queues: cli::queues_or_default(queues),
                lease,
                schedule: retry_delay.map_or(RetrySchedule::Sidekiq, RetrySchedule::Fixed),
                shutdown_deadline: shutdown_timeout,
                done_log,
                until_empty,
                records,
                workload_options: workload_options_from_env()?,
            };
            cli::work_main(&b.backend.parse()?, &opts)
        }
        JobsCommand::Stats { json, b } => cli::stats(&b.backend.parse()?, json),
        JobsCommand::Retry(a) => {
            cli::failed_set(&a.b.backend.parse()?, FailedSet::Retry, a.requeue, a.limit)
        }
        JobsCommand::Dead(a) => {
            cli::failed_set(&a.b.backend.parse()?, FailedSet::Dead, a.requeue, a.limit)
        }
    }
}

/// `concur serve`'s TLS flags: a certificate from files, a self-signed one (made when the
/// server binds, for its address), or none.
fn serve_tls(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    self_signed: bool,
) -> Result<Option<concur::server::ServeTls>, Error> {
    Ok(match (cert, key) {
        (Some(c), Some(k)) => Some(concur::server::ServeTls::Files(
            concur::tls::ServerCert::from_files(&c, &k).map_err(Error::usage)?,
        )),
        _ if self_signed => Some(concur::server::ServeTls::SelfSigned),
        _ => None,
    })
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    units::parse_duration(s)
}

fn parse_size(s: &str) -> Result<u64, String> {
    units::parse_size(s)
}

/// The renderings asked for: the file flags and `--export`, and stdout's `--format` unless
/// one of them, or the results file, already goes to stdout.
fn outputs(o: OutputArgs, results: Option<PathBuf>, ignore_failures: bool) -> Outputs {
    let mut exports: Vec<Export> = [("csv", o.csv), ("markdown", o.markdown), ("html", o.html)]
        .into_iter()
        .filter_map(|(format, file)| {
            file.map(|f| Export {
                format: format.into(),
                target: Target::from_arg(f),
            })
        })
        .chain(o.export)
        .collect();
    let stdout_taken = exports.iter().any(|e| e.target == Target::Stdout)
        || results.as_deref() == Some(std::path::Path::new("-"));
    if !stdout_taken {
        exports.push(Export {
            format: o.format,
            target: Target::Stdout,
        });
    }
    Outputs {
        results,
        exports,
        baseline: o.baseline,
        save_baseline: o.save_baseline,
        quiet: o.quiet,
        ignore_failures,
    }
}

fn list() {
    println!("Workloads (--workload SPEC):");
    for e in concur::workload::REGISTRY {
        println!("  {:28} {}", e.usage, e.help);
    }
    println!("\nModels (--model SPEC; W defaults to the core count):");
    for e in concur::model::REGISTRY {
        println!("  {:28} {}", e.usage(), e.help);
    }
    println!("\nStudies (concur run STUDY):");
    for (name, help) in concur::study::presets::STUDIES {
        println!("  {name:28} {help}");
    }
    println!("\nOutput formats (--format FORMAT, --export FORMAT=FILE):");
    for f in concur::report::FORMATS {
        println!("  {:28} {}", f.name, f.help);
    }
}

fn dispatch(cli: Cli) -> Result<i32, Error> {
    match cli.command {
        Command::Run(a) => {
            let mut opts = RunOptions {
                study: a.study,
                name: None,
                workloads: a.workloads,
                models: a.models,
                tasks: a.tasks,
                gil: a.gil,
                switch_interval: a.switch_interval,
                repeat: a.repeat,
                warmup: a.warmup,
                quick: a.quick,
                stress: a.stress,
                timeout: a.timeout,
                stack_size: usize::try_from(a.stack_size).unwrap_or(usize::MAX),
                mail_sink: a.mail_sink,
                url: a.url,
                request_timeout: a.request_timeout,
                full: a.full,
                tls: a.tls,
                jobs_backend: a.jobs_backend,
                shell: a.cmd.shell,
                cmd_output: a.cmd.cmd_output,
                hooks: a.peer.hooks(),
                peers: a.peer.peers()?,
                classic: a.classic,
                open: a.open.into(),
                ..RunOptions::default()
            };
            a.request.apply(&mut opts);
            concur::run(
                &opts,
                &outputs(a.out, a.json, a.failures.ignore_failures),
                std::env::args().collect(),
            )
        }
        Command::Report(a) => concur::report_file(&a.file, &outputs(a.out, None, false)),
        Command::Crawl(a) => {
            let takes_workers = concur::model::REGISTRY
                .iter()
                .any(|e| e.name == a.model && e.takes_workers);
            let model = if takes_workers {
                format!("{}:{}", a.model, a.concurrency)
            } else {
                a.model.clone()
            };
            let open: concur::study::plan::OpenOptions = a.open.into();
            // --rate auto sizes its probes itself; --duration sizes the run.
            let tasks = match a.requests {
                Some(n) => vec![n],
                None if open.is_auto() || open.duration.is_some() => vec![],
                None => vec![1000],
            };
            let mut opts = RunOptions {
                workloads: vec![format!("http:{}", a.url)],
                models: vec![model],
                tasks,
                // --rate auto without -r: the probe that found the rate is the run.
                repeat: a.repeat.or((!open.is_auto()).then_some(1)),
                warmup: Some(0),
                request_timeout: a.request_timeout,
                hooks: a.peer.hooks(),
                peers: a.peer.peers()?,
                open,
                ..RunOptions::default()
            };
            a.request.apply(&mut opts);
            concur::run(
                &opts,
                &outputs(a.out, a.json, a.failures.ignore_failures),
                std::env::args().collect(),
            )
        }
        Command::Serve(a) => {
            let opts = concur::server::ServerOptions {
                addr: a.addr,
                max_delay: a.max_delay,
                max_bytes: a.max_bytes,
                header_timeout: a.header_timeout,
                tls: serve_tls(a.tls_cert, a.tls_key, a.tls_self_signed)?,
                ..Default::default()
            };
            concur::server::run_foreground(opts, a.quiet).map(|_| 0)
        }
        Command::Advise(mut a) => {
            if let Some(file) = a.json.take() {
                a.out.export.push(Export {
                    format: "json".into(),
                    target: Target::from_arg(file),
                });
            }
            let tasks = a.tasks;
            let base = RunOptions {
                shell: a.cmd.shell,
                cmd_output: a.cmd.cmd_output,
                open: a.open.into(),
                ..RunOptions::default()
            };
            concur::advise(
                &a.workload,
                tasks,
                a.repeat,
                base,
                &outputs(a.out, a.results, a.failures.ignore_failures),
                std::env::args().collect(),
            )
        }
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut command(), "concur", &mut std::io::stdout());
            Ok(0)
        }
        Command::Jobs(c) => jobs(c),
        Command::Classic(c) => classic(c),
        Command::List => {
            list();
            Ok(0)
        }
        Command::InternalRun(_) => concur::study::child::run_main().map(|_| 0),
        Command::InternalTask(_) => concur::study::child::task_main().map(|_| 0),
    }
}

/// The command line's definition, with the lists in its help made from the registries (so a
/// new workload, model, study or format cannot be missing from them).
fn command() -> clap::Command {
    let workloads = concur::workload::REGISTRY
        .iter()
        .map(|e| e.usage)
        .collect::<Vec<_>>()
        .join(", ");
    let models = concur::model::REGISTRY
        .iter()
        .map(|e| e.usage())
        .collect::<Vec<_>>()
        .join(", ");
    let studies = concur::study::presets::STUDIES
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ");
    let formats = concur::report::format_names().join(", ");
    let fill = |a: clap::Arg| -> clap::Arg {
        let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        if !help.contains(char::is_uppercase) {
            return a;
        }
        let filled = help
            .replace("(WORKLOADS)", &format!("({workloads})"))
            .replace("(MODELS)", &format!("({models})"))
            .replace("(STUDIES)", &format!("(default tour; {studies})"))
            .replace("(FORMATS)", &format!("({formats})"));
        if filled == help {
            a
        } else {
            a.help(filled)
        }
    };
    let fill_all = |c: clap::Command| -> clap::Command {
        let ids: Vec<String> = c.get_arguments().map(|a| a.get_id().to_string()).collect();
        ids.iter().fold(c, |c, id| c.mut_arg(id, fill))
    };
    let mut cmd = Cli::command();
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for n in names {
        cmd = cmd.mut_subcommand(n, fill_all);
    }
    cmd
}

fn main() -> ExitCode {
    let cli = match Cli::from_arg_matches(&command().get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match dispatch(cli) {
        Ok(code) => ExitCode::from(code as u8),
        Err(Error::ClosedStdout) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("concur: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
