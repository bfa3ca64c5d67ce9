//! The server's error answers: one JSON shape (`{"error": WHY}`) for the connection layer's
//! refusals (the in-flight cap, a bad head) and the routes' errors alike.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// The JSON body of an error the server sends: `{"error": WHY}`.
pub fn error_body(error: &str) -> Vec<u8> {
    serde_json::json!({ "error": error })
        .to_string()
        .into_bytes()
}

/// An error answer: `status` with `{"error": WHY}`.
pub fn error_response(status: StatusCode, error: String) -> Response {
    (status, Json(serde_json::json!({ "error": error }))).into_response()
}
