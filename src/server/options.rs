//! The delay server's settings ([`ServerOptions`]): `concur serve`'s flags, derived once with
//! clap, and what the study's and an agent's in-process servers start with.

use std::time::Duration;

use clap::Args;

/// The delay server's settings: `concur serve`'s flags, and what the study's in-process
/// server and an agent's server start with ([`ServerOptions::ephemeral`]: the same defaults
/// on a free port). No client can hold more than one connection's worth of memory beyond a
/// timeout, and the caps bound memory across connections; the rationale of the
/// stream and in-flight defaults is at their constants in [`crate::server`].
#[derive(Args, Debug, Clone)]
pub struct ServerOptions {
    /// Address to listen on (loopback by default)
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: std::net::SocketAddr,
    /// Longest delay a request may ask for; longer ones get a 400
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::base::units::parse_duration)]
    pub max_delay: Duration,
    /// Largest body /bytes/N sends (streamed; at most 64G); larger ones get a 400
    #[arg(long, value_name = "SIZE", default_value = "10M", value_parser = crate::base::units::parse_size)]
    pub max_bytes: u64,
    /// Close a connection whose client sends no complete request headers for this long (counted from the previous answer on a kept-alive connection)
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::base::units::parse_duration)]
    pub header_timeout: Duration,
    /// Answer 408 and close when a request's body has not all arrived this long after its headers
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::base::units::parse_duration)]
    pub body_timeout: Duration,
    /// Close a connection on which no request starts for this long
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = crate::base::units::parse_duration)]
    pub idle_timeout: Duration,
    /// Close a connection whose client takes no bytes of an answer for this long
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::base::units::parse_duration)]
    pub write_timeout: Duration,
    /// Most connections open at once; beyond, a new one gets a 503 [default: the open-files limit less 256]
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Most requests open at once on one HTTP/2 connection (SETTINGS_MAX_CONCURRENT_STREAMS)
    #[arg(long, value_name = "N", default_value_t = crate::server::DEFAULT_MAX_STREAMS)]
    pub max_streams: u32,
    /// Most requests handled at once over all connections (HTTP/1.1 requests and HTTP/2 streams); beyond, a 503. One client (an IPv4 address, an IPv6 /64) holds at most 15/16 of it, and once others connect it takes no more than its equal share while only the kept 1/16 is free
    #[arg(long, value_name = "N", default_value_t = crate::server::DEFAULT_MAX_IN_FLIGHT)]
    pub max_in_flight: usize,
    /// Most bytes of request bodies /echo holds at once over all connections (at least 4M); beyond, a 503
    // 64M: 32 bodies at the 2 MiB limit (a crawl posting 1,000 bodies of 64 KiB at once
    // fits). Without it, one h2c connection with 1,000 unfinished 2 MiB bodies took the
    // server to 2 GB.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = crate::base::units::parse_size)]
    pub echo_budget: u64,
    /// Serve HTTP/1.1 only: no h2c by prior knowledge, only http/1.1 offered by ALPN
    #[arg(long)]
    pub http1_only: bool,
    /// Also serve HTTP/3 (QUIC) on UDP, on the same port number as TCP, with the same routes and limits, and announce it on the TCP answers (Alt-Svc: h3=":PORT"). QUIC always encrypts: needs --tls-self-signed, or --tls-cert and --tls-key
    #[arg(long)]
    pub http3: bool,
    /// How long graceful shutdown waits for requests in flight (no flag).
    #[arg(skip = Duration::from_secs(10))]
    pub shutdown_grace: Duration,
    /// Serve HTTPS: with a given certificate, or a self-signed one made for the address
    /// (`concur serve`'s `--tls-*` flags, a study's `--tls`).
    #[arg(skip)]
    pub tls: Option<crate::server::ServeTls>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        crate::base::clap_defaults::defaults()
    }
}

/// `--FLAG` as clap spells the flag of `ServerOptions`' field `$field` (a field that does not
/// exist does not compile), for the check's messages.
macro_rules! server_flag {
    ($field:ident) => {{
        let _ = |o: &ServerOptions| {
            let _ = &o.$field;
        };
        ServerOptions::flag(stringify!($field))
    }};
}

impl ServerOptions {
    /// The defaults, on a free loopback port: what studies and tests start in-process.
    pub fn ephemeral() -> Self {
        ServerOptions {
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            ..Default::default()
        }
    }

