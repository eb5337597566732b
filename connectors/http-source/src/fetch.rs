//! How requests go out: `wasi:http` in the component, a fake in the native tests.

use ferry_guest::http::{HttpError, Request, Response};

pub trait Transport {
    fn send(&mut self, request: &Request) -> Result<Response, HttpError>;
}

/// The host's `wasi:http`.
#[derive(Default)]
pub struct Wasi;

impl Transport for Wasi {
    fn send(&mut self, request: &Request) -> Result<Response, HttpError> {
        ferry_guest::http::send(request)
    }
}
