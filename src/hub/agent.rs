//! `concur agent --hub URL`: joins the hub and runs the shares of runs it is sent, each in a
//! fresh process exactly as a local run (the same `__run` child, watched by the same
//! supervisor), until it is told to leave (`concur agents --stop`) or Ctrl-C. Its heartbeat
//! (a key that expires after [`super::LOST_AFTER`]) carries what it is and does; its work
//! comes on a list of its own, moved to a list of what it is doing while it does it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Connection;

use super::clock;
use super::work::{PartDone, PartWork, Work};
use super::{
    agent_key, agents_key, cancel_key, check_name, doing_key, done_key, work_key, AgentInfo, Hub,
    HubUrl, BEAT, LOST_AFTER,
};
use crate::error::{Error, Result};
use crate::measure::mono_ns;
use crate::output::Terminal;
use crate::study::runner::supervise;

/// How long the results of a run stay on the hub for a study that has not read them.
const DONE_TTL_S: u64 = 3600;

/// `concur agent`'s flags.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// Its name on the hub; the host name by default.
    pub name: Option<String>,
    /// Whether it runs commands of others (`cmd:` workloads).
    pub allow_commands: bool,
}

/// What the heartbeat and the work loop share.
struct Shared {
    info: AgentInfo,
    /// The run being worked on, whose cancel key the heartbeat watches.
    run: Option<String>,
}

/// This host's name.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Joins the hub and works until told to leave, Ctrl-C or SIGTERM (how a service manager
/// stops it): 0 either way, once it has left the hub.
pub fn run(url: &HubUrl, o: &AgentOptions, terminal: &Terminal) -> Result<i32> {
    let hub = Hub::open(url)?;
    let name = o.name.clone().unwrap_or_else(hostname);
    check_name(&name)?;
    let exe = std::env::current_exe().map_err(|e| Error::io("finding our own binary", e))?;
    let mut c = hub.connect()?;
    let clock = clock::measure(&mut c).map_err(|e| hub.failed("reading its clock", e))?;
    let machine = crate::study::machine::machine();
    let addr = hub.local_addr();
    let info = AgentInfo {
        name: name.clone(),
        host: hostname(),
        addr: addr.map(|a| a.to_string()),
        cores: machine.cores,
        mem_total_kib: machine.mem_total_kib,
        version: crate::VERSION.into(),
        pid: std::process::id(),
        allow_commands: o.allow_commands,
        clock,
        beat_hub_ns: clock::hub_now_ns(&mut c).unwrap_or(0),
        doing: "idle".into(),
    };
    let text = serde_json::to_string(&info).map_err(|e| Error::Internal(e.to_string()))?;
    let joined: Option<String> = redis::cmd("SET")
        .arg(agent_key(&name))
        .arg(&text)
        .arg("NX")
        .arg("PX")
        .arg(LOST_AFTER.as_millis() as u64)
        .query(&mut c)
        .map_err(|e| hub.failed("joining", e))?;
    if joined.is_none() {
        return Err(Error::usage(format!(
            "--name '{name}': an agent of that name is already on the hub '{url}' (allowed: a name no live agent has; give this one another --name)"
        )));
    }
    let _: () = redis::pipe()
        .cmd("SADD")
        .arg(agents_key())
        .arg(&name)
        .ignore()
        .cmd("DEL")
        .arg(doing_key(&name))
        .ignore()
        // Work left for a dead agent of the same name is stale: its study has declared it lost.
        .cmd("DEL")
        .arg(work_key(&name))
        .ignore()
        .query(&mut c)
        .map_err(|e| hub.failed("joining", e))?;
    crate::interrupt::install_interrupt_handler();
    terminal.line(format_args!(
        "concur {}: agent '{name}' joined the hub {url} from {}: {} cores, clock {} against the hub's{}",
        crate::VERSION,
        addr.map_or("an unknown address".into(), |a| a.to_string()),
        machine.cores,
        clock::describe(&clock),
        if o.allow_commands {
            "; runs commands of others (--allow-commands)"
        } else {
            ""
        }
    ));
    let shared = Arc::new(Mutex::new(Shared { info, run: None }));
    let cancel = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let beat = {
        let (shared, cancel, stop) = (shared.clone(), cancel.clone(), stop.clone());
        let mut bc = hub.connect()?;
        let name = name.clone();
        std::thread::spawn(move || heartbeat(&mut bc, &name, &shared, &cancel, &stop))
    };
    let told = work_loop(&hub, &mut c, &name, o, &exe, &shared, &cancel, terminal);
    stop.store(true, Ordering::SeqCst);
    let _ = beat.join();
    let _: redis::RedisResult<()> = redis::pipe()
        .cmd("DEL")
        .arg(agent_key(&name))
        .ignore()
        .cmd("SREM")
        .arg(agents_key())
        .arg(&name)
        .ignore()
        .query(&mut c);
    let told = told?;
    terminal.line(format_args!(
        "agent '{name}' left the hub{}",
        if told {
            " (told to)"
        } else {
            " (stopped by a signal)"
        }
    ));
    Ok(0)
}

