//! A TLS connection to a standalone Redis (or a Sentinel's primary), made by Sluice rather
//! than by redis-rs: redis-rs builds a new client configuration for each connection, reading
//! the system's trust roots again each time (hundreds of files) and offering no way to
//! accept a pinned self-signed certificate. Here the configuration is built once
//! ([`TlsFiles::client_config`]) and each connection is a TCP connection, a handshake, and
//! redis-rs's multiplexed connection on top.

use super::{HandshakeError, TlsFiles};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, RedisConnectionInfo};
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use sluice_core::StoreError;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

/// How long data sent may stay unacknowledged before the connection is given up (as the
/// store's other connections: `store::origin`).
const UNACKNOWLEDGED_LIMIT: Duration = Duration::from_secs(10);

/// Makes TLS connections to one Redis address, with one client configuration.
#[derive(Clone)]
pub(crate) struct TlsConnector {
    config: Arc<ClientConfig>,
    host: String,
    port: u16,
    redis: RedisConnectionInfo,
}

impl std::fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConnector").field("host", &self.host).field("port", &self.port).finish_non_exhaustive()
    }
}

impl TlsConnector {
    /// A connector for `info`'s address, when the URL is `rediss://`; `None` otherwise.
    ///
    /// # Errors
    ///
    /// A TLS file cannot be read or holds nothing usable.
    pub(crate) fn for_url(info: &ConnectionInfo, files: &TlsFiles) -> Result<Option<Self>, StoreError> {
        let ConnectionAddr::TcpTls { host, port, insecure, .. } = info.addr() else { return Ok(None) };
        let config = files.client_config(*insecure)?;
        Ok(Some(TlsConnector { config, host: host.clone(), port: *port, redis: info.redis_settings().clone() }))
    }

    /// Connects, shakes hands and authenticates; `on_close` is called when the connection
    /// ends. The caller bounds the time it takes.
    ///
    /// # Errors
    ///
    /// The connection is refused or times out, the handshake fails ([`HandshakeError`]),
    /// or Redis refuses the credentials.
    pub(crate) async fn connect(
        &self,
        on_close: impl FnOnce() + Send + 'static,
    ) -> Result<MultiplexedConnection, StoreError> {
        let unavailable = |error: Box<dyn std::error::Error + Send + Sync>| StoreError::Unavailable(error);
        let connecting = async {
            let tcp = TcpStream::connect((self.host.as_str(), self.port)).await.map_err(|e| unavailable(e.into()))?;
            let socket = socket2::SockRef::from(&tcp);
            // Best effort: a platform without it keeps the kernel's retransmission limit.
            let _ = socket.set_tcp_user_timeout(Some(UNACKNOWLEDGED_LIMIT));
            let name = ServerName::try_from(self.host.clone()).map_err(|e| unavailable(e.into()))?;
            let connector = tokio_rustls::TlsConnector::from(Arc::clone(&self.config));
            let stream = connector.connect(name, tcp).await.map_err(|error| self.explain(error.into()))?;
            let config = AsyncConnectionConfig::new().set_response_timeout(None).set_connection_timeout(None);
            MultiplexedConnection::new_with_config(&self.redis, stream, config)
                .await
                .map_err(|error| self.explain(Box::new(error)))
        };
        let (connection, driver) = connecting.await?;
        tokio::spawn(async move {
            driver.await;
            on_close();
        });
        Ok(connection)
    }

    /// `error`, or the TLS refusal inside it in Sluice's words.
    fn explain(&self, error: Box<dyn std::error::Error + Send + Sync>) -> StoreError {
        match HandshakeError::find(&self.host, error.as_ref()) {
            Some(handshake) => StoreError::Unavailable(Box::new(handshake)),
            None => StoreError::Unavailable(error),
        }
    }
}
