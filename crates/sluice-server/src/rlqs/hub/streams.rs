//! The hub's streams, by number: what each holds, how many buckets they hold together (the
//! bound `max_rlqs_buckets` caps), and delivering their responses.

use super::Outbox;
use super::stream_state::{StreamState, Tracked};
use crate::rlqs::report::BucketReport;
use crate::rlqs::shares::StreamId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use std::collections::HashMap;
use tonic::Status;

/// The open streams.
#[derive(Debug, Default)]
pub(super) struct Streams {
    streams: HashMap<StreamId, StreamState>,
}

impl Streams {
    /// Takes in a stream that began in `domain`, answered through `outbox`.
    pub(super) fn open(&mut self, stream: StreamId, domain: String, outbox: Outbox) {
        self.streams.insert(stream, StreamState::new(domain, outbox));
    }

    /// How many streams are open.
    pub(super) fn len(&self) -> usize {
        self.streams.len()
    }

    /// How many buckets the streams hold, together.
    pub(super) fn held(&self) -> usize {
        self.streams.values().map(StreamState::len).sum()
    }

    /// What applies to `bucket` of `stream`, resolved by `resolve` (given the stream's
    /// domain) when first seen; `RESOURCE_EXHAUSTED` when the streams hold `max_buckets`.
    pub(super) fn track(
        &mut self,
        stream: StreamId,
        bucket: &BucketReport,
        max_buckets: usize,
        resolve: impl FnOnce(&str) -> Result<Tracked, Status>,
    ) -> Result<Tracked, Status> {
        let held = self.held();
        let Some(state) = self.streams.get_mut(&stream) else { return Ok(Tracked::NoRule) };
        if let Some(tracked) = state.tracked(&bucket.entries) {
            return Ok(tracked.clone());
        }
        if held >= max_buckets {
            return Err(Status::resource_exhausted(format!(
                "the service holds {held} RLQS buckets, the most allowed (setting `max_rlqs_buckets`)"
            )));
        }
        let tracked = resolve(state.domain())?;
        state.record(bucket.entries.clone(), tracked.clone());
        Ok(tracked)
    }

    /// Forgets `stream`'s bucket `id` (abandoned).
    pub(super) fn forget(&mut self, stream: StreamId, id: &BucketId) {
        if let Some(state) = self.streams.get_mut(&stream) {
            state.forget(id);
        }
    }

    /// Ends `stream` with `status`, if it is open (it stays open until closed).
    pub(super) fn end_with(&self, stream: StreamId, status: Status) {
        if let Some(state) = self.streams.get(&stream) {
            state.end_with(status);
        }
    }

    /// Forgets `stream`: what it held.
    pub(super) fn close(&mut self, stream: StreamId) -> Option<StreamState> {
        self.streams.remove(&stream)
    }

    /// Forgets every stream (their buckets were abandoned).
    pub(super) fn clear(&mut self) {
        self.streams.clear();
    }

    /// Sends `actions` to `stream` (in as few responses as they fit), if it is still open.
    pub(super) fn deliver(&self, stream: StreamId, actions: Vec<BucketAction>) {
        if let Some(state) = self.streams.get(&stream) {
            state.deliver(stream, actions);
        }
    }

    /// Tells every stream to abandon every bucket it was assigned, and forgets their
    /// buckets; how many were abandoned.
    pub(super) fn abandon_all(&mut self) -> usize {
        let mut count = 0;
        let mut outgoing = Vec::with_capacity(self.streams.len());
        for (&stream, state) in &mut self.streams {
            let actions = state.abandon_all();
            count += actions.len();
            outgoing.push((stream, actions));
        }
        for (stream, actions) in outgoing {
            self.deliver(stream, actions);
        }
        count
    }
}
