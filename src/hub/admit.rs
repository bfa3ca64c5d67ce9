//! What an agent accepts of the work it takes from the hub. Whoever can write to the hub's
//! Redis can put work on an agent's list, so every share is outside input: it is checked
//! again here by the plan's own checks (the cell's workload, model and task count through
//! [`crate::plan::cell`], the `-H` and `--method` checks, the stack size and lock
//! settings), bounded (its timeout, how far ahead it starts, the size of its body and
//! certificates), and held to what the agent's operator allows
//! ([`crate::workload::outside`]: no commands without `--allow-commands`, no files of the
//! host's, no local targets unless listed in `--allow-targets`, no jobs backend but a fresh
//! queue of the agent's own). A refusal is one line that names the value; the study records
//! the share as refused and the run fails.

use std::time::Duration;

use super::seal::OpenKey;
use super::work::{PartWork, Work};
use super::PREFIX;
use crate::jobs::BackendUrl;
use crate::plan;
use crate::plan::presets::CellRequest;
use crate::workload::outside::{self, Allowed};
use crate::workload::{self, WorkloadOptions};

/// The longest a share may run: its timeout from the study (the plan allows no longer
/// `--timeout`).
pub const MAX_TIMEOUT: Duration = plan::MAX_TIMEOUT;

/// How far from the hub's clock a share's start may be: the study announces a start
/// [`super::executor::LEAD`] ahead, so anything beyond a minute is not a study's.
pub const MAX_START_DISTANCE: Duration = Duration::from_secs(60);

/// The largest work item an agent reads ([`super::work::MAX_WORK_BYTES`], beside the work
/// items it bounds).
pub use super::work::MAX_WORK_BYTES;

/// The largest request body a share may carry.
pub const MAX_BODY_BYTES: usize = 64 << 20;

/// The largest certificate bundle (PEM) a share may carry.
pub const MAX_CA_BYTES: usize = 1 << 20;

/// The most HTTP/2 connections a share may open.
pub const MAX_CONNECTIONS: usize = 100_000;

/// The most studies an agent serves at once (`--server-host`).
pub const MAX_SERVED: usize = 4;

/// Bounds a work item (or its envelope) before anything is parsed of it.
pub fn check_size(text: &str) -> Result<(), String> {
    if text.len() > MAX_WORK_BYTES {
        return Err(format!(
            "a work item of {} bytes (allowed: at most {MAX_WORK_BYTES})",
            text.len()
        ));
    }
    Ok(())
}

/// Reads one work item: bounded before it is parsed.
pub fn read_work(text: &str) -> Result<Work, String> {
    check_size(text)?;
    serde_json::from_str(text).map_err(|e| format!("a work item that does not parse: {e}"))
}

/// Opens the sealed share `part` of `run` (its envelope's scope, under the study's signature)
/// for agent `agent` at `epoch` with the agent's key: the share, read as any work item, which
/// must be that share of that run.
pub fn open_sealed(
    key: &OpenKey,
    agent: &str,
    epoch: &str,
    run: &str,
    part: usize,
    blob: &str,
) -> Result<Work, String> {
    let plain = key.open(&super::seal::share_ad(agent, epoch, run, part), blob)?;
    let text =
        String::from_utf8(plain).map_err(|_| "a sealed share that is not text".to_string())?;
    match read_work(&text)? {
        Work::Part(w) if w.run == run && w.part == part => Ok(Work::Part(w)),
        _ => Err(format!(
            "a sealed item that is not share {part} of run '{}'",
            run.escape_debug()
        )),
    }
}

/// Checks a key the agent is asked to answer on: one of the hub's own, short, printable.
pub fn check_reply_key(key: &str) -> Result<(), String> {
    let ok =
        key.starts_with(PREFIX) && key.len() <= 200 && key.chars().all(|c| c.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the reply key '{}' is not one of the hub's (allowed: {PREFIX}… , printable, at most 200 bytes)",
            key.escape_debug()
        ))
    }
}

/// Checks a study id as studies make them (hexadecimal digits).
pub fn check_study_id(id: &str) -> Result<(), String> {
    if !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric()) {
        Ok(())
    } else {
        Err(format!(
            "the study id '{}' is not one (allowed: 1 to 64 letters and digits)",
            id.escape_debug()
        ))
    }
}

