//! The `api-key` header: with `[http] api_key` set, a request without the key, or
//! with another one, gets 401 and reaches no handler.
//!
//! The comparison takes the same time wherever the first wrong byte is, so the
//! key cannot be guessed byte by byte from response times (only its length can be
//! told apart, which `subtle` does not hide and a long random key makes useless).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::error::ApiError;

/// The header carrying the key, as in Iggy's connectors runtime.
pub const HEADER: &str = "api-key";

/// Middleware: pass the request on only if it carries `key` (any request when there
/// is no key).
pub(super) async fn require_key(State(key): State<Option<Arc<str>>>, request: Request, next: Next) -> Response {
    if let Some(expected) = key.as_deref() {
        let given = request.headers().get(HEADER).map(|value| value.as_bytes());
        match given {
            None => return ApiError::unauthorized(format!("missing the `{HEADER}` header")).into_response(),
            Some(given) if !same(given, expected.as_bytes()) => {
                return ApiError::unauthorized(format!("the `{HEADER}` header does not hold the API key"))
                    .into_response();
            }
            Some(_) => {}
        }
    }
    next.run(request).await
}

/// Whether `given` is `expected`, in time independent of where they differ.
fn same(given: &[u8], expected: &[u8]) -> bool {
    given.ct_eq(expected).into()
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn only_the_exact_key_matches() {
        assert!(same(b"k3y-value", b"k3y-value"));
        assert!(!same(b"k3y-valuE", b"k3y-value"));
        assert!(!same(b"k3y-valu", b"k3y-value"), "a prefix is not the key");
        assert!(!same(b"", b"k3y-value"));
    }
}
