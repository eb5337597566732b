//! How `ferry top` reads the HTTP API of the ferry it watches: one `GET /stats` per
//! refresh, with the config's API key, over HTTPS when `[http] tls` is set.
//!
//! The client is a few lines over a blocking socket rather than an HTTP library: it
//! asks one fixed question of a server it knows (ferry's own API), once a second.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use rustls_pki_types::ServerName;
use serde::Deserialize;

use ferry_api::{API_KEY_HEADER, certificate_chain};
use ferry_config::HttpConfig;
use ferry_contract::settings::split_host_port;

/// How long connecting, and then each read, may take: the API answers at once.
const TIMEOUT: Duration = Duration::from_secs(3);

/// The most of an answer read: `/stats` of a few hundred connectors is far less.
const MAX_ANSWER_BYTES: u64 = 16 * 1024 * 1024;

/// Why the API gave no figures.
#[derive(Debug)]
pub(super) enum ApiError {
    /// Not there, or not answering as ferry's API does: the status file may still tell.
    Unavailable(String),
    /// It refused the API key (401): an operator's mistake to report, not to work around.
    Unauthorized(String),
}

/// The API of a ferry, as its `[http]` says where it is.
pub(super) struct ApiClient {
    /// Where to connect (`host:port`).
    connect_to: String,
    /// What to show, `http://...` or `https://...`.
    pub url: String,
    key: Option<String>,
    tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
}

/// `/stats`: the figures `ferry top` shows.
#[derive(Debug, Deserialize)]
pub(super) struct Stats {
    pub process_id: u32,
    #[serde(default)]
    pub connectors: Vec<StatsConnector>,
}

/// One connector of `/stats` (see `ferry_api::stats`).
#[derive(Debug, Deserialize)]
pub(super) struct StatsConnector {
    pub key: String,
    pub connector_type: String,
    #[serde(default)]
    pub tenant: Option<String>,
    /// Its phase, or `disabled` / `not-started`.
    pub status: String,
    #[serde(default)]
    pub batches: u64,
    #[serde(default)]
    pub nacks: u64,
    #[serde(default)]
    pub traps: u64,
    #[serde(default)]
    pub restarts: u64,
    #[serde(default)]
    pub dead_lettered: u64,
    /// A source's messages delivered.
    #[serde(default)]
    pub messages_sent: Option<u64>,
    /// A sink's messages written (its dead letters are `dead_lettered`).
    #[serde(default)]
    pub messages_processed: Option<u64>,
    #[serde(default)]
    pub last_error: Option<String>,
}

impl ApiClient {
    /// The client of the API `http` describes, with its key and certificate read now;
    /// the error names the key of `[http]` that could not be read.
    pub fn new(http: &HttpConfig) -> Result<ApiClient, String> {
        let (host, port) = split_host_port(&http.address).map_err(|p| format!("[http] address: {p}"))?;
        let host = reachable(host);
        let connect_to = match host.parse::<Ipv6Addr>() {
            Ok(_) => format!("[{host}]:{port}"),
            Err(_) => format!("{host}:{port}"),
        };
        let key = http.read_api_key()?;
        let tls = match &http.tls {
            None => None,
            Some(tls) => {
                let mut roots = RootCertStore::empty();
                for certificate in certificate_chain(tls)? {
                    roots.add(certificate).map_err(|e| format!("[http] tls.cert_file: cannot trust it: {e}"))?;
                }
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let config = ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("[http] tls: {e}"))?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                Some((Arc::new(config), server_name(&host)?))
            }
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        Ok(ApiClient { url: format!("{scheme}://{connect_to}"), connect_to, key, tls })
    }

