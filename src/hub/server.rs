//! The study's delay server on an agent of its own (`--server-host NAME`, or the first agent
//! not generating load), so that clients and server do not share cores. The agent starts it
//! on its address towards the hub and keeps it while the study's key lives (the study renews
//! it every second: a study that dies takes its server with it within [`KEEP`]); its process's
//! CPU, asked before and after each run, is the server's cost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::Connection;

use super::work::{ServeReady, Work};
use super::{work_key, Hub, PREFIX};
use crate::base::error::{Error, Result};
use crate::server::{InProcessServer, ServeTls, ServerOptions};

/// Reads the CPU the study's delay server has used so far, seconds.
pub type ServerCpu<'a> = Box<dyn Fn() -> Option<f64> + 'a>;

/// How long a study's server outlives the study's last renewal.
pub const KEEP: Duration = Duration::from_secs(3);

/// The key whose life is the server's.
pub(super) fn serve_key(study: &str) -> String {
    format!("{PREFIX}serve:{study}")
}

/// The CPU this process has used so far, seconds (user + system).
pub fn process_cpu_s() -> f64 {
    // SAFETY: rusage is plain old data; getrusage fills it in.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let s = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    s(ru.ru_utime) + s(ru.ru_stime)
}

/// An agent's side: the servers it runs for studies.
#[derive(Default)]
pub struct Served {
    servers: HashMap<String, InProcessServer>,
}

impl Served {
    /// Starts a server for `study` on this agent's address towards the hub: one per study
    /// (asked again, it names the one it has), and at most `most` studies at once.
    pub fn start(&mut self, hub: &Hub, study: &str, tls: bool, most: usize) -> ServeReady {
        if let Some(s) = self.servers.get(study) {
            return ServeReady {
                base_url: Ok(s.base_url()),
                cert_pem: s.cert.as_ref().map(|c| c.cert_pem.clone()),
            };
        }
        if self.servers.len() >= most {
            return ServeReady {
                base_url: Err(format!(
                    "this agent serves {} studies already (allowed: at most {most} at once)",
                    self.servers.len()
                )),
                cert_pem: None,
            };
        }
        let Some(ip) = hub.local_addr() else {
            return ServeReady {
                base_url: Err("this agent's address towards the hub cannot be found".into()),
                cert_pem: None,
            };
        };
        let opts = ServerOptions {
            addr: std::net::SocketAddr::new(ip, 0),
            tls: tls.then_some(ServeTls::SelfSigned),
            ..ServerOptions::ephemeral()
        };
        match InProcessServer::start(opts, crate::model::cores()) {
            Ok(s) => {
                let ready = ServeReady {
                    base_url: Ok(s.base_url()),
                    cert_pem: s.cert.as_ref().map(|c| c.cert_pem.clone()),
                };
                self.servers.insert(study.to_string(), s);
                ready
            }
            Err(e) => ServeReady {
                base_url: Err(e.to_string()),
                cert_pem: None,
            },
        }
    }

    /// Stops the server of `study`.
    pub fn stop(&mut self, study: &str) {
        self.servers.remove(study);
    }

    /// Stops the servers whose study stopped renewing them.
    pub fn expire(&mut self, c: &mut Connection) {
        self.servers.retain(|study, _| {
            redis::cmd("EXISTS")
                .arg(serve_key(study))
                .query::<bool>(c)
                .unwrap_or(true)
        });
    }
}

/// The study's side: the server an agent runs for it, renewed while this lives.
pub struct RemoteServer {
    /// The agent that serves.
    pub agent: String,
    /// Where it listens.
    pub base_url: String,
    /// Its self-signed certificate, over TLS.
    pub cert_pem: Option<String>,
    study: String,
    /// The serving agent's epoch when the server started (what it is sent must name it).
    epoch: String,
    /// How many questions it was asked: each waits for its answer on a list of its own.
    asked: std::sync::atomic::AtomicU64,
    stop: Arc<AtomicBool>,
    renew: Option<std::thread::JoinHandle<()>>,
    conn: std::sync::Mutex<Connection>,
    hub: Hub,
}

