//! The options a user gives a study, each defined once: every group here is at the same time
//! the command line's definition (`#[derive(Args)]`: the flag, its help, its default) and the
//! library's value ([`crate::Lab`] sets the same fields), so a default or a help text cannot
//! drift between the two. `Default` is what the command line gives when the flag is absent
//! ([`defaults`]), never a second copy of the values.
//!
//! These are raw values: the plan (`study::plan::build`) checks them, and nothing downstream
//! re-validates.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

pub use crate::jobs::BACKEND_ENV;
pub use crate::model::selfcall::RunSettings;
pub use crate::server::ServerOptions;

pub use crate::workload::MailSink;

/// What a study shows and writes besides its results file: renderings, the baseline, stderr's
/// quiet. `run`, `crawl`, `advise` and `report` flatten it; a library [`crate::Lab`] holds it
/// too (nothing on stdout, quiet), and [`OutputOptions::outputs`] makes either into the
/// [`crate::report::publish::Outputs`] that publishing takes.
#[derive(Args, Debug, Clone, PartialEq)]
pub struct OutputOptions {
    /// Also write a CSV of the cells to FILE ('-' for stdout)
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write Markdown tables to FILE ('-' for stdout)
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Also write one self-contained HTML report with charts to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Also write the task timelines, a lane per worker, as a Trace Event Format file for Perfetto or chrome://tracing to FILE (each cell's first run; the same as --export trace=FILE)
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Compare with a baseline: a name saved with --save-baseline, or a results file
    #[arg(long, value_name = "NAME|FILE")]
    pub baseline: Option<String>,
    /// With --baseline: exit 1 when any compared cell regressed (Mann-Whitney and the noise threshold), after everything is written, naming the cells on stderr
    #[arg(long, requires = "baseline")]
    pub fail_on_regression: bool,
    /// Save these results as a baseline under concur-results/baselines/NAME.jsonl
    #[arg(long, value_name = "NAME")]
    pub save_baseline: Option<String>,
    /// What stdout shows (STDOUT_FORMATS)
    // `None` (a library's lab): nothing.
    #[arg(long, value_name = "FORMAT", default_value = "table")]
    pub format: Option<String>,
    /// Also write a rendering to a file, FORMAT=FILE ('-' for stdout), repeatable (FORMATS)
    #[arg(long, value_name = "FORMAT=FILE", value_parser = export_parser())]
    pub export: Vec<crate::report::Export>,
    /// No progress bar, notes or warnings on stderr (the line saying why the exit status is not 0 stays)
    #[arg(long, short)]
    pub quiet: bool,
    /// Every warning on a line of its own, one per cell (without it, one line per kind names its cells), and the warm-up runs' live lines
    #[arg(long, short, conflicts_with = "quiet")]
    pub verbose: bool,
    /// No live view while the study runs: the progress bar and lines on stderr, as when stdout is not a terminal (the live view, on a terminal, shows each cell's runs, tasks, rate, latency, CPU and memory; q stops as Ctrl-C does)
    #[arg(long)]
    pub no_live: bool,
}

impl Default for OutputOptions {
    fn default() -> Self {
        defaults()
    }
}

/// `--export FORMAT=FILE`, read as bytes: a file name need not be UTF-8.
fn export_parser() -> impl clap::builder::TypedValueParser<Value = crate::report::Export> {
    use clap::builder::TypedValueParser;
    clap::builder::OsStringValueParser::new().try_map(|s| crate::report::Export::parse(&s))
}

impl OutputOptions {
    /// The outputs asked for, with the results file (`--json`, `advise`'s `--results`) and
    /// whether failures still exit 0 (`-i`): the file flags and `--export` as renderings,
    /// `--format` for stdout (whether stdout is free for it is decided with the rest, in
    /// `report::ExportManager`).
    pub fn outputs(
        self,
        results: Option<PathBuf>,
        ignore_failures: bool,
    ) -> crate::report::publish::Outputs {
        use crate::report::{Export, Target};
        let exports: Vec<Export> = [
            ("csv", "--csv", self.csv),
            ("markdown", "--markdown", self.markdown),
            ("html", "--html", self.html),
            ("trace", "--trace", self.trace),
        ]
        .into_iter()
        .filter_map(|(format, flag, file)| {
            file.map(|f| Export {
                format: format.into(),
                target: Target::from_arg(f),
                flag,
            })
        })
        .chain(self.export)
        .collect();
        crate::report::publish::Outputs {
            results,
            exports,
            stdout_format: self.format,
            baseline: self.baseline,
            save_baseline: self.save_baseline,
            fail_on_regression: self.fail_on_regression,
            quiet: self.quiet,
            verbose: self.verbose,
            no_live: self.no_live,
            ignore_failures,
        }
    }
}

