//! `concur agent --hub URL`: joins the hub and runs the shares of runs it is sent, each in a
//! fresh process exactly as a local run (the same `__run` child, watched by the same
//! supervisor), until it is told to leave (`concur agents --stop`) or Ctrl-C. Its heartbeat
//! (a key that expires after [`super::LOST_AFTER`]) carries what it is and does; its work
//! comes on a list of its own, moved to a list of what it is doing while it does it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Connection;

use super::retry::{interruptible_sleep, Backoff};
use super::work::{PartDone, PartWork, Refusal, Work};
use super::{admit, clock};
use super::{
    agent_key, agents_key, cancel_key, check_name, doing_key, done_key, refused_key,
    retrying_mends, work_key, AgentInfo, Hub, HubUrl, BEAT, LOST_AFTER,
};
use crate::analysis::results::MetaHost;
use crate::base::error::{Error, Result};
use crate::measure::mono_ns;
use crate::os::terminal::Terminal;
use crate::runner::supervise;
use crate::runner::supervise::Launch;
use crate::workload::outside::Allowed;

/// How long the results of a run stay on the hub for a study that has not read them.
const DONE_TTL_S: u64 = 3600;

/// How long past a share's timeout its answer is offered again after a rejoin.
const RESEND_MARGIN: Duration = Duration::from_secs(10);

/// An answer, and until when it is offered again after a rejoin.
struct LastAnswer {
    /// The work item it answers.
    text: String,
    done: PartDone,
    until: Instant,
}

/// How long an agent's word that it refused an item stays on the hub.
const REFUSAL_TTL: Duration = Duration::from_secs(60);

/// `concur agent`'s flags.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// Its name on the hub; the host name by default.
    pub name: Option<String>,
    /// What studies from elsewhere may ask of this host (`--allow-commands`,
    /// `--allow-targets`).
    pub allowed: Allowed,
    /// The queue its jobs models use (`--jobs-backend`): the agent's own, never a study's.
    pub jobs_backend: Option<crate::jobs::BackendUrl>,
    /// Its own signing key and the study keys whose work it runs (`--signing-key`,
    /// `--study-keys`).
    pub key_files: super::KeyFiles,
}

/// What the heartbeat and the work loop share.
struct Shared {
    info: AgentInfo,
    /// The run being worked on, whose cancel key the heartbeat watches.
    run: Option<String>,
    /// Whether the study's own heartbeat for that run ([`super::alive_key`]) was seen: once
    /// it was, its expiry means the study is gone, and the share is stopped.
    study_seen: bool,
    /// When the heartbeat reached the hub again after losing it during that run: the hub
    /// may have restarted empty, so the study's heartbeat is looked for again, and only its
    /// absence for [`STUDY_GRACE`] after that stops the share.
    hub_back: Option<std::time::Instant>,
}

/// How long after the hub is back the study of a running share has to beat again before the
/// share is stopped: the longest pause of the backoff with which the study reconnects, and
/// a heartbeat's life.
const STUDY_GRACE: Duration = Duration::from_millis(
    super::retry::RETRY_MAX.as_millis() as u64 + LOST_AFTER.as_millis() as u64,
);

/// This host's name.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Why a session with the hub ended.
enum Ended {
    /// Told to leave (`concur agents --stop`).
    Told,
    /// Ctrl-C or SIGTERM.
    Signalled,
    /// The hub went away or failed a command: join again.
    Lost(redis::RedisError),
}

/// An agent: its identity, its policy and what survives from one session with the hub to
/// the next (its servers, an answer the hub could not take).
struct Agent<'a> {
    hub: Hub,
    name: String,
    o: &'a AgentOptions,
    exe: std::path::PathBuf,
    terminal: &'a Terminal,
    served: super::server::Served,
    /// The last answer: not yet delivered, or delivered and offered again after each
    /// rejoin while its study may still wait for it (a hub that restarted empty lost it).
    last: Option<LastAnswer>,
    /// The signed work items already taken (a replay is refused).
    seen: super::sign::Seen,
    /// This process's epoch, published at join: work must name it.
    epoch: String,
}

