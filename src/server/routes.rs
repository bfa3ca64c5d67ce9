//! The endpoints. Input is strict: a bad parameter is a 400 with a JSON error naming it,
//! never a clamp and never a 500.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use serde::Serialize;

use super::stats::Stats;
use crate::units;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// Counters.
    pub stats: Arc<Stats>,
    /// The longest delay accepted.
    pub max_delay: Duration,
    /// The largest body `/bytes` sends.
    pub max_bytes: u64,
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

/// The body `/add` answers with: 10 bytes, the classic's reply size.
pub const ADD_BODY: &[u8; 10] = b"ok: added\n";

/// Builds the router.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/add", get(add))
        .route("/delay/{duration}", get(delay))
        .route("/bytes/{n}", get(bytes))
        .route("/status/{code}", get(status))
        .route("/stats", get(stats))
        .route("/stats/reset", post(reset))
        .route("/echo", any(echo))
        .route("/echo/last", get(echo_last))
        .fallback(not_found)
        .with_state(state)
}

fn timing(mut r: Response, slept: Duration) -> Response {
    let v = format!("delay;dur={:.3}", slept.as_secs_f64() * 1e3);
    if let Ok(v) = HeaderValue::from_str(&v) {
        r.headers_mut().insert("server-timing", v);
    }
    r
}

fn check_delay(state: &AppState, d: Duration, text: &str) -> Result<Duration, BadRequest> {
    if d > state.max_delay {
        return Err(bad(
            "delay",
            format!(
                "delay '{text}' is above the maximum {} (--max-delay)",
                units::fmt_duration_spec(state.max_delay)
            ),
        ));
    }
    Ok(d)
}

/// Parses `/add`'s `delay` (milliseconds, a non-negative number). The query is decoded as
/// every web framework decodes it (`%XX` escapes, `+` for a space) before the value is read;
/// the first `delay` wins.
fn add_delay(state: &AppState, query: &str) -> Result<Duration, BadRequest> {
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
    check_delay(state, Duration::from_secs_f64(ms / 1e3), &text)
}

async fn add(State(state): State<AppState>, RawQuery(q): RawQuery) -> Response {
    let _counted = state.stats.enter();
    let d = match add_delay(&state, q.as_deref().unwrap_or("")) {
        Ok(d) => d,
        Err(r) => return r.into_response(),
    };
    tokio::time::sleep(d).await;
    timing((StatusCode::OK, &ADD_BODY[..]).into_response(), d)
}

async fn delay(State(state): State<AppState>, Path(text): Path<String>) -> Response {
    let _counted = state.stats.enter();
    let d = match units::parse_duration(&text) {
        Ok(d) => d,
        Err(why) => return bad("duration", why).into_response(),
    };
    let d = match check_delay(&state, d, &text) {
        Ok(d) => d,
        Err(r) => return r.into_response(),
    };
    tokio::time::sleep(d).await;
    timing((StatusCode::OK, "delayed\n").into_response(), d)
}

async fn bytes(State(state): State<AppState>, Path(text): Path<String>) -> Response {
    let _counted = state.stats.enter();
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
    let body = vec![b'x'; n as usize];
    timing(
        ([(header::CONTENT_TYPE, "application/octet-stream")], body).into_response(),
        Duration::ZERO,
    )
}

async fn status(State(state): State<AppState>, Path(text): Path<String>) -> Response {
    let _counted = state.stats.enter();
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
    timing(
        (code, format!("{} {reason}\n", code.as_u16())).into_response(),
        Duration::ZERO,
    )
}

async fn stats(State(state): State<AppState>) -> Response {
    Json(state.stats.snapshot()).into_response()
}

async fn reset(State(state): State<AppState>) -> Response {
    state.stats.reset();
    Json(state.stats.snapshot()).into_response()
}

/// `ANY /echo`: answers with the request's body (so a crawl's checksum is the bytes sent) and
/// keeps the method, target, headers and body for `GET /echo/last`: what a client really sent.
async fn echo(
    State(state): State<AppState>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let _counted = state.stats.enter();
    let headers: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned().into(),
            )
        })
        .collect();
    state.stats.set_last_echo(serde_json::json!({
        "method": method.as_str(),
        "target": uri.to_string(),
        "headers": headers,
        "body": String::from_utf8_lossy(&body),
    }));
    (StatusCode::OK, body).into_response()
}

async fn echo_last(State(state): State<AppState>) -> Response {
    Json(state.stats.last_echo()).into_response()
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(serde_json::json!({
            "error": "no such endpoint (allowed: GET /add?delay=MS, /delay/DURATION, /bytes/N, /status/CODE, /stats, /echo/last; POST /stats/reset; any method /echo)"
        })),
    )
        .into_response()
}
