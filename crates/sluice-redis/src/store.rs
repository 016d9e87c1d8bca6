//! `RedisStore`: every decision is one script call on Redis or Redis Cluster.

use crate::keys::state_key;
use crate::script::{SOURCE, decode, policy_args};
use crate::settings::{RedisSettings, TimeSource};
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use sluice::{EXACT_LIMIT, Key, Limit, Store, StoreError, Timestamp, Verdict};
use std::future::Future;
use std::sync::Arc;

/// A store on Redis (standalone or Cluster). Cheap to clone: clones share connections.
///
/// Connections are multiplexed (many concurrent checks share one connection) and
/// reconnect on their own. Each check is one `EVALSHA` (reloaded on `NOSCRIPT`), bounded
/// by [`RedisSettings::timeout`].
#[derive(Clone)]
pub struct RedisStore {
    connection: Connection,
    script: Arc<redis::Script>,
    settings: Arc<RedisSettings>,
}

#[derive(Clone)]
enum Connection {
    Standalone(ConnectionManager),
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.connection {
            Connection::Standalone(_) => "standalone",
            Connection::Cluster(_) => "cluster",
        };
        f.debug_struct("RedisStore").field("kind", &kind).field("settings", &self.settings).finish()
    }
}

impl RedisStore {
    /// Connects to a standalone Redis at `url` (`redis://host:port/db`).
    ///
    /// # Errors
    ///
    /// When the URL is invalid or Redis cannot be reached within the timeout.
    pub async fn connect(url: &str, settings: RedisSettings) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(unavailable)?;
        let connecting = ConnectionManager::new(client);
        let manager = tokio::time::timeout(settings.timeout.max(CONNECT_TIMEOUT), connecting)
            .await
            .map_err(unavailable)?
            .map_err(unavailable)?;
        Ok(RedisStore::with(Connection::Standalone(manager), settings))
    }

    /// Connects to a Redis Cluster through any of its nodes' URLs.
    ///
    /// # Errors
    ///
    /// When a URL is invalid or the cluster cannot be reached within the timeout.
    pub async fn connect_cluster(urls: &[String], settings: RedisSettings) -> Result<Self, StoreError> {
        let client = ClusterClient::new(urls.to_vec()).map_err(unavailable)?;
        let connecting = client.get_async_connection();
        let connection = tokio::time::timeout(settings.timeout.max(CONNECT_TIMEOUT), connecting)
            .await
            .map_err(unavailable)?
            .map_err(unavailable)?;
        Ok(RedisStore::with(Connection::Cluster(connection), settings))
    }

    fn with(connection: Connection, settings: RedisSettings) -> Self {
        RedisStore { connection, script: Arc::new(redis::Script::new(SOURCE)), settings: Arc::new(settings) }
    }

    /// The settings.
    pub fn settings(&self) -> &RedisSettings {
        &self.settings
    }

    /// Checks `key` against `limits` at `now` (ignored when time comes from Redis).
    async fn check_limits(
        &self,
        key: Key<'_>,
        limits: &[Limit],
        now: Timestamp,
        cost: u64,
    ) -> Result<Verdict, StoreError> {
        if limits.is_empty() {
            return Err(StoreError::NoLimits);
        }
        let mut invocation = self.script.prepare_invoke();
        for limit in limits {
            invocation.key(state_key(&self.settings.key_prefix, key, limit));
        }
        invocation.arg(self.script_now(now)?).arg(cost.min(EXACT_LIMIT));
        invocation.arg(self.settings.extra_ttl_ms()).arg(self.settings.min_ttl_ms()).arg(limits.len());
        for limit in limits {
            let (algorithm, params) = policy_args(limit.policy());
            invocation.arg(algorithm).arg(&params[..]);
        }
        let reply: Vec<i64> = match &self.connection {
            Connection::Standalone(connection) => self.run(&invocation, connection.clone()).await?,
            Connection::Cluster(connection) => self.run(&invocation, connection.clone()).await?,
        };
        let decisions = decode(&reply, limits.len())?;
        Verdict::combine(&decisions).ok_or(StoreError::NoLimits)
    }

    fn script_now(&self, now: Timestamp) -> Result<i64, StoreError> {
        match self.settings.time {
            TimeSource::Redis => Ok(-1),
            TimeSource::Application { .. } if now.as_micros() < EXACT_LIMIT => Ok(now.as_micros() as i64),
            TimeSource::Application { .. } => Err(StoreError::Refused(format!(
                "time {} µs is not below 2^53, the most Redis computes exactly",
                now.as_micros()
            ))),
        }
    }

    async fn run<C: ConnectionLike + Send>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
        mut connection: C,
    ) -> Result<Vec<i64>, StoreError> {
        let call = invocation.invoke_async::<Vec<i64>>(&mut connection);
        match tokio::time::timeout(self.settings.timeout, call).await {
            Err(elapsed) => Err(unavailable(elapsed)),
            Ok(Err(error)) if is_script_error(&error) => Err(StoreError::Malformed(error.to_string())),
            Ok(Err(error)) => Err(unavailable(error)),
            Ok(Ok(reply)) => Ok(reply),
        }
    }
}

/// How long connecting may take at most, whatever the per-call timeout.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

fn unavailable(error: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Unavailable(Box::new(error))
}

/// An error raised by the script itself (a bug, or a foreign value at a Sluice key),
/// not by the connection.
fn is_script_error(error: &redis::RedisError) -> bool {
    error.kind() == redis::ErrorKind::Extension || error.to_string().contains("sluice:")
}

impl Store for RedisStore {
    fn check(
        &self,
        key: Key<'_>,
        limits: &[Limit],
        now: Timestamp,
        cost: u64,
    ) -> impl Future<Output = Result<Verdict, StoreError>> + Send {
        self.check_limits(key, limits, now, cost)
    }
}