/// Joins the hub and works until told to leave, Ctrl-C or SIGTERM (how a service manager
/// stops it): 0 either way, once it has left the hub. A hub that is not there yet, or goes
/// away (a Redis restart), is asked again with a growing pause, each attempt one line; the
/// agent rejoins under the same name. Only what retrying cannot mend ends it: a bad URL,
/// refused credentials, a name another live agent holds.
pub fn run(url: &HubUrl, o: &AgentOptions, terminal: &Terminal) -> Result<i32> {
    let hub = Hub::new_with(url, super::Trust::load(super::Role::Agent, &o.key_files)?)?;
    let name = o.name.clone().unwrap_or_else(hostname);
    check_name(&name)?;
    let exe = std::env::current_exe().map_err(|e| Error::io("finding our own binary", e))?;
    crate::os::interrupt::install_interrupt_handler();
    let mut agent = Agent {
        hub,
        name,
        o,
        exe,
        terminal,
        served: super::server::Served::default(),
        last: None,
        seen: super::sign::Seen::default(),
        epoch: super::sign::new_epoch(),
    };
    let mut backoff = Backoff::default();
    let mut first = true;
    let told = loop {
        if crate::os::interrupt::interrupted() {
            break false;
        }
        let (mut c, info) = match agent.join(first) {
            Ok(joined) => joined,
            Err(JoinError::Fatal(e)) => return Err(e),
            Err(JoinError::Retry(e)) => {
                let (attempt, pause) = backoff.failed();
                terminal.warning(format_args!(
                    "agent '{}': the hub {url} does not answer ({}); attempt {attempt}, next in {:.1} s",
                    agent.name,
                    url.scrub(&e.to_string()),
                    pause.as_secs_f64()
                ));
                interruptible_sleep(pause);
                continue;
            }
        };
        if first {
            agent.announce(&info);
        } else {
            terminal.line(format_args!(
                "agent '{}' joined the hub {url} again",
                agent.name
            ));
        }
        first = false;
        backoff.reset();
        match agent.session(&mut c, info) {
            Ended::Told => break true,
            Ended::Signalled => break false,
            Ended::Lost(e) => terminal.warning(format_args!(
                "agent '{}': lost the hub {url} ({}); joining again",
                agent.name,
                url.scrub(&e.to_string())
            )),
        }
    };
    agent.leave();
    terminal.line(format_args!(
        "agent '{}' left the hub{}",
        agent.name,
        if told {
            " (told to)"
        } else {
            " (stopped by a signal)"
        }
    ));
    Ok(0)
}

/// Why joining failed.
enum JoinError {
    /// Waiting and trying again may mend it.
    Retry(redis::RedisError),
    /// It will not mend: the agent exits with this.
    Fatal(Error),
}

impl From<redis::RedisError> for JoinError {
    fn from(e: redis::RedisError) -> Self {
        JoinError::Retry(e)
    }
}

