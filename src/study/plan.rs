//! The plan: the validated matrix of cells a study runs, built once from the user's options.
//! Every check of specs and flags lives here; nothing downstream re-validates.

use std::time::Duration;

use crate::analysis::results::{CellKey, Nature, Traits};
use crate::error::{Error, Result};
use crate::gil::DEFAULT_SWITCH_INTERVAL;
use crate::model::{self, os_thread::DEFAULT_STACK, Model};
use crate::study::presets;
use crate::workload::{self, MailSink, Workload, WorkloadOptions};

/// The most tasks a cell may have.
pub const MAX_TASKS: usize = 1_000_000;

/// What the user asked for, before validation (the CLI fills this in).
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// A built-in study (`gil`, `mailer`, `tour`), or `None` for free-form / the tour.
    pub study: Option<String>,
    /// Free-form workload specs.
    pub workloads: Vec<String>,
    /// Free-form model specs.
    pub models: Vec<String>,
    /// Free-form task counts.
    pub tasks: Vec<usize>,
    /// Turn on the interpreter-lock emulation (free-form and `mailer`).
    pub gil: bool,
    /// The emulated lock's switch interval.
    pub switch_interval: Duration,
    /// Counted runs per cell (default depends on the study).
    pub repeat: Option<usize>,
    /// Uncounted warm-up runs per cell (default depends on the study).
    pub warmup: Option<usize>,
    /// Scale built-in studies down to seconds.
    pub quick: bool,
    /// Add the 30,000-thread cell to `mailer`.
    pub stress: bool,
    /// Kill a run after this long.
    pub timeout: Duration,
    /// Stack size of per-task and pool threads, bytes.
    pub stack_size: usize,
    /// Where `mail` writes.
    pub mail_sink: MailSink,
    /// The server `http:/PATH` workloads go to; `None` starts one in-process when needed.
    pub url: Option<String>,
    /// How long one HTTP request may take.
    pub request_timeout: Duration,
    /// The HTTP method (`--method`), GET when `None`.
    pub method: Option<String>,
    /// `-H 'Name: value'` lines, unchecked.
    pub headers: Vec<String>,
    /// `--body FILE` (`@-`: standard input).
    pub body: Option<String>,
    /// `--cacert FILE`: a CA trusted besides the system's roots.
    pub cacert: Option<std::path::PathBuf>,
    /// `-k/--insecure`: skip certificate verification.
    pub insecure: bool,
    /// `--no-keepalive`: a new connection (and TLS session) per request.
    pub no_keepalive: bool,
    /// `--tls`: the study's own server and its clients speak TLS (a self-signed certificate).
    pub tls: bool,
    /// `crawl`: run the seq cell at full size instead of scaled down.
    pub full: bool,
    /// The jobs models' backend: `sqlite:PATH` for `jobs:W` (`None`: a fresh file per run),
    /// `redis://...` for `jobs-redis:W` (which the `mailer` study then adds).
    pub jobs_backend: Option<String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            study: None,
            workloads: vec![],
            models: vec![],
            tasks: vec![],
            gil: false,
            switch_interval: DEFAULT_SWITCH_INTERVAL,
            repeat: None,
            warmup: None,
            quick: false,
            stress: false,
            timeout: Duration::from_secs(300),
            stack_size: DEFAULT_STACK,
            mail_sink: MailSink::Discard,
            url: None,
            request_timeout: Duration::from_secs(30),
            method: None,
            headers: vec![],
            body: None,
            cacert: None,
            insecure: false,
            no_keepalive: false,
            tls: false,
            full: false,
            jobs_backend: None,
        }
    }
}

