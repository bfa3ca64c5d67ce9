//! The study's side of a run over several hosts: an [`Executor`] that gives each of K agents
//! its share of the run (a closed cell's tasks dealt round-robin, an open cell's every K-th
//! arrival), announces one start instant on the hub's clock, and gathers the shares' run
//! lines into one ([`super::merge`]). It never waits forever: an agent whose heartbeat expires
//! is lost within [`super::LOST_AFTER`], a share not answered within the run's timeout is
//! lost, and the run is then recorded as failed with what was not performed.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::Connection;

use super::clock;
use super::merge::{self, PartOutcome};
use super::work::{PartDone, PartWork, Work};
use super::{agent_key, cancel_key, done_key, work_key, AgentInfo, Hub};
use crate::analysis::results::{Machine, MetaHost, PartStatus, RunResult, RunStatus};
use crate::measure::schedule::Segment;
use crate::selfcall::PartRequest;
use crate::study::plan::{CellKind, CellPlan, Hook, Plan};
use crate::study::runner::{self, convert, Executor, Iteration, RunCounters, StudyServer};

/// How far ahead of now the common start is announced: room for every agent to take its
/// work, measure its clock and start its run's process.
pub const LEAD: Duration = Duration::from_millis(200);

/// How often the study looks at the agents' heartbeats while it waits.
const POLL_S: f64 = 0.2;

/// How long after an interrupt the study waits for the agents to stop their shares.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// Runs each run's shares on agents of the hub.
pub struct HubExecutor<'a> {
    hub: Hub,
    conn: Mutex<Connection>,
    agents: Vec<AgentInfo>,
    server: Option<StudyServer<'a>>,
    server_cpu: Option<(String, super::server::ServerCpu<'a>)>,
}