impl Agent<'_> {
    /// Connects, measures the clock and puts this agent's heartbeat on the hub. The first
    /// time, a live agent of the same name is an error; later (a rejoin), the key left by this
    /// very process is taken back.
    fn join(&self, first: bool) -> std::result::Result<(Connection, AgentInfo), JoinError> {
        let fatal = |e: redis::RedisError| {
            if retrying_mends(&e) {
                JoinError::Retry(e)
            } else {
                JoinError::Fatal(Error::flag(
                    "--hub",
                    format!(
                        "--hub '{}': the hub refuses this agent: {}",
                        self.hub.url(),
                        self.hub.url().scrub(&e.to_string())
                    ),
                ))
            }
        };
        let mut c = self.hub.try_connect().map_err(fatal)?;
        redis::cmd("PING").query::<String>(&mut c).map_err(fatal)?;
        let clock = clock::measure(&mut c)?;
        let machine = crate::runner::machine::machine();
        let addr = self.hub.local_addr();
        let info = AgentInfo {
            meta: MetaHost {
                name: self.name.clone(),
                host: hostname(),
                addr: addr.map(|a| a.to_string()),
                cores: machine.cores,
                mem_total_kib: machine.mem_total_kib,
                version: crate::base::version::VERSION.into(),
                clock_offset_ns: clock.offset_ns,
                clock_uncertainty_ns: clock.uncertainty_ns,
            },
            pid: std::process::id(),
            allow_commands: self.o.allowed.commands,
            mono_offset_ns: clock.mono_offset_ns,
            beat_hub_ns: clock::hub_now_ns(&mut c)?,
            doing: "idle".into(),
            epoch: Some(self.epoch.clone()),
            key: self.hub.own_key().map(|k| k.to_string()),
            seal_key: None,
            sig: None,
            released: false,
        };
        let text = self.hub.beat_text(&info);
        let key = agent_key(&self.name);
        let joined: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(&text)
            .arg("NX")
            .arg("PX")
            .arg(LOST_AFTER.as_millis() as u64)
            .query(&mut c)?;
        if joined.is_none() {
            let held: Option<String> = redis::cmd("GET").arg(&key).query(&mut c)?;
            let ours = held
                .and_then(|t| serde_json::from_str::<AgentInfo>(&t).ok())
                .is_some_and(|a| !first && a.pid == info.pid && a.host == info.host);
            if !ours {
                return Err(JoinError::Fatal(Error::flag("--name", format!(
                    "--name '{}': an agent of that name is already on the hub '{}' (allowed: a name no live agent has; give this one another --name)",
                    self.name,
                    self.hub.url()
                ))));
            }
        }
        let _: () = redis::pipe()
            .cmd("SADD")
            .arg(agents_key())
            .arg(&self.name)
            .ignore()
            .cmd("DEL")
            .arg(doing_key(&self.name))
            .ignore()
            // Work left for a dead agent of the same name is stale: its study has declared it
            // lost.
            .cmd("DEL")
            .arg(work_key(&self.name))
            .ignore()
            .query(&mut c)?;
        Ok((c, info))
    }

    /// The first line: who joined where, and what others may ask of it.
    fn announce(&self, info: &AgentInfo) {
        let allowed = &self.o.allowed;
        self.terminal.line(format_args!(
            "concur {}: agent '{}' joined the hub {} from {}: {} cores, clock {} against the hub's; {}; load goes to public addresses{}",
            crate::base::version::VERSION,
            self.name,
            self.hub.url(),
            info.addr.as_deref().unwrap_or("an unknown address"),
            info.cores,
            clock::describe(&info.clock()),
            if allowed.commands {
                "runs commands of others (--allow-commands)"
            } else {
                "runs no commands of others"
            },
            if allowed.targets.is_empty() {
                String::new()
            } else {
                format!(" and to {}", allowed.targets)
            }
        ));
        if let super::Trust::Keys(_) = self.hub.trust() {
            self.terminal.line(format_args!(
                "agent '{}' signs with its key {}; it runs work only from listed study keys, and a stop only from them",
                self.name,
                self.hub.own_key().map(|k| k.to_string()).unwrap_or_default()
            ));
        } else if self.hub.keyed() {
            self.terminal.line(format_args!(
                "agent '{}': work is signed with the hub key ({}); unsigned or badly signed work is refused; every holder of that key is every party (any of them can give work, stop this agent or answer in its name): give each party its own key with --signing-key (docs/security.md)",
                self.name,
                super::sign::HUB_KEY_ENV
            ));
        } else {
            // Said whatever --quiet asks (a service runs quiet): it is what its operator must know.
            crate::os::terminal::warn_always(format_args!(
                "agent '{}': no hub key ({}): anyone who can write to the hub {} can give this agent work within those limits (docs/security.md)",
                self.name,
                super::sign::HUB_KEY_ENV,
                self.hub.url()
            ));
        }
    }

    /// Works until told to leave, a signal, or the hub is lost.
    fn session(&mut self, c: &mut Connection, info: AgentInfo) -> Ended {
        let shared = Arc::new(Mutex::new(Shared {
            info,
            run: None,
            study_seen: false,
            hub_back: None,
        }));
        let cancel = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let beat = {
            let (shared, cancel, stop) = (shared.clone(), cancel.clone(), stop.clone());
            let hub = self.hub.clone();
            let name = self.name.clone();
            std::thread::spawn(move || heartbeat(&hub, &name, &shared, &cancel, &stop))
        };
        let ended = self.work_loop(c, &shared, &cancel);
        stop.store(true, Ordering::SeqCst);
        let _ = beat.join();
        ended
    }

    /// Takes work until told to leave, interrupted, or the hub is lost.
    fn work_loop(
        &mut self,
        c: &mut Connection,
        shared: &Mutex<Shared>,
        cancel: &AtomicBool,
    ) -> Ended {
        let name = self.name.clone();
        let hub = self.hub.clone();
        let beat = || {
            let s = shared.lock().unwrap_or_else(|p| p.into_inner());
            hub.beat_text(&s.info)
        };
        // Delivered again after a rejoin: the study takes an answer it already has as the
        // same, and one the hub lost in a restart as the first.
        if let Some(last) = self.last.as_ref().filter(|l| Instant::now() < l.until) {
            let again = PartDone {
                resent: true,
                ..last.done.clone()
            };
            if let Err(e) = answer(&self.hub, c, &last.text, &name, &again, &beat()) {
                return Ended::Lost(e);
            }
        }
        while !crate::os::interrupt::interrupted() {
            let taken: redis::RedisResult<Option<String>> = redis::cmd("BLMOVE")
                .arg(work_key(&name))
                .arg(doing_key(&name))
                .arg("LEFT")
                .arg("RIGHT")
                .arg(1.0)
                .query(c);
            let item = match taken {
                Ok(item) => item,
                // Ctrl-C or SIGTERM cut the wait short: leave as asked.
                Err(_) if crate::os::interrupt::interrupted() => break,
                Err(e) => return Ended::Lost(e),
            };
            let Some(text) = item else {
                self.served.expire(c);
                continue;
            };
            let work = admit::check_size(&text)
                .and_then(|_| {
                    self.hub
                        .unseal_work(c, &name, &self.epoch, &text, &mut self.seen)
                })
                .and_then(|body| admit::read_work(&body))
                .and_then(|work| self.hub.open_share(&name, &self.epoch, &text, work));
            let done = match work {
                Ok(Work::Stop) => {
                    forget(c, &name, &text);
                    return Ended::Told;
                }
                Ok(Work::Serve { study, tls, reply }) => {
                    self.serve(c, shared, &study, tls, &reply);
                    None
                }
                Ok(Work::Unserve { study }) => {
                    self.served.stop(&study);
                    shared.lock().unwrap_or_else(|p| p.into_inner()).info.doing = "idle".into();
                    None
                }
                Ok(Work::Usage { reply }) => {
                    match admit::check_reply_key(&reply) {
                        Ok(()) => super::server::answer(
                            &self.hub,
                            c,
                            &reply,
                            &super::server::process_cpu_s(),
                        ),
                        Err(why) => self.refuse_item(&why),
                    }
                    None
                }
                Err(why) => {
                    self.refuse_item(&why);
                    self.say_refused(c, &text, &why);
                    None
                }
                // (`open_share` opens every sealed share or refuses it.)
                Ok(Work::Sealed { .. }) => {
                    let why = "a sealed share left sealed";
                    self.refuse_item(why);
                    self.say_refused(c, &text, why);
                    None
                }
                Ok(Work::Part(w)) => {
                    let done = self.part(c, shared, cancel, &w);
                    // The study waits at most the timeout and a few seconds past the start.
                    let wait = Duration::from_secs_f64(w.timeout_s.clamp(0.0, 86_400.0));
                    Some((done, wait + RESEND_MARGIN))
                }
            };
            if let Some((done, keep)) = done {
                let delivered = answer(&self.hub, c, &text, &name, &done, &beat());
                self.last = Some(LastAnswer {
                    text,
                    done,
                    until: Instant::now() + keep,
                });
                if let Err(e) = delivered {
                    return Ended::Lost(e);
                }
            } else {
                forget(c, &name, &text);
            }
        }
        Ended::Signalled
    }

    /// One line for a work item the agent drops.
    fn refuse_item(&self, why: &str) {
        self.terminal
            .warning(format_args!("agent '{}': work refused: {why}", self.name));
    }

    /// Leaves on the hub, under this agent's name, that it refused the item `text` and why
    /// ([`Refusal`]): the study waiting for that share hears it at once, not at its deadline.
    /// Only an item that names a run (a signed one its scope, a bare share its `run`) has a
    /// study to tell.
    fn say_refused(&self, c: &mut Connection, text: &str, why: &str) {
        #[derive(serde::Deserialize)]
        struct Bare {
            run: String,
        }
        if admit::check_size(text).is_err() {
            return;
        }
        let scope = super::sign::scope_of(text)
            .or_else(|| serde_json::from_str::<Bare>(text).ok().map(|b| b.run));
        let Some(scope) = scope else {
            return;
        };
        let notice = Refusal::new(&scope, why);
        let Ok(json) = serde_json::to_string(&notice) else {
            return;
        };
        let _: redis::RedisResult<()> = redis::cmd("SET")
            .arg(refused_key(&self.name))
            .arg(json)
            .arg("PX")
            .arg(REFUSAL_TTL.as_millis() as u64)
            .query(c);
    }

    /// Starts (or names again) the delay server of a study, within [`admit::MAX_SERVED`].
    fn serve(
        &mut self,
        c: &mut Connection,
        shared: &Mutex<Shared>,
        study: &str,
        tls: bool,
        reply: &str,
    ) {
        if let Err(why) = admit::check_reply_key(reply).and_then(|_| admit::check_study_id(study)) {
            self.refuse_item(&why);
            return;
        }
        let ready = self.served.start(&self.hub, study, tls, admit::MAX_SERVED);
        match &ready.base_url {
            Ok(url) => {
                self.terminal
                    .line(format_args!("study {study}: serving at {url}"));
                shared.lock().unwrap_or_else(|p| p.into_inner()).info.doing =
                    format!("serving study {study} at {url}");
            }
            Err(why) => self.refuse_item(why),
        }
        super::server::answer(&self.hub, c, reply, &ready);
    }

    /// Checks a share and runs it.
    fn part(
        &self,
        c: &mut Connection,
        shared: &Mutex<Shared>,
        cancel: &AtomicBool,
        w: &PartWork,
    ) -> PartDone {
        {
            let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
            s.run = Some(w.run.clone());
            s.study_seen = false;
            s.hub_back = None;
            s.info.doing = format!(
                "run {} share {} of {}",
                w.run.escape_debug(),
                w.part.saturating_add(1),
                w.of
            );
        }
        cancel.store(false, Ordering::SeqCst);
        let done = run_part(c, &self.name, self.o, &self.exe, w, cancel);
        match &done.refused {
            Some(why) => self.refuse_item(&format!(
                "run {}: share {} of {}: {why}",
                w.run.escape_debug(),
                w.part.saturating_add(1),
                w.of
            )),
            None => self.terminal.line(format_args!(
                "run {}: share {} of {}, {} ×{}",
                w.run,
                w.part + 1,
                w.of,
                w.request.model,
                w.request.tasks
            )),
        }
        let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
        s.run = None;
        s.info.doing = "idle".into();
        s.info.set_clock(done.clock);
        done
    }

    /// Takes this agent off the hub, if the hub is there.
    fn leave(&self) {
        let Ok(mut c) = self.hub.try_connect() else {
            return;
        };
        let _: redis::RedisResult<()> = redis::pipe()
            .cmd("DEL")
            .arg(agent_key(&self.name))
            .ignore()
            .cmd("SREM")
            .arg(agents_key())
            .arg(&self.name)
            .ignore()
            .query(&mut c);
    }
}

