//! concur: run one workload under many concurrency models and show, side by side, what each
//! costs (wall and CPU time, memory, latency) and how far each is from the ideal the hardware
//! allows.
//!
//! The pipeline: specs are parsed into a validated [`study::Plan`]; the [`study::runner`] runs
//! every repetition of every cell in a fresh child process of our own binary; results are
//! written as JSON Lines ([`report::results`]) and rendered by [`report`].

pub mod analysis;
pub mod error;
pub mod gil;
pub mod interrupt;
pub mod jobs;
pub mod measure;
pub mod model;
pub mod process;
pub mod report;
pub mod selfcall;
pub mod server;
pub mod stats;
pub mod study;
pub mod units;
pub mod workload;

pub use error::Error;
pub use model::Model;
pub use workload::Workload;

/// The version written into every results file.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use analysis::results::{read_results, Line, Meta, ResultsFile, ResultsWriter, RunResult};
use analysis::Analysis;
use analysis::{advice, compare};
use report::Format;

/// Where and how results are shown and saved.
#[derive(Debug, Clone)]
pub struct Outputs {
    /// The JSON Lines results file (`-` for stdout); `None` picks `concur-results/STUDY-TIME.jsonl`.
    pub json: Option<PathBuf>,
    /// A CSV file of the cells.
    pub csv: Option<PathBuf>,
    /// A Markdown file of the tables.
    pub markdown: Option<PathBuf>,
    /// One self-contained HTML file with charts.
    pub html: Option<PathBuf>,
    /// Compare with this baseline: a saved name or a results file.
    pub baseline: Option<String>,
    /// Save the results as a baseline of this name.
    pub save_baseline: Option<String>,
    /// What stdout shows.
    pub format: Format,
    /// No progress bar, notes or warnings on stderr.
    pub quiet: bool,
}

fn create(path: &Path, what: &str) -> Result<File, Error> {
    File::create(path).map_err(|e| {
        Error::usage(format!(
            "cannot write {what} file '{}': {e}",
            path.display()
        ))
    })
}

fn is_stdout(p: &Option<PathBuf>) -> bool {
    p.as_deref() == Some(Path::new("-"))
}

/// Checks the outputs before any work: at most one goes to stdout, the baseline exists and the
/// name to save one under is valid. Returns the baseline's results.
fn check_outputs(out: &Outputs) -> Result<Option<(String, ResultsFile)>, Error> {
    if let Some(name) = &out.save_baseline {
        compare::baseline_path(name)?;
    }
    if is_stdout(&out.html) {
        return Err(Error::usage("--html needs a file name, not '-'"));
    }
    let to_stdout = [&out.json, &out.csv, &out.markdown]
        .iter()
        .filter(|p| is_stdout(p))
        .count();
    if to_stdout > 1 {
        return Err(Error::usage(
            "only one of --json, --csv and --markdown can be '-' (stdout)",
        ));
    }
    match &out.baseline {
        Some(spec) => {
            let path = compare::resolve_baseline(spec)?;
            Ok(Some((spec.clone(), read_results(&path)?)))
        }
        None => Ok(None),
    }
}

/// Compares with the baseline (if any) and advises, then emits every rendering.
fn emit_all(
    a: &Analysis,
    meta: Option<&Meta>,
    runs: &[RunResult],
    baseline: Option<(String, ResultsFile)>,
    out: &Outputs,
    files: OpenFiles,
) -> Result<(), Error> {
    let machine = meta.map(|m| &m.machine);
    let cores = machine.map_or_else(model::cores, |m| m.cores);
    let comparison = baseline.map(|(label, b)| {
        compare::compare(
            &label,
            &b.runs,
            b.meta.as_ref().map(|m| &m.machine),
            runs,
            machine,
        )
    });
    let advice = advice::advise(a, runs, cores);
    let full = report::Report {
        analysis: a,
        meta,
        runs,
        comparison: comparison.as_ref(),
        advice: &advice,
    };
    emit(a, machine, out, files, &full)?;
    if !out.quiet {
        for w in comparison.iter().flat_map(|c| &c.warnings) {
            eprintln!("warning: {w}");
        }
    }
    if let Some(name) = &out.save_baseline {
        let path = compare::baseline_path(name)?;
        let mut w = ResultsWriter::create(&path)?;
        if let Some(m) = meta {
            w.write(&Line::Meta(m.clone()))?;
        }
        for r in runs {
            w.write(&Line::Run(r.clone()))?;
        }
        for c in &a.cells {
            w.write(&Line::Cell(c.clone()))?;
        }
        if !out.quiet {
            eprintln!("baseline '{name}' saved: {}", path.display());
        }
    }
    Ok(())
}

