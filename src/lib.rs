//! concur: run one workload under many concurrency models and show, side by side, what each
//! costs (wall and CPU time, memory, latency) and how far each is from the ideal the hardware
//! allows.
//!
//! The pipeline: specs are parsed into a validated [`study::Plan`]; the [`study::runner`] runs
//! every repetition of every cell in a fresh child process of our own binary; results are
//! written as JSON Lines ([`report::results`]) and rendered by [`report`].

pub mod error;
pub mod gil;
pub mod jobs;
pub mod measure;
pub mod model;
pub mod process;
pub mod report;
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

use report::results::{read_results, ResultsWriter};
use report::Format;
use study::analysis::Analysis;

/// Where and how results are shown and saved.
#[derive(Debug, Clone)]
pub struct Outputs {
    /// The JSON Lines results file (`-` for stdout); `None` picks `concur-results/STUDY-TIME.jsonl`.
    pub json: Option<PathBuf>,
    /// A CSV file of the cells.
    pub csv: Option<PathBuf>,
    /// A Markdown file of the tables.
    pub markdown: Option<PathBuf>,
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

/// Checks the outputs before any work: at most one goes to stdout.
fn check_outputs(out: &Outputs) -> Result<(), Error> {
    let to_stdout = [&out.json, &out.csv, &out.markdown]
        .iter()
        .filter(|p| is_stdout(p))
        .count();
    if to_stdout > 1 {
        return Err(Error::usage(
            "only one of --json, --csv and --markdown can be '-' (stdout)",
        ));
    }
    Ok(())
}

/// Writes the renderings an [`Outputs`] asks for: files first, then stdout.
fn emit(
    a: &Analysis,
    machine: Option<&report::results::Machine>,
    out: &Outputs,
    files: OpenFiles,
) -> Result<(), Error> {
    let io = |e: std::io::Error| Error::io("writing a report", e);
    if let Some(mut f) = files.csv {
        f.write_all(report::csv::render(a).as_bytes()).map_err(io)?;
    }
    if let Some(mut f) = files.markdown {
        f.write_all(report::markdown::render(a, machine).as_bytes())
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
    })
}

/// `concur run`: validates the options into a plan, runs it, saves and shows the results.
/// Returns the exit code: 0, or 130 when interrupted (every finished run is kept).
pub fn run(opts: &study::RunOptions, out: &Outputs, command: Vec<String>) -> Result<i32, Error> {
    let plan = study::plan::build(opts)?;
    check_outputs(out)?;
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
    let outcome = study::execute(&plan, &mut writer, command, progress)?;
    emit(&outcome.analysis, Some(&outcome.meta.machine), out, files)?;
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
    check_outputs(out)?;
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
    let analysis = study::analysis::analyze(&results.runs, cores);
    emit(
        &analysis,
        results.meta.as_ref().map(|m| &m.machine),
        out,
        files,
    )
}