pub use crate::base::clap_defaults::defaults;

/// Parses a duration flag (`5ms`, `2s`, `1m`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::base::units::parse_duration(s)
}

/// Parses a count (`-n`, `-r`, `--warmup`): a whole number, with what was wrong when it is not.
pub fn parse_count(s: &str) -> Result<usize, String> {
    if s.is_empty() {
        return Err("empty (two commas in a row?); expected a whole number such as 10".into());
    }
    s.parse().map_err(|_| {
        if s.starts_with('-') {
            "negative; expected a whole number such as 10".to_string()
        } else {
            "not a whole number; expected one such as 10".to_string()
        }
    })
}

/// A study's options: which cells, how they run, and the groups below. `concur run` is this
/// plus its output flags; `crawl` and `advise` fill in the few fields they set.
// The doc comments of the fields are the flags' help texts as users read them, grammar in
// brackets included (`redis://[:PASSWORD@]HOST`), not links.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Args, Debug, Clone)]
pub struct StudyOptions {
    /// Built-in study (STUDIES)
    pub study: Option<String>,
    /// The name of a free-form study (`custom` when `None`; a library lab's own name).
    #[arg(skip)]
    pub name: Option<String>,
    /// Workload spec for a free-form study, repeatable (WORKLOADS); an http URL is fetched as given, every {rand} in it becomes 10 random letters
    #[arg(long = "workload", short = 'w', value_name = "SPEC")]
    pub workloads: Vec<String>,
    /// Model spec for a free-form study, one model per flag (-m seq -m thread; a comma inside one spec lists worker counts, pool:1,2,4) (MODELS)
    #[arg(long = "model", short = 'm', value_name = "SPEC")]
    pub models: Vec<String>,
    /// Task counts for a free-form study (repeatable or comma-separated; default 10)
    #[arg(long = "tasks", short = 'n', value_name = "N", value_delimiter = ',', value_parser = parse_count, allow_negative_numbers = true)]
    pub tasks: Vec<usize>,
    /// Counted runs per cell (`-r`).
    #[command(flatten)]
    pub repeat: RepeatArg,
    /// Uncounted warm-up runs per cell before the counted ones (not with --rate auto, whose search probes the cell first)
    #[arg(long, value_name = "N", value_parser = parse_count, allow_negative_numbers = true)]
    pub warmup: Option<usize>,
    /// Scale the built-in study down to seconds
    #[arg(long)]
    pub quick: bool,
    /// mailer: add a 30,000-thread cell, past this machine's thread limit
    #[arg(long)]
    pub stress: bool,
    /// The interpreter-lock emulation.
    #[command(flatten)]
    pub lock: LockOptions,
    /// What every run's child reads: the lock's switch interval, the threads' stack size.
    #[command(flatten)]
    pub run: RunSettings,
    /// Kill a run that takes longer than this and record it as timed out
    #[arg(long, value_name = "DURATION", default_value = "300s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Where the mail workload writes its mails
    #[arg(long, value_enum, default_value = "discard")]
    pub mail_sink: MailSink,
    /// The server that http:/PATH workloads (and the crawl study) fetch from; by default
    /// concur starts its own delay server in-process on a free loopback port
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// crawl: run the seq cell with all 1000 requests (100 s) instead of 50
    #[arg(long)]
    pub full: bool,
    /// Run the study's own server over TLS (a self-signed certificate its clients trust)
    #[arg(long)]
    pub tls: bool,
    /// What every HTTP request sends and how it connects.
    #[command(flatten)]
    pub request: RequestOptions,
    /// The queue of the jobs models (`--jobs-backend`).
    #[command(flatten)]
    pub jobs_backend: JobsBackendArg,
    /// gil, mailer, crawl, tasks, tour: add the classic programs in CPython and MRI (py:…, rb:…) and the same work in Go, Node.js, Java, Elixir, C++ on asio and C# on Mono (go:…, node:…, java:…, elixir:…, cpp:…, csharp:…) as external cells, run by the toolchains on PATH; see `concur classic`
    #[arg(long)]
    pub classic: bool,
    /// The `cmd:` workload's flags.
    #[command(flatten)]
    pub cmd: CmdOptions,
    /// External cells and the hooks around runs.
    #[command(flatten)]
    pub peers: PeerOptions,
    /// Open-model runs.
    #[command(flatten)]
    pub open: OpenOptions,
    /// Other hosts.
    #[command(flatten)]
    pub hub: HubOptions,
}

