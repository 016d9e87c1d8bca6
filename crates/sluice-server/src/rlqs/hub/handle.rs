//! How the gRPC streams reach the hub: the events they pass on, and the handle they pass
//! them through.

use crate::rlqs::report::{BucketReport, ReportBounds};
use crate::rlqs::shares::StreamId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, oneshot};
use tonic::Status;

/// Where a stream's responses go: the stream sends them on to Envoy. The status is boxed
/// so that a slot of the queue is 32 bytes rather than 200: tokio allocates a queue's
/// slots 32 at a time, from the start, so this is most of what an idle stream's queue costs.
pub(crate) type Outbox = mpsc::Sender<Result<RateLimitQuotaResponse, Box<Status>>>;

/// What a stream tells the hub.
#[derive(Debug)]
pub(crate) enum Event {
    /// A stream began on `connection` (the client's address and port), in `domain` (its
    /// first report's).
    Open { stream: StreamId, connection: SocketAddr, domain: String, outbox: Outbox },
    /// A stream's report, checked.
    Report { stream: StreamId, buckets: Vec<BucketReport> },
    /// A stream sent something invalid: it ends with `status`.
    Fail { stream: StreamId, status: Status },
    /// A stream ended.
    Close { stream: StreamId },
    /// Answered once the hub has taken in the first events sent before it ([`HubHandle::open`]).
    Taken { taken: oneshot::Sender<()> },
}

/// How streams reach the hub: a new stream's opening and first report go by a lane of
/// their own, taken by a task of the hub's on the intake runtime ([`super::HubTask`]), so
/// that a new Envoy is answered at once even while the reports of thousands of others
/// wait for the hub.
#[derive(Clone, Debug)]
pub(crate) struct HubHandle {
    events: mpsc::Sender<Event>,
    first: mpsc::Sender<Event>,
    next_stream: Arc<AtomicU64>,
    /// The bounds on reports, as the streams check them.
    pub(crate) bounds: ReportBounds,
}

impl HubHandle {
    /// A handle passing events on to `events` (a new stream's first ones to `first`), for
    /// streams that check reports by `bounds`.
    pub(super) fn new(events: mpsc::Sender<Event>, first: mpsc::Sender<Event>, bounds: ReportBounds) -> HubHandle {
        HubHandle { events, first, next_stream: Arc::new(AtomicU64::new(1)), bounds }
    }

    /// A number for a new stream.
    pub(crate) fn new_stream(&self) -> StreamId {
        self.next_stream.fetch_add(1, Ordering::Relaxed)
    }

    /// Passes `event` on; false when the hub has stopped (shutdown).
    pub(crate) async fn send(&self, event: Event) -> bool {
        self.events.send(event).await.is_ok()
    }

    /// Passes on a new stream's opening and first report, ahead of other streams' events,
    /// and waits until the hub has taken them in: the two lanes are taken by two tasks, so
    /// what the stream sends next ([`HubHandle::send`]) must not be sent before, or it could
    /// overtake them (a second report, a new bucket in it, dropped for an unknown stream).
    /// False when the hub has stopped.
    pub(crate) async fn open(&self, opening: Event, first_report: Event) -> bool {
        let (taken, taken_in) = oneshot::channel();
        for event in [opening, first_report, Event::Taken { taken }] {
            if self.first.send(event).await.is_err() {
                return false;
            }
        }
        taken_in.await.is_ok()
    }
}
