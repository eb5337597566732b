//! TLS to a PostgreSQL server (`tls = "require"` in `[postgres.NAME]`), with rustls:
//! the server's certificate is always verified, its chain against `ca_file` (or the
//! system's roots without one) and its name against `host`. There is no mode that
//! encrypts without verifying: a certificate nobody checked protects from no one.
//!
//! tokio-postgres asks for TLS through its `MakeTlsConnect` and `TlsConnect` traits;
//! [`PgTls`] implements them over tokio-rustls, and words a refused certificate for
//! the operator, naming the server and what it must chain to.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ferry_contract::files;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// The most a `ca_file` may hold: a bundle of certificates is a few hundred KiB.
pub const MAX_CA_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The certificates of `ca_file`, or what is wrong with it.
pub fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = files::read_regular(path, MAX_CA_FILE_BYTES, "CA file", "the limit for a CA file")
        .map_err(|e| format!("ca_file: {}: {}", e.path.display(), e.problem))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("ca_file: {}: not PEM certificates: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("ca_file: {}: holds no certificate", path.display()));
    }
    Ok(certs)
}

/// TLS for the server `[postgres.NAME]`, trusting `ca_file`'s certificates or, without
/// one, the system's.
#[derive(Clone)]
pub struct PgTls {
    config: Arc<ClientConfig>,
    /// What the certificate must chain to, for the error: `the ca_file /etc/db-ca.pem`.
    trusted: Arc<str>,
}

impl PgTls {
    /// The TLS settings of a server, or the problem (its key named).
    pub fn new(ca_file: Option<&PathBuf>) -> Result<PgTls, String> {
        let mut roots = RootCertStore::empty();
        let trusted = match ca_file {
            Some(path) => {
                for cert in read_ca_file(path)? {
                    roots
                        .add(cert)
                        .map_err(|e| format!("ca_file: {}: a certificate unusable as a root: {e}", path.display()))?;
                }
                format!("the ca_file {}", path.display())
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(format!(
                        "tls: the system has no trusted root certificates ({} problems reading them): give a ca_file",
                        found.errors.len()
                    ));
                }
                "the system's trusted roots".to_string()
            }
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("tls: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(PgTls { config: Arc::new(config), trusted: trusted.into() })
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> MakeTlsConnect<S> for PgTls {
    type Stream = PgTlsStream<S>;
    type TlsConnect = PgTlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, host: &str) -> Result<PgTlsConnect, io::Error> {
        let name = ServerName::try_from(host.to_string()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the host `{host}` cannot be checked in a certificate: {e}"),
            )
        })?;
        Ok(PgTlsConnect { tls: self.clone(), host: host.to_string(), name })
    }
}

/// One handshake with the server `host`.
pub struct PgTlsConnect {
    tls: PgTls,
    host: String,
    name: ServerName<'static>,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> TlsConnect<S> for PgTlsConnect {
    type Stream = PgTlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<PgTlsStream<S>, io::Error>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let connector = tokio_rustls::TlsConnector::from(self.tls.config.clone());
            match connector.connect(self.name, stream).await {
                Ok(stream) => Ok(PgTlsStream(stream)),
                Err(error) => Err(worded(error, &self.host, &self.tls.trusted)),
            }
        })
    }
}

/// A failed handshake in the operator's words: a certificate refused says it was not
/// trusted and what it must chain to and name.
fn worded(error: io::Error, host: &str, trusted: &str) -> io::Error {
    let refused = error.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>());
    match refused {
        Some(rustls::Error::InvalidCertificate(why)) => io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the server's certificate was not trusted ({why:?}): it must chain to {trusted} and name the host \
                 `{host}`"
            ),
        ),
        _ => io::Error::new(error.kind(), format!("the TLS handshake with `{host}` failed: {error}")),
    }
}

/// A connection to the server inside TLS.
pub struct PgTlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for PgTlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        // SCRAM without channel binding: the password is still never sent, and the
        // certificate was verified.
        ChannelBinding::none()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for PgTlsStream<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for PgTlsStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
