//! `RedisStore`: every decision is one command on Redis or Redis Cluster, the module's
//! `SLUICE.CHECK` where Redis has it loaded, else one script call.

mod channel;
mod cluster;
mod common;
mod decide;
mod errors;
mod give_back;
mod origin;
mod reset;
mod standalone;
mod standalone_connection;

use crate::cluster::shards::Shards;
use crate::deadline::wall_clock;
use crate::health::RedisHealth;
use crate::refusal::Refused;
use crate::settings::RedisSettings;
use crate::tls::TlsConnector;
use crate::url::without_password;
use channel::{Channel, Previously};
use common::Common;
use decide::Decide;
use errors::{is_unavailable_for_now, unavailable};
use origin::{CONNECT_TIMEOUT, Origin, cluster_client, tcp_settings};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use sluice_core::{
    Alignment, Check, FixedWindow, GiveBack, Key, LeaseAnswer, Limit, Store, StoreError, Timestamp, Verdict,
};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// A store on Redis (standalone or Cluster). Cheap to clone: clones share connections.
///
/// Connections are multiplexed (many concurrent checks share one connection) and
/// reconnect on their own; a standalone one is also replaced when the node it reached
/// answers `READONLY` (a failover that moved the address). Each check is one command: the
/// Sluice module's `SLUICE.CHECK` where Redis has it loaded ([`RedisSettings::module`],
/// [`RedisStore::uses_module`]), else one `EVALSHA` (reloaded on `NOSCRIPT`). It is bounded
/// by [`RedisSettings::timeout`], and carries a deadline
/// past which Redis writes nothing (`deadline` module), so a check answered without Redis
/// never consumes quota later. When Redis cannot answer, the
/// [`failure_mode`](RedisSettings::failure_mode) decides, and the verdict's `source` says
/// so; from that failure until a background probe finds Redis answering again (every
/// 100 ms), checks are answered by the failure mode at once, without waiting for Redis.
/// On a Cluster this holds per master: a check finds the master of its key's slot first,
/// and only the keys of a master known down are answered without Redis (see the
/// `cluster::shards` module). [`RedisStore::health`] tells whether Redis answers and
/// counts the outages.
#[derive(Clone)]
pub struct RedisStore {
    channel: Arc<Channel>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.common().origin {
            Origin::Standalone(_) | Origin::Tls(_) => "standalone",
            Origin::Cluster(_) => "cluster",
            Origin::Sentinel(_) => "sentinel",
        };
        f.debug_struct("RedisStore").field("kind", &kind).field("settings", &self.settings()).finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Opens a store on a standalone Redis at `url` (`redis://host:port/db`, or
    /// `rediss://` for TLS), without waiting for Redis: when it cannot be reached now, the
    /// store starts in an outage (checks answered by the failure mode) and a probe finds
    /// Redis as soon as it answers. What a server uses, so that it starts during an outage.
    ///
    /// The connection speaks RESP3 (Redis 6 or newer) unless the URL asks for
    /// `?protocol=resp2`: RESP3 tells the store at once when a connection closes.
    ///
    /// # Errors
    ///
    /// When the URL is invalid, or a TLS file of the settings cannot be read.
    pub async fn open(url: &str, settings: RedisSettings) -> Result<Self, StoreError> {
        let info = crate::url::connection_info(url).map_err(StoreError::Refused)?;
        let redis = info.redis_settings().clone();
        let redis = if url.contains("protocol=") { redis } else { redis.set_protocol(redis::ProtocolVersion::RESP3) };
        let info = info.set_tcp_settings(tcp_settings()).set_redis_settings(redis);
        let origin = match TlsConnector::for_url(&info, &settings.tls)? {
            Some(tls) => Origin::Tls(Box::new(tls)),
            None if settings.tls.is_empty() => {
                Origin::Standalone(Box::new(redis::Client::open(info).map_err(unavailable)?))
            }
            None => {
                let message = format!(
                    "TLS files are set, but the store URL `{}` is not rediss://: use rediss:// for TLS, or unset them",
                    without_password(url)
                );
                return Err(StoreError::Refused(message));
            }
        };
        RedisStore::with(origin, without_password(url), settings)
    }

    /// Opens a store on a Redis Cluster through any of its nodes' URLs, without waiting
    /// for it (as [`RedisStore::open`]).
    ///
    /// # Errors
    ///
    /// When a URL is invalid.
    pub async fn open_cluster(urls: &[String], settings: RedisSettings) -> Result<Self, StoreError> {
        let client = cluster_client(urls, &settings)?;
        let target = urls.iter().map(|url| without_password(url)).collect::<Vec<_>>().join(",");
        RedisStore::with(Origin::Cluster(Box::new(client)), target, settings)
    }

    /// Opens a store on the primary that Redis Sentinel names for `primary_name`, asking the
    /// `sentinels` (`redis://host:port` each) at once and again after every failure, so a
    /// failover is followed (without waiting for Redis, as [`RedisStore::open`]). `redis`
    /// says how to reach the primary, as a URL whose host is ignored: its user, password,
    /// database, and `rediss://` for TLS (`redis://user:password@primary/0`).
    ///
    /// # Errors
    ///
    /// When a URL is invalid, or a TLS file of the settings cannot be read.
    pub async fn open_sentinel(
        sentinels: &[String],
        primary_name: &str,
        redis: &str,
        settings: RedisSettings,
    ) -> Result<Self, StoreError> {
        let primary = redis::IntoConnectionInfo::into_connection_info(redis).map_err(unavailable)?;
        let resp3 = primary.redis_settings().clone().set_protocol(redis::ProtocolVersion::RESP3);
        let mut node =
            SentinelNodeConnectionInfo::default().set_redis_connection_info(resp3).set_tcp_settings(tcp_settings());
        if redis.starts_with("rediss://") {
            node = node.set_tls_mode(redis::TlsMode::Secure);
        }
        let client = SentinelClient::build(sentinels.to_vec(), primary_name, Some(node), SentinelServerType::Master)
            .map_err(unavailable)?;
        let target = format!("sentinel {} for {primary_name}", sentinels.join(","));
        RedisStore::with(Origin::Sentinel(Arc::new(tokio::sync::Mutex::new(client))), target, settings)
    }

    /// Connects to a standalone Redis at `url` (`redis://host:port/db`): [`RedisStore::open`],
    /// then waits until Redis answers.
    ///
    /// # Errors
    ///
    /// When the URL is invalid or Redis cannot be reached within two seconds (the
    /// error's source names the cause: refused, timeout, authentication…).
    pub async fn connect(url: &str, settings: RedisSettings) -> Result<Self, StoreError> {
        RedisStore::open(url, settings).await?.answering().await
    }

    /// Connects to a Redis Cluster through any of its nodes' URLs, and waits until it
    /// answers.
    ///
    /// # Errors
    ///
    /// When a URL is invalid or the cluster does not answer within two seconds.
    pub async fn connect_cluster(urls: &[String], settings: RedisSettings) -> Result<Self, StoreError> {
        RedisStore::open_cluster(urls, settings).await?.answering().await
    }

    /// Another connection to the same Redis, sharing this store's settings, script cache,
    /// blocked-key cache, fallback states and outages. Its I/O is driven by the tokio
    /// runtime this is called from: a server with a runtime per thread gives each thread
    /// its own, so a check never waits for another thread to be scheduled.
    ///
    /// Returns once its first probe has ended (within 5 s): Redis answered it (on a
    /// Sentinel, through the primary the sentinels name; on a Cluster, every master that
    /// answers), or is known down, and then the failure mode answers at once. So its first
    /// checks are decided by Redis whenever Redis is up, and none waits for a connection
    /// being made. An outage does not fail it.
    ///
    /// # Errors
    ///
    /// Never for a store that was opened; kept for stores that may need to connect.
    pub async fn connect_again(&self) -> Result<Self, StoreError> {
        let channel = Channel::open(Arc::clone(&self.channel.common))?;
        channel.first_probe().await;
        Ok(RedisStore { channel })
    }

    fn with(origin: Origin, target: String, settings: RedisSettings) -> Result<Self, StoreError> {
        let common = Common::new(origin, target, settings);
        Ok(RedisStore { channel: Channel::open(Arc::new(common))? })
    }

    /// This store once Redis answered a probe (within two seconds), even with an error that
    /// says it cannot serve for now (out of memory, a replica, loading): it is reachable,
    /// and the failure mode decides until it serves again. Any other error (refused,
    /// timeout, wrong password, a command the ACL denies) is returned.
    async fn answering(self) -> Result<Self, StoreError> {
        match self.channel.probe_once(CONNECT_TIMEOUT, Previously::Answered).await {
            Err(error) if let Some(refused) = Refused::of(&error) => Err(StoreError::Unavailable(Box::new(refused))),
            Err(StoreError::Unavailable(cause)) if !is_unavailable_for_now(cause.as_ref()) => {
                Err(StoreError::Unavailable(cause))
            }
            _ => Ok(self),
        }
    }

    fn common(&self) -> &Common {
        &self.channel.common
    }

    /// The settings.
    pub fn settings(&self) -> &RedisSettings {
        &self.common().settings
    }

    /// Whether Redis answers, and the outages and errors seen so far (shared by every
    /// connection of this store); on a Cluster, each master's too.
    pub fn health(&self) -> RedisHealth {
        let common = self.common();
        let mut health = common.outages.health();
        if let Some(shards) = &common.shards {
            shards.add_to(&mut health);
        }
        health.refused = common.refusals.current().is_some();
        health.refusals = common.refusals.count();
        health
    }

    /// Asks Redis now, on this store's connection, with a write (bounded by the timeout):
    /// true when it answered (on a Cluster, every master, each with a write in its slots).
    /// A failure starts an outage, as a failed check does (on a Cluster, of the master that
    /// failed). While an outage is under way, answers false at once for what is down (the
    /// background probe asks meanwhile).
    pub async fn probe(&self) -> bool {
        if self.channel.link.is_down() {
            return false;
        }
        match self.channel.probe_once(self.settings().timeout, Previously::Answered).await {
            Ok(()) => self.common().shards.as_ref().is_none_or(Shards::all_up),
            Err(error) => {
                self.channel.fail(&error);
                false
            }
        }
    }

    /// Whether checks go to the module's `SLUICE.CHECK` rather than the scripts.
    pub fn uses_module(&self) -> bool {
        self.common().uses_module()
    }

    /// Asks Redis once (within two seconds) whether it takes this store's configuration:
    /// what a server does before it starts. The probe runs, then a peek (cost 0, nothing
    /// written) at a throwaway key, so that an ACL denying the command checks use (the
    /// module's `SLUICE.CHECK`, or `EVALSHA`) is found too. An outage (Redis unreachable,
    /// loading, out of memory) is not a refusal: the store starts in it, as
    /// [`RedisStore::open`] says.
    ///
    /// # Errors
    ///
    /// The refusal: a wrong user or password, an ACL that denies a command Sluice needs, a
    /// certificate one side does not trust; its text says what to change.
    pub async fn verify_configuration(&self) -> Result<(), Refused> {
        if let Err(error) = self.channel.probe_once(CONNECT_TIMEOUT, Previously::Answered).await {
            return Refused::of(&error).map_or(Ok(()), Err);
        }
        let window = FixedWindow::new(1, Duration::from_secs(1), Alignment::Aligned, Duration::ZERO);
        let Ok(window) = window else { return Ok(()) };
        let Ok(key) = Key::new(b"verify-configuration") else { return Ok(()) };
        let limits = [Limit::new("verify-configuration", window)];
        // A refusal the peek meets is recorded as any check's is (answered by the failure
        // mode meanwhile).
        let peek = Check::new(key, &limits, Timestamp::from_micros(wall_clock()), 0);
        let _peeked = Decide::decide(&self.channel, peek).await;
        self.refusal().map_or(Ok(()), Err)
    }

    /// The refusal under way: Redis refuses this store's configuration (wrong password,
    /// ACL, certificate), met by a check or a probe and not yet ended by one that succeeded.
    /// Checks meanwhile follow the failure mode; a server reports itself not ready.
    pub fn refusal(&self) -> Option<Refused> {
        self.common().refusals.current()
    }
}

impl Store for RedisStore {
    /// Boxed, as [`check_and_lease`](Store::check_and_lease): a check's future holds the
    /// script call and its timeouts (over 1 KB), which a caller's own future then need not
    /// hold nor lay out (a future nesting it stays small, and quick to compile).
    fn check(&self, check: Check<'_>) -> impl Future<Output = Result<Verdict, StoreError>> + Send {
        let decided = Box::pin(Decide::decide(&self.channel, check.lease(0, std::time::Duration::ZERO)));
        async move { Ok(decided.await?.verdict) }
    }

    fn reset(&self, key: Key<'_>, limits: &[Limit]) -> impl Future<Output = Result<(), StoreError>> + Send {
        reset::reset(&self.channel, key, limits)
    }

    fn check_and_lease(&self, check: Check<'_>) -> impl Future<Output = Result<LeaseAnswer, StoreError>> + Send {
        Box::pin(Decide::decide(&self.channel, check))
    }

    fn give_back(&self, back: GiveBack<'_>) -> impl Future<Output = Result<(), StoreError>> + Send {
        give_back::give_back(&self.channel, back)
    }
}
