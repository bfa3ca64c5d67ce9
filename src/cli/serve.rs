//! `concur serve`: the delay server's flags and its one library call.

use std::path::PathBuf;

use clap::Args;

use crate::options::parse_duration;
use crate::Error;

#[derive(Args)]
pub(super) struct ServeArgs {
    /// Address to listen on (loopback by default)
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: std::net::SocketAddr,
    /// Longest delay a request may ask for; longer ones get a 400
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    max_delay: std::time::Duration,
    /// Largest body /bytes/N sends (streamed; at most 64G); larger ones get a 400
    #[arg(long, value_name = "SIZE", default_value = "10M", value_parser = crate::units::parse_size)]
    max_bytes: u64,
    /// Close a connection whose client sends no complete request headers for this long
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    header_timeout: std::time::Duration,
    /// Answer 408 and close when a request's body has not all arrived this long after its headers
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    body_timeout: std::time::Duration,
    /// Close a connection on which no request starts for this long
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    idle_timeout: std::time::Duration,
    /// Close a connection whose client takes no bytes of an answer for this long
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    write_timeout: std::time::Duration,
    /// Most connections open at once; beyond, a new one gets a 503 [default: the open-files limit less 256]
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// Most requests open at once on one HTTP/2 connection (SETTINGS_MAX_CONCURRENT_STREAMS)
    #[arg(long, value_name = "N", default_value_t = crate::server::DEFAULT_MAX_STREAMS)]
    max_streams: u32,
    /// Most requests handled at once over all connections (HTTP/1.1 requests and HTTP/2 streams); beyond, a 503
    #[arg(long, value_name = "N", default_value_t = crate::server::DEFAULT_MAX_IN_FLIGHT)]
    max_in_flight: usize,
    /// Most bytes of request bodies /echo holds at once over all connections (at least 4M); beyond, a 503
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = crate::units::parse_size)]
    echo_budget: u64,
    /// Serve HTTP/1.1 only: no h2c by prior knowledge, only http/1.1 offered by ALPN
    #[arg(long)]
    http1_only: bool,
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
        addr: a.addr,
        max_delay: a.max_delay,
        max_bytes: a.max_bytes,
        header_timeout: a.header_timeout,
        body_timeout: a.body_timeout,
        idle_timeout: a.idle_timeout,
        write_timeout: a.write_timeout,
        max_connections: a.max_connections,
        max_streams: a.max_streams,
        max_in_flight: a.max_in_flight,
        echo_budget: a.echo_budget,
        http1_only: a.http1_only,
        tls: serve_tls(a.tls_cert, a.tls_key, a.tls_self_signed)?,
        ..Default::default()
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
            crate::tls::ServerCert::from_files(&c, &k).map_err(Error::usage)?,
        )),
        _ if self_signed => Some(crate::server::ServeTls::SelfSigned),
        _ => None,
    })
}
