//! Where a store's connections go: a standalone Redis's address, a Cluster, or the primary
//! that Redis Sentinel names; and how each connection is made.

use super::errors::{unavailable, within};
use super::standalone_connection::StandaloneConnection;
use crate::settings::RedisSettings;
use crate::tls::TlsConnector;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::sentinel::SentinelClient;
use sluice_core::StoreError;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What a connection calls when RESP3 tells it the connection was lost: the channel that
/// owns it starts a probe, so that a restarted Redis is found before the next check.
pub(super) type OnDisconnect = Arc<dyn Fn() + Send + Sync>;

/// Where connections are made.
#[derive(Clone)]
pub(super) enum Origin {
    Standalone(Box<redis::Client>),
    /// A standalone Redis over TLS (`rediss://`), on connections Sluice makes itself.
    Tls(Box<TlsConnector>),
    Cluster(Box<ClusterClient>),
    /// A primary found through Redis Sentinel, asked again after each failure.
    Sentinel(Arc<tokio::sync::Mutex<SentinelClient>>),
}

/// How long connecting may take at most, whatever the per-call timeout.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long data sent to Redis may stay unacknowledged before the connection is given up
/// (`TCP_USER_TIMEOUT`, Linux): a Redis host that died or was cut off sends no reset, and
/// without it the kernel retransmits for as long as its default allows (`tcp_retries2` =
/// 15: about 15 minutes) before the connection breaks and is made again. A Redis that is
/// only slow still acknowledges at the TCP level; one stalled over 10 s with its receive
/// buffer full is cut off, and the connection made again.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const UNACKNOWLEDGED_LIMIT: Duration = Duration::from_secs(10);

/// The TCP settings of every connection to Redis. Nagle's algorithm stays on (redis-rs's
/// default): `TCP_NODELAY` was measured slower here (benches/redis_throughput.rs), since
/// commands sent while others are in flight then leave one packet each.
pub(super) fn tcp_settings() -> redis::io::tcp::TcpSettings {
    let settings = redis::io::tcp::TcpSettings::default();
    #[cfg(target_os = "linux")]
    let settings = settings.set_user_timeout(UNACKNOWLEDGED_LIMIT);
    settings
}

/// A client of the Cluster whose nodes `urls` name, bounded per call by the store's timeout
/// (redis-rs's default is 500 ms), and waiting for nothing between the attempts of one call.
/// redis-rs sends a command Redis refused for now (`CLUSTERDOWN`, `TRYAGAIN`, `LOADING`,
/// `MASTERDOWN`) again, 1.28 s or more later by default: every check that met a Cluster
/// refusing keys would wait out the store's timeout (or be decided late, past the
/// refusal), where the failure mode is to answer at once while a probe finds when Redis
/// serves. Without waits, its attempts (redis-rs's count: 16 more) take a few round trips'
/// time; redirections (`MOVED`, `ASK`) and connections made again are followed as before.
pub(super) fn cluster_client(urls: &[String], settings: &RedisSettings) -> Result<ClusterClient, StoreError> {
    let mut builder = ClusterClient::builder(urls.to_vec())
        .tcp_settings(tcp_settings())
        .response_timeout(settings.timeout)
        .min_retry_wait(0)
        .max_retry_wait(0);
    if !settings.tls.is_empty() {
        builder = builder.certs(settings.tls.read()?);
    }
    builder.build().map_err(unavailable)
}

impl Origin {
    /// The connection to a standalone Redis's fixed address, made on its first command (an
    /// error for the other origins, whose address is found when connecting).
    pub(super) fn lazy_standalone(&self, on_disconnect: OnDisconnect) -> Result<StandaloneConnection, StoreError> {
        let Origin::Standalone(client) = self else {
            return Err(StoreError::Refused("only a standalone Redis has a fixed address".to_owned()));
        };
        lazy_connection(client, on_disconnect).map(StandaloneConnection::Manager)
    }

    /// A new standalone connection, made now (one attempt): to the URL's address, or to the
    /// primary the sentinels name now (an error for a Cluster's origin).
    pub(super) async fn connect_standalone(
        &self,
        on_disconnect: OnDisconnect,
    ) -> Result<StandaloneConnection, StoreError> {
        let connection = match self {
            Origin::Sentinel(sentinels) => {
                let primary =
                    within(CONNECT_TIMEOUT, async { sentinels.lock().await.async_get_client().await }).await?;
                StandaloneConnection::Manager(connection_now(&primary, on_disconnect).await?)
            }
            Origin::Tls(connector) => {
                let closed = Arc::new(AtomicBool::new(false));
                let on_close = {
                    let closed = Arc::clone(&closed);
                    move || {
                        closed.store(true, Ordering::Release);
                        on_disconnect();
                    }
                };
                let connecting = connector.connect(on_close);
                let connection = tokio::time::timeout(CONNECT_TIMEOUT, connecting)
                    .await
                    .map_err(|_| unavailable(super::errors::TimedOut(CONNECT_TIMEOUT)))??;
                StandaloneConnection::Tls { connection, closed }
            }
            Origin::Standalone(client) => StandaloneConnection::Manager(connection_now(client, on_disconnect).await?),
            Origin::Cluster(_) => return Err(StoreError::Refused("a Cluster has no single address".to_owned())),
        };
        within(CONNECT_TIMEOUT, redis::cmd("PING").query_async::<()>(&mut connection.clone())).await?;
        Ok(connection)
    }
}

/// A connection to `client`'s address, made on its first command, reconnecting on its own,
/// whose loss `on_disconnect` hears of at once (see [`manager_config`]).
fn lazy_connection(client: &redis::Client, on_disconnect: OnDisconnect) -> Result<ConnectionManager, StoreError> {
    let config = manager_config(client, on_disconnect);
    ConnectionManager::new_lazy_with_config(redis::Client::clone(client), config).map_err(unavailable)
}

/// A connection to `client`'s address, made now in one attempt (bounded by
/// [`CONNECT_TIMEOUT`]), then as [`lazy_connection`]'s. A failed attempt leaves nothing
/// behind: no attempt of redis-rs's own follows it.
async fn connection_now(client: &redis::Client, on_disconnect: OnDisconnect) -> Result<ConnectionManager, StoreError> {
    let config = manager_config(client, on_disconnect);
    within(CONNECT_TIMEOUT, ConnectionManager::new_with_config(redis::Client::clone(client), config)).await
}

/// How redis-rs's connections to a standalone Redis are made: reconnecting on their own,
/// each loss heard of by `on_disconnect` at once (RESP3's disconnection notice), so that a
/// restarted Redis is found again by a probe before the next check needs it.
fn manager_config(client: &redis::Client, on_disconnect: OnDisconnect) -> ConnectionManagerConfig {
    let mut config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        // The store bounds every call by its own timeout (`RedisSettings::timeout`);
        // redis-rs's default of 500 ms would cut a longer one short.
        .set_response_timeout(None)
        // One attempt per reconnection: the channel's probe retries, every 100 ms.
        .set_number_of_retries(0);
    if client.get_connection_info().redis_settings().protocol().supports_resp3() {
        config = config.set_push_sender(move |push: redis::PushInfo| {
            if push.kind == redis::PushKind::Disconnection {
                on_disconnect();
            }
            Ok::<(), std::convert::Infallible>(())
        });
    }
    config
}
