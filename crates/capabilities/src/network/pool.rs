//! The connections outgoing HTTP keeps alive, per instance and per server.
//!
//! wasmtime-wasi-http's default sender opens a connection for every request; a
//! guest sending one request after another (a sink's batches, a source's pages)
//! paid a TCP handshake (and a TLS one) each time, which made the HTTP sink half as
//! fast as a native client keeping one connection. Here a connection goes back to
//! the pool once its answer's body was read to its end (HTTP/1.1 cannot carry the
//! next request before that; an answer dropped unread closes its connection, and so
//! does an error answer, after which servers tend to close without saying so), and is
//! checked ready when taken again: one the server closed meanwhile is dropped, and a
//! request it could not carry is sent on a new one. At most [`IDLE_PER_SERVER`] idle
//! connections a server are kept; they close with the instance (the pool is its).
//!
//! What is sent is what the default sender sends, with its timeouts (`connect`,
//! `first-byte`, `between-bytes` from the guest's request options) and its trust:
//! the web's root certificates (`webpki-roots`).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

/// Idle connections kept a server.
const IDLE_PER_SERVER: usize = 4;
/// What the default sender waits when a guest sets no timeout.
const NO_TIMEOUT: Duration = Duration::from_secs(600);

/// Where a connection goes: TLS or not, and `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Server {
    tls: bool,
    authority: String,
}

impl Server {
    fn of(uri: &http::Uri) -> Result<Server, Error> {
        let authority = uri.authority().ok_or(Error::HttpRequestUriInvalid)?;
        let tls = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let authority = match authority.port() {
            Some(_) => authority.to_string(),
            None => format!("{authority}:{}", if tls { 443 } else { 80 }),
        };
        Ok(Server { tls, authority })
    }
}

/// A guest's request options, with the default sender's defaults.
#[derive(Clone, Copy)]
struct Timeouts {
    connect: Duration,
    first_byte: Duration,
    between_bytes: Duration,
}

impl Timeouts {
    fn of(options: Option<RequestOptions>) -> Timeouts {
        let or_default = |timeout: Option<Duration>| timeout.unwrap_or(NO_TIMEOUT);
        Timeouts {
            connect: or_default(options.and_then(|o| o.connect_timeout)),
            first_byte: or_default(options.and_then(|o| o.first_byte_timeout)),
            // Tokio's interval panics on zero.
            between_bytes: or_default(options.and_then(|o| o.between_bytes_timeout)).max(Duration::from_nanos(1)),
        }
    }
}

type Sender = SendRequest<WasiBody>;

/// One instance's idle connections.
#[derive(Default)]
pub struct Pool {
    idle: Mutex<HashMap<Server, Vec<Sender>>>,
    tls: Mutex<Option<tokio_rustls::TlsConnector>>,
}

impl Pool {
    /// Send `request` on a kept connection to its server, or a new one; the answer,
    /// whose body gives the connection back once read to its end.
    pub async fn send(
        self: &Arc<Self>,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> Result<http::Response<WasiBody>, Error> {
        let server = Server::of(request.uri())?;
        let timeouts = Timeouts::of(options);
        // The request line carries the path only (the authority is the `Host`
        // header), as to a server, not a proxy.
        let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
        *request.uri_mut() = http::Uri::builder().path_and_query(path).build().map_err(|_| Error::HttpRequestUriInvalid)?;
        let (mut sender, mut kept) = match self.take(&server, timeouts).await {
            Some(sender) => (sender, true),
            None => (self.connect(&server, timeouts).await?, false),
        };
        let response = loop {
            let sending = tokio::time::timeout(timeouts.first_byte, sender.try_send_request(request));
            match sending.await.map_err(|_| Error::ConnectionReadTimeout)? {
                Ok(response) => break response,
                // A kept connection the server closed before taking the request:
                // the request comes back unsent, and goes on a new connection.
                Err(mut failed) if kept => match failed.take_message() {
                    Some(unsent) => {
                        request = unsent;
                        sender = self.connect(&server, timeouts).await?;
                        kept = false;
                    }
                    None => return Err(Error::from(failed.into_error())),
                },
                Err(failed) => return Err(Error::from(failed.into_error())),
            }
        };
        let mut between_bytes = tokio::time::interval(timeouts.between_bytes);
        between_bytes.reset();
        // After an error a server may close the connection without saying so (it
        // stops reading what it refused): not kept, or the next request would be
        // written into a connection about to go.
        let back = (response.status().as_u16() < 400).then(|| (self.clone(), server, sender));
        Ok(response.map(|incoming| http_body_util::BodyExt::boxed_unsync(Answer { incoming, between_bytes, back })))
    }

    /// An idle connection to `server` that is ready for a request, if one is kept.
    async fn take(&self, server: &Server, timeouts: Timeouts) -> Option<Sender> {
        loop {
            let mut sender = self.idle.lock().expect("the pool's lock").get_mut(server)?.pop()?;
            // Ready at once, unless its last answer is still being wound up.
            if let Ok(Ok(())) = tokio::time::timeout(timeouts.connect, sender.ready()).await {
                return Some(sender);
            }
        }
    }

    fn give_back(&self, server: Server, sender: Sender) {
        let mut idle = self.idle.lock().expect("the pool's lock");
        let kept = idle.entry(server).or_default();
        if kept.len() < IDLE_PER_SERVER {
            kept.push(sender);
        }
    }

    /// A new connection to `server`.
    async fn connect(&self, server: &Server, timeouts: Timeouts) -> Result<Sender, Error> {
        let tcp = match tokio::time::timeout(timeouts.connect, TcpStream::connect(&server.authority)).await {
            Ok(tcp) => tcp.map_err(Error::Connect)?,
            Err(_) => return Err(Error::ConnectionTimeout),
        };
        let _ = tcp.set_nodelay(true);
        if server.tls {
            let name = server_name(&server.authority)?;
            let tls = self.tls_connector().connect(name, tcp).await.map_err(Error::Tls)?;
            handshake(tls, timeouts).await
        } else {
            handshake(tcp, timeouts).await
        }
    }

    fn tls_connector(&self) -> tokio_rustls::TlsConnector {
        let mut tls = self.tls.lock().expect("the pool's lock");
        tls.get_or_insert_with(|| {
            let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.into() };
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("ring supports the default protocol versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
            tokio_rustls::TlsConnector::from(Arc::new(config))
        })
        .clone()
    }
}

/// HTTP/1.1 over `io`, its I/O driven by a task of its own until the last handle
/// to it is dropped (its error reaches the request or the body reading from it).
async fn handshake<S>(io: S, timeouts: Timeouts) -> Result<Sender, Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let handshake = hyper::client::conn::http1::handshake(TokioIo::new(io));
    let (sender, connection) =
        tokio::time::timeout(timeouts.connect, handshake).await.map_err(|_| Error::ConnectionTimeout)??;
    tokio::spawn(connection);
    Ok(sender)
}

