//! The delay HTTP server (`concur serve`), and the same server started in-process on an
//! ephemeral loopback port for studies and tests.
//!
//! axum for routing on hyper's HTTP/1 connections, accepted by our own loop so that header
//! timeouts, the open-files limit, graceful shutdown and TLS (tokio-rustls, the handshake in
//! the connection's own task so that a slow client never holds up the accept loop) are ours
//! to set.

pub mod routes;
pub mod stats;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;

use crate::error::{Error, Result};
pub use routes::ADD_BODY;
pub use stats::{Stats, StatsSnapshot};

/// How the server is set up.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The longest delay a request may ask for.
    pub max_delay: Duration,
    /// The largest body `/bytes` sends.
    pub max_bytes: u64,
    /// A client must send a request's headers within this time, also while the connection
    /// is idle between requests; otherwise the connection is closed.
    pub header_timeout: Duration,
    /// How long graceful shutdown waits for requests in flight.
    pub shutdown_grace: Duration,
    /// Serve HTTPS: with a given certificate, or a self-signed one made for the address.
    pub tls: Option<ServeTls>,
}

/// Where the server's certificate comes from.
#[derive(Debug, Clone)]
pub enum ServeTls {
    /// `--tls-cert` and `--tls-key`.
    Files(crate::tls::ServerCert),
    /// `--tls-self-signed`: made when the server binds, for its address and `localhost`.
    SelfSigned,
}

impl ServeTls {
    /// The certificate for a server bound to `addr`.
    pub fn cert(&self, addr: SocketAddr) -> Result<crate::tls::ServerCert> {
        match self {
            ServeTls::Files(c) => Ok(c.clone()),
            ServeTls::SelfSigned => crate::tls::ServerCert::self_signed(addr).map_err(Error::usage),
        }
    }
}

impl ServerOptions {
    /// The defaults, on a free loopback port: what studies and tests start in-process.
    pub fn ephemeral() -> Self {
        ServerOptions {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..Default::default()
        }
    }
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            max_delay: Duration::from_secs(10),
            max_bytes: 10 << 20,
            header_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
            tls: None,
        }
    }
}

/// The listen backlog: large, so that thousands of clients connecting at once are not
/// dropped (a dropped SYN costs the client a 1 s retransmission). The kernel caps it at
/// `net.core.somaxconn`.
pub const BACKLOG: u32 = 65_535;

/// Binds a listening socket with [`BACKLOG`].
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| Error::usage(format!("cannot listen on '{addr}': {e}")))?;
    // std listens with a backlog of 128; calling listen again on Linux raises it.
    // SAFETY: listen on a socket we own.
    unsafe {
        libc::listen(
            std::os::fd::AsRawFd::as_raw_fd(&listener),
            BACKLOG as libc::c_int,
        );
    }
    // tokio needs a non-blocking socket: a blocking accept would stall the runtime.
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("listening", e))?;
    Ok(listener)
}

