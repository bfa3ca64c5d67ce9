//! What travels through the hub between a study and its agents: a share of a run ([`Work`])
//! and what became of it ([`PartDone`]). JSON, one value per list element.

use serde::{Deserialize, Serialize};

use crate::measure::memory::TreePss;
use crate::measure::rusage::ChildUsage;
use crate::model::selfcall::RunRequest;
use crate::runner::child::ChildReport;
use crate::runner::supervise::{Ended, Kill};

use super::clock::ClockOffset;
use super::seal::SealKey;

/// One element of an agent's work list.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "work", rename_all = "lowercase")]
pub enum Work {
    /// Run one share of a run.
    Part(Box<PartWork>),
    /// Leave the hub.
    Stop,
    /// Start the delay server for a study (`--server-host`), answering on `reply`; it serves
    /// as long as the study's key `concur:hub:serve:STUDY` lives.
    Serve {
        /// The study's id.
        study: String,
        /// Whether it serves HTTPS (`--tls`), with a self-signed certificate for its address.
        tls: bool,
        /// The list to answer on.
        reply: String,
    },
    /// Stop the server of a study.
    Unserve {
        /// The study's id.
        study: String,
    },
    /// Say how much CPU this agent's process has used, on `reply` (the server's cost).
    Usage {
        /// The list to answer on.
        reply: String,
    },
    /// A share sealed to its agent's key, with keys per party ([`super::seal`]): a
    /// [`Work::Part`]'s JSON that opens only with that agent's key, for this share of the run
    /// its envelope names, at the epoch it names.
    Sealed {
        /// Which share, from 0 (bound in the associated data; the share inside must agree).
        part: usize,
        /// The sealed share's text ([`super::seal::seal_to`]).
        blob: String,
    },
}

impl Work {
    /// This work as it travels to agent `agent` at `epoch`, whose heartbeat publishes the
    /// sealing key `to`: a share sealed to it (its request is where credentials are: the URL,
    /// headers, body, certificates), anything else as it is.
    ///
    /// A share that would seal past what its agent reads ([`MAX_WORK_BYTES`],
    /// less [`ENVELOPE_ROOM`] for the signed envelope around it) is refused here, before
    /// anything is sent: sealing is base64, so a share over about 60 MiB (a large request
    /// body) that would travel in clear does not fit sealed.
    pub fn sealed_to(self, to: &SealKey, agent: &str, epoch: &str) -> Result<Work, String> {
        let Work::Part(w) = &self else {
            return Ok(self);
        };
        let json = serde_json::to_string(&self).map_err(|e| e.to_string())?;
        let room = MAX_WORK_BYTES - ENVELOPE_ROOM;
        let sealed = super::seal::sealed_chars(json.len());
        if sealed > room {
            let most = super::seal::most_sealable(room);
            return Err(format!(
                "share {} of run '{}' is {} bytes, {sealed} once sealed to its agent (base64: 4/3 \
                 of the share), over the {room} an agent reads of a sealed share (allowed: a \
                 share of at most {most} bytes; make the request body smaller)",
                w.part,
                w.run,
                json.len()
            ));
        }
        let ad = super::seal::share_ad(agent, epoch, &w.run, w.part);
        let blob = super::seal::seal_to(to, &ad, json.as_bytes())?;
        Ok(Work::Sealed { part: w.part, blob })
    }
}

/// The largest work item an agent reads (a share's request with its body and certificate).
pub const MAX_WORK_BYTES: usize = 80 << 20;

/// What a sealed share leaves of a work item's bound for the signed envelope around it (its
/// addresses, epoch, time, key and signature: under 1 KiB, agent names being at most 64
/// characters).
pub const ENVELOPE_ROOM: usize = 4 << 10;

/// An agent's answer to [`Work::Serve`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServeReady {
    /// Where the server listens (`http://ADDR:PORT`), or why it could not start.
    pub base_url: Result<String, String>,
    /// Its self-signed certificate (PEM), over TLS.
    pub cert_pem: Option<String>,
}

/// One host's share of one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartWork {
    /// The run's id on the hub.
    pub run: String,
    /// Which share, from 0.
    pub part: usize,
    /// Of how many.
    pub of: usize,
    /// The sender's concur version (an agent of another one refuses the work).
    pub version: String,
    /// The run request, its tasks (or its schedule) already this host's share; the agent
    /// adds the start on its own clock.
    pub request: RunRequest,
    /// The common start, on the hub's clock (ns since the epoch).
    pub start_hub_ns: u64,
    /// The run's timeout, seconds.
    pub timeout_s: f64,
}

/// What a share became, pushed on the run's list by the agent that ran it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartDone {
    /// The run's id.
    pub run: String,
    /// Which share.
    pub part: usize,
    /// The agent that ran it.
    pub agent: String,
    /// Why the agent did not run it, when it refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// How the run's child ended (what the study's own runner would have seen of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<PartEnded>,
    /// The agent's clock against the hub's, measured just before the share started.
    pub clock: ClockOffset,
    /// Delivered again after the agent rejoined its hub (which may have lost it in a
    /// restart): a study that already has the same answer takes it as that one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resent: bool,
}

/// [`Ended`] as it travels.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartEnded {
    /// How the child ended and what it used, or why it could not be waited for.
    pub waited: Result<ChildUsage, String>,
    /// Whether, and why, the agent killed it.
    pub killed_for: Option<Kill>,
    /// Wall time seen by the agent, from before the spawn to the reap.
    pub wall_s: f64,
    /// Peak PSS of its process tree.
    pub tree_pss_kib: Option<u64>,
    /// Its tree's PSS when every task had started (absent from agents before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_pss_all_started_kib: Option<u64>,
    /// Its tree's PSS at the run's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_pss_end_kib: Option<u64>,
    /// The child's report.
    pub report: Option<ChildReport>,
    /// The last lines of its stderr.
    pub stderr_tail: Vec<String>,
}

