//! What a check gets when Redis is known down or fails: the failure mode's verdict, at
//! once and counted, and the failure recorded where it belongs (the connection, or on a
//! Cluster the master of the key's slot).

use super::RedisStore;
use super::errors::InOutage;
use crate::cluster::shards::Shard;
use sluice_core::{Key, Limit, StoreError, Timestamp, Verdict};
use std::sync::Arc;

impl RedisStore {
    /// The Cluster master that serves the slot of `keys` (one check's keys share it);
    /// `None` for another origin, or before the topology is known.
    pub(super) fn master_of(&self, keys: &[Vec<u8>]) -> Option<Arc<Shard>> {
        let first = keys.first()?;
        self.channel.shards().and_then(|shards| shards.for_key(first))
    }

    /// The error to answer with when this connection, or the Cluster `master` of the key,
    /// is known down (its probe started again, in case its task was dropped); `None` when
    /// Redis is to be asked.
    pub(super) fn known_down(&self, master: Option<&Arc<Shard>>) -> Option<StoreError> {
        if self.channel.link.is_down() {
            self.channel.start_probe();
        } else if let Some(master) = master.filter(|master| master.link.is_down()) {
            self.channel.start_master_probe(master);
        } else {
            return None;
        }
        Some(StoreError::Unavailable(Box::new(InOutage)))
    }

    /// The failure mode's verdict (counted, also for the key's Cluster `master`), or
    /// `error` when it has none.
    pub(super) fn without_redis(
        &self,
        key: Key<'_>,
        limits: &[Limit],
        now: Timestamp,
        cost: u64,
        master: Option<&Shard>,
        error: StoreError,
    ) -> Result<Verdict, StoreError> {
        let common = self.common();
        let degraded = common.settings.failure_mode.decide(&common.fallback, key, limits, now, cost);
        if degraded.is_some() {
            common.outages.count_answered();
            if let Some(master) = master {
                master.outages.count_answered();
            }
        }
        degraded.ok_or(error)
    }

    /// Records that Redis failed a check: on the key's Cluster `master` when there is one
    /// (the other masters' keys still go to Redis), else on this connection.
    pub(super) fn record_failure(&self, error: &StoreError, master: Option<&Arc<Shard>>) {
        match master {
            Some(master) => self.channel.fail_master(error, master),
            None => self.channel.fail(error),
        }
    }
}
