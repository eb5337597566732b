//! A small HTTP/1.1 client for the suite's tests of ferry's HTTP API: one GET per
//! connection (`Connection: close`), the whole answer read back.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::PATIENCE;

/// An answer.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Header names in lower case, with their values.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// The body as JSON (failing the test, showing the body, if it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// `GET path` from the server at `address` (`host:port`), with these extra headers.
pub fn get(address: &str, path: &str, headers: &[(&str, &str)]) -> std::io::Result<Response> {
    request(address, "GET", path, headers)
}

/// `METHOD path` from the server at `address`.
pub fn request(address: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> std::io::Result<Response> {
    exchange(connect(address)?, address, method, path, headers)
}

/// `GET path` over HTTPS from the server at `address`, trusting only the certificate
/// `ca` (DER) for the name `localhost`.
pub fn get_tls(address: &str, path: &str, headers: &[(&str, &str)], ca: &[u8]) -> std::io::Result<Response> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls_pki_types::CertificateDer::from(ca.to_vec())).map_err(std::io::Error::other)?;
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(std::io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from("localhost").map_err(std::io::Error::other)?;
    let connection = rustls::ClientConnection::new(Arc::new(config), name).map_err(std::io::Error::other)?;
    exchange(rustls::StreamOwned::new(connection, connect(address)?), address, "GET", path, headers)
}

fn connect(address: &str) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    Ok(stream)
}

/// Send one request on `stream` and read the answer until the server closes it.
fn exchange(
    mut stream: impl Read + Write,
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Response> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse(&raw).ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {}", String::from_utf8_lossy(&raw))))
}

fn parse(raw: &[u8]) -> Option<Response> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    Some(Response { status, headers, body: body.to_string() })
}

/// GET `path` again and again until `done` holds for the answer, and return it; fail
/// the test after [`PATIENCE`], showing the last answer. HTTP cannot tell a client
/// when something changed, so a test that waits for a state shown only by the API
/// asks for it; every other wait in the suite is on an event.
pub fn get_until(
    address: &str,
    path: &str,
    headers: &[(&str, &str)],
    mut done: impl FnMut(&Response) -> bool,
) -> Response {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let answer = get(address, path, headers);
        match &answer {
            Ok(response) if done(response) => return response.clone(),
            _ if Instant::now() > deadline => panic!("GET {path} never gave the answer awaited; the last: {answer:?}"),
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
