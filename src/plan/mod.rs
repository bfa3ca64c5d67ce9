//! The plan: the validated matrix of cells a study runs, built once from the user's options.
//! Every check of specs and flags lives here; nothing downstream re-validates.

pub mod options;
pub mod presets;
pub mod rate;

use std::time::Duration;

use crate::analysis::results::{CellKey, Traits};
use crate::base::error::{Error, Input, Result};
use crate::model::{self, Model, ModelSpec};
pub use crate::plan::options::{Hook, Hooks, OpenOptions, PeerRequest, StudyOptions};
use crate::plan::presets::CellRequest;
use crate::plan::rate::{OpenPlan, Rate};
use crate::workload::{self, Workload, WorkloadOptions};

/// Counted runs per cell of a free-form study when `-r` is not given.
pub const FREEFORM_REPEAT: usize = 5;

/// The most tasks a cell may have.
pub const MAX_TASKS: usize = 1_000_000;

/// The longest `--timeout` a run may have (an agent refuses a share with a longer one).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// What runs for a cell: concur's own run of a model, or another program.
#[derive(Debug, Clone, PartialEq)]
pub enum CellKind {
    /// `concur __run`: the cell's model runs its workload in a fresh process of our binary.
    Concur {
        /// The model, checked (its text is the key's `model`).
        model: ModelSpec,
    },
    /// An external program that brings its own concurrency (`--peer`, `--classic`).
    External {
        /// The command as given, before `{tasks}`, `{workers}` and `{url}` are replaced.
        command: String,
        /// The bytes each of its tasks produces, when known: its run's checksum is checked.
        bytes_per_task: Option<u64>,
        /// What its tasks wait in, when known: its wake-ups carry that primitive's slack.
        wait_primitive: Option<crate::measure::slack::Primitive>,
    },
}

/// One cell of the plan, with what the runner and the statistics need to know of it.
#[derive(Debug, Clone, PartialEq)]
pub struct CellPlan {
    /// What runs: concur's model, or an external program.
    pub kind: CellKind,
    /// The cell's identity (canonical specs).
    pub key: CellKey,
    /// The model's worker count.
    pub workers: Option<usize>,
    /// How many tasks may run at once.
    pub parallelism: usize,
    /// What the cell is (nature, waits, http, baseline, expected failure), for the results.
    pub traits: Traits,
    /// Whether the workload goes to the run's own server (`http:/PATH` without `--url`).
    pub needs_server: bool,
    /// Whether the model needs the Redis of `--jobs-backend`.
    pub needs_redis: bool,
}

/// A validated study: cells, repetitions and run settings.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The study's name (`gil`, `mailer`, `tour`, `custom`).
    pub name: String,
    /// Every cell, in run order.
    pub cells: Vec<CellPlan>,
    /// Counted runs (run lines) per cell; with `--rate auto`, `-r N` or 1 (see
    /// [`OpenPlan::remeasure`]).
    pub repeat: usize,
    /// Warm-up runs per cell.
    pub warmup: usize,
    /// Per-run timeout.
    pub timeout: Duration,
    /// What every run's child reads besides its workload and model (checked).
    pub settings: crate::model::selfcall::RunSettings,
    /// Options the workloads read.
    pub options: WorkloadOptions,
    /// Whether the study's own server (when it starts one) speaks TLS (`--tls`, or cells that
    /// ask for HTTP/3 of it).
    pub tls: bool,
    /// Whether the study's own server (when it starts one) also serves HTTP/3 on UDP: some
    /// cell asks for it (`--http3`).
    pub http3: bool,
    /// What the reader should know about the plan (chosen sizes, scaled cells).
    pub notes: Vec<String>,
    /// The jobs models' backend, parsed (see [`StudyOptions::jobs_backend`]).
    pub jobs_backend: Option<crate::jobs::BackendUrl>,
    /// Commands run around each cell and each run.
    pub hooks: Hooks,
    /// Open-model runs (`--rate`); `None`: closed batches.
    pub open: Option<OpenPlan>,
    /// What the bind step must still fetch from the world before the plan can run.
    pub needs: Needs,
    /// Each workload of the concur cells, once, as the plan parsed it: the bind step
    /// acquires what it needs from the world (a file, a program on `PATH`).
    pub(crate) workloads: Vec<ParsedWorkload>,
    /// A study over several hosts (`--hub`): the bind step reaches the hub and splits the
    /// cells by host count.
    pub hub: Option<HubPlan>,
}

/// `--hub URL --hosts K,…`.
#[derive(Debug, Clone, PartialEq)]
pub struct HubPlan {
    /// The hub.
    pub url: crate::jobs::RedisUrl,
    /// The host counts to run each cell over; empty: every agent alive.
    pub hosts: Vec<usize>,
    /// `--server-host`: the agent that runs the study's delay server.
    pub server_host: Option<String>,
    /// `--signing-key`: the study's own key file.
    pub signing_key: Option<std::path::PathBuf>,
    /// `--agent-keys`: the operator's list of the agents' keys.
    pub agent_keys: Option<std::path::PathBuf>,
}

/// A workload the plan parsed (a cell's spec with the study's options), kept so that the bind
/// step acquires it without parsing its spec again.
#[derive(Clone)]
pub(crate) struct ParsedWorkload(pub(crate) std::sync::Arc<dyn Workload>);

impl std::fmt::Debug for ParsedWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ParsedWorkload({})", self.0.spec())
    }
}

