//! What the hub does with streams: takes in their reports (resolving each new bucket),
//! ends them, and abandons every bucket at a reload or shutdown.

use super::Hub;
use super::buckets::SharedBucket;
use super::stream_state::{StreamState, Tracked, deliver};
use crate::envoy::Resolution;
use crate::rlqs::assignment::{BlanketRule, abandon, blanket};
use crate::rlqs::report::BucketReport;
use crate::rlqs::shares::StreamId;
use crate::rlqs::timing::Windows;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use tonic::Status;

impl Hub {
    /// Takes in `stream`'s report: each bucket is resolved the first time it is seen, its
    /// usage counted, and its quota re-divided at once.
    pub(super) async fn report(&mut self, stream: StreamId, buckets: Vec<BucketReport>) {
        let now = self.service.engine.now();
        let count = buckets.len();
        let mut actions = Vec::new();
        let mut changed = Vec::new();
        for bucket in buckets {
            match self.track(stream, &bucket) {
                Err(status) => return self.fail(stream, status),
                Ok(Tracked::NoRule) => {}
                Ok(Tracked::Blanket { id, rule }) => actions.push(blanket(&id, rule, self.timing.ttl())),
                Ok(Tracked::Shared { key, .. }) => {
                    self.charge(&key, stream, now, bucket.usage).await;
                    changed.push(key);
                }
            }
        }
        self.service.engine.metrics().rlqs().count_assignments(actions.len());
        self.outgoing.entry(stream).or_default().extend(actions);
        changed.dedup();
        for key in changed {
            self.divide(&key, now).await;
        }
        // Counted once taken in, so whoever sees the count sees the usage counted.
        self.service.engine.metrics().rlqs().count_reports(count);
    }

    /// What applies to `bucket` of `stream`, resolved when first seen;
    /// `RESOURCE_EXHAUSTED` when the service holds as many buckets as it may.
    fn track(&mut self, stream: StreamId, bucket: &BucketReport) -> Result<Tracked, Status> {
        let held: usize = self.streams.values().map(StreamState::len).sum();
        let Some(state) = self.streams.get(&stream) else { return Ok(Tracked::NoRule) };
        if let Some(tracked) = state.buckets.get(&bucket.entries) {
            return Ok(tracked.clone());
        }
        let domain = state.domain.clone();
        if held >= self.bounds.max_buckets {
            return Err(Status::resource_exhausted(format!(
                "the service holds {held} RLQS buckets, the most allowed (setting `max_rlqs_buckets`)"
            )));
        }
        let tracked = self.resolve(stream, &domain, bucket)?;
        if let Some(state) = self.streams.get_mut(&stream) {
            state.buckets.insert(bucket.entries.clone(), tracked.clone());
        }
        Ok(tracked)
    }

    /// What applies to `bucket` of `stream` in `domain` under the rules in force; a
    /// limited one joins (or starts) the shares of its state key.
    fn resolve(&mut self, stream: StreamId, domain: &str, bucket: &BucketReport) -> Result<Tracked, Status> {
        let shadow_all = self.service.settings.shadow_mode;
        let entries = bucket.entries.iter().map(|(key, value)| (key.as_str(), value.as_str()));
        let Some(rules) = self.loaded.config.envoy() else { return Ok(Tracked::NoRule) };
        let id = bucket.id.clone();
        Ok(match rules.resolve(domain, entries) {
            Resolution::Unlimited(_) => Tracked::Blanket { id, rule: BlanketRule::AllowAll },
            Resolution::Blocked(rule) | Resolution::Limited { rule, .. } if shadow_all || rule.shadow_mode() => {
                Tracked::Blanket { id, rule: BlanketRule::AllowAll }
            }
            Resolution::Blocked(_) => Tracked::Blanket { id, rule: BlanketRule::DenyAll },
            Resolution::Limited { limit, key, .. } => match Windows::new(limit.policy().quota_window()) {
                Some(windows) => {
                    let key = key.as_str().to_owned();
                    let shared = self.shared.entry(key.clone());
                    shared.or_insert_with(|| SharedBucket::new(limit.clone(), windows, self.timing)).hold(stream, &id);
                    Tracked::Shared { id, key }
                }
                None => Tracked::NoRule,
            },
            Resolution::KeyTooLong { len, .. } => {
                return Err(Status::invalid_argument(format!(
                    "bucket id too long: its state key would be {len} bytes, over the {} allowed",
                    sluice_core::Key::MAX_LEN
                )));
            }
            Resolution::NoRule | Resolution::Overridden { .. } => Tracked::NoRule,
        })
    }

    /// Ends `stream` with `status`, forgetting what it held.
    pub(super) fn fail(&mut self, stream: StreamId, status: Status) {
        if let Some(state) = self.streams.get(&stream) {
            let _ = state.outbox.try_send(Err(status));
        }
        self.close(stream);
    }

    /// Forgets `stream` and what it held (its stream ended: nobody to tell).
    pub(super) fn close(&mut self, stream: StreamId) {
        let Some(state) = self.streams.remove(&stream) else { return };
        for tracked in state.buckets.values() {
            if let Tracked::Shared { key, .. } = tracked
                && let Some(shared) = self.shared.get_mut(key)
            {
                shared.release(stream);
            }
        }
    }

    /// Tells every stream to abandon every bucket it was assigned, and forgets them all.
    pub(super) fn abandon_all(&mut self, reason: &'static str) {
        self.outgoing.clear();
        let mut count = 0;
        for (&stream, state) in &mut self.streams {
            let actions: Vec<BucketAction> = state
                .buckets
                .drain()
                .filter_map(|(_, tracked)| match tracked {
                    Tracked::NoRule => None,
                    Tracked::Blanket { id, .. } | Tracked::Shared { id, .. } => Some(abandon(&id)),
                })
                .collect();
            count += actions.len();
            self.outgoing.insert(stream, actions);
        }
        let outgoing = std::mem::take(&mut self.outgoing);
        for (stream, actions) in outgoing {
            deliver(&self.streams, stream, actions);
        }
        self.shared.clear();
        self.service.engine.metrics().rlqs().count_abandons(reason, count);
    }
}