/// Pushes `done` on its run's list and takes the work item `text` off the doing list. The
/// heartbeat `beat` (the agent idle again) goes first, in the same round trip: a study that
/// reads the answer and gives the next share at once finds the agent idle, not busy until
/// its next beat.
fn answer(
    hub: &Hub,
    c: &mut Connection,
    text: &str,
    name: &str,
    done: &PartDone,
    beat: &str,
) -> redis::RedisResult<()> {
    let answer = serde_json::to_string(done).map_err(|e| {
        redis::RedisError::from(std::io::Error::other(format!("encoding an answer: {e}")))
    })?;
    let answer = hub.seal(c, "study", &done.run, "", answer)?;
    redis::pipe()
        .cmd("SET")
        .arg(agent_key(name))
        .arg(beat)
        .arg("PX")
        .arg(LOST_AFTER.as_millis() as u64)
        .ignore()
        .cmd("RPUSH")
        .arg(done_key(&done.run))
        .arg(answer)
        .ignore()
        .cmd("EXPIRE")
        .arg(done_key(&done.run))
        .arg(DONE_TTL_S)
        .ignore()
        .cmd("LREM")
        .arg(doing_key(name))
        .arg(1)
        .arg(text)
        .ignore()
        .query(c)
}

/// Renews the heartbeat every [`BEAT`] until `stop`, and raises `cancel` when the run being
/// worked on is cancelled. Its connection is made again whenever a command fails (the work
/// loop notices a lost hub and rejoins; until then the beat keeps trying).
fn heartbeat(
    hub: &Hub,
    name: &str,
    shared: &Mutex<Shared>,
    cancel: &AtomicBool,
    stop: &AtomicBool,
) {
    let mut conn: Option<Connection> = None;
    let mut lost = false;
    while !stop.load(Ordering::SeqCst) {
        if conn.is_none() {
            conn = hub.try_connect().ok();
            lost |= conn.is_none();
        }
        if let Some(c) = conn.as_mut() {
            if lost {
                // Back after an outage: the hub may have restarted empty, the study's
                // heartbeat with it; it has STUDY_GRACE to beat again.
                let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
                s.study_seen = false;
                s.hub_back = s.run.is_some().then(std::time::Instant::now);
                lost = false;
            }
            if beat_once(hub, c, name, shared, cancel).is_err() {
                conn = None;
                lost = true;
            }
        }
        std::thread::sleep(BEAT);
    }
}