/// The files and programs a plan names but does not touch: the bind step
/// (`crate::study::bind`) reads them, and fails with one line naming the value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Needs {
    /// `--body`: a file to read, or `@-` for standard input.
    pub body: Option<String>,
    /// `--cacert`: a PEM file of CA certificates.
    pub cacert: Option<std::path::PathBuf>,
    /// `--classic`: the classic programs, to be written out and calibrated, then added as
    /// external cells ([`Plan::with_peers`]), sized by these flags.
    pub classic: Option<ClassicSizes>,
}

/// What sizes the classic programs' cells: the flags they follow as concur's own cells do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClassicSizes {
    /// `--quick`: the small sizes.
    pub quick: bool,
    /// `--full`: the crawl's full sizes.
    pub full: bool,
    /// `--gil`: the lock's rows.
    pub gil: bool,
    /// `--cacert`: the CA the Python crawl clients trust too.
    pub cacert: Option<std::path::PathBuf>,
    /// `-k`: which the Python clients do not follow (the note says so).
    pub insecure: bool,
}

impl CellPlan {
    /// The cell's model, when concur runs it (`None` for an external program).
    pub fn model(&self) -> Option<ModelSpec> {
        match self.kind {
            CellKind::Concur { model } => Some(model),
            CellKind::External { .. } => None,
        }
    }

    /// Whether concur's own model runs the cell (not an external program).
    pub fn is_concur(&self) -> bool {
        self.model().is_some()
    }

    /// The same cell with `tasks` tasks: its parallelism follows.
    pub fn with_tasks(&self, tasks: usize) -> CellPlan {
        let mut sized = self.clone();
        sized.key.tasks = tasks;
        sized.parallelism = match self.model() {
            Some(m) => m.build().parallelism(tasks),
            None => self.parallelism.min(tasks).max(1),
        };
        sized
    }
}

impl Plan {
    /// The same plan at a fixed rate: one probe of `--rate auto`.
    pub fn at_rate(&self, rate: f64) -> Plan {
        let mut p = self.clone();
        if let Some(o) = &mut p.open {
            o.rate = Rate::Fixed(rate);
        }
        p
    }

    /// The plan with every cell run over each of `counts` hosts: `async:100` over 3 hosts is
    /// 300 in flight, so its workers and parallelism are 3 times the cell's.
    pub fn over_hosts(mut self, counts: &[usize]) -> Plan {
        let mut cells = Vec::with_capacity(self.cells.len() * counts.len());
        for c in &self.cells {
            for &k in counts {
                let mut h = c.clone();
                h.key.hosts = Some(k);
                h.workers = c.workers.map(|w| w * k);
                h.parallelism = c.parallelism * k;
                cells.push(h);
            }
        }
        self.cells = cells;
        self
    }

    /// The plan with the external cells of `peers` added (the classic programs, which the
    /// bind step sizes on this machine).
    pub fn with_peers(mut self, peers: &[PeerRequest]) -> Result<Plan> {
        let mut added = Vec::new();
        for p in peers {
            added.extend(peer_cells(p, &self.cells, &self.name, &self.options)?);
        }
        self.cells.extend(added);
        Ok(self)
    }

    /// Whether some cell fetches `http:/PATH` from the run's own server and none was given.
    pub fn needs_server(&self) -> bool {
        self.cells.iter().any(|c| c.needs_server)
    }
}

/// The checks of a `--http3` cell: an `http:` workload, a model whose client speaks HTTP/3,
/// and an `https://` URL (QUIC is always TLS); `http:/PATH` on the study's own server is
/// checked by the plan, which runs that server over TLS for it.
fn check_http3(req: &CellRequest, w: &dyn Workload, m: &dyn Model) -> Result<()> {
    let Some(http) = w.http() else {
        return Err(Error::flag(
            "--http3",
            format!(
                "--http3 applies to http: workloads; '{}' is not one",
                req.workload
            ),
        ));
    };
    if !m.speaks_http3() {
        return Err(Error::flag(
            "--http3",
            format!(
                "--http3: model '{}' does not speak HTTP/3 (models that speak HTTP/3: {})",
                req.model,
                model::HTTP3_MODELS.join(", ")
            ),
        ));
    }
    if let Some(url) = http.url(0).filter(|u| !u.starts_with("https://")) {
        return Err(Error::flag(
            "--http3",
            format!("--http3 needs an https:// URL (QUIC is always TLS); '{url}' is not one"),
        ));
    }
    Ok(())
}

/// Validates one cell and fills in what the runner needs.
pub fn cell(req: &CellRequest, opts: &WorkloadOptions) -> Result<CellPlan> {
    Ok(checked_cell(req, opts)?.0)
}

