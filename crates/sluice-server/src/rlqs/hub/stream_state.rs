//! A stream as the hub holds it: the connection it came on, the buckets with a rule it
//! holds, each resolved once to what applies to it, and the outbox its responses go to.

use super::Outbox;
use crate::rlqs::assignment::{BlanketRule, abandon, responses};
use crate::rlqs::report::Entries;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use std::collections::HashMap;
use std::net::SocketAddr;
use tokio::sync::mpsc::error::TrySendError;
use tonic::Status;

/// What applies to a bucket a stream holds.
#[derive(Clone, Debug)]
pub(super) enum Tracked {
    /// No rule (or one whose window is under 2 s): no assignment, Envoy keeps its
    /// `no_assignment_behavior`.
    NoRule,
    /// Every request allowed (an unlimited rule, or one in shadow mode), or none (a limit of 0).
    Blanket { id: BucketId, rule: BlanketRule },
    /// A limit, shared at its state key.
    Shared { id: BucketId, key: String },
}

/// One stream: its connection, its domain, its buckets with a rule by their sorted
/// entries, and its outbox. A bucket with no rule is not kept: it is resolved again at
/// each report, so that it holds no room meant for buckets with a rule.
#[derive(Debug)]
pub(super) struct StreamState {
    connection: SocketAddr,
    domain: String,
    outbox: Outbox,
    buckets: HashMap<Entries, Tracked>,
}

impl StreamState {
    /// A stream of `connection` in `domain` holding no bucket yet, answered through `outbox`.
    pub(super) fn new(connection: SocketAddr, domain: String, outbox: Outbox) -> StreamState {
        StreamState { connection, domain, outbox, buckets: HashMap::new() }
    }

    /// The client's address and port: the connection the stream came on.
    pub(super) fn connection(&self) -> SocketAddr {
        self.connection
    }

    /// The domain its first report named.
    pub(super) fn domain(&self) -> &str {
        &self.domain
    }

    /// The buckets it holds.
    pub(super) fn len(&self) -> usize {
        self.buckets.len()
    }

    /// What applies to its bucket of `entries`, when resolved already.
    pub(super) fn tracked(&self, entries: &Entries) -> Option<&Tracked> {
        self.buckets.get(entries)
    }

    /// Records what applies to its bucket of `entries`.
    pub(super) fn record(&mut self, entries: Entries, tracked: Tracked) {
        self.buckets.insert(entries, tracked);
    }

    /// Forgets the bucket `id` (abandoned); whether it held it.
    pub(super) fn forget(&mut self, id: &BucketId) -> bool {
        self.buckets.remove(&entries_of(id)).is_some()
    }

    /// The state keys of the shared buckets it holds.
    pub(super) fn shared_keys(&self) -> impl Iterator<Item = &str> {
        self.buckets.values().filter_map(|tracked| match tracked {
            Tracked::Shared { key, .. } => Some(key.as_str()),
            Tracked::NoRule | Tracked::Blanket { .. } => None,
        })
    }

    /// Forgets the buckets of which `still_applies(domain, entries, tracked)` is false; what
    /// applied to each.
    pub(super) fn forget_unless(
        &mut self,
        mut still_applies: impl FnMut(&str, &Entries, &Tracked) -> bool,
    ) -> Vec<Tracked> {
        let domain = self.domain.as_str();
        let changed: Vec<Entries> = self
            .buckets
            .iter()
            .filter(|(entries, tracked)| !still_applies(domain, entries, tracked))
            .map(|(entries, _)| entries.clone())
            .collect();
        changed.iter().filter_map(|entries| self.buckets.remove(entries)).collect()
    }

    /// Forgets every bucket it holds: the actions abandoning those it was assigned.
    pub(super) fn abandon_all(&mut self) -> Vec<BucketAction> {
        self.buckets
            .drain()
            .filter_map(|(_, tracked)| match tracked {
                Tracked::NoRule => None,
                Tracked::Blanket { id, .. } | Tracked::Shared { id, .. } => Some(abandon(&id)),
            })
            .collect()
    }

    /// Ends the stream with `status` (the stream sends it on to Envoy, if there is room).
    pub(super) fn end_with(&self, status: Status) {
        let _ = self.outbox.try_send(Err(Box::new(status)));
    }

    /// Sends `actions` (in as few responses as they fit); the actions dropped. A stream
    /// whose Envoy reads nothing fills its outbox; what does not fit is dropped: the hub
    /// never waits for one Envoy.
    pub(super) fn deliver(&self, actions: Vec<BucketAction>) -> usize {
        let mut dropped = 0;
        for response in responses(actions) {
            if let Err(TrySendError::Full(response)) = self.outbox.try_send(Ok(response)) {
                dropped += response.map_or(0, |response| response.bucket_action.len());
            }
        }
        dropped
    }
}

/// A bucket id's entries sorted by key.
fn entries_of(id: &BucketId) -> Entries {
    let mut entries: Entries = id.bucket.iter().map(|(key, value)| (key.clone(), value.clone())).collect();
    entries.sort();
    entries
}