    /// `GET /stats`.
    pub fn stats(&self) -> Result<Stats, ApiError> {
        let unavailable = |problem: String| ApiError::Unavailable(problem);
        let answer = self.get("/stats").map_err(|e| unavailable(e.to_string()))?;
        match answer.status {
            200 => serde_json::from_str(&answer.body)
                .map_err(|e| unavailable(format!("GET /stats answered what is not ferry's /stats: {e}"))),
            401 => Err(ApiError::Unauthorized(format!(
                "the API at {} refused the key of [http] api_key (401: {}): is it the key this ferry was started \
                 with?",
                self.url,
                answer.body.trim()
            ))),
            status => Err(unavailable(format!("GET /stats answered {status}: {}", answer.body.trim()))),
        }
    }

    fn get(&self, path: &str) -> std::io::Result<Answer> {
        let address = self
            .connect_to
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| std::io::Error::other(format!("{} resolves to no address", self.connect_to)))?;
        let stream = TcpStream::connect_timeout(&address, TIMEOUT)?;
        stream.set_read_timeout(Some(TIMEOUT))?;
        stream.set_write_timeout(Some(TIMEOUT))?;
        // HTTP/1.0: the server closes the connection after its answer and sends the
        // body whole (never chunked), so reading to the end is reading the answer.
        let mut request = format!("GET {path} HTTP/1.0\r\nHost: {}\r\n", self.connect_to);
        if let Some(key) = &self.key {
            request.push_str(&format!("{API_KEY_HEADER}: {key}\r\n"));
        }
        request.push_str("\r\n");
        let raw = match &self.tls {
            None => exchange(stream, &request)?,
            Some((config, name)) => {
                let connection = ClientConnection::new(config.clone(), name.clone()).map_err(std::io::Error::other)?;
                exchange(StreamOwned::new(connection, stream), &request)?
            }
        };
        Answer::parse(&raw)
            .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {:.200}", String::from_utf8_lossy(&raw))))
    }
}

/// Where to reach a server listening on `host`: one listening on every address is
/// reached on loopback.
fn reachable(host: &str) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) if ip.is_unspecified() => Ipv4Addr::LOCALHOST.to_string(),
        Ok(IpAddr::V6(ip)) if ip.is_unspecified() => Ipv6Addr::LOCALHOST.to_string(),
        _ => host.to_string(),
    }
}

/// The name the certificate must be valid for. On loopback it is `localhost`: that
/// is what a certificate for a local API names, and the certificate trusted is the
/// one this ferry serves (its `cert_file`), so the name adds nothing there.
fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    let loopback = host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    let name = if loopback { "localhost" } else { host };
    ServerName::try_from(name.to_string()).map_err(|e| format!("[http] address: {name:?} is not a server name: {e}"))
}

/// Send `request` and read until the server closes the connection.
fn exchange(mut stream: impl Read + Write, request: &str) -> std::io::Result<Vec<u8>> {
    stream.write_all(request.as_bytes())?;
    stream.flush()?;
    let mut raw = Vec::new();
    match stream.take(MAX_ANSWER_BYTES).read_to_end(&mut raw) {
        Ok(_) => Ok(raw),
        // A TLS server that closes without its close_notify has still answered whole
        // (HTTP/1.0 ends the body at the close).
        Err(e) if e.kind() == ErrorKind::UnexpectedEof && !raw.is_empty() => Ok(raw),
        Err(e) => Err(e),
    }
}

