//! The RLQS buckets the hub counted last, the most held first: each with its rule and
//! what its holders were last told. The hub lists them on its once-a-second census (a walk
//! it makes anyway), so neither a report nor an assignment does more work, and a reader
//! takes the list without waiting for the hub.
//!
//! A bucket's key names a caller (it is made of the descriptor's values), so the list
//! is served by the admin endpoint `/v1/rlqs/buckets` and by the dashboard, under their
//! own access rules, and never as a metric label.

use parking_lot::Mutex;
use serde::Serialize;
use std::sync::Arc;
use utoipa::ToSchema;

/// The most buckets listed: the census keeps these, the most held first.
pub(crate) const LISTED_BUCKETS: usize = 100;

/// One limited bucket, as the census found it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub(crate) struct RlqsBucket {
    /// The bucket's state key (its domain, rule and descriptor values).
    pub(crate) key: String,
    /// The rule whose limit its shares are paid from (the name its figures go by).
    pub(crate) policy: String,
    /// Envoys (streams) holding it.
    pub(crate) holders: usize,
    /// Holders last told a share that still runs.
    pub(crate) share: usize,
    /// Holders last told a refusal (`DENY_ALL`) that still runs.
    pub(crate) refusal: usize,
    /// Holders told nothing that still runs.
    pub(crate) none: usize,
}

/// The buckets the last census listed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, ToSchema)]
pub(crate) struct BucketCensus {
    /// When it was taken, in seconds since the Unix epoch (0: none yet).
    pub(crate) at: u64,
    /// Limited buckets held then, listed or not.
    pub(crate) total: usize,
    /// The [`LISTED_BUCKETS`] held by the most Envoys at most, the most held first (then
    /// by key).
    pub(crate) buckets: Vec<RlqsBucket>,
}

impl BucketCensus {
    /// A census taken at `at` (µs) of `total` buckets, keeping the most held of `found`.
    pub(crate) fn of(at_micros: u64, total: usize, mut found: Vec<RlqsBucket>) -> BucketCensus {
        let order =
            |one: &RlqsBucket, other: &RlqsBucket| other.holders.cmp(&one.holders).then(one.key.cmp(&other.key));
        if found.len() > LISTED_BUCKETS {
            found.select_nth_unstable_by(LISTED_BUCKETS - 1, order);
            found.truncate(LISTED_BUCKETS);
        }
        found.sort_unstable_by(order);
        BucketCensus { at: at_micros / 1_000_000, total, buckets: found }
    }
}

/// The last census, swapped whole, so a reader never sees half of one.
#[derive(Debug, Default)]
pub(crate) struct ListedBuckets(Mutex<Arc<BucketCensus>>);

impl ListedBuckets {
    /// Replaces the list with `census`.
    pub(crate) fn publish(&self, census: BucketCensus) {
        *self.0.lock() = Arc::new(census);
    }

    /// The last census.
    pub(crate) fn last(&self) -> Arc<BucketCensus> {
        Arc::clone(&self.0.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(key: &str, holders: usize) -> RlqsBucket {
        let (policy, share, refusal, none) = ("rule".to_owned(), holders, 0, 0);
        RlqsBucket { key: key.to_owned(), policy, holders, share, refusal, none }
    }

    #[test]
    fn a_census_keeps_the_most_held_buckets_first() {
        let found: Vec<RlqsBucket> = (0..250).map(|index| bucket(&format!("k{index:03}"), index % 7)).collect();
        let census = BucketCensus::of(5_000_000, 250, found);
        assert_eq!((census.at, census.total, census.buckets.len()), (5, 250, LISTED_BUCKETS));
        assert!(census.buckets.windows(2).all(|pair| pair[0].holders >= pair[1].holders));
        // 35 buckets each hold 6, 5, and 4 Envoys: those 105 include the 100 listed.
        assert_eq!(census.buckets.last().unwrap().holders, 4);
        assert_eq!(census.buckets[0].key, "k006");
    }
}
