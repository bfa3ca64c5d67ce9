//! The study's side of a run over several hosts: an [`Executor`] that gives each of K agents
//! its share of the run (a closed cell's tasks dealt round-robin, an open cell's every K-th
//! arrival), announces one start instant on the hub's clock, and gathers the shares' run
//! lines into one (`merge`). It never waits forever: an agent whose heartbeat expires
//! is lost within [`super::LOST_AFTER`], a share not answered within the run's timeout is
//! lost, and the run is then recorded as failed with what was not performed.
//!
//! It rides out its hub: a hub that stops answering (a Redis restart, a network cut) is
//! reconnected to with the agents' own backoff ([`super::retry`]), the study's heartbeat for
//! the run is renewed at once, no agent is declared lost until its heartbeat had a life to
//! come back, and the answers the agents deliver (again) after they rejoin are taken; the
//! same answer delivered twice counts once. The wait keeps its deadline, the run's timeout
//! plus at most 5 s, and a run given up at it names the outage. An agent that refused the
//! run's work because it could not trust it (another key) says so on the hub, and the share
//! ends refused within a second, naming the agent and its reason; an answer whose signature
//! the study refuses ends its share at once too.
//!
//! What comes back on the run's list is outside input: anyone who can write to the hub can
//! push there. An answer is read only up to `merge::ANSWER_MAX_BYTES` (a script pops it on
//! the hub and sends only its length when it is longer), must name this run, one of its
//! shares not yet answered and the agent that share went to, and its figures must be those an
//! honest run of the share could report (`merge::check_ended`); anything else is refused,
//! the run fails, and no item on the list, however many, keeps the wait from its deadline,
//! its heartbeat checks and Ctrl-C. Shares go to idle agents only, and an agent's work list
//! expires when the run's wait would.
//!
//! On a terminal's live view, each agent's row says where it stands (announced, running its
//! share, answered, failed, refused, lost), said as each share is sent and as each outcome is
//! known: from this process, never from a measured one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::{Connection, Script};

use super::clock;
use super::merge::{self, PartOutcome, ShareBounds};
use super::retry::Backoff;
use super::work::{PartDone, PartWork, Refusal, Work};
use super::{agent_key, cancel_key, done_key, refused_key, work_key, AgentInfo, Hub};
use crate::analysis::results::{Machine, MetaHost, PartStatus, RunResult, RunStatus};
use crate::jobs::BackendUrl;
use crate::measure::schedule::Segment;
use crate::model::selfcall::{PartRequest, RunRequest};
use crate::os::live::{HostRow, HostState};
use crate::os::terminal::Terminal;
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

/// How a share's error starts when its answer was refused once claimed.
const ANSWER_REFUSED: &str = "its answer was refused";

/// How long past the run's timeout the study waits for its answers: an agent kills a share
/// at the timeout and answers at once. With [`LEAD`] and one reply the hub may hold back
/// ([`REPLY_WAIT`]), the study never waits past the timeout + 5 s.
const ANSWER_MARGIN: Duration = Duration::from_millis(2500);

/// The longest the study waits for one reply of the hub, or to connect to it: a hub that
/// went silent is noticed, and the wait keeps its deadline.
const REPLY_WAIT: Duration = Duration::from_secs(2);

/// How often the study looks for the agents' word that they refused a share's work.
const REFUSAL_LOOK: Duration = Duration::from_millis(250);

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
    agent.doing_now() == "idle"
}

