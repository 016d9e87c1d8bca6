//! The hub's buckets with a limit: their shares, and what the hub does with them on
//! reports and ticks (charge usage, renew, abandon the stale, re-divide).

use super::Hub;
use crate::rlqs::assignment::{abandon, token_bucket};
use crate::rlqs::holder::Usage;
use crate::rlqs::payer::QuotaPayer;
use crate::rlqs::round;
use crate::rlqs::shares::{BucketShares, StreamId};
use crate::rlqs::timing::{Timing, Windows};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use sluice_core::{Key, Limit, Timestamp};
use std::collections::HashMap;
use std::time::Duration;

/// How long a bucket waits for another round after one that assigned nothing (unless a
/// report comes first), so that an exhausted limit is not asked every tick.
const RETRY_ROUND_AFTER: Duration = Duration::from_secs(1);

/// A bucket with a limit, shared by the streams holding it.
#[derive(Debug)]
pub(super) struct SharedBucket {
    shares: BucketShares,
    limit: Limit,
    /// Each holder's bucket id, as its Envoy sent it.
    ids: HashMap<StreamId, BucketId>,
    next_round: Timestamp,
    /// When the tick has something to do for it ([`BucketShares::next_due`]).
    due_at: Timestamp,
}

impl SharedBucket {
    pub(super) fn new(limit: Limit, windows: Windows, timing: Timing) -> SharedBucket {
        let shares = BucketShares::new(windows, timing);
        SharedBucket { shares, limit, ids: HashMap::new(), next_round: Timestamp::EPOCH, due_at: Timestamp::EPOCH }
    }

    /// Records that `stream` holds this bucket as `id`.
    pub(super) fn hold(&mut self, stream: StreamId, id: &BucketId) {
        self.ids.insert(stream, id.clone());
    }

    /// Forgets `stream`'s hold.
    pub(super) fn release(&mut self, stream: StreamId) {
        self.ids.remove(&stream);
        self.shares.remove(stream);
    }

    /// Whether the tick at `now` has something to do for it.
    pub(super) fn is_due(&self, now: Timestamp) -> bool {
        self.due_at <= now
    }

    /// Sets when the tick next has something to do for it, after what happened at `now`.
    pub(super) fn reschedule(&mut self, now: Timestamp) {
        self.due_at = self.shares.next_due(now, self.next_round);
    }

    /// Whether no stream holds it.
    pub(super) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

impl Hub {
    /// Counts `stream`'s reported usage of the bucket at `key`: what no grant paid for is
    /// taken from the limit's state now (real traffic, as an RLS check would count it).
    pub(super) async fn charge(&mut self, key: &str, stream: StreamId, now: Timestamp, usage: Usage) {
        let Some(bucket) = self.shared.get_mut(key) else { return };
        let unpaid = bucket.shares.report(stream, now, usage);
        bucket.reschedule(now);
        let Ok(state_key) = Key::new(key.as_bytes()) else { return };
        if unpaid > 0
            && let Err(error) = self.service.engine.take(state_key, &bucket.limit, unpaid).await
        {
            tracing::warn!(key, unpaid, "RLQS usage not counted, the store did not answer: {error}");
        }
    }

    /// Abandons the bucket at `key` for the holders that stopped reporting.
    pub(super) fn drop_stale(&mut self, key: &str, now: Timestamp) {
        let Some(bucket) = self.shared.get_mut(key) else { return };
        let stale = bucket.shares.drop_stale(now);
        for stream in &stale {
            let Some(id) = bucket.ids.remove(stream) else { continue };
            if let Some(state) = self.streams.get_mut(stream) {
                state.forget(&id);
            }
            self.outgoing.entry(*stream).or_default().push(abandon(&id));
        }
        self.service.engine.metrics().rlqs().count_abandons("stale", stale.len());
    }

    /// Renews the grants of the bucket at `key` that are due.
    pub(super) fn renew(&mut self, key: &str, now: Timestamp) {
        let Some(bucket) = self.shared.get_mut(key) else { return };
        let renewed = bucket.shares.renew(now);
        self.service.engine.metrics().rlqs().count_assignments(renewed.len());
        for (stream, assignment) in renewed {
            if let Some(id) = bucket.ids.get(&stream) {
                self.outgoing.entry(stream).or_default().push(token_bucket(id, &assignment));
            }
        }
    }

    /// Divides the bucket at `key` when its retry time has come (on a tick).
    pub(super) async fn divide_when_due(&mut self, key: &str, now: Timestamp) {
        if self.shared.get(key).is_some_and(|bucket| now >= bucket.next_round) {
            self.divide(key, now).await;
        }
    }

    /// Divides the bucket at `key` among the holders that need tokens, paying for each
    /// part first.
    pub(super) async fn divide(&mut self, key: &str, now: Timestamp) {
        let Some(bucket) = self.shared.get_mut(key) else { return };
        let Ok(state_key) = Key::new(key.as_bytes()) else { return };
        let engine = &self.service.engine;
        let (assigned, error) = round::divide(&mut bucket.shares, engine, state_key, &bucket.limit, now).await;
        if let Some(error) = error {
            tracing::warn!(key, "RLQS shares not divided, the store did not answer: {error}");
        }
        if assigned.is_empty() {
            // A new window has quota again: its first tick tries at once.
            bucket.next_round = now.saturating_add(RETRY_ROUND_AFTER).min(bucket.shares.window_end(now));
        }
        bucket.reschedule(now);
        let metrics = engine.metrics().rlqs();
        metrics.count_assignments(assigned.len());
        for (stream, assignment) in assigned {
            metrics.count_tokens(assignment.tokens);
            if let Some(id) = bucket.ids.get(&stream) {
                self.outgoing.entry(stream).or_default().push(token_bucket(id, &assignment));
            }
        }
    }
}
