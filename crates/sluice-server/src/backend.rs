//! The store the service decides with: the embedded one or Redis.

use crate::settings::Settings;
use sluice::{Key, Limit, MemoryStore, Store, StoreError, Timestamp, Verdict};
use sluice_redis::{RedisSettings, RedisStore};
use std::cell::OnceCell;

/// The service's store. An enum, since [`Store`] is not object safe (its futures are
/// `impl Future`), and there are only two.
#[derive(Clone, Debug)]
pub(crate) enum Backend {
    /// The embedded store (the default).
    Memory(MemoryStore),
    /// Redis or Redis Cluster.
    Redis(RedisStore),
}

impl Backend {
    /// Opens the store `settings` choose.
    pub(crate) async fn open(settings: &Settings) -> anyhow::Result<Backend> {
        let redis = || RedisSettings {
            timeout: settings.redis_timeout,
            failure_mode: settings.failure_mode,
            ..RedisSettings::default()
        };
        match settings.store.connect_redis(redis()).await {
            None => Ok(Backend::Memory(MemoryStore::builder().max_keys(settings.max_keys).build())),
            Some(connected) => Ok(Backend::Redis(connected?)),
        }
    }

    /// Checks `key` against `limits`, all or nothing.
    pub(crate) async fn check(
        &self,
        key: Key<'_>,
        limits: &[Limit],
        now: Timestamp,
        cost: u64,
    ) -> Result<Verdict, StoreError> {
        match self {
            Backend::Memory(store) => store.check_now(key, limits, now, cost),
            // Boxed: a Redis call's future is over 1 KB, and every check's future would
            // otherwise be that large, moved and copied on the in-memory path too.
            Backend::Redis(store) => Box::pin(this_thread(store).check(key, limits, now, cost)).await,
        }
    }

    /// Forgets `key`'s states under `limits`.
    pub(crate) async fn reset(&self, key: Key<'_>, limits: &[Limit]) -> Result<(), StoreError> {
        match self {
            Backend::Memory(store) => store.reset(key, limits).await,
            Backend::Redis(store) => this_thread(store).reset(key, limits).await,
        }
    }

    /// Gives the calling thread a Redis connection of its own, driven by its runtime (each
    /// worker calls this once). Without it, every Redis call of a worker would wait for the
    /// main runtime's thread to run the shared connection: with both on one core, that
    /// cost two context switches per call. Nothing to do in memory; when Redis cannot be
    /// reached now, the thread keeps using the shared connection.
    pub(crate) async fn connect_this_thread(&self) {
        let Backend::Redis(store) = self else { return };
        match store.connect_again().await {
            // Leaked: a worker thread lives as long as the process, and a `&'static` lets
            // every check borrow it instead of cloning a store per call.
            Ok(own) => THIS_THREAD.with(|cell| {
                let _ = cell.set(Box::leak(Box::new(own)));
            }),
            Err(error) => {
                tracing::warn!(%error, "cannot open a Redis connection for this worker; using the shared one")
            }
        }
    }

    /// The embedded store, if that is the one in use.
    pub(crate) fn memory(&self) -> Option<&MemoryStore> {
        match self {
            Backend::Memory(store) => Some(store),
            Backend::Redis(_) => None,
        }
    }
}

thread_local! {
    /// This thread's own Redis connection ([`Backend::connect_this_thread`]).
    static THIS_THREAD: OnceCell<&'static RedisStore> = const { OnceCell::new() };
}

/// The calling thread's own connection to `shared`'s Redis, or `shared`.
fn this_thread(shared: &RedisStore) -> &RedisStore {
    THIS_THREAD.with(|own| own.get().copied()).unwrap_or(shared)
}