/// An HTTP answer: its status and body.
#[derive(Debug, PartialEq)]
struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    fn parse(raw: &[u8]) -> Option<Answer> {
        let text = String::from_utf8_lossy(raw);
        let (head, body) = text.split_once("\r\n\r\n")?;
        let status_line = head.lines().next()?;
        if !status_line.starts_with("HTTP/") {
            return None;
        }
        let status = status_line.split_whitespace().nth(1)?.parse().ok()?;
        Some(Answer { status, body: body.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    /// A server that answers one request with `answer`, and hands back the request.
    fn serve_once(answer: &'static str) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut buffer = [0u8; 1024];
            while !request.ends_with(b"\r\n\r\n") {
                let n = stream.read(&mut buffer).unwrap();
                assert!(n > 0, "the client closed before its request ended");
                request.extend_from_slice(&buffer[..n]);
            }
            stream.write_all(answer.as_bytes()).unwrap();
            String::from_utf8(request).unwrap()
        });
        (address, server)
    }

    fn client(address: &str, key: Option<&str>) -> ApiClient {
        ApiClient { connect_to: address.into(), url: format!("http://{address}"), key: key.map(Into::into), tls: None }
    }

    #[test]
    fn reads_stats_sending_the_key() {
        let (address, server) = serve_once(
            "HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n{\"process_id\": 42, \"connectors\": [\
             {\"key\": \"feed\", \"connector_type\": \"source\", \"status\": \"running\", \"batches\": 3, \
             \"messages_sent\": 15, \"traps\": 1}]}",
        );
        let stats = client(&address, Some("k3y")).stats().unwrap();
        let request = server.join().unwrap();
        assert!(request.starts_with("GET /stats HTTP/1.0\r\n"), "{request}");
        assert!(request.contains("\r\napi-key: k3y\r\n"), "{request}");
        assert_eq!(stats.process_id, 42);
        let feed = &stats.connectors[0];
        assert_eq!((feed.key.as_str(), feed.status.as_str()), ("feed", "running"));
        assert_eq!((feed.batches, feed.messages_sent, feed.traps, feed.nacks), (3, Some(15), 1, 0));
    }

    #[test]
    fn a_refused_key_is_named_as_such() {
        let (address, server) = serve_once(
            "HTTP/1.0 401 Unauthorized\r\n\r\n{\"error\": \"the `api-key` header does not hold the API key\"}",
        );
        let error = client(&address, Some("wrong")).stats().unwrap_err();
        server.join().unwrap();
        let ApiError::Unauthorized(message) = error else { panic!("not a refusal: {error:?}") };
        assert!(message.contains("refused the key of [http] api_key (401"), "{message}");
        assert!(message.contains("does not hold the API key"), "the server's word is passed on: {message}");
        assert!(!message.contains("wrong"), "the key itself is never shown: {message}");
    }

    #[test]
    fn no_server_or_another_server_is_unavailable() {
        // A port nothing listens on: bind one, then free it.
        let address = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
        assert!(matches!(client(&address, None).stats(), Err(ApiError::Unavailable(_))));

        let (address, server) = serve_once("HTTP/1.0 404 Not Found\r\n\r\nno such page");
        let error = client(&address, None).stats().unwrap_err();
        server.join().unwrap();
        let ApiError::Unavailable(message) = error else { panic!("{error:?}") };
        assert!(message.contains("answered 404: no such page"), "{message}");

        let (address, server) = serve_once("HTTP/1.0 200 OK\r\n\r\n<html>hello</html>");
        let error = client(&address, None).stats().unwrap_err();
        server.join().unwrap();
        assert!(matches!(&error, ApiError::Unavailable(m) if m.contains("not ferry's /stats")), "{error:?}");
    }

    #[test]
    fn a_server_listening_everywhere_is_reached_on_loopback_and_named_localhost() {
        assert_eq!(reachable("0.0.0.0"), "127.0.0.1");
        assert_eq!(reachable("::"), "::1");
        assert_eq!(reachable("api.example"), "api.example");
        assert_eq!(server_name("127.0.0.1").unwrap(), ServerName::try_from("localhost").unwrap());
        assert_eq!(server_name("api.example").unwrap(), ServerName::try_from("api.example").unwrap());
    }

    #[test]
    fn answers_are_parsed_or_refused() {
        assert_eq!(
            Answer::parse(b"HTTP/1.1 200 OK\r\na: b\r\n\r\n{}"),
            Some(Answer { status: 200, body: "{}".into() })
        );
        assert_eq!(Answer::parse(b"SSH-2.0-OpenSSH\r\n\r\n"), None);
        assert_eq!(Answer::parse(b"HTTP/1.1 200 OK\r\n"), None, "no end of the head");
    }
}