impl RemoteServer {
    /// Asks `agent` to serve for this study; one line when it cannot.
    pub fn start(hub: &Hub, agent: &str, tls: bool) -> Result<RemoteServer> {
        let study = format!("{:x}{:x}", crate::measure::mono_ns(), std::process::id());
        let mut c = hub.connect()?;
        let refuse =
            |why: String| Error::flag("--server-host", format!("--server-host '{agent}': {why}"));
        let info = hub
            .agents(&mut c)?
            .into_iter()
            .find(|a| a.name == agent)
            .ok_or_else(|| refuse("no agent of that name is alive on the hub".into()))?;
        hub.vouch(&info).map_err(refuse)?;
        let epoch = info.epoch.unwrap_or_default();
        let key = serve_key(&study);
        let keep = move |c: &mut Connection| {
            redis::cmd("SET")
                .arg(&key)
                .arg(1)
                .arg("PX")
                .arg(KEEP.as_millis() as u64)
                .query::<()>(c)
        };
        keep(&mut c).map_err(|e| hub.failed("starting the server", e))?;
        let reply = format!("{PREFIX}serve:{study}:ready");
        let work = Work::Serve {
            study: study.clone(),
            tls,
            reply: reply.clone(),
        };
        let ready: ServeReady = ask(hub, &mut c, agent, &epoch, &work, &reply)
            .map_err(|e| hub.failed("starting the server", e))?
            .ok_or_else(|| {
                Error::flag(
                    "--server-host",
                    format!(
                        "--server-host '{agent}': the agent did not start the server within 10 s"
                    ),
                )
            })?;
        let base_url = ready.base_url.map_err(|why| {
            Error::flag(
                "--server-host",
                format!("--server-host '{agent}': the agent could not start the server: {why}"),
            )
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let renew = {
            let stop = stop.clone();
            let mut rc = hub.connect()?;
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let _ = keep(&mut rc);
                    std::thread::sleep(Duration::from_secs(1));
                }
            })
        };
        Ok(RemoteServer {
            agent: agent.to_string(),
            base_url,
            cert_pem: ready.cert_pem,
            study,
            epoch,
            asked: std::sync::atomic::AtomicU64::new(0),
            stop,
            renew: Some(renew),
            conn: std::sync::Mutex::new(c),
            hub: hub.clone(),
        })
    }

    /// The CPU the serving agent's process has used so far, seconds.
    pub fn cpu_s(&self) -> Option<f64> {
        let mut c = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        // A list of its own for each question: an answer to an earlier one, kept or replayed
        // by a writer of the hub, is in another scope and refused.
        let n = self.asked.fetch_add(1, Ordering::SeqCst);
        let reply = format!("{PREFIX}serve:{}:usage:{n}", self.study);
        let work = Work::Usage {
            reply: reply.clone(),
        };
        ask::<f64>(&self.hub, &mut c, &self.agent, &self.epoch, &work, &reply)
            .ok()
            .flatten()
    }
}

impl Drop for RemoteServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.renew.take() {
            let _ = t.join();
        }
        let mut c = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let _: redis::RedisResult<()> = redis::cmd("DEL").arg(serve_key(&self.study)).query(&mut c);
        if let Ok(text) = serde_json::to_string(&Work::Unserve {
            study: self.study.clone(),
        }) {
            if let Ok(text) = self
                .hub
                .seal(&mut c, &self.agent, &self.study, &self.epoch, text)
            {
                let _: redis::RedisResult<i64> = redis::cmd("RPUSH")
                    .arg(work_key(&self.agent))
                    .arg(text)
                    .query(&mut c);
            }
        }
    }
}

/// Puts `work` on `agent`'s list, sealed for its `epoch`, and waits up to 10 s for its
/// answer on `reply` (a list of this question's own), signed by that agent; an answer that
/// does not open or parse is none.
fn ask<T: serde::de::DeserializeOwned>(
    hub: &Hub,
    c: &mut Connection,
    agent: &str,
    epoch: &str,
    work: &Work,
    reply: &str,
) -> redis::RedisResult<Option<T>> {
    let text = serde_json::to_string(work).map_err(|e| std::io::Error::other(e.to_string()))?;
    let text = hub.seal(c, agent, reply, epoch, text)?;
    redis::cmd("RPUSH")
        .arg(work_key(agent))
        .arg(text)
        .query::<i64>(c)?;
    let answer: Option<(String, String)> = redis::cmd("BLPOP").arg(reply).arg(10.0).query(c)?;
    let mut seen = super::sign::Seen::default();
    Ok(answer.and_then(|(_, t)| {
        if t.len() > super::admit::MAX_WORK_BYTES {
            return None;
        }
        let body = hub.unseal_from(c, agent, reply, &t, &mut seen).ok()?;
        serde_json::from_str(&body).ok()
    }))
}

/// An agent's answer on `reply`, sealed with the hub key, kept an hour at most.
pub fn answer<T: serde::Serialize>(hub: &Hub, c: &mut Connection, reply: &str, value: &T) {
    let text = serde_json::to_string(value)
        .ok()
        .and_then(|t| hub.seal(c, "study", reply, "", t).ok());
    if let Some(text) = text {
        let _: redis::RedisResult<()> = redis::pipe()
            .cmd("RPUSH")
            .arg(reply)
            .arg(text)
            .ignore()
            .cmd("EXPIRE")
            .arg(reply)
            .arg(3600)
            .ignore()
            .query(c);
    }
}
