//! `concur agent`'s flags and what runs them: the one definition, which `concur agent` and a
//! library user's binary started as `my-binary agent …` ([`crate::lab`]) both parse.

use std::ffi::OsString;

use clap::error::ErrorKind;
use clap::{Args, FromArgMatches};

use crate::base::error::Error;
use crate::hub::{self, agent, HubUrl};
use crate::os::terminal::{Feedback, Terminal};

/// `concur agent`.
#[derive(Args)]
pub(crate) struct AgentArgs {
    #[command(flatten)]
    hub: crate::plan::options::HubArg,
    /// Its name on the hub (default: the host name); two live agents never share one
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    #[command(flatten)]
    allow: crate::plan::options::AllowOptions,
    #[command(flatten)]
    jobs_backend: crate::plan::options::JobsBackendArg,
    /// With --signing-key: the public keys of the studies whose work (and stops) this agent takes, one a line (concur-ed25519:..., a name after it optional); also from CONCUR_STUDY_KEYS (the keys themselves, comma-separated)
    #[arg(long, value_name = "FILE")]
    study_keys: Option<std::path::PathBuf>,
    /// No line per share on stderr
    #[arg(long, short)]
    quiet: bool,
}

/// `--hub`, else `CONCUR_HUB`, parsed; one line when neither is given.
pub(crate) fn hub_url(arg: crate::plan::options::HubArg) -> Result<HubUrl, Error> {
    match arg.from_env().url {
        Some(u) => {
            let url = crate::jobs::RedisUrl::parse_for("--hub", &u)?;
            // Said whatever --quiet asks: the password is already on its way.
            if let Some(w) = url.cleartext_password_warning("--hub") {
                Terminal::new(Feedback::Lines).warning(w);
            }
            Ok(HubUrl::from(url))
        }
        None => Err(Error::flag(
            "--hub",
            format!(
                "--hub: which hub? give --hub URL or set {} (allowed: {})",
                hub::HUB_ENV,
                hub::HUB_URLS
            ),
        )),
    }
}

/// Runs `concur agent`.
pub(crate) fn agent(a: AgentArgs) -> Result<i32, Error> {
    let hub_arg = a.hub.from_env();
    let key_files = hub::KeyFiles {
        signing_key: hub_arg.signing_key.clone(),
        listed: a.study_keys,
    };
    let url = hub_url(hub_arg)?;
    let terminal = Terminal::new(if a.quiet {
        Feedback::Quiet
    } else {
        Feedback::Lines
    });
    agent::run(
        &url,
        &agent::AgentOptions {
            name: a.name,
            allowed: a.allow.allowed()?,
            jobs_backend: a.jobs_backend.parsed()?,
            key_files,
        },
        &terminal,
    )
}

/// A binary started as `BINARY agent …`: its arguments after the program name, for [`run`].
pub(crate) fn command_line() -> Option<Vec<OsString>> {
    let args: Vec<OsString> = std::env::args_os().collect();
    (args.get(1).is_some_and(|a| a == "agent")).then(|| args[1..].to_vec())
}

/// Runs `agent …` (`args` from the subcommand's name on) as `concur agent` does.
pub(crate) fn run(args: Vec<OsString>) -> Result<i32, Error> {
    let cmd = <AgentArgs as Args>::augment_args(clap::Command::new("agent"));
    let parsed = cmd
        .try_get_matches_from(&args)
        .and_then(|m| AgentArgs::from_arg_matches(&m));
    match parsed {
        Ok(a) => agent(a),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) => Err(crate::cli::usage_error::error(&e, &args)),
    }
}
