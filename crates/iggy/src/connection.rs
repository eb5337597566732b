//! The connection to the Iggy server, kept up in the background.
//!
//! One task connects and signs in, publishes the live client, and waits until a
//! sender reports it broken (a transport error, or a send abandoned at its timeout:
//! a half-sent request leaves the connection in an unknown state, so it is never
//! reused). Then it reconnects, with a capped backoff, until the server is back.
//! Senders never wait for a connection: while it is down, a delivery fails at once
//! with the reason (NACK), so no send blocks the source loop.
//!
//! Authentication failures are reported as such, once per attempt, with the backoff
//! between attempts: a wrong password is not a generic error in a tight loop.

use std::sync::Arc;
use std::time::Duration;

use iggy::http::http_client::HttpClient;
use iggy::prelude::{
    AutoLogin, Client, ClientWrapper, HttpClientConfig, IggyClient, IggyDuration, IggyError, PersonalAccessTokenClient,
    QuicClientConfig, QuicClientReconnectionConfig, TcpClient, TcpClientConfig, TcpClientReconnectionConfig,
    UserClient,
};
use iggy::quic::quic_client::QuicClient;
use tokio::sync::{mpsc, watch};

use ferry_config::{Credentials, IggyConfig, Transport};
use ferry_contract::settings::Backoff;

/// The state of the link, as senders see it.
#[derive(Clone)]
enum Link {
    Up { client: Arc<IggyClient>, generation: u64 },
    Down { reason: String },
}

/// A handle on the connection.
pub struct Connection {
    address: String,
    link: watch::Receiver<Link>,
    broken: mpsc::UnboundedSender<(u64, String)>,
}

/// A live client, and which connection it is (to report it broken).
pub struct Live {
    pub client: Arc<IggyClient>,
    pub generation: u64,
}

impl Connection {
    /// Start keeping a connection to the server of `config`, for as long as this
    /// handle lives. Must be called within a tokio runtime.
    pub fn start(config: &IggyConfig, credentials: Credentials) -> Arc<Connection> {
        let (link_tx, link) = watch::channel(Link::Down { reason: "connecting".into() });
        let (broken, broken_rx) = mpsc::unbounded_channel();
        tokio::spawn(maintain(config.clone(), credentials, link_tx, broken_rx));
        Arc::new(Connection { address: config.address.clone(), link, broken })
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    /// The live client, or why there is none.
    pub fn current(&self) -> Result<Live, String> {
        match &*self.link.borrow() {
            Link::Up { client, generation } => Ok(Live { client: client.clone(), generation: *generation }),
            Link::Down { reason } => Err(format!("not connected to Iggy at {}: {reason}", self.address)),
        }
    }

    /// Connection `generation` must not be used again.
    pub fn report_broken(&self, generation: u64, why: String) {
        let _ = self.broken.send((generation, why));
    }
}

/// Why connecting failed.
enum ConnectError {
    Authentication(String),
    Other(String),
}

async fn maintain(
    config: IggyConfig,
    credentials: Credentials,
    link: watch::Sender<Link>,
    mut broken: mpsc::UnboundedReceiver<(u64, String)>,
) {
    let address = config.address.clone();
    let who = credentials.describe();
    let mut backoff = Backoff::new(config.reconnect_backoff);
    let mut generation = 0;
    loop {
        let attempt = tokio::time::timeout(config.connect_timeout, connect(&config, &credentials)).await;
        let reason = match attempt {
            Ok(Ok(client)) => {
                generation += 1;
                backoff.reset();
                tracing::info!(%address, transport = ?config.transport, no_delay = config.no_delay, "connected to Iggy as {who}");
                let client = Arc::new(client);
                link.send_replace(Link::Up { client: client.clone(), generation });
                let why = loop {
                    tokio::select! {
                        report = broken.recv() => match report {
                            Some((g, why)) if g == generation => break why,
                            Some(_) => continue,
                            None => return,
                        },
                        // The handle is gone: the host is done with Iggy.
                        _ = link.closed() => {
                            let _ = client.disconnect().await;
                            return;
                        }
                    }
                };
                tracing::warn!(%address, "lost the connection to Iggy: {why}; reconnecting");
                link.send_replace(Link::Down { reason: format!("the connection was lost ({why}); reconnecting") });
                let _ = client.disconnect().await;
                continue;
            }
            Ok(Err(ConnectError::Authentication(error))) => {
                let delay = backoff.next_delay();
                tracing::error!(%address, "Iggy refused to sign in {who}: {error}; trying again in {delay:?}");
                (format!("authentication failed for {who}: {error}"), delay)
            }
            Ok(Err(ConnectError::Other(error))) => {
                let delay = backoff.next_delay();
                tracing::warn!(%address, "cannot connect to Iggy: {error}; trying again in {delay:?}");
                (format!("cannot connect: {error}"), delay)
            }
            Err(_) => {
                let delay = backoff.next_delay();
                let timeout = config.connect_timeout;
                tracing::warn!(%address, "connecting to Iggy took longer than {timeout:?}; trying again in {delay:?}");
                (format!("connecting took longer than {timeout:?}"), delay)
            }
        };
        let (reason, delay) = reason;
        link.send_replace(Link::Down { reason });
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = link.closed() => return,
        }
    }
}