/// The environment variable every command that takes `--hub` also reads it from.
pub const HUB_ENV: &str = "CONCUR_HUB";

/// The environment variable that names this party's signing key file (`--signing-key`).
pub const SIGNING_KEY_ENV: &str = "CONCUR_SIGNING_KEY";

/// What a host lets others choose through shared infrastructure: `concur agent`'s and
/// `concur jobs work`'s allow-lists ([`crate::workload::outside`]).
#[derive(Args, Debug, Clone, PartialEq, Default)]
pub struct AllowOptions {
    /// Run commands of others: `cmd:` workloads sent by a study or queued (refused without it)
    #[arg(long)]
    pub allow_commands: bool,
    /// Where load from others may go besides public addresses: host names, addresses and CIDR ranges, comma-separated, repeatable (e.g. 10.0.0.0/8); private and loopback targets are refused unless listed
    #[arg(long, value_name = "LIST")]
    pub allow_targets: Vec<String>,
}

impl AllowOptions {
    /// The checked policy; a bad item is one line naming it.
    pub fn allowed(&self) -> crate::base::error::Result<crate::workload::outside::Allowed> {
        let mut targets = crate::workload::outside::Targets::default();
        for list in &self.allow_targets {
            targets.extend(
                crate::workload::outside::Targets::parse(list)
                    .map_err(crate::base::error::Error::usage)?,
            );
        }
        Ok(crate::workload::outside::Allowed {
            commands: self.allow_commands,
            targets,
        })
    }
}

/// `-r`/`--repeat`, defined once for every command that runs cells: a study (`run`, through
/// [`StudyOptions`]), `crawl` and `advise`. `REPEATS` in its help is filled in with each
/// command's own defaults (`cli::help`).
#[derive(Args, Debug, Clone, Copy, PartialEq, Default)]
pub struct RepeatArg {
    /// Counted runs per cell (default: REPEATS); with --rate auto, fresh runs at each cell's rate found after its search (default: none, the probe that found it is the row)
    #[arg(long, short = 'r', value_name = "R", value_parser = parse_count, allow_negative_numbers = true)]
    pub repeat: Option<usize>,
}

/// `--jobs-backend`, defined once for every command that names a queue: `concur jobs` (where
/// `--backend`, its old name, still works), a study's jobs models (through [`StudyOptions`])
/// and `concur agent`.
// The field's doc comment is its flag's help, URL grammar in brackets, not links.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Args, Debug, Clone, PartialEq, Default)]
pub struct JobsBackendArg {
    /// The queue: sqlite (the default: concur-results/jobs.sqlite for `concur jobs`, a fresh file per run for a study's or an agent's jobs:W), sqlite:PATH (?synchronous=full syncs every commit; docs/jobs.md), or redis://[:PASSWORD@]HOST:PORT/DB (for jobs-redis:W, which mailer then adds); a study's own never travels to an agent, which uses its own; with a password, set CONCUR_JOBS_BACKEND instead, which `ps` does not show
    #[arg(long, value_name = "URL", env = BACKEND_ENV, hide_env_values = true)]
    pub jobs_backend: Option<String>,
}

impl JobsBackendArg {
    /// The queue named, parsed (`None`: not named); a bad one is one line naming the flag.
    pub fn parsed(&self) -> crate::base::error::Result<Option<crate::jobs::BackendUrl>> {
        self.jobs_backend
            .as_deref()
            .map(str::parse::<crate::jobs::BackendUrl>)
            .transpose()
            .map_err(|e| {
                crate::base::error::Error::flag("--jobs-backend", format!("--jobs-backend: {e}"))
            })
    }

