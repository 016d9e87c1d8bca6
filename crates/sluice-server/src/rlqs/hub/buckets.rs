//! The hub's buckets with a limit, by state key: what applies to a bucket a stream
//! reports (a limited one joins the shares of its state key), and what the hub does with
//! the shares on reports and ticks (charge usage, renew refusals and close shares, abandon
//! the stale, re-divide).

use super::outgoing::Outgoing;
use super::shared_bucket::SharedBucket;
use super::stream_state::Tracked;
use crate::engine::Engine;
use crate::envoy::{Resolution, Rules};
use crate::metrics::{BucketCensus, LISTED_BUCKETS, RlqsBucket};
use crate::rlqs::assignment::{BlanketRule, abandon};
use crate::rlqs::holder::Usage;
use crate::rlqs::payer::QuotaPayer;
use crate::rlqs::report::{BucketReport, Entries};
use crate::rlqs::shares::{Assignment, StreamId};
use crate::rlqs::timing::{Timing, Windows};
use crate::runtime::rarely::Rarely;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use sluice_core::{Key, Limit, Timestamp};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Instant;
use tonic::Status;

/// What the rules say of a bucket, before it joins any shares.
enum Applies {
    /// No rule, or one whose window is too short to share ([`Tracked::NoRule`]).
    NoRule,
    /// Every request allowed, or none.
    Blanket(BlanketRule),
    /// A limit, shared at its state key.
    Limited { key: String, limit: Limit, windows: Windows },
}

/// What applies to a bucket of `entries` in `domain` under `rules` (`shadow_all`: every
/// rule in shadow mode); `INVALID_ARGUMENT` when its state key would be too long.
fn applies(rules: Option<&Rules>, shadow_all: bool, domain: &str, entries: &Entries) -> Result<Applies, Status> {
    let Some(rules) = rules else { return Ok(Applies::NoRule) };
    let entries = entries.iter().map(|(key, value)| (key.as_str(), value.as_str()));
    Ok(match rules.resolve(domain, entries) {
        Resolution::Unlimited(_) => Applies::Blanket(BlanketRule::AllowAll),
        Resolution::Blocked(rule) | Resolution::Limited { rule, .. } if shadow_all || rule.shadow_mode() => {
            Applies::Blanket(BlanketRule::AllowAll)
        }
        Resolution::Blocked(_) => Applies::Blanket(BlanketRule::DenyAll),
        Resolution::Limited { limit, key, .. } => match Windows::new(limit.policy().quota_window()) {
            Some(windows) => Applies::Limited { key: key.as_str().to_owned(), limit: limit.clone(), windows },
            None => Applies::NoRule,
        },
        Resolution::KeyTooLong { len, .. } => {
            return Err(Status::invalid_argument(format!(
                "bucket id too long: its state key would be {len} bytes, over the {} allowed",
                sluice_core::Key::MAX_LEN
            )));
        }
        Resolution::NoRule | Resolution::Overridden { .. } => Applies::NoRule,
    })
}

/// The buckets with a limit, by state key.
#[derive(Debug)]
pub(super) struct Buckets {
    shared: HashMap<String, SharedBucket>,
    timing: Timing,
    /// Rounds that had to refuse Envoys, logged rarely.
    exhausted: Rarely,
}

impl Buckets {
    /// No bucket yet; assignments will follow `timing`.
    pub(super) fn new(timing: Timing) -> Buckets {
        Buckets { shared: HashMap::new(), timing, exhausted: Rarely::default() }
    }

    /// What applies to `bucket` of `stream` in `domain` under `rules` (`shadow_all`: every
    /// rule in shadow mode); a limited one joins (or starts) the shares of its state key.
    pub(super) fn resolve(
        &mut self,
        rules: Option<&Rules>,
        shadow_all: bool,
        stream: StreamId,
        domain: &str,
        bucket: &BucketReport,
    ) -> Result<Tracked, Status> {
        let id = bucket.id.clone();
        Ok(match applies(rules, shadow_all, domain, &bucket.entries)? {
            Applies::NoRule => Tracked::NoRule,
            Applies::Blanket(rule) => Tracked::Blanket { id, rule },
            Applies::Limited { key, limit, windows } => {
                self.join(key.clone(), limit, windows, stream, &id);
                Tracked::Shared { id, key }
            }
        })
    }

    /// Whether `tracked`, a bucket of `entries` in `domain`, is served as it is under
    /// `rules` (after a reload): the same blanket rule, or the same limit at the same key.
    pub(super) fn still_applies(
        &self,
        (rules, shadow_all): (Option<&Rules>, bool),
        domain: &str,
        entries: &Entries,
        tracked: &Tracked,
    ) -> bool {
        match (tracked, applies(rules, shadow_all, domain, entries)) {
            (Tracked::Blanket { rule, .. }, Ok(Applies::Blanket(now))) => *rule == now,
            (Tracked::Shared { key, .. }, Ok(Applies::Limited { key: now, limit, .. })) => {
                *key == now && self.shared.get(key).is_some_and(|shared| *shared.limit() == limit)
            }
            _ => false,
        }
    }

