//! The actions gathered for each stream between two flushes of the hub: one response per
//! stream per event or tick, however many buckets changed.

use crate::rlqs::shares::StreamId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use std::collections::HashMap;

/// Actions for each stream, not sent yet.
#[derive(Debug, Default)]
pub(super) struct Outgoing {
    actions: HashMap<StreamId, Vec<BucketAction>>,
}

impl Outgoing {
    /// Adds `action` to those for `stream`.
    pub(super) fn push(&mut self, stream: StreamId, action: BucketAction) {
        self.actions.entry(stream).or_default().push(action);
    }

    /// Adds `actions` to those for `stream` (none still marks it as having a response).
    pub(super) fn extend(&mut self, stream: StreamId, actions: Vec<BucketAction>) {
        self.actions.entry(stream).or_default().extend(actions);
    }

    /// Forgets every action gathered (they are superseded).
    pub(super) fn clear(&mut self) {
        self.actions.clear();
    }

    /// Takes every stream's actions, to be sent.
    pub(super) fn drain(&mut self) -> impl Iterator<Item = (StreamId, Vec<BucketAction>)> + '_ {
        self.actions.drain()
    }
}
