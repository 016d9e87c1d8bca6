//! `RedisStore`: every decision is one command on Redis or Redis Cluster, the module's
//! `SLUICE.CHECK` where Redis has it loaded, else one script call.

mod channel;
mod cluster;
mod configuration;
mod errors;
mod give_back;
mod lease;
mod origin;
mod outage;
mod reset;
mod standalone;
mod standalone_connection;

use crate::blocked::{BlockedCache, Now, Remembered};
use crate::cluster::shards::Shards;
use crate::deadline::{ClockLead, wall_clock};
use crate::exact_time;
use crate::health::{Outages, RedisHealth};
use crate::keys::state_key;
use crate::refusal::{MetBy, Refusals, Refused};
use crate::script::{Reply, Scripts, decode, module_command};
use crate::settings::{ModuleUse, RedisSettings, TimeSource};
use crate::tls::TlsConnector;
use crate::url::without_password;
use channel::{Channel, Request};
use errors::{Expired, is_script_error, is_unavailable_for_now, unavailable, within};
use origin::{CONNECT_TIMEOUT, Origin, tcp_settings};
use redis::cluster::ClusterClient;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use sluice_core::{Key, LeaseAnswer, Limit, MemoryStore, Store, StoreError, Timestamp, Verdict};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// What every connection of one store shares.
pub(crate) struct Common {
    /// Where connections are made.
    origin: Origin,
    scripts: Scripts,
    /// The probe script (`channel` module).
    probe: redis::Script,
    settings: RedisSettings,
    blocked: BlockedCache,
    /// This process's states while Redis is down, under [`FailureMode::Fallback`](crate::FailureMode).
    fallback: MemoryStore,
    outages: Outages,
    /// A Cluster's masters and their health; `None` for another origin.
    shards: Option<Shards>,
    /// Redis's clock's lead over this process's, for deadlines.
    lead: ClockLead,
    /// The last probe found the Sluice module loaded ([`ModuleUse::Detect`]).
    module_loaded: AtomicBool,
    /// Whether Redis refuses this store's configuration now (`refusal` module).
    refusals: Refusals,
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
        // The Cluster client's own bound per call is the store's (its default is 500 ms).
        let mut builder =
            ClusterClient::builder(urls.to_vec()).tcp_settings(tcp_settings()).response_timeout(settings.timeout);
        if !settings.tls.is_empty() {
            builder = builder.certs(settings.tls.read()?);
        }
        let client = builder.build().map_err(unavailable)?;
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
        let shards =
            matches!(origin, Origin::Cluster(_)).then(|| Shards::new(&settings.key_prefix, settings.failure_mode));
        let common = Common {
            origin,
            scripts: Scripts::default(),
            probe: redis::Script::new(channel::PROBE),
            blocked: BlockedCache::default(),
            fallback: MemoryStore::builder().max_keys(settings.fallback_max_keys).build(),
            outages: Outages::new(target, settings.failure_mode),
            shards,
            lead: ClockLead::default(),
            module_loaded: AtomicBool::new(false),
            refusals: Refusals::default(),
            settings,
        };
        Ok(RedisStore { channel: Channel::open(Arc::new(common))? })
    }

    /// This store once Redis answered a probe (within two seconds), even with an error that
    /// says it cannot serve for now (out of memory, a replica, loading): it is reachable,
    /// and the failure mode decides until it serves again. Any other error (refused,
    /// timeout, wrong password, a command the ACL denies) is returned.
    async fn answering(self) -> Result<Self, StoreError> {
        match self.channel.probe_once(CONNECT_TIMEOUT, false).await {
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
        match self.channel.probe_once(self.settings().timeout, false).await {
            Ok(()) => self.common().shards.as_ref().is_none_or(Shards::all_up),
            Err(error) => {
                self.channel.fail(&error);
                false
            }
        }
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
        let common = self.common();
        let script_now = self.script_now(now, limits)?;
        let keys: Vec<Vec<u8>> =
            limits.iter().map(|limit| state_key(&common.settings.key_prefix, key, limit)).collect();
        let cache_id = common.settings.blocked_cache.then(|| keys.join(&0u8));
        if let Some(verdict) =
            cache_id.as_deref().and_then(|id| common.blocked.lookup(id, cached_now(script_now, now), cost))
        {
            return Ok(verdict);
        }
        let master = self.master_of(&keys);
        if let Some(outage) = self.known_down(master.as_ref()) {
            return self.without_redis(key, limits, now, cost, master.as_deref(), outage);
        }
        let asked = common.blocked.generation();
        match self.evaluate(keys, limits, script_now, cost).await {
            Ok((reply, verdict)) => {
                if let Some(id) = cache_id {
                    // A state whose time was later than `now` decided at that time: its
                    // answer does not age with `now`, so it is not cached.
                    let verdict = reply.unclamped.then_some(verdict);
                    let remembered =
                        Remembered { limits, verdict, decided_at: reply.now, asked_at: now.as_micros(), cost };
                    common.blocked.remember(id, asked, remembered);
                }
                Ok(verdict)
            }
            Err(error) if error.is_transient() => {
                self.record_failure(&error, master.as_ref());
                self.without_redis(key, limits, now, cost, master.as_deref(), error)
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
        let common = self.common();
        let deadline = common.lead.deadline(wall_clock(), common.settings.timeout);
        let reply = if self.uses_module() {
            let command = module_command(keys, limits, now, cost, deadline, &common.settings);
            self.channel.send::<Vec<u8>>(common.settings.timeout, Request::Command(&command)).await
        } else {
            let invocation = common.scripts.invocation(keys, limits, now, cost, deadline, &common.settings);
            self.channel.send::<Vec<u8>>(common.settings.timeout, Request::Script(&invocation)).await
        };
        let reply = reply.map_err(|error| match error {
            StoreError::Unavailable(cause) if is_script_error(cause.as_ref()) => {
                StoreError::Malformed(cause.to_string())
            }
            other => other,
        })?;
        if reply.is_empty() {
            return Err(StoreError::Unavailable(Box::new(Expired)));
        }
        let reply = decode(&reply, limits.len())?;
        common.lead.observe(reply.clock, wall_clock());
        // Redis decided: a refusal a check met is over (a lease's check counts as one).
        common.refusals.answered(MetBy::Check, common.outages.target());
        let verdict = Verdict::combine(&reply.decisions).ok_or(StoreError::NoLimits)?;
        Ok((reply, verdict))
    }

    /// Whether checks go to the module's `SLUICE.CHECK` rather than the scripts.
    pub fn uses_module(&self) -> bool {
        match self.settings().module {
            ModuleUse::Detect => self.common().module_loaded.load(Ordering::Relaxed),
            ModuleUse::Always => true,
            ModuleUse::Never => false,
        }
    }

    /// The `now` the script gets (-1 to read Redis `TIME`), when the scripts of `limits`
    /// compute exactly at that time.
    fn script_now(&self, now: Timestamp, limits: &[Limit]) -> Result<i64, StoreError> {
        match self.settings().time {
            TimeSource::Redis => exact_time::refuse_inexact(None, limits).map(|()| -1),
            TimeSource::Application { .. } => {
                exact_time::refuse_inexact(Some(now.as_micros()), limits)?;
                // Below 2^53 by the check above, so the cast is exact.
                Ok(now.as_micros() as i64)
            }
        }
    }
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

    fn check_and_lease(
        &self,
        key: Key<'_>,
        limits: &[Limit],
        now: Timestamp,
        cost: u64,
        extra: u64,
    ) -> impl Future<Output = Result<LeaseAnswer, StoreError>> + Send {
        self.check_and_lease_limits(key, limits, (now, cost), extra)
    }

    fn give_back(
        &self,
        key: Key<'_>,
        limits: &[Limit],
        starts: &[u64],
        units: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.give_back_units(key, limits, starts, units)
    }
}

/// The time the blocked-key cache compares with, for a check whose script gets
/// `script_now` (-1: Redis `TIME`).
fn cached_now(script_now: i64, now: Timestamp) -> Now {
    if script_now < 0 { Now::Redis(now.as_micros()) } else { Now::Caller(now.as_micros()) }
}