/// One heartbeat: the agent's key renewed, the cancel key of its run looked at.
fn beat_once(
    hub: &Hub,
    c: &mut Connection,
    name: &str,
    shared: &Mutex<Shared>,
    cancel: &AtomicBool,
) -> redis::RedisResult<()> {
    let now = clock::hub_now_ns(c)?;
    let (text, run) = {
        let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
        s.info.beat_hub_ns = now;
        (hub.beat_text(&s.info), s.run.clone())
    };
    redis::cmd("SET")
        .arg(agent_key(name))
        .arg(text)
        .arg("PX")
        .arg(LOST_AFTER.as_millis() as u64)
        .query::<()>(c)?;
    if let Some(run) = run {
        let (cancelled, study_alive): (bool, bool) = redis::pipe()
            .cmd("EXISTS")
            .arg(cancel_key(&run))
            .cmd("EXISTS")
            .arg(super::alive_key(&run))
            .query(c)?;
        let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
        let unheard = s.study_seen || s.hub_back.is_some_and(|t| t.elapsed() > STUDY_GRACE);
        let study_gone = unheard && !study_alive && s.run.as_deref() == Some(run.as_str());
        s.study_seen |= study_alive;
        if cancelled || study_gone {
            cancel.store(true, Ordering::SeqCst);
        }
    }
    Ok(())
}

