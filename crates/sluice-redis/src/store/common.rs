//! [`Common`]: what every connection of one store shares, and what it can tell from that
//! alone (the state keys of a check, the time a script gets, whether the module decides).

use super::origin::Origin;
use crate::blocked::BlockedCache;
use crate::cluster::shards::Shards;
use crate::deadline::ClockLead;
use crate::exact_time;
use crate::health::Outages;
use crate::keys::state_key;
use crate::refusal::{MetBy, Refusals, Refused};
use crate::script::Scripts;
use crate::settings::{ModuleUse, RedisSettings, TimeSource};
use sluice_core::{Key, Limit, MemoryStore, StoreError, Timestamp};
use std::sync::atomic::{AtomicBool, Ordering};

/// The probe: a write (so that a Redis refusing writes, out of memory or a replica, is
/// not taken as up), then Redis `TIME` in µs, which samples its clock for deadlines.
pub(super) const PROBE: &str = "redis.call('SET', KEYS[1], '1', 'PX', 60000)\n\
                     local t = redis.call('TIME')\n\
                     return tonumber(t[1]) * 1000000 + tonumber(t[2])";

/// What every connection of one store shares.
pub(crate) struct Common {
    /// Where connections are made.
    pub(super) origin: Origin,
    pub(super) scripts: Scripts,
    /// The probe script ([`PROBE`]).
    pub(super) probe: redis::Script,
    pub(super) settings: RedisSettings,
    pub(super) blocked: BlockedCache,
    /// This process's states while Redis is down, under [`FailureMode::Fallback`](crate::FailureMode).
    pub(super) fallback: MemoryStore,
    pub(super) outages: Outages,
    /// A Cluster's masters and their health; `None` for another origin.
    pub(super) shards: Option<Shards>,
    /// Redis's clock's lead over this process's, for deadlines.
    pub(super) lead: ClockLead,
    /// The last probe found the Sluice module loaded ([`ModuleUse::Detect`]).
    pub(super) module_loaded: AtomicBool,
    /// Whether Redis refuses this store's configuration now (`refusal` module).
    pub(super) refusals: Refusals,
}

impl Common {
    /// What connections to `origin` share, with `settings`, reporting outages of `target`.
    pub(super) fn new(origin: Origin, target: String, settings: RedisSettings) -> Self {
        let shards =
            matches!(origin, Origin::Cluster(_)).then(|| Shards::new(&settings.key_prefix, settings.failure_mode));
        Common {
            origin,
            scripts: Scripts::default(),
            probe: redis::Script::new(PROBE),
            blocked: BlockedCache::default(),
            fallback: MemoryStore::builder().max_keys(settings.fallback_max_keys).build(),
            outages: Outages::new(target, settings.failure_mode),
            shards,
            lead: ClockLead::default(),
            module_loaded: AtomicBool::new(false),
            refusals: Refusals::default(),
            settings,
        }
    }

    /// Records the refusal inside `error`, if it is one.
    pub(super) fn note_refusal(&self, error: &StoreError, met_by: MetBy) {
        if let Some(refused) = Refused::of(error) {
            self.refusals.met(refused, met_by, self.outages.target());
        }
    }

    /// Whether checks go to the module's `SLUICE.CHECK` rather than the scripts.
    pub(super) fn uses_module(&self) -> bool {
        match self.settings.module {
            ModuleUse::Detect => self.module_loaded.load(Ordering::Relaxed),
            ModuleUse::Always => true,
            ModuleUse::Never => false,
        }
    }

    /// The Redis keys of `key`'s states under `limits`, one per limit (they share a hash tag).
    pub(super) fn state_keys(&self, key: Key<'_>, limits: &[Limit]) -> Vec<Vec<u8>> {
        limits.iter().map(|limit| state_key(&self.settings.key_prefix, key, limit)).collect()
    }

    /// The `now` the script gets (-1 to read Redis `TIME`), when the scripts of `limits`
    /// compute exactly at that time.
    pub(super) fn script_now(&self, now: Timestamp, limits: &[Limit]) -> Result<i64, StoreError> {
        match self.settings.time {
            TimeSource::Redis => exact_time::refuse_inexact(None, limits).map(|()| -1),
            TimeSource::Application { .. } => {
                exact_time::refuse_inexact(Some(now.as_micros()), limits)?;
                // Below 2^53 by the check above, so the cast is exact.
                Ok(now.as_micros() as i64)
            }
        }
    }
}