/// One cell of the plan, with what the runner and the statistics need to know of it.
#[derive(Debug, Clone, PartialEq)]
pub struct CellPlan {
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
    /// Counted runs per cell.
    pub repeat: usize,
    /// Warm-up runs per cell.
    pub warmup: usize,
    /// Per-run timeout.
    pub timeout: Duration,
    /// Thread stack size, bytes.
    pub stack_size: usize,
    /// The emulated lock's switch interval.
    pub switch_interval: Duration,
    /// Options the workloads read.
    pub options: WorkloadOptions,
    /// Whether the study's own server (when it starts one) speaks TLS (`--tls`).
    pub tls: bool,
    /// What the reader should know about the plan (chosen sizes, scaled cells).
    pub notes: Vec<String>,
    /// The jobs models' backend, parsed (see [`RunOptions::jobs_backend`]).
    pub jobs_backend: Option<crate::jobs::BackendUrl>,
}

/// A cell as a preset or the user names it, before validation.
#[derive(Debug, Clone)]
pub struct CellRequest {
    /// Study name.
    pub study: String,
    /// Workload spec.
    pub workload: String,
    /// Model spec.
    pub model: String,
    /// Task count.
    pub tasks: usize,
    /// Interpreter-lock emulation.
    pub gil: bool,
    /// The study plans this cell to fail (it shows an OS limit): failures do not count.
    pub expected_failure: bool,
}

impl Plan {
    /// Whether some cell fetches `http:/PATH` from the run's own server and none was given.
    pub fn needs_server(&self) -> bool {
        self.cells.iter().any(|c| c.needs_server)
    }
}

/// Validates one cell and fills in what the runner needs.
pub fn cell(req: &CellRequest, opts: &WorkloadOptions) -> Result<CellPlan> {
    let w = workload::parse(&req.workload, opts)?;
    let m = model::parse(&req.model)?;
    m.check(&*w, req.gil).map_err(|why| {
        Error::usage(format!(
            "model '{}' cannot run workload '{}': {why}",
            req.model, req.workload
        ))
    })?;
    if req.tasks == 0 || req.tasks > MAX_TASKS {
        return Err(Error::usage(format!(
            "tasks '{}' must be from 1 to {MAX_TASKS}",
            req.tasks
        )));
    }
    Ok(CellPlan {
        key: CellKey {
            study: req.study.clone(),
            workload: w.spec(),
            model: m.spec(),
            tasks: req.tasks,
            gil: req.gil,
        },
        workers: m.workers(),
        parallelism: m.parallelism(req.tasks),
        traits: traits(&*w, &*m, req.expected_failure),
        needs_server: w.needs_server(),
        needs_redis: m.needs_redis(),
    })
}

/// What a cell is, from its workload and model: the one place that decides it.
fn traits(w: &dyn Workload, m: &dyn Model, expected_failure: bool) -> Traits {
    let (nature, delay_s) = match w.nature() {
        workload::Nature::Cpu => (Nature::Cpu, None),
        workload::Nature::BlockingIo => (Nature::Io, None),
        workload::Nature::Delay(d) => (Nature::Delay, Some(d.as_secs_f64())),
        workload::Nature::Network => (Nature::Net, None),
    };
    Traits {
        nature,
        delay_s,
        waits: nature.waits(),
        http: w.is_http(),
        family: m.family(),
        baseline: m.is_baseline(),
        task_processes: m.task_processes(),
        queue: m.is_queue(),
        expected_failure,
    }
}

fn check_range(flag: &str, value: usize, lo: usize, hi: usize) -> Result<usize> {
    if value < lo || value > hi {
        return Err(Error::usage(format!(
            "{flag} '{value}' must be from {lo} to {hi}"
        )));
    }
    Ok(value)
}