/// Takes `text` off the agent's list of what it is doing: done with it.
fn forget(c: &mut Connection, name: &str, text: &str) {
    let _: redis::RedisResult<i64> = redis::cmd("LREM")
        .arg(doing_key(name))
        .arg(1)
        .arg(text)
        .query(c);
}

/// Runs one share in a fresh child, started at the common instant on this host's clock,
/// once it has passed the checks of [`admit::check_part`].
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
        resent: false,
    };
    if w.version != crate::base::version::VERSION {
        return refused(format!(
            "agent '{name}' runs concur {}, the study runs concur {}: every host of a study runs the same version",
            crate::base::version::VERSION,
            w.version.escape_debug()
        ));
    }
    if let Err(why) = admit::check_part(w, &o.allowed, clock.to_hub(mono_ns())) {
        return refused(format!("agent '{name}' refuses {why}"));
    }
    let Some(mut part) = w.request.part else {
        return refused("the work names no share of the run".into());
    };
    part.start_mono_ns = clock.to_local_mono(w.start_hub_ns);
    let mut request = w.request.clone();
    request.part = Some(part);
    // A jobs model's queue is this host's own: its --jobs-backend, else a fresh file.
    if let (Some(own), true) = (&o.jobs_backend, request.model.starts_with("jobs")) {
        request.recipe.jobs_backend = Some(own.clone());
    }
    let redis_queue = matches!(
        request.recipe.jobs_backend,
        Some(crate::jobs::BackendUrl::Redis(_))
    );
    if request.model.starts_with("jobs-redis") && !redis_queue {
        return refused(format!(
            "agent '{name}' has no Redis queue for '{}': start it with concur agent --jobs-backend redis://HOST:PORT/DB (a study's own --jobs-backend stays with the study)",
            request.model
        ));
    }
    let until_start = Duration::from_nanos(part.start_mono_ns.saturating_sub(mono_ns()));
    let limit = until_start + Duration::from_secs_f64(w.timeout_s);
    let stop = || crate::os::interrupt::interrupted() || cancel.load(Ordering::SeqCst);
    let ended = match supervise::run(
        Launch::Own {
            exe,
            request: Box::new(request),
        },
        limit,
        &stop,
        &|_| {},
    ) {
        Ok(ended) => ended,
        Err(e) => return refused(format!("agent '{name}' could not start the run: {e}")),
    };
    PartDone {
        run: w.run.clone(),
        part: w.part,
        agent: name.to_string(),
        refused: None,
        ended: Some(ended.into()),
        clock,
        resent: false,
    }
}

