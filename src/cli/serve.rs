//! `concur serve`: the delay server's flags (its settings are [`crate::plan::options::ServerOptions`];
//! the certificate's flags are `serve`'s own) and its one library call.

use std::path::PathBuf;

use clap::Args;

use crate::base::error::Error;

#[derive(Args)]
pub(super) struct ServeArgs {
    #[command(flatten)]
    server: crate::plan::options::ServerOptions,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_key",
        conflicts_with = "tls_self_signed"
    )]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve HTTPS with a new self-signed certificate for the listen address; its path and
    /// SHA-256 fingerprint are printed (trust it with --cacert)
    #[arg(long)]
    tls_self_signed: bool,
    /// Print nothing on stderr
    #[arg(long, short)]
    quiet: bool,
}

/// Runs the server in the foreground; the exit code.
pub(super) fn run(a: ServeArgs) -> Result<i32, Error> {
    let opts = crate::server::ServerOptions {
        tls: serve_tls(a.tls_cert, a.tls_key, a.tls_self_signed)?,
        ..a.server
    };
    crate::server::run_foreground(opts, a.quiet).map(|_| 0)
}

/// The certificate the flags ask for: files, a self-signed one, or none (plain HTTP).
fn serve_tls(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    self_signed: bool,
) -> Result<Option<crate::server::ServeTls>, Error> {
    Ok(match (cert, key) {
        (Some(c), Some(k)) => Some(crate::server::ServeTls::Files(
            crate::os::tls::ServerCert::from_files(&c, &k).map_err(Error::usage)?,
        )),
        _ if self_signed => Some(crate::server::ServeTls::SelfSigned),
        _ => None,
    })
}
