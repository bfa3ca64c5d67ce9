//! The bind step, between the plan and the runs (ripgrep's split of checking what the user
//! typed from acting on it): everything a validated [`Plan`] needs from the world — request
//! bodies, certificates, the Redis probe, the classic programs written out and calibrated, the
//! in-process delay server — acquired once, each failure one line naming the value. Nothing
//! here re-validates what the plan checked.

use crate::base::error::{Error, Result};
use crate::plan::Plan;
use crate::runner::remote_stats::RemoteStats;
use crate::runner::StudyServer;
use crate::server::{InProcessServer, ServeTls, ServerOptions};

/// A plan with what it needs from the world: its files read, its services reached.
pub struct Bound {
    /// The plan, its workload options filled in (body, certificates) and the classic
    /// programs' cells added.
    pub plan: Plan,
    /// concur's own delay server, when a cell fetches `http:/PATH` and no `--url` was given;
    /// it stops when dropped.
    pub server: Option<InProcessServer>,
    /// The classic programs' folder: keep it as long as the study runs (dropped, it is
    /// deleted).
    _classic_dir: Option<tempfile::TempDir>,
    /// A study over several hosts: the hub, answering, and the agents that will run the
    /// shares (every one alive, of this version; by name).
    pub hub: Option<(crate::hub::Hub, Vec<crate::hub::AgentInfo>)>,
    /// The study's delay server on an agent (`--server-host`), kept while this lives.
    pub remote_server: Option<crate::hub::server::RemoteServer>,
    /// The counters of the concur server `--url` points at, when it is one that lets us
    /// reset them (each run records its peak in-flight, as with the in-process server).
    pub url_stats: Option<RemoteStats>,
}

use crate::hub::server::ServerCpu;

impl Bound {
    /// The counters of the study's server, when it runs in this process or is the concur
    /// server `--url` points at (each run records its peak in-flight).
    pub fn run_server(&self) -> Option<StudyServer<'_>> {
        match (&self.server, &self.url_stats) {
            (Some(s), _) => Some(StudyServer::InProcess(&s.stats)),
            (None, Some(r)) => Some(StudyServer::Remote(r)),
            (None, None) => None,
        }
    }

    /// Where the study's server runs (`this host` or the agent's name) and how to read the
    /// CPU its process has used: this process's own, or the serving agent's.
    pub fn server_cpu(&self) -> Option<(String, ServerCpu<'_>)> {
        if let Some(r) = &self.remote_server {
            return Some((r.agent.clone(), Box::new(|| r.cpu_s())));
        }
        self.server.as_ref().map(|_| {
            let cpu: ServerCpu<'_> = Box::new(|| Some(crate::hub::server::process_cpu_s()));
            ("this host".to_string(), cpu)
        })
    }
}

/// What the cells' workloads need from the world (a file that opens, a program on `PATH`),
/// checked once before any run: the plan checked only their syntax.
fn acquire_workloads(plan: &Plan) -> Result<()> {
    for w in &plan.workloads {
        crate::workload::acquire(&*w.0)?;
    }
    Ok(())
}

