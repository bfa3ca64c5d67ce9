//! The study's side of a run over several hosts: an [`Executor`] that gives each of K agents
//! its share of the run (a closed cell's tasks dealt round-robin, an open cell's every K-th
//! arrival), announces one start instant on the hub's clock, and gathers the shares' run
//! lines into one (`merge`). It never waits forever: an agent whose heartbeat expires
//! is lost within [`super::LOST_AFTER`], a share not answered within the run's timeout is
//! lost, and the run is then recorded as failed with what was not performed.
//!
//! What comes back on the run's list is outside input: anyone who can write to the hub can
//! push there. An answer is read only up to `merge::ANSWER_MAX_BYTES` (a script pops it on
//! the hub and sends only its length when it is longer), must name this run, one of its
//! shares not yet answered and the agent that share went to, and its figures must be those an
//! honest run of the share could report (`merge::check_ended`); anything else is refused,
//! the run fails, and no item on the list, however many, keeps the wait from its deadline,
//! its heartbeat checks and Ctrl-C. Shares go to idle agents only, and an agent's work list
//! expires when the run's wait would.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::{Connection, Script};

use super::clock;
use super::merge::{self, PartOutcome, ShareBounds};
use super::work::{PartDone, PartWork, Work};
use super::{agent_key, cancel_key, done_key, work_key, AgentInfo, Hub};
use crate::analysis::results::{Machine, MetaHost, PartStatus, RunResult, RunStatus};
use crate::jobs::BackendUrl;
use crate::measure::schedule::Segment;
use crate::model::selfcall::PartRequest;
use crate::plan::{CellKind, CellPlan, Hook, Plan};
use crate::runner;
use crate::runner::{convert, Executor, Iteration, RunCounters, StudyServer};

/// How far ahead of now the common start is announced: room for every agent to take its
/// work, measure its clock and start its run's process.
pub const LEAD: Duration = Duration::from_millis(200);

/// How long the study waits before looking again when the run's list is empty (the answer
/// is popped by a script, which cannot block).
const EMPTY_WAIT: Duration = Duration::from_millis(20);

/// How long after an interrupt the study waits for the agents to stop their shares.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// How long past the run's timeout the study waits for its answers.
const ANSWER_MARGIN: Duration = Duration::from_secs(10);

/// Pops the first answer of a run's list if it is at most `ARGV[1]` bytes; a longer one is
/// popped too, and only its length comes back. Nothing when the list is empty.
const POP_BOUNDED: &str = r"
local v = redis.call('LPOP', KEYS[1])
if not v then return false end
if string.len(v) > tonumber(ARGV[1]) then return string.len(v) end
return v
";

/// Whether an agent's heartbeat says it is idle (not running a share or serving a study).
pub fn is_idle(agent: &AgentInfo) -> bool {
    agent.doing == "idle"
}