/// Checks a share against the plan's rules and the operator's `allowed`, with the hub's
/// clock read `hub_now_ns`: `Ok` when the agent may run it.
pub fn check_part(w: &PartWork, allowed: &Allowed, hub_now_ns: u64) -> Result<(), String> {
    check_study_id(&w.run).map_err(|e| format!("run: {e}"))?;
    if !(w.timeout_s.is_finite() && w.timeout_s > 0.0 && w.timeout_s <= MAX_TIMEOUT.as_secs_f64()) {
        return Err(format!(
            "the timeout {} s (allowed: above 0 and at most {} s)",
            w.timeout_s,
            MAX_TIMEOUT.as_secs()
        ));
    }
    let distance = w.start_hub_ns.abs_diff(hub_now_ns);
    if distance > MAX_START_DISTANCE.as_nanos() as u64 {
        return Err(format!(
            "the start {:.1} s from the hub's clock (allowed: within {} s of it)",
            (w.start_hub_ns as f64 - hub_now_ns as f64) / 1e9,
            MAX_START_DISTANCE.as_secs()
        ));
    }
    let r = &w.request;
    let Some(part) = r.part else {
        return Err("the work names no share of the run".into());
    };
    let s = part.segment;
    if s.of == 0 || s.index >= s.of || s.of != w.of || s.index != w.part {
        return Err(format!(
            "share {} of {} (the request says {} of {})",
            w.part.saturating_add(1),
            w.of,
            s.index.saturating_add(1),
            s.of
        ));
    }
    if s.whole_tasks > plan::MAX_TASKS {
        return Err(format!(
            "a cell of {} tasks (allowed: at most {})",
            s.whole_tasks,
            plan::MAX_TASKS
        ));
    }
    if let Some(open) = &r.open {
        let sch = &open.schedule;
        let rate_ok = |x: f64| x.is_finite() && x > 0.0;
        if !rate_ok(sch.from) || !rate_ok(sch.to) || sch.tasks != r.tasks {
            return Err(format!(
                "an arrival schedule of {} to {} per second for {} tasks (allowed: finite rates above 0, as many tasks as the run)",
                sch.from, sch.to, sch.tasks
            ));
        }
        if open.interval_us == 0 || open.interval_us > MAX_TIMEOUT.as_micros() as u64 {
            return Err(format!("an interval of {} us", open.interval_us));
        }
        if open.grain_us > 1_000_000 {
            return Err(format!(
                "a grain of {} us (allowed: at most 1 s)",
                open.grain_us
            ));
        }
    }
    let recipe = &r.recipe;
    // The plan's own check of the run's settings.
    recipe.settings.check().map_err(|e| e.to_string())?;
    match &recipe.jobs_backend {
        None | Some(BackendUrl::Sqlite(None, _)) => {}
        Some(other) => {
            return Err(format!(
                "the jobs backend '{other}': backends are the agent's own; a study may ask only for a fresh queue (sqlite)"
            ))
        }
    }
    check_options(&recipe.options)?;
    outside::check(&recipe.workload, &recipe.options, allowed)?;
    // A library user's own binary serves the workloads it registered, each in the fresh
    // process of the lab that names it (not in the agent's): such a name is the binary's to
    // resolve, as a Sidekiq worker resolves its own job classes; the model and the task
    // count are still checked here.
    let (name, _) = recipe
        .workload
        .split_once(':')
        .unwrap_or((&recipe.workload, ""));
    if !workload::REGISTRY.iter().any(|e| e.name == name) {
        crate::model::parse(&r.model).map_err(|e| e.to_string())?;
        if r.tasks == 0 || r.tasks > plan::MAX_TASKS {
            return Err(format!(
                "tasks '{}' (allowed: 1 to {})",
                r.tasks,
                plan::MAX_TASKS
            ));
        }
        return Ok(());
    }
    // The plan's own checks of the cell: the workload and model parse, go together, and the
    // task count is within bounds.
    let cell = CellRequest {
        study: String::new(),
        workload: recipe.workload.clone(),
        model: r.model.clone(),
        tasks: r.tasks,
        gil: recipe.gil,
        http2: recipe.options.http2,
        http3: recipe.options.http3,
        expected_failure: false,
    };
    let (_, w) = plan::checked_cell(&cell, &recipe.options).map_err(|e| e.to_string())?;
    // And the bind step's: what the workload needs of this host (a file, a program) is here.
    workload::acquire(&*w.0).map_err(|e| e.to_string())
}

/// The request options' own checks, as the plan makes them of the flags.
fn check_options(o: &WorkloadOptions) -> Result<(), String> {
    for (name, value) in &o.headers {
        let line = format!("{name}: {value}");
        let (n, v) = workload::http::check_header(&line)?;
        if (n.as_str(), v.as_str()) != (name.as_str(), value.as_str()) {
            return Err(format!(
                "the header '{}' (allowed: what -H accepts, without surrounding spaces)",
                line.escape_debug()
            ));
        }
    }
    if let Some(m) = &o.method {
        workload::http::check_method(m)?;
    }
    if let Some(b) = &o.body {
        if b.len() > MAX_BODY_BYTES {
            return Err(format!(
                "a body of {} bytes (allowed: at most {MAX_BODY_BYTES})",
                b.len()
            ));
        }
    }
    if let Some(ca) = &o.ca_pem {
        if ca.len() > MAX_CA_BYTES {
            return Err(format!(
                "certificates of {} bytes (allowed: at most {MAX_CA_BYTES})",
                ca.len()
            ));
        }
    }
    if o.request_timeout_ms == 0 || o.request_timeout_ms > MAX_TIMEOUT.as_millis() as u64 {
        return Err(format!(
            "a request timeout of {} ms (allowed: 1 ms to {} s)",
            o.request_timeout_ms,
            MAX_TIMEOUT.as_secs()
        ));
    }
    if let Some(c) = o.connections {
        if c == 0 || c > MAX_CONNECTIONS {
            return Err(format!("{c} connections (allowed: 1 to {MAX_CONNECTIONS})"));
        }
    }
    if let Some(base) = &o.base_url {
        if base.len() > 2048 || base.chars().any(char::is_control) {
            return Err(format!(
                "the server URL '{}' (allowed: at most 2048 printable bytes)",
                base.escape_debug()
            ));
        }
    }
    Ok(())
}
