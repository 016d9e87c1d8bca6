//! The hub's streams, by number: what each holds, the room `max_rlqs_buckets` leaves each
//! connection ([`Room`]), and delivering their responses.
//!
//! Every count is kept as buckets come and go, so a report costs a look-up per bucket,
//! however many streams are open: nothing here walks every stream, except ending them all
//! (a reload, shutdown) and choosing which stream gives room back when the service is full.

use super::Outbox;
use super::room::{Admission, Room};
use super::stream_state::{StreamState, Tracked};
use crate::rlqs::assignment::abandon;
use crate::rlqs::report::Entries;
use crate::rlqs::shares::StreamId;
use crate::runtime::rarely::Rarely;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;
use tonic::Status;

/// The open streams.
#[derive(Debug)]
pub(super) struct Streams {
    streams: HashMap<StreamId, StreamState>,
    /// The buckets with a rule they hold, in all and by connection.
    room: Room,
    /// Deliveries that dropped actions (a stream reading nothing), logged rarely.
    dropped: Rarely,
}

/// What the streams say about a bucket a stream reports.
#[derive(Debug)]
pub(super) enum Admit {
    /// The stream holds it already: what applies to it.
    Known(Tracked),
    /// The stream may add it.
    Free,
    /// The stream may add it once this stream, on a connection over its share, is ended.
    Evict(StreamId),
    /// The stream may not add it: the service is full and its connection holds its share.
    Refused(Status),
}

/// The refusal of a bucket while the service holds `held`, and the asking connection its
/// `share`.
fn full(held: usize, share: usize) -> Admit {
    Admit::Refused(Status::resource_exhausted(format!(
        "the service holds {held} RLQS buckets, the most allowed (setting `max_rlqs_buckets`), and this \
         connection holds its share, {share}"
    )))
}

impl Streams {
    /// No stream yet; their buckets with a rule are capped at `max_buckets`.
    pub(super) fn new(max_buckets: usize) -> Streams {
        Streams { streams: HashMap::new(), room: Room::new(max_buckets), dropped: Rarely::default() }
    }

    /// Takes in a stream of `connection` that began in `domain`, answered through `outbox`.
    pub(super) fn open(&mut self, stream: StreamId, connection: SocketAddr, domain: String, outbox: Outbox) {
        self.streams.insert(stream, StreamState::new(connection, domain, outbox));
    }

    /// How many streams are open.
    pub(super) fn len(&self) -> usize {
        self.streams.len()
    }

    /// How many buckets with a rule the streams hold, together.
    pub(super) fn held(&self) -> usize {
        self.room.held()
    }

    /// The domain of `stream`, if it is open.
    pub(super) fn domain(&self, stream: StreamId) -> Option<&str> {
        self.streams.get(&stream).map(StreamState::domain)
    }

    /// Whether `stream` may add its bucket of `entries`, or what applies to it if known.
    pub(super) fn admit(&self, stream: StreamId, entries: &Entries) -> Admit {
        let Some(state) = self.streams.get(&stream) else { return Admit::Known(Tracked::NoRule) };
        if let Some(tracked) = state.tracked(entries) {
            return Admit::Known(tracked.clone());
        }
        match self.room.admits(state.connection()) {
            Admission::Free => Admit::Free,
            Admission::TakeFrom(connection) => self.largest_of(connection).map_or_else(|| full(0, 0), Admit::Evict),
            Admission::Refused { held, share } => full(held, share),
        }
    }

    /// The stream of `connection` holding the most buckets.
    fn largest_of(&self, connection: SocketAddr) -> Option<StreamId> {
        let streams = self.streams.iter().filter(|(_, state)| state.connection() == connection);
        streams.max_by_key(|(_, state)| state.len()).map(|(&stream, _)| stream)
    }

    /// Records what applies to `stream`'s bucket of `entries`; a bucket with no rule is
    /// not kept (it is resolved again at its next report).
    pub(super) fn record(&mut self, stream: StreamId, entries: Entries, tracked: Tracked) {
        let Some(state) = self.streams.get_mut(&stream) else { return };
        if !matches!(tracked, Tracked::NoRule) {
            self.room.take(state.connection());
            state.record(entries, tracked);
        }
    }

