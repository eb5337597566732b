//! HTTPS for the API (`[http] tls`): the certificate and key read from PEM files when
//! ferry starts (an error names the key and the file), and a listener that hands axum
//! connections once their TLS handshake is done.
//!
//! Handshakes run on tasks of their own, bounded in time, so that a client that
//! connects and says nothing holds up no one else.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use ferry_config::HttpTls;
use ferry_contract::files;

/// The most a certificate chain or key file may hold.
const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// How long a client has to finish its handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// The server's TLS settings from `[http] tls`; the error names the key and the file.
pub(super) fn server_config(tls: &HttpTls) -> Result<Arc<ServerConfig>, String> {
    let certs = certificate_chain(tls)?;
    let key = read(&tls.key_file, "tls.key_file")?;
    let key = PrivateKeyDer::from_pem_slice(&key)
        .map_err(|e| at("tls.key_file", &tls.key_file, format!("holds no private key in PEM: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("[http] tls: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("[http] tls: the certificate and key cannot serve: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The certificates of `[http] tls.cert_file`, the server's own first (`ferry top`
/// trusts them to reach the API it serves); the error names the key and the file.
pub fn certificate_chain(tls: &HttpTls) -> Result<Vec<CertificateDer<'static>>, String> {
    let chain = read(&tls.cert_file, "tls.cert_file")?;
    let certs = CertificateDer::pem_slice_iter(&chain)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| at("tls.cert_file", &tls.cert_file, format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(at("tls.cert_file", &tls.cert_file, "holds no certificate".into()));
    }
    Ok(certs)
}

/// The PEM file `path` of `[http] key`, bounded in size.
fn read(path: &std::path::Path, key: &str) -> Result<Vec<u8>, String> {
    files::read_regular(path, MAX_PEM_BYTES, key, "the limit for a PEM file")
        .map_err(|e| format!("[http] {key}: {}: {}", e.path.display(), e.problem))
}

/// A problem with the file `path` of `[http] key`.
fn at(key: &str, path: &std::path::Path, problem: String) -> String {
    format!("[http] {key}: {}: {problem}", path.display())
}

/// Accepts TCP connections and hands on those whose handshake succeeded.
pub(super) struct TlsListener {
    connections: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    address: SocketAddr,
    acceptor: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    pub fn new(listener: TcpListener, address: SocketAddr, config: Arc<ServerConfig>) -> TlsListener {
        let (handed, connections) = mpsc::channel(64);
        let tls = TlsAcceptor::from(config);
        let acceptor = tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors, say: give the system a moment.
                        tracing::warn!("the HTTP API cannot accept a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (tls, handed) = (tls.clone(), handed.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE, tls.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let _ = handed.send((stream, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake with a client of the HTTP API failed: {e}"),
                        Err(_) => tracing::debug!(%peer, "a client of the HTTP API did not finish its TLS handshake"),
                    }
                });
            }
        });
        TlsListener { connections, address, acceptor }
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.connections.recv().await {
            Some(connection) => connection,
            // The acceptor is gone (only when this listener is dropped): no more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.address)
    }
}