/// A client for `config`, connected and signed in. The client's own reconnection is
/// off: reconnecting is this module's job, so that a failure surfaces at once.
async fn connect(config: &IggyConfig, credentials: &Credentials) -> Result<IggyClient, ConnectError> {
    let other = |e: IggyError| ConnectError::Other(e.to_string());
    let client = IggyClient::create(transport_client(config).map_err(other)?, None, None);
    client.connect().await.map_err(other)?;
    let signed_in = match credentials {
        Credentials::UsernamePassword { username, password } => {
            client.login_user(username, password.expose()).await.map(|_| ())
        }
        Credentials::Token(token) => client.login_with_personal_access_token(token.expose()).await.map(|_| ()),
    };
    match signed_in {
        Ok(()) => Ok(client),
        Err(
            e @ (IggyError::InvalidCredentials
            | IggyError::Unauthenticated
            | IggyError::Unauthorized
            | IggyError::InvalidPersonalAccessToken),
        ) => Err(ConnectError::Authentication(e.to_string())),
        Err(e) => Err(ConnectError::Other(e.to_string())),
    }
}

fn transport_client(config: &IggyConfig) -> Result<ClientWrapper, IggyError> {
    let heartbeat = IggyDuration::new(Duration::from_secs(5));
    Ok(match config.transport {
        Transport::Tcp => {
            let tls = &config.tls;
            let tcp = TcpClientConfig {
                server_address: config.address.clone(),
                tls_enabled: tls.enabled,
                tls_domain: tls.domain.clone().unwrap_or_default(),
                tls_ca_file: tls.ca_file.as_ref().map(|p| p.display().to_string()),
                tls_validate_certificate: tls.validate_certificate,
                auto_login: AutoLogin::Disabled,
                reconnection: TcpClientReconnectionConfig { enabled: false, ..Default::default() },
                heartbeat_interval: heartbeat,
                nodelay: config.no_delay,
            };
            ClientWrapper::Tcp(TcpClient::create(Arc::new(tcp))?)
        }
        Transport::Quic => {
            let mut quic = QuicClientConfig {
                server_address: config.address.clone(),
                auto_login: AutoLogin::Disabled,
                reconnection: QuicClientReconnectionConfig { enabled: false, ..Default::default() },
                validate_certificate: config.tls.validate_certificate,
                heartbeat_interval: heartbeat,
                ..Default::default()
            };
            if let Some(domain) = &config.tls.domain {
                quic.server_name = domain.clone();
            }
            ClientWrapper::Quic(QuicClient::create(Arc::new(quic))?)
        }
        Transport::Http => {
            let http = HttpClientConfig { api_url: config.address.clone(), retries: 0, ..Default::default() };
            ClientWrapper::Http(HttpClient::create(Arc::new(http))?)
        }
    })
}
