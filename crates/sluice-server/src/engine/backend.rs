//! The store the service decides with: the embedded one or Redis.

use crate::config::settings::Settings;
use sluice_core::lease::{LeaseFigures, LeasedStore, LimitLeaseFigures, Unspent};
use sluice_core::{Check, Key, Limit, MemoryStore, Store, StoreError, SystemClock, Timestamp, Verdict};
use sluice_redis::{RedisSettings, RedisStore};

/// The service's store. An enum, since [`Store`] is not object safe (its futures are
/// `impl Future`), and there are only two.
#[derive(Clone, Debug)]
pub(crate) enum Backend {
    /// The embedded store (the default).
    Memory(MemoryStore),
    /// Redis or Redis Cluster, behind this process's leases (which lease nothing when the
    /// lease period is 0).
    Redis(LeasedStore<RedisStore>),
}

impl Backend {
    /// Opens the store `settings` choose.
    pub(crate) async fn open(settings: &Settings) -> anyhow::Result<Backend> {
        let redis = || RedisSettings {
            timeout: settings.redis_timeout,
            failure_mode: settings.failure_mode,
            module: settings.redis_module,
            tls: settings.redis_tls(),
            fallback_max_keys: settings.max_keys,
            ..RedisSettings::default()
        };
        match settings.store.open_redis(redis()).await {
            None => Ok(Backend::Memory(
                MemoryStore::builder().max_keys(settings.max_keys).max_memory(settings.max_memory).build(),
            )),
            Some(connected) => {
                let leased = LeasedStore::new(connected?, settings.lease_period).with_clock(SystemClock::new());
                Ok(Backend::Redis(leased))
            }
        }
    }

    /// Decides `check`, all or nothing.
    pub(crate) async fn check(&self, check: Check<'_>) -> Result<Verdict, StoreError> {
        match self {
            Backend::Memory(store) => store.check_now(check.key, check.limits, check.now, check.cost),
            // The store boxes its own future (over 1 KB), so every check's future stays small
            // on the in-memory path too.
            Backend::Redis(store) => store.check(check).await,
        }
    }

    /// Forgets `key`'s states under `limits`.
    pub(crate) async fn reset(&self, key: Key<'_>, limits: &[Limit]) -> Result<(), StoreError> {
        match self {
            Backend::Memory(store) => store.reset(key, limits).await,
            Backend::Redis(store) => store.reset(key, limits).await,
        }
    }

    /// The store for the calling thread, as each worker opens at start: on Redis, a
    /// connection of its own, driven by the thread's runtime. Without it, every Redis call
    /// of a worker would wait for the main runtime's thread to run the shared connection:
    /// with both on one core, that cost two context switches per call. The embedded store
    /// is shared as it is. Returns once the connection's first probe has ended (at most
    /// 5 s): Redis answered it (a Sentinel's primary found, a Cluster's masters each
    /// probed), so the worker's first checks are decided by Redis; or Redis is known down,
    /// and they follow the failure mode at once until a probe finds it.
    pub(crate) async fn for_this_thread(&self) -> Backend {
        let Backend::Redis(store) = self else { return self.clone() };
        match store.inner().connect_again().await {
            Ok(own) => Backend::Redis(store.in_front_of(own)),
            Err(error) => {
                tracing::warn!(%error, "cannot open a Redis connection for this worker; using the shared one");
                self.clone()
            }
        }
    }

    /// The Redis store, if that is the one in use.
    pub(crate) fn redis(&self) -> Option<&RedisStore> {
        match self {
            Backend::Memory(_) => None,
            Backend::Redis(store) => Some(store.inner()),
        }
    }

    /// What this process's leases did, when the store is shared.
    pub(crate) fn lease_figures(&self) -> Option<LeaseFigures> {
        match self {
            Backend::Memory(_) => None,
            Backend::Redis(store) => Some(store.figures()),
        }
    }

    /// What this process's leases did for each limit, by name (none on the embedded store).
    pub(crate) fn lease_figures_by_limit(&self) -> Vec<LimitLeaseFigures> {
        match self {
            Backend::Memory(_) => Vec::new(),
            Backend::Redis(store) => store.figures_by_limit(),
        }
    }

    /// Gives up leased units that can no longer be spent, and gives `which` keys' unspent
    /// units back to the store (a periodic task's job, and the shutdown's and a reload's).
    pub(crate) async fn settle_leases(&self, now: Timestamp, which: Unspent) {
        if let Backend::Redis(store) = self {
            store.sweep(now);
            store.give_back(now, which).await;
        }
    }

    /// Redis's health, if Redis is the store.
    pub(crate) fn redis_health(&self) -> Option<sluice_redis::RedisHealth> {
        self.redis().map(RedisStore::health)
    }

    /// The embedded store, if that is the one in use.
    pub(crate) fn memory(&self) -> Option<&MemoryStore> {
        match self {
            Backend::Memory(store) => Some(store),
            Backend::Redis(_) => None,
        }
    }
}
