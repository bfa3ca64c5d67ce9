//! The delay HTTP server (`concur serve`), and the same server started in-process on an
//! ephemeral loopback port for studies and tests.
//!
//! axum for routing on hyper's HTTP/1 and HTTP/2 connections, accepted by our own loop so that
//! timeouts, the connection cap, graceful shutdown and TLS (tokio-rustls, the handshake in the
//! connection's own task so that a slow client never holds up the accept loop) are ours to
//! set. HTTP/2 is h2c by prior knowledge on the plain port (a connection that starts with the
//! preface; any other is HTTP/1.1) and h2 by ALPN over TLS (`h2` offered before `http/1.1`);
//! `--http1-only` serves and offers HTTP/1.1 alone; `--http3` adds HTTP/3 over QUIC on the same
//! port number over UDP (`http3.rs`), answered by the same service, and announced by `Alt-Svc`. No client can hold more than one connection's worth of memory beyond a timeout:
//! headers (`--header-timeout`), bodies (`--body-timeout`), idle keep-alive connections
//! (`--idle-timeout`) and answers the client does not read (`--write-timeout`) are all
//! bounded in time, `/bytes/N` is streamed from one static block, and beyond
//! `--max-connections` a new connection gets a 503. Memory is bounded across connections
//! too: at most `--max-in-flight` requests (HTTP/1.1 requests and HTTP/2 streams alike) are
//! handled at once, with a share of them kept for every client (`share.rs`), and the bodies `/echo` holds share one `--echo-budget`; beyond either, a
//! 503 at once.

mod answer;
pub mod conn;
pub mod http3;
mod options;
pub mod routes;
mod share;
pub(crate) mod stats;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::base::error::{Error, Result};
pub use options::ServerOptions;
pub use routes::ADD_BODY;
pub use stats::{Stats, StatsSnapshot};

/// `--max-streams` when none is given: nginx's `http2_max_concurrent_streams` (128). RFC 9113
/// §6.5.2 asks for no fewer than 100; hyper's default is 200, nghttp2's 100. Each open stream
/// costs the server its handler task and buffers (about 4.8 KB for a `/delay`), so the bound
/// per connection times the connection cap must stay within memory: a client wanting more
/// streams opens more connections, and [`DEFAULT_MAX_IN_FLIGHT`] bounds them all.
pub const DEFAULT_MAX_STREAMS: u32 = 128;

/// `--max-in-flight` when none is given: 16,384 requests at once, over every connection and
/// both protocols. Above the 10,000 concurrent requests the tests and the crawl study make;
/// at a few KB each for a delayed request (about 4.8 KB measured for an HTTP/2 stream) that is
/// under 100 MB, where HTTP/2 multiplexing without it allowed `--max-streams` times the
/// connection cap.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 16_384;

/// The smallest `--echo-budget`: two bodies at [`routes::BODY_LIMIT`], since the last one
/// stays held for `/echo/last` until the next replaces it.
pub const MIN_ECHO_BUDGET: u64 = 2 * routes::BODY_LIMIT as u64;

/// The ALPN protocols the server offers, in its order of preference.
fn alpn(http1_only: bool) -> &'static [&'static [u8]] {
    if http1_only {
        &[b"http/1.1"]
    } else {
        &[b"h2", b"http/1.1"]
    }
}

/// Where the server's certificate comes from.
#[derive(Debug, Clone)]
pub enum ServeTls {
    /// `--tls-cert` and `--tls-key`.
    Files(crate::os::tls::ServerCert),
    /// `--tls-self-signed`: made when the server binds, for its address and `localhost`.
    SelfSigned,
}

impl ServeTls {
    /// The certificate for a server bound to `addr`.
    pub fn cert(&self, addr: SocketAddr) -> Result<crate::os::tls::ServerCert> {
        match self {
            ServeTls::Files(c) => Ok(c.clone()),
            ServeTls::SelfSigned => {
                crate::os::tls::ServerCert::self_signed(addr).map_err(Error::usage)
            }
        }
    }
}

/// The largest `--max-bytes`: 64 GiB. `/bytes/N` is streamed, so the limit is not memory but
/// time: at loopback speed (1–3 GB/s) one such answer holds a connection for under a minute,
/// and a client cannot mistake a typo (`999G`) for a request it meant.
pub const MAX_BYTES_CEILING: u64 = 64 << 30;

/// Descriptors kept out of the connection cap's default: for the 503 answers beyond the cap,
/// the runtime, the listener, and whatever the process opens besides.
pub const FD_RESERVE: u64 = 256;