impl<'a> HubExecutor<'a> {
    /// An executor over `agents` (the hosts that generate load, in the order shares are
    /// dealt), with the study's own server if it has one.
    pub fn new(
        hub: Hub,
        agents: Vec<AgentInfo>,
        server: Option<StudyServer<'a>>,
        server_cpu: Option<(String, super::server::ServerCpu<'a>)>,
    ) -> crate::error::Result<Self> {
        let conn = Mutex::new(hub.connect()?);
        crate::interrupt::install_interrupt_handler();
        Ok(HubExecutor {
            hub,
            conn,
            agents,
            server,
            server_cpu,
        })
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
        let alive: Vec<String> = match self.hub.agents(c) {
            Ok(a) => a.into_iter().map(|a| a.name).collect(),
            Err(e) => return self.not_run(cell, rep, e.to_string()),
        };
        let chosen: Vec<&AgentInfo> = self
            .agents
            .iter()
            .filter(|a| alive.contains(&a.name))
            .take(k)
            .collect();
        if chosen.len() < k {
            return self.not_run(
                cell,
                rep,
                format!(
                    "--hosts {k}: only {} of the study's agents are alive on the hub ({})",
                    chosen.len(),
                    chosen
                        .iter()
                        .map(|a| a.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
        let server = self
            .server
            .as_ref()
            .map(|s| (s.base_url.as_str(), s.cert_pem.as_deref()));
        let whole = runner::request(plan, cell, iteration, server);
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
        let mut pending: BTreeMap<usize, (&AgentInfo, usize)> = BTreeMap::new();
        for (share, agent) in chosen.iter().enumerate() {
            let tasks = Segment::share(share, k, n);
            let mut request = whole.clone();
            request.tasks = tasks;
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
                version: crate::VERSION.into(),
                request,
                start_hub_ns,
                timeout_s: plan.timeout.as_secs_f64(),
            }));
            let sent: redis::RedisResult<i64> = serde_json::to_string(&work)
                .map_err(|e| redis::RedisError::from(std::io::Error::other(e)))
                .and_then(|text| {
                    redis::cmd("RPUSH")
                        .arg(work_key(&agent.name))
                        .arg(text)
                        .query(c)
                });
            if let Err(e) = sent {
                return self.not_run(cell, rep, self.hub.failed("sending work", e).to_string());
            }
            pending.insert(share, (agent, tasks));
        }
        let parts = self.gather(c, plan, cell, rep, &run, pending);
        let mut base = convert::template(cell, rep, RunStatus::Ok, 0.0, None);
        base.isolation = crate::analysis::results::Isolation::FreshProcess;
        merge::merge(base, parts, lead_s)
    }

    /// Waits for every share's answer, declaring lost the agents that stop beating and the
    /// shares not answered in time.
    fn gather(
        &self,
        c: &mut Connection,
        plan: &Plan,
        cell: &CellPlan,
        rep: usize,
        run: &str,
        mut pending: BTreeMap<usize, (&AgentInfo, usize)>,
    ) -> Vec<PartOutcome> {
        let k = pending.len();
        let deadline = Instant::now() + LEAD + plan.timeout + Duration::from_secs(10);
        let mut outcomes: BTreeMap<usize, PartOutcome> = BTreeMap::new();
        let mut cancelled: Option<Instant> = None;
        let host_cell = per_host(cell, k);
        let lost =
            |share: usize, agent: &AgentInfo, tasks: usize, status, why: String| PartOutcome {
                host: agent.name.clone(),
                share,
                tasks,
                run: None,
                lost: Some((status, why)),
                latency: None,
                queue_wait: None,
                clock: agent.clock,
                first_task_ns: None,
            };
        while !pending.is_empty() {
            let answer: redis::RedisResult<Option<(String, String)>> =
                redis::cmd("BLPOP").arg(done_key(run)).arg(POLL_S).query(c);
            if let Ok(Some((_, text))) = answer {
                if let Ok(done) = serde_json::from_str::<PartDone>(&text) {
                    if let Some((agent, tasks)) = pending.remove(&done.part) {
                        let o = outcome(done, agent, tasks, &host_cell, plan, rep);
                        outcomes.insert(o.share, o);
                    }
                }
                continue;
            }
            // No answer this round: who is still alive?
            let shares: Vec<usize> = pending.keys().copied().collect();
            for share in shares {
                let (agent, tasks) = pending[&share];
                let beating: bool = redis::cmd("EXISTS")
                    .arg(agent_key(&agent.name))
                    .query(c)
                    .unwrap_or(true);
                if !beating {
                    pending.remove(&share);
                    outcomes.insert(
                        share,
                        lost(
                            share,
                            agent,
                            tasks,
                            PartStatus::Lost,
                            format!(
                                "was lost: no heartbeat for {} s (killed, or its network gone)",
                                super::LOST_AFTER.as_secs_f64()
                            ),
                        ),
                    );
                }
            }
            if crate::interrupt::interrupted() && cancelled.is_none() {
                let _: redis::RedisResult<()> = redis::cmd("SET")
                    .arg(cancel_key(run))
                    .arg(1)
                    .arg("EX")
                    .arg(3600)
                    .query(c);
                cancelled = Some(Instant::now());
            }
            let gave_up = cancelled.is_some_and(|t| t.elapsed() > CANCEL_GRACE);
            if gave_up || Instant::now() > deadline {
                let why = if gave_up {
                    "did not stop within 5 s of the interrupt".to_string()
                } else {
                    format!(
                        "did not answer within the run's timeout ({})",
                        crate::units::fmt_secs(plan.timeout.as_secs_f64())
                    )
                };
                for (share, (agent, tasks)) in std::mem::take(&mut pending) {
                    outcomes.insert(
                        share,
                        lost(share, agent, tasks, PartStatus::Lost, why.clone()),
                    );
                }
            }
        }
        outcomes.into_values().collect()
    }
}

/// The cell one host runs: its share of the tasks, its own W.
fn per_host(cell: &CellPlan, k: usize) -> CellPlan {
    let mut c = cell.clone();
    c.key.hosts = None;
    c.workers = cell.workers.map(|w| (w / k).max(1));
    c.parallelism = (cell.parallelism / k).max(1);
    c
}

/// What an agent's answer says of its share.
fn outcome(
    done: PartDone,
    agent: &AgentInfo,
    tasks: usize,
    host_cell: &CellPlan,
    plan: &Plan,
    rep: usize,
) -> PartOutcome {
    let mut o = PartOutcome {
        host: agent.name.clone(),
        share: done.part,
        tasks,
        run: None,
        lost: None,
        latency: None,
        queue_wait: None,
        clock: done.clock,
        first_task_ns: None,
    };
    if let Some(why) = done.refused {
        o.lost = Some((PartStatus::Refused, format!("refused its share: {why}")));
        return o;
    }
    let Some(ended) = done.ended else {
        o.lost = Some((PartStatus::Lost, "answered without a run".into()));
        return o;
    };
    let ended: crate::study::runner::supervise::Ended = ended.into();
    o.first_task_ns = ended.report.as_ref().and_then(|r| r.first_task_ns);
    o.latency = ended.report.as_ref().and_then(|r| r.latency_hdr.clone());
    o.queue_wait = ended.report.as_ref().and_then(|r| r.queue_wait_hdr.clone());
    let mut cell = host_cell.clone();
    cell.key.tasks = tasks;
    let verdict = convert::classify(&ended, plan.timeout);
    o.run = Some(convert::convert(&cell, rep, ended, verdict));
    o
}

impl Executor for HubExecutor<'_> {
    fn machine(&self) -> Machine {
        crate::study::machine::machine()
    }

    fn hosts(&self) -> Vec<MetaHost> {
        self.agents
            .iter()
            .map(|a| MetaHost {
                name: a.name.clone(),
                host: a.host.clone(),
                addr: a.addr.clone(),
                cores: a.cores,
                mem_total_kib: a.mem_total_kib,
                version: a.version.clone(),
                clock_offset_ns: a.clock.offset_ns,
                clock_uncertainty_ns: a.clock.uncertainty_ns,
            })
            .collect()
    }

    fn run(&self, plan: &Plan, cell: &CellPlan, iteration: Iteration) -> RunResult {
        self.server.reset_counters();
        let mut run = match &cell.kind {
            CellKind::Concur => {
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
        crate::interrupt::interrupted()
    }

    fn hook(&self, plan: &Plan, cell: &CellPlan, hook: Hook) -> std::result::Result<(), String> {
        let base_url = self.server.as_ref().map(|s| s.base_url.as_str());
        runner::run_hook(plan, cell, hook, base_url)
    }
}
