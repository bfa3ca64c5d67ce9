//! The endpoints. Input is strict: a bad parameter is a 400 with a JSON error naming it,
//! never a clamp and never a 500. Every error the server sends is one JSON shape,
//! `{"error": WHY}` (with `"parameter"` when one is at fault): axum's own rejections are
//! rewritten into it by `json_errors`.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use http_body_util::BodyExt;
use hyper::body::{Frame, SizeHint};
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::answer::error_response;
use super::conn::Peer;
use super::stats::{Echoed, Stats};
use crate::base::units;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// Counters.
    pub stats: Arc<Stats>,
    /// The longest delay accepted.
    pub max_delay: Duration,
    /// The largest body `/bytes` sends.
    pub max_bytes: u64,
    /// The bytes of bodies `/echo` may hold at once.
    pub echo_budget: EchoBudget,
}

/// The bytes of request bodies `/echo` may hold at once, across every connection and both
/// protocols: one permit per byte of buffer. A body takes its permits before it is read (all
/// of its `Content-Length` at once, or as its buffer grows), and gives them back when the last
/// reference to its bytes is dropped: once its answer is written, or, for the last one, once
/// `/echo/last` holds the next. A body that would take the bodies held past the budget is
/// answered 503 at once, before anything is allocated for it.
#[derive(Clone)]
pub struct EchoBudget {
    permits: Arc<Semaphore>,
    total: u64,
}

impl EchoBudget {
    /// A budget of `total` bytes.
    pub fn new(total: u64) -> Self {
        let n = usize::try_from(total)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        EchoBudget {
            permits: Arc::new(Semaphore::new(n)),
            total,
        }
    }

    /// `n` more bytes, added to `held`, or `None` when the budget has not that many left.
    fn take(&self, held: &mut OwnedSemaphorePermit, n: usize) -> Option<()> {
        if n == 0 {
            return Some(());
        }
        let more = self
            .permits
            .clone()
            .try_acquire_many_owned(u32::try_from(n).ok()?)
            .ok()?;
        held.merge(more);
        Some(())
    }

    /// No bytes yet: a holder to add to.
    fn none(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.clone().try_acquire_many_owned(0).ok()
    }

    /// The 503 for a body over the budget.
    fn refused(&self, stats: &Stats) -> Response {
        stats.echo_over_budget();
        let mut r = error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the server is holding its budget of {} bytes of /echo bodies (--echo-budget): try again later",
                self.total
            ),
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        r
    }
}

/// A body's bytes with the budget's permits they hold: [`Bytes::from_owner`] keeps them
/// together, so the permits go back exactly when the last reference to the bytes is dropped
/// (hyper's, once the answer is written; the one `/echo/last` keeps).
struct Budgeted {
    bytes: Vec<u8>,
    _permits: OwnedSemaphorePermit,
}