    /// The flag of the field `id`, as clap defines it (`--header-timeout`).
    fn flag(id: &str) -> String {
        let cmd = Self::augment_args(clap::Command::new("serve"));
        let long = cmd
            .get_arguments()
            .find(|a| a.get_id() == id)
            .and_then(|a| a.get_long())
            .map(|l| format!("--{l}"));
        long.unwrap_or_else(|| id.to_string())
    }

    /// Refuses what cannot work, naming the flag and what is allowed: a zero timeout (it
    /// would close every connection at once), a zero cap, `--max-bytes` above
    /// [`crate::server::MAX_BYTES_CEILING`], `--http3` without a certificate.
    pub fn check(&self) -> crate::base::error::Result<()> {
        use crate::base::error::Error;
        use crate::server::{
            DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_STREAMS, MAX_BYTES_CEILING, MIN_ECHO_BUDGET,
        };
        for (flag, d) in [
            (server_flag!(header_timeout), self.header_timeout),
            (server_flag!(body_timeout), self.body_timeout),
            (server_flag!(idle_timeout), self.idle_timeout),
            (server_flag!(write_timeout), self.write_timeout),
        ] {
            if d.is_zero() {
                return Err(Error::flag(
                    &flag,
                    format!(
                        "{flag} '{}' must be above 0 (it would close every connection at once)",
                        crate::base::units::fmt_duration_spec(d)
                    ),
                ));
            }
        }
        if self.max_bytes > MAX_BYTES_CEILING {
            let flag = server_flag!(max_bytes);
            return Err(Error::flag(
                &flag,
                format!(
                    "{flag} '{}' must be from 0 to {}",
                    size_spec(self.max_bytes),
                    size_spec(MAX_BYTES_CEILING)
                ),
            ));
        }
        if self.max_streams == 0 {
            let flag = server_flag!(max_streams);
            return Err(Error::flag(&flag, format!(
                "{flag} '0' must be at least 1 (default {DEFAULT_MAX_STREAMS}; it bounds the requests open at once on one HTTP/2 connection)"
            )));
        }
        if self.max_in_flight == 0 {
            let flag = server_flag!(max_in_flight);
            return Err(Error::flag(&flag, format!(
                "{flag} '0' must be at least 1 (default {DEFAULT_MAX_IN_FLIGHT}; it bounds the requests handled at once over all connections)"
            )));
        }
        if !(MIN_ECHO_BUDGET..=MAX_BYTES_CEILING).contains(&self.echo_budget) {
            let flag = server_flag!(echo_budget);
            return Err(Error::flag(
                &flag,
                format!(
                    "{flag} '{}' must be from {} (two /echo bodies at their 2M limit) to {}",
                    size_spec(self.echo_budget),
                    size_spec(MIN_ECHO_BUDGET),
                    size_spec(MAX_BYTES_CEILING)
                ),
            ));
        }
        if self.http3 && self.tls.is_none() {
            let flag = server_flag!(http3);
            return Err(Error::flag(
                &flag,
                format!(
                    "{flag} needs TLS (QUIC always encrypts): add --tls-self-signed, or --tls-cert FILE and --tls-key FILE"
                ),
            ));
        }
        if self.max_connections == Some(0) {
            let flag = server_flag!(max_connections);
            return Err(Error::flag(
                &flag,
                format!(
                    "{flag} '0' must be at least 1 (leave it out for the open-files limit less {})",
                    crate::server::FD_RESERVE
                ),
            ));
        }
        Ok(())
    }
}

/// `n` bytes as a size flag is written (`999G`, `10M`, `64k`, `1000`).
fn size_spec(n: u64) -> String {
    match n {
        0 => "0".into(),
        n if n % (1 << 30) == 0 => format!("{}G", n >> 30),
        n if n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n % (1 << 10) == 0 => format!("{}k", n >> 10),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_check_names_clap_flags() {
        let d = ServerOptions::default();
        assert_eq!(d.addr.to_string(), "127.0.0.1:8080");
        assert_eq!(d.echo_budget, 64 << 20);
        assert_eq!(d.shutdown_grace, Duration::from_secs(10));
        assert!(d.check().is_ok() && ServerOptions::ephemeral().check().is_ok());
        assert_eq!(server_flag!(header_timeout), "--header-timeout");
        assert_eq!(server_flag!(http1_only), "--http1-only");
        let zero = ServerOptions {
            idle_timeout: Duration::ZERO,
            ..ServerOptions::ephemeral()
        };
        let err = zero.check().unwrap_err().to_string();
        assert!(
            err.starts_with("--idle-timeout '0s' must be above 0"),
            "{err}"
        );
    }
}