/// Tells agent `name` (or every agent, for `None`) to leave after the work it holds: a stop
/// for the epoch each published (with keys per party, signed by this party's key, which the
/// agent obeys only if it lists it as a study's).
pub fn stop(hub: &Hub, c: &mut Connection, name: Option<&str>) -> Result<Vec<String>> {
    let agents = hub.agents(c)?;
    let chosen: Vec<&AgentInfo> = agents
        .iter()
        .filter(|a| name.is_none_or(|n| a.name == n))
        .collect();
    if let (Some(n), true) = (name, chosen.is_empty()) {
        return Err(Error::flag(
            "--stop",
            format!(
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
            ),
        ));
    }
    let text = serde_json::to_string(&Work::Stop).map_err(|e| Error::Internal(e.to_string()))?;
    for a in &chosen {
        let text = hub
            .seal(
                c,
                &a.name,
                "stop",
                a.epoch.as_deref().unwrap_or(""),
                text.clone(),
            )
            .map_err(|e| hub.failed("telling an agent to stop", e))?;
        let _: i64 = redis::cmd("RPUSH")
            .arg(work_key(&a.name))
            .arg(&text)
            .query(c)
            .map_err(|e| hub.failed("telling an agent to stop", e))?;
    }
    Ok(chosen.iter().map(|a| a.name.clone()).collect())
}