impl AsRef<[u8]> for Budgeted {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// The body of a 400 answer.
#[derive(Debug, Serialize)]
pub struct BadRequest {
    /// What is wrong, naming the value and what is allowed.
    pub error: String,
    /// The parameter at fault.
    pub parameter: &'static str,
}

impl IntoResponse for BadRequest {
    fn into_response(self) -> Response {
        (StatusCode::BAD_REQUEST, Json(self)).into_response()
    }
}

fn bad(parameter: &'static str, error: String) -> BadRequest {
    BadRequest { error, parameter }
}

/// The largest request body read (`/echo`); larger ones get a 413.
pub const BODY_LIMIT: usize = 2 << 20;

/// Marks an error status sent on purpose with its own body (`/status/CODE`), which
/// [`json_errors`] leaves alone.
#[derive(Clone, Copy)]
struct Deliberate;

/// Rewrites every error answer that is not JSON already (axum's rejections: a body over
/// [`BODY_LIMIT`], a method not allowed, …) into the server's JSON error, keeping its status
/// and its `Allow` header.
async fn json_errors(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let uri = req.uri().clone();
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error())
        || is_json
        || resp.extensions().get::<Deliberate>().is_some()
    {
        return resp;
    }
    let allow = resp.headers().get(header::ALLOW).cloned();
    let text = axum::body::to_bytes(resp.into_body(), 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let why = match status {
        StatusCode::METHOD_NOT_ALLOWED => format!(
            "method {method} is not allowed on {} (allowed: {})",
            uri.path(),
            allow
                .as_ref()
                .and_then(|v| v.to_str().ok())
                .unwrap_or("none")
        ),
        StatusCode::PAYLOAD_TOO_LARGE => {
            format!("the request body is over the limit of {BODY_LIMIT} bytes")
        }
        _ if text.is_empty() => status.canonical_reason().unwrap_or("error").to_string(),
        _ => text,
    };
    let mut r = error_response(status, why);
    if let Some(allow) = allow {
        r.headers_mut().insert(header::ALLOW, allow);
    }
    r
}

/// A path parameter as text, or a 400 naming it (axum refuses `%XX` escapes that do not
/// decode to UTF-8).
fn param(name: &'static str, p: Result<Path<String>, PathRejection>) -> Result<String, BadRequest> {
    match p {
        Ok(Path(text)) => Ok(text),
        Err(PathRejection::FailedToDeserializePathParams(e))
            if matches!(
                e.kind(),
                axum::extract::path::ErrorKind::InvalidUtf8InPathParam { .. }
            ) =>
        {
            Err(bad(
                name,
                format!("{name} is not UTF-8 once its %XX escapes are decoded"),
            ))
        }
        Err(e) => Err(bad(name, format!("{name}: {}", e.body_text()))),
    }
}

/// The body `/add` answers with: 10 bytes, the classic's reply size.
pub const ADD_BODY: &[u8; 10] = b"ok: added\n";

/// Builds the router. `json_errors` wraps it whole, from outside: a layer on its routes
/// would see a 405 before axum adds its `Allow` header.
pub fn router(state: AppState) -> Router {
    let routes = Router::new()
        .route("/add", get(add))
        .route("/delay/{duration}", get(delay))
        .route("/bytes/{n}", get(bytes))
        .route("/status/{code}", get(status))
        .route("/stats", get(stats))
        .route("/stats/reset", post(reset))
        .route("/echo", any(echo))
        .route("/echo/last", get(echo_last))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state);
    Router::new()
        .fallback_service(routes)
        .layer(axum::middleware::from_fn(json_errors))
}

/// Waits `d`, with no timer at all for a zero delay: tokio's timer rounds every deadline up to
/// its next millisecond tick, so `sleep(0)` made each `delay=0` answer up to a millisecond late
/// and cost a timer and a wake-up besides.
async fn pause(d: Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

fn timing(mut r: Response, slept: Duration) -> Response {
    let v = format!("delay;dur={:.3}", slept.as_secs_f64() * 1e3);
    if let Ok(v) = HeaderValue::from_str(&v) {
        r.headers_mut().insert("server-timing", v);
    }
    r
}

fn check_delay(max_delay: Duration, d: Duration, text: &str) -> Result<Duration, BadRequest> {
    if d > max_delay {
        return Err(bad(
            "delay",
            format!(
                "delay '{text}' is above the maximum {} (--max-delay)",
                units::fmt_duration_spec(max_delay)
            ),
        ));
    }
    Ok(d)
}

/// Parses `/add`'s `delay` (milliseconds, a non-negative number). The query is decoded as
/// every web framework decodes it (`%XX` escapes, `+` for a space) before the value is read;
/// the first `delay` wins; above `max_delay` is refused. (Public for its fuzz target.)
pub fn add_delay(max_delay: Duration, query: &str) -> Result<Duration, BadRequest> {
    let Some((_, text)) = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "delay")
    else {
        return Ok(Duration::ZERO);
    };
    let ms: f64 = text.parse().map_err(|_| {
        bad(
            "delay",
            format!("delay '{text}' is not a number of milliseconds"),
        )
    })?;
    if !ms.is_finite() || ms < 0.0 {
        return Err(bad(
            "delay",
            format!("delay '{text}' must be a non-negative number of milliseconds"),
        ));
    }
    if ms > 1e9 {
        return Err(bad("delay", format!("delay '{text}' is out of range")));
    }
    // Whole nanoseconds, rounded: `delay=3` is exactly 3 ms (ms / 1e3 in seconds is not).
    check_delay(
        max_delay,
        Duration::from_nanos((ms * 1e6).round() as u64),
        &text,
    )
}