/// Acquires what `plan` needs: from here on nothing reads the options it was built from.
pub fn bind(mut plan: Plan) -> Result<Bound> {
    plan.options.body = plan.needs.body.as_deref().map(read_body).transpose()?;
    plan.options.ca_pem = plan.needs.cacert.as_deref().map(read_cacert).transpose()?;
    // jobs-redis:W needs a Redis, which must answer now rather than fail every run later.
    if plan.cells.iter().any(|c| c.needs_redis) {
        if let Some(url) = plan.jobs_backend.as_ref().filter(|u| u.is_redis()) {
            crate::jobs::open(url)
                .map_err(|e| Error::flag("--jobs-backend", format!("--jobs-backend: {e}")))?;
        }
    }
    let classic = if let Some(sizes) = plan.needs.classic.clone() {
        let redis = plan.jobs_backend.as_ref().is_some_and(|u| u.is_redis());
        let c = crate::classic::prepare(&plan.name, &sizes, redis)?;
        plan = plan.with_peers(&c.peers)?;
        plan.notes.extend(c.notes);
        Some(c.dir)
    } else {
        None
    };
    acquire_workloads(&plan)?;
    let mut remote_server = None;
    let hub = match &plan.hub {
        Some(h) => {
            let (hub, mut agents, counts, notes) = reach_hub(h, &plan)?;
            plan.notes.extend(notes);
            // The server on an agent of its own: the one named, else the first agent no
            // cell needs; else it stays on this host.
            if plan.needs_server() {
                let most = counts.iter().copied().max().unwrap_or(agents.len());
                let place = match &h.server_host {
                    Some(name) => Some(name.clone()),
                    None => agents.get(most).map(|a| a.name.clone()),
                };
                if let Some(name) = place {
                    agents.retain(|a| a.name != name);
                    remote_server = Some(crate::hub::server::RemoteServer::start(
                        &hub, &name, plan.tls,
                    )?);
                }
            }
            plan = plan.over_hosts(&counts);
            Some((hub, agents))
        }
        None => None,
    };
    // http:/PATH cells without --url get concur's own delay server, in this process, on a
    // free loopback port; its counters give each run the server's peak in-flight. Over a
    // hub, it listens on the address other hosts reach this one by (the one the route to the
    // hub leaves from), so the agents' clients reach it and it has this machine's cores to
    // itself.
    let server = if plan.needs_server() && remote_server.is_none() {
        let mut o = ServerOptions::ephemeral();
        if let Some((hub, _)) = &hub {
            let ip = hub.local_addr().ok_or_else(|| {
                Error::flag("--hub", format!(
                    "--hub '{}': this machine's address towards the hub cannot be found, so the agents could not reach the study's server (give --url of a server they reach)",
                    hub.url()
                ))
            })?;
            o.addr = std::net::SocketAddr::new(ip, 0);
        }
        Some(InProcessServer::start(
            ServerOptions {
                tls: plan.tls.then_some(ServeTls::SelfSigned),
                // Cells that ask for HTTP/3 of the study's own server (the plan made it TLS).
                http3: plan.http3,
                max_streams: STUDY_MAX_STREAMS,
                ..o
            },
            crate::model::cores(),
        )?)
    } else {
        None
    };
    // The study's own server is where http:/PATH goes, and its self-signed certificate is
    // trusted besides any --cacert: put once into the options every run's request is made of.
    let study_server = match (&remote_server, &server) {
        (Some(r), _) => Some((r.base_url.clone(), r.cert_pem.clone())),
        (None, Some(s)) => Some((s.base_url(), s.cert.as_ref().map(|c| c.cert_pem.clone()))),
        (None, None) => None,
    };
    // http:/PATH cells with --url: when that URL is a concur server (its GET /stats answers
    // concur's counters, the one request sent to find out), its counters are read around each
    // run as the in-process server's are; a server of another kind gets nothing more.
    let url_stats = match (&study_server, &plan.options.base_url) {
        (None, Some(url)) if plan.cells.iter().any(|c| fetches_path(&c.key.workload)) => {
            match RemoteStats::probe(url, &plan.options) {
                Ok(r) => Some(r),
                Err(note) => {
                    plan.notes.extend(note);
                    None
                }
            }
        }
        _ => None,
    };
    if let Some((url, cert)) = study_server {
        plan.options.base_url = Some(url);
        if let Some(cert) = cert {
            plan.options.ca_pem = Some(match plan.options.ca_pem.take() {
                Some(user) => format!("{user}\n{cert}"),
                None => cert,
            });
        }
    }
    Ok(Bound {
        plan,
        server,
        _classic_dir: classic,
        hub,
        remote_server,
        url_stats,
    })
}

/// Whether a workload spec fetches a `/PATH` of the run's server (`http:/PATH`), rather than
/// a URL of its own.
fn fetches_path(workload: &str) -> bool {
    workload
        .strip_prefix("http:")
        .is_some_and(|u| u.starts_with('/'))
}

