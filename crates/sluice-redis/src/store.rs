//! `RedisStore`: every decision is one script call on Redis or Redis Cluster.

mod reset;
mod standalone;

use crate::blocked::{BlockedCache, Now, Remembered};
use crate::exact_time;
use crate::keys::state_key;
use crate::script::{Reply, Scripts, decode};
use crate::settings::{RedisSettings, TimeSource};
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use sluice::{Key, Limit, MemoryStore, Store, StoreError, Timestamp, Verdict};
use standalone::Standalone;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// A store on Redis (standalone or Cluster). Cheap to clone: clones share connections.
///
/// Connections are multiplexed (many concurrent checks share one connection) and
/// reconnect on their own; a standalone one is also replaced when the node it reached
/// answers `READONLY` (a failover that moved the address). Each check is one `EVALSHA`
/// (reloaded on `NOSCRIPT`), bounded by [`RedisSettings::timeout`]; when Redis cannot
/// answer, the [`failure_mode`](RedisSettings::failure_mode) decides, and the verdict's
/// `source` says so.
#[derive(Clone)]
pub struct RedisStore {
    connection: Connection,
    /// Where the connection came from, to open others ([`RedisStore::connect_again`]).
    /// Shared: cloning a client copies its URL's strings, and stores are cloned per call.
    origin: Arc<Origin>,
    scripts: Arc<Scripts>,
    settings: Arc<RedisSettings>,
    blocked: Arc<BlockedCache>,
    /// This process's states while Redis is down, under [`FailureMode::Fallback`](crate::FailureMode).
    fallback: MemoryStore,
}

#[derive(Clone)]
enum Connection {
    /// Replaced after a failover: see [`standalone`].
    Standalone(Arc<Standalone>),
    Cluster(ClusterConnection),
}

enum Origin {
    Standalone(redis::Client),
    Cluster(Box<ClusterClient>),
}

/// How long connecting may take at most, whatever the per-call timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long data sent to Redis may stay unacknowledged before the connection is given up
/// (`TCP_USER_TIMEOUT`, Linux): a Redis host that died or was cut off sends no reset, and
/// without it the kernel retransmits for as long as its default allows (`tcp_retries2` =
/// 15: about 15 minutes), every check meanwhile decided by the failure mode, before the
/// connection breaks and is made again. A Redis that is only slow still acknowledges at
/// the TCP level; one stalled over 10 s with its receive buffer full is cut off, and the
/// connection made again.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const UNACKNOWLEDGED_LIMIT: Duration = Duration::from_secs(10);