impl From<Ended> for PartEnded {
    fn from(e: Ended) -> Self {
        PartEnded {
            waited: e.waited.map_err(|e| e.to_string()),
            killed_for: e.killed_for,
            wall_s: e.wall_s,
            tree_pss_kib: e.pss.peak_kib,
            tree_pss_all_started_kib: e.pss.all_started_kib,
            tree_pss_end_kib: e.pss.end_kib,
            report: e.report,
            stderr_tail: e.stderr_tail,
        }
    }
}

impl From<PartEnded> for Ended {
    fn from(e: PartEnded) -> Self {
        Ended {
            waited: e.waited.map_err(std::io::Error::other),
            killed_for: e.killed_for,
            wall_s: e.wall_s,
            pss: TreePss {
                peak_kib: e.tree_pss_kib,
                all_started_kib: e.tree_pss_all_started_kib,
                end_kib: e.tree_pss_end_kib,
            },
            report: e.report,
            concur_line: None,
            stderr_tail: e.stderr_tail,
        }
    }
}

/// An agent's word that it refused a work item it could not trust (its signature or key, its
/// size, its text), left on the hub under the agent's name so that the study waiting for the
/// share hears it within a second instead of at its deadline. It is not signed (the key is
/// what the two sides disagree on): a study takes it only as the reason for a share it
/// already lacks, read bounded ([`REFUSAL_MAX_BYTES`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    /// The run (or study) the refused item named, read without checking it.
    pub scope: String,
    /// Why the agent refused it.
    pub why: String,
}

/// The longest refusal notice a study reads.
pub const REFUSAL_MAX_BYTES: usize = 2048;

/// The longest reason a refusal notice carries, in characters.
pub const REFUSAL_WHY_CHARS: usize = 400;

impl Refusal {
    /// The notice of `why` for an item naming `scope` (each cut to what a notice carries).
    pub fn new(scope: &str, why: &str) -> Refusal {
        Refusal {
            scope: scope.chars().take(128).collect(),
            why: why
                .chars()
                .filter(|c| !c.is_control())
                .take(REFUSAL_WHY_CHARS)
                .collect(),
        }
    }

    /// A notice read from the hub: at most [`REFUSAL_MAX_BYTES`] of JSON, its reason without
    /// control characters; `None` for anything else.
    pub fn read(bytes: &[u8]) -> Option<Refusal> {
        if bytes.len() > REFUSAL_MAX_BYTES {
            return None;
        }
        let r: Refusal = serde_json::from_slice(bytes).ok()?;
        Some(Refusal::new(&r.scope, &r.why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::admit;
    use crate::hub::keys::SigningKey;
    use crate::hub::seal::OpenKey;
    use crate::hub::sign::{seal_with, Address, Sealer};

    /// Share 0 of run `r1` whose JSON is `len` bytes (its workload spec padded with `x`).
    fn share_of(len: usize) -> Work {
        let with = |spec: &str| {
            serde_json::json!({
                "work": "part", "run": "r1", "part": 0, "of": 1, "version": "0",
                "request": {
                    "recipe": {
                        "workload": spec, "options": {"mail_sink": "discard"}, "gil": false,
                        "settings": {"switch_interval": {"secs": 0, "nanos": 5_000_000},
                                     "stack_size": 2 << 20},
                        "jobs_backend": null
                    },
                    "model": "seq", "tasks": 1
                },
                "start_hub_ns": 0, "timeout_s": 30.0
            })
            .to_string()
        };
        let base = serde_json::to_string(&admit::read_work(&with("")).unwrap()).unwrap();
        let work = admit::read_work(&with(&"x".repeat(len - base.len()))).unwrap();
        assert_eq!(serde_json::to_string(&work).unwrap().len(), len);
        work
    }

    /// Issue 42: a share near a work item's bound seals past it (base64 is 4/3 of it), and its
    /// agent would refuse it: the study refuses it before sending, saying the largest share
    /// that fits; the largest one that fits, sealed and signed, passes the agent's bound.
    #[test]
    fn a_share_too_large_once_sealed_is_refused_before_it_is_sent() {
        let agent = OpenKey::from_seed(&[7; 32]).unwrap();
        let (study, _) = SigningKey::generate().unwrap();
        let most = crate::hub::seal::most_sealable(admit::MAX_WORK_BYTES - ENVELOPE_ROOM);
        let why = share_of(most + 1)
            .sealed_to(&agent.public(), "a1", "e1")
            .unwrap_err();
        assert!(
            why.starts_with(&format!("share 0 of run 'r1' is {} bytes, ", most + 1))
                && why.contains("once sealed to its agent")
                && why.contains(&format!("a share of at most {most} bytes")),
            "{why}"
        );
        // 61 MiB of share: under the bound in clear, over it sealed.
        assert!(share_of(61 << 20)
            .sealed_to(&agent.public(), "a1", "e1")
            .is_err());
        let sealed = share_of(most)
            .sealed_to(&agent.public(), "a1", "e1")
            .unwrap();
        let name = "a".repeat(64);
        let a = Address {
            to: &name,
            scope: "r1",
            epoch: &"f".repeat(64),
            at_ns: u64::MAX,
        };
        let text = seal_with(
            Sealer::Own(&study),
            &a,
            serde_json::to_string(&sealed).unwrap(),
        );
        assert!(text.len() > admit::MAX_WORK_BYTES - ENVELOPE_ROOM);
        admit::check_size(&text).unwrap();
    }
}
