//! Limits that never get a lease, and why: [`never_leased`].

use super::sizing::SHARE_OF_REMAINING;
use crate::Limit;
use std::fmt;

/// Why a limit never gets a lease. Nothing is refused: every check of it goes to the
/// store, which decides it exactly, as without leases; and so does every check of several
/// limits that includes it (a lease covers all of a check's limits or none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NoLease {
    /// Its whole quota (a `limit`, a token bucket's `capacity`, a leaky bucket's
    /// `burst + 1`: [`Policy::limit`](crate::Policy::limit)) is 4 or less. A lease takes at
    /// most a quarter of what the store said remained after a request, and at most
    /// `quota - 1` remains after one: less than one unit. So a token bucket of capacity 1
    /// or a leaky bucket of burst 0 is never leased (the fleet could never hold more than
    /// the bucket).
    SmallQuota {
        /// The limit's whole quota.
        quota: u64,
    },
    /// A lease of it would not be exact (the `attempts` variants); the reason is
    /// [`check_leasable`](super::check_leasable)'s.
    Inexact(&'static str),
}

impl NoLease {
    /// The reason in one word, for a metric's label: `small_quota` or `inexact`.
    pub fn label(self) -> &'static str {
        match self {
            NoLease::SmallQuota { .. } => "small_quota",
            NoLease::Inexact(_) => "inexact",
        }
    }
}

impl fmt::Display for NoLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoLease::SmallQuota { quota } => write!(
                f,
                "its whole quota ({quota}) is {SHARE_OF_REMAINING} or less, and a lease takes at most a quarter of \
                 what remains after a request"
            ),
            NoLease::Inexact(reason) => write!(f, "a lease of it would not be exact: {reason}"),
        }
    }
}

/// Why `limit` never gets a lease from a [`LeasedStore`](super::LeasedStore), or `None`
/// when it may get one (when its traffic and what remains of its quota allow).
///
/// # Examples
///
/// ```
/// use sluice_core::lease::{NoLease, never_leased};
/// use sluice_core::{Limit, TokenBucket, TokenBucketSettings};
/// use std::time::Duration;
///
/// let bucket = |capacity| {
///     let settings = TokenBucketSettings { capacity, refill_amount: 1, refill_interval: Duration::from_secs(1) };
///     Limit::new("api", TokenBucket::new(settings).unwrap())
/// };
/// assert_eq!(never_leased(&bucket(1)), Some(NoLease::SmallQuota { quota: 1 }));
/// assert_eq!(never_leased(&bucket(4)).map(NoLease::label), Some("small_quota"));
/// assert_eq!(never_leased(&bucket(5)), None);
/// ```
pub fn never_leased(limit: &Limit) -> Option<NoLease> {
    let policy = limit.policy();
    if let Some(reason) = policy.lease_terms().refusal() {
        return Some(NoLease::Inexact(reason));
    }
    let quota = policy.limit();
    (quota <= SHARE_OF_REMAINING).then_some(NoLease::SmallQuota { quota })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::LeasedStore;
    use crate::{
        Alignment, Check, FixedWindow, Key, LeakMode, LeakyBucket, MemoryStore, SlidingLog, SlidingLogVariant,
        SlidingWindow, Store, Timestamp, TokenBucket, TokenBucketSettings,
    };
    use std::sync::Arc;
    use std::time::Duration;

    /// A limit of each algorithm whose whole quota is `quota`, and that does not refill
    /// during a test.
    fn every_algorithm(quota: u64) -> Vec<Limit> {
        let hour = Duration::from_secs(3_600);
        let bucket = TokenBucketSettings { capacity: quota, refill_amount: 1, refill_interval: hour };
        vec![
            Limit::new("fixed", FixedWindow::new(quota, hour, Alignment::Anchored, Duration::ZERO).unwrap()),
            Limit::new("sliding", SlidingWindow::new(quota, hour, 10).unwrap()),
            Limit::new("log", SlidingLog::new(quota, hour, SlidingLogVariant::Accepted).unwrap()),
            Limit::new("bucket", TokenBucket::new(bucket).unwrap()),
            Limit::new("gcra", LeakyBucket::new(hour, quota - 1, LeakMode::NoDelay).unwrap()),
        ]
    }

    /// Checks `limit` at every millisecond for a lease period, through a `LeasedStore` in
    /// front of a memory store: the checks leased units answered.
    async fn leased_checks(limit: Limit) -> u64 {
        let store = LeasedStore::new(Arc::new(MemoryStore::new()), Duration::from_millis(100));
        let limits = [limit];
        for at in 0..100 {
            let check = Check::new(Key::new(b"k").unwrap(), &limits, Timestamp::from_micros(at * 1_000), 1);
            store.check(check).await.unwrap();
        }
        store.figures().leased_checks
    }

    #[tokio::test]
    async fn a_quota_of_four_is_never_leased_and_one_of_five_can_be() {
        for limit in every_algorithm(4) {
            assert_eq!(never_leased(&limit), Some(NoLease::SmallQuota { quota: 4 }), "{limit:?}");
            assert_eq!(leased_checks(limit.clone()).await, 0, "{limit:?}");
        }
        // The bound is sharp: a window of 5 lends its fifth unit to a busy process.
        let fixed = every_algorithm(5).remove(0);
        assert_eq!(leased_checks(fixed).await, 1);
        for limit in every_algorithm(5).into_iter().chain(every_algorithm(100)) {
            assert_eq!(never_leased(&limit), None, "{limit:?}");
        }
        for limit in every_algorithm(100) {
            assert!(leased_checks(limit.clone()).await > 0, "{limit:?}");
        }
    }

    #[test]
    fn a_variant_a_lease_would_not_keep_exact_is_never_leased() {
        let log = SlidingLog::new(100, Duration::from_secs(60), SlidingLogVariant::Attempts).unwrap();
        let reason = never_leased(&Limit::new("login", log));
        assert!(matches!(reason, Some(NoLease::Inexact(_))), "{reason:?}");
        assert_eq!(reason.map(NoLease::label), Some("inexact"));
    }
}
