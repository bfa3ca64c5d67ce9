//! The delay HTTP server (`concur serve`), and the same server started in-process on an
//! ephemeral loopback port for studies and tests.
//!
//! axum for routing on hyper's HTTP/1 connections, accepted by our own loop so that header
//! timeouts, the open-files limit and graceful shutdown are ours to set.

pub mod routes;
pub mod stats;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

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
    stats: Arc<Stats>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let app = routes::router(routes::AppState {
        stats,
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
                let svc = TowerToHyperService::new(app.clone());
                let conn = builder.serve_connection(TokioIo::new(stream), svc);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    let _ = conn.await;
                });
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
        if !quiet {
            eprintln!("concur serve: listening on http://{addr} (open files: {cur} of {max}); Ctrl-C stops");
            if cur < 20_000 {
                eprintln!("warning: the open-files limit is {cur}: at most about that many concurrent connections");
            }
        }
        let stats = Arc::new(Stats::default());
        serve(listener, opts, stats, shutdown_signal()).await;
        if !quiet {
            eprintln!("concur serve: stopped");
        }
        Ok(())
    })
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
                        serve(listener, opts, s, async {
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
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `http://ADDR`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
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
