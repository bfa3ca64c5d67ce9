//! The bind step, between the plan and the runs (ripgrep's split of checking what the user
//! typed from acting on it): everything a validated [`Plan`] needs from the world — request
//! bodies, certificates, the Redis probe, the classic programs written out and calibrated, the
//! in-process delay server — acquired once, each failure one line naming the value. Nothing
//! here re-validates what the plan checked.

use crate::error::{Error, Result};
use crate::options::StudyOptions;
use crate::server::{InProcessServer, ServeTls, ServerOptions};
use crate::study::plan::Plan;
use crate::study::StudyServer;

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
}

impl Bound {
    /// What the study runner needs of the in-process server, if there is one: where it
    /// listens, the certificate its clients trust, and its counters.
    pub fn run_server(&self) -> Option<StudyServer<'_>> {
        self.server.as_ref().map(|s| StudyServer {
            base_url: s.base_url(),
            cert_pem: s.cert.as_ref().map(|c| c.cert_pem.clone()),
            stats: &s.stats,
        })
    }
}

/// Acquires what `plan` needs; `o` is what the plan was built from (the classic programs are
/// sized by the same flags).
pub fn bind(mut plan: Plan, o: &StudyOptions) -> Result<Bound> {
    plan.options.body = plan.needs.body.as_deref().map(read_body).transpose()?;
    plan.options.ca_pem = plan.needs.cacert.as_deref().map(read_cacert).transpose()?;
    // jobs-redis:W needs a Redis, which must answer now rather than fail every run later.
    if plan.cells.iter().any(|c| c.needs_redis) {
        if let Some(url) = plan.jobs_backend.as_ref().filter(|u| u.is_redis()) {
            crate::jobs::open(url).map_err(|e| Error::usage(format!("--jobs-backend: {e}")))?;
        }
    }
    let classic = if plan.needs.classic {
        let redis = plan.jobs_backend.as_ref().is_some_and(|u| u.is_redis());
        let c = crate::classic::prepare(&plan.name, o, redis)?;
        plan = plan.with_peers(&c.peers)?;
        plan.notes.extend(c.notes);
        Some(c.dir)
    } else {
        None
    };
    // http:/PATH cells without --url get concur's own delay server, in this process, on a
    // free loopback port; its counters give each run the server's peak in-flight.
    let server = if plan.needs_server() {
        Some(InProcessServer::start(
            ServerOptions {
                tls: plan.tls.then_some(ServeTls::SelfSigned),
                ..ServerOptions::ephemeral()
            },
            crate::model::cores(),
        )?)
    } else {
        None
    };
    Ok(Bound {
        plan,
        server,
        _classic_dir: classic,
    })
}

/// `--body`: the file's bytes, or standard input's for `@-`.
fn read_body(source: &str) -> Result<Vec<u8>> {
    if source == "@-" {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut b).map_err(|e| {
            Error::usage(format!("--body '@-': standard input cannot be read: {e}"))
        })?;
        return Ok(b);
    }
    std::fs::read(source).map_err(|e| {
        Error::usage(format!(
            "--body '{source}' cannot be read: {e} (allowed: a readable file, or @- for standard input)"
        ))
    })
}

/// `--cacert`: the PEM text, checked to hold certificates.
fn read_cacert(path: &std::path::Path) -> Result<String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::usage(format!(
            "--cacert '{}' cannot be read: {e} (allowed: a PEM file of CA certificates)",
            path.display()
        ))
    })?;
    crate::tls::certs_from_pem(&text)
        .map_err(|why| Error::usage(format!("--cacert '{}' {why}", path.display())))?;
    Ok(text)
}
