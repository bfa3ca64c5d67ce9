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
pub mod publish;
pub mod report;
pub mod secret;
pub mod selfcall;
pub mod server;
pub mod stats;
pub mod study;
pub mod tls;
pub mod units;
pub mod workload;

pub use error::Error;
pub use model::Model;
pub use publish::Outputs;
pub use workload::Workload;

/// The version written into every results file.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

use std::path::{Path, PathBuf};

use analysis::results::{read_results, ResultsWriter};

/// `concur run`: validates the options into a plan, runs it, saves and shows the results.
/// Returns the exit code: 0 when every counted run succeeded (or `-i`), 1 when some failed,
/// 130 when interrupted (every finished run is kept).
pub fn run(opts: &study::RunOptions, out: &Outputs, command: Vec<String>) -> Result<i32, Error> {
    let plan = study::plan::build(opts)?;
    let prepared = publish::prepare(out)?;
    // http:/PATH cells without --url get concur's own delay server, in this process, on a
    // free loopback port; its counters give each run the server's peak in-flight.
    let server = if plan.needs_server() {
        Some(server::InProcessServer::start(
            server::ServerOptions {
                tls: plan.tls.then_some(server::ServeTls::SelfSigned),
                ..server::ServerOptions::ephemeral()
            },
            model::cores(),
        )?)
    } else {
        None
    };
    let json_path = out.results.clone().unwrap_or_else(|| {
        let stamp = study::machine::now_rfc3339().replace([':', '-'], "");
        PathBuf::from("concur-results").join(format!("{}-{stamp}.jsonl", plan.name))
    });
    let mut writer = ResultsWriter::create(&json_path)?;
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
    let executor = study::ProcessExecutor::new(server.as_ref().map(|s| study::RunServer {
        base_url: s.base_url(),
        cert_pem: s.cert.as_ref().map(|c| c.cert_pem.clone()),
        stats: &s.stats,
    }))?;
    let outcome = study::execute(&plan, &executor, &mut writer, command, progress)?;
    drop(server);
    publish::publish(
        &outcome.analysis,
        &outcome.meta,
        &outcome.runs,
        prepared,
        out,
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
    Ok(publish::exit_status(&outcome.runs, out))
}

/// `concur report FILE`: renders a results file again (cells are recomputed from its runs, on
/// the machine the file records). Rendering succeeded: 0, whatever the runs were.
pub fn report_file(path: &Path, out: &Outputs) -> Result<i32, Error> {
    if out.results.is_some() {
        return Err(Error::usage(
            "report reads a results file; --json does not apply",
        ));
    }
    let prepared = publish::prepare(out)?;
    let results = read_results(path)?;
    let meta = results
        .meta
        .ok_or_else(|| Error::usage(format!("'{}' has no meta line", path.display())))?;
    let analysis = analysis::analyze(&results.runs, &meta.machine);
    publish::publish(&analysis, &meta, &results.runs, prepared, out)?;
    Ok(0)
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
