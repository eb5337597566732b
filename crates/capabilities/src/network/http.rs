//! Outgoing HTTP (`wasi:http/outgoing-handler`): requests to the `host:port` pairs in
//! `grants.network`, nothing else.
//!
//! The same grant as raw sockets, checked the same way: the request's authority is
//! resolved and *every* address it resolves to must be one the grant resolved to
//! when the instance started, or the request is refused with `HTTP-request-denied`
//! (and logged with the connector's key). Then the instance's [`Pool`] sends it, on a
//! connection kept from an earlier request to that server or a new one, HTTP/1.1
//! (TLS for `https`). A new connection resolves the name once more; a DNS answer
//! changing between the check and the connect is the one gap left, and only for
//! names (a grant of an IP address has none).

use std::net::SocketAddr;
use std::sync::Arc;

use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::pool::Pool;
use super::sockets::AllowedAddrs;

/// The `wasi:http` hooks of one instance.
pub struct HttpGrant {
    allowed: Arc<AllowedAddrs>,
    pool: Arc<Pool>,
    span: tracing::Span,
}

impl HttpGrant {
    /// Requests may go to `allowed`; refusals are logged in the current span.
    pub fn new(allowed: Arc<AllowedAddrs>) -> Self {
        HttpGrant { allowed, pool: Arc::default(), span: tracing::Span::current() }
    }
}

type ResponseFuture = Box<
    dyn Future<Output = Result<(http::Response<WasiBody>, Box<dyn Future<Output = Result<(), Error>> + Send>), Error>>
        + Send,
>;

impl WasiHttpHooks for HttpGrant {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_errors: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> ResponseFuture {
        let allowed = self.allowed.clone();
        let pool = self.pool.clone();
        let span = self.span.clone();
        Box::new(async move {
            let (host, port) = destination(request.uri()).ok_or(Error::HttpRequestUriInvalid)?;
            let addrs: Vec<SocketAddr> = match tokio::net::lookup_host((host.as_str(), port)).await {
                Ok(addrs) => addrs.collect(),
                Err(_) => Vec::new(),
            };
            if addrs.is_empty() || !addrs.iter().all(|addr| allowed.contains(addr)) {
                let _entered = span.enter();
                tracing::warn!(
                    target: "ferry::grants",
                    "denied: HTTP request to {host}:{port} ({addrs:?}) is not granted (grants.network)",
                );
                return Err(Error::HttpRequestDenied);
            }
            let response = pool.send(request, options).await?;
            // The connection's I/O runs in a task of its own (see `pool`): nothing
            // is left for the caller to drive.
            let io: Box<dyn Future<Output = Result<(), Error>> + Send> = Box::new(async { Ok(()) });
            Ok((response, io))
        })
    }
}

/// The host and port a request goes to (the scheme's default port if none).
fn destination(uri: &http::Uri) -> Option<(String, u16)> {
    let authority = uri.authority()?;
    let default_port = if uri.scheme() == Some(&http::uri::Scheme::HTTPS) { 443 } else { 80 };
    let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_string();
    Some((host, authority.port_u16().unwrap_or(default_port)))
}

#[cfg(test)]
mod tests {
    use super::destination;

    #[test]
    fn the_destination_has_the_default_port_of_its_scheme() {
        let at = |uri: &str| destination(&uri.parse().unwrap());
        assert_eq!(at("http://example.com/x"), Some(("example.com".into(), 80)));
        assert_eq!(at("https://example.com/x"), Some(("example.com".into(), 443)));
        assert_eq!(at("http://127.0.0.1:9000/"), Some(("127.0.0.1".into(), 9000)));
        assert_eq!(at("http://[::1]:9000/"), Some(("::1".into(), 9000)));
        assert_eq!(at("/relative"), None);
    }
}