/// [`cell`], with the workload it parsed: what the bind step (and an agent, for a share)
/// acquires, so that nothing parses the spec a second time.
pub(crate) fn checked_cell(
    req: &CellRequest,
    opts: &WorkloadOptions,
) -> Result<(CellPlan, ParsedWorkload)> {
    let opts = &WorkloadOptions {
        http2: req.http2,
        http3: req.http3,
        ..opts.clone()
    };
    let w = workload::parse(&req.workload, opts)?;
    let spec = ModelSpec::parse(&req.model)?;
    let m = spec.build();
    if req.gil && !w.gil_governs() {
        return Err(Error::bad(Input::Workload, format!(
            "workload '{}' cannot run with --gil: a lock inside concur does not govern another process",
            req.workload
        )));
    }
    m.check(&*w, req.gil).map_err(|why| {
        Error::bad(
            Input::Model,
            format!(
                "model '{}' cannot run workload '{}': {why}",
                req.model, req.workload
            ),
        )
    })?;
    if opts.http2 {
        if w.http().is_none() {
            return Err(Error::flag(
                "--http2",
                format!(
                    "--http2 applies to http: workloads; '{}' is not one",
                    req.workload
                ),
            ));
        }
        if !m.speaks_http2() {
            return Err(Error::flag(
                "--http2",
                format!(
                    "--http2: model '{}' speaks only HTTP/1.1 (models that speak HTTP/2: {})",
                    req.model,
                    model::HTTP2_MODELS.join(", ")
                ),
            ));
        }
    }
    if opts.http3 {
        check_http3(req, &*w, &*m)?;
    }
    if req.tasks == 0 || req.tasks > MAX_TASKS {
        return Err(Error::bad(
            Input::Tasks,
            format!("tasks '{}' must be from 1 to {MAX_TASKS}", req.tasks),
        ));
    }
    let plan = CellPlan {
        kind: CellKind::Concur { model: spec },
        key: CellKey {
            study: req.study.clone(),
            workload: w.spec(),
            model: m.spec(),
            tasks: req.tasks,
            gil: req.gil,
            http2: req.http2,
            http3: req.http3,
            hosts: None,
        },
        workers: m.workers(),
        parallelism: m.parallelism(req.tasks),
        traits: traits(&*w, &*m, req.expected_failure),
        needs_server: w.http().is_some_and(|h| h.needs_server()),
        needs_redis: m.needs_redis(),
    };
    Ok((plan, ParsedWorkload(w)))
}

/// The external cells of `peer`: one per task count of the table it joins (the first
/// workload's, or the one it names), in that table's traits, so that its speedup and ideal
/// are taken over the same `seq` cell as concur's rows.
fn peer_cells(
    peer: &PeerRequest,
    cells: &[CellPlan],
    study: &str,
    options: &WorkloadOptions,
) -> Result<Vec<CellPlan>> {
    let label = &peer.label;
    if label.contains(char::is_whitespace) || label.contains('=') {
        return Err(Error::flag(
            "--peer",
            format!("--peer label '{label}' must be one word without '=' (e.g. parallel:4)"),
        ));
    }
    if model::REGISTRY
        .iter()
        .any(|e| e.name == label.split(':').next().unwrap_or(""))
    {
        return Err(Error::flag(
            "--peer",
            format!(
            "--peer label '{label}' names one of concur's models; choose another (e.g. my-{label})"
        ),
        ));
    }
    let workers = match label.rsplit_once(':') {
        Some((_, w)) if w.chars().all(|c| c.is_ascii_digit()) && !w.is_empty() => Some(
            model::parse_workers(w)
                .map_err(|why| Error::flag("--peer", format!("--peer label '{label}': {why}")))?,
        ),
        _ => None,
    };
    let group: Vec<&CellPlan> = cells
        .iter()
        .filter(|c| c.is_concur() && c.key.gil == peer.gil)
        .filter(|c| peer.workload.as_ref().is_none_or(|w| *w == c.key.workload))
        .collect();
    let Some(first) = group.first() else {
        return Err(Error::flag(
            "--peer",
            format!(
                "--peer '{label}' has no table to join: the study has no cell of workload {}",
                peer.workload.as_deref().unwrap_or("(any)")
            ),
        ));
    };
    let workload = first.key.workload.clone();
    let mut tasks: Vec<usize> = match &peer.tasks {
        Some(t) => t.clone(),
        None => group
            .iter()
            .filter(|c| c.key.workload == workload)
            .map(|c| c.key.tasks)
            .collect(),
    };
    tasks.dedup();
    let mut seen = std::collections::BTreeSet::new();
    tasks.retain(|n| seen.insert(*n));
    let needs_server = peer.command.contains("{url}") && options.base_url.is_none();
    let family = label
        .rsplit_once(':')
        .filter(|_| workers.is_some())
        .map_or(label.as_str(), |(f, _)| f)
        .to_string();
    Ok(tasks
        .into_iter()
        .map(|n| CellPlan {
            kind: CellKind::External {
                command: peer.command.clone(),
                bytes_per_task: peer.bytes_per_task,
                wait_primitive: peer.wait_primitive,
            },
            key: CellKey {
                study: study.to_string(),
                workload: workload.clone(),
                model: label.clone(),
                tasks: n,
                gil: peer.gil,
                http2: false,
                http3: false,
                hosts: None,
            },
            workers,
            parallelism: workers.or(peer.workers).unwrap_or(n).min(n).max(1),
            traits: Traits {
                family: family.clone(),
                baseline: false,
                task_processes: false,
                queue: false,
                expected_failure: false,
                external: true,
                ..first.traits.clone()
            },
            needs_server,
            needs_redis: false,
        })
        .collect())
}

/// What a cell is, from its workload and model: the one place that decides it.
fn traits(w: &dyn Workload, m: &dyn Model, expected_failure: bool) -> Traits {
    let nature = w.nature();
    Traits {
        nature,
        waits: nature.waits(),
        http: w.http().is_some(),
        family: m.family(),
        baseline: m.is_baseline(),
        task_processes: m.task_processes(),
        queue: m.is_queue(),
        expected_failure,
        external: false,
    }
}

fn check_range(flag: &str, value: usize, lo: usize, hi: usize) -> Result<usize> {
    if value < lo || value > hi {
        return Err(Error::flag(
            flag,
            format!("{flag} '{value}' must be from {lo} to {hi}"),
        ));
    }
    Ok(value)
}

