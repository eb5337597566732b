//! How `ferry top` reads the HTTP API of the ferry it watches: one `GET /stats` per
//! refresh, with the config's API key, over HTTPS when `[http] tls` is set.
//!
//! The requests are reqwest's (blocking: top is a loop on one thread). Over HTTPS the
//! only certificate trusted is the one the ferry serves (its `tls.cert_file`), checked
//! for the name `localhost` when the API listens on loopback.

use std::io::Read as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::blocking::Client;
use reqwest::header::{HeaderMap, HeaderValue};
use serde::Deserialize;

use ferry_api::{API_KEY_HEADER, certificate_chain};
use ferry_config::HttpConfig;
use ferry_contract::settings::split_host_port;

/// How long connecting, and then the whole request, may take: the API answers at once.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const TIMEOUT: Duration = Duration::from_secs(5);

/// The most of an answer read: `/stats` of a few hundred connectors is far less.
const MAX_ANSWER_BYTES: u64 = 16 * 1024 * 1024;

/// The most characters of an error's body put in a message.
const MAX_SHOWN_CHARS: usize = 300;

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
    /// What to show, `http://host:port` or `https://host:port`.
    pub url: String,
    /// What is asked: `url`'s `/stats`, or over TLS on loopback `localhost`'s (which
    /// the client resolves to the loopback address), so that the certificate is
    /// checked for that name.
    stats_url: String,
    client: Client,
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
        let authority = match host.parse::<Ipv6Addr>() {
            Ok(_) => format!("[{host}]:{port}"),
            Err(_) => format!("{host}:{port}"),
        };
        let mut headers = HeaderMap::new();
        if let Some(key) = http.read_api_key()? {
            let mut value = HeaderValue::from_str(&key).map_err(
                |_| "[http] api_key: it is not a valid header value (a line break, or a control character?)",
            )?;
            value.set_sensitive(true);
            headers.insert(API_KEY_HEADER, value);
        }
        let builder = Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(TIMEOUT)
            // The API is the ferry's own, where the config says: never through a proxy.
            .no_proxy()
            .default_headers(headers);
        let (url, stats_url, builder) = match &http.tls {
            None => {
                let url = format!("http://{authority}");
                (url.clone(), format!("{url}/stats"), builder)
            }
            Some(tls) => {
                let certificates = certificate_chain(tls)?
                    .iter()
                    .map(|der| reqwest::Certificate::from_der(der))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("[http] tls.cert_file: {}: cannot trust it: {e}", tls.cert_file.display()))?;
                let builder = builder.tls_certs_only(certificates);
                let url = format!("https://{authority}");
                match loopback(&host, port) {
                    // Asked as `localhost`, connected to the loopback address.
                    Some(address) => {
                        (url, format!("https://localhost:{port}/stats"), builder.resolve("localhost", address))
                    }
                    None => (url.clone(), format!("{url}/stats"), builder),
                }
            }
        };
        let client = builder.build().map_err(|e| format!("cannot make an HTTP client for {url}: {}", described(&e)))?;
        Ok(ApiClient { url, stats_url, client })
    }

    /// `GET /stats`.
    pub fn stats(&self) -> Result<Stats, ApiError> {
        let unavailable = ApiError::Unavailable;
        let response = self.client.get(&self.stats_url).send().map_err(|e| unavailable(described(&e)))?;
        let status = response.status();
        let mut body = String::new();
        response
            .take(MAX_ANSWER_BYTES)
            .read_to_string(&mut body)
            .map_err(|e| unavailable(format!("GET /stats: reading the answer: {e}")))?;
        match status {
            StatusCode::OK => serde_json::from_str(&body)
                .map_err(|e| unavailable(format!("GET /stats answered what is not ferry's /stats: {e}"))),
            StatusCode::UNAUTHORIZED => Err(ApiError::Unauthorized(format!(
                "the API at {} refused the key of [http] api_key (401: {}): is it the key this ferry was started \
                 with?",
                self.url,
                shown(&body)
            ))),
            status => Err(unavailable(format!("GET /stats answered {}: {}", status.as_u16(), shown(&body)))),
        }
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

/// The loopback address `host` is, with `port`. On loopback the certificate is
/// checked for `localhost`: that is what a certificate for a local API names, and the
/// certificate trusted is the one this ferry serves, so the name adds nothing there.
fn loopback(host: &str, port: u16) -> Option<SocketAddr> {
    let ip = host.parse::<IpAddr>().ok().filter(IpAddr::is_loopback)?;
    (ip, port).to_socket_addrs().ok()?.next()
}

/// An error body as it goes into a message: on one line, cut.
fn shown(body: &str) -> String {
    let line: String = body.trim().chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    match line.char_indices().nth(MAX_SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

/// reqwest's message with its causes (`error sending request for url (...): ...:
/// Connection refused`).
fn described(error: &reqwest::Error) -> String {
    let mut problem = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        problem.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    problem
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::net::TcpListener;

    use ferry_config::HttpTls;
    use ferry_contract::settings::SecretSource;

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

    fn http(address: &str) -> HttpConfig {
        toml::from_str(&format!("address = {address:?}")).unwrap()
    }

    /// The client of the API at `address`, sending `key` (read from a file, as a
    /// config's `api_key = { file = ... }` is).
    fn client(address: &str, key: Option<&str>) -> ApiClient {
        let mut http = http(address);
        let dir = tempfile::tempdir().unwrap();
        if let Some(key) = key {
            let file = dir.path().join("api-key");
            std::fs::write(&file, format!("{key}\n")).unwrap();
            http.api_key = Some(SecretSource::File(file));
        }
        ApiClient::new(&http).unwrap()
    }

    #[test]
    fn reads_stats_sending_the_key() {
        let (address, server) = serve_once(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{\"process_id\": 42, \
             \"connectors\": [{\"key\": \"feed\", \"connector_type\": \"source\", \"status\": \"running\", \
             \"batches\": 3, \"messages_sent\": 15, \"traps\": 1}]}",
        );
        let api = client(&address, Some("k3y"));
        assert_eq!(api.url, format!("http://{address}"));
        let stats = api.stats().unwrap();
        let request = server.join().unwrap();
        assert!(request.starts_with("GET /stats HTTP/1.1\r\n"), "{request}");
        assert!(request.to_ascii_lowercase().contains("\r\napi-key: k3y\r\n"), "{request}");
        assert_eq!(stats.process_id, 42);
        let feed = &stats.connectors[0];
        assert_eq!((feed.key.as_str(), feed.status.as_str()), ("feed", "running"));
        assert_eq!((feed.batches, feed.messages_sent, feed.traps, feed.nacks), (3, Some(15), 1, 0));
    }

    #[test]
    fn a_refused_key_is_named_as_such() {
        let (address, server) = serve_once(
            "HTTP/1.1 401 Unauthorized\r\nconnection: close\r\n\r\n{\"error\": \"the `api-key` header does not \
             hold the API key\"}",
        );
        let error = client(&address, Some("wrong")).stats().unwrap_err();
        server.join().unwrap();
        let ApiError::Unauthorized(message) = error else { panic!("not a refusal: {error:?}") };
        assert!(message.contains(&format!("the API at http://{address} refused the key of [http] api_key (401")));
        assert!(message.contains("does not hold the API key"), "the server's word is passed on: {message}");
        assert!(!message.contains("wrong"), "the key itself is never shown: {message}");
    }

    #[test]
    fn no_server_or_another_server_is_unavailable() {
        // A port nothing listens on: bind one, then free it.
        let address = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
        let error = client(&address, None).stats().unwrap_err();
        let ApiError::Unavailable(message) = error else { panic!("{error:?}") };
        assert!(message.contains(&format!("http://{address}/stats")), "the URL is named: {message}");

        let (address, server) = serve_once("HTTP/1.1 404 Not Found\r\nconnection: close\r\n\r\nno such\npage");
        let error = client(&address, None).stats().unwrap_err();
        server.join().unwrap();
        let ApiError::Unavailable(message) = error else { panic!("{error:?}") };
        assert!(message.contains("answered 404: no such page"), "{message}");

        let (address, server) = serve_once("HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n<html>hello</html>");
        let error = client(&address, None).stats().unwrap_err();
        server.join().unwrap();
        assert!(matches!(&error, ApiError::Unavailable(m) if m.contains("not ferry's /stats")), "{error:?}");

        let (address, server) = serve_once("SSH-2.0-OpenSSH\r\n\r\n");
        let error = client(&address, None).stats().unwrap_err();
        server.join().unwrap();
        assert!(matches!(&error, ApiError::Unavailable(_)), "{error:?}");
    }

    #[test]
    fn a_server_listening_everywhere_is_reached_on_loopback_and_named_localhost() {
        assert_eq!(reachable("0.0.0.0"), "127.0.0.1");
        assert_eq!(reachable("::"), "::1");
        assert_eq!(reachable("api.example"), "api.example");
        assert_eq!(loopback("127.0.0.1", 80), Some("127.0.0.1:80".parse().unwrap()));
        assert_eq!(loopback("::1", 80), Some("[::1]:80".parse().unwrap()));
        assert_eq!(loopback("api.example", 80), None);
        assert_eq!(loopback("192.0.2.1", 80), None);
    }

    #[test]
    fn a_certificate_that_cannot_be_read_names_its_key_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("cert.pem");
        std::fs::write(&cert, "not a certificate").unwrap();
        let mut http = http("127.0.0.1:1");
        http.tls = Some(HttpTls { cert_file: cert.clone(), key_file: dir.path().join("key.pem") });
        let Err(problem) = ApiClient::new(&http) else { panic!("a file without a certificate was trusted") };
        assert!(problem.contains("[http] tls.cert_file") && problem.contains(&cert.display().to_string()), "{problem}");
    }

    #[test]
    fn error_bodies_are_shown_on_one_line_and_cut() {
        assert_eq!(shown("  a\nb\t \n"), "a b");
        let long = "é".repeat(MAX_SHOWN_CHARS + 10);
        let cut = shown(&long);
        assert_eq!(cut.chars().count(), MAX_SHOWN_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
