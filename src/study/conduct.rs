//! One path for every command that runs a study: plan → bind → execute → publish
//! ([`conduct`]). `concur run`, `crawl` and `advise` (which only fill in a [`StudyOptions`])
//! and [`crate::Lab`] all take it; `concur report` enters at publish with a results file.

use std::path::{Path, PathBuf};

use crate::analysis::compare;
use crate::analysis::results::ResultsWriter;
use crate::base::error::{Error, Result};
use crate::base::version::VERSION;
use crate::hub::executor::HubExecutor;
use crate::model;
use crate::os::terminal::{Feedback, Terminal};
use crate::plan::options::StudyOptions;
use crate::report::publish;
use crate::report::publish::{Conclusion, Outputs};
use crate::study::bind;
use crate::study::{self, Executor, InProcessExecutor, ProcessExecutor, StudyOutcome};

/// Where a study's runs happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isolation {
    /// Each run in a fresh process of this binary (the command line; a lab after `init`).
    FreshProcess,
    /// Each run inside this process (a lab whose binary did not call `init`).
    InProcess,
}

/// How a study is carried out besides its options and outputs.
pub(crate) struct Conduct {
    /// Where the runs happen.
    pub isolation: Isolation,
    /// What stderr shows while they do (and after: warnings, where the results went).
    pub feedback: Feedback,
    /// Whether a results file is written when none was asked for
    /// (`concur-results/STUDY-TIME.jsonl`; a lab writes none then).
    pub default_results: bool,
    /// The command line for the meta line.
    pub command: Vec<String>,
}

/// What a conducted study produced and concluded.
pub(crate) struct Conducted {
    /// The runs, cells and meta line.
    pub outcome: StudyOutcome,
    /// The comparison with a baseline and the advice.
    pub conclusion: Conclusion,
    /// How many answers from a hub's agents were refused (forged, misaddressed, not what a
    /// run could report): the study then never exits 0.
    pub refused_answers: usize,
}