/// Whether `--classic` applies to these options: a built-in study, not a free-form one.
pub fn check_classic(o: &StudyOptions) -> Result<()> {
    if !o.classic {
        return Ok(());
    }
    let with_classic: Vec<&str> = presets::STUDIES
        .iter()
        .filter(|s| s.classic)
        .map(|s| s.name)
        .collect();
    let name = o.study.as_deref().unwrap_or(presets::TOUR);
    // An unknown study is the registry's to refuse (with the names allowed).
    let known = presets::STUDIES.iter().any(|s| s.name == name);
    if o.is_freeform() || (known && !with_classic.contains(&name)) {
        return Err(Error::flag("--classic", format!(
            "--classic adds the classic programs to these studies: {}; a free-form study takes --peer LABEL=COMMAND instead",
            with_classic.join(", ")
        )));
    }
    Ok(())
}

/// Checks the HTTP request flags (`--method`, `-H`, `-k`, `--no-keepalive`) into the
/// options the workload reads. `--body` and `--cacert` name files, which the bind step reads
/// ([`Needs`]); here they are only checked against each other.
pub fn request_options(o: &StudyOptions) -> Result<WorkloadOptions> {
    let method = match &o.request.method {
        Some(m) => Some(
            workload::http::check_method(m)
                .map_err(Error::usage)?
                .to_string(),
        ),
        None => None,
    };
    let headers = o
        .request
        .headers
        .iter()
        .map(|h| workload::http::check_header(h))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(Error::usage)?;
    if let (true, Some(ca)) = (o.request.insecure, &o.request.cacert) {
        return Err(Error::flag("--insecure", format!(
            "--insecure and --cacert '{}' contradict each other: -k trusts every certificate, --cacert one more CA; give one of them",
            ca.display()
        )));
    }
    if o.request.connections == Some(0) {
        return Err(Error::flag(
            "--connections",
            "--connections '0' must be at least 1 (the connections that carry the HTTP/2 or HTTP/3 streams)",
        ));
    }
    if let (Some(c), false) = (o.request.connections, o.request.http2 || o.request.http3) {
        return Err(Error::flag(
            "--connections",
            format!("--connections '{c}' applies with --http2 or --http3 (the connections that carry their streams)"),
        ));
    }
    Ok(WorkloadOptions {
        method,
        headers,
        insecure: o.request.insecure,
        keepalive: !o.request.no_keepalive,
        // HTTP/2 is the cell's (`CellKey::http2`): the crawl study runs both versions.
        connections: o.request.connections,
        ..WorkloadOptions::default()
    })
}

/// Builds the plan from the user's options; every bad value is a usage error naming it. The
/// checks run in this order, so that a command line with several mistakes is refused for the
/// same one each time: the options alone, the workload options, the queue, the open model, the
/// cells, the peers, what the cells need, the repetitions, the hub.
pub fn build(o: &StudyOptions) -> Result<Plan> {
    let freeform = o.is_freeform();
    check_study_options(o, freeform)?;
    let options = workload_options(o)?;
    if o.tls && o.url.is_some() {
        return Err(Error::flag(
            "--tls",
            "--tls runs the study's own server over TLS; with --url give an https:// URL instead",
        ));
    }
    let jobs_backend = checked_jobs_backend(o)?;
    let redis_url = jobs_backend.as_ref().filter(|u| u.is_redis());
    let open = open_plan(o, freeform)?;
    refuse_search_of_external(o, open.as_ref())?;
    let preset = if freeform {
        freeform_preset(o, open.is_some())?
    } else {
        presets::preset(
            o.study.as_deref().unwrap_or(presets::TOUR),
            o,
            redis_url.is_some(),
        )?
    };
    let requests = sized_by_duration(preset.cells.clone(), open.as_ref())?;
    let (mut cells, workloads) = checked_cells(&requests, &options)?;
    let mut peers = Vec::new();
    for p in &o.peers.peers {
        let p = PeerRequest::parse(p).map_err(Error::usage)?;
        peers.extend(peer_cells(&p, &cells, &preset.name, &options)?);
    }
    cells.extend(peers);
    check_cells_needs(o, &cells, redis_url.is_some())?;
    // HTTP/3 of the study's own server: QUIC is always TLS, so that server runs over TLS (with
    // a self-signed certificate the runs trust) for every row, HTTP/1.1 and HTTP/2 too, and
    // the rows compare like with like.
    let own_http3 = cells.iter().any(|c| c.key.http3 && c.needs_server);
    let mut notes = preset.notes;
    if own_http3 && !o.tls {
        notes.push("--http3: the study's own server runs over TLS (QUIC is always TLS) and serves HTTP/3 on the UDP port of its TCP port; every row goes over TLS".into());
    }
    let repeat = repeat_of(
        o,
        open.as_ref().is_some_and(OpenPlan::is_auto),
        preset.repeat,
    )?;
    let hub = hub_plan(o, &cells)?;
    Ok(Plan {
        needs: needs_of(o),
        workloads,
        hub,
        tls: o.tls || own_http3,
        http3: own_http3,
        name: preset.name,
        cells,
        repeat,
        warmup: check_range("--warmup", o.warmup.unwrap_or(preset.warmup), 0, 100)?,
        timeout: o.timeout,
        settings: o.run,
        options,
        notes,
        jobs_backend,
        hooks: o.peers.hooks.clone(),
        open,
    })
}

/// The checks of the options on their own: `--classic`'s study, a study beside free-form
/// cells, the run settings, `--timeout`.
fn check_study_options(o: &StudyOptions, freeform: bool) -> Result<()> {
    check_classic(o)?;
    if let (Some(study), true) = (&o.study, freeform) {
        return Err(Error::usage(format!(
            "the '{study}' study has fixed cells; --workload/--model/--tasks build a free-form study instead: use one or the other"
        )));
    }
    o.run.check()?;
    if o.timeout.is_zero() || o.timeout > MAX_TIMEOUT {
        return Err(Error::flag(
            "--timeout",
            format!(
                "--timeout '{}' must be above 0 and at most 24h",
                crate::base::units::fmt_duration_spec(o.timeout)
            ),
        ));
    }
    Ok(())
}