/// Checks the HTTP request flags (`--method`, `-H`, `--body`, `--cacert`, `-k`,
/// `--no-keepalive`) into the options the workload reads; a file is read here, once.
pub fn request_options(o: &RunOptions) -> Result<WorkloadOptions> {
    let method = match &o.method {
        Some(m) => Some(
            workload::http::check_method(m)
                .map_err(Error::usage)?
                .to_string(),
        ),
        None => None,
    };
    let headers = o
        .headers
        .iter()
        .map(|h| workload::http::check_header(h))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(Error::usage)?;
    let body = match o.body.as_deref() {
        None => None,
        Some("@-") => {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut b)
                .map_err(|e| Error::usage(format!("--body '@-': standard input cannot be read: {e}")))?;
            Some(b)
        }
        Some(path) => Some(std::fs::read(path).map_err(|e| {
            Error::usage(format!(
                "--body '{path}' cannot be read: {e} (allowed: a readable file, or @- for standard input)"
            ))
        })?),
    };
    if let (true, Some(ca)) = (o.insecure, &o.cacert) {
        return Err(Error::usage(format!(
            "--insecure and --cacert '{}' contradict each other: -k trusts every certificate, --cacert one more CA; give one of them",
            ca.display()
        )));
    }
    let ca_pem = match &o.cacert {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Error::usage(format!(
                    "--cacert '{}' cannot be read: {e} (allowed: a PEM file of CA certificates)",
                    path.display()
                ))
            })?;
            crate::tls::certs_from_pem(&text)
                .map_err(|why| Error::usage(format!("--cacert '{}' {why}", path.display())))?;
            Some(text)
        }
    };
    Ok(WorkloadOptions {
        method,
        headers,
        body,
        ca_pem,
        insecure: o.insecure,
        keepalive: !o.no_keepalive,
        ..WorkloadOptions::default()
    })
}