    /// The queue named, else the default one (`sqlite`: what [`crate::jobs::BackendUrl::Sqlite`]
    /// with no path means where it is used).
    pub fn or_default(&self) -> crate::base::error::Result<crate::jobs::BackendUrl> {
        Ok(self.parsed()?.unwrap_or(crate::jobs::BackendUrl::Sqlite(
            None,
            crate::jobs::SqliteSync::default(),
        )))
    }
}

/// `--hub`, defined once for every command that reaches a hub: a study (`run`, `crawl`,
/// through [`HubOptions`]), `concur agent` and `concur agents`.
// The field's doc comment is its flag's help, URL grammar in brackets, not links.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Args, Debug, Clone, PartialEq, Default)]
pub struct HubArg {
    /// The hub, a Redis URL (redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], rediss:// for TLS): `concur agent --hub URL` joins it; a study given it runs every cell's work on its agents; also read from CONCUR_HUB
    #[arg(id = "hub", long = "hub", value_name = "URL")]
    pub url: Option<String>,
    /// This party's own Ed25519 signing key, a file `concur hub keygen --out FILE` wrote (never the key itself): a study signs its work with it, an agent its heartbeats and answers, `concur agents --stop` its stops; also read from CONCUR_SIGNING_KEY (a file's name). Without it, CONCUR_HUB_KEY (a shared secret: every holder is every party) or nothing signs
    #[arg(long, value_name = "FILE")]
    pub signing_key: Option<std::path::PathBuf>,
}

impl HubArg {
    /// `--hub`, else `CONCUR_HUB` (read here, by the command line, rather than by clap, so
    /// that a library's defaults never pick it up from the environment).
    pub fn from_env(mut self) -> HubArg {
        if self.url.is_none() {
            self.url = std::env::var(HUB_ENV).ok().filter(|s| !s.is_empty());
        }
        if self.signing_key.is_none() {
            self.signing_key = std::env::var_os(SIGNING_KEY_ENV)
                .filter(|s| !s.is_empty())
                .map(Into::into);
        }
        self
    }
}

/// Studies across machines: the hub the agents joined, and over how many of them each cell's
/// work is split.
#[derive(Args, Debug, Clone, PartialEq, Default)]
pub struct HubOptions {
    /// The hub (`--hub`).
    #[command(flatten)]
    pub hub: HubArg,
    /// With --hub: split each cell's work over K agents (default: every agent alive); a list (1,2,3) scans the host count
    #[arg(long, value_name = "K", value_delimiter = ',', value_parser = parse_count, allow_negative_numbers = true)]
    pub hosts: Vec<usize>,
    /// With --hub: run the study's delay server on this agent, which then generates no load (default: the first agent no cell needs, else this host)
    #[arg(long, value_name = "NAME")]
    pub server_host: Option<String>,
    /// With --hub and --signing-key: the agents' public keys, one a line with the agent's name after it (concur-ed25519:... NAME); answers are taken only from those. Without it, an agent's key is trusted on first sight, said, and pinned for the study
    #[arg(long, value_name = "FILE")]
    pub agent_keys: Option<std::path::PathBuf>,
}

impl HubOptions {
    /// The hub's URL (`--hub` or, from the command line, `CONCUR_HUB`), if a study is to run
    /// over hosts.
    pub fn url(&self) -> Option<&str> {
        self.hub.url.as_deref()
    }

    /// Sets the hub's URL (the library's `Lab::hub`).
    pub fn set_url(&mut self, url: &str) {
        self.hub.url = Some(url.to_string());
    }

    /// `--hub`, else `CONCUR_HUB` ([`HubArg::from_env`]).
    pub fn from_env(mut self) -> HubOptions {
        self.hub = self.hub.from_env();
        self
    }
}

impl Default for StudyOptions {
    fn default() -> Self {
        defaults()
    }
}

impl StudyOptions {
    /// Whether cells are named one by one (`--workload`, `--model`, `--tasks`) rather than
    /// taken from a built-in study.
    pub fn is_freeform(&self) -> bool {
        !self.workloads.is_empty() || !self.models.is_empty() || !self.tasks.is_empty()
    }
}