/// What every workload of the study is built with: the request's options and the study's.
fn workload_options(o: &StudyOptions) -> Result<WorkloadOptions> {
    Ok(WorkloadOptions {
        mail_sink: o.mail_sink,
        base_url: o.url.clone(),
        request_timeout_ms: o.request.request_timeout.as_millis().max(1) as u64,
        cmd_shell: o.cmd.shell,
        cmd_output: o.cmd.cmd_output.clone(),
        cell_tasks: None,
        ..request_options(o)?
    })
}

/// `--jobs-backend`, parsed; `memory` is refused (it is the `jobs-memory:W` model's own queue).
fn checked_jobs_backend(o: &StudyOptions) -> Result<Option<crate::jobs::BackendUrl>> {
    let jobs_backend = o.jobs_backend.parsed()?;
    if jobs_backend == Some(crate::jobs::BackendUrl::Memory) {
        return Err(Error::flag("--jobs-backend",
            "--jobs-backend 'memory': the in-process queue is the jobs-memory:W model; --jobs-backend takes sqlite:PATH (for jobs:W) or redis://HOST:PORT/DB (for jobs-redis:W)",
        ));
    }
    Ok(jobs_backend)
}

/// The search probes a model at rates it releases tasks on; an external program brings its
/// own concurrency and follows no arrival schedule, so there is nothing to search.
fn refuse_search_of_external(o: &StudyOptions, open: Option<&OpenPlan>) -> Result<()> {
    if !open.is_some_and(|p| matches!(p.rate, Rate::Auto(_))) {
        return Ok(());
    }
    let external = o
        .peers
        .peers
        .first()
        .map(|p| format!("--peer '{p}'"))
        .or(o.classic.then(|| "--classic".to_string()));
    match external {
        Some(what) => Err(Error::flag("--rate", format!(
            "--rate auto searches the rate concur's models sustain; {what} runs an external program, which follows no arrival schedule: give a fixed --rate, or leave the external cells out"
        ))),
        None => Ok(()),
    }
}

/// A free-form study's cells: every workload under every model (scans expanded) at every task
/// count. An open run without `-n` starts at 1 task, sized later from its rate and duration.
fn freeform_preset(o: &StudyOptions, open: bool) -> Result<presets::Preset> {
    if o.quick || o.stress {
        return Err(Error::flag("--quick",
            "--quick and --stress scale the built-in studies; a free-form study runs exactly the --tasks given",
        ));
    }
    if o.request.http2 && o.request.http3 {
        return Err(Error::flag(
            "--http3",
            "--http3 and --http2 ask for two versions of the same cells; give one (the crawl study takes both: rows of each)",
        ));
    }
    if o.workloads.is_empty() || o.models.is_empty() {
        return Err(Error::usage(
            "a free-form study needs at least one --workload and one --model (e.g. --workload fib:30 --model seq --model pool:4)",
        ));
    }
    let tasks = match (open, o.tasks.is_empty()) {
        // An open run without -n lasts --duration (5 s by default); its task count is
        // set below from the rate.
        (true, true) => vec![1],
        (false, true) => vec![10],
        (_, false) => o.tasks.clone(),
    };
    let name = o.name.clone().unwrap_or_else(|| "custom".into());
    let mut models = Vec::new();
    for m in &o.models {
        models.extend(model::expand_scan(m)?);
    }
    let mut cells = Vec::new();
    for w in &o.workloads {
        for m in &models {
            for &n in &tasks {
                cells.push(CellRequest {
                    study: name.clone(),
                    workload: w.clone(),
                    model: m.clone(),
                    tasks: n,
                    gil: o.lock.gil,
                    http2: o.request.http2,
                    http3: o.request.http3,
                    expected_failure: false,
                });
            }
        }
    }
    Ok(presets::Preset {
        name,
        cells,
        repeat: FREEFORM_REPEAT,
        warmup: 1,
        notes: vec![],
    })
}

/// An open run of a given `--duration` releases rate × duration tasks: every cell's count.
fn sized_by_duration(
    mut requests: Vec<CellRequest>,
    open: Option<&OpenPlan>,
) -> Result<Vec<CellRequest>> {
    let Some((o, mean)) = open.and_then(|o| Some((o, o.mean_rate()?))) else {
        return Ok(requests);
    };
    if let Some(d) = o.duration {
        let n = (mean * d.as_secs_f64()).ceil().max(1.0);
        if n > MAX_TASKS as f64 {
            return Err(Error::flag(
                "--rate",
                format!(
                    "--rate {mean} for --duration {} is {n} tasks, more than {MAX_TASKS}",
                    crate::base::units::fmt_duration_spec(d)
                ),
            ));
        }
        for c in &mut requests {
            c.tasks = n as usize;
        }
    }
    Ok(requests)
}

/// Each request checked into a cell, and each workload parsed once.
fn checked_cells(
    requests: &[CellRequest],
    options: &WorkloadOptions,
) -> Result<(Vec<CellPlan>, Vec<ParsedWorkload>)> {
    let mut cells = Vec::with_capacity(requests.len());
    let mut workloads: Vec<ParsedWorkload> = Vec::new();
    for r in requests {
        let (c, w) = checked_cell(r, options)?;
        if !workloads.iter().any(|k| k.0.spec() == c.key.workload) {
            workloads.push(w);
        }
        cells.push(c);
    }
    Ok((cells, workloads))
}