/// Writes the renderings an [`Outputs`] asks for: files first, then stdout.
fn emit(
    a: &Analysis,
    machine: Option<&analysis::results::Machine>,
    out: &Outputs,
    files: OpenFiles,
    full: &report::Report,
) -> Result<(), Error> {
    let io = |e: std::io::Error| Error::io("writing a report", e);
    if let Some(mut f) = files.html {
        f.write_all(report::html::render(full).as_bytes())
            .map_err(io)?;
    }
    if let Some(mut f) = files.csv {
        f.write_all(report::csv::render(a).as_bytes()).map_err(io)?;
    }
    if let Some(mut f) = files.markdown {
        f.write_all(report::markdown::render(a, machine).as_bytes())
            .map_err(io)?;
        f.write_all(report::extras_markdown(full).as_bytes())
            .map_err(io)?;
    }
    let stdout_format = if is_stdout(&out.csv) {
        Some(Format::Csv)
    } else if is_stdout(&out.markdown) {
        Some(Format::Markdown)
    } else if is_stdout(&out.json) {
        None
    } else {
        Some(out.format)
    };
    if let Some(fmt) = stdout_format {
        let mut so = std::io::stdout().lock();
        so.write_all(report::render(fmt, a, machine).as_bytes())
            .map_err(io)?;
        let extras = match fmt {
            Format::Table => report::extras_text(full),
            Format::Markdown => report::extras_markdown(full),
            _ => String::new(),
        };
        so.write_all(extras.as_bytes()).map_err(io)?;
        so.flush().map_err(io)?;
    }
    if !out.quiet {
        for w in &a.warnings {
            eprintln!("warning: {w}");
        }
    }
    Ok(())
}

struct OpenFiles {
    csv: Option<File>,
    markdown: Option<File>,
    html: Option<File>,
}

fn open_files(out: &Outputs) -> Result<OpenFiles, Error> {
    let open = |p: &Option<PathBuf>, what: &str| -> Result<Option<File>, Error> {
        match p {
            Some(p) if p != Path::new("-") => create(p, what).map(Some),
            _ => Ok(None),
        }
    };
    Ok(OpenFiles {
        csv: open(&out.csv, "CSV")?,
        markdown: open(&out.markdown, "Markdown")?,
        html: open(&out.html, "HTML")?,
    })
}

/// `concur run`: validates the options into a plan, runs it, saves and shows the results.
/// Returns the exit code: 0, or 130 when interrupted (every finished run is kept).
pub fn run(opts: &study::RunOptions, out: &Outputs, command: Vec<String>) -> Result<i32, Error> {
    let mut plan = study::plan::build(opts)?;
    let baseline = check_outputs(out)?;
    // http:/PATH cells without --url get concur's own delay server, in this process, on a
    // free loopback port; its counters give each run the server's peak in-flight.
    let server = if plan.needs_server() {
        let s = server::InProcessServer::start(server::ServerOptions::ephemeral(), model::cores())?;
        plan.options.base_url = Some(s.base_url());
        Some(s)
    } else {
        None
    };
    let json_path = out.json.clone().unwrap_or_else(|| {
        let stamp = study::machine::now_rfc3339().replace([':', '-'], "");
        PathBuf::from("concur-results").join(format!("{}-{stamp}.jsonl", plan.name))
    });
    let mut writer = ResultsWriter::create(&json_path)?;
    let files = open_files(out)?;
    if !out.quiet {
        eprintln!(
            "concur {}: study '{}', {} cells × {} runs{}",
            VERSION,
            plan.name,
            plan.cells.len(),
            plan.repeat,
            if plan.warmup > 0 {
                format!(" (+{} warm-up)", plan.warmup)
            } else {
                String::new()
            }
        );
        for n in &plan.notes {
            eprintln!("note: {n}");
        }
    }
    let progress = !out.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr());
    if let (Some(s), false) = (&server, out.quiet) {
        eprintln!(
            "server: concur's delay server in-process at {}",
            s.base_url()
        );
    }
    let executor = study::ProcessExecutor::new(server.as_ref().map(|s| &*s.stats))?;
    let outcome = study::execute(&plan, &executor, &mut writer, command, progress)?;
    drop(server);
    emit_all(
        &outcome.analysis,
        Some(&outcome.meta),
        &outcome.runs,
        baseline,
        out,
        files,
    )?;
    if !out.quiet {
        if let Some(p) = writer.path() {
            eprintln!(
                "results: {} (render again with: concur report {})",
                p.display(),
                p.display()
            );
        }
    }
    if outcome.interrupted {
        eprintln!("interrupted: {} finished runs kept", outcome.runs.len());
        return Ok(130);
    }
    Ok(0)
}

/// `concur report FILE`: renders a results file again (cells are recomputed from its runs).
pub fn report_file(path: &Path, out: &Outputs) -> Result<(), Error> {
    let baseline = check_outputs(out)?;
    if out.json.is_some() {
        return Err(Error::usage(
            "report reads a results file; --json does not apply",
        ));
    }
    let results = read_results(path)?;
    let files = open_files(out)?;
    let cores = results
        .meta
        .as_ref()
        .map_or_else(model::cores, |m| m.machine.cores);
    let analysis = analysis::analyze(&results.runs, cores);
    emit_all(
        &analysis,
        results.meta.as_ref(),
        &results.runs,
        baseline,
        out,
        files,
    )
}

/// `concur advise`: runs the few cells that tell what bounds `workload` and which model suits
/// it (seq, thread, a pool of one thread per core, async with every task in flight, fork), a
/// few times each, and shows them with the advice. Returns the exit code as [`run`] does.
pub fn advise(
    workload: &str,
    tasks: usize,
    repeat: usize,
    out: &Outputs,
    command: Vec<String>,
) -> Result<i32, Error> {
    let cores = model::cores();
    let opts = study::RunOptions {
        workloads: vec![workload.to_string()],
        models: vec![
            "seq".into(),
            "thread".into(),
            format!("pool:{cores}"),
            format!("async:{}", tasks.max(1)),
            "fork".into(),
        ],
        tasks: vec![tasks],
        repeat: Some(repeat),
        warmup: Some(0),
        ..Default::default()
    };
    run(&opts, out, command)
}