/// The interpreter-lock emulation (CPython's GIL, MRI's GVL).
#[derive(Args, Debug, Clone, Copy, PartialEq)]
pub struct LockOptions {
    /// Emulate an interpreter lock (CPython's GIL, MRI's GVL) in every run
    #[arg(long)]
    pub gil: bool,
}

impl Default for LockOptions {
    fn default() -> Self {
        defaults()
    }
}

/// What every HTTP request sends and how it connects (`run` and `crawl`).
#[derive(Args, Debug, Clone, PartialEq)]
pub struct RequestOptions {
    /// A request header 'Name: value', repeatable; {rand} and {i} work in the value
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// The request method (GET by default)
    #[arg(long, value_name = "METHOD")]
    pub method: Option<String>,
    /// The request body: a file, or @- for standard input; {rand} and {i} work in it
    #[arg(long, value_name = "FILE")]
    pub body: Option<String>,
    /// Trust the CA certificates in FILE (PEM) besides the system's roots
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Do not verify server certificates (as curl's -k)
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// Open a new connection (and TLS session) for every request
    #[arg(long)]
    pub no_keepalive: bool,
    /// How long one HTTP request may take, connect to last byte
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// Speak HTTP/2 (models async, async-local, curl): h2 by ALPN over TLS (a server that offers only http/1.1 gets 1.1, recorded as such), prior knowledge (h2c) over plain TCP; the W requests in flight are streams over --connections connections. On the crawl study (and the tour's crawl) it adds h2 rows beside the HTTP/1.1 rows
    #[arg(long, conflicts_with = "http1_1")]
    pub http2: bool,
    /// Speak HTTP/1.1 only, one request per connection at a time (the default)
    #[arg(long = "http1.1", id = "http1_1")]
    pub http1_1: bool,
    /// Speak HTTP/3 (models async, async-local): QUIC over UDP to an https:// URL's host and port (QUIC is always TLS), h3 by ALPN; the W requests in flight are streams over --connections connections. On the crawl study (and the tour's crawl) it adds h3 rows beside the others, and the study's own server runs over TLS and serves HTTP/3
    #[arg(long, conflicts_with = "http1_1")]
    pub http3: bool,
    /// With --http2 or --http3: how many connections carry the streams (default 1: every request in flight on one connection)
    #[arg(long, value_name = "C", value_parser = parse_count)]
    pub connections: Option<usize>,
}

impl Default for RequestOptions {
    fn default() -> Self {
        defaults()
    }
}

/// Flags of the `cmd:` workload.
#[derive(Args, Debug, Clone, Default, PartialEq)]
pub struct CmdOptions {
    /// Run cmd: workloads under sh -c (pipes, globs, variables) instead of splitting their words
    #[arg(long)]
    pub shell: bool,
    /// Keep each cmd: task's stdout and stderr, of every run, as DIR/MODEL-xN/rep-R/task-I.out and .err (R as the results' "rep"; warm-ups in warmup-K; with several -w, MODEL-xN starts with wK-, K the workload's place)
    #[arg(long, value_name = "DIR")]
    pub cmd_output: Option<PathBuf>,
}

/// External cells (`--peer`) and hyperfine's hooks.
#[derive(Args, Debug, Clone, Default, PartialEq)]
pub struct PeerOptions {
    /// An external program that brings its own concurrency, one more row per task count: LABEL=COMMAND, run with sh -c, {tasks} {workers} {url} replaced; a line `CONCUR {"wall_s":S}` on its stdout reports the work's own wall (repeatable)
    #[arg(long = "peer", value_name = "LABEL=COMMAND")]
    pub peers: Vec<String>,
    /// Commands run around each cell and each run.
    #[command(flatten)]
    pub hooks: Hooks,
}

/// An external cell as asked for: a program that brings its own concurrency.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PeerRequest {
    /// Its row's label (the results' `model`); a trailing `:W` is its worker count.
    pub label: String,
    /// The command, run under `sh -c` after `{tasks}`, `{workers}` and `{url}` are replaced.
    pub command: String,
    /// The workload whose table it joins; `None`: the plan's first workload.
    pub workload: Option<String>,
    /// Whether it joins the table of the cells with the interpreter lock (a classic program
    /// that has a real one).
    pub gil: bool,
    /// The task counts to run it at; `None`: every task count of its table.
    pub tasks: Option<Vec<usize>>,
    /// How many tasks it runs at once when its label has no `:W` (a serial program: 1);
    /// `None`: all of them.
    pub workers: Option<usize>,
    /// The bytes each task of its work produces, when they are known (a classic program of
    /// the gil or tasks study): a run must then report them, summed over its tasks.
    /// `None` (`--peer`): its bytes are its own.
    pub bytes_per_task: Option<u64>,
    /// What its tasks wait in, when it is a program whose wait was traced (a `--classic`
    /// program of the tasks study, [`crate::measure::slack::PROGRAMS`]): its runs' wake-ups
    /// carry that primitive's slack. `None` (`--peer`): concur does not know.
    pub wait_primitive: Option<crate::measure::slack::Primitive>,
}