/// Renews the heartbeat every [`BEAT`] until `stop`, and raises `cancel` when the run being
/// worked on is cancelled.
fn heartbeat(
    c: &mut Connection,
    name: &str,
    shared: &Mutex<Shared>,
    cancel: &AtomicBool,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::SeqCst) {
        let (text, run) = {
            let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
            if let Ok(now) = clock::hub_now_ns(c) {
                s.info.beat_hub_ns = now;
            }
            (serde_json::to_string(&s.info).ok(), s.run.clone())
        };
        if let Some(text) = text {
            let _: redis::RedisResult<()> = redis::cmd("SET")
                .arg(agent_key(name))
                .arg(text)
                .arg("PX")
                .arg(LOST_AFTER.as_millis() as u64)
                .query(c);
        }
        if let Some(run) = run {
            let cancelled: redis::RedisResult<bool> =
                redis::cmd("EXISTS").arg(cancel_key(&run)).query(c);
            if cancelled.unwrap_or(false) {
                cancel.store(true, Ordering::SeqCst);
            }
        }
        std::thread::sleep(BEAT);
    }
}

/// Takes work until told to leave (`Ok(true)`) or interrupted (`Ok(false)`).
#[allow(clippy::too_many_arguments)]
fn work_loop(
    hub: &Hub,
    c: &mut Connection,
    name: &str,
    o: &AgentOptions,
    exe: &std::path::Path,
    shared: &Mutex<Shared>,
    cancel: &AtomicBool,
    terminal: &Terminal,
) -> Result<bool> {
    let mut served = super::server::Served::default();
    while !crate::interrupt::interrupted() {
        let taken: redis::RedisResult<Option<String>> = redis::cmd("BLMOVE")
            .arg(work_key(name))
            .arg(doing_key(name))
            .arg("LEFT")
            .arg("RIGHT")
            .arg(1.0)
            .query(c);
        let item = match taken {
            Ok(item) => item,
            // Ctrl-C or SIGTERM cut the wait short: leave as asked.
            Err(_) if crate::interrupt::interrupted() => break,
            Err(e) => return Err(hub.failed("taking work", e)),
        };
        let Some(text) = item else {
            served.expire(c);
            continue;
        };
        let work = serde_json::from_str::<Work>(&text);
        let done = match work {
            Ok(Work::Stop) => {
                forget(c, name, &text);
                return Ok(true);
            }
            Ok(Work::Serve { study, tls, reply }) => {
                let ready = served.start(hub, &study, tls);
                if let Ok(url) = &ready.base_url {
                    terminal.line(format_args!("study {study}: serving at {url}"));
                    shared.lock().unwrap_or_else(|p| p.into_inner()).info.doing =
                        format!("serving study {study} at {url}");
                }
                super::server::answer(c, &reply, &ready);
                None
            }
            Ok(Work::Unserve { study }) => {
                served.stop(&study);
                shared.lock().unwrap_or_else(|p| p.into_inner()).info.doing = "idle".into();
                None
            }
            Ok(Work::Usage { reply }) => {
                super::server::answer(c, &reply, &super::server::process_cpu_s());
                None
            }
            Err(e) => {
                terminal.warning(format_args!(
                    "agent '{name}': work it cannot read is dropped ({e})"
                ));
                None
            }
            Ok(Work::Part(w)) => {
                {
                    let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
                    s.run = Some(w.run.clone());
                    s.info.doing = format!("run {} share {} of {}", w.run, w.part + 1, w.of);
                }
                cancel.store(false, Ordering::SeqCst);
                terminal.line(format_args!(
                    "run {}: share {} of {}, {} ×{}",
                    w.run,
                    w.part + 1,
                    w.of,
                    w.request.model,
                    w.request.tasks
                ));
                let done = run_part(c, name, o, exe, &w, cancel);
                let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
                s.run = None;
                s.info.doing = "idle".into();
                s.info.clock = done.clock;
                Some(done)
            }
        };
        if let Some(done) = done {
            let text = serde_json::to_string(&done).map_err(|e| Error::Internal(e.to_string()))?;
            let _: () = redis::pipe()
                .cmd("RPUSH")
                .arg(done_key(&done.run))
                .arg(text)
                .ignore()
                .cmd("EXPIRE")
                .arg(done_key(&done.run))
                .arg(DONE_TTL_S)
                .ignore()
                .query(c)
                .map_err(|e| hub.failed("answering", e))?;
        }
        forget(c, name, &text);
    }
    Ok(false)
}