/// Builds the plan from the user's options; every bad value is a usage error naming it.
pub fn build(o: &RunOptions) -> Result<Plan> {
    let freeform = !o.workloads.is_empty() || !o.models.is_empty() || !o.tasks.is_empty();
    if let (Some(study), true) = (&o.study, freeform) {
        return Err(Error::usage(format!(
            "the '{study}' study has fixed cells; --workload/--model/--tasks build a free-form study instead: use one or the other"
        )));
    }
    if o.switch_interval < Duration::from_micros(1) || o.switch_interval > Duration::from_secs(1) {
        return Err(Error::usage(format!(
            "--switch-interval '{}' must be from 1us to 1s",
            crate::units::fmt_duration_spec(o.switch_interval)
        )));
    }
    if o.timeout.is_zero() {
        return Err(Error::usage("--timeout must be above 0"));
    }
    if o.stack_size < 16 << 10 || o.stack_size > 1 << 30 {
        return Err(Error::usage(format!(
            "--stack-size '{}' must be from 16k to 1G",
            o.stack_size
        )));
    }
    let options = WorkloadOptions {
        mail_sink: o.mail_sink,
        base_url: o.url.clone(),
        request_timeout_ms: o.request_timeout.as_millis().max(1) as u64,
        ..request_options(o)?
    };
    if o.tls && o.url.is_some() {
        return Err(Error::usage(
            "--tls runs the study's own server over TLS; with --url give an https:// URL instead",
        ));
    }
    let jobs_backend = o
        .jobs_backend
        .as_deref()
        .map(str::parse::<crate::jobs::BackendUrl>)
        .transpose()
        .map_err(|e| Error::usage(format!("--jobs-backend: {e}")))?;
    if jobs_backend == Some(crate::jobs::BackendUrl::Memory) {
        return Err(Error::usage(
            "--jobs-backend 'memory': the in-process queue is the jobs-memory:W model; --jobs-backend takes sqlite:PATH (for jobs:W) or redis://HOST:PORT/DB (for jobs-redis:W)",
        ));
    }
    let redis_url = jobs_backend.as_ref().filter(|u| u.is_redis());
    let preset = if freeform {
        if o.quick || o.stress {
            return Err(Error::usage(
                "--quick and --stress scale the built-in studies; a free-form study runs exactly the --tasks given",
            ));
        }
        if o.workloads.is_empty() || o.models.is_empty() {
            return Err(Error::usage(
                "a free-form study needs at least one --workload and one --model (e.g. --workload fib:30 --model seq --model pool:4)",
            ));
        }
        let tasks = if o.tasks.is_empty() {
            vec![10]
        } else {
            o.tasks.clone()
        };
        let mut cells = Vec::new();
        for w in &o.workloads {
            for m in &o.models {
                for &n in &tasks {
                    cells.push(CellRequest {
                        study: "custom".into(),
                        workload: w.clone(),
                        model: m.clone(),
                        tasks: n,
                        gil: o.gil,
                        expected_failure: false,
                    });
                }
            }
        }
        presets::Preset {
            name: "custom".into(),
            cells,
            repeat: 5,
            warmup: 1,
            notes: vec![],
        }
    } else {
        presets::preset(
            o.study.as_deref().unwrap_or(presets::TOUR),
            o,
            redis_url.is_some(),
        )?
    };
    let cells = preset
        .cells
        .iter()
        .map(|c| cell(c, &options))
        .collect::<Result<Vec<_>>>()?;
    // jobs-redis:W needs a Redis, which must answer now rather than fail every run later.
    if cells.iter().any(|c| c.needs_redis) {
        let url = redis_url.ok_or_else(|| {
            Error::usage("jobs-redis:W needs --jobs-backend redis://HOST:PORT/DB")
        })?;
        crate::jobs::open(url).map_err(|e| Error::usage(format!("--jobs-backend: {e}")))?;
    }
    if o.tls && !cells.iter().any(|c| c.needs_server) {
        return Err(Error::usage(
            "--tls runs the study's own delay server over TLS, and this study starts none (it applies to http:/PATH workloads without --url, and to the crawl study)",
        ));
    }
    Ok(Plan {
        tls: o.tls,
        name: preset.name,
        cells,
        repeat: check_range("--repeat", o.repeat.unwrap_or(preset.repeat), 1, 1000)?,
        warmup: check_range("--warmup", o.warmup.unwrap_or(preset.warmup), 0, 100)?,
        timeout: o.timeout,
        stack_size: o.stack_size,
        switch_interval: o.switch_interval,
        options,
        notes: preset.notes,
        jobs_backend,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> RunOptions {
        RunOptions::default()
    }

    #[test]
    fn freeform_is_the_cross_product() {
        let o = RunOptions {
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
            RunOptions {
                study: Some("gil".into()),
                workloads: vec!["fib:1".into()],
                ..opts()
            },
            RunOptions {
                workloads: vec!["fib:1".into()],
                ..opts()
            },
            RunOptions {
                workloads: vec!["fib:1".into()],
                models: vec!["seq".into()],
                quick: true,
                ..opts()
            },
            RunOptions {
                workloads: vec!["fib:1".into()],
                models: vec!["seq".into()],
                tasks: vec![0],
                ..opts()
            },
            RunOptions {
                study: Some("nope".into()),
                ..opts()
            },
            RunOptions {
                study: Some("gil".into()),
                repeat: Some(0),
                ..opts()
            },
            RunOptions {
                study: Some("gil".into()),
                gil: true,
                ..opts()
            },
            RunOptions {
                study: Some("gil".into()),
                stress: true,
                ..opts()
            },
            RunOptions {
                study: Some("mailer".into()),
                jobs_backend: Some("mysql://x".into()),
                ..opts()
            },
            RunOptions {
                study: Some("mailer".into()),
                jobs_backend: Some("memory".into()),
                ..opts()
            },
            RunOptions {
                workloads: vec!["fib:1".into()],
                models: vec!["jobs-redis:2".into()],
                ..opts()
            },
        ];
        for o in cases {
            match build(&o) {
                Err(Error::Usage(_)) => {}
                other => panic!("{o:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn only_the_stress_cell_is_planned_to_fail() {
        let p = build(&RunOptions {
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
            expected_failure: false,
        };
        let seq = cell(&req("sleep:10ms", "seq"), &o).unwrap();
        assert_eq!(seq.traits.nature, Nature::Delay);
        assert_eq!(seq.traits.delay_s, Some(0.01));
        assert!(seq.traits.waits && seq.traits.baseline && !seq.traits.http);
        let fork = cell(&req("read", "fork"), &o).unwrap();
        assert_eq!(fork.traits.nature, Nature::Io);
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
                let p = build(&RunOptions {
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