impl PeerRequest {
    /// Parses `--peer LABEL=COMMAND`; the reason when it is not of that form.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let (label, command) = text
            .split_once('=')
            .filter(|(l, c)| !l.trim().is_empty() && !c.trim().is_empty())
            .ok_or_else(|| format!("--peer '{text}' must be LABEL=COMMAND"))?;
        Ok(PeerRequest {
            label: label.trim().to_string(),
            command: command.to_string(),
            ..Default::default()
        })
    }
}

/// hyperfine's hooks, each a shell command (`sh -c`).
#[derive(Args, Debug, Clone, PartialEq, Default)]
pub struct Hooks {
    /// Command (sh -c) run once before each cell's first run
    #[arg(long, value_name = "CMD")]
    pub setup: Option<String>,
    /// Command (sh -c) run before every run
    #[arg(long, value_name = "CMD")]
    pub prepare: Option<String>,
    /// Command (sh -c) run after every run
    #[arg(long, value_name = "CMD")]
    pub conclude: Option<String>,
    /// Command (sh -c) run once after each cell's last run
    #[arg(long, value_name = "CMD")]
    pub cleanup: Option<String>,
}

/// Which hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// `--setup`.
    Setup,
    /// `--prepare`.
    Prepare,
    /// `--conclude`.
    Conclude,
    /// `--cleanup`.
    Cleanup,
}

impl Hook {
    /// The flag that sets it.
    pub fn flag(self) -> &'static str {
        match self {
            Hook::Setup => "--setup",
            Hook::Prepare => "--prepare",
            Hook::Conclude => "--conclude",
            Hook::Cleanup => "--cleanup",
        }
    }
}

impl Hooks {
    /// The command of `hook`, if one was given.
    pub fn get(&self, hook: Hook) -> Option<&str> {
        match hook {
            Hook::Setup => self.setup.as_deref(),
            Hook::Prepare => self.prepare.as_deref(),
            Hook::Conclude => self.conclude.as_deref(),
            Hook::Cleanup => self.cleanup.as_deref(),
        }
        .filter(|c| !c.trim().is_empty())
    }
}

/// Open-model runs: tasks arrive at a rate instead of all at once.
#[derive(Args, Debug, Clone, PartialEq)]
pub struct OpenOptions {
    /// Release tasks at R per second (open model; latency counted from each task's scheduled time), a ramp A..B rising over the run, or auto (with --slo: the highest rate each model sustains)
    #[arg(long, value_name = "R|A..B|auto", allow_hyphen_values = true)]
    pub rate: Option<String>,
    /// With --rate: release tasks for this long (instead of -n; default 5s, 2s per --rate auto probe)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// With --rate: the time series' interval (and of the live line on stderr)
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// With --rate: release tasks on a timer of this grain, every task due by a tick at that tick (wrk2's grain is 1ms), e.g. 1ms: fewer wake-ups, so less CPU per task, for sends up to this much late (counted: latency runs from each task's scheduled time). Default: each task at its own time, within microseconds
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub grain: Option<Duration>,
    /// With --rate auto: the latency to keep, PERCENTILE<DURATION (p50, p90, p99, p999, max), e.g. 'p99<100ms'
    #[arg(long, value_name = "SLO")]
    pub slo: Option<String>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        defaults()
    }
}