/// The agents of `all` that are busy, as `NAME (DOING)`, for a refusal.
pub fn busy_names<'a>(all: impl IntoIterator<Item = &'a AgentInfo>) -> String {
    all.into_iter()
        .filter(|a| !is_idle(a))
        .map(|a| {
            let doing: String = a
                .doing_now()
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
    /// How many answers were refused over the whole study (forged, misaddressed, not what a
    /// run could report): a study that refused one never exits 0, `-i` or not.
    refused: std::sync::atomic::AtomicUsize,
    /// Where the hosts' rows are shown (the live view, when it is up).
    live: Mutex<Terminal>,
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

/// An agent chosen for a share: as the study knows it, and the epoch its heartbeat names now
/// (the share must name it).
struct Chosen<'s> {
    agent: &'s AgentInfo,
    epoch: String,
    /// The key its heartbeat publishes for sealing its shares (with keys per party).
    seal: Option<super::seal::SealKey>,
}

/// One share sent and not yet answered.
#[derive(Clone, Copy, Debug)]
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
        let conn = Mutex::new(
            study_connection(&hub, REPLY_WAIT + REPLY_WAIT).map_err(|e| hub.unreachable(e))?,
        );
        crate::os::interrupt::install_interrupt_handler();
        Ok(HubExecutor {
            hub,
            conn,
            agents,
            server,
            server_cpu,
            answered: Mutex::new(BTreeMap::new()),
            pop: Script::new(POP_BOUNDED),
            refused: std::sync::atomic::AtomicUsize::new(0),
            live: Mutex::new(Terminal::silent()),
        })
    }

    /// How many answers this study refused so far.
    pub fn refused_answers(&self) -> usize {
        self.refused.load(std::sync::atomic::Ordering::SeqCst)
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

    /// Says on the live view how a host stands.
    fn show_host(&self, row: HostRow) {
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .host(row);
    }

    /// Says on the live view how a share ended.
    fn show_outcome(&self, o: &PartOutcome) {
        let (state, why) = match (&o.lost, &o.run) {
            (Some((PartStatus::Lost, why)), _) => (HostState::Lost, Some(why.clone())),
            (Some((PartStatus::Refused, why)), _) => (HostState::Refused, Some(why.clone())),
            (Some((_, why)), _) => (HostState::Failed, Some(why.clone())),
            (None, Some(run)) if run.status == RunStatus::Ok && run.tasks_failed == 0 => {
                (HostState::Answered, None)
            }
            (None, Some(run)) => (HostState::Failed, run.error.clone()),
            (None, None) => (HostState::Lost, None),
        };
        self.show_host(HostRow {
            name: o.host.clone(),
            state,
            clock: clock_text(o.clock),
            tasks: Some(o.tasks as u64),
            why,
        });
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
        // The hub may have gone away since the last run (a restart): a new connection, once.
        if redis::cmd("PING").query::<String>(c).is_err() {
            match study_connection(&self.hub, REPLY_WAIT) {
                Ok(fresh) => *c = fresh,
                Err(e) => return self.not_run(cell, rep, self.hub.unreachable(e).to_string()),
            }
        }
        let chosen = match self.choose(c, k) {
            Ok(chosen) => chosen,
            Err(why) => return self.not_run(cell, rep, why),
        };
        let whole = runner::request(plan, cell, iteration);
        let launch = match self.announce(c, plan) {
            Ok(launch) => launch,
            Err(why) => return self.not_run(cell, rep, why),
        };
        let pending = match self.send_shares(c, plan, &whole, &chosen, &launch) {
            Ok(pending) => pending,
            Err(why) => return self.not_run(cell, rep, why),
        };
        for sent in pending.values() {
            self.show_host(HostRow {
                name: sent.agent.name.clone(),
                state: HostState::Running,
                clock: clock_text(sent.agent.clock()),
                tasks: Some(sent.bounds.tasks as u64),
                why: None,
            });
        }
        let (parts, waited) = self.gather(c, plan, cell, rep, &launch.run, launch.wait, pending);
        self.remember_answered(&parts, &launch.run);
        let mut base = convert::template(cell, rep, RunStatus::Ok, 0.0, None);
        base.isolation = crate::analysis::results::Isolation::FreshProcess;
        settle(merge::merge(base, parts, launch.lead_s), waited)
    }

    /// The first `k` of the study's agents that are alive and free on the hub now, with the
    /// epochs their heartbeats name, or why there are not `k` of them. With keys per party,
    /// a heartbeat not signed by the key pinned for its agent is not that agent's.
    fn choose(&self, c: &mut Connection, k: usize) -> Result<Vec<Chosen<'_>>, String> {
        let mut alive: Vec<AgentInfo> = self.hub.agents(c).map_err(|e| e.to_string())?;
        alive.retain(|a| self.agents.iter().any(|s| s.name == a.name));
        let mut refused = Vec::new();
        alive.retain(|a| match self.hub.vouch(a) {
            Ok(_) => true,
            Err(why) => {
                refused.push(format!("'{}': {why}", a.name));
                false
            }
        });
        let picked = pick_agents(&self.agents, &alive, k, |a| self.free(a)).map_err(|why| {
            if refused.is_empty() {
                why
            } else {
                format!("{why}; refused: {}", refused.join("; "))
            }
        })?;
        Ok(picked
            .into_iter()
            .map(|agent| {
                let beat = alive.iter().find(|b| b.name == agent.name);
                Chosen {
                    agent,
                    epoch: beat.and_then(|b| b.epoch.clone()).unwrap_or_default(),
                    seal: beat.and_then(|b| super::seal_key_of(b).ok()),
                }
            })
            .collect())
    }

    /// Reads the hub's clock for the run's common start, names the run, and starts the
    /// study's heartbeat for it.
    fn announce(&self, c: &mut Connection, plan: &Plan) -> Result<Launch, String> {
        let asked = Instant::now();
        let start_hub_ns = match clock::hub_now_ns(c) {
            Ok(now) => now + LEAD.as_nanos() as u64,
            Err(e) => return Err(self.hub.failed("reading its clock", e).to_string()),
        };
        // The common start is LEAD after the hub's clock was read.
        let lead_s = asked.elapsed().as_secs_f64() + LEAD.as_secs_f64();
        let run = format!("{:x}{:x}", start_hub_ns, std::process::id());
        let wait = LEAD + plan.timeout + ANSWER_MARGIN;
        // The study's heartbeat for this run, renewed while it waits: once it expires (the
        // study killed, its host gone), the agents stop the run's shares.
        if let Err(e) = beat_for(c, &run) {
            return Err(self.hub.failed("sending work", e).to_string());
        }
        Ok(Launch {
            run,
            start_hub_ns,
            lead_s,
            wait,
        })
    }

    /// Sends each chosen agent its share of `whole`, in order; the shares sent, or why one
    /// could not be.
    fn send_shares<'s>(
        &self,
        c: &mut Connection,
        plan: &Plan,
        whole: &RunRequest,
        chosen: &[Chosen<'s>],
        launch: &Launch,
    ) -> Result<BTreeMap<usize, Sent<'s>>, String> {
        let k = chosen.len();
        let mut pending: BTreeMap<usize, Sent> = BTreeMap::new();
        for (share, Chosen { agent, epoch, seal }) in chosen.iter().enumerate() {
            let agent: &'s AgentInfo = agent;
            let request = share_request(whole, share, k);
            // The share's arrivals for an open cell, its tasks for a closed one.
            let tasks = request
                .open
                .as_ref()
                .map_or(request.tasks, |o| o.schedule.tasks);
            let work = Work::Part(Box::new(PartWork {
                run: launch.run.clone(),
                part: share,
                of: k,
                version: crate::base::version::VERSION.into(),
                request,
                start_hub_ns: launch.start_hub_ns,
                timeout_s: plan.timeout.as_secs_f64(),
            }));
            // With keys per party, the share is sealed to its agent: a reader of the hub sees
            // none of its request (URL, headers, body: where credentials are).
            let work = match (self.hub.trust(), seal) {
                (super::Trust::Keys(_), Some(key)) => work
                    .sealed_to(key, &agent.name, epoch)
                    .map_err(|why| format!("agent '{}': {why}", agent.name))?,
                (super::Trust::Keys(_), None) => {
                    return Err(format!(
                        "agent '{}' publishes no key to seal its share to",
                        agent.name
                    ))
                }
                _ => work,
            };
            let text = self
                .work_text(c, &agent.name, epoch, launch, &work)
                .map_err(|e| self.hub.failed("sending work", e).to_string())?;
            // What its agent would refuse for its size is refused here, before it is sent.
            super::admit::check_size(&text).map_err(|why| {
                format!("agent '{}': its share would be refused: {why}", agent.name)
            })?;
            if let Err(e) = self.send(c, &agent.name, launch, text) {
                return Err(self.hub.failed("sending work", e).to_string());
            }
            let bounds = ShareBounds {
                tasks,
                cores: agent.cores,
                wall_max_s: launch.wait.as_secs_f64(),
            };
            pending.insert(share, Sent { agent, bounds });
        }
        Ok(pending)
    }

    /// The text that carries `work` to `agent` at its `epoch`: signed (and with keys per
    /// party, its share already sealed) as the hub's trust asks.
    fn work_text(
        &self,
        c: &mut Connection,
        agent: &str,
        epoch: &str,
        launch: &Launch,
        work: &Work,
    ) -> redis::RedisResult<String> {
        serde_json::to_string(work)
            .map_err(|e| redis::RedisError::from(std::io::Error::other(e)))
            .and_then(|text| self.hub.seal(c, agent, &launch.run, epoch, text))
    }

    /// Pushes a work item's `text` on `agent`'s work list. The list expires when the study
    /// stops waiting for this run: work that no agent took by then is stale, and must not
    /// start a share later.
    fn send(
        &self,
        c: &mut Connection,
        agent: &str,
        launch: &Launch,
        text: String,
    ) -> redis::RedisResult<()> {
        redis::pipe()
            .atomic()
            .cmd("RPUSH")
            .arg(work_key(agent))
            .arg(text)
            .ignore()
            .cmd("EXPIRE")
            .arg(work_key(agent))
            .arg(launch.wait.as_secs() + 1)
            .ignore()
            .query(c)
    }

    /// Notes, by agent, that it answered `run`: its heartbeat may still name it a while.
    fn remember_answered(&self, parts: &[PartOutcome], run: &str) {
        let mut answered = self.answered.lock().unwrap_or_else(|p| p.into_inner());
        for p in parts.iter().filter(|p| p.lost.is_none()) {
            answered.insert(p.host.clone(), run.to_string());
        }
    }

    /// While the hub does not answer: once the backoff's pause has passed (the agents'
    /// [`Backoff`]), a new connection, within what is left of the wait; once it answers, the
    /// study's heartbeat for the run at once (the agents look for it) and one line.
    fn reconnect(&self, c: &mut Connection, g: &mut Gather) {
        let o = &mut g.outage;
        if o.next_try.is_some_and(|t| Instant::now() < t) {
            return;
        }
        let left = g.deadline.saturating_duration_since(Instant::now());
        let fresh = study_connection(&self.hub, left.clamp(Duration::from_millis(50), REPLY_WAIT))
            .and_then(|mut fresh| beat_for(&mut fresh, g.run).map(|()| fresh));
        match fresh {
            Ok(fresh) => {
                *c = fresh;
                let was = o.back();
                crate::os::terminal::warn_always(format_args!(
                    "run {}: reconnected to the hub {} after {}; the agents' heartbeats are looked at again in {} s",
                    g.run,
                    self.hub.url(),
                    crate::base::units::fmt_secs(was.as_secs_f64()),
                    super::LOST_AFTER.as_secs_f64()
                ));
            }
            Err(e) => {
                o.error = Some(self.hub.url().scrub(&e.to_string()));
                let (_, pause) = o.backoff.failed();
                o.next_try = Some(Instant::now() + pause);
            }
        }
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
        pending: BTreeMap<usize, Sent>,
    ) -> (Vec<PartOutcome>, Waited) {
        let mut g = Gather::new(run, wait, pending);
        let host_cell = per_host(cell, g.k);
        let mut beaten = Instant::now();
        let mut looked = Instant::now();
        let mut shown: BTreeSet<usize> = BTreeSet::new();
        while !g.pending.is_empty() {
            if g.outage.down_since.is_some() {
                self.reconnect(c, &mut g);
            }
            let up = g.outage.down_since.is_none();
            if up && beaten.elapsed() >= super::BEAT {
                if let Err(e) = beat_for(c, run) {
                    g.outage.went_down(&self.hub, &e);
                }
                beaten = Instant::now();
            }
            let took = up && self.take_answer(c, &mut g, &host_cell, plan, rep);
            if g.outage.down_since.is_none() && g.outage.settled() {
                g.lose_silent(c, &self.hub);
            }
            if g.outage.down_since.is_none() && looked.elapsed() >= REFUSAL_LOOK {
                g.hear_refusals(c, &self.hub);
                looked = Instant::now();
            }
            g.cancel_on_interrupt(c);
            g.give_up_when_due(plan.timeout, &self.hub);
            for (share, o) in &g.outcomes {
                if shown.insert(*share) {
                    self.show_outcome(o);
                }
            }
            if !took && !g.pending.is_empty() {
                std::thread::sleep(EMPTY_WAIT);
            }
        }
        (g.outcomes.into_values().collect(), g.waited)
    }

    /// Pops one item of the run's list and files it: a share's outcome, or a refusal.
    /// Whether an item was taken (a failed read is kept to be said if the run is given up).
    fn take_answer(
        &self,
        c: &mut Connection,
        g: &mut Gather,
        host_cell: &CellPlan,
        plan: &Plan,
        rep: usize,
    ) -> bool {
        let run = g.run;
        let junk_before = g.waited.junk;
        let taken = self.take_one(c, g, host_cell, plan, rep, run);
        let mut refused = g.waited.junk - junk_before;
        if taken.is_some_and(|o| o) {
            refused += 1;
        }
        self.refused
            .fetch_add(refused, std::sync::atomic::Ordering::SeqCst);
        taken.is_some()
    }

    /// [`HubExecutor::take_answer`]'s work: `None` when nothing was taken, else whether a
    /// share's answer was refused once claimed (another agent's name in it, or figures no
    /// run could report).
    fn take_one(
        &self,
        c: &mut Connection,
        g: &mut Gather,
        host_cell: &CellPlan,
        plan: &Plan,
        rep: usize,
        run: &str,
    ) -> Option<bool> {
        match self.pop_answer(c, run) {
            Ok(Some(Err(len))) => {
                g.waited.refuse(
                    run,
                    format!(
                        "an answer of {len} bytes (allowed: at most {} MiB)",
                        merge::ANSWER_MAX_BYTES >> 20
                    ),
                );
                Some(false)
            }
            Ok(Some(Ok(bytes))) => {
                // Signed (with the hub key, or by one of the study's agents with its own), for
                // the study, in this run's scope (a bare answer without a key).
                let text = std::str::from_utf8(&bytes);
                let opened = text
                    .map_err(|_| "an item that is not text".to_string())
                    .and_then(|t| self.hub.unseal_answer(c, run, t, &mut g.seen));
                if let (Ok(t), Err(why)) = (text, &opened) {
                    g.refuse_signature(t, why);
                }
                let read = opened.and_then(|(body, signer)| {
                    serde_json::from_str::<PartDone>(&body)
                        .map(|done| (done, signer))
                        .map_err(|e| {
                            format!(
                                "an item that is not an answer ({})",
                                clipped(&e.to_string(), 200)
                            )
                        })
                });
                let mut refused_once_claimed = false;
                match read {
                    Err(why) => g.waited.refuse(run, clipped(&why, 300)),
                    // Its agent's answer delivered again after a rejoin, the same as the one
                    // taken: nothing new.
                    Ok((done, _))
                        if done.resent && g.claimed.get(&done.part) == Some(&digest(&done)) => {}
                    Ok((done, signer)) => match g
                        .signed_by_its_agent(&done, signer.as_deref())
                        .and_then(|()| g.claim(&done))
                    {
                        Ok(s) => {
                            g.claimed.insert(done.part, digest(&done));
                            let o = outcome(done, s, host_cell, plan, rep);
                            refused_once_claimed = matches!(
                                &o.lost,
                                Some((PartStatus::Refused, why)) if why.starts_with(ANSWER_REFUSED)
                            );
                            g.outcomes.insert(o.share, o);
                        }
                        Err(why) => g.waited.refuse(run, why),
                    },
                }
                Some(refused_once_claimed)
            }
            Ok(None) => None,
            // The hub did not answer this time: the checks, then again; said if the run is
            // given up.
            Err(e) => {
                g.outage.went_down(&self.hub, &e);
                g.read_failed = Some(self.hub.failed("reading answers", e).to_string());
                None
            }
        }
    }
}