/// Accepts connections on `listener` until `shutdown` resolves, then stops accepting and
/// waits up to the grace period for requests in flight.
pub async fn serve(
    listener: TcpListener,
    opts: ServerOptions,
    tls: Option<Arc<rustls::ServerConfig>>,
    stats: Arc<Stats>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let acceptor = tls.map(TlsAcceptor::from);
    let app = routes::router(routes::AppState {
        stats: stats.clone(),
        max_delay: opts.max_delay,
        max_bytes: opts.max_bytes,
    });
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(opts.header_timeout)
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((s, _)) => s,
                    Err(_) => {
                        // Out of file descriptors or similar: back off instead of spinning.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                stats.connection_opened();
                let svc = TowerToHyperService::new(app.clone());
                match &acceptor {
                    None => {
                        let conn = graceful.watch(builder.serve_connection(TokioIo::new(stream), svc));
                        tokio::spawn(async move {
                            let _ = conn.await;
                        });
                    }
                    Some(acceptor) => {
                        let (acceptor, builder, stats) = (acceptor.clone(), builder.clone(), stats.clone());
                        let watcher = graceful.watcher();
                        let header_timeout = opts.header_timeout;
                        tokio::spawn(async move {
                            // The handshake has the header timeout too: a client that
                            // connects and says nothing is not kept forever.
                            let shaken = tokio::time::timeout(header_timeout, acceptor.accept(stream)).await;
                            let Ok(Ok(tls)) = shaken else {
                                stats.tls_failed();
                                return;
                            };
                            stats.tls_handshake();
                            let conn = watcher.watch(builder.serve_connection(TokioIo::new(tls), svc));
                            let _ = conn.await;
                        });
                    }
                }
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(opts.shutdown_grace, graceful.shutdown()).await;
}

/// `concur serve`: runs the server in the foreground until Ctrl-C or SIGTERM.
pub fn run_foreground(opts: ServerOptions, quiet: bool) -> Result<()> {
    let (cur, max) = crate::process::raise_nofile_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting the server's runtime", e))?;
    rt.block_on(async {
        let listener = TcpListener::from_std(bind(opts.addr)?)
            .map_err(|e| Error::usage(format!("cannot listen on '{}': {e}", opts.addr)))?;
        let addr = listener.local_addr().map_err(|e| Error::io("listening", e))?;
        let tls = match &opts.tls {
            None => None,
            Some(t) => {
                let cert = t.cert(addr)?;
                if matches!(t, ServeTls::SelfSigned) {
                    let path = write_cert(&cert, addr)?;
                    // Printed even with --quiet: without it the certificate cannot be trusted.
                    eprintln!(
                        "concur serve: self-signed certificate for {} and localhost, SHA-256 {}, written to {} (trust it with --cacert {})",
                        addr.ip(),
                        cert.fingerprint(),
                        path.display(),
                        path.display()
                    );
                }
                Some(cert.server_config().map_err(Error::usage)?)
            }
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        if !quiet {
            eprintln!("concur serve: listening on {scheme}://{addr} (open files: {cur} of {max}); Ctrl-C stops");
            if cur < 20_000 {
                eprintln!("warning: the open-files limit is {cur}: at most about that many concurrent connections");
            }
        }
        let stats = Arc::new(Stats::default());
        serve(listener, opts, tls, stats, shutdown_signal()).await;
        if !quiet {
            eprintln!("concur serve: stopped");
        }
        Ok(())
    })
}

/// Writes a self-signed certificate where a client can read it: the temporary directory,
/// named by the port, readable by everyone (it is public), replaced on every start.
fn write_cert(cert: &crate::tls::ServerCert, addr: SocketAddr) -> Result<std::path::PathBuf> {
    let path = std::env::temp_dir().join(format!("concur-serve-{}.pem", addr.port()));
    std::fs::write(&path, &cert.cert_pem)
        .map_err(|e| Error::io(format!("writing the certificate to {}", path.display()), e))?;
    Ok(path)
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term => {},
    }
}

/// A server running in this process on its own threads; stops when dropped.
pub struct InProcessServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its counters.
    pub stats: Arc<Stats>,
    /// Its certificate, when it serves HTTPS.
    pub cert: Option<crate::tls::ServerCert>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl InProcessServer {
    /// Starts the server on `opts.addr` (see [`ServerOptions::ephemeral`]) with `workers`
    /// runtime threads.
    pub fn start(opts: ServerOptions, workers: usize) -> Result<Self> {
        crate::process::raise_nofile_limit();
        let std_listener = bind(opts.addr)?;
        let addr = std_listener
            .local_addr()
            .map_err(|e| Error::io("listening", e))?;
        let cert = opts.tls.as_ref().map(|t| t.cert(addr)).transpose()?;
        let tls = cert
            .as_ref()
            .map(|c| c.server_config())
            .transpose()
            .map_err(Error::usage)?;
        let stats = Arc::new(Stats::default());
        let (stop, stopped) = oneshot::channel::<()>();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers.max(1))
            .thread_name("concur-server")
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the server's runtime", e))?;
        let s = stats.clone();
        let thread = std::thread::Builder::new()
            .name("concur-server".into())
            .spawn(move || {
                rt.block_on(async move {
                    if let Ok(listener) = TcpListener::from_std(std_listener) {
                        serve(listener, opts, tls, s, async {
                            let _ = stopped.await;
                        })
                        .await;
                    }
                });
            })
            .map_err(|e| Error::io("starting the server's thread", e))?;
        Ok(InProcessServer {
            addr,
            stats,
            cert,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `http://ADDR`, or `https://ADDR` over TLS.
    pub fn base_url(&self) -> String {
        let scheme = if self.cert.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }
}

impl Drop for InProcessServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
