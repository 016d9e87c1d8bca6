//! A stream as the hub holds it: the buckets it holds, each resolved once to what applies
//! to it, and the outbox its responses go to.

use super::Outbox;
use crate::rlqs::assignment::{BlanketRule, responses};
use crate::rlqs::report::Entries;
use crate::rlqs::shares::StreamId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use std::collections::HashMap;
use tokio::sync::mpsc::error::TrySendError;

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

/// One stream: its domain, its buckets by their sorted entries, and its outbox.
#[derive(Debug)]
pub(super) struct StreamState {
    pub(super) domain: String,
    pub(super) outbox: Outbox,
    pub(super) buckets: HashMap<Entries, Tracked>,
}

impl StreamState {
    pub(super) fn new(domain: String, outbox: Outbox) -> StreamState {
        StreamState { domain, outbox, buckets: HashMap::new() }
    }

    /// The buckets it holds.
    pub(super) fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Forgets the bucket `id` (abandoned).
    pub(super) fn forget(&mut self, id: &BucketId) {
        self.buckets.remove(&entries_of(id));
    }
}

/// A bucket id's entries sorted by key.
pub(super) fn entries_of(id: &BucketId) -> Entries {
    let mut entries: Entries = id.bucket.iter().map(|(key, value)| (key.clone(), value.clone())).collect();
    entries.sort();
    entries
}

/// Sends `actions` to `stream` (in as few responses as they fit), if it is still open. A
/// stream whose Envoy reads nothing fills its outbox; what does not fit is dropped (and
/// logged): the hub never waits for one Envoy.
pub(super) fn deliver(streams: &HashMap<StreamId, StreamState>, stream: StreamId, actions: Vec<BucketAction>) {
    let Some(state) = streams.get(&stream) else { return };
    for response in responses(actions) {
        if let Err(TrySendError::Full(response)) = state.outbox.try_send(Ok(response)) {
            let actions = response.map_or(0, |response| response.bucket_action.len());
            tracing::warn!(stream, actions, "an RLQS stream reads no responses: assignments were dropped");
        }
    }
}