/// Plans `opts`, checks the outputs, acquires what the plan needs, runs every cell and
/// publishes: the one path of every study.
pub(crate) fn conduct(opts: &StudyOptions, out: &Outputs, how: Conduct) -> Result<Conducted> {
    let plan = crate::plan::build(opts)?;
    // `--fail-on-regression` is checked against the baseline before any output is opened when
    // the plan's cells are final; those the bind step changes (a hub's host counts, the
    // classic programs' cells) are checked once bound, still before any run.
    let settled = plan.hub.is_none() && plan.needs.classic.is_none();
    let planned = |p: &crate::plan::Plan| {
        compare::Planned::study(p.cells.iter().map(|c| c.key.clone()), p.repeat)
    };
    let prepared = publish::prepare(out, settled.then(|| planned(&plan)).as_ref())?;
    if let Some(dir) = &plan.options.cmd_output {
        crate::os::files::check_output_dir("--cmd-output", dir)?;
    }
    let terminal = Terminal::new(how.feedback).verbose(out.verbose);
    // Said before bind connects to them.
    let cleartext = [
        plan.hub
            .as_ref()
            .and_then(|h| h.url.cleartext_password_warning("--hub")),
        plan.jobs_backend
            .as_ref()
            .and_then(|u| u.cleartext_password_warning("--jobs-backend")),
    ];
    for w in cleartext.iter().flatten() {
        terminal.warning(w);
    }
    let mut bound = bind::bind(plan)?;
    if !settled {
        prepared.check_gate(out, &planned(&bound.plan))?;
    }
    let hub = bound.hub.take();
    let plan = &bound.plan;
    if let Some(dir) = &plan.options.cmd_output {
        crate::os::files::create_output_dir("--cmd-output", dir)?;
    }
    let mut writer = match (&out.results, how.default_results) {
        (Some(p), _) => ResultsWriter::create("--json", p)?,
        (None, true) => {
            let stamp = crate::runner::machine::now_rfc3339().replace([':', '-'], "");
            crate::os::files::create_default_dir(crate::os::files::RESULTS_DIR)?;
            ResultsWriter::create(
                "--json",
                &PathBuf::from(crate::os::files::RESULTS_DIR)
                    .join(format!("{}-{stamp}.jsonl", plan.name)),
            )?
        }
        (None, false) => ResultsWriter::sink(),
    };
    let runs = match plan.open.as_ref().filter(|o| o.is_auto()) {
        Some(o) if o.remeasure > 0 => format!(
            ", a rate search each, then {} runs at the rate found",
            o.remeasure
        ),
        Some(_) => ", a rate search each".to_string(),
        None if plan.warmup > 0 => {
            format!(" × {} runs (+{} warm-up)", plan.repeat, plan.warmup)
        }
        None => format!(" × {} runs", plan.repeat),
    };
    terminal.line(format_args!(
        "concur {}: study '{}', {} cells{runs}",
        VERSION,
        plan.name,
        plan.cells.len(),
    ));
    for n in &plan.notes {
        terminal.note(n);
    }
    if let Some(line) = trace_line(plan) {
        terminal.line(format_args!("{line}"));
    }
    if let Some(s) = &bound.server {
        terminal.line(format_args!(
            "server: concur's delay server in-process at {}",
            s.base_url()
        ));
    }
    if let (Some(_), Some(url)) = (&bound.url_stats, &plan.options.base_url) {
        terminal.line(format_args!(
            "server: concur's delay server at {url} (--url; its /stats reset before each run and read after)"
        ));
    }
    if let Some(s) = &bound.remote_server {
        terminal.line(format_args!(
            "server: concur's delay server on agent '{}' at {}",
            s.agent, s.base_url
        ));
    }
    if let Some((hub, agents)) = &hub {
        terminal.line(format_args!(
            "hub: {} with {} agent{}: {}",
            hub.url(),
            agents.len(),
            if agents.len() == 1 { "" } else { "s" },
            agents
                .iter()
                .map(|a| format!(
                    "{} ({}, {} cores, clock {})",
                    a.name,
                    a.addr.as_deref().unwrap_or("?"),
                    a.cores,
                    crate::hub::clock::describe(&a.clock())
                ))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    let mut refused_answers = 0;
    let outcome = {
        let process;
        let mut over_hosts = None;
        let executor: &dyn Executor = match (how.isolation, hub) {
            (_, Some((hub, agents))) => &*over_hosts.insert(HubExecutor::new(
                hub,
                agents,
                bound.run_server(),
                bound.server_cpu(),
            )?),
            (Isolation::FreshProcess, None) => {
                process = ProcessExecutor::new(bound.run_server())?;
                &process
            }
            (Isolation::InProcess, None) => &InProcessExecutor,
        };
        let outcome = study::execute(plan, executor, &mut writer, how.command, &terminal)?;
        if let Some(e) = &over_hosts {
            refused_answers = e.refused_answers();
        }
        outcome
    };
    // The server stops (and the classic programs' folder goes) before the reports are made.
    drop(bound);
    let conclusion = publish::publish(
        &outcome.analysis,
        &outcome.meta,
        &outcome.runs,
        prepared,
        out,
    )?;
    if let Some(p) = writer.path() {
        terminal.line(format_args!(
            "results: {} (render again with: concur report {})",
            p.display(),
            p.display()
        ));
    }
    Ok(Conducted {
        outcome,
        conclusion,
        refused_answers,
    })
}

/// The command line as typed, for the results' meta line: an argument that is not UTF-8 is
/// kept with its bad bytes replaced, rather than a panic.
pub(crate) fn command_line() -> Vec<String> {
    std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// `concur run`: validates the options into a plan, runs it, saves and shows the results.
/// Returns the exit code: 0 when every counted run succeeded (or `-i`), 1 when some failed,
/// 130 when interrupted (every finished run is kept).
pub fn run(opts: &StudyOptions, out: &Outputs, command: Vec<String>) -> Result<i32> {
    let done = conduct(
        opts,
        out,
        Conduct {
            isolation: Isolation::FreshProcess,
            // Mails printed on the terminal would tear the live view: the bar then.
            feedback: Feedback::for_terminal(
                out.quiet,
                !out.no_live && opts.mail_sink != crate::plan::options::MailSink::Stdout,
            ),
            default_results: true,
            command,
        },
    )?;
    if done.outcome.interrupted {
        // Said even with --quiet: the exit status alone would not say what was kept.
        Terminal::new(Feedback::Lines).line(format_args!(
            "interrupted: {} finished runs kept",
            done.outcome.runs.len()
        ));
        return Ok(130);
    }
    let status = publish::exit_status(&done.outcome.runs, done.conclusion.comparison.as_ref(), out);
    if done.refused_answers > 0 && status == 0 {
        // -i accepts failed runs, not answers a hub's agent could not have sent.
        Terminal::new(Feedback::Lines).error(format_args!(
            "{} answer{} from the hub {} refused (forged, misaddressed, or not what a run could report); exit status 1, which -i does not accept away",
            done.refused_answers,
            if done.refused_answers == 1 { "" } else { "s" },
            if done.refused_answers == 1 { "was" } else { "were" }
        ));
        return Ok(1);
    }
    Ok(status)
}

/// `concur report FILE`: renders a results file again (cells are recomputed from its runs, on
/// the machine the file records). Rendering succeeded: 0, whatever the runs were, unless
/// `--fail-on-regression` finds a cell that regressed against `--baseline`, or one in both it
/// could not judge: 1. A gate that could never fail (no cell in the baseline, too few runs for
/// the test) is refused before anything is shown: 2.
pub fn report_file(path: &Path, out: &Outputs) -> Result<i32> {
    if out.results.is_some() {
        return Err(Error::flag(
            "--json",
            "report reads a results file; --json does not apply",
        ));
    }
    // The file is read first: the gate is checked with its cells before anything is written.
    let results = crate::analysis::results::read_results(path)?;
    let planned = compare::Planned::file(&path.display().to_string(), &results.runs);
    let prepared = publish::prepare(out, Some(&planned))?;
    publish::warn_if_cut(&results, out.quiet);
    let meta = results
        .meta
        .ok_or_else(|| Error::file(path, None, format!("'{}' has no meta line", path.display())))?;
    let analysis = crate::analysis::analyze(&results.runs, &meta.machine);
    let conclusion = publish::publish(&analysis, &meta, &results.runs, prepared, out)?;
    let accepted = Outputs {
        ignore_failures: true,
        ..out.clone()
    };
    Ok(publish::exit_status(
        &results.runs,
        conclusion.comparison.as_ref(),
        &accepted,
    ))
}

/// `concur advise`'s counted runs per cell when `-r` is not given (and `--rate` is not `auto`).
pub const ADVISE_REPEAT: usize = 3;

/// `concur advise`: runs the few cells that tell what bounds `workload` and which model suits
/// it (seq, thread, a pool of one thread per core, async with every task in flight, fork), a
/// few times each, and shows them with the advice. Returns the exit code as [`run`] does.
/// `base` carries the flags that still apply (`--shell`, `--cmd-output`, the open model).
/// `repeat`: `-r`, `ADVISE_REPEAT` by default (with `--rate auto`: none, each search's probe
/// is its cell's run).
pub fn advise(
    workload: &str,
    tasks: Option<usize>,
    repeat: Option<usize>,
    base: StudyOptions,
    out: &Outputs,
    command: Vec<String>,
) -> Result<i32> {
    let cores = model::cores();
    // An open run without -n is sized by its --duration; async then gets a generous W.
    let w = tasks.unwrap_or(if base.open.rate.is_some() { 1000 } else { 10 });
    let opts = StudyOptions {
        workloads: vec![workload.to_string()],
        models: vec![
            "seq".into(),
            "thread".into(),
            format!("pool:{cores}"),
            format!("async:{}", w.max(1)),
            "fork".into(),
        ],
        tasks: tasks.into_iter().collect(),
        repeat: crate::plan::options::RepeatArg {
            repeat: repeat.or(base.open.default_repeat(ADVISE_REPEAT)),
        },
        warmup: Some(0),
        ..base
    };
    run(&opts, out, command)
}

/// The line that says how each run's timeline is sampled, when a cell has more tasks than
/// `--trace-tasks` keeps, the bound on the lock's phases under `--gil`, and the models whose
/// tasks run in processes of their own, where that hides phases the run's process would
/// see (a queue's, an HTTP client's, the lock's); none when every task is kept and no phase
/// is bounded or hidden.
fn trace_line(plan: &crate::plan::Plan) -> Option<String> {
    use crate::base::units::thousands;
    let cap = plan.settings.trace_tasks;
    let concur = plan.cells.iter().filter(|c| c.is_concur());
    let largest = concur.clone().map(|c| c.key.tasks).max()?;
    let mut parts = Vec::new();
    if largest > cap {
        parts.push(format!(
            "{} of {} tasks per run, sampled evenly (--trace-tasks)",
            thousands(cap as u64),
            thousands(largest as u64)
        ));
    }
    if concur.clone().any(|c| c.key.gil) {
        parts.push(format!(
            "the lock's first {} waits and holds per traced task",
            crate::measure::phases::LOCK_PHASES_PER_TASK
        ));
    }
    let mut hidden: Vec<String> = Vec::new();
    for c in concur.clone() {
        let Some(model) = c.model().map(|m| m.build()) else {
            continue;
        };
        let inner = c.key.gil || c.key.workload.starts_with("http:");
        if model.task_processes() && (model.is_queue() || inner) {
            let family = model.family();
            if !hidden.contains(&family) {
                hidden.push(family);
            }
        }
    }
    if !hidden.is_empty() {
        parts.push(format!(
            "phases unseen under {} (tasks or workers in processes of their own: fork and spawn show only each process's start and exit)",
            hidden.join(", ")
        ));
    }
    (!parts.is_empty()).then(|| format!("trace: {}", parts.join("; ")))
}
