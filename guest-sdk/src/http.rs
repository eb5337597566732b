//! Outgoing HTTP requests through `wasi:http/outgoing-handler`, for connectors that
//! speak HTTP (a REST API, InfluxDB, ClickHouse): the host makes the connection
//! after checking `grants.network`, so a request to a host not granted fails, as a
//! value, without a connection attempt.
//!
//! ```ignore
//! let response = ferry_guest::http::send(&Request::post("http://api:8080/ingest", body))?;
//! if response.status == 200 { ... }
//! ```
//!
//! One request at a time, the whole body in memory both ways (an answer's up to [`MAX_BODY`]): what a connector
//! writing batches needs, and no more.

use std::time::Duration;

/// A request to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `HEAD`, `POST`, `PUT`, `PATCH`, `DELETE`, or another token.
    pub method: String,
    /// `http://host:port/path?query` or `https://...`.
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// How long to wait for the connection and then for each part of the answer
    /// (none: the host's defaults).
    pub timeout: Option<Duration>,
}

impl Request {
    /// A request of `method` to `url`, with no headers and no body.
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Request {
        Request { method: method.into(), url: url.into(), headers: Vec::new(), body: Vec::new(), timeout: None }
    }

    /// A `POST` of `body` to `url`.
    pub fn post(url: impl Into<String>, body: Vec<u8>) -> Request {
        Request { body, ..Request::new("POST", url) }
    }

    /// The same request with header `name: value` added.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Request {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// The most of an answer's body [`send`] keeps: a server cannot fill the guest's
/// memory with one answer. The rest is read and let go.
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Names in lower case, as HTTP/2 sends them.
    pub headers: Vec<(String, String)>,
    /// At most [`MAX_BODY`] bytes of it.
    pub body: Vec<u8>,
}

impl Response {
    /// The value of header `name` (any case), if it has one.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The request itself is wrong (a URL that is not one, a header not allowed): it
    /// would fail again.
    Invalid(String),
    /// The host refused it: the address is not in `grants.network`.
    Denied(String),
    /// No answer came: nobody listening, a reset, a time-out, a TLS failure. Worth
    /// trying again later.
    Failed(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Invalid(why) => write!(f, "invalid request: {why}"),
            HttpError::Denied(why) => write!(f, "refused by the host: {why}"),
            HttpError::Failed(why) => write!(f, "no answer: {why}"),
        }
    }
}

/// The scheme, the authority and the path with its query of `url`.
pub fn split_url(url: &str) -> Result<(&str, &str, String), HttpError> {
    let invalid = || HttpError::Invalid(format!("{url:?} is not an http:// or https:// URL"));
    let (scheme, rest) = url.split_once("://").ok_or_else(invalid)?;
    if !matches!(scheme, "http" | "https") {
        return Err(invalid());
    }
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err(invalid());
    }
    let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
    Ok((scheme, authority, path))
}