/// At most this many 503 answers are being written at once; beyond, a connection over the
/// cap is closed without one (each answer holds a descriptor for up to a second).
const REFUSALS_AT_ONCE: usize = 128;

/// The most an HTTP/1.1 connection buffers of what it reads (hyper's `max_buf_size`): a
/// request head longer than this is answered 431 and the connection closed. hyper's default,
/// about 400 KB, let 2,000 connections sending an unfinished header line hold 826 MB of the
/// server; at 16 KiB (twice Apache's limit on one header field) the heads of every connection
/// the cap allows stay bounded together (16 KiB × `--max-connections`). Bodies stream through
/// it in pieces and are not limited by it.
pub const HEAD_BUF: usize = 16 * 1024;

/// The connection cap when none is given: the open-files limit (as raised at start) less
/// [`FD_RESERVE`], or half the limit when it is below twice the reserve, so that the server
/// never runs out of descriptors to accept with (a full descriptor table leaves clients
/// hanging in the backlog; a cap answers them).
pub fn default_max_connections() -> usize {
    let (cur, _) = crate::os::process::raise_nofile_limit();
    let cap = if cur >= 2 * FD_RESERVE {
        cur - FD_RESERVE
    } else {
        cur / 2
    };
    usize::try_from(cap.max(1)).unwrap_or(usize::MAX)
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

/// What every connection of one server shares.
struct Shared {
    app: axum::Router,
    http1: hyper::server::conn::http1::Builder,
    http2: hyper::server::conn::http2::Builder<TokioExecutor>,
    http1_only: bool,
    acceptor: Option<TlsAcceptor>,
    timeouts: conn::Timeouts,
    in_flight: share::InFlightCap,
    header_timeout: Duration,
    stats: Arc<Stats>,
    /// `https://ADDR`, for the 400 that plain HTTP on the TLS port gets.
    https_url: String,
    /// `h3=":PORT"` when the server also speaks HTTP/3, for every TCP answer's `Alt-Svc`.
    alt_svc: Option<axum::http::HeaderValue>,
}

/// Accepts connections on `listener` (and QUIC's on `quic`, with `--http3`) until `shutdown`
/// resolves, then stops accepting and waits up to the grace period for requests in flight.
pub async fn serve(
    listener: TcpListener,
    quic: Option<http3::Quic>,
    opts: ServerOptions,
    tls: Option<Arc<rustls::ServerConfig>>,
    stats: Arc<Stats>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let app = routes::router(routes::AppState {
        stats: stats.clone(),
        max_delay: opts.max_delay,
        max_bytes: opts.max_bytes,
        echo_budget: routes::EchoBudget::new(opts.echo_budget),
    });
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(opts.header_timeout)
        .max_buf_size(HEAD_BUF)
        .keep_alive(true);
    // No keep-alive pings: a connection with no stream open is closed by the idle deadline
    // (conn.rs), and one with streams open lives no longer than its delays and answers.
    let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    http2
        .timer(TokioTimer::new())
        .max_concurrent_streams(opts.max_streams);
    let https_url = match listener.local_addr() {
        Ok(a) => format!("https://{a}"),
        Err(_) => "https://".into(),
    };
    let shared = Arc::new(Shared {
        app,
        http1,
        http2,
        http1_only: opts.http1_only,
        acceptor: tls.map(TlsAcceptor::from),
        timeouts: conn::Timeouts {
            idle: opts.idle_timeout,
            body: opts.body_timeout,
            write: opts.write_timeout,
        },
        in_flight: share::InFlightCap::new(opts.max_in_flight),
        header_timeout: opts.header_timeout,
        stats: stats.clone(),
        https_url,
        alt_svc: quic
            .as_ref()
            .and_then(http3::Quic::port)
            .map(http3::alt_svc),
    });
    let cap = opts.max_connections.unwrap_or_else(default_max_connections);
    let cap = i64::try_from(cap).unwrap_or(i64::MAX);
    let (stop_http3, stopping) = tokio::sync::watch::channel(false);
    let http3 = quic.map(|q| tokio::spawn(http3::serve(q, shared.clone(), cap, stopping)));
    let refusals = Arc::new(Semaphore::new(REFUSALS_AT_ONCE));
    let over_cap = answer::error_body(&format!(
        "the server has {cap} connections open, its limit (--max-connections): try again later"
    ));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(_) => {
                        // Out of file descriptors or similar: back off instead of spinning.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    }
                };
                if stats.open_connections() >= cap {
                    stats.over_capacity();
                    if let Ok(permit) = refusals.clone().try_acquire_owned() {
                        let body = over_cap.clone();
                        tokio::spawn(async move {
                            conn::answer_and_close(stream, StatusCode::SERVICE_UNAVAILABLE, &body, Duration::from_secs(1)).await;
                            drop(permit);
                        });
                    }
                    continue;
                }
                let open = stats.connection_opened();
                let _ = stream.set_nodelay(true);
                let watcher = graceful.watcher();
                let shared = shared.clone();
                tokio::spawn(async move {
                    serve_connection(stream, peer, &shared, watcher).await;
                    drop(open);
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    let _ = stop_http3.send(true);
    let _ = tokio::time::timeout(opts.shutdown_grace, async {
        graceful.shutdown().await;
        if let Some(h) = http3 {
            let _ = h.await;
        }
    })
    .await;
}

/// Serves one accepted connection to its end: over TLS when the server has it (plain HTTP
/// there is answered 400), in the protocol the client chose (the preface, or ALPN), with its
/// timeouts.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    shared: &Shared,
    watcher: hyper_util::server::graceful::Watcher,
) {
    let state = conn::ConnState::new(shared.stats.clone(), peer, shared.in_flight.join(peer));
    let Some(acceptor) = &shared.acceptor else {
        let io = conn::Guarded::new(stream, state.clone(), shared.timeouts);
        let (io, h2) = if shared.http1_only {
            (conn::Replay::new(Vec::new(), io), false)
        } else {
            // The preface has the header timeout, as a request's headers do.
            match tokio::time::timeout(shared.header_timeout, conn::sniff(io)).await {
                Ok(Ok(sniffed)) => sniffed,
                Ok(Err(_)) => return,
                Err(_) => {
                    shared.stats.timed_out(stats::Timeout::Header);
                    return;
                }
            }
        };
        return drive(io, h2, shared, state, watcher).await;
    };
    // The first byte and the handshake have the header timeout too: a client that
    // connects and says nothing is not kept forever.
    let shaken = tokio::time::timeout(shared.header_timeout, async {
        let mut first = [0u8; 1];
        match stream.peek(&mut first).await {
            // A TLS record starts with its content type; a ClientHello's is 22.
            Ok(1) if first[0] != 0x16 => Err(Some(stream)),
            Ok(1) => {
                let io = conn::Guarded::new(stream, state.clone(), shared.timeouts);
                acceptor.accept(io).await.map_err(|_| None)
            }
            _ => Err(None),
        }
    })
    .await;
    let tls = match shaken {
        Ok(Ok(tls)) => tls,
        Ok(Err(Some(plain))) => {
            shared.stats.tls_failed();
            let why = format!("this port serves HTTPS: use {}", shared.https_url);
            conn::answer_and_close(
                plain,
                StatusCode::BAD_REQUEST,
                &answer::error_body(&why),
                Duration::from_secs(1),
            )
            .await;
            return;
        }
        Ok(Err(None)) => {
            shared.stats.tls_failed();
            return;
        }
        Err(_) => {
            shared.stats.tls_failed();
            shared.stats.timed_out(stats::Timeout::Header);
            return;
        }
    };
    shared.stats.tls_handshake();
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
    drive(tls, h2, shared, state, watcher).await;
}

/// Serves HTTP/2 (`h2`) or HTTP/1.1 on `io` until the connection ends.
async fn drive<I>(
    io: I,
    h2: bool,
    shared: &Shared,
    state: Arc<conn::ConnState>,
    watcher: hyper_util::server::graceful::Watcher,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = conn::service(
        shared.app.clone(),
        state.clone(),
        shared.timeouts,
        shared.in_flight.clone(),
        shared.alt_svc.clone(),
    );
    let done = if h2 {
        state.speaks_h2();
        watcher
            .watch(shared.http2.serve_connection(TokioIo::new(io), svc))
            .await
    } else {
        watcher
            .watch(shared.http1.serve_connection(TokioIo::new(io), svc))
            .await
    };
    if let Err(e) = done {
        if e.is_timeout() {
            shared.stats.timed_out(stats::Timeout::Header);
        }
    }
}

/// `concur serve`: runs the server in the foreground until Ctrl-C or SIGTERM.
pub fn run_foreground(opts: ServerOptions, quiet: bool) -> Result<()> {
    opts.check()?;
    let (cur, max) = crate::os::process::raise_nofile_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting the server's runtime", e))?;
    rt.block_on(async {
        let listener = TcpListener::from_std(bind(opts.addr)?)
            .map_err(|e| Error::usage(format!("cannot listen on '{}': {e}", opts.addr)))?;
        let addr = listener.local_addr().map_err(|e| Error::io("listening", e))?;
        // The self-signed certificate's folder lives until the server stops (removed on drop).
        let mut _cert_dir = None;
        let mut quic = None;
        let tls = match &opts.tls {
            None => None,
            Some(t) => {
                let cert = t.cert(addr)?;
                if matches!(t, ServeTls::SelfSigned) {
                    let (dir, path) = write_cert(&cert, addr)?;
                    _cert_dir = Some(dir);
                    // Printed even with --quiet: without it the certificate cannot be trusted.
                    eprintln!(
                        "concur serve: self-signed certificate for {} and localhost, SHA-256 {}, written to {} (trust it with --cacert {})",
                        addr.ip(),
                        cert.fingerprint(),
                        path.display(),
                        path.display()
                    );
                }
                if opts.http3 {
                    quic = Some(http3::Quic::bind(addr, &cert, &opts)?);
                }
                Some(cert.server_config(alpn(opts.http1_only)).map_err(Error::usage)?)
            }
        };
        let stopped = shutdown_signal();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let cap = opts.max_connections.unwrap_or_else(default_max_connections);
        if !quiet {
            let h3 = if quic.is_some() { format!(" and HTTP/3 on UDP port {}", addr.port()) } else { String::new() };
            eprintln!("concur serve: listening on {scheme}://{addr}{h3} (at most {cap} connections, {} requests in flight; open files: {cur} of {max}); Ctrl-C stops", opts.max_in_flight);
            if cur < 20_000 {
                eprintln!("warning: the open-files limit is {cur}: at most about that many concurrent connections");
            }
        }
        let stats = Arc::new(Stats::default());
        serve(listener, quic, opts, tls, stats, stopped).await;
        if !quiet {
            eprintln!("concur serve: stopped");
        }
        Ok(())
    })
}

/// Writes a self-signed certificate where a client can read it: a new folder of our own in
/// the temporary directory (a random name, made by us, so no one can plant a file or a
/// symlink in it beforehand), the file created new (`O_EXCL`: never through a symlink) and
/// readable by everyone (it is the public certificate, not the key). The folder and the file
/// are removed when the returned guard drops, when the server stops.
fn write_cert(
    cert: &crate::os::tls::ServerCert,
    addr: SocketAddr,
) -> Result<(tempfile::TempDir, std::path::PathBuf)> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let dir = tempfile::Builder::new()
        .prefix("concur-serve-")
        .tempdir()
        .map_err(|e| Error::io("making a folder for the certificate", e))?;
    let path = dir.path().join(format!("concur-serve-{}.pem", addr.port()));
    let failed = |e| Error::io(format!("writing the certificate to {}", path.display()), e);
    // The folder is made 0700; others need to reach the certificate in it.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).map_err(failed)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(failed)?;
    file.write_all(cert.cert_pem.as_bytes()).map_err(failed)?;
    Ok((dir, path))
}

/// Resolves on Ctrl-C or SIGTERM. The handlers are installed when this is called, not when
/// the future is first polled: a signal sent as soon as the server says it listens must stop
/// it gracefully (removing its certificate), not kill it.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate()).ok();
    let int = signal(SignalKind::interrupt()).ok();
    async move {
        let next = |s: Option<tokio::signal::unix::Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = next(term) => {},
            _ = next(int) => {},
        }
    }
}

/// A server running in this process on its own threads; stops when dropped.
pub struct InProcessServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its counters.
    pub stats: Arc<Stats>,
    /// Its certificate, when it serves HTTPS.
    pub cert: Option<crate::os::tls::ServerCert>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl InProcessServer {
    /// Starts the server on `opts.addr` (see [`ServerOptions::ephemeral`]) with `workers`
    /// runtime threads.
    pub fn start(opts: ServerOptions, workers: usize) -> Result<Self> {
        opts.check()?;
        crate::os::process::raise_nofile_limit();
        let std_listener = bind(opts.addr)?;
        let addr = std_listener
            .local_addr()
            .map_err(|e| Error::io("listening", e))?;
        let cert = opts.tls.as_ref().map(|t| t.cert(addr)).transpose()?;
        let quic = match &cert {
            Some(c) if opts.http3 => Some(http3::Quic::bind(addr, c, &opts)?),
            _ => None,
        };
        let tls = cert
            .as_ref()
            .map(|c| c.server_config(alpn(opts.http1_only)))
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
                        serve(listener, quic, opts, tls, s, async {
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