async fn add(State(state): State<AppState>, RawQuery(q): RawQuery) -> Response {
    let _counted = state.stats.enter();
    let d = match add_delay(state.max_delay, q.as_deref().unwrap_or("")) {
        Ok(d) => d,
        Err(r) => return r.into_response(),
    };
    pause(d).await;
    timing((StatusCode::OK, &ADD_BODY[..]).into_response(), d)
}

async fn delay(State(state): State<AppState>, p: Result<Path<String>, PathRejection>) -> Response {
    let _counted = state.stats.enter();
    let text = match param("duration", p) {
        Ok(t) => t,
        Err(r) => return r.into_response(),
    };
    let d = match units::parse_duration(&text) {
        Ok(d) => d,
        Err(why) => return bad("duration", why).into_response(),
    };
    let d = match check_delay(state.max_delay, d, &text) {
        Ok(d) => d,
        Err(r) => return r.into_response(),
    };
    pause(d).await;
    timing((StatusCode::OK, "delayed\n").into_response(), d)
}

async fn bytes(State(state): State<AppState>, p: Result<Path<String>, PathRejection>) -> Response {
    let _counted = state.stats.enter();
    let text = match param("n", p) {
        Ok(t) => t,
        Err(r) => return r.into_response(),
    };
    let n = match units::parse_size(&text) {
        Ok(n) => n,
        Err(why) => return bad("n", why).into_response(),
    };
    if n > state.max_bytes {
        return bad(
            "n",
            format!(
                "n '{text}' is above the maximum of {} bytes (--max-bytes)",
                state.max_bytes
            ),
        )
        .into_response();
    }
    timing(
        (
            [(header::CONTENT_TYPE, "application/octet-stream")],
            Body::new(Repeat { left: n }),
        )
            .into_response(),
        Duration::ZERO,
    )
}

/// What `/bytes/N` sends from: one static block of `x`.
static CHUNK: [u8; 64 << 10] = [b'x'; 64 << 10];

/// `/bytes/N`'s body: N bytes handed out as slices of [`CHUNK`], so that any N costs the same
/// memory, and a `HEAD` (whose body is never polled) none; its exact size is the
/// `Content-Length`.
struct Repeat {
    left: u64,
}

impl hyper::body::Body for Repeat {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = self.left.min(CHUNK.len() as u64) as usize;
        self.left -= n as u64;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&CHUNK[..n])))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

async fn status(State(state): State<AppState>, p: Result<Path<String>, PathRejection>) -> Response {
    let _counted = state.stats.enter();
    let text = match param("code", p) {
        Ok(t) => t,
        Err(r) => return r.into_response(),
    };
    let code = match text
        .parse::<u16>()
        .ok()
        .and_then(|c| StatusCode::from_u16(c).ok())
    {
        Some(c) if (200..=599).contains(&c.as_u16()) => c,
        _ => {
            return bad(
                "code",
                format!("code '{text}' is not an HTTP status from 200 to 599"),
            )
            .into_response()
        }
    };
    let reason = code.canonical_reason().unwrap_or("");
    let mut r = (code, format!("{} {reason}\n", code.as_u16())).into_response();
    r.extensions_mut().insert(Deliberate);
    timing(r, Duration::ZERO)
}

async fn stats(State(state): State<AppState>) -> Response {
    Json(state.stats.snapshot()).into_response()
}

