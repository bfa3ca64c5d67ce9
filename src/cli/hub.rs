//! `concur hub`: the keys of a hub's parties. `keygen` writes a party's signing key to a new
//! file (0600, no symbolic link followed, never overwritten) and prints its public key, the
//! line an operator lists; `pubkey` prints the public key of a key file again.

use std::path::PathBuf;

use clap::Subcommand;

use crate::base::error::Error;
use crate::hub::keys;

/// `concur hub`'s commands.
#[derive(Subcommand)]
pub(super) enum HubCommand {
    /// Write a new Ed25519 signing key for a study or an agent to FILE (created 0600, never overwritten) and print its public key: list that on the other parties (--study-keys on agents, --agent-keys on studies)
    Keygen {
        /// The new key's file; the key is never printed nor taken on a command line
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Print the public key of a signing key file
    Pubkey {
        /// A key file concur hub keygen wrote (or `openssl genpkey -algorithm ed25519`)
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
}

/// Runs `concur hub …`.
pub(super) fn hub(c: HubCommand) -> Result<i32, Error> {
    match c {
        HubCommand::Keygen { out } => {
            let public = keys::keygen("--out", &out)?;
            eprintln!(
                "concur: wrote a signing key to '{}' (keep it private); its public key:",
                out.display()
            );
            println!("{public}");
        }
        HubCommand::Pubkey { file } => {
            let key = keys::SigningKey::load("FILE", &file)?;
            println!("{}", key.public());
        }
    }
    Ok(0)
}
