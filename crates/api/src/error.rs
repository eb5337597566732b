//! Errors as JSON, `{"error": "..."}`, with the status code that goes with them. The
//! message names what is wrong (the key, the role, the header), for a person to read.

use axum::Json;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answer.
#[derive(Debug)]
pub(super) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::NOT_FOUND, message: message.into() }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::BAD_REQUEST, message: message.into() }
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::UNAUTHORIZED, message: message.into() }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::INTERNAL_SERVER_ERROR, message: message.into() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "error": self.message }))).into_response()
    }
}

/// A path no route has.
pub(super) async fn no_such_endpoint(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found(format!("no endpoint {method} {}", uri.path()))
}

/// A route asked with a method it does not answer.
pub(super) async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let message = format!("{} does not answer {method}", uri.path());
    (StatusCode::METHOD_NOT_ALLOWED, Json(json!({ "error": message }))).into_response()
}
