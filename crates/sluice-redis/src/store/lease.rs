//! Leases on Redis: [`Store::check_and_lease`] for the [`RedisStore`].
//!
//! The lease is the store's ordinary check with the cost `cost + extra`, in the same
//! script or module command (so it is as atomic as any check, on every server and in
//! Cluster). When it does not fit every limit, the request's own cost is then decided
//! alone, as `check` decides it: limits that can be leased record nothing on a rejection,
//! so the first attempt left no trace. docs/leases.md has the rest.

use super::RedisStore;
use super::cached_now;
use crate::blocked::Now;
use crate::keys::state_key;
use sluice_core::{Key, LeaseAnswer, Limit, StoreError, Timestamp};

impl RedisStore {
    /// [`Store::check_and_lease`](sluice_core::Store::check_and_lease) on Redis.
    pub(super) async fn check_and_lease_limits(
        &self,
        key: Key<'_>,
        limits: &[Limit],
        (now, cost): (Timestamp, u64),
        extra: u64,
    ) -> Result<LeaseAnswer, StoreError> {
        let leasable = extra > 0 && cost > 0 && !limits.iter().any(|limit| limit.policy().records_rejections());
        let Some(total) = cost.checked_add(extra).filter(|_| leasable && !limits.is_empty()) else {
            return self.check_limits(key, limits, now, cost).await.map(LeaseAnswer::unleased);
        };
        let keys: Vec<Vec<u8>> =
            limits.iter().map(|limit| state_key(&self.settings().key_prefix, key, limit)).collect();
        let master = self.master_of(&keys);
        let script_now = self.script_now(now, limits)?;
        if self.is_blocked(&keys, cached_now(script_now, now), cost) || self.known_down(master.as_ref()).is_some() {
            // The blocked-key cache or the failure mode answers, as for any check.
            return self.check_limits(key, limits, now, cost).await.map(LeaseAnswer::unleased);
        }
        match self.evaluate(keys, limits, script_now, total).await {
            Ok((reply, _)) if reply.decisions.iter().all(|decision| decision.allowed) => {
                LeaseAnswer::granted(reply.decisions, Timestamp::from_micros(reply.now)).ok_or(StoreError::NoLimits)
            }
            Ok(_) => self.check_limits(key, limits, now, cost).await.map(LeaseAnswer::unleased),
            Err(error) if error.is_transient() => {
                self.record_failure(&error, master.as_ref());
                self.without_redis(key, limits, now, cost, master.as_deref(), error).map(LeaseAnswer::unleased)
            }
            Err(error) => Err(error),
        }
    }

    /// True when the blocked-key cache holds a rejection for a request of `cost` on `keys`.
    fn is_blocked(&self, keys: &[Vec<u8>], now: Now, cost: u64) -> bool {
        let common = self.common();
        common.settings.blocked_cache && common.blocked.lookup(&keys.join(&0u8), now, cost).is_some()
    }
}