impl OpenOptions {
    /// Whether `--rate` asks for `auto` (before validation).
    pub fn is_auto(&self) -> bool {
        self.rate.as_deref().map(str::trim) == Some("auto")
    }

    /// The counted runs per cell when `-r` is not given and the study's own default is
    /// `default`: with `--rate auto` none (the probe that found the rate is the run), so
    /// `None` then. The one place that rule lives.
    pub fn default_repeat(&self, default: usize) -> Option<usize> {
        (!self.is_auto()).then_some(default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_has_its_defaults_from_its_flags() {
        let s = StudyOptions::default();
        assert_eq!(s.timeout, Duration::from_secs(300));
        assert_eq!(s.run.stack_size, 2 << 20);
        assert_eq!(s.run.switch_interval, Duration::from_millis(5));
        assert_eq!(s.request.request_timeout, Duration::from_secs(30));
        assert_eq!(
            s.request.request_timeout,
            crate::workload::DEFAULT_REQUEST_TIMEOUT
        );
        assert_eq!(s.open.interval, Duration::from_secs(1));
        assert_eq!(s.mail_sink, MailSink::Discard);
        assert!(!s.lock.gil && s.peers.peers.is_empty() && s.study.is_none());
        assert_eq!(RequestOptions::default(), s.request);
        assert_eq!(OpenOptions::default(), s.open);
        assert_eq!(LockOptions::default(), s.lock);
        assert_eq!(RunSettings::default(), s.run);
    }

    /// The flag `id` of the group `T`, as the command line sees it.
    fn arg_of<T: Args>(id: &str) -> clap::Arg {
        let cmd = T::augment_args(clap::Command::new("t"));
        let arg = cmd.get_arguments().find(|a| a.get_id() == id).cloned();
        arg.unwrap()
    }

    /// What a user sees of a flag: its names, value name and help.
    fn shown(a: &clap::Arg) -> String {
        format!(
            "{:?} {:?} {:?} {:?} {:?}",
            a.get_long(),
            a.get_short(),
            a.get_all_aliases(),
            a.get_value_names(),
            a.get_help().map(ToString::to_string)
        )
    }

    #[test]
    fn hub_is_one_flag() {
        let one = shown(&arg_of::<HubArg>("hub"));
        assert_eq!(shown(&arg_of::<HubOptions>("hub")), one);
        assert!(one.contains("CONCUR_HUB"), "{one}");
    }

    #[test]
    fn jobs_backend_is_one_flag() {
        let one = shown(&arg_of::<JobsBackendArg>("jobs_backend"));
        assert_eq!(shown(&arg_of::<StudyOptions>("jobs_backend")), one);
        assert!(
            one.contains("jobs-backend") && one.contains(BACKEND_ENV),
            "{one}"
        );
        assert_eq!(
            JobsBackendArg::default().or_default().unwrap(),
            "sqlite".parse().unwrap()
        );
    }

    #[test]
    fn repeat_is_one_flag() {
        let one = shown(&arg_of::<RepeatArg>("repeat"));
        assert_eq!(shown(&arg_of::<StudyOptions>("repeat")), one);
        assert!(one.contains("REPEATS"), "{one}");
    }

    #[test]
    fn outputs_are_made_from_the_group() {
        let o = OutputOptions::default();
        assert_eq!(o.format.as_deref(), Some("table"));
        let out = OutputOptions {
            html: Some("r.html".into()),
            baseline: Some("b".into()),
            ..o
        }
        .outputs(Some("r.jsonl".into()), true);
        assert_eq!(out.exports.len(), 1);
        assert_eq!(
            (out.exports[0].format.as_str(), out.exports[0].flag),
            ("html", "--html")
        );
        assert_eq!(out.baseline.as_deref(), Some("b"));
        assert!(out.ignore_failures && !out.quiet && out.results.is_some());
    }

    #[test]
    fn auto_rate_has_no_default_repeat() {
        let mut o = OpenOptions::default();
        assert_eq!(o.default_repeat(3), Some(3));
        o.rate = Some(" auto".into());
        assert_eq!(o.default_repeat(3), None);
    }
}