    /// Forgets `stream`'s bucket `id` (abandoned).
    pub(super) fn forget(&mut self, stream: StreamId, id: &BucketId) {
        if let Some(state) = self.streams.get_mut(&stream)
            && state.forget(id)
        {
            self.room.give_back(state.connection(), 1);
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
        let state = self.streams.remove(&stream)?;
        self.room.give_back(state.connection(), state.len());
        Some(state)
    }

    /// Forgets every stream (their buckets were abandoned).
    pub(super) fn clear(&mut self) {
        self.streams.clear();
        self.room.clear();
    }

    /// Sends `actions` to `stream` (in as few responses as they fit), if it is still open.
    /// Actions dropped for a stream that reads nothing are logged at most once a minute.
    pub(super) fn deliver(&mut self, stream: StreamId, actions: Vec<BucketAction>) {
        let Some(state) = self.streams.get(&stream) else { return };
        let dropped = state.deliver(actions);
        if dropped > 0
            && let Some(deliveries) = self.dropped.occurred(Instant::now())
        {
            tracing::warn!(
                stream,
                dropped,
                deliveries,
                "RLQS streams read no responses: assignments were dropped (`deliveries` times since the last \
                 such line, logged at most once a minute; `dropped` actions this time)"
            );
        }
    }

    /// Tells each stream to abandon its buckets of which `still_applies(domain, entries,
    /// tracked)` is false, and forgets them; how many were abandoned, and the shared ones
    /// with the stream that held each.
    pub(super) fn abandon_unless(
        &mut self,
        mut still_applies: impl FnMut(&str, &Entries, &Tracked) -> bool,
    ) -> (usize, Vec<(StreamId, String)>) {
        let (mut count, mut released, mut outgoing) = (0, Vec::new(), Vec::new());
        for (&stream, state) in &mut self.streams {
            let changed = state.forget_unless(&mut still_applies);
            self.room.give_back(state.connection(), changed.len());
            let mut actions = Vec::with_capacity(changed.len());
            for tracked in changed {
                match tracked {
                    Tracked::NoRule => continue,
                    Tracked::Blanket { id, .. } => actions.push(abandon(&id)),
                    Tracked::Shared { id, key } => {
                        actions.push(abandon(&id));
                        released.push((stream, key));
                    }
                }
            }
            count += actions.len();
            outgoing.push((stream, actions));
        }
        for (stream, actions) in outgoing {
            self.deliver(stream, actions);
        }
        (count, released)
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
        self.room.clear();
        for (stream, actions) in outgoing {
            self.deliver(stream, actions);
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    /// The connection from loopback's `port`.
    fn connection(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// The entries of `tenant`'s bucket.
    fn entries(tenant: &str) -> Entries {
        vec![("tenant".to_owned(), tenant.to_owned())]
    }

    /// `tenant`'s bucket, limited, shared at the state key `tenant`.
    fn shared(tenant: &str) -> Tracked {
        let id = BucketId { bucket: [("tenant".to_owned(), tenant.to_owned())].into() };
        Tracked::Shared { id, key: tenant.to_owned() }
    }

    /// Streams 1 and 2 on connection 1 (holding 3 and 1 buckets), stream 3 on connection 2.
    fn streams(max_buckets: usize) -> Streams {
        let mut streams = Streams::new(max_buckets);
        for (stream, port) in [(1, 1), (2, 1), (3, 2)] {
            streams.open(stream, connection(port), "quota".to_owned(), mpsc::channel(1).0);
        }
        for (stream, tenant) in [(1, "a"), (1, "b"), (1, "c"), (2, "d")] {
            streams.record(stream, entries(tenant), shared(tenant));
        }
        streams
    }

    #[test]
    fn the_buckets_held_are_counted_as_they_come_and_go_and_unruled_ones_not_kept() {
        let mut streams = streams(100);
        streams.record(3, entries("x"), Tracked::NoRule);
        assert_eq!(streams.held(), 4);
        assert!(matches!(streams.admit(3, &entries("x")), Admit::Free), "not kept: resolved again");
        assert!(matches!(streams.admit(1, &entries("a")), Admit::Known(Tracked::Shared { .. })));
        let Tracked::Shared { id, .. } = shared("a") else { unreachable!() };
        streams.forget(1, &id);
        assert_eq!(streams.held(), 3);
        streams.close(1);
        assert_eq!(streams.held(), 1);
        streams.clear();
        assert_eq!(streams.held(), 0);
    }

    #[test]
    fn a_full_service_ends_the_largest_stream_of_the_connection_over_its_share() {
        let streams = streams(4);
        assert!(matches!(streams.admit(3, &entries("y")), Admit::Evict(1)), "connection 1 holds 4, its share 2");
        let Admit::Refused(status) = streams.admit(2, &entries("y")) else { panic!("connection 1 is at its share") };
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    }
}