/// Reaches the hub of `--hub` and picks the agents: every one alive, by name; one of another
/// version, too few for `--hosts`, or one without `--allow-commands` for a `cmd:` cell is one
/// line, before any run. With keys per party, an agent whose heartbeat is not signed by its
/// key (the one `--agent-keys` lists, else the one it shows first) is left out, with a note.
/// Returns the host counts to run each cell over, and the notes (keys trusted on first
/// sight, agents left out).
#[allow(clippy::type_complexity)]
fn reach_hub(
    h: &crate::plan::HubPlan,
    plan: &Plan,
) -> Result<(
    crate::hub::Hub,
    Vec<crate::hub::AgentInfo>,
    Vec<usize>,
    Vec<String>,
)> {
    let files = crate::hub::KeyFiles {
        signing_key: h.signing_key.clone(),
        listed: h.agent_keys.clone(),
    };
    let trust = crate::hub::Trust::load(crate::hub::Role::Study, &files)?;
    let hub = crate::hub::Hub::open_with(&h.url.clone().into(), trust)?;
    let mut c = hub.connect()?;
    let mut notes = Vec::new();
    let mut left_out = Vec::new();
    let all: Vec<crate::hub::AgentInfo> = hub
        .agents(&mut c)?
        .into_iter()
        .filter(|a| match hub.vouch(a) {
            Ok(note) => {
                notes.extend(note);
                true
            }
            Err(why) => {
                notes.push(format!("agent '{}' is left out: {why}", a.name));
                left_out.push(format!("'{}': {why}", a.name));
                false
            }
        })
        .collect();
    // Said in the refusals below: the notes are shown only once the study starts.
    let left = if left_out.is_empty() {
        String::new()
    } else {
        format!("; left out: {}", left_out.join("; "))
    };
    if let Some(name) = &h.server_host {
        if !all.iter().any(|a| &a.name == name) {
            return Err(Error::flag("--server-host", format!(
                "--server-host '{name}': no agent of that name is alive on the hub '{}' (allowed: {}){left}",
                h.url,
                all.iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    // The agent that serves generates no load.
    let agents: Vec<crate::hub::AgentInfo> = all
        .iter()
        .filter(|a| Some(&a.name) != h.server_host.as_ref())
        .cloned()
        .collect();
    if let Some(why) = all.iter().find_map(|a| a.version_refusal()) {
        return Err(Error::flag("--hub", format!("--hub '{}': {why}", h.url)));
    }
    // Shares go to idle agents only: one busy with another study's share (or serving one)
    // would take ours after it, late, or never.
    let asked = h.hosts.iter().copied().max().unwrap_or(agents.len());
    let idle = agents
        .iter()
        .filter(|a| crate::hub::executor::is_idle(a))
        .count();
    if !agents.is_empty() && asked <= agents.len() && asked > idle {
        return Err(Error::flag("--hosts", format!(
            "--hosts {asked}: the hub '{}' has {idle} idle agent{} of {}; busy: {} (wait for them, or ask for fewer with --hosts)",
            h.url,
            if idle == 1 { "" } else { "s" },
            agents.len(),
            crate::hub::executor::busy_names(&agents)
        )));
    }
    let agents: Vec<crate::hub::AgentInfo> = agents
        .into_iter()
        .filter(crate::hub::executor::is_idle)
        .collect();
    let names = || {
        agents
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let most = h.hosts.iter().copied().max().unwrap_or(agents.len());
    if agents.is_empty() || most > agents.len() {
        return Err(Error::flag("--hosts", format!(
            "--hosts {most}: the hub '{}' has {} agent{} alive{} (start one on each host with: concur agent --hub URL){left}",
            h.url,
            agents.len(),
            if agents.len() == 1 { "" } else { "s" },
            if agents.is_empty() {
                String::new()
            } else {
                format!(" ({})", names())
            }
        )));
    }
    let commands = plan
        .cells
        .iter()
        .find(|c| c.key.workload.starts_with("cmd:"));
    if let Some(cell) = commands {
        if let Some(a) = agents.iter().take(most).find(|a| !a.allow_commands) {
            return Err(Error::flag("--hub", format!(
                "--hub: agent '{}' runs no commands of others ('{}'): start it with concur agent --allow-commands",
                a.name, cell.key.workload
            )));
        }
    }
    let counts = if h.hosts.is_empty() {
        vec![agents.len()]
    } else {
        h.hosts.clone()
    };
    Ok((hub, agents, counts, notes))
}

/// HTTP/2 streams on one connection for the study's own server: the crawl's h2 rows put every
/// request in flight (`async:1000`) as a stream on one connection, which `concur serve`'s
/// default of 128 would queue. The server's in-flight cap still bounds the streams of all
/// connections together.
const STUDY_MAX_STREAMS: u32 = 1000;

/// `--body`: the file's bytes, or standard input's for `@-`; a regular file (or standard
/// input) of at most [`crate::os::files::MAX_BODY_FILE`].
fn read_body(source: &str) -> Result<Vec<u8>> {
    use crate::os::files::MAX_BODY_FILE;
    let allowed = "a regular file of at most 64 MiB, or @- for standard input";
    if source == "@-" {
        let mut b = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(std::io::stdin(), MAX_BODY_FILE + 1),
            &mut b,
        )
        .map_err(|e| {
            Error::flag(
                "--body",
                format!("--body '@-': standard input cannot be read: {e}"),
            )
        })?;
        if b.len() as u64 > MAX_BODY_FILE {
            return Err(Error::flag(
                "--body",
                format!("--body '@-': standard input holds more than 64 MiB (allowed: {allowed})"),
            ));
        }
        return Ok(b);
    }
    crate::os::files::read_regular("--body", source.as_ref(), MAX_BODY_FILE, allowed)
}

/// `--cacert`: the PEM text (a regular file of at most [`crate::os::files::MAX_PEM_FILE`]),
/// checked to hold certificates.
fn read_cacert(path: &std::path::Path) -> Result<String> {
    let bytes = crate::os::files::read_regular(
        "--cacert",
        path,
        crate::os::files::MAX_PEM_FILE,
        "a PEM file of CA certificates, a regular file of at most 1 MiB",
    )?;
    let text = String::from_utf8(bytes).map_err(|_| {
        Error::flag(
            "--cacert",
            format!(
                "--cacert '{}' is not text (allowed: a PEM file of CA certificates)",
                path.display()
            ),
        )
    })?;
    crate::os::tls::certs_from_pem(&text)
        .map_err(|why| Error::flag("--cacert", format!("--cacert '{}' {why}", path.display())))?;
    Ok(text)
}