/// `POST /stats/reset`, from a loopback peer only: the counters are what a study reads as its
/// ground truth, and the server may listen on a network address (an agent's `--server-host`).
async fn reset(State(state): State<AppState>, req: Request) -> Response {
    let peer = req.extensions().get::<Peer>().map(|p| p.0);
    if !peer.is_some_and(|p| p.ip().to_canonical().is_loopback()) {
        let from = peer.map_or("an unknown address".to_string(), |p| p.ip().to_string());
        return error_response(
            StatusCode::FORBIDDEN,
            format!("POST /stats/reset is allowed from a loopback address only (this request came from {from})"),
        );
    }
    state.stats.reset();
    Json(state.stats.snapshot()).into_response()
}

/// The 413 for a body over [`BODY_LIMIT`].
fn too_large() -> Response {
    error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the request body is over the limit of {BODY_LIMIT} bytes"),
    )
}

/// A request body read whole within the echo budget and [`BODY_LIMIT`], or the answer that
/// refuses it: 413 over the limit (by its `Content-Length` before a byte is read), 503 over
/// the budget. The buffer is the declared length, taken from the budget at once; without
/// one it grows (doubling, up to the limit) by what the budget gives.
async fn read_echo_body(
    budget: &EchoBudget,
    stats: &Stats,
    headers: &axum::http::HeaderMap,
    mut body: Body,
) -> Result<Bytes, Response> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > BODY_LIMIT as u64) {
        return Err(too_large());
    }
    let declared = declared.unwrap_or(0) as usize;
    let Some(mut held) = budget.none() else {
        return Err(budget.refused(stats));
    };
    if budget.take(&mut held, declared).is_none() {
        return Err(budget.refused(stats));
    }
    let mut reserved = declared;
    let mut buf = Vec::with_capacity(declared);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            error_response(
                StatusCode::BAD_REQUEST,
                format!("the request body could not be read: {e}"),
            )
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let need = buf.len() + data.len();
        if need > BODY_LIMIT {
            return Err(too_large());
        }
        if need > reserved {
            let grown = need.max(reserved * 2).clamp(16 << 10, BODY_LIMIT);
            if budget.take(&mut held, grown - reserved).is_none() {
                return Err(budget.refused(stats));
            }
            buf.reserve_exact(grown - buf.len());
            reserved = grown;
        }
        buf.extend_from_slice(&data);
    }
    Ok(Bytes::from_owner(Budgeted {
        bytes: buf,
        _permits: held,
    }))
}

/// `ANY /echo`: answers with the request's body (so a crawl's checksum is the bytes sent) and
/// keeps the method, target, headers and body for `GET /echo/last`: what a client really sent.
/// Bodies are held within the echo budget ([`EchoBudget`]).
async fn echo(State(state): State<AppState>, req: Request) -> Response {
    let _counted = state.stats.enter();
    let (parts, body) = req.into_parts();
    let body = match read_echo_body(&state.echo_budget, &state.stats, &parts.headers, body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let headers = parts
        .headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    state.stats.set_last_echo(Echoed {
        method: parts.method.as_str().to_string(),
        target: parts.uri.to_string(),
        headers,
        body: body.clone(),
    });
    (StatusCode::OK, body).into_response()
}

/// `GET /echo/last`, credentials' values redacted: any client may ask.
async fn echo_last(State(state): State<AppState>) -> Response {
    Json(state.stats.last_echo_redacted()).into_response()
}

async fn not_found() -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        "no such endpoint (allowed: GET /add?delay=MS, /delay/DURATION, /bytes/N, /status/CODE, /stats, /echo/last; POST /stats/reset; any method /echo)".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polls `f` once with a waker that does nothing: whether it finished at once.
    fn ready_at_once(f: impl std::future::Future<Output = ()>) -> bool {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        f.as_mut().poll(&mut cx).is_ready()
    }

    #[test]
    fn a_zero_delay_answers_without_a_timer() {
        // No runtime here: a tokio timer would panic; a zero pause must not touch one.
        assert!(ready_at_once(pause(Duration::ZERO)));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        let _in_rt = rt.enter();
        assert!(!ready_at_once(pause(Duration::from_millis(1))));
    }
}