/// What the cells need that the options must give: a Redis for `jobs-redis:W` (the bind step
/// checks that it answers), a server of the study's own for `--tls`.
fn check_cells_needs(o: &StudyOptions, cells: &[CellPlan], redis: bool) -> Result<()> {
    if cells.iter().any(|c| c.needs_redis) && !redis {
        return Err(Error::usage(
            "jobs-redis:W needs --jobs-backend redis://HOST:PORT/DB",
        ));
    }
    if o.tls && !cells.iter().any(|c| c.needs_server) {
        return Err(Error::flag("--tls",
            "--tls runs the study's own delay server over TLS, and this study starts none (it applies to http:/PATH workloads without --url, and to the crawl study)",
        ));
    }
    Ok(())
}

/// The counted runs of each cell. Under `--rate auto` the search's probes are the runs, unless
/// `-r N` asks for N more at the rate found (see OpenPlan::remeasure); its row is then their
/// median.
fn repeat_of(o: &StudyOptions, auto: bool, preset: usize) -> Result<usize> {
    match (o.repeat.repeat, auto) {
        (Some(n), _) => check_range("--repeat", n, 1, 1000),
        (None, true) => Ok(1),
        (None, false) => check_range("--repeat", preset, 1, 1000),
    }
}

/// What the bind step must read or prepare before the runs: the body file, the CA file, the
/// classic programs' sizes.
fn needs_of(o: &StudyOptions) -> Needs {
    Needs {
        body: o.request.body.clone(),
        cacert: o.request.cacert.clone(),
        classic: o.classic.then(|| ClassicSizes {
            quick: o.quick,
            full: o.full,
            gil: o.lock.gil,
            cacert: o.request.cacert.clone(),
            insecure: o.request.insecure,
        }),
    }
}

/// Validates `--hub` and `--hosts` (the agents themselves are reached by the bind step).
fn hub_plan(o: &StudyOptions, cells: &[CellPlan]) -> Result<Option<HubPlan>> {
    let Some(url) = o.hub.url() else {
        if o.hub.agent_keys.is_some() {
            return Err(Error::flag(
                "--agent-keys",
                "--agent-keys: lists the keys of a hub's agents: it needs --hub URL (or CONCUR_HUB)",
            ));
        }
        if !o.hub.hosts.is_empty() || o.hub.server_host.is_some() {
            return Err(Error::flag("--hosts",
                "--hosts and --server-host place work on agents of a hub: they need --hub URL (or CONCUR_HUB)",
            ));
        }
        return Ok(None);
    };
    let url = crate::jobs::RedisUrl::parse_for("--hub", url)?;
    for &k in &o.hub.hosts {
        check_range("--hosts", k, 1, 1000)?;
    }
    if o.classic || cells.iter().any(|c| !c.is_concur()) {
        return Err(Error::flag("--hub",
            "--hub: --peer and --classic programs run on this machine only; run them in a study without --hub",
        ));
    }
    // The study's own server may run on an agent, whose server is started over the hub
    // without HTTP/3.
    if cells.iter().any(|c| c.key.http3 && c.needs_server) {
        return Err(Error::flag("--http3",
            "--http3 with --hub: the study's own server (on an agent or here) serves no HTTP/3 over a hub; give --url https://HOST:PORT of a server that does (concur serve --http3)",
        ));
    }
    let mut hosts = o.hub.hosts.clone();
    hosts.dedup();
    if let (Some(name), false) = (&o.hub.server_host, cells.iter().any(|c| c.needs_server)) {
        return Err(Error::flag("--server-host", format!(
            "--server-host '{name}': this study starts no delay server (it applies to http:/PATH workloads without --url, and to the crawl study)"
        )));
    }
    Ok(Some(HubPlan {
        url,
        hosts,
        server_host: o.hub.server_host.clone(),
        signing_key: o.hub.hub.signing_key.clone(),
        agent_keys: o.hub.agent_keys.clone(),
    }))
}