/// Takes `text` off the agent's list of what it is doing: done with it.
fn forget(c: &mut Connection, name: &str, text: &str) {
    let _: redis::RedisResult<i64> = redis::cmd("LREM")
        .arg(doing_key(name))
        .arg(1)
        .arg(text)
        .query(c);
}

/// Runs one share in a fresh child, started at the common instant on this host's clock.
fn run_part(
    c: &mut Connection,
    name: &str,
    o: &AgentOptions,
    exe: &std::path::Path,
    w: &PartWork,
    cancel: &AtomicBool,
) -> PartDone {
    let clock = clock::measure(c).unwrap_or_default();
    let refused = |why: String| PartDone {
        run: w.run.clone(),
        part: w.part,
        agent: name.to_string(),
        refused: Some(why),
        ended: None,
        clock,
    };
    if w.version != crate::VERSION {
        return refused(format!(
            "agent '{name}' runs concur {}, the study runs concur {}: every host of a study runs the same version",
            crate::VERSION,
            w.version
        ));
    }
    if let Some(cmd) = w.command().filter(|_| !o.allow_commands) {
        return refused(format!(
            "agent '{name}' runs no commands of others ('{cmd}'): start it with concur agent --allow-commands"
        ));
    }
    let Some(mut part) = w.request.part else {
        return refused("the work names no share of the run".into());
    };
    part.start_mono_ns = clock.to_local_mono(w.start_hub_ns);
    let mut request = w.request.clone();
    request.part = Some(part);
    let started = Instant::now();
    let until_start = Duration::from_nanos(part.start_mono_ns.saturating_sub(mono_ns()));
    let deadline = started + until_start + Duration::from_secs_f64(w.timeout_s.max(0.0));
    let ended = match supervise::spawn(exe, request) {
        Ok(child) => supervise::supervise(
            child,
            started,
            deadline,
            &|| crate::interrupt::interrupted() || cancel.load(Ordering::SeqCst),
            &|_| {},
        ),
        Err(e) => return refused(format!("agent '{name}' could not start the run: {e}")),
    };
    PartDone {
        run: w.run.clone(),
        part: w.part,
        agent: name.to_string(),
        refused: None,
        ended: Some(ended.into()),
        clock,
    }
}

/// Tells agent `name` (or every agent, for `None`) to leave after the work it holds.
pub fn stop(hub: &Hub, c: &mut Connection, name: Option<&str>) -> Result<Vec<String>> {
    let agents = hub.agents(c)?;
    let chosen: Vec<&AgentInfo> = agents
        .iter()
        .filter(|a| name.is_none_or(|n| a.name == n))
        .collect();
    if let (Some(n), true) = (name, chosen.is_empty()) {
        return Err(Error::usage(format!(
            "--stop '{n}': no agent of that name is alive on the hub '{}' (allowed: {})",
            hub.url(),
            if agents.is_empty() {
                "none is".to_string()
            } else {
                agents
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        )));
    }
    let text = serde_json::to_string(&Work::Stop).map_err(|e| Error::Internal(e.to_string()))?;
    for a in &chosen {
        let _: i64 = redis::cmd("RPUSH")
            .arg(work_key(&a.name))
            .arg(&text)
            .query(c)
            .map_err(|e| hub.failed("telling an agent to stop", e))?;
    }
    Ok(chosen.iter().map(|a| a.name.clone()).collect())
}