/// The TCP settings of every connection to Redis. Nagle's algorithm stays on (redis-rs's
/// default): `TCP_NODELAY` was measured slower here (`docs/benchmarks.md`, "Tried and not
/// kept"), since commands sent while others are in flight then leave one packet each.
fn tcp_settings() -> redis::io::tcp::TcpSettings {
    let settings = redis::io::tcp::TcpSettings::default();
    #[cfg(target_os = "linux")]
    let settings = settings.set_user_timeout(UNACKNOWLEDGED_LIMIT);
    settings
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.connection {
            Connection::Standalone(_) => "standalone",
            Connection::Cluster(_) => "cluster",
        };
        f.debug_struct("RedisStore").field("kind", &kind).field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl Origin {
    async fn connect(&self) -> Result<Connection, StoreError> {
        match self {
            Origin::Standalone(_) => {
                Ok(Connection::Standalone(Arc::new(Standalone::new(self.connect_standalone().await?))))
            }
            Origin::Cluster(client) => {
                Ok(Connection::Cluster(within(CONNECT_TIMEOUT, client.get_async_connection()).await?))
            }
        }
    }

    /// A new connection to a standalone Redis (an error for a Cluster's origin).
    async fn connect_standalone(&self) -> Result<ConnectionManager, StoreError> {
        match self {
            Origin::Standalone(client) => within(CONNECT_TIMEOUT, ConnectionManager::new(client.clone())).await,
            Origin::Cluster(_) => Err(StoreError::Refused("a Redis Cluster has no standalone connection".to_owned())),
        }
    }
}

impl RedisStore {
    /// Connects to a standalone Redis at `url` (`redis://host:port/db`).
    ///
    /// # Errors
    ///
    /// When the URL is invalid or Redis cannot be reached within two seconds.
    pub async fn connect(url: &str, settings: RedisSettings) -> Result<Self, StoreError> {
        let info = redis::IntoConnectionInfo::into_connection_info(url).map_err(unavailable)?;
        let client = redis::Client::open(info.set_tcp_settings(tcp_settings())).map_err(unavailable)?;
        let origin = Arc::new(Origin::Standalone(client));
        Ok(RedisStore::with(origin.connect().await?, origin, settings))
    }

    /// Connects to a Redis Cluster through any of its nodes' URLs.
    ///
    /// # Errors
    ///
    /// When a URL is invalid or the cluster cannot be reached within two seconds.
    pub async fn connect_cluster(urls: &[String], settings: RedisSettings) -> Result<Self, StoreError> {
        let client = ClusterClient::builder(urls.to_vec()).tcp_settings(tcp_settings()).build().map_err(unavailable)?;
        let origin = Arc::new(Origin::Cluster(Box::new(client)));
        Ok(RedisStore::with(origin.connect().await?, origin, settings))
    }

    /// Another connection to the same Redis, sharing this store's settings, script cache,
    /// blocked-key cache and fallback states. Its I/O is driven by the tokio runtime this
    /// is called from: a server with a runtime per thread gives each thread its own, so a
    /// check never waits for another thread to be scheduled.
    ///
    /// # Errors
    ///
    /// When Redis cannot be reached within two seconds.
    pub async fn connect_again(&self) -> Result<Self, StoreError> {
        Ok(RedisStore { connection: self.origin.connect().await?, ..self.clone() })
    }

    fn with(connection: Connection, origin: Arc<Origin>, settings: RedisSettings) -> Self {
        RedisStore {
            connection,
            origin,
            scripts: Arc::default(),
            blocked: Arc::default(),
            fallback: MemoryStore::builder().max_keys(settings.fallback_max_keys).build(),
            settings: Arc::new(settings),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &RedisSettings {
        &self.settings
    }

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
        let script_now = self.script_now(now, limits)?;
        let keys: Vec<Vec<u8>> = limits.iter().map(|limit| state_key(&self.settings.key_prefix, key, limit)).collect();
        let cache_id = self.settings.blocked_cache.then(|| keys.join(&0u8));
        let cached_now = if script_now < 0 { Now::Redis } else { Now::Caller(now.as_micros()) };
        if let Some(verdict) = cache_id.as_deref().and_then(|id| self.blocked.lookup(id, cached_now, cost)) {
            return Ok(verdict);
        }
        let asked = self.blocked.generation();
        match self.evaluate(keys, limits, script_now, cost).await {
            Ok((reply, verdict)) => {
                if let Some(id) = cache_id {
                    // A state whose time was later than `now` decided at that time: its
                    // answer does not age with `now`, so it is not cached.
                    let verdict = reply.unclamped.then_some(verdict);
                    let remembered = Remembered { limits, verdict, decided_at: reply.now, cost };
                    self.blocked.remember(id, asked, remembered);
                }
                Ok(verdict)
            }
            Err(error) if error.is_transient() => {
                let degraded = self.settings.failure_mode.decide(&self.fallback, key, limits, now, cost);
                degraded.ok_or(error)
            }
            Err(error) => Err(error),
        }
    }

    /// Runs the script: the time Redis decided at, and the combined verdict.
    async fn evaluate(
        &self,
        keys: Vec<Vec<u8>>,
        limits: &[Limit],
        now: i64,
        cost: u64,
    ) -> Result<(Reply, Verdict), StoreError> {
        let invocation = self.scripts.invocation(keys, limits, now, cost, &self.settings);
        let reply = match &self.connection {
            Connection::Standalone(connection) => {
                let used = connection.current();
                let reply = self.run(&invocation, ConnectionManager::clone(&used)).await;
                self.replace_if_demoted(connection, &used, reply)?
            }
            Connection::Cluster(connection) => self.run(&invocation, connection.clone()).await?,
        };
        let reply = decode(&reply, limits.len())?;
        let verdict = Verdict::combine(&reply.decisions).ok_or(StoreError::NoLimits)?;
        Ok((reply, verdict))
    }

    /// `result` of a command sent on `used`, having started to replace that connection
    /// when Redis refused the command as a replica.
    fn replace_if_demoted<T>(
        &self,
        connection: &Arc<Standalone>,
        used: &Arc<ConnectionManager>,
        result: Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if let Err(StoreError::Unavailable(cause)) = &result
            && cause.downcast_ref::<redis::RedisError>().is_some_and(standalone::is_demoted)
        {
            connection.replace(used, &self.origin);
        }
        result
    }

    /// The `now` the script gets (-1 to read Redis `TIME`), when the scripts of `limits`
    /// compute exactly at that time.
    fn script_now(&self, now: Timestamp, limits: &[Limit]) -> Result<i64, StoreError> {
        match self.settings.time {
            TimeSource::Redis => exact_time::refuse_inexact(None, limits).map(|()| -1),
            TimeSource::Application { .. } => {
                exact_time::refuse_inexact(Some(now.as_micros()), limits)?;
                // Below 2^53 by the check above, so the cast is exact.
                Ok(now.as_micros() as i64)
            }
        }
    }

    async fn run<C: ConnectionLike + Send>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
        mut connection: C,
    ) -> Result<Vec<u8>, StoreError> {
        let reply = within(self.settings.timeout, invocation.invoke_async::<Vec<u8>>(&mut connection)).await;
        reply.map_err(|error| match error {
            StoreError::Unavailable(cause) if is_script_error(cause.as_ref()) => {
                StoreError::Malformed(cause.to_string())
            }
            other => other,
        })
    }
}

/// Awaits `future` for at most `limit`; a timeout or a Redis error makes Redis unavailable.
async fn within<T>(limit: Duration, future: impl Future<Output = redis::RedisResult<T>>) -> Result<T, StoreError> {
    match tokio::time::timeout(limit, future).await {
        Err(elapsed) => Err(unavailable(elapsed)),
        Ok(result) => result.map_err(unavailable),
    }
}

fn unavailable(error: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Unavailable(Box::new(error))
}

/// Error codes of a Redis that cannot serve for now, also when a script's `redis.call`
/// meets them: out of memory under `noeviction`, a primary demoted to a replica by a
/// failover, a server still loading its data set or busy with a long script, a cluster or
/// replication that is down, a failing save that stops writes.
const UNAVAILABLE_CODES: [&str; 9] =
    ["OOM", "READONLY", "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS", "MISCONF"];

/// An error raised by the script itself (a bug, or a foreign value at a Sluice key), not
/// by the connection nor by a Redis that cannot serve for now: retrying or failing open
/// would hide it.
fn is_script_error(error: &(dyn std::error::Error + 'static)) -> bool {
    let code = error.downcast_ref::<redis::RedisError>().and_then(redis::RedisError::code);
    if code.is_some_and(|code| UNAVAILABLE_CODES.contains(&code)) {
        return false;
    }
    let message = error.to_string();
    message.contains("user_script") || message.contains("sluice:")
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

    fn reset(&self, key: Key<'_>, limits: &[Limit]) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.reset_key(key, limits)
    }
}