    /// Records that `stream` holds the bucket of `limit` at `key` as `id`, starting its
    /// shares (in `windows`) when it is the first holder.
    fn join(&mut self, key: String, limit: Limit, windows: Windows, stream: StreamId, id: &BucketId) {
        let timing = self.timing;
        let shared = self.shared.entry(key);
        shared.or_insert_with(|| SharedBucket::new(limit, windows, timing)).hold(stream, id);
    }

    /// Forgets `stream`'s hold on the bucket at `key`.
    pub(super) fn release(&mut self, key: &str, stream: StreamId) {
        if let Some(shared) = self.shared.get_mut(key) {
            shared.release(stream);
        }
    }

    /// Forgets every bucket (all abandoned).
    pub(super) fn clear(&mut self) {
        self.shared.clear();
    }

    /// Forgets the buckets no stream holds any more.
    pub(super) fn drop_unheld(&mut self) {
        self.shared.retain(|_, bucket| !bucket.is_empty());
    }

    /// The state keys of the buckets the tick at `now` has something to do for.
    pub(super) fn due(&self, now: Timestamp) -> Vec<String> {
        self.shared.iter().filter(|(_, bucket)| bucket.is_due(now)).map(|(key, _)| key.clone()).collect()
    }

    /// After the tick at `now`: forgets the bucket at `key` when no stream holds it any
    /// more, or sets when the tick next has something to do for it.
    pub(super) fn settle(&mut self, key: &str, now: Timestamp) {
        match self.shared.get_mut(key) {
            Some(bucket) if bucket.is_empty() => {
                self.shared.remove(key);
            }
            Some(bucket) => bucket.reschedule(now),
            None => {}
        }
    }

    /// Counts `stream`'s reported usage of the bucket at `key`: what no grant paid for is
    /// taken from the limit's state now, through `engine` (real traffic, as an RLS check
    /// would count it). What is due for the stream's holder besides new shares (a refusal
    /// for an idle one that holds no answer) goes to `outgoing`.
    pub(super) async fn charge(
        &mut self,
        key: &str,
        (stream, usage): (StreamId, Usage),
        now: Timestamp,
        engine: &Engine,
        outgoing: &mut Outgoing,
    ) {
        let Some(bucket) = self.shared.get_mut(key) else { return };
        bucket.count_checks(engine.metrics(), usage);
        let unpaid = bucket.charge(stream, now, usage);
        let due = bucket.renew_one(stream, now).map(|assignment| vec![(stream, assignment)]).unwrap_or_default();
        send(bucket, due, engine, outgoing);
        let Ok(state_key) = Key::new(key.as_bytes()) else { return };
        if unpaid > 0
            && let Err(error) = engine.take(state_key, bucket.limit(), unpaid).await
        {
            tracing::warn!(key, unpaid, "RLQS usage not counted, the store did not answer: {error}");
        }
    }

    /// Abandons the bucket at `key` for the holders that stopped reporting (the actions go
    /// to `outgoing`); the ids abandoned, each with its stream, for the streams to forget.
    pub(super) fn drop_stale(
        &mut self,
        key: &str,
        now: Timestamp,
        engine: &Engine,
        outgoing: &mut Outgoing,
    ) -> Vec<(StreamId, BucketId)> {
        let Some(bucket) = self.shared.get_mut(key) else { return Vec::new() };
        let (stale, abandoned) = bucket.drop_stale(now);
        for (stream, id) in &abandoned {
            outgoing.push(*stream, abandon(id));
        }
        engine.metrics().rlqs().count_abandons("stale", stale);
        abandoned
    }

    /// Sends what is due for the bucket at `key` besides new shares: refusals renewed, shares
    /// closed as their window ends (the actions go to `outgoing`).
    pub(super) fn renew(&mut self, key: &str, now: Timestamp, engine: &Engine, outgoing: &mut Outgoing) {
        let Some(bucket) = self.shared.get_mut(key) else { return };
        let renewed = bucket.renew(now);
        send(bucket, renewed, engine, outgoing);
    }

    /// Divides the bucket at `key` when its retry time has come (on a tick).
    pub(super) async fn divide_when_due(
        &mut self,
        key: &str,
        now: Timestamp,
        engine: &Engine,
        outgoing: &mut Outgoing,
    ) {
        if self.shared.get(key).is_some_and(|bucket| bucket.round_due(now)) {
            self.divide(key, now, engine, outgoing).await;
        }
    }

