//! One bucket with a limit, shared by the streams holding it: its shares, the bucket id
//! each holder's Envoy sent, and when the hub's tick next has something to do for it.

use crate::metrics::{Metrics, RlqsChecks};
use crate::rlqs::assignment::actions;
use crate::rlqs::holder::Usage;
use crate::rlqs::payer::QuotaPayer;
use crate::rlqs::round;
use crate::rlqs::shares::{Assignment, BucketShares, StreamId};
use crate::rlqs::timing::{Timing, Windows};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use sluice_core::{Key, Limit, StoreError, Timestamp};
use std::collections::HashMap;
use std::time::Duration;

/// How long a bucket waits for another round after one that assigned no share (unless a
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
    /// Its policy's `source="rlqs"` counters, resolved at its first report.
    checks: Option<RlqsChecks>,
}

impl SharedBucket {
    /// A bucket of `limit`, held by no stream yet, shared in `windows` at `timing`.
    pub(super) fn new(limit: Limit, windows: Windows, timing: Timing) -> SharedBucket {
        let shares = BucketShares::new(windows, timing);
        let (next_round, due_at) = (Timestamp::EPOCH, Timestamp::EPOCH);
        SharedBucket { shares, limit, ids: HashMap::new(), next_round, due_at, checks: None }
    }

    /// The limit its shares are paid from.
    pub(super) fn limit(&self) -> &Limit {
        &self.limit
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

    /// How many streams hold it.
    pub(super) fn holders(&self) -> usize {
        self.ids.len()
    }

    /// Whether no stream holds it.
    pub(super) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Counts the requests a report says Envoy decided, under its policy in `metrics`.
    pub(super) fn count_checks(&mut self, metrics: &Metrics, usage: Usage) {
        let name = self.limit.name();
        self.checks.get_or_insert_with(|| metrics.rlqs_checks(name)).count(usage.allowed, usage.denied);
    }

    /// Counts `stream`'s reported usage at `now`: what no grant paid for.
    pub(super) fn charge(&mut self, stream: StreamId, now: Timestamp, usage: Usage) -> u64 {
        let unpaid = self.shares.report(stream, now, usage);
        self.reschedule(now);
        unpaid
    }

    /// Forgets the holders that stopped reporting: how many, and the id of each whose id
    /// it knew.
    pub(super) fn drop_stale(&mut self, now: Timestamp) -> (usize, Vec<(StreamId, BucketId)>) {
        let stale = self.shares.drop_stale(now);
        let ids = stale.iter().filter_map(|stream| Some((*stream, self.ids.remove(stream)?))).collect();
        (stale.len(), ids)
    }

    /// What is due at `now` for `stream` alone, other than new shares.
    pub(super) fn renew_one(&mut self, stream: StreamId, now: Timestamp) -> Option<Assignment> {
        let due = self.shares.renew_one(stream, now);
        self.reschedule(now);
        due
    }

    /// What is due at `now` besides new shares: refusals renewed, shares closed as their
    /// window ends.
    pub(super) fn renew(&mut self, now: Timestamp) -> Vec<(StreamId, Assignment)> {
        self.shares.renew(now)
    }

    /// The actions telling `stream` `assignment`, if it holds the bucket.
    pub(super) fn assign(&self, stream: StreamId, assignment: &Assignment) -> Vec<BucketAction> {
        self.ids.get(&stream).map(|id| actions(id, assignment)).unwrap_or_default()
    }

    /// How many holders were last told a share, a refusal and nothing, at `now`.
    pub(super) fn census(&self, now: Timestamp) -> [usize; 3] {
        self.shares.census(now)
    }

    /// Whether its retry time has come at `now`.
    pub(super) fn round_due(&self, now: Timestamp) -> bool {
        now >= self.next_round
    }

    /// Divides what the limit has left at `key` among the holders that need tokens at
    /// `now`, paying `payer` for each part first ([`round::divide`]). A round that assigned
    /// no share puts the next off (by [`RETRY_ROUND_AFTER`], at most to the window's end).
    pub(super) async fn divide<P: QuotaPayer>(
        &mut self,
        payer: &P,
        key: Key<'_>,
        now: Timestamp,
    ) -> (Vec<(StreamId, Assignment)>, Option<StoreError>) {
        let (assigned, error) = round::divide(&mut self.shares, payer, key, &self.limit, now).await;
        if !assigned.iter().any(|(_, assignment)| assignment.tokens() > 0) {
            // A new window has quota again: its first tick tries at once.
            self.next_round = now.saturating_add(RETRY_ROUND_AFTER).min(self.shares.window_end(now));
        }
        self.reschedule(now);
        (assigned, error)
    }
}