/// Send `request` and wait for the whole answer.
#[cfg(target_arch = "wasm32")]
pub fn send(request: &Request) -> Result<Response, HttpError> {
    use wasi::http::outgoing_handler;
    use wasi::http::types::{
        ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
    };
    use wasi::io::streams::StreamError;

    let (scheme, authority, path) = split_url(&request.url)?;
    let invalid = |what: &str| HttpError::Invalid(what.to_string());
    let headers = Fields::new();
    for (name, value) in &request.headers {
        headers.append(name, value.as_bytes()).map_err(|e| HttpError::Invalid(format!("header {name:?}: {e:?}")))?;
    }
    // The body's length, known here: without it the body goes chunked, a frame per
    // write into the stream, which some servers read far slower (ClickHouse took an
    // insert in twice the time).
    if !request.body.is_empty() && !request.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-length"))
    {
        let length = request.body.len().to_string();
        headers
            .append("content-length", length.as_bytes())
            .map_err(|e| HttpError::Invalid(format!("content-length: {e:?}")))?;
    }
    let outgoing = OutgoingRequest::new(headers);
    let method = match request.method.to_ascii_uppercase().as_str() {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "PATCH" => Method::Patch,
        "DELETE" => Method::Delete,
        "OPTIONS" => Method::Options,
        other => Method::Other(other.to_string()),
    };
    outgoing.set_method(&method).map_err(|()| invalid("the method"))?;
    let scheme = if scheme == "https" { Scheme::Https } else { Scheme::Http };
    outgoing.set_scheme(Some(&scheme)).map_err(|()| invalid("the scheme"))?;
    outgoing.set_authority(Some(authority)).map_err(|()| invalid("the authority"))?;
    outgoing.set_path_with_query(Some(&path)).map_err(|()| invalid("the path"))?;
    let options = request.timeout.map(|timeout| {
        let options = RequestOptions::new();
        let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        let _ = options.set_connect_timeout(Some(nanos));
        let _ = options.set_first_byte_timeout(Some(nanos));
        let _ = options.set_between_bytes_timeout(Some(nanos));
        options
    });
    let body = outgoing.body().map_err(|()| invalid("the request has no body"))?;
    let pending = outgoing_handler::handle(outgoing, options).map_err(|e| match e {
        ErrorCode::HttpRequestDenied => HttpError::Denied(format!("{} is not in grants.network", authority)),
        other => HttpError::Failed(format!("{other:?}")),
    })?;
    {
        // As much at a time as the stream takes (`blocking_write_and_flush` takes
        // 4 KiB a call, each a call into the host), then one flush.
        let stream = body.write().map_err(|()| invalid("the request body was taken"))?;
        let failed = |e| HttpError::Failed(format!("sending the body: {e:?}"));
        let mut rest = request.body.as_slice();
        while !rest.is_empty() {
            let permitted = stream.check_write().map_err(failed)? as usize;
            if permitted == 0 {
                stream.subscribe().block();
                continue;
            }
            let (now, later) = rest.split_at(permitted.min(rest.len()));
            stream.write(now).map_err(failed)?;
            rest = later;
        }
        stream.blocking_flush().map_err(failed)?;
    }
    OutgoingBody::finish(body, None).map_err(|e| HttpError::Failed(format!("finishing the body: {e:?}")))?;
    let ready = pending.subscribe();
    ready.block();
    drop(ready);
    let response = pending
        .get()
        .ok_or_else(|| HttpError::Failed("no answer after it was ready".into()))?
        .map_err(|()| HttpError::Failed("the answer was taken twice".into()))?
        .map_err(|e| match e {
            ErrorCode::HttpRequestDenied => HttpError::Denied(format!("{authority} is not in grants.network")),
            other => HttpError::Failed(format!("{other:?}")),
        })?;
    let status = response.status();
    let headers = response
        .headers()
        .entries()
        .into_iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), String::from_utf8_lossy(&value).into_owned()))
        .collect();
    let incoming = response.consume().map_err(|()| HttpError::Failed("the answer's body was taken".into()))?;
    let mut body = Vec::new();
    {
        let stream = incoming.stream().map_err(|()| HttpError::Failed("the answer's body was taken".into()))?;
        loop {
            match stream.blocking_read(64 * 1024) {
                // The rest of a body past the bound is not kept (see `MAX_BODY`).
                Ok(chunk) => body.extend(chunk.into_iter().take(MAX_BODY.saturating_sub(body.len()))),
                Err(StreamError::Closed) => break,
                Err(e) => return Err(HttpError::Failed(format!("reading the answer: {e:?}"))),
            }
        }
    }
    drop(IncomingBody::finish(incoming));
    Ok(Response { status, headers, body })
}

/// Outside a component there is no `wasi:http`: a connector's native tests give it a
/// transport of their own.
#[cfg(not(target_arch = "wasm32"))]
pub fn send(_request: &Request) -> Result<Response, HttpError> {
    Err(HttpError::Failed("wasi:http is only there inside a component".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_split_into_scheme_authority_and_path() {
        assert_eq!(split_url("http://api:8080/in?x=1"), Ok(("http", "api:8080", "/in?x=1".into())));
        assert_eq!(split_url("https://api"), Ok(("https", "api", "/".into())));
        assert_eq!(split_url("http://api?q"), Ok(("http", "api", "/?q".into())));
        assert!(matches!(split_url("ftp://x/"), Err(HttpError::Invalid(_))));
        assert!(matches!(split_url("api:8080/in"), Err(HttpError::Invalid(_))));
        assert!(matches!(split_url("http:///in"), Err(HttpError::Invalid(_))));
        let request = Request::post("http://a/b", b"{}".to_vec()).header("X-A", "1");
        assert_eq!((request.method.as_str(), request.headers.len()), ("POST", 1));
    }
}