/// The name a server's certificate must carry: `host` of `host:port` (an IP address
/// as one).
fn server_name(authority: &str) -> Result<rustls::pki_types::ServerName<'static>, Error> {
    if let Ok(addr) = authority.parse::<std::net::SocketAddr>() {
        return Ok(rustls::pki_types::ServerName::from(addr.ip()));
    }
    let host = authority.rsplit_once(':').map_or(authority, |(host, _)| host);
    rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|_| Error::HttpRequestUriInvalid)
}

/// An answer's body: the `between-bytes` timeout, and its connection given back to
/// the pool when the body was read to its end.
struct Answer {
    incoming: Incoming,
    between_bytes: tokio::time::Interval,
    back: Option<(Arc<Pool>, Server, Sender)>,
}

impl Body for Answer {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.incoming).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.between_bytes.reset();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.back = None;
                Poll::Ready(Some(Err(if e.is_timeout() { Error::HttpResponseTimeout } else { Error::from(e) })))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                ready!(this.between_bytes.poll_tick(cx));
                this.back = None;
                Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        if let Some((pool, server, sender)) = self.back.take()
            && self.incoming.is_end_stream()
        {
            pool.give_back(server, sender);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server on a free port answering every request `status` and `ok`, keeping
    /// the connection unless `close` (then it says `Connection: close` and closes
    /// it); how many connections it took.
    async fn server(status: u16, close: bool) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut read = Vec::new();
                    let mut buffer = [0u8; 4096];
                    loop {
                        let Ok(n @ 1..) = socket.read(&mut buffer).await else { return };
                        read.extend_from_slice(&buffer[..n]);
                        while let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") {
                            read.drain(..end + 4);
                            let connection = if close { "close" } else { "keep-alive" };
                            let answer = format!("HTTP/1.1 {status} X\r\nContent-Length: 2\r\nConnection: {connection}\r\n\r\nok");
                            if socket.write_all(answer.as_bytes()).await.is_err() || close {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (address, accepted)
    }

    fn get(address: &str) -> http::Request<WasiBody> {
        let empty = http_body_util::Empty::<Bytes>::new().map_err(|never| match never {}).boxed_unsync();
        http::Request::get(format!("http://{address}/x")).header("host", address).body(empty).unwrap()
    }

    #[tokio::test]
    async fn requests_one_after_another_share_one_connection_and_a_closed_one_is_replaced() {
        let (address, accepted) = server(200, false).await;
        let pool = Arc::new(Pool::default());
        for _ in 0..5 {
            let answer = pool.send(get(&address), None).await.unwrap();
            assert_eq!(answer.into_body().collect().await.unwrap().to_bytes(), "ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "one connection for five requests read to their end");
        // An answer dropped unread takes its connection with it.
        drop(pool.send(get(&address), None).await.unwrap());
        let answer = pool.send(get(&address), None).await.unwrap();
        assert_eq!(answer.into_body().collect().await.unwrap().to_bytes(), "ok");
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "a new connection after an answer left unread");

        let (address, accepted) = server(200, true).await;
        for _ in 0..3 {
            let answer = pool.send(get(&address), None).await.unwrap();
            assert_eq!(answer.into_body().collect().await.unwrap().to_bytes(), "ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3, "a server closing each connection gets a new one each time");

        let (address, accepted) = server(500, false).await;
        for _ in 0..3 {
            let answer = pool.send(get(&address), None).await.unwrap();
            assert_eq!(answer.status(), 500);
            assert_eq!(answer.into_body().collect().await.unwrap().to_bytes(), "ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3, "no connection kept after an error answer");
    }

    #[test]
    fn a_server_is_its_scheme_and_authority_with_the_default_port() {
        let of = |uri: &str| Server::of(&uri.parse().unwrap()).unwrap();
        assert_eq!(of("http://api/x"), Server { tls: false, authority: "api:80".into() });
        assert_eq!(of("https://api/x"), Server { tls: true, authority: "api:443".into() });
        assert_eq!(of("http://127.0.0.1:8080/"), Server { tls: false, authority: "127.0.0.1:8080".into() });
        assert!(Server::of(&"/relative".parse().unwrap()).is_err());
        assert_eq!(server_name("[::1]:443").unwrap(), rustls::pki_types::ServerName::from(std::net::IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1])));
        assert!(matches!(server_name("example.com:443").unwrap(), rustls::pki_types::ServerName::DnsName(_)));
    }
}