/// One run's launch: its id, its common start on the hub's clock, the lead it gave the
/// agents (seconds, from the clock's read), and how long the study waits for its answers.
struct Launch {
    run: String,
    start_hub_ns: u64,
    lead_s: f64,
    wait: Duration,
}

/// The first `k` agents of `study` that `alive` (the hub's heartbeats now) holds and that
/// are `free`, in the study's order; or why there are not `k`, naming the busy ones.
fn pick_agents<'s>(
    study: &'s [AgentInfo],
    alive: &[AgentInfo],
    k: usize,
    free: impl Fn(&AgentInfo) -> bool,
) -> Result<Vec<&'s AgentInfo>, String> {
    let now = |a: &AgentInfo| alive.iter().find(|b| b.name == a.name);
    let chosen: Vec<&AgentInfo> = study
        .iter()
        .filter(|a| now(a).is_some_and(&free))
        .take(k)
        .collect();
    if chosen.len() < k {
        let busy: Vec<&AgentInfo> = study.iter().filter_map(now).filter(|b| !free(b)).collect();
        return Err(format!(
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
        ));
    }
    Ok(chosen)
}

/// Share `share` of `k` of the run `whole` asks for: its tasks (or its arrivals), the part
/// it is, and no queue of the study's.
fn share_request(whole: &RunRequest, share: usize, k: usize) -> RunRequest {
    let n = whole.tasks;
    let mut request = whole.clone();
    request.tasks = Segment::share(share, k, n);
    // The study's queue (its URL, its password) stays here: an agent's jobs models use the
    // agent's own --jobs-backend, or a fresh SQLite file with the sync asked.
    request.recipe.jobs_backend = request.recipe.jobs_backend.take().and_then(|b| match b {
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
    request
}

/// The run line from the shares' merged line and what the wait met: Ctrl-C makes it
/// interrupted; a share its agent's own signal stopped makes it failed, not interrupted;
/// refused items on the list fail it and are counted in its error.
fn settle(mut merged: RunResult, waited: Waited) -> RunResult {
    if waited.interrupted {
        // As a local run that Ctrl-C stopped: the study ends there, exit 130.
        merged.status = RunStatus::Interrupted;
    } else if merged.status == RunStatus::Interrupted {
        // A share its agent's own Ctrl-C or SIGTERM stopped: the study was not interrupted,
        // its run failed.
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

/// The wait for one run's answers: the shares not yet answered, their outcomes so far, and
/// what the wait met besides them.
struct Gather<'a> {
    run: &'a str,
    /// How many shares were sent.
    k: usize,
    deadline: Instant,
    pending: BTreeMap<usize, Sent<'a>>,
    sent: BTreeSet<usize>,
    outcomes: BTreeMap<usize, PartOutcome>,
    waited: Waited,
    /// When Ctrl-C was passed on to the agents.
    cancelled: Option<Instant>,
    /// The last failure to read the run's list.
    read_failed: Option<String>,
    seen: super::sign::Seen,
    /// The hub's outages during the wait.
    outage: Outage,
    /// By share, the [`digest`] of the answer taken for it.
    claimed: BTreeMap<usize, Vec<u8>>,
}

/// The hub's outages during one run's wait, as the study met them.
#[derive(Debug, Default)]
struct Outage {
    /// Since when the hub has not answered, while it does not.
    down_since: Option<Instant>,
    /// How long it did not answer in the outages that ended.
    total: Duration,
    /// When it last answered again.
    back_at: Option<Instant>,
    /// When to try to reconnect next.
    next_try: Option<Instant>,
    /// The pauses between attempts: the agents' own.
    backoff: Backoff,
    /// Its last error.
    error: Option<String>,
}

impl Outage {
    /// A command failed: the hub is unreachable from now (said once per outage).
    fn went_down(&mut self, hub: &Hub, e: &redis::RedisError) {
        let text = hub.url().scrub(&e.to_string());
        if self.down_since.is_none() {
            crate::os::terminal::warn_always(format_args!(
                "the hub {} is unreachable ({text}); reconnecting with the agents' backoff",
                hub.url()
            ));
            self.down_since = Some(Instant::now());
            self.next_try = None;
            self.backoff.reset();
        }
        self.error = Some(text);
    }

    /// The hub answered again: how long this outage lasted.
    fn back(&mut self) -> Duration {
        let was = self
            .down_since
            .take()
            .map_or(Duration::ZERO, |t| t.elapsed());
        self.total += was;
        self.back_at = Some(Instant::now());
        was
    }

    /// How long the hub was unreachable over the wait so far.
    fn unreachable_for(&self) -> Duration {
        self.total + self.down_since.map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// Whether an agent's missing heartbeat means it is gone: not while the hub is out,
    /// nor within a heartbeat's life after it is back (a restarted hub is empty until each
    /// agent beats again).
    fn settled(&self) -> bool {
        self.down_since.is_none()
            && self
                .back_at
                .is_none_or(|t| t.elapsed() >= super::LOST_AFTER)
    }

    /// The outage as a lost share's reason ends: none when the hub always answered.
    fn said(&self, hub: &Hub) -> Option<String> {
        let for_ = self.unreachable_for();
        (!for_.is_zero()).then(|| {
            format!(
                "the hub {} was unreachable for {} of the run{}{}",
                hub.url(),
                crate::base::units::fmt_secs(for_.as_secs_f64()),
                if self.down_since.is_some() {
                    " (still at the deadline)"
                } else {
                    ""
                },
                self.error
                    .as_deref()
                    .map(|e| format!(", last error: {}", clipped(e, 200)))
                    .unwrap_or_default()
            )
        })
    }
}

impl<'a> Gather<'a> {
    /// The wait for `pending`, the shares of `run`, which ends `wait` from now.
    fn new(run: &'a str, wait: Duration, pending: BTreeMap<usize, Sent<'a>>) -> Self {
        Gather {
            run,
            k: pending.len(),
            deadline: Instant::now() + wait,
            sent: pending.keys().copied().collect(),
            pending,
            outcomes: BTreeMap::new(),
            waited: Waited::default(),
            cancelled: None,
            read_failed: None,
            seen: super::sign::Seen::default(),
            outage: Outage::default(),
            claimed: BTreeMap::new(),
        }
    }

    /// The share an answer is for, taken off the pending ones; or why the answer is refused
    /// (another run's, a second one for its share, a share this run does not have).
    fn claim(&mut self, done: &PartDone) -> Result<Sent<'a>, String> {
        let run = self.run;
        if done.run != run {
            return Err(format!(
                "an answer for run '{}' (allowed: this run's, '{run}')",
                clipped(&done.run, 64)
            ));
        }
        match self.pending.remove(&done.part) {
            Some(s) => Ok(s),
            None if self.sent.contains(&done.part) => Err(format!(
                "a second answer for share {} (from '{}')",
                done.part + 1,
                clipped(&done.agent, 64)
            )),
            None => Err(format!(
                "an answer for share {} of a run of {} (from '{}')",
                done.part.saturating_add(1),
                self.k,
                clipped(&done.agent, 64)
            )),
        }
    }

    /// With keys per party, whether the answer `done` is signed by the agent its share went
    /// to (`signer`, the agent whose pinned key signed it): one signed by another of the
    /// study's agents is refused, and leaves the share to its own agent's answer.
    fn signed_by_its_agent(&self, done: &PartDone, signer: Option<&str>) -> Result<(), String> {
        let (Some(signer), Some(sent)) = (signer, self.pending.get(&done.part)) else {
            return Ok(());
        };
        if sent.agent.name == signer {
            return Ok(());
        }
        Err(format!(
            "an answer for share {}, which went to agent '{}', signed by agent '{signer}''s key",
            done.part.saturating_add(1),
            sent.agent.name
        ))
    }

    /// An answer whose signature the study refused (`why`: another key than its agent's,
    /// or another hub key): if it names, unchecked, a share of this run still waiting and
    /// that share's agent, the share ends refused now, naming both, rather than at the
    /// deadline (the item also fails the run, as every refused item does).
    fn refuse_signature(&mut self, text: &str, why: &str) {
        let Some(done) = super::sign::body_of(text)
            .and_then(|body| serde_json::from_str::<PartDone>(&body).ok())
        else {
            return;
        };
        let names_it = done.run == self.run
            && self
                .pending
                .get(&done.part)
                .is_some_and(|s| s.agent.name == done.agent);
        if !names_it {
            return;
        }
        if let Some(s) = self.pending.remove(&done.part) {
            let why = format!("had its answer refused by the study: {}", clipped(why, 300));
            let mut o = lost_part(done.part, s, why);
            o.lost = o.lost.map(|(_, why)| (PartStatus::Refused, why));
            self.outcomes.insert(done.part, o);
        }
    }

    /// Declares lost the pending shares whose agents stopped heartbeating.
    fn lose_silent(&mut self, c: &mut Connection, hub: &Hub) {
        let shares: Vec<usize> = self.pending.keys().copied().collect();
        for share in shares {
            let s = self.pending[&share];
            let beating: bool = match redis::cmd("EXISTS").arg(agent_key(&s.agent.name)).query(c) {
                Ok(beating) => beating,
                Err(e) => {
                    self.outage.went_down(hub, &e);
                    return;
                }
            };
            if !beating {
                self.pending.remove(&share);
                let why = format!(
                    "was lost: no heartbeat for {} s (killed, or its network gone)",
                    super::LOST_AFTER.as_secs_f64()
                );
                self.outcomes.insert(share, lost_part(share, s, why));
            }
        }
    }

    /// The agents' word that they refused this run's work ([`Refusal`], read bounded): the
    /// share of each that said so ends refused, naming the agent and its reason. The word is
    /// not signed (the key is what the two sides disagree on): it ends only a share still
    /// waiting, which anyone who can write to the hub could already fail.
    fn hear_refusals(&mut self, c: &mut Connection, hub: &Hub) {
        let shares: Vec<usize> = self.pending.keys().copied().collect();
        for share in shares {
            let s = self.pending[&share];
            let said: redis::RedisResult<Vec<u8>> = redis::cmd("GETRANGE")
                .arg(refused_key(&s.agent.name))
                .arg(0)
                .arg(super::work::REFUSAL_MAX_BYTES)
                .query(c);
            let notice = match said {
                Ok(bytes) => Refusal::read(&bytes),
                Err(e) => {
                    self.outage.went_down(hub, &e);
                    return;
                }
            };
            let Some(notice) = notice.filter(|n| n.scope == self.run) else {
                continue;
            };
            self.pending.remove(&share);
            let why = format!(
                "refused the study's work: {} (its word on the hub, not signed)",
                notice.why
            );
            let mut o = lost_part(share, s, why);
            o.lost = o.lost.map(|(_, why)| (PartStatus::Refused, why));
            self.outcomes.insert(share, o);
        }
    }

    /// On the first Ctrl-C, tells the agents to stop the run's shares.
    fn cancel_on_interrupt(&mut self, c: &mut Connection) {
        if crate::os::interrupt::interrupted() && self.cancelled.is_none() {
            let _: redis::RedisResult<()> = redis::cmd("SET")
                .arg(cancel_key(self.run))
                .arg(1)
                .arg("EX")
                .arg(3600)
                .query(c);
            self.cancelled = Some(Instant::now());
            self.waited.interrupted = true;
        }
    }

    /// Past the deadline, or the grace after an interrupt, every pending share is lost.
    fn give_up_when_due(&mut self, timeout: Duration, hub: &Hub) {
        let gave_up = self.cancelled.is_some_and(|t| t.elapsed() > CANCEL_GRACE);
        if gave_up || Instant::now() > self.deadline {
            let mut why = if gave_up {
                "did not stop within 5 s of the interrupt".to_string()
            } else {
                format!(
                    "did not answer within the run's timeout ({})",
                    crate::base::units::fmt_secs(timeout.as_secs_f64())
                )
            };
            match self.outage.said(hub) {
                Some(outage) => why.push_str(&format!(": {outage}")),
                None => {
                    if let Some(e) = &self.read_failed {
                        why.push_str(&format!(" (last error: {e})"));
                    }
                }
            }
            for (share, s) in std::mem::take(&mut self.pending) {
                self.outcomes
                    .insert(share, lost_part(share, s, why.clone()));
            }
        }
    }
}

/// A share that came to nothing: its agent was lost, or never answered in time.
fn lost_part(share: usize, s: Sent, why: String) -> PartOutcome {
    PartOutcome {
        host: s.agent.name.clone(),
        share,
        tasks: s.bounds.tasks,
        run: None,
        lost: Some((PartStatus::Lost, why)),
        latency: None,
        queue_wait: None,
        clock: s.agent.clock(),
        first_task_ns: None,
    }
}

/// An agent's clock offset as the live view says it; none when it was never measured.
fn clock_text(c: clock::ClockOffset) -> Option<String> {
    (c != clock::ClockOffset::default()).then(|| clock::describe(&c))
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

/// What tells an answer from another: SHA-256 of its text as it was read, its being sent
/// again left out (the run's id is in it).
fn digest(done: &PartDone) -> Vec<u8> {
    let first = PartDone {
        resent: false,
        ..done.clone()
    };
    let text = serde_json::to_vec(&first).unwrap_or_default();
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &text)
        .as_ref()
        .to_vec()
}

/// A connection of the study's to the hub: `within` to connect, [`REPLY_WAIT`] for each
/// reply, so that no command keeps a wait past its deadline by more than that.
fn study_connection(hub: &Hub, within: Duration) -> redis::RedisResult<Connection> {
    let mut c = hub.try_connect_within(within)?;
    c.set_read_timeout(Some(REPLY_WAIT))?;
    c.set_write_timeout(Some(REPLY_WAIT))?;
    redis::cmd("PING").query::<String>(&mut c)?;
    Ok(c)
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
                "{ANSWER_REFUSED}: it came from '{}', not from '{}' to which the share went",
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
        o.lost = Some((PartStatus::Refused, format!("{ANSWER_REFUSED}: {why}")));
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

    fn show_live(&self, terminal: Terminal) {
        for agent in &self.agents {
            terminal.host(HostRow {
                name: agent.name.clone(),
                state: HostState::Announced,
                clock: clock_text(agent.clock()),
                tasks: None,
                why: None,
            });
        }
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) = terminal;
    }

    fn hook(&self, plan: &Plan, cell: &CellPlan, hook: Hook) -> std::result::Result<(), String> {
        runner::run_hook(plan, cell, hook)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::clock::ClockOffset;

    fn agent(name: &str, doing: &str) -> AgentInfo {
        AgentInfo {
            meta: MetaHost {
                name: name.into(),
                host: format!("{name}.lab"),
                addr: None,
                cores: 4,
                mem_total_kib: None,
                version: "0".into(),
                clock_offset_ns: 0,
                clock_uncertainty_ns: 0,
            },
            pid: 1,
            allow_commands: false,
            mono_offset_ns: 0,
            beat_hub_ns: 0,
            doing: doing.into(),
            epoch: None,
            key: None,
            seal_key: None,
            sig: None,
            released: false,
        }
    }

    #[test]
    fn shares_go_to_the_first_alive_idle_agents_in_the_studys_order() {
        let study = [agent("a", "idle"), agent("b", "idle"), agent("c", "idle")];
        // The hub sees `a` busy and `c` idle; `b` is gone.
        let alive = [agent("c", "idle"), agent("a", "run 1f share 2")];
        let picked = pick_agents(&study, &alive, 1, is_idle).unwrap();
        assert_eq!(picked.len(), 1);
        assert_eq!(picked[0].name, "c");
        let why = pick_agents(&study, &alive, 2, is_idle).unwrap_err();
        assert_eq!(
            why,
            "--hosts 2: only 1 of the study's agents are alive and idle on the hub (c); busy: a (run 1f share 2)"
        );
        let why = pick_agents(&study, &[], 1, is_idle).unwrap_err();
        assert_eq!(
            why,
            "--hosts 1: only 0 of the study's agents are alive and idle on the hub ()"
        );
    }

    fn done(run: &str, part: usize) -> PartDone {
        PartDone {
            run: run.into(),
            part,
            agent: "a\u{1b}[2J".into(),
            refused: None,
            ended: None,
            clock: ClockOffset::default(),
            resent: false,
        }
    }

    #[test]
    fn an_answer_is_claimed_once_and_only_for_a_share_of_this_run() {
        let a = agent("a", "idle");
        let bounds = ShareBounds {
            tasks: 4,
            cores: 4,
            wall_max_s: 10.0,
        };
        let pending: BTreeMap<usize, Sent> = [
            (0, Sent { agent: &a, bounds }),
            (1, Sent { agent: &a, bounds }),
        ]
        .into();
        let mut g = Gather::new("r1", Duration::from_secs(10), pending);
        assert_eq!(
            g.claim(&done("r0", 0)).unwrap_err(),
            "an answer for run 'r0' (allowed: this run's, 'r1')"
        );
        assert_eq!(g.claim(&done("r1", 1)).unwrap().bounds.tasks, 4);
        assert_eq!(
            g.claim(&done("r1", 1)).unwrap_err(),
            "a second answer for share 2 (from 'a[2J')"
        );
        assert_eq!(
            g.claim(&done("r1", usize::MAX)).unwrap_err(),
            format!(
                "an answer for share {} of a run of 2 (from 'a[2J')",
                usize::MAX
            )
        );
        assert_eq!(g.pending.keys().copied().collect::<Vec<_>>(), [0]);
    }

    /// `fib:5` under `seq` ×8 over 2 hosts, as the merge made it.
    fn merged(status: RunStatus, error: Option<&str>) -> RunResult {
        merge::two_host_template(status, error)
    }

    #[test]
    fn a_run_is_settled_by_what_its_wait_met() {
        // An agent's own signal fails the run; only the study's Ctrl-C interrupts it.
        let r = settle(merged(RunStatus::Interrupted, None), Waited::default());
        assert_eq!(r.status, RunStatus::Failed);
        let ctrl_c = Waited {
            interrupted: true,
            ..Default::default()
        };
        assert_eq!(
            settle(merged(RunStatus::Ok, None), ctrl_c).status,
            RunStatus::Interrupted
        );
        // Refused items fail an ok run and are counted after its own error.
        let junk = Waited {
            junk: 3,
            first_junk: Some("an item that is not text".into()),
            interrupted: false,
        };
        let r = settle(merged(RunStatus::Ok, Some("host b: slow")), junk);
        assert_eq!(r.status, RunStatus::Failed);
        assert_eq!(
            r.error.as_deref(),
            Some("host b: slow; 3 items on the run's answer list refused (first: an item that is not text)")
        );
    }
}