/// Validates `--rate`, `--duration`, `--interval` and `--slo` together.
fn open_plan(all: &StudyOptions, freeform: bool) -> Result<Option<OpenPlan>> {
    let o = &all.open;
    let Some(text) = &o.rate else {
        if let Some(d) = o.duration {
            return Err(Error::flag(
                "--duration",
                format!(
                    "--duration '{}' applies to open runs: give --rate R too",
                    crate::base::units::fmt_duration_spec(d)
                ),
            ));
        }
        if let Some(slo) = &o.slo {
            return Err(Error::flag(
                "--slo",
                format!("--slo '{slo}' applies to --rate auto only"),
            ));
        }
        if let Some(g) = o.grain {
            return Err(Error::flag(
                "--grain",
                format!(
                    "--grain '{}' applies to open runs: give --rate R too",
                    crate::base::units::fmt_duration_spec(g)
                ),
            ));
        }
        return Ok(None);
    };
    let rate = rate::parse_rate(text, o.slo.as_deref())?;
    if let Some(d) = o
        .duration
        .filter(|d| d.is_zero() || *d > Duration::from_secs(86_400))
    {
        return Err(Error::flag(
            "--duration",
            format!(
                "--duration '{}' must be above 0 and at most 24h",
                crate::base::units::fmt_duration_spec(d)
            ),
        ));
    }
    if o.interval < Duration::from_millis(10) || o.interval > Duration::from_secs(3600) {
        return Err(Error::flag(
            "--interval",
            format!(
                "--interval '{}' must be from 10ms to 1h",
                crate::base::units::fmt_duration_spec(o.interval)
            ),
        ));
    }
    if let Some(g) = o
        .grain
        .filter(|g| *g < Duration::from_micros(1) || *g > Duration::from_secs(1))
    {
        return Err(Error::flag(
            "--grain",
            format!(
                "--grain '{}' must be from 1us to 1s (e.g. 1ms, wrk2's grain)",
                crate::base::units::fmt_duration_spec(g)
            ),
        ));
    }
    if o.duration.is_some() && !all.tasks.is_empty() {
        return Err(Error::flag(
            "-n",
            "-n/--tasks and --duration both size an open run: give one or the other",
        ));
    }
    let auto = matches!(rate, Rate::Auto(_));
    if auto && !all.tasks.is_empty() {
        return Err(Error::flag("--rate",
            "--rate auto sizes each probe from its rate and --duration (2 s by default): -n/--tasks does not apply",
        ));
    }
    if auto && all.warmup.is_some_and(|w| w > 0) {
        return Err(Error::flag("--rate",
            "--rate auto runs no warm-up (its search probes each cell before the runs at the rate found): --warmup does not apply",
        ));
    }
    let duration = match (o.duration, auto) {
        (Some(d), _) => Some(d),
        (None, true) => Some(rate::PROBE_DURATION),
        (None, false) if freeform && all.tasks.is_empty() => Some(rate::DEFAULT_DURATION),
        (None, false) => None,
    };
    Ok(Some(OpenPlan {
        rate,
        duration,
        interval: o.interval,
        grain: o.grain,
        remeasure: if auto {
            all.repeat.repeat.unwrap_or(0)
        } else {
            0
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::results::Nature;

    fn opts() -> StudyOptions {
        StudyOptions::default()
    }

    #[test]
    fn freeform_is_the_cross_product() {
        let o = StudyOptions {
            workloads: vec!["fib:10".into(), "sleep:1ms".into()],
            models: vec!["seq".into(), "pool:2".into()],
            tasks: vec![1, 4],
            ..opts()
        };
        let p = build(&o).unwrap();
        assert_eq!(p.cells.len(), 8);
        assert_eq!(p.cells[0].key.study, "custom");
    }

    #[test]
    fn conflicts_and_bad_values_are_usage_errors() {
        let cases = [
            StudyOptions {
                study: Some("gil".into()),
                workloads: vec!["fib:1".into()],
                ..opts()
            },
            StudyOptions {
                workloads: vec!["fib:1".into()],
                ..opts()
            },
            StudyOptions {
                workloads: vec!["fib:1".into()],
                models: vec!["seq".into()],
                quick: true,
                ..opts()
            },
            StudyOptions {
                workloads: vec!["fib:1".into()],
                models: vec!["seq".into()],
                tasks: vec![0],
                ..opts()
            },
            StudyOptions {
                study: Some("nope".into()),
                ..opts()
            },
            StudyOptions {
                study: Some("gil".into()),
                repeat: crate::plan::options::RepeatArg { repeat: Some(0) },
                ..opts()
            },
            StudyOptions {
                study: Some("gil".into()),
                lock: crate::plan::options::LockOptions { gil: true },
                ..opts()
            },
            StudyOptions {
                study: Some("gil".into()),
                stress: true,
                ..opts()
            },
            StudyOptions {
                study: Some("mailer".into()),
                jobs_backend: crate::plan::options::JobsBackendArg {
                    jobs_backend: Some("mysql://x".into()),
                },
                ..opts()
            },
            StudyOptions {
                study: Some("mailer".into()),
                jobs_backend: crate::plan::options::JobsBackendArg {
                    jobs_backend: Some("memory".into()),
                },
                ..opts()
            },
            StudyOptions {
                workloads: vec!["fib:1".into()],
                models: vec!["jobs-redis:2".into()],
                ..opts()
            },
        ];
        for o in cases {
            match build(&o) {
                Err(Error::Usage { .. }) => {}
                other => panic!("{o:?} gave {other:?}"),
            }
        }
    }

    fn open(
        rate: Option<&str>,
        duration: Option<u64>,
        slo: Option<&str>,
        tasks: &[usize],
    ) -> StudyOptions {
        StudyOptions {
            workloads: vec!["sleep:1ms".into()],
            models: vec!["pool:2".into()],
            tasks: tasks.to_vec(),
            open: OpenOptions {
                rate: rate.map(String::from),
                duration: duration.map(Duration::from_secs),
                slo: slo.map(String::from),
                ..OpenOptions::default()
            },
            ..opts()
        }
    }

    #[test]
    fn open_runs_are_sized_by_duration_or_tasks_and_bad_flags_refused() {
        let p = build(&open(Some("50"), Some(2), None, &[])).unwrap();
        assert_eq!(p.cells[0].key.tasks, 100);
        let p = build(&open(Some("10..30"), None, None, &[])).unwrap();
        // Five seconds at a mean of 20/s by default.
        assert_eq!(p.cells[0].key.tasks, 100);
        let p = build(&open(Some("50"), None, None, &[7])).unwrap();
        assert_eq!(p.cells[0].key.tasks, 7);
        assert!(build(&open(None, None, None, &[])).unwrap().open.is_none());
        for (o, needle) in [
            (open(None, Some(2), None, &[]), "--duration '2s'"),
            (open(None, None, Some("p99<1s"), &[]), "--slo 'p99<1s'"),
            (open(Some("0"), None, None, &[]), "--rate '0'"),
            (open(Some("9..3"), None, None, &[]), "--rate '9..3'"),
            (open(Some("auto"), None, None, &[]), "needs --slo"),
            (open(Some("auto"), None, Some("p99<1s"), &[5]), "-n/--tasks"),
            (
                StudyOptions {
                    peers: crate::plan::options::PeerOptions {
                        peers: vec!["p=true".into()],
                        ..Default::default()
                    },
                    ..open(Some("auto"), None, Some("p99<1s"), &[])
                },
                "--peer 'p=true' runs an external program",
            ),
            (
                open(Some("5"), Some(1), None, &[5]),
                "-n/--tasks and --duration",
            ),
        ] {
            match build(&o) {
                Err(Error::Usage { message: e, .. }) => assert!(e.contains(needle), "{e}"),
                other => panic!("{o:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn crawl_with_http2_plans_h2_rows_after_every_http1_row() {
        let plain = build(&StudyOptions {
            study: Some("crawl".into()),
            ..opts()
        })
        .unwrap();
        let mut o = StudyOptions {
            study: Some("crawl".into()),
            ..opts()
        };
        o.request.http2 = true;
        let both = build(&o).unwrap();
        let n = plain.cells.len();
        assert!(plain.cells.iter().all(|c| !c.key.http2));
        assert_eq!(both.cells[..n], plain.cells[..]);
        let h2: Vec<String> = both.cells[n..].iter().map(|c| c.key.label()).collect();
        assert_eq!(
            h2,
            [
                "async:100 h2 ×1000",
                "async-local:100 h2 ×1000",
                "curl:100 h2 ×1000",
                "async:1000 h2 ×1000"
            ]
        );
        // The runner asks each cell's own version of its child.
        for c in &both.cells {
            let iteration = crate::runner::Iteration::Counted(0);
            let req = crate::runner::request(&both, c, iteration);
            assert_eq!(req.recipe.options.http2, c.key.http2, "{}", c.key.label());
        }
    }

    #[test]
    fn crawl_with_http3_plans_h3_rows_and_its_own_server_over_tls_with_http3() {
        let mut o = StudyOptions {
            study: Some("crawl".into()),
            ..opts()
        };
        let plain = build(&o).unwrap();
        assert!(!plain.tls && !plain.http3);
        o.request.http2 = true;
        o.request.http3 = true;
        let all = build(&o).unwrap();
        let n = plain.cells.len();
        assert_eq!(all.cells[..n], plain.cells[..]);
        let added: Vec<String> = all.cells[n..].iter().map(|c| c.key.label()).collect();
        assert_eq!(
            added,
            [
                "async:100 h2 ×1000",
                "async-local:100 h2 ×1000",
                "curl:100 h2 ×1000",
                "async:1000 h2 ×1000",
                "async:100 h3 ×1000",
                "async-local:100 h3 ×1000",
                "async:1000 h3 ×1000"
            ]
        );
        // QUIC is always TLS: the study's own server runs over TLS and serves HTTP/3.
        assert!(all.tls && all.http3);
        assert!(all
            .notes
            .iter()
            .any(|n| n.contains("every row goes over TLS")));
        for c in &all.cells {
            let req = crate::runner::request(&all, c, crate::runner::Iteration::Counted(0));
            assert_eq!(req.recipe.options.http3, c.key.http3, "{}", c.key.label());
            assert!(!(c.key.http2 && c.key.http3), "{}", c.key.label());
        }
    }

    #[test]
    fn only_the_stress_cell_is_planned_to_fail() {
        let p = build(&StudyOptions {
            study: Some("mailer".into()),
            stress: true,
            ..opts()
        })
        .unwrap();
        let planned: Vec<&CellPlan> = p
            .cells
            .iter()
            .filter(|c| c.traits.expected_failure)
            .collect();
        assert_eq!(planned.len(), 1);
        assert_eq!(planned[0].key.label(), "thread ×30000");
    }

    #[test]
    fn traits_come_from_the_workload_and_model_objects() {
        let o = WorkloadOptions::default();
        let req = |w: &str, m: &str| CellRequest {
            study: "custom".into(),
            workload: w.into(),
            model: m.into(),
            tasks: 4,
            gil: false,
            http2: false,
            http3: false,
            expected_failure: false,
        };
        let seq = cell(&req("sleep:10ms", "seq"), &o).unwrap();
        assert_eq!(seq.traits.nature, Nature::Delay(Duration::from_millis(10)));
        assert_eq!(seq.traits.nature.delay_s(), Some(0.01));
        assert!(seq.traits.waits && seq.traits.baseline && !seq.traits.http);
        let fork = cell(&req("read", "fork"), &o).unwrap();
        assert_eq!(fork.traits.nature, Nature::BlockingIo);
        assert!(!fork.traits.waits && fork.traits.task_processes && !fork.traits.baseline);
        assert_eq!(fork.traits.family, "fork");
        let http = cell(&req("http:/add?delay=1", "pool:3"), &o).unwrap();
        assert!(http.traits.http && http.needs_server && !http.needs_redis);
        assert_eq!(http.traits.family, "pool");
        let jobs = cell(&req("fib:1", "jobs-redis:2"), &o).unwrap();
        assert!(jobs.traits.queue && jobs.needs_redis && jobs.traits.nature == Nature::Cpu);
    }

    #[test]
    fn studies_build() {
        for s in ["gil", "mailer", "tour"] {
            for quick in [false, true] {
                let p = build(&StudyOptions {
                    study: Some(s.into()),
                    quick,
                    ..opts()
                })
                .unwrap();
                assert!(!p.cells.is_empty(), "{s}");
            }
        }
    }
}