/// The agents of `all` that are busy, as `NAME (DOING)`, for a refusal.
pub fn busy_names<'a>(all: impl IntoIterator<Item = &'a AgentInfo>) -> String {
    all.into_iter()
        .filter(|a| !is_idle(a))
        .map(|a| {
            let doing: String = a
                .doing
                .chars()
                .filter(|c| !c.is_control())
                .take(80)
                .collect();
            format!("{} ({doing})", a.name)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs each run's shares on agents of the hub.
pub struct HubExecutor<'a> {
    hub: Hub,
    conn: Mutex<Connection>,
    agents: Vec<AgentInfo>,
    server: Option<StudyServer<'a>>,
    server_cpu: Option<(String, super::server::ServerCpu<'a>)>,
    /// By agent, the last run of this study it answered (its heartbeat may still name it).
    answered: Mutex<BTreeMap<String, String>>,
    pop: Script,
}

/// What waiting for a run's answers met besides them: how many items of its list were
/// refused, and the first one's reason; whether Ctrl-C came.
#[derive(Debug, Default)]
struct Waited {
    junk: usize,
    first_junk: Option<String>,
    interrupted: bool,
}

impl Waited {
    /// Counts one refused item; the first is also said on stderr (once per run: a flood of
    /// them is one line).
    fn refuse(&mut self, run: &str, why: String) {
        self.junk += 1;
        if self.first_junk.is_none() {
            crate::os::terminal::warn_always(format_args!(
                "run {run}: an item on its answer list was refused: {why} (further ones are counted in the run's error)"
            ));
            self.first_junk = Some(why);
        }
    }
}

/// One share sent and not yet answered.
#[derive(Clone, Copy)]
struct Sent<'a> {
    agent: &'a AgentInfo,
    bounds: ShareBounds,
}

impl<'a> HubExecutor<'a> {
    /// An executor over `agents` (the hosts that generate load, in the order shares are
    /// dealt), with the study's own server if it has one.
    pub fn new(
        hub: Hub,
        agents: Vec<AgentInfo>,
        server: Option<StudyServer<'a>>,
        server_cpu: Option<(String, super::server::ServerCpu<'a>)>,
    ) -> crate::base::error::Result<Self> {
        let conn = Mutex::new(hub.connect()?);
        crate::os::interrupt::install_interrupt_handler();
        Ok(HubExecutor {
            hub,
            conn,
            agents,
            server,
            server_cpu,
            answered: Mutex::new(BTreeMap::new()),
            pop: Script::new(POP_BOUNDED),
        })
    }

    /// Whether `agent` (as its heartbeat says now) may be given a share: idle, or still
    /// naming the last run of this study it answered.
    fn free(&self, agent: &AgentInfo) -> bool {
        is_idle(agent)
            || self
                .answered
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&agent.name)
                .is_some_and(|run| agent.doing.contains(run.as_str()))
    }

    /// A run line of `cell` that no host ran, with why.
    fn not_run(&self, cell: &CellPlan, rep: usize, why: String) -> RunResult {
        convert::template(cell, rep, RunStatus::Spawn, 0.0, Some(why))
    }

    /// Sends the shares of one run and gathers them.
    fn run_over_hosts(
        &self,
        c: &mut Connection,
        plan: &Plan,
        cell: &CellPlan,
        iteration: Iteration,
    ) -> RunResult {
        let rep = iteration.rep();
        let k = cell.key.hosts.unwrap_or(1).max(1);
        let alive: Vec<AgentInfo> = match self.hub.agents(c) {
            Ok(a) => a,
            Err(e) => return self.not_run(cell, rep, e.to_string()),
        };
        let now = |a: &AgentInfo| alive.iter().find(|b| b.name == a.name);
        let chosen: Vec<&AgentInfo> = self
            .agents
            .iter()
            .filter(|a| now(a).is_some_and(|b| self.free(b)))
            .take(k)
            .collect();
        if chosen.len() < k {
            let busy: Vec<&AgentInfo> = self
                .agents
                .iter()
                .filter_map(now)
                .filter(|b| !self.free(b))
                .collect();
            return self.not_run(
                cell,
                rep,
                format!(
                    "--hosts {k}: only {} of the study's agents are alive and idle on the hub ({}){}",
                    chosen.len(),
                    chosen
                        .iter()
                        .map(|a| a.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    if busy.is_empty() {
                        String::new()
                    } else {
                        format!("; busy: {}", busy_names(busy))
                    }
                ),
            );
        }
        let whole = runner::request(plan, cell, iteration);
        let asked = Instant::now();
        let start_hub_ns = match clock::hub_now_ns(c) {
            Ok(now) => now + LEAD.as_nanos() as u64,
            Err(e) => {
                return self.not_run(
                    cell,
                    rep,
                    self.hub.failed("reading its clock", e).to_string(),
                )
            }
        };
        // The common start is LEAD after the hub's clock was read.
        let lead_s = asked.elapsed().as_secs_f64() + LEAD.as_secs_f64();
        let run = format!("{:x}{:x}", start_hub_ns, std::process::id());
        let n = cell.key.tasks;
        let wait = LEAD + plan.timeout + ANSWER_MARGIN;
        // The study's heartbeat for this run, renewed while it waits: once it expires (the
        // study killed, its host gone), the agents stop the run's shares.
        if let Err(e) = beat_for(c, &run) {
            return self.not_run(cell, rep, self.hub.failed("sending work", e).to_string());
        }
        let mut pending: BTreeMap<usize, Sent> = BTreeMap::new();
        for (share, agent) in chosen.iter().enumerate() {
            let tasks = Segment::share(share, k, n);
            let mut request = whole.clone();
            request.tasks = tasks;
            // The study's queue (its URL, its password) stays here: an agent's jobs models
            // use the agent's own --jobs-backend, or a fresh SQLite file with the sync asked.
            request.recipe.jobs_backend =
                request.recipe.jobs_backend.take().and_then(|b| match b {
                    BackendUrl::Sqlite(_, sync) => Some(BackendUrl::Sqlite(None, sync)),
                    _ => None,
                });
            if let Some(o) = &mut request.open {
                o.schedule = o.schedule.segment(share, k);
            }
            request.part = Some(PartRequest {
                segment: Segment {
                    index: share,
                    of: k,
                    whole_tasks: n,
                },
                start_mono_ns: 0,
            });
            let work = Work::Part(Box::new(PartWork {
                run: run.clone(),
                part: share,
                of: k,
                version: crate::base::version::VERSION.into(),
                request,
                start_hub_ns,
                timeout_s: plan.timeout.as_secs_f64(),
            }));
            // The share's arrivals for an open cell, its tasks for a closed one.
            let tasks = match &work {
                Work::Part(w) => w.request.open.as_ref().map_or(tasks, |o| o.schedule.tasks),
                _ => tasks,
            };
            // The work list expires when the study stops waiting for this run: work that no
            // agent took by then is stale, and must not start a share later.
            let sent: redis::RedisResult<()> = serde_json::to_string(&work)
                .map_err(|e| redis::RedisError::from(std::io::Error::other(e)))
                .and_then(|text| self.hub.seal(c, &agent.name, &run, text))
                .and_then(|text| {
                    redis::pipe()
                        .atomic()
                        .cmd("RPUSH")
                        .arg(work_key(&agent.name))
                        .arg(text)
                        .ignore()
                        .cmd("EXPIRE")
                        .arg(work_key(&agent.name))
                        .arg(wait.as_secs() + 1)
                        .ignore()
                        .query(c)
                });
            if let Err(e) = sent {
                return self.not_run(cell, rep, self.hub.failed("sending work", e).to_string());
            }
            pending.insert(
                share,
                Sent {
                    agent,
                    bounds: ShareBounds {
                        tasks,
                        cores: agent.cores,
                        wall_max_s: wait.as_secs_f64(),
                    },
                },
            );
        }
        let (parts, waited) = self.gather(c, plan, cell, rep, &run, wait, pending);
        {
            let mut answered = self.answered.lock().unwrap_or_else(|p| p.into_inner());
            for p in parts.iter().filter(|p| p.lost.is_none()) {
                answered.insert(p.host.clone(), run.clone());
            }
        }
        let mut base = convert::template(cell, rep, RunStatus::Ok, 0.0, None);
        base.isolation = crate::analysis::results::Isolation::FreshProcess;
        let mut merged = merge::merge(base, parts, lead_s);
        if waited.interrupted {
            // As a local run that Ctrl-C stopped: the study ends there, exit 130.
            merged.status = RunStatus::Interrupted;
        } else if merged.status == RunStatus::Interrupted {
            // A share its agent's own Ctrl-C or SIGTERM stopped: the study was not
            // interrupted, its run failed (it used to end the study as if it had been, 130).
            merged.status = RunStatus::Failed;
        }
        if let Some(first) = waited.first_junk {
            // A run whose list held input it had to refuse fails, whatever its shares said.
            if merged.status == RunStatus::Ok && !waited.interrupted {
                merged.status = RunStatus::Failed;
            }
            let why = format!(
                "{} item{} on the run's answer list refused (first: {first})",
                waited.junk,
                if waited.junk == 1 { "" } else { "s" }
            );
            merged.error = Some(match merged.error.take() {
                Some(e) => format!("{e}; {why}"),
                None => why,
            });
        }
        merged
    }

    /// Pops the run's next answer, bounded: `Ok(None)` when the list is empty, `Err(len)`
    /// for one longer than [`merge::ANSWER_MAX_BYTES`] (popped on the hub, never read here).
    fn pop_answer(
        &self,
        c: &mut Connection,
        run: &str,
    ) -> redis::RedisResult<Option<Result<Vec<u8>, i64>>> {
        let v: redis::Value = self
            .pop
            .key(done_key(run))
            .arg(merge::ANSWER_MAX_BYTES)
            .invoke(c)?;
        Ok(match v {
            redis::Value::BulkString(b) => Some(Ok(b)),
            redis::Value::Int(n) => Some(Err(n)),
            _ => None,
        })
    }

    /// Waits for every share's answer, declaring lost the agents that stop beating and the
    /// shares not answered in time. Every turn of the loop, whatever the list held, looks at
    /// Ctrl-C, the heartbeats and the deadline. Returns the shares' outcomes and what the
    /// list held that had to be refused.
    #[allow(clippy::too_many_arguments)]
    fn gather(
        &self,
        c: &mut Connection,
        plan: &Plan,
        cell: &CellPlan,
        rep: usize,
        run: &str,
        wait: Duration,
        mut pending: BTreeMap<usize, Sent>,
    ) -> (Vec<PartOutcome>, Waited) {
        let k = pending.len();
        let deadline = Instant::now() + wait;
        let mut outcomes: BTreeMap<usize, PartOutcome> = BTreeMap::new();
        let mut waited = Waited::default();
        let mut cancelled: Option<Instant> = None;
        let mut read_failed: Option<String> = None;
        let host_cell = per_host(cell, k);
        let sent: BTreeSet<usize> = pending.keys().copied().collect();
        let lost = |share: usize, s: Sent, status, why: String| PartOutcome {
            host: s.agent.name.clone(),
            share,
            tasks: s.bounds.tasks,
            run: None,
            lost: Some((status, why)),
            latency: None,
            queue_wait: None,
            clock: s.agent.clock(),
            first_task_ns: None,
        };
        let mut seen = super::sign::Seen::default();
        let mut beaten = Instant::now();
        while !pending.is_empty() {
            if beaten.elapsed() >= super::BEAT {
                let _ = beat_for(c, run);
                beaten = Instant::now();
            }
            let popped = self.pop_answer(c, run);
            let mut took = false;
            match popped {
                Ok(Some(Err(len))) => {
                    took = true;
                    waited.refuse(
                        run,
                        format!(
                            "an answer of {len} bytes (allowed: at most {} MiB)",
                            merge::ANSWER_MAX_BYTES >> 20
                        ),
                    );
                }
                Ok(Some(Ok(bytes))) => {
                    took = true;
                    // Signed with the hub key, for the study, in this run's scope (a bare
                    // answer without a key).
                    let opened = std::str::from_utf8(&bytes)
                        .map_err(|_| "an item that is not text".to_string())
                        .and_then(|t| self.hub.unseal(c, "study", Some(run), t, &mut seen));
                    let read = opened.and_then(|body| {
                        serde_json::from_str::<PartDone>(&body).map_err(|e| {
                            format!(
                                "an item that is not an answer ({})",
                                clipped(&e.to_string(), 200)
                            )
                        })
                    });
                    match read {
                        Err(why) => waited.refuse(run, clipped(&why, 300)),
                        Ok(done) if done.run != run => waited.refuse(
                            run,
                            format!(
                                "an answer for run '{}' (allowed: this run's, '{run}')",
                                clipped(&done.run, 64)
                            ),
                        ),
                        Ok(done) => match pending.remove(&done.part) {
                            Some(s) => {
                                let o = outcome(done, s, &host_cell, plan, rep);
                                outcomes.insert(o.share, o);
                            }
                            None if sent.contains(&done.part) => waited.refuse(
                                run,
                                format!(
                                    "a second answer for share {} (from '{}')",
                                    done.part + 1,
                                    clipped(&done.agent, 64)
                                ),
                            ),
                            None => waited.refuse(
                                run,
                                format!(
                                    "an answer for share {} of a run of {k} (from '{}')",
                                    done.part.saturating_add(1),
                                    clipped(&done.agent, 64)
                                ),
                            ),
                        },
                    }
                }
                Ok(None) => {}
                // The hub did not answer this time: the checks below, then again; said if
                // the run is given up.
                Err(e) => read_failed = Some(self.hub.failed("reading answers", e).to_string()),
            }
            // Who is still alive?
            let shares: Vec<usize> = pending.keys().copied().collect();
            for share in shares {
                let s = pending[&share];
                let beating: bool = redis::cmd("EXISTS")
                    .arg(agent_key(&s.agent.name))
                    .query(c)
                    .unwrap_or(true);
                if !beating {
                    pending.remove(&share);
                    outcomes.insert(
                        share,
                        lost(
                            share,
                            s,
                            PartStatus::Lost,
                            format!(
                                "was lost: no heartbeat for {} s (killed, or its network gone)",
                                super::LOST_AFTER.as_secs_f64()
                            ),
                        ),
                    );
                }
            }
            if crate::os::interrupt::interrupted() && cancelled.is_none() {
                let _: redis::RedisResult<()> = redis::cmd("SET")
                    .arg(cancel_key(run))
                    .arg(1)
                    .arg("EX")
                    .arg(3600)
                    .query(c);
                cancelled = Some(Instant::now());
                waited.interrupted = true;
            }
            let gave_up = cancelled.is_some_and(|t| t.elapsed() > CANCEL_GRACE);
            if gave_up || Instant::now() > deadline {
                let mut why = if gave_up {
                    "did not stop within 5 s of the interrupt".to_string()
                } else {
                    format!(
                        "did not answer within the run's timeout ({})",
                        crate::base::units::fmt_secs(plan.timeout.as_secs_f64())
                    )
                };
                if let Some(e) = &read_failed {
                    why.push_str(&format!(" (last error: {e})"));
                }
                for (share, s) in std::mem::take(&mut pending) {
                    outcomes.insert(share, lost(share, s, PartStatus::Lost, why.clone()));
                }
            }
            if !took && !pending.is_empty() {
                std::thread::sleep(EMPTY_WAIT);
            }
        }
        (outcomes.into_values().collect(), waited)
    }
}

/// Renews the study's heartbeat for `run` ([`super::alive_key`]).
fn beat_for(c: &mut Connection, run: &str) -> redis::RedisResult<()> {
    redis::cmd("SET")
        .arg(super::alive_key(run))
        .arg(1)
        .arg("PX")
        .arg(super::LOST_AFTER.as_millis() as u64)
        .query(c)
}

/// Text from an answer (a name, an id, what the parser said of it) as a refusal shows it:
/// its first `max` characters, control characters left out.
fn clipped(text: &str, max: usize) -> String {
    text.chars().filter(|c| !c.is_control()).take(max).collect()
}

/// The cell one host runs: its share of the tasks, its own W.
fn per_host(cell: &CellPlan, k: usize) -> CellPlan {
    let mut c = cell.clone();
    c.key.hosts = None;
    c.workers = cell.workers.map(|w| (w / k).max(1));
    c.parallelism = (cell.parallelism / k).max(1);
    c
}

/// What an agent's answer says of its share: refused when it comes from another agent than
/// the one the share went to, or says what no honest run of the share could.
fn outcome(
    done: PartDone,
    sent: Sent,
    host_cell: &CellPlan,
    plan: &Plan,
    rep: usize,
) -> PartOutcome {
    let mut o = PartOutcome {
        host: sent.agent.name.clone(),
        share: done.part,
        tasks: sent.bounds.tasks,
        run: None,
        lost: None,
        latency: None,
        queue_wait: None,
        clock: done.clock,
        first_task_ns: None,
    };
    if done.agent != sent.agent.name {
        o.clock = sent.agent.clock();
        o.lost = Some((
            PartStatus::Refused,
            format!(
                "its answer was refused: it came from '{}', not from '{}' to which the share went",
                clipped(&done.agent, 64),
                sent.agent.name
            ),
        ));
        return o;
    }
    if let Some(mut why) = done.refused {
        if let Some((at, _)) = why.char_indices().nth(merge::TEXT_MAX_CHARS) {
            why.truncate(at);
        }
        o.lost = Some((PartStatus::Refused, format!("refused its share: {why}")));
        return o;
    }
    let Some(mut ended) = done.ended else {
        o.lost = Some((PartStatus::Lost, "answered without a run".into()));
        return o;
    };
    if let Err(why) = merge::check_ended(&mut ended, sent.bounds) {
        o.lost = Some((
            PartStatus::Refused,
            format!("its answer was refused: {why}"),
        ));
        return o;
    }
    let ended: crate::runner::supervise::Ended = ended.into();
    o.first_task_ns = ended.report.as_ref().and_then(|r| r.first_task_ns);
    o.latency = ended.report.as_ref().and_then(|r| r.latency_hdr.clone());
    o.queue_wait = ended.report.as_ref().and_then(|r| r.queue_wait_hdr.clone());
    let mut cell = host_cell.clone();
    cell.key.tasks = sent.bounds.tasks;
    o.run = Some(convert::judge(&cell, rep, Ok(ended), plan.timeout));
    o
}

impl Executor for HubExecutor<'_> {
    fn machine(&self) -> Machine {
        crate::runner::machine::machine()
    }

    fn hosts(&self) -> Vec<MetaHost> {
        self.agents.iter().map(|a| a.meta.clone()).collect()
    }

    fn run(&self, plan: &Plan, cell: &CellPlan, iteration: Iteration) -> RunResult {
        self.server.reset_counters();
        let mut run = match &cell.kind {
            CellKind::Concur { .. } => {
                let mut c = self.conn.lock().unwrap_or_else(|p| p.into_inner());
                let cpu = |s: &Option<(String, super::server::ServerCpu)>| {
                    s.as_ref().and_then(|(_, f)| f())
                };
                let before = cpu(&self.server_cpu);
                let mut run = self.run_over_hosts(&mut c, plan, cell, iteration);
                let after = cpu(&self.server_cpu);
                if let Some(h) = &mut run.hub {
                    h.server_host = self.server_cpu.as_ref().map(|(name, _)| name.clone());
                    h.server_cpu_s = before.zip(after).map(|(b, a)| (a - b).max(0.0));
                }
                run
            }
            CellKind::External { .. } => self.not_run(
                cell,
                iteration.rep(),
                "an external program runs on this machine only, not over the hub's hosts".into(),
            ),
        };
        run.server_peak_in_flight = self.server.peak_in_flight();
        run
    }

    fn interrupted(&self) -> bool {
        crate::os::interrupt::interrupted()
    }

    fn hook(&self, plan: &Plan, cell: &CellPlan, hook: Hook) -> std::result::Result<(), String> {
        runner::run_hook(plan, cell, hook)
    }
}