    /// Divides the bucket at `key` among the holders that need tokens, paying `engine` for
    /// each part first (the actions go to `outgoing`).
    pub(super) async fn divide(&mut self, key: &str, now: Timestamp, engine: &Engine, outgoing: &mut Outgoing) {
        let Some(bucket) = self.shared.get_mut(key) else { return };
        let Ok(state_key) = Key::new(key.as_bytes()) else { return };
        let (assigned, error) = bucket.divide(engine, state_key, now).await;
        if let Some(error) = error {
            tracing::warn!(key, "RLQS shares not divided, the store did not answer: {error}");
        }
        let refused = send(bucket, assigned, engine, outgoing);
        if refused > 0
            && let Some(rounds) = self.exhausted.occurred(Instant::now())
        {
            let policy = bucket.limit().name();
            tracing::warn!(
                key,
                policy,
                refused,
                rounds,
                "RLQS rule exhausted: Envoys that asked for quota are refused (DENY_ALL) until \
                 the limit has some again (rounds that refused since the last such line: {rounds})"
            );
        }
    }

    /// How many holders of limited buckets were last told a share, a refusal and nothing,
    /// at `now`; and the buckets held by the most holders (ties by key), each with its own
    /// counts.
    pub(super) fn census(&self, now: Timestamp) -> ([usize; 3], BucketCensus) {
        let mut counts = [0; 3];
        // The listed so far, the last of them on top (fewest holders, then greatest key):
        // a bounded heap, so a census allocates for the list, not for every bucket.
        let mut listed = BinaryHeap::with_capacity(LISTED_BUCKETS + 1);
        for (key, bucket) in &self.shared {
            let census = bucket.census(now);
            for (total, count) in counts.iter_mut().zip(census) {
                *total += count;
            }
            // Keys are unique: the policy's name never decides the order.
            listed.push((Reverse(bucket.holders()), key, census, bucket.limit().name()));
            if listed.len() > LISTED_BUCKETS {
                listed.pop();
            }
        }
        let found = listed.into_iter().map(|(Reverse(holders), key, [share, refusal, none], policy)| RlqsBucket {
            key: key.clone(),
            policy: policy.to_owned(),
            holders,
            share,
            refusal,
            none,
        });
        (counts, BucketCensus::of(now.as_micros(), self.shared.len(), found.collect()))
    }
}

/// Queues `assigned` (of `bucket`) on `outgoing`, counting them; how many were refusals.
fn send(
    bucket: &SharedBucket,
    assigned: Vec<(StreamId, Assignment)>,
    engine: &Engine,
    outgoing: &mut Outgoing,
) -> usize {
    let metrics = engine.metrics().rlqs();
    metrics.count_assignments(assigned.len());
    let refused = assigned.iter().filter(|(_, assignment)| matches!(assignment, Assignment::Refusal { .. })).count();
    metrics.count_refusals(refused);
    for (stream, assignment) in assigned {
        metrics.count_tokens(assignment.tokens());
        for action in bucket.assign(stream, &assignment) {
            outgoing.push(stream, action);
        }
    }
    refused
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{Alignment, FixedWindow};
    use std::time::Duration;

    #[test]
    fn the_census_lists_the_buckets_held_by_the_most_streams_ties_by_key() {
        let timing = Timing { report_interval: Duration::from_secs(5) };
        let policy = FixedWindow::new(5, Duration::from_secs(60), Alignment::Aligned, Duration::ZERO).unwrap();
        let limit = Limit::new("per-tenant", policy);
        let windows = Windows::new(Duration::from_secs(60)).unwrap();
        let mut buckets = Buckets::new(timing);
        // 250 buckets held by 1 to 3 streams (bucket i by i % 3 + 1): 83 held by 3.
        for bucket in 0..250_usize {
            for stream in 0..=bucket % 3 {
                let id = BucketId { bucket: [("tenant".to_owned(), bucket.to_string())].into() };
                buckets.join(
                    format!("key-{bucket:03}"),
                    limit.clone(),
                    windows,
                    StreamId::try_from(stream).unwrap(),
                    &id,
                );
            }
        }
        let (_, census) = buckets.census(Timestamp::from_micros(1_000_000));
        assert_eq!(census.total, 250, "every bucket counted, listed or not");
        let listed: Vec<(usize, &str)> =
            census.buckets.iter().map(|bucket| (bucket.holders, bucket.key.as_str())).collect();
        let mut expected: Vec<(usize, String)> =
            (0..250_usize).map(|bucket| (bucket % 3 + 1, format!("key-{bucket:03}"))).collect();
        expected.sort_by(|one, other| other.0.cmp(&one.0).then(one.1.cmp(&other.1)));
        let expected: Vec<(usize, &str)> =
            expected.iter().take(LISTED_BUCKETS).map(|(holders, key)| (*holders, key.as_str())).collect();
        assert_eq!(listed, expected);
        assert!(census.buckets.iter().all(|bucket| bucket.policy == "per-tenant"));
    }
}
